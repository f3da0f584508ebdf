// virt-controller's controllers wired together: informers on VMs, VMIs, replica sets, launcher Pods, claims and the KubeVirt CR (the
// cluster's configuration, read live); a work queue per controller; expectations lowered by the informers' events.
import type { ClusterAccess } from '@kubevirt-ts/controller-runtime';
import {
  ControllerExpectations,
  EventRecorder,
  Informer,
  KUBEVIRTS,
  KubeClient,
  MetricsRegistry,
  PODS,
  WorkQueue,
  keyOf,
  runWorkers,
  type KubeObject,
} from '@kubevirt-ts/controller-runtime';
import { createLogger, type Logger } from '@kubevirt-ts/log';
import {
  KUBEVIRT_CR_NAME,
  clusterDefaultsFromKubeVirt,
  type DefaultsOptions,
  type KubeVirt,
} from '@kubevirt-ts/api';
import {
  LABEL_APP,
  LABEL_CREATED_BY,
  rendererConfigFromKubeVirt,
  type RendererConfig,
} from '@kubevirt-ts/renderer';
import { VMIMS, VMIS, VMS, controllerRef, errorMessage, isFinal, type Vm, type Vmi } from './common.js';
import type { ControllerContext, Pod } from './context.js';
import { VmController } from './vm.js';
import { templatesOf } from './datavolumes.js';
import { VmiController } from './vmi.js';
import { MigrationController, type Vmim } from './migration.js';
import { EvacuationController } from './evacuation.js';
import { NODES, NodeController, type Node } from './node.js';
import { ReplicaSetController, VMIRSS, type Vmirs } from './replicaset.js';
import { POOLS, PoolController, type Pool } from './pool.js';
import {
  DATA_VOLUMES,
  PVCS,
  STORAGE_CLASSES,
  trimPvc,
  usesClaim,
  type DataVolume,
  type Pvc,
  type StorageClass,
} from './claims.js';

/** the install namespace, where the KubeVirt CR lives (default) */
export const CONFIG_NAMESPACE = 'kubevirt-ts';

export interface VirtControllerOptions {
  kubeConfig: ClusterAccess;
  log?: Logger;
  /** namespace of the KubeVirt CR (default kubevirt-ts) and its name (default kubevirt) */
  configNamespace?: string;
  configName?: string;
  /**
   * What only the controller's flags set (the launcher image above all); the KubeVirt CR's spec.configuration is
   * read on top of it, live. Required unless `rendererConfig` is given.
   */
  baseConfig?: RendererConfig;
  /** use this instead of the KubeVirt CR (tests, benchmarks) */
  rendererConfig?: RendererConfig;
  /** workers per controller (upstream defaults: VM 3, VMI 10) */
  vmWorkers?: number;
  vmiWorkers?: number;
  /** migration controller workers (upstream default 3) */
  migrationWorkers?: number;
  /** replica set controller workers (upstream default 3) */
  replicaSetWorkers?: number;
  /** pool controller workers (upstream default 3) */
  poolWorkers?: number;
  /** a node whose virt-handler heartbeat is older than this is unresponsive (upstream: 5 min) */
  heartbeatTimeoutMs?: number;
  /** how often each node is checked without events (upstream: 1 min) */
  nodeRecheckMs?: number;
  /** reportingInstance of the events (the Pod name) */
  identity?: string;
}

