// A small JSON REST client over a kubeconfig (`LiteKubeConfig`, or @kubernetes/client-node's KubeConfig). Objects travel as the wire's
// JSON, unchanged: client-node's typed models rename or drop keys they do not know and turn
// timestamps into Dates, and the informer's watch events are plain JSON anyway, so reads, writes and
// the cache all see one representation. Writes are counted (benchmarks: API writes per VMI).
import { Agent as HttpsAgent, request as httpsRequest, type RequestOptions } from 'node:https';
import { Agent as HttpAgent, request as httpRequest } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ClusterAccess } from './kubeconfig.js';

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string | null;
  deletionTimestamp?: string | null;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: {
    apiVersion: string;
    kind: string;
    name: string;
    uid: string;
    controller?: boolean;
    blockOwnerDeletion?: boolean;
  }[];
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: ObjectMeta;
}

export interface KubeList<T> {
  apiVersion?: string;
  kind?: string;
  metadata?: { resourceVersion?: string; continue?: string };
  items: T[];
}

/** A REST resource: group ('' for core), version, plural, and whether it lives in namespaces. */
export interface Resource {
  group: string;
  version: string;
  plural: string;
  namespaced: boolean;
}

export const PODS: Resource = { group: '', version: 'v1', plural: 'pods', namespaced: true };
/** apps/v1 Deployments and DaemonSets (virt-operator reads the components' rollout) */
export const DEPLOYMENTS: Resource = {
  group: 'apps',
  version: 'v1',
  plural: 'deployments',
  namespaced: true,
};
export const DAEMONSETS: Resource = { group: 'apps', version: 'v1', plural: 'daemonsets', namespaced: true };
/** core/v1 Secrets */
export const SECRETS: Resource = { group: '', version: 'v1', plural: 'secrets', namespaced: true };
/** the admission webhook configurations and APIServices whose caBundle virt-operator publishes */
export const MUTATING_WEBHOOKS: Resource = {
  group: 'admissionregistration.k8s.io',
  version: 'v1',
  plural: 'mutatingwebhookconfigurations',
  namespaced: false,
};
export const VALIDATING_WEBHOOKS: Resource = {
  group: 'admissionregistration.k8s.io',
  version: 'v1',
  plural: 'validatingwebhookconfigurations',
  namespaced: false,
};
export const API_SERVICES: Resource = {
  group: 'apiregistration.k8s.io',
  version: 'v1',
  plural: 'apiservices',
  namespaced: false,
};
export const LEASES: Resource = {
  group: 'coordination.k8s.io',
  version: 'v1',
  plural: 'leases',
  namespaced: true,
};
/** kubevirt.io/v1 VirtualMachines */
export const VMS: Resource = {
  group: 'kubevirt.io',
  version: 'v1',
  plural: 'virtualmachines',
  namespaced: true,
};
/** kubevirt.io/v1 VirtualMachineInstances */
export const VMIS: Resource = {
  group: 'kubevirt.io',
  version: 'v1',
  plural: 'virtualmachineinstances',
  namespaced: true,
};
/** kubevirt.io/v1 VirtualMachineInstanceMigrations */
export const VMIMS: Resource = {
  group: 'kubevirt.io',
  version: 'v1',
  plural: 'virtualmachineinstancemigrations',
  namespaced: true,
};

/** kubevirt.io/v1 KubeVirt: the cluster's configuration (one CR in the install namespace) */
export const KUBEVIRTS: Resource = {
  group: 'kubevirt.io',
  version: 'v1',
  plural: 'kubevirts',
  namespaced: true,
};

/** `/api/v1/namespaces/ns/pods/name/status` and friends (namespace omitted: across all namespaces). */
export function resourcePath(r: Resource, namespace?: string, name?: string, subresource?: string): string {
  let p = r.group === '' ? `/api/${r.version}` : `/apis/${r.group}/${r.version}`;
  if (r.namespaced && namespace) p += `/namespaces/${encodeURIComponent(namespace)}`;
  p += `/${r.plural}`;
  if (name) p += `/${encodeURIComponent(name)}`;
  if (subresource) p += `/${subresource}`;
  return p;
}

