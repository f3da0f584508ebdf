// virt-operator publishes the CA that the API server must trust to reach virt-controller: the `ca.crt` of the
// webhook certificate Secret (made and renewed by virt-controller, or supplied by the cluster operator) goes into the
// caBundle of kubevirt-ts's two admission webhook configurations and of the subresource APIService. The component
// that serves those requests cannot change which requests reach it or whom the API server trusts for them; only the
// installer can (as upstream's virt-operator). Informers on the Secret and on the three objects (each by name): a
// new CA, or a configuration re-applied without its caBundle, is published within a watch event.
import {
  Informer,
  KubeClient,
  SECRETS,
  WorkQueue,
  caBundlePatch,
  caBundleTargets,
  runWorkers,
  type CaBundleCarrier,
  type CaBundleNames,
  type KubeObject,
  type Resource,
} from '@kubevirt-ts/controller-runtime';
import type { Logger } from '@kubevirt-ts/log';

export interface CaBundleOptions extends CaBundleNames {
  client: KubeClient;
  /** the namespace of the Secret */
  namespace: string;
  /** the webhook certificate Secret whose `ca.crt` is published (deploy/'s `kubevirt-ts-webhook-certs`) */
  secretName: string;
  log: Logger;
}

interface Secret extends KubeObject {
  data?: Record<string, string>;
}

const SYNC = 'sync';

export class CaBundlePublisher {
  private readonly secret: Informer<Secret>;
  private readonly targets: { resource: Resource; name: string; informer: Informer<CaBundleCarrier> }[];
  private readonly queue = new WorkQueue<string>();
  private workers: Promise<void> | undefined;

  constructor(private readonly o: CaBundleOptions) {
    const byName = (name: string) => `metadata.name=${name}`;
    const onChange = () => this.queue.add(SYNC);
    this.secret = new Informer<Secret>(o.client, {
      resource: SECRETS,
      namespace: o.namespace,
      fieldSelector: byName(o.secretName),
      log: o.log,
    });
    this.secret.onChange(onChange);
    this.targets = caBundleTargets(o).map(({ resource, name }) => {
      const informer = new Informer<CaBundleCarrier>(o.client, {
        resource,
        fieldSelector: byName(name),
        log: o.log,
      });
      informer.onChange(onChange);
      return { resource, name, informer };
    });
  }

  async start(): Promise<void> {
    await Promise.all([this.secret.start(), ...this.targets.map((t) => t.informer.start())]);
    this.queue.add(SYNC);
    this.workers = runWorkers(this.queue, 1, () => this.sync(), this.o.log);
  }

  async stop(): Promise<void> {
    this.queue.shutDown();
    await Promise.all([this.secret.stop(), ...this.targets.map((t) => t.informer.stop())]);
    await this.workers;
  }

  /** Sets the caBundle of each target that does not have the Secret's `ca.crt` yet. */
  async sync(): Promise<void> {
    const secret = this.secret.get(this.o.namespace, this.o.secretName);
    const want = secret?.data?.['ca.crt'];
    if (!want) return; // no Secret (yet): virt-controller makes it; this runs again when it appears
    for (const { resource, name, informer } of this.targets) {
      const cur = informer.get(undefined, name);
      if (!cur) continue; // not installed (yet): published when it appears
      const ops = caBundlePatch(resource, cur, want);
      if (!ops.length) continue;
      await this.o.client.patch(resource, undefined, name, ops, 'json');
      this.o.log.info('published the webhook CA bundle', {
        kind: resource.plural,
        name,
        secret: `${this.o.namespace}/${this.o.secretName}`,
      });
    }
  }
}