export class VirtController {
  readonly client: KubeClient;
  readonly ctx: ControllerContext;
  readonly vm: VmController;
  readonly vmi: VmiController;
  readonly migration: MigrationController;
  /** node drain: migrations for the VMIs the pod-eviction webhook marked for evacuation */
  readonly evacuation: EvacuationController;
  readonly replicaSet: ReplicaSetController;
  readonly pool: PoolController;
  readonly node: NodeController;
  readonly nodes: Informer<Node>;
  readonly nodeQueue = new WorkQueue<string>();
  /** Events go through their own client: they are not the state machine's writes */
  readonly eventClient: KubeClient;
  readonly recorder: EventRecorder;
  private readonly configInformer: Informer<KubeVirt & KubeObject> | undefined;
  private config: RendererConfig | undefined;
  private clusterDefaults: DefaultsOptions = {};
  private readonly podIndex = new Map<string, Map<string, Pod>>();
  private workers: Promise<void>[] = [];
  private readonly log: Logger;
  /** Prometheus metrics: reconciles, their latency, queue depth, VMIs per phase, creation to Running */
  readonly metrics = new MetricsRegistry();
  private readonly reconciles = this.metrics.counter(
    'kubevirt_ts_controller_reconcile_total',
    'Reconciles by controller and result (success, error).',
  );
  private readonly reconcileSeconds = this.metrics.histogram(
    'kubevirt_ts_controller_reconcile_duration_seconds',
    'Time of one reconcile, by controller.',
    [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  );
  private readonly toRunning = this.metrics.histogram(
    'kubevirt_ts_vmi_creation_to_running_seconds',
    "From a VMI's creation to its Running phase.",
    [1, 2, 5, 10, 20, 30, 60, 120, 300, 600],
  );
  private readonly seenRunning = new Set<string>();

  constructor(private readonly opts: VirtControllerOptions) {
    const kc = opts.kubeConfig;
    this.log = opts.log ?? createLogger('virt-controller');
    this.client = new KubeClient(kc);
    const log = this.log;
    const vms = new Informer<Vm>(this.client, { resource: VMS, log });
    const vmis = new Informer<Vmi>(this.client, { resource: VMIS, log });
    const pods = new Informer<Pod>(this.client, {
      resource: PODS,
      labelSelector: `${LABEL_APP}=virt-launcher`,
      log,
      // the controllers read a launcher Pod's metadata, node and status: the rest of its spec (containers,
      // volumes, affinity: most of a rendered Pod) is not cached
      transform: (p) => ({
        apiVersion: p.apiVersion,
        kind: p.kind,
        metadata: p.metadata,
        spec: { nodeName: p.spec?.nodeName },
        status: p.status,
      }),
    });
    this.nodes = new Informer<Node>(this.client, { resource: NODES, log });
    // the claims VMIs use: their volumeMode, phase, access modes and size (upstream's PVC informer)
    const pvcs = new Informer<Pvc>(this.client, { resource: PVCS, log, transform: trimPvc });
    // CDI's DataVolumes: those of VMs' dataVolumeTemplates and those VMIs' claims belong to (CDI may come later)
    const dataVolumes = new Informer<DataVolume>(this.client, {
      resource: DATA_VOLUMES,
      log,
      optional: true,
    });
    this.eventClient = new KubeClient(kc);
    this.recorder = new EventRecorder({
      client: this.eventClient,
      component: 'virt-controller',
      instance: opts.identity,
      log,
    });
    this.config = opts.rendererConfig;
    if (!opts.rendererConfig) {
      if (!opts.baseConfig)
        throw new Error('VirtController: baseConfig (the launcher image) or rendererConfig is needed');
      this.configInformer = new Informer(this.client, {
        resource: KUBEVIRTS,
        namespace: opts.configNamespace ?? CONFIG_NAMESPACE,
        fieldSelector: `metadata.name=${opts.configName ?? KUBEVIRT_CR_NAME}`,
        log,
      });
    }
    this.ctx = {
      client: this.client,
      recorder: this.recorder,
      log,
      vms,
      vmis,
      pods,
      pvcs,
      dataVolumes,
      claimLookup: {
        pvc: (ns, name) => pvcs.get(ns, name),
        storageClass: (name) => this.client.getOrUndefined<StorageClass>(STORAGE_CLASSES, undefined, name),
        dataVolume: (ns, name) => Promise.resolve(dataVolumes.get(ns, name)),
      },
      podsOfVmi: (uid) => [...(this.podIndex.get(uid)?.values() ?? [])],
      vmQueue: new WorkQueue<string>(),
      vmiQueue: new WorkQueue<string>(),
      vmExpectations: new ControllerExpectations(),
      podExpectations: new ControllerExpectations(),
      vmiExpectations: new ControllerExpectations(),
      rendererConfig: () => this.config,
      clusterDefaults: () => this.clusterDefaults,
    };
    this.metrics.gauge(
      'kubevirt_ts_controller_queue_depth',
      'Keys waiting in the work queue, by controller.',
      () => [
        [{ controller: 'vm' }, this.ctx.vmQueue.len()],
        [{ controller: 'vmi' }, this.ctx.vmiQueue.len()],
      ],
    );
    this.metrics.gauge('kubevirt_ts_vmi_phase_count', 'VMIs per phase (as the cache shows them).', () => {
      const counts = new Map<string, number>();
      for (const v of this.ctx.vmis.list()) {
        const p = v.status?.phase || 'Unprocessed';
        counts.set(p, (counts.get(p) ?? 0) + 1);
      }
      return [...counts].map(([phase, n]) => [{ phase }, n]);
    });
    this.vm = new VmController(this.ctx);
    this.vmi = new VmiController(this.ctx);
    this.migration = new MigrationController(
      this.ctx,
      new Informer<Vmim>(this.client, { resource: VMIMS, log }),
    );
    this.migration.wire();
    this.evacuation = new EvacuationController(
      this.ctx,
      this.migration.vmims,
      (name) => !!this.nodes.get(undefined, name),
    );
    this.evacuation.wire();
    this.replicaSet = new ReplicaSetController(
      this.ctx,
      new Informer<Vmirs>(this.client, { resource: VMIRSS, log }),
    );
    this.replicaSet.wire();
    this.pool = new PoolController(this.ctx, new Informer<Pool>(this.client, { resource: POOLS, log }));
    this.pool.wire();
    this.node = new NodeController(
      { ...this.ctx, nodes: this.nodes },
      { heartbeatTimeoutMs: opts.heartbeatTimeoutMs, recheckMs: opts.nodeRecheckMs },
    );
    this.wire();
  }

  private wire(): void {
    const { ctx } = this;
    const ownerVmKey = (vmi: Vmi): string | undefined => {
      const ref = controllerRef(vmi, 'VirtualMachine');
      return ref ? `${vmi.metadata.namespace}/${ref.name}` : undefined;
    };
    ctx.vms.onChange((vm) => ctx.vmQueue.add(keyOf(vm)));
    ctx.vmis.onAdd((vmi) => {
      const key = keyOf(vmi);
      const vmKey = ownerVmKey(vmi);
      if (vmKey) {
        ctx.vmExpectations.creationObserved(vmKey);
        ctx.vmQueue.add(vmKey);
      }
      ctx.vmiQueue.add(key);
    });
    this.nodes.onChange((n) => this.nodeQueue.add(n.metadata!.name!));
    ctx.vmis.onChange((vmi) => {
      if (vmi.status?.nodeName && !isFinal(vmi)) this.nodeQueue.add(vmi.status.nodeName);
    });
    ctx.vmis.onUpdate((vmi) => {
      const key = keyOf(vmi);
      this.observeRunning(vmi);
      ctx.vmiExpectations.lowerExpectations(key, 1, 0);
      const vmKey = ownerVmKey(vmi);
      if (vmKey) ctx.vmQueue.add(vmKey);
      ctx.vmiQueue.add(key);
    });
    ctx.vmis.onDelete((vmi) => {
      const key = keyOf(vmi);
      this.seenRunning.delete(vmi.metadata.uid ?? '');
      const vmKey = ownerVmKey(vmi);
      if (vmKey) {
        ctx.vmExpectations.deletionObserved(vmKey);
        ctx.vmQueue.add(vmKey);
      }
      ctx.vmiQueue.add(key);
    });
    const vmiKeyOfPod = (pod: Pod): string | undefined => {
      const ref = controllerRef(pod, 'VirtualMachineInstance');
      return ref ? `${pod.metadata?.namespace}/${ref.name}` : undefined;
    };
    const index = (pod: Pod, present: boolean) => {
      const uid = pod.metadata?.labels?.[LABEL_CREATED_BY];
      if (!uid) return;
      let m = this.podIndex.get(uid);
      if (present) {
        if (!m) this.podIndex.set(uid, (m = new Map()));
        m.set(pod.metadata!.uid!, pod);
      } else if (m) {
        m.delete(pod.metadata!.uid!);
        if (m.size === 0) this.podIndex.delete(uid);
      }
    };
    ctx.pods.onAdd((pod) => {
      index(pod, true);
      const key = vmiKeyOfPod(pod);
      if (!key) return;
      ctx.podExpectations.creationObserved(key);
      ctx.vmiQueue.add(key);
    });
    ctx.pods.onUpdate((pod) => {
      index(pod, true);
      const key = vmiKeyOfPod(pod);
      if (key) ctx.vmiQueue.add(key);
    });
    ctx.pods.onDelete((pod) => {
      index(pod, false);
      const key = vmiKeyOfPod(pod);
      if (!key) return;
      ctx.podExpectations.deletionObserved(key);
      ctx.vmiQueue.add(key);
    });
    // A claim created, bound, resized or deleted: the VMIs (and their VMs) that use it look again (a Pending VMI
    // creates its Pod, a running one updates status.volumeStatus).
    // A DataVolume's phase or conditions changed: the same, and the VMs whose template uses it or names it in
    // dataVolumeTemplates (they create it, wait for it, and show its progress or failure in printableStatus).
    const claimChanged = (o: KubeObject) => {
      const ns = o.metadata?.namespace ?? '';
      const name = o.metadata?.name ?? '';
      for (const vmi of ctx.vmis.list(ns)) {
        if (isFinal(vmi) || !usesClaim(vmi, name)) continue;
        ctx.vmiQueue.add(keyOf(vmi));
        const vmKey = ownerVmKey(vmi);
        if (vmKey) ctx.vmQueue.add(vmKey);
      }
      for (const vm of ctx.vms.list(ns))
        if (
          usesClaim({ spec: vm.spec.template?.spec } as Pick<Vmi, 'spec'>, name) ||
          templatesOf(vm).some((t) => t.metadata?.name === name)
        )
          ctx.vmQueue.add(keyOf(vm));
    };
    ctx.pvcs.onChange(claimChanged);
    ctx.dataVolumes.onChange(claimChanged);
    const onConfig = (kv: KubeVirt, present: boolean) => {
      if (!present) {
        this.log.warn('the KubeVirt CR was deleted; launcher Pods cannot be rendered until it is back');
        this.config = undefined;
        return;
      }
      this.clusterDefaults = clusterDefaultsFromKubeVirt(kv.spec.configuration);
      try {
        this.config = rendererConfigFromKubeVirt(kv.spec.configuration, this.opts.baseConfig!);
        this.log.info('cluster configuration loaded from the KubeVirt CR', {
          generation: kv.metadata.generation,
          useEmulation: this.config.useEmulation ?? false,
          // the launcher's sizing of disk.img on filesystem claims (unset: upstream's defaults, 10 % and 131072)
          lessPVCSpaceToleration: this.config.lessPVCSpaceToleration,
          minimumReservePVCBytes: this.config.minimumReservePVCBytes,
        });
      } catch (e) {
        // virt-operator reports the same error in the CR's Degraded condition
        this.log.error('the KubeVirt CR configuration is invalid; keeping the previous one', {
          reason: errorMessage(e),
        });
      }
      // VMIs that could not get a Pod without it
      for (const vmi of ctx.vmis.list())
        if (!vmi.status?.phase || vmi.status.phase === 'Pending') ctx.vmiQueue.add(keyOf(vmi));
    };
    this.configInformer?.onAdd((cm) => onConfig(cm, true));
    this.configInformer?.onUpdate((cm) => onConfig(cm, true));
    this.configInformer?.onDelete((cm) => onConfig(cm, false));
  }

  private observeRunning(vmi: Vmi): void {
    const uid = vmi.metadata.uid ?? '';
    if (vmi.status?.phase !== 'Running' || this.seenRunning.has(uid)) return;
    this.seenRunning.add(uid);
    const created = Date.parse(vmi.metadata.creationTimestamp ?? '');
    const ts = vmi.status.phaseTransitionTimestamps?.find(
      (t) => t.phase === 'Running',
    )?.phaseTransitionTimestamp;
    const running = ts ? Date.parse(ts) : Date.now();
    if (Number.isFinite(created)) this.toRunning.observe({}, Math.max(0, (running - created) / 1000));
  }

  /** Starts the informers, waits until their caches are filled, then starts the workers. */
  async start(): Promise<void> {
    const { ctx } = this;
    await Promise.all([
      this.configInformer?.start(),
      ctx.pods.start(),
      ctx.pvcs.start(),
      ctx.dataVolumes.start(),
      ctx.vmis.start(),
      ctx.vms.start(),
      this.migration.vmims.start(),
      this.replicaSet.rss.start(),
      this.pool.pools.start(),
      this.nodes.start(),
    ]);
    this.log.info('caches synced, starting workers', {
      vms: ctx.vms.list().length,
      vmis: ctx.vmis.list().length,
      pods: ctx.pods.list().length,
    });
    const wrap = (controller: string, fn: (key: string) => Promise<void>) => async (key: string) => {
      const t = performance.now();
      let result = 'success';
      try {
        await fn(key);
      } catch (e) {
        result = 'error';
        throw e instanceof Error ? e : new Error(String(e));
      } finally {
        this.reconciles.inc({ controller, result });
        this.reconcileSeconds.observe({ controller }, (performance.now() - t) / 1000);
      }
    };
    this.workers = [
      runWorkers(
        ctx.vmQueue,
        this.opts.vmWorkers ?? 3,
        wrap('vm', (k) => this.vm.reconcile(k)),
        this.log,
      ),
      runWorkers(
        ctx.vmiQueue,
        this.opts.vmiWorkers ?? 10,
        wrap('vmi', (k) => this.vmi.reconcile(k)),
        this.log,
      ),
      runWorkers(
        this.migration.queue,
        this.opts.migrationWorkers ?? 3,
        wrap('migration', (k) => this.migration.reconcile(k)),
        this.log,
      ),
      runWorkers(
        this.evacuation.queue,
        1,
        wrap('evacuation', (node) => this.evacuation.reconcile(node)),
        this.log,
      ),
      runWorkers(
        this.replicaSet.queue,
        this.opts.replicaSetWorkers ?? 3,
        wrap('replicaset', (k) => this.replicaSet.reconcile(k)),
        this.log,
      ),
      runWorkers(
        this.pool.queue,
        this.opts.poolWorkers ?? 3,
        wrap('pool', (k) => this.pool.reconcile(k)),
        this.log,
      ),
      runWorkers(
        this.nodeQueue,
        1,
        wrap('node', async (name) => {
          const after = await this.node.reconcile(name);
          if (after !== undefined) this.nodeQueue.addAfter(name, after);
        }),
        this.log,
      ),
    ];
  }

  /** Stops taking keys, waits for the reconciles in flight, stops the informers. */
  async stop(): Promise<void> {
    const { ctx } = this;
    ctx.vmQueue.shutDown();
    ctx.vmiQueue.shutDown();
    this.migration.queue.shutDown();
    this.evacuation.queue.shutDown();
    this.replicaSet.queue.shutDown();
    this.pool.queue.shutDown();
    this.nodeQueue.shutDown();
    await Promise.all(this.workers);
    await Promise.all([
      this.configInformer?.stop(),
      ctx.pods.stop(),
      ctx.pvcs.stop(),
      ctx.dataVolumes.stop(),
      ctx.vmis.stop(),
      ctx.vms.stop(),
      this.migration.vmims.stop(),
      this.replicaSet.rss.stop(),
      this.pool.pools.stop(),
      this.nodes.stop(),
    ]);
    await this.recorder.flush();
    this.client.close();
    this.eventClient.close();
  }
}
