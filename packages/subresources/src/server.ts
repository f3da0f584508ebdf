// The aggregated API subresources.kubevirt.io/v1, served over TLS behind kube-apiserver's aggregation
// layer. Requests are authenticated as an aggregated API server must (the front proxy's client
// certificate, verified against the requestheader CA and allowed names; the user from the X-Remote-*
// headers) and authorized by a SubjectAccessReview on the subresource, as upstream's virt-api does.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';
import type { AddressInfo } from 'node:net';
import type { ClusterAccess } from '@kubevirt-ts/controller-runtime';
import { KubeClient, closeServer } from '@kubevirt-ts/controller-runtime';
import type { Logger } from '@kubevirt-ts/log';
import {
  StatusError,
  badRequest,
  internalError,
  methodNotAllowed,
  notImplemented,
  pathNotFound,
} from './status.js';
import {
  STREAM_KINDS,
  Subresources,
  type NodeConnector,
  type StreamKind,
  type VmiVerb,
  type VmVerb,
} from './verbs.js';

export const GROUP = 'subresources.kubevirt.io';
export const VERSION = 'v1';
export const GROUP_VERSION = `${GROUP}/${VERSION}`;
/** the APIService deploy/ registers for this API, and the Service in front of virt-controller's replicas */
export const API_SERVICE = `${VERSION}.${GROUP}`;
export const SERVICE = 'virt-api';
const PREFIX = `/apis/${GROUP_VERSION}`;

/** The aggregation layer's request-header authentication, as kube-system/extension-apiserver-authentication publishes it. */
export interface RequestHeaderConfig {
  /** PEM of the CA that signs the front proxy's client certificate */
  clientCA: string;
  /** common names the front proxy's certificate may carry; empty: any name signed by clientCA */
  allowedNames: string[];
  usernameHeaders: string[];
  groupHeaders: string[];
  extraHeaderPrefixes: string[];
}

const parseList = (s: string | undefined): string[] => {
  if (!s) return [];
  const v = JSON.parse(s) as unknown;
  return Array.isArray(v) ? v.map(String) : [];
};

/** Reads the requestheader settings the API server publishes in kube-system/extension-apiserver-authentication. */
export async function loadRequestHeaderConfig(client: KubeClient): Promise<RequestHeaderConfig> {
  const cm = await client.request<{ data?: Record<string, string> }>(
    'GET',
    '/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication',
  );
  const d = cm.data ?? {};
  const clientCA = d['requestheader-client-ca-file'];
  if (!clientCA)
    throw new Error(
      'kube-system/extension-apiserver-authentication has no requestheader-client-ca-file: ' +
        'kube-apiserver runs without --requestheader-client-ca-file, so it cannot front an aggregated API',
    );
  return {
    clientCA,
    allowedNames: parseList(d['requestheader-allowed-names']),
    usernameHeaders: parseList(d['requestheader-username-headers']),
    groupHeaders: parseList(d['requestheader-group-headers']),
    extraHeaderPrefixes: parseList(d['requestheader-extra-headers-prefix']),
  };
}

export interface SubresourceServerOptions {
  kubeConfig: ClusterAccess;
  /** serving certificate and key (PEM); the certificate names `<service>.<namespace>.svc` */
  cert: string | Buffer;
  key: string | Buffer;
  /** default: read from kube-system/extension-apiserver-authentication */
  requestHeader?: RequestHeaderConfig;
  host?: string;
  /** 0 (default): a free port */
  port?: number;
  log?: Logger;
  /** how VMI verbs reach the VMI's virt-handler; default: they answer 503 (not implemented) */
  node?: NodeConnector;
  /** reported by GET .../version */
  gitVersion?: string;
}

export interface SubresourceServer {
  port: number;
  server: Server;
  /** replaces the serving certificate (a rotated Secret) */
  setCertificate(cert: string | Buffer, key: string | Buffer): void;
  /** stops serving: requests in flight get `graceMs` to finish */
  close(graceMs?: number): Promise<void>;
}

// Paths anyone may read, as upstream's virt-api: discovery, version, health.
const NO_AUTH = new Set(['/', '/apis', '/healthz', PREFIX, `${PREFIX}/version`, `${PREFIX}/healthz`]);

const VM_VERBS: Record<VmVerb, 'PUT'> = { start: 'PUT', stop: 'PUT', restart: 'PUT', migrate: 'PUT' };
const VMI_VERBS: Record<VmiVerb, 'PUT' | 'GET'> = {
  pause: 'PUT',
  unpause: 'PUT',
  softreboot: 'PUT',
  freeze: 'PUT',
  unfreeze: 'PUT',
  guestosinfo: 'GET',
  userlist: 'GET',
  filesystemlist: 'GET',
};

