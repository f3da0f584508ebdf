/**
 * virt-handler's health endpoint as upstream's: HTTPS on port 8443, `GET /healthz` answering
 * `{"apiserver": {"connectivity": "ok"}, "config-resource-version": "<rv>"}`, the resourceVersion of the KubeVirt CR
 * as this process last saw it. Upstream's functional tests, after every change of the CR, wait until each
 * virt-handler Pod reports at least the patched version. The handler reads the CR with an informer on that one
 * object; none of its behaviour depends on the configuration (what it needs comes with each VMI), so the version
 * it reports is the one it has observed.
 */
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import {
  Informer,
  KUBEVIRTS,
  closeServer,
  type KubeClient,
  type KubeObject,
} from '@kubevirt-ts/controller-runtime';
import type { Logger } from '@kubevirt-ts/log';

export interface HealthzServerOptions {
  /** PEM serving certificate and key (no client certificate asked: upstream's tests do not present one) */
  cert: string | Buffer;
  key: string | Buffer;
  /** 0: any free port */
  port: number;
  host?: string;
  client: KubeClient;
  /** the KubeVirt CR whose resourceVersion is reported */
  kubeVirt: { namespace: string; name: string };
  log?: Logger;
}

export interface HealthzServer {
  port: number;
  close(): Promise<void>;
  setCertificate(cert: string | Buffer, key: string | Buffer): void;
}

/** The body of GET /healthz: upstream's shape; the version is empty before the informer has the CR. */
export function healthzBody(kubeVirt: Pick<KubeObject, 'metadata'> | undefined): {
  apiserver: { connectivity: 'ok' };
  'config-resource-version': string;
} {
  return {
    apiserver: { connectivity: 'ok' },
    'config-resource-version': kubeVirt?.metadata?.resourceVersion ?? '',
  };
}

/** Starts the informer on the CR (a failed list is logged; it retries) and the HTTPS server. */
export async function startHealthzServer(o: HealthzServerOptions): Promise<HealthzServer> {
  const informer = new Informer<KubeObject>(o.client, {
    resource: KUBEVIRTS,
    namespace: o.kubeVirt.namespace,
    fieldSelector: `metadata.name=${o.kubeVirt.name}`,
    log: o.log,
  });
  informer.start().catch((e: unknown) =>
    o.log?.warn(`healthz: cannot read the KubeVirt CR: ${(e as Error).message}`, {
      reason: 'KubeVirtUnreadable',
    }),
  );
  const server: Server = createServer({ cert: o.cert, key: o.key, minVersion: 'TLSv1.2' }, (req, res) => {
    // repeated slashes as one: upstream's tests ask for //healthz (go-restful cleans the path)
    const urlPath = (req.url ?? '/').split('?')[0]!.replace(/\/{2,}/g, '/');
    if (req.method !== 'GET' || urlPath !== '/healthz') {
      res.writeHead(404, { 'Content-Type': 'text/plain' }).end('not found\n');
      return;
    }
    const text = JSON.stringify(healthzBody(informer.get(o.kubeVirt.namespace, o.kubeVirt.name)));
    res
      .writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) })
      .end(text);
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(o.port, o.host ?? '0.0.0.0', () => resolve());
    });
  } catch (e) {
    await informer.stop();
    throw new Error(`healthz: cannot listen on ${o.host ?? '0.0.0.0'}:${o.port}: ${(e as Error).message}`);
  }
  return {
    port: (server.address() as AddressInfo).port,
    close: async () => {
      await informer.stop();
      await closeServer(server);
    },
    setCertificate: (cert, key) => server.setSecureContext({ cert, key, minVersion: 'TLSv1.2' }),
  };
}