/** The API server's answer to a failed request; `status` is the HTTP status. */
export class KubeApiError extends Error {
  readonly reason: string;
  /** the answer's Retry-After header, in seconds, when it had one */
  retryAfterSeconds?: number;
  constructor(
    readonly status: number,
    readonly body: string,
    readonly method: string,
    readonly path: string,
  ) {
    let message = body;
    let reason = '';
    try {
      const s = JSON.parse(body) as { message?: string; reason?: string };
      message = s.message ?? body;
      reason = s.reason ?? '';
    } catch {
      /* not a Status */
    }
    super(`${method} ${path}: ${status} ${message}`);
    this.name = 'KubeApiError';
    this.reason = reason;
  }
}

export const isNotFound = (e: unknown): boolean => e instanceof KubeApiError && e.status === 404;
export const isConflict = (e: unknown): boolean => e instanceof KubeApiError && e.status === 409;
export const isAlreadyExists = (e: unknown): boolean =>
  e instanceof KubeApiError && e.status === 409 && e.reason === 'AlreadyExists';

export type PatchType = 'merge' | 'json' | 'strategic';
const PATCH_CONTENT_TYPE: Record<PatchType, string> = {
  merge: 'application/merge-patch+json',
  json: 'application/json-patch+json',
  strategic: 'application/strategic-merge-patch+json',
};

/** One event of a watch: ADDED, MODIFIED, DELETED, BOOKMARK, or ERROR (the object is then a Status). */
export interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
  object: KubeObject & { code?: number; message?: string; reason?: string };
}

export interface ListOptions {
  labelSelector?: string;
  fieldSelector?: string;
  /** at most this many items; the list's `metadata.continue` then names the next page */
  limit?: number;
  continue?: string;
  /**
   * `"0"`: any version the server has, served from the API server's watch cache (no read from etcd; the server may
   * then ignore `limit` and answer in one page), as client-go's reflector lists; not with `continue`
   */
  resourceVersion?: string;
}

/**
 * Splits a byte stream into lines, each decoded from its own bytes (UTF-8 split across chunks is fine). Not with
 * string slicing: V8's JSON.parse of a string that is a slice of a larger one (or was built by `+=`) can return
 * strings that keep the whole source text alive, so every cached object would retain its watch chunk or list page
 * (measured: 9 MiB for 1000 objects).
 */
export function lineSplitter(onLine: (line: string) => void): (chunk: Buffer) => void {
  let parts: Buffer[] = [];
  return (d) => {
    let start = 0;
    for (let i = d.indexOf(0x0a); i >= 0; i = d.indexOf(0x0a, start)) {
      const piece = d.subarray(start, i);
      const line = (parts.length ? Buffer.concat([...parts, piece]) : piece).toString('utf8');
      parts = [];
      start = i + 1;
      if (line.trim()) onLine(line);
    }
    if (start < d.length) parts.push(d.subarray(start));
  };
}

export class KubeClient {
  /** writes sent (create, update, patch, delete), for benchmarks and tests */
  writes = 0;
  readonly writesByVerb: Record<string, number> = {};
  private agent: HttpsAgent | HttpAgent | undefined;

  constructor(readonly kc: ClusterAccess) {}

  private async prepare(method: string, path: string): Promise<{ url: URL; opts: RequestOptions }> {
    const cluster = this.kc.getCurrentCluster();
    if (!cluster) throw new Error('kubeconfig has no current cluster');
    const url = new URL(path, cluster.server);
    const opts: RequestOptions = { method, headers: { Accept: 'application/json' } };
    await this.kc.applyToHTTPSOptions(opts);
    const secure = url.protocol === 'https:';
    this.agent ??= secure
      ? new HttpsAgent({
          keepAlive: true,
          ca: opts.ca,
          cert: opts.cert,
          key: opts.key,
          rejectUnauthorized: opts.rejectUnauthorized,
          servername: opts.servername,
        })
      : new HttpAgent({ keepAlive: true });
    opts.agent = this.agent;
    return { url, opts };
  }

