// Raw requests and server-side apply for arbitrary manifests. @kubernetes/client-node serializes bodies
// through its typed models, which drop keys spelled differently from the model (a CRD's
// "x-kubernetes-int-or-string" becomes "xKubernetesIntOrString" there): manifests read from YAML files
// must go to the server as they are, so they go through here.
import { request } from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';

export class KubeRequestError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
    readonly method: string,
    readonly path: string,
  ) {
    let message = body;
    try {
      message = (JSON.parse(body) as { message?: string }).message ?? body;
    } catch {
      /* not JSON */
    }
    super(`${method} ${path}: HTTP ${status}: ${message}`);
    this.name = 'KubeRequestError';
  }
}

/** One HTTPS request to the cluster in `kc` (its current context), body sent as given. Returns the parsed JSON. */
export async function kubeRequest<T = unknown>(
  kc: KubeConfig,
  method: string,
  path: string,
  body?: unknown,
  contentType = 'application/json',
): Promise<T> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('kubeconfig has no current cluster');
  const url = new URL(path, cluster.server);
  const opts: Parameters<typeof request>[1] = { method, headers: { Accept: 'application/json' } };
  await kc.applyToHTTPSOptions(opts);
  const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  if (payload !== undefined)
    opts.headers = {
      ...opts.headers,
      'Content-Type': contentType,
      'Content-Length': Buffer.byteLength(payload),
    };
  return new Promise<T>((resolve, reject) => {
    const req = request(url, opts, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => {
        const status = res.statusCode ?? 0;
        if (status < 200 || status > 299) return reject(new KubeRequestError(status, text, method, path));
        try {
          resolve((text ? JSON.parse(text) : undefined) as T);
        } catch (e) {
          reject(e);
        }
      });
    });
    req.on('error', reject);
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name?: string; namespace?: string; [k: string]: unknown };
  [k: string]: unknown;
}

interface ApiResource {
  name: string;
  kind: string;
  namespaced: boolean;
}

/** Finds the REST path of objects by apiVersion/kind through discovery (cached per KubeConfig). */
export class ResourceMapper {
  private cache = new Map<string, ApiResource[]>();
  constructor(private readonly kc: KubeConfig) {}

  invalidate(): void {
    this.cache.clear();
  }

  async resource(apiVersion: string, kind: string): Promise<ApiResource> {
    let list = this.cache.get(apiVersion);
    if (!list) {
      const base = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
      const disc = await kubeRequest<{ resources: ApiResource[] }>(this.kc, 'GET', base);
      list = disc.resources.filter((r) => !r.name.includes('/'));
      this.cache.set(apiVersion, list);
    }
    const r = list.find((x) => x.kind === kind);
    if (!r) throw new Error(`the server does not serve kind ${kind} in ${apiVersion}`);
    return r;
  }

  /** collection path (namespace defaults to "default" for namespaced kinds) */
  async collectionPath(
    obj: Pick<KubeObject, 'apiVersion' | 'kind'> & { metadata?: { namespace?: string } },
  ): Promise<string> {
    const r = await this.resource(obj.apiVersion, obj.kind);
    const base = obj.apiVersion.includes('/') ? `/apis/${obj.apiVersion}` : `/api/${obj.apiVersion}`;
    return r.namespaced
      ? `${base}/namespaces/${encodeURIComponent(obj.metadata?.namespace ?? 'default')}/${r.name}`
      : `${base}/${r.name}`;
  }

  async objectPath(obj: KubeObject): Promise<string> {
    if (!obj.metadata?.name) throw new Error(`${obj.kind}: metadata.name is required`);
    return `${await this.collectionPath(obj)}/${encodeURIComponent(obj.metadata.name)}`;
  }
}

export interface ApplyOptions {
  /** field manager recorded by the server (default "kubevirt-ts-testenv") */
  fieldManager?: string;
  /** take over fields owned by other managers (default true) */
  force?: boolean;
  /** "All" for a server-side dry run */
  dryRun?: 'All';
}

/**
 * Server-side apply of each object in order (like `kubectl apply --server-side`). A CustomResourceDefinition
 * is waited for until Established, so custom objects later in the list can be applied.
 */
export async function serverSideApply(
  kc: KubeConfig,
  objects: KubeObject[],
  opts: ApplyOptions = {},
): Promise<KubeObject[]> {
  const mapper = new ResourceMapper(kc);
  const out: KubeObject[] = [];
  for (const obj of objects) {
    const q = new URLSearchParams({
      fieldManager: opts.fieldManager ?? 'kubevirt-ts-testenv',
      force: String(opts.force ?? true),
    });
    if (opts.dryRun) q.set('dryRun', opts.dryRun);
    const path = `${await mapper.objectPath(obj)}?${q}`;
    const applied = await kubeRequest<KubeObject>(kc, 'PATCH', path, obj, 'application/apply-patch+yaml');
    out.push(applied);
    if (obj.kind === 'CustomResourceDefinition' && !opts.dryRun) {
      await waitCrdEstablished(kc, obj.metadata.name!);
      mapper.invalidate();
    }
  }
  return out;
}

export async function waitCrdEstablished(kc: KubeConfig, name: string, timeoutMs = 30000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const crd = await kubeRequest<{ status?: { conditions?: { type: string; status: string }[] } }>(
      kc,
      'GET',
      `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${encodeURIComponent(name)}`,
    );
    if (crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) return;
    if (Date.now() > end)
      throw new Error(
        `CRD ${name} not Established after ${timeoutMs} ms: ${JSON.stringify(crd.status?.conditions)}`,
      );
    await new Promise((r) => setTimeout(r, 100));
  }
}