/** The discovery document (GET /apis/subresources.kubevirt.io/v1). */
export function apiResourceList(): Record<string, unknown> {
  const res = (plural: string, verbs: Record<string, string>) =>
    Object.entries(verbs).map(([sub, method]) => ({
      name: `${plural}/${sub}`,
      singularName: '',
      namespaced: true,
      kind: '',
      verbs: [method === 'GET' ? 'get' : 'update'],
    }));
  const streams = Object.fromEntries(STREAM_KINDS.map((k) => [k, 'GET']));
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: GROUP_VERSION,
    resources: [
      ...res('virtualmachines', VM_VERBS),
      ...res('virtualmachineinstances', { ...VMI_VERBS, ...streams }),
    ],
  };
}

const MAX_BODY = 1 << 20;

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(new Error(`request body larger than ${MAX_BODY} bytes`));
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function sendJson(res: ServerResponse, code: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}

interface User {
  user: string;
  groups: string[];
  extra: Record<string, string[]>;
}

/** Starts the server; resolves once it listens. */
export async function startSubresourceServer(opts: SubresourceServerOptions): Promise<SubresourceServer> {
  const client = new KubeClient(opts.kubeConfig);
  const rh = opts.requestHeader ?? (await loadRequestHeaderConfig(client));
  const verbs = new Subresources(client, opts.node);
  const log = opts.log;

  const server = createServer({
    cert: opts.cert,
    key: opts.key,
    ca: rh.clientCA,
    requestCert: true,
    // unauthenticated clients may still read discovery/version; every other path checks `authorized`
    rejectUnauthorized: false,
    minVersion: 'TLSv1.2',
  });

  /** the front proxy's identity, or a reason why the request is not authenticated */
  const authenticate = (req: IncomingMessage): User | string => {
    const sock = req.socket as TLSSocket;
    if (!sock.authorized) return 'request is not authenticated';
    const cn = sock.getPeerCertificate()?.subject?.CN;
    if (rh.allowedNames.length > 0 && !rh.allowedNames.includes(String(cn)))
      return `client certificate CN ${JSON.stringify(cn)} is not one of the allowed front-proxy names`;
    const header = (names: string[]): string[] | undefined => {
      for (const n of names) {
        const v = req.headersDistinct[n.toLowerCase()];
        if (v && v.length) return v;
      }
      return undefined;
    };
    const user = header(rh.usernameHeaders)?.[0];
    if (!user) return 'a valid user header is required for authorization';
    const groups = header(rh.groupHeaders);
    if (!groups) return 'a valid group header is required for authorization';
    const extra: Record<string, string[]> = {};
    for (const prefix of rh.extraHeaderPrefixes) {
      const p = prefix.toLowerCase();
      for (const [k, v] of Object.entries(req.headersDistinct)) {
        if (k.startsWith(p) && v) extra[decodeURIComponent(k.slice(p.length))] = v;
      }
    }
    return { user, groups, extra };
  };

  const authorize = async (
    who: User,
    attrs: { namespace: string; verb: string; resource: string; subresource: string; name: string },
  ): Promise<string | undefined> => {
    const review = await client.request<{ status?: { allowed?: boolean; reason?: string } }>(
      'POST',
      '/apis/authorization.k8s.io/v1/subjectaccessreviews',
      {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          user: who.user,
          groups: who.groups,
          extra: who.extra,
          resourceAttributes: { ...attrs, group: GROUP, version: VERSION },
        },
      },
    );
    if (review.status?.allowed) return undefined;
    return (
      review.status?.reason ||
      `user "${who.user}" cannot ${attrs.verb} resource "${attrs.resource}/${attrs.subresource}" in API group "${GROUP}" in the namespace "${attrs.namespace}"`
    );
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const method = req.method ?? 'GET';
    const path = new URL(req.url ?? '/', 'https://x').pathname.replace(/\/+$/, '') || '/';
    if (NO_AUTH.has(path)) {
      if (method !== 'GET' && method !== 'HEAD') throw methodNotAllowed(method, path);
      if (path === PREFIX) return sendJson(res, 200, apiResourceList());
      if (path === `${PREFIX}/version`) return sendJson(res, 200, versionInfo(opts.gitVersion));
      if (path.endsWith('healthz')) {
        res.writeHead(200, { 'Content-Type': 'text/plain' }).end('ok');
        return;
      }
      return sendJson(res, 200, {
        kind: 'APIGroupList',
        apiVersion: 'v1',
        groups: [
          {
            name: GROUP,
            versions: [{ groupVersion: GROUP_VERSION, version: VERSION }],
            preferredVersion: { groupVersion: GROUP_VERSION, version: VERSION },
          },
        ],
      });
    }
    // authentication, then a SubjectAccessReview: like upstream, a refusal is 401 with the reason as text
    const who = authenticate(req);
    if (typeof who === 'string') {
      res.writeHead(401, { 'Content-Type': 'text/plain' }).end(who);
      return;
    }
    const parts = path.split('/');
    // ['', 'apis', group, version, 'namespaces', ns, resource, name, subresource]
    if (parts.length !== 9 || `${parts[2]}/${parts[3]}` !== GROUP_VERSION || parts[4] !== 'namespaces') {
      res.writeHead(401, { 'Content-Type': 'text/plain' }).end(`unknown api endpoint: ${path}`);
      return;
    }
    const [namespace, resource, name, subresource] = parts.slice(5).map(decodeURIComponent) as [
      string,
      string,
      string,
      string,
    ];
    if (resource !== 'virtualmachines' && resource !== 'virtualmachineinstances') {
      res.writeHead(401, { 'Content-Type': 'text/plain' }).end(`unknown resource type ${resource}`);
      return;
    }
    const rbacVerb = {
      GET: 'get',
      HEAD: 'get',
      PUT: 'update',
      POST: 'create',
      PATCH: 'patch',
      DELETE: 'delete',
    }[method];
    if (!rbacVerb) {
      res.writeHead(401, { 'Content-Type': 'text/plain' }).end(`unknown http verb in request: ${method}`);
      return;
    }
    const denied = await authorize(who, { namespace, verb: rbacVerb, resource, subresource, name });
    if (denied !== undefined) {
      log?.info('subresource request denied', { user: who.user, namespace, name, resource, subresource });
      res.writeHead(401, { 'Content-Type': 'text/plain' }).end(denied);
      return;
    }
    if (resource === 'virtualmachineinstances' && STREAM_KINDS.includes(subresource as StreamKind))
      throw badRequest(`${subresource} is a websocket stream: the request must ask for Upgrade: websocket`);
    const table: Record<string, string> = resource === 'virtualmachines' ? VM_VERBS : VMI_VERBS;
    const expected = table[subresource];
    if (!expected) {
      // upstream's volume hotplug verbs: known, refused with the reason (not a 404 that reads like a typo)
      if (subresource === 'addvolume' || subresource === 'removevolume')
        throw notImplemented(
          `${subresource}: volume hotplug is not implemented by kubevirt-ts; add the volume to the VM's template and restart the VM`,
        );
      throw pathNotFound(path);
    }
    if (expected !== method) throw methodNotAllowed(method, path);
    const body = method === 'PUT' ? await readBody(req) : '';
    log?.info('subresource request', { user: who.user, namespace, name, kind: resource, subresource });
    if (resource === 'virtualmachineinstances' && method === 'GET') {
      // the guest agent reads (guestosinfo, userlist, filesystemlist): as upstream's httpGetRequestHandler, every
      // failure (a missing VMI, validation, virt-handler) is a 500 whose body is the error's text, not a Status
      // (upstream's virtctl shows it as `an error on the server ("...") has prevented the request from succeeding`)
      let got: { code: number; body?: unknown };
      try {
        got = await verbs.vmi(subresource as VmiVerb, namespace, name, body);
      } catch (e) {
        const text = e instanceof Error ? e.message : String(e);
        if (!(e instanceof StatusError)) log?.error('subresource request failed', { reason: text });
        res.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' }).end(text);
        return;
      }
      return sendJson(res, got.code, got.body);
    }
    const out =
      resource === 'virtualmachines'
        ? await verbs.vm(subresource as VmVerb, namespace, name, body)
        : await verbs.vmi(subresource as VmiVerb, namespace, name, body);
    if (out.body !== undefined) sendJson(res, out.code, out.body);
    else res.writeHead(out.code).end();
  };

  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    handle(req, res).catch((e: unknown) => {
      const se = e instanceof StatusError ? e : internalError(e instanceof Error ? e.message : String(e));
      if (!(e instanceof StatusError)) log?.error('subresource request failed', { reason: se.message });
      if (!res.headersSent) sendJson(res, se.code, se.body);
      else res.end();
    });
  });

  /** an answer on a socket that asked for an upgrade: nothing was upgraded */
  const refuse = (socket: Duplex, code: number, body: string, json: boolean) => {
    if (socket.destroyed) return;
    socket.end(
      `HTTP/1.1 ${code} ${STATUS_CODES[code] ?? ''}\r\nContent-Type: ${json ? 'application/json' : 'text/plain'}\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  };

  /**
   * console / vnc (websocket): the same authentication and SubjectAccessReview (`get` on
   * virtualmachineinstances/console or /vnc) as every request, the VMI validated as upstream, then the
   * handshake goes on to the VMI's virt-handler, which completes it; from then on the bytes are relayed
   * as they are (frames, pings and close included), with backpressure both ways.
   */
  const upgrade = async (req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> => {
    const url = new URL(req.url ?? '/', 'https://x');
    const path = url.pathname.replace(/\/+$/, '');
    const who = authenticate(req);
    if (typeof who === 'string') return refuse(socket, 401, who, false);
    const parts = path.split('/');
    const kind = parts[8] as StreamKind;
    if (
      parts.length !== 9 ||
      `${parts[2]}/${parts[3]}` !== GROUP_VERSION ||
      parts[4] !== 'namespaces' ||
      parts[6] !== 'virtualmachineinstances' ||
      !STREAM_KINDS.includes(kind)
    ) {
      const se = pathNotFound(path);
      return refuse(socket, se.code, JSON.stringify(se.body), true);
    }
    if (req.method !== 'GET') {
      const se = methodNotAllowed(req.method ?? '', path);
      return refuse(socket, se.code, JSON.stringify(se.body), true);
    }
    const [namespace, name] = [decodeURIComponent(parts[5]!), decodeURIComponent(parts[7]!)];
    const denied = await authorize(who, {
      namespace,
      verb: 'get',
      resource: 'virtualmachineinstances',
      subresource: kind,
      name,
    });
    if (denied !== undefined) {
      log?.info('subresource request denied', { user: who.user, namespace, name, subresource: kind });
      return refuse(socket, 401, denied, false);
    }
    const headers: Record<string, string> = {};
    for (const h of [
      'sec-websocket-key',
      'sec-websocket-version',
      'sec-websocket-protocol',
      'sec-websocket-extensions',
    ]) {
      const v = req.headers[h];
      if (typeof v === 'string') headers[h] = v;
    }
    const preserve = url.searchParams.get('preserveSession');
    const upstream = await verbs.stream(kind, namespace, name, {
      headers,
      search: preserve === null ? '' : `?preserveSession=${encodeURIComponent(preserve)}`,
    });
    if (socket.destroyed) return void upstream.socket.destroy();
    log?.info(`${kind} stream opened`, { user: who.user, namespace, name, kind: 'VirtualMachineInstance' });
    socket.write(upstream.responseHead);
    if (upstream.head.length) socket.write(upstream.head);
    if (head.length) upstream.socket.write(head);
    const close = () => {
      socket.destroy();
      upstream.socket.destroy();
    };
    socket.on('error', close);
    socket.on('close', close);
    upstream.socket.on('error', close);
    upstream.socket.on('close', () => {
      log?.info(`${kind} stream closed`, { namespace, name, kind: 'VirtualMachineInstance' });
      close();
    });
    upstream.socket.pipe(socket);
    socket.pipe(upstream.socket);
  };

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    upgrade(req, socket, head).catch((e: unknown) => {
      const se = e instanceof StatusError ? e : internalError(e instanceof Error ? e.message : String(e));
      if (!(e instanceof StatusError)) log?.error('stream request failed', { reason: se.message });
      refuse(socket, se.code, JSON.stringify(se.body), true);
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, opts.host ?? '127.0.0.1', () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    server,
    setCertificate(cert, key) {
      server.setSecureContext({ cert, key, ca: rh.clientCA, minVersion: 'TLSv1.2' });
    },
    async close(graceMs = 0) {
      await closeServer(server, graceMs);
      client.close();
    },
  };
}

/** this package's version, as `v0.1.0` */
const PACKAGE_VERSION = `v${(JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version}`;

/** GET .../version: the fields of upstream's version.Info (k8s.io/apimachinery/pkg/version). */
export function versionInfo(gitVersion = PACKAGE_VERSION): Record<string, string> {
  return {
    gitVersion,
    gitCommit: process.env['KVTS_GIT_COMMIT'] ?? '',
    gitTreeState: '',
    buildDate: '',
    goVersion: '',
    compiler: `node ${process.version}`,
    platform: `${process.platform}/${process.arch === 'x64' ? 'amd64' : process.arch}`,
  };
}