  /**
   * One API call. Like client-go's REST client, a 429 or 503 answer with a Retry-After header (e.g. "storage is
   * (re)initializing" from a just-started API server, or its max-in-flight limit) is sent again after that many
   * seconds (at most 10 s each), up to 10 times; every other error is the caller's.
   */
  async request<T>(
    method: string,
    path: string,
    body?: unknown,
    contentType = 'application/json',
  ): Promise<T> {
    if (method !== 'GET') {
      this.writes++;
      this.writesByVerb[method] = (this.writesByVerb[method] ?? 0) + 1;
    }
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.requestOnce<T>(method, path, body, contentType);
      } catch (e) {
        const wait =
          e instanceof KubeApiError && (e.status === 429 || e.status === 503)
            ? e.retryAfterSeconds
            : undefined;
        if (wait === undefined || attempt >= 10) throw e;
        await sleep(Math.min(Math.max(wait, 0.1), 10) * 1000);
      }
    }
  }

  private async requestOnce<T>(method: string, path: string, body: unknown, contentType: string): Promise<T> {
    const { url, opts } = await this.prepare(method, path);
    const secure = url.protocol === 'https:';
    const payload = body === undefined ? undefined : JSON.stringify(body);
    if (payload !== undefined)
      opts.headers = {
        ...opts.headers,
        'Content-Type': contentType,
        'Content-Length': Buffer.byteLength(payload),
      };
    const send = secure ? httpsRequest : httpRequest;
    return new Promise<T>((resolve, reject) => {
      // The finished response stays referenced from its keep-alive socket (with our listeners) until the socket's
      // next request. Those listeners reach the promise only through `pending`, dropped once settled: else the
      // promise and its value (a whole list: measured, 1000 full Pods) would stay alive with the socket.
      let pending: { resolve: (v: T) => void; reject: (e: Error) => void } | undefined = { resolve, reject };
      const settle = (v: { value: T } | { error: Error }) => {
        const p = pending;
        pending = undefined;
        if ('error' in v) p?.reject(v.error);
        else p?.resolve(v.value);
      };
      const fail = (error: Error) => settle({ error });
      const req = send(url, opts, (res) => {
        // bytes, decoded once (see lineSplitter): objects parsed from a string built by `+=` keep that whole text
        // alive; emptied at the end, for the same reason as `pending`
        let chunks: Buffer[] = [];
        res.on('data', (d: Buffer) => chunks.push(d));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          chunks = [];
          const status = res.statusCode ?? 0;
          if (status < 200 || status > 299) {
            const err = new KubeApiError(status, text, method, path);
            const after = Number(res.headers['retry-after']);
            if (res.headers['retry-after'] !== undefined && Number.isFinite(after))
              err.retryAfterSeconds = after;
            return fail(err);
          }
          try {
            settle({ value: (text ? JSON.parse(text) : undefined) as T });
          } catch (e) {
            fail(e as Error);
          }
        });
        res.on('error', fail);
      });
      req.on('error', fail);
      if (payload !== undefined) req.write(payload);
      req.end();
    });
  }

  /**
   * A watch (`?watch=1`, from `resourceVersion`, with bookmarks): `onEvent` gets each event as it arrives;
   * resolves when the server ends the stream, rejects on an error or a non-2xx answer. `signal` ends it.
   */
  async watch(
    r: Resource,
    namespace: string | undefined,
    opts: ListOptions & { resourceVersion?: string; timeoutSeconds?: number },
    onEvent: (e: WatchEvent) => void,
    signal?: AbortSignal,
  ): Promise<void> {
    const q = new URLSearchParams({ watch: '1', allowWatchBookmarks: 'true' });
    if (opts.resourceVersion) q.set('resourceVersion', opts.resourceVersion);
    if (opts.labelSelector) q.set('labelSelector', opts.labelSelector);
    if (opts.fieldSelector) q.set('fieldSelector', opts.fieldSelector);
    if (opts.timeoutSeconds) q.set('timeoutSeconds', String(opts.timeoutSeconds));
    const path = `${resourcePath(r, namespace)}?${q.toString()}`;
    const { url, opts: ro } = await this.prepare('GET', path);
    // a watch holds its connection: not from the keep-alive pool the requests share
    ro.agent = false;
    ro.signal = signal;
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    const lines = lineSplitter((line) => onEvent(JSON.parse(line) as WatchEvent));
    return new Promise<void>((resolve, reject) => {
      const req = send(url, ro, (res) => {
        const status = res.statusCode ?? 0;
        if (status < 200 || status > 299) {
          res.setEncoding('utf8');
          let text = '';
          res.on('data', (d: string) => (text += d));
          res.on('end', () => reject(new KubeApiError(status, text, 'GET', path)));
          return;
        }
        res.on('data', (d: Buffer) => {
          try {
            lines(d);
          } catch (e) {
            req.destroy(e as Error);
          }
        });
        res.on('end', () => resolve());
        res.on('error', reject);
      });
      req.on('error', (e) => (signal?.aborted ? resolve() : reject(e)));
      req.end();
    });
  }

  get<T extends KubeObject>(r: Resource, namespace: string | undefined, name: string): Promise<T> {
    return this.request<T>('GET', resourcePath(r, namespace, name));
  }
  /** undefined when the object does not exist */
  async getOrUndefined<T extends KubeObject>(r: Resource, namespace: string | undefined, name: string) {
    try {
      return await this.get<T>(r, namespace, name);
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
  }
  list<T extends KubeObject>(r: Resource, namespace?: string, opts: ListOptions = {}): Promise<KubeList<T>> {
    const q = new URLSearchParams();
    if (opts.labelSelector) q.set('labelSelector', opts.labelSelector);
    if (opts.fieldSelector) q.set('fieldSelector', opts.fieldSelector);
    if (opts.limit) q.set('limit', String(opts.limit));
    if (opts.continue) q.set('continue', opts.continue);
    if (opts.resourceVersion !== undefined) q.set('resourceVersion', opts.resourceVersion);
    const qs = q.toString();
    return this.request<KubeList<T>>('GET', resourcePath(r, namespace) + (qs ? `?${qs}` : ''));
  }
  create<T extends KubeObject>(r: Resource, namespace: string | undefined, obj: T): Promise<T> {
    return this.request<T>('POST', resourcePath(r, namespace), obj);
  }
  /** PUT of the whole object; metadata.resourceVersion makes it conditional (409 on conflict). */
  update<T extends KubeObject>(r: Resource, obj: T, subresource?: string): Promise<T> {
    const m = obj.metadata ?? {};
    if (!m.name) throw new Error('update: metadata.name is required');
    return this.request<T>('PUT', resourcePath(r, m.namespace, m.name, subresource), obj);
  }
  updateStatus<T extends KubeObject>(r: Resource, obj: T): Promise<T> {
    return this.update(r, obj, 'status');
  }
  patch<T extends KubeObject>(
    r: Resource,
    namespace: string | undefined,
    name: string,
    patch: unknown,
    type: PatchType = 'merge',
    subresource?: string,
  ): Promise<T> {
    return this.request<T>(
      'PATCH',
      resourcePath(r, namespace, name, subresource),
      patch,
      PATCH_CONTENT_TYPE[type],
    );
  }
  /** DELETE; `preconditionUid` makes it apply to that incarnation of the object only. */
  async delete(
    r: Resource,
    namespace: string | undefined,
    name: string,
    opts: { preconditionUid?: string; gracePeriodSeconds?: number; propagationPolicy?: string } = {},
  ): Promise<void> {
    const body: Record<string, unknown> = { apiVersion: 'v1', kind: 'DeleteOptions' };
    if (opts.preconditionUid) body['preconditions'] = { uid: opts.preconditionUid };
    if (opts.gracePeriodSeconds !== undefined) body['gracePeriodSeconds'] = opts.gracePeriodSeconds;
    if (opts.propagationPolicy) body['propagationPolicy'] = opts.propagationPolicy;
    await this.request('DELETE', resourcePath(r, namespace, name), body);
  }

  /** Close idle keep-alive connections. */
  close(): void {
    this.agent?.destroy();
    this.agent = undefined;
  }
}
