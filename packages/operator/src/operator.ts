// virt-operator's controller: keeps the status of each KubeVirt CR in its namespace true to the components' rollout
// and the configuration (status.ts). Informers on the KubeVirt CRs, the virt-controller Deployment and the
// virt-handler DaemonSet of the namespace; any change queues the CRs; one reconcile writes a CR's status once, only
// when it differs. The components read the configuration themselves, live: nothing needs a restart when it changes.
// When the namespace has no KubeVirt CR (a fresh install: kubectl cannot create a custom resource in the same apply
// as its CRD), the operator creates the default one, named `kubevirt` as upstream's docs name it. It also publishes
// the webhook CA (ca-bundles.ts), which virt-controller cannot, and installs the common instance types and
// preferences unless the CR's configuration disables them (common-instancetypes.ts).
import {
  DAEMONSETS,
  DEPLOYMENTS,
  Informer,
  KUBEVIRTS,
  isAlreadyExists,
  KubeClient,
  WorkQueue,
  keyOf,
  runWorkers,
  splitKey,
  updateIfChanged,
  type ClusterAccess,
  type KubeObject,
} from '@kubevirt-ts/controller-runtime';
import { API_VERSION, KUBEVIRT_CR_NAME, type KubeVirt, type KubeVirtConfiguration } from '@kubevirt-ts/api';
import { createLogger, type Logger } from '@kubevirt-ts/log';
import { CaBundlePublisher, type CaBundleOptions } from './ca-bundles.js';
import { CommonInstancetypes } from './common-instancetypes.js';
import { kubeVirtStatus, type DaemonSet, type Deployment } from './status.js';

export interface OperatorOptions {
  kubeConfig: ClusterAccess;
  /** the install namespace: the KubeVirt CR and the components live there */
  namespace: string;
  /** the version this installation runs, reported in the CR's status (e.g. "v0.1.0") */
  version: string;
  log?: Logger;
  /** spec.configuration of the CR created when the namespace has none; undefined: create none */
  defaultConfiguration?: KubeVirtConfiguration;
  /** the components' names (deploy/'s) */
  controllerDeployment?: string;
  handlerDaemonSet?: string;
  /**
   * publish the webhook certificate Secret's CA into the webhook configurations' and the APIService's caBundle
   * (ca-bundles.ts; the Secret is in `namespace`); undefined: publish nothing
   */
  caBundles?: Omit<CaBundleOptions, 'client' | 'log' | 'namespace'>;
}

type KubeVirtObject = KubeVirt & KubeObject;
/** the queue key of "make sure the namespace has a KubeVirt CR" (no CR key has no slash) */
const ENSURE_CR = '/ensure';

export class VirtOperator {
  readonly client: KubeClient;
  readonly kubevirts: Informer<KubeVirtObject>;
  readonly deployments: Informer<Deployment & KubeObject>;
  readonly daemonsets: Informer<DaemonSet & KubeObject>;
  readonly queue = new WorkQueue<string>();
  private readonly log: Logger;
  private readonly reported = new Map<string, string>();
  private workers: Promise<void> | undefined;
  readonly caBundles: CaBundlePublisher | undefined;
  /** the common instance types and preferences (spec.configuration.commonInstancetypesDeployment) */
  readonly commonInstancetypes: CommonInstancetypes;

  constructor(private readonly o: OperatorOptions) {
    this.log = o.log ?? createLogger('virt-operator');
    this.client = new KubeClient(o.kubeConfig);
    const log = this.log;
    const { namespace } = o;
    if (o.caBundles)
      this.caBundles = new CaBundlePublisher({ ...o.caBundles, client: this.client, namespace, log });
    this.kubevirts = new Informer(this.client, { resource: KUBEVIRTS, namespace, log });
    const all = () => {
      for (const kv of this.kubevirts.list()) this.queue.add(keyOf(kv));
    };
    this.commonInstancetypes = new CommonInstancetypes({
      client: this.client,
      log,
      version: o.version,
      // the CR virt-controller reads
      kubevirt: () => {
        const kv = this.kubevirts.get(namespace, KUBEVIRT_CR_NAME);
        return kv && { configuration: kv.spec.configuration };
      },
      onErrorChange: all,
    });
    this.deployments = new Informer(this.client, {
      resource: DEPLOYMENTS,
      namespace,
      fieldSelector: `metadata.name=${o.controllerDeployment ?? 'virt-controller'}`,
      log,
    });
    this.daemonsets = new Informer(this.client, {
      resource: DAEMONSETS,
      namespace,
      fieldSelector: `metadata.name=${o.handlerDaemonSet ?? 'virt-handler'}`,
      log,
    });
    this.kubevirts
      .onAdd((kv) => this.queue.add(keyOf(kv)))
      .onUpdate((kv) => this.queue.add(keyOf(kv)))
      .onDelete(() => this.queue.add(ENSURE_CR))
      .onChange(() => this.commonInstancetypes.trigger());
    this.deployments.onChange(all);
    this.daemonsets.onChange(all);
  }

