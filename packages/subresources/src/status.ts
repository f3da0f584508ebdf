// metav1.Status bodies for failed requests, worded as k8s.io/apimachinery's errors package words them
// (upstream's virt-api answers with those, and client-go / virtctl print `message`).

export interface StatusBody {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Failure';
  message: string;
  reason: string;
  details?: { name?: string; group?: string; kind?: string; causes?: { message: string }[] };
  code: number;
}

/** A request that ends with this Status (thrown inside handlers, written by the server). */
export class StatusError extends Error {
  constructor(readonly body: StatusBody) {
    super(body.message);
    this.name = 'StatusError';
  }
  get code(): number {
    return this.body.code;
  }
}

const GROUP = 'kubevirt.io';

function status(code: number, reason: string, message: string, details?: StatusBody['details']): StatusError {
  return new StatusError({
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason,
    ...(details ? { details } : {}),
    code,
  });
}

/** kind is upstream's resource name as written there: "virtualmachine" or "virtualmachineinstance" */
export const conflict = (kind: string, name: string, msg: string): StatusError =>
  status(409, 'Conflict', `Operation cannot be fulfilled on ${kind}.${GROUP} "${name}": ${msg}`, {
    name,
    group: GROUP,
    kind,
  });

export const notFound = (kind: string, name: string): StatusError =>
  status(404, 'NotFound', `${kind}.${GROUP} "${name}" not found`, { name, group: GROUP, kind });

export const forbidden = (kind: string, name: string, msg: string): StatusError =>
  status(403, 'Forbidden', `${kind}.${GROUP} "${name}" is forbidden: ${msg}`, { name, group: GROUP, kind });

export const badRequest = (msg: string): StatusError => status(400, 'BadRequest', msg);

export const internalError = (msg: string): StatusError =>
  status(500, 'InternalError', `Internal error occurred: ${msg}`, { causes: [{ message: msg }] });

export const serviceUnavailable = (msg: string): StatusError => status(503, 'ServiceUnavailable', msg);

export const methodNotAllowed = (method: string, path: string): StatusError =>
  status(405, 'MethodNotAllowed', `${method} is not supported on ${path}`);

export const notImplemented = (msg: string): StatusError => status(501, 'NotImplemented', msg);

export const pathNotFound = (path: string): StatusError =>
  status(404, 'NotFound', `the server could not find the requested resource (${path})`);
