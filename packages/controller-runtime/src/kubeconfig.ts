// Where the API server is and how to authenticate to it, without @kubernetes/client-node: its KubeConfig
// loads the package's generated API models (about 80 MiB of RSS in a process that only needs a server
// address, a CA and a credential). Reads a kubeconfig file (the current context's cluster and user: CA,
// client certificate and key, bearer token or token file, as data or files) or the in-cluster service
// account. `KubeClient` accepts this or client-node's KubeConfig (both are a `ClusterAccess`).
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, join } from 'node:path';
import type { RequestOptions } from 'node:https';
import { createRequire } from 'node:module';
import type * as Yaml from 'yaml';

/** What `KubeClient` needs of a kubeconfig; client-node's `KubeConfig` has it too. */
export interface ClusterAccess {
  getCurrentCluster(): { server: string } | null;
  /** sets `ca`, `cert`, `key`, `rejectUnauthorized` and the `Authorization` header on the options */
  applyToHTTPSOptions(opts: RequestOptions): Promise<void>;
}

const SA_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
/** a token file is read again after this long (projected service-account tokens rotate) */
const TOKEN_REREAD_MS = 60_000;

type Obj = Record<string, unknown>;
/** an entry of a kubeconfig's clusters, users or contexts list */
interface Named {
  name: string;
  cluster?: Obj;
  user?: Obj;
  context?: Obj;
}

export class KubeConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KubeConfigError';
  }
}

export class LiteKubeConfig implements ClusterAccess {
  private server = '';
  private ca: Buffer | undefined;
  private cert: Buffer | undefined;
  private key: Buffer | undefined;
  private insecure = false;
  private tlsServerName: string | undefined;
  private token: string | undefined;
  private tokenFile: string | undefined;
  private tokenReadAt = 0;

  /** The current context of a kubeconfig file (`KUBECONFIG`'s first file when no path is given). */
  static fromFile(path?: string): LiteKubeConfig {
    const file = path ?? process.env['KUBECONFIG']?.split(':')[0];
    if (!file) throw new KubeConfigError('no kubeconfig file given and KUBECONFIG is not set');
    // yaml on first use only: an in-cluster process (virt-handler, virt-controller) never parses a kubeconfig file
    // and saves the library's RSS (~9 MiB measured with virt-handler's flags)
    const { parse } = createRequire(import.meta.url)('yaml') as typeof Yaml;
    const doc = parse(readFileSync(file, 'utf8')) as Obj | null;
    if (!doc || typeof doc !== 'object') throw new KubeConfigError(`${file}: not a kubeconfig`);
    return new LiteKubeConfig().load(doc, dirname(file), file);
  }

  /** The Pod's service account and the API server of `KUBERNETES_SERVICE_HOST`/`_PORT`. */
  static fromCluster(saDir = SA_DIR): LiteKubeConfig {
    const host = process.env['KUBERNETES_SERVICE_HOST'];
    const port = process.env['KUBERNETES_SERVICE_PORT'];
    if (!host || !port)
      throw new KubeConfigError(
        'not in a cluster: KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are not set',
      );
    const kc = new LiteKubeConfig();
    kc.server = `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
    kc.ca = readFileSync(join(saDir, 'ca.crt'));
    kc.tokenFile = join(saDir, 'token');
    return kc;
  }

  private load(doc: Obj, base: string, file: string): this {
    const list = (k: string) => (Array.isArray(doc[k]) ? (doc[k] as Named[]) : []);
    const ctxName = doc['current-context'];
    if (typeof ctxName !== 'string' || !ctxName)
      throw new KubeConfigError(`${file}: current-context is not set`);
    const ctx = list('contexts').find((c) => c.name === ctxName)?.context;
    if (!ctx) throw new KubeConfigError(`${file}: contexts: no context named ${ctxName}`);
    const cluster = list('clusters').find((c) => c.name === ctx['cluster'])?.cluster;
    if (!cluster) throw new KubeConfigError(`${file}: clusters: no cluster named ${String(ctx['cluster'])}`);
    const user = list('users').find((u) => u.name === ctx['user'])?.user ?? {};
    const path = (p: unknown) => (isAbsolute(String(p)) ? String(p) : join(base, String(p)));
    const data = (o: Obj, k: string): Buffer | undefined =>
      typeof o[`${k}-data`] === 'string'
        ? Buffer.from(o[`${k}-data`] as string, 'base64')
        : typeof o[k] === 'string'
          ? readFileSync(path(o[k]))
          : undefined;
    if (typeof cluster['server'] !== 'string')
      throw new KubeConfigError(`${file}: clusters[${String(ctx['cluster'])}].server is not set`);
    this.server = cluster['server'];
    this.ca = data(cluster, 'certificate-authority');
    this.insecure = cluster['insecure-skip-tls-verify'] === true;
    if (typeof cluster['tls-server-name'] === 'string') this.tlsServerName = cluster['tls-server-name'];
    this.cert = data(user, 'client-certificate');
    this.key = data(user, 'client-key');
    if (typeof user['token'] === 'string') this.token = user['token'];
    else if (typeof user['tokenFile'] === 'string') this.tokenFile = path(user['tokenFile']);
    for (const k of ['exec', 'auth-provider', 'username'])
      if (user[k] !== undefined)
        throw new KubeConfigError(
          `${file}: users[${String(ctx['user'])}].${k}: not supported here (use a client certificate or a token)`,
        );
    return this;
  }

  getCurrentCluster(): { server: string } | null {
    return this.server ? { server: this.server } : null;
  }

  private bearer(): string | undefined {
    if (this.tokenFile) {
      const now = Date.now();
      if (!this.token || now - this.tokenReadAt > TOKEN_REREAD_MS) {
        this.token = readFileSync(this.tokenFile, 'utf8').trim();
        this.tokenReadAt = now;
      }
    }
    return this.token;
  }

  applyToHTTPSOptions(opts: RequestOptions): Promise<void> {
    if (this.ca) opts.ca = this.ca;
    if (this.cert) opts.cert = this.cert;
    if (this.key) opts.key = this.key;
    if (this.insecure) opts.rejectUnauthorized = false;
    if (this.tlsServerName) opts.servername = this.tlsServerName;
    const t = this.bearer();
    if (t) opts.headers = { ...(opts.headers as Record<string, string>), Authorization: `Bearer ${t}` };
    return Promise.resolve();
  }
}