  async start(): Promise<void> {
    await Promise.all([this.deployments.start(), this.daemonsets.start()]);
    await this.kubevirts.start();
    this.queue.add(ENSURE_CR);
    this.workers = runWorkers(this.queue, 1, (key) => this.reconcile(key), this.log);
    await this.caBundles?.start();
    await this.commonInstancetypes.start();
  }

  async stop(): Promise<void> {
    this.queue.shutDown();
    await this.caBundles?.stop();
    await this.commonInstancetypes.stop();
    await Promise.all([this.kubevirts.stop(), this.deployments.stop(), this.daemonsets.stop()]);
    await this.workers;
    this.client.close();
  }

  /** Writes the status one CR should have, when it differs from what it has. */
  async reconcile(key: string): Promise<void> {
    if (key === ENSURE_CR) return this.ensureCr();
    const { namespace, name } = splitKey(key);
    const kv = this.kubevirts.get(namespace, name);
    if (!kv) return;
    const components = {
      controller: this.deployments.list(this.o.namespace)[0],
      handler: this.daemonsets.list(this.o.namespace)[0],
      deploymentError: this.commonInstancetypes.error,
    };
    const { written, object } = await updateIfChanged<KubeVirtObject>({
      client: this.client,
      resource: KUBEVIRTS,
      current: kv,
      subresource: 'status',
      mutate: (latest) => ({
        ...latest,
        status: kubeVirtStatus(latest, components, {
          version: this.o.version,
          now: new Date().toISOString(),
        }),
      }),
    });
    if (!written || !object) return;
    const s = object.status ?? {};
    const summary = (s.conditions ?? []).map((c) => `${c.type}=${c.status}/${c.reason}`).join(' ');
    if (this.reported.get(key) === summary) return;
    this.reported.set(key, summary);
    const notImplemented = s.conditions?.find((c) => c.type === 'NotImplemented' && c.status === 'True');
    const degraded = s.conditions?.find((c) => c.type === 'Degraded' && c.status === 'True');
    const fields = { kind: 'KubeVirt', namespace, name, phase: s.phase, generation: s.observedGeneration };
    if (degraded)
      this.log.warn(`KubeVirt ${key}: ${degraded.message}`, { ...fields, reason: degraded.reason });
    if (notImplemented) this.log.warn(`KubeVirt ${key}: ${notImplemented.message}`, fields);
    this.log.info('KubeVirt status written', { ...fields, conditions: summary });
  }

  /** Creates the default KubeVirt CR when the namespace has none (and a default is configured). */
  private async ensureCr(): Promise<void> {
    const configuration = this.o.defaultConfiguration;
    if (!configuration || this.kubevirts.list(this.o.namespace).length > 0) return;
    const cr: KubeVirtObject = {
      apiVersion: API_VERSION,
      kind: 'KubeVirt',
      metadata: { name: KUBEVIRT_CR_NAME, namespace: this.o.namespace },
      spec: { configuration },
    };
    try {
      await this.client.create(KUBEVIRTS, this.o.namespace, cr);
      this.log.info('created the default KubeVirt CR (the namespace had none)', {
        kind: 'KubeVirt',
        namespace: this.o.namespace,
        name: KUBEVIRT_CR_NAME,
      });
    } catch (e) {
      if (!isAlreadyExists(e)) throw e;
    }
  }
}
