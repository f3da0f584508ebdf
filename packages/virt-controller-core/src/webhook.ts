// The admission webhooks over HTTPS: POST /mutate and /validate with an AdmissionReview (v1).
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { clusterDefaultsFromKubeVirt, type DefaultsOptions, type KubeVirt } from '@kubevirt-ts/api';
import {
  Informer,
  KUBEVIRTS,
  closeServer,
  type KubeClient,
  type KubeObject,
} from '@kubevirt-ts/controller-runtime';
import type { Logger } from '@kubevirt-ts/log';
import {
  componentUsers,
  migrationCreateDenied,
  mutateWithPresets,
  review,
  validateWithInstancetypes,
  type AdmissionRequest,
  type AdmissionReview,
} from './admission.js';
import { errorMessage } from './common.js';
import { POD_EVICTION_PATH, admitPodEviction } from './eviction.js';

export const MUTATE_PATH = '/mutate';
export const VALIDATE_PATH = '/validate';
/** the pods/eviction webhook (node drain: launcher Pods of VMIs to migrate are refused, the VMIs marked) */
export { POD_EVICTION_PATH };
/** upstream's health endpoint on the components' port 8443 */
export const HEALTHZ_PATH = '/healthz';

/**
 * The body of GET /healthz, upstream's shape: `apiserver.connectivity` and `config-resource-version`, the
 * resourceVersion of the KubeVirt CR the webhooks read (empty before the informer has it, or without a CR).
 */
export function healthz(kubeVirt: Pick<KubeObject, 'metadata'> | undefined): {
  apiserver: { connectivity: 'ok' };
  'config-resource-version': string;
} {
  return {
    apiserver: { connectivity: 'ok' },
    'config-resource-version': kubeVirt?.metadata?.resourceVersion ?? '',
  };
}
const MAX_BODY = 8 * 1024 * 1024;

export interface WebhookServerOptions {
  /** PEM serving certificate (chain) and key */
  cert: string | Buffer;
  key: string | Buffer;
  host?: string;
  /** 0: any free port */
  port?: number;
  log?: Logger;
  /** reads the instance types and preferences VMs name (none: they are not applied at admission) */
  client?: KubeClient;
  /** the components' namespace: their service accounts may set the reserved VMI labels (default kubevirt-ts) */
  namespace?: string;
  /** who may set the reserved VMI labels instead of the components' service accounts in `namespace` (tests whose
   * controller runs as the API server's admin) */
  componentUsers?: ReadonlySet<string>;
  /**
   * The KubeVirt CR whose `spec.configuration` gives new VMIs their cluster defaults (the pod network's binding,
   * the eviction strategy) and decides whether the bridge binding is allowed on the pod network; read live with
   * `client` (an informer on this one object). None: the library's defaults, everything permitted.
   */
  kubeVirt?: { namespace: string; name: string };
}

export interface WebhookServer {
  server: Server;
  port: number;
  /**
   * Shutting down (SIGTERM): /readyz answers 503 so that the replica leaves the Service's endpoints, while it goes
   * on serving the webhooks until close()
   */
  drain(): void;
  /** stops serving: requests in flight get `graceMs` to finish */
  close(graceMs?: number): Promise<void>;
  /** replace the serving certificate (rotation) without a restart */
  setCertificate(cert: string | Buffer, key: string | Buffer): void;
}

export async function startWebhookServer(o: WebhookServerOptions): Promise<WebhookServer> {
  const users = o.componentUsers ?? componentUsers(o.namespace);
  const kubeVirt =
    o.client && o.kubeVirt
      ? new Informer<KubeVirt & KubeObject>(o.client, {
          resource: KUBEVIRTS,
          namespace: o.kubeVirt.namespace,
          fieldSelector: `metadata.name=${o.kubeVirt.name}`,
          log: o.log,
        })
      : undefined;
  kubeVirt?.start().catch((e: unknown) =>
    o.log?.error('cannot read the KubeVirt CR: new VMIs get upstream defaults', {
      reason: errorMessage(e),
    }),
  );
  // read per request: a patch of the CR applies to the next admission
  const defaults = (): DefaultsOptions =>
    kubeVirt
      ? clusterDefaultsFromKubeVirt(
          kubeVirt.get(o.kubeVirt!.namespace, o.kubeVirt!.name)?.spec?.configuration,
        )
      : {};
  let draining = false;
  const server = createServer({ cert: o.cert, key: o.key, minVersion: 'TLSv1.2' }, (req, res) => {
    // the Deployment's readiness probe: a replica is in the Service once it serves TLS, until it drains
    if (req.method === 'GET' && req.url === '/readyz') {
      if (draining) res.writeHead(503, { 'Content-Type': 'text/plain' }).end('shutting down\n');
      else res.writeHead(200, { 'Content-Type': 'text/plain' }).end('ok\n');
      return;
    }
    // upstream's components' /healthz on their 8443: JSON with the resourceVersion of the KubeVirt CR whose
    // configuration they apply (upstream's functional tests wait, after each change of the CR, until every
    // virt-controller reports at least the patched version); here the CR as the webhooks' informer last saw it
    // the path without its query, repeated slashes as one (upstream's tests ask for `//healthz`; go-restful
    // cleans the path, so upstream's components answer it)
    const urlPath = (req.url ?? '/').split('?')[0]!.replace(/\/{2,}/g, '/');
    if (req.method === 'GET' && urlPath === HEALTHZ_PATH) {
      const text = JSON.stringify(healthz(kubeVirt?.get(o.kubeVirt!.namespace, o.kubeVirt!.name)));
      res
        .writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) })
        .end(text);
      return;
    }
    const handler =
      urlPath === MUTATE_PATH
        ? (r: AdmissionRequest) => mutateWithPresets(r, o.client, defaults())
        : urlPath === VALIDATE_PATH
          ? async (r: AdmissionRequest) => {
              const res = await validateWithInstancetypes(r, o.client, {
                componentUsers: users,
                permitBridgeInterfaceOnPodNetwork: defaults().permitBridgeInterfaceOnPodNetwork,
              });
              return (res.allowed && o.client && (await migrationCreateDenied(r, o.client))) || res;
            }
          : urlPath === POD_EVICTION_PATH
            ? (r: AdmissionRequest) =>
                o.client
                  ? admitPodEviction(r, o.client, defaults().evictionStrategy)
                  : { uid: r.uid, allowed: true }
            : undefined;
    if (req.method !== 'POST' || !handler) {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found\n');
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) req.destroy(new Error('request body too large'));
      else chunks.push(c);
    });
    req.on('end', async () => {
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as AdmissionReview;
        const out = await review(body, handler);
        if (!out.response?.allowed)
          o.log?.info('admission denied', {
            kind: body.request?.kind?.kind,
            namespace: (body.request?.object as { metadata?: { namespace?: string } })?.metadata?.namespace,
            name: (body.request?.object as { metadata?: { name?: string } })?.metadata?.name,
            reason: out.response?.status?.message,
          });
        const text = JSON.stringify(out);
        res
          .writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) })
          .end(text);
      } catch (e) {
        res.writeHead(400, { 'Content-Type': 'text/plain' }).end(`bad AdmissionReview: ${errorMessage(e)}\n`);
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port ?? 0, o.host ?? '0.0.0.0', () => resolve());
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    drain: () => {
      draining = true;
    },
    close: async (graceMs = 0) => {
      draining = true;
      await closeServer(server, graceMs);
      await kubeVirt?.stop();
    },
    setCertificate: (cert, key) => server.setSecureContext({ cert, key, minVersion: 'TLSv1.2' }),
  };
}
