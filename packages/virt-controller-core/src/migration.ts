// The migration controller: a VirtualMachineInstanceMigration (VMIM) gets a target launcher Pod
// (rendered like the VMI's own, with anti-affinity to every Pod of the VMI, so it lands on another
// node), is handed to virt-handler through the VMI's status.migrationState once that Pod runs, and
// follows what the handlers write there:
//   "" -> Pending -> Scheduling (target Pod exists) -> Scheduled (it runs) -> PreparingTarget
//   (handed off: migrationState names the target) -> TargetReady (the target handler listens:
//   targetNodeAddress) -> Running (the source started: startTimestamp) -> Succeeded (completed) or
//   Failed (at any point: VMI gone or final, target Pod down or lost, the source reported failure,
//   cancelled).
// As upstream's (pkg/virt-controller/watch/migration.go, v1.1.0): one active migration per VMI,
// cancellation by deleting the VMIM (before the hand-off the target Pod is deleted; while Running the
// VMI's migrationState.abortRequested asks the source handler to abort), limits on migrations with a
// target Pod per cluster and per source node. Level-triggered like the other controllers.
import {
  ControllerExpectations,
  Informer,
  WorkQueue,
  isNotFound,
  keyOf,
  updateIfChanged,
  PODS,
} from '@kubevirt-ts/controller-runtime';
import type { Condition, MigrationState, VirtualMachineInstanceMigration } from '@kubevirt-ts/api';
import {
  LABEL_CREATED_BY,
  migrationConfiguration,
  renderLaunchPod,
  RenderError,
} from '@kubevirt-ts/renderer';
import {
  SyncError,
  VMIMS,
  VMIS,
  errorMessage,
  hasFinalizer,
  isFinal as isVmiFinal,
  nowTimestamp,
  updateCondition,
  type Vmi,
} from './common.js';
import type { ControllerContext, Pod } from './context.js';
import { cachedClaims } from './claims.js';
import { migrationOptionsFor, type MigrationOptions } from './migration-policy.js';
import { isPodDownOrGoingDown, isPodReady } from './vmi.js';

export type Vmim = VirtualMachineInstanceMigration;
export type MigrationPhase =
  | ''
  | 'Pending'
  | 'Scheduling'
  | 'Scheduled'
  | 'PreparingTarget'
  | 'TargetReady'
  | 'Running'
  | 'Succeeded'
  | 'Failed';

/** on VMIMs: the controller sees a deleted VMIM (cancellation) before it goes */
export const MIGRATION_FINALIZER = 'kubevirt.io/migrationJobFinalize';
/** on the target Pod: the uid of its VMIM */
export const LABEL_MIGRATION_JOB_UID = 'kubevirt.io/migrationJobUID';
export const ANNOTATION_MIGRATION_JOB_NAME = 'kubevirt.io/migrationJobName';
/** on the VMI once handed off: the target node's virt-handler picks the VMI up by it */
export const LABEL_MIGRATION_TARGET_NODE = 'kubevirt.io/migrationTargetNodeName';
export const CONDITION_ABORT_REQUESTED = 'migrationAbortRequested';
export const DEFAULT_PARALLEL_MIGRATIONS_PER_CLUSTER = 5;
export const DEFAULT_PARALLEL_OUTBOUND_MIGRATIONS_PER_NODE = 2;
/**
 * How long a target Pod may stay Pending before the controller deletes it (the migration then fails with
 * TargetPodMissing): unschedulable (PodScheduled False, reason Unschedulable) and any other reason. Upstream's
 * defaults (5 and 15 minutes), overridden per migration by upstream's annotations below.
 */
export const DEFAULT_UNSCHEDULABLE_PENDING_TIMEOUT_SECONDS = 300;
export const DEFAULT_CATCH_ALL_PENDING_TIMEOUT_SECONDS = 900;
export const ANNOTATION_UNSCHEDULABLE_POD_TIMEOUT = 'kubevirt.io/migrationUnschedulablePodTimeoutSeconds';
export const ANNOTATION_PENDING_POD_TIMEOUT = 'kubevirt.io/migrationPendingPodTimeoutSeconds';
/** how long a migration held back by a limit waits before it looks again (upstream: 5 s) */
const LIMIT_RETRY_MS = 5000;
const BUSY_RETRY_MS = 1000;

const AFTER_PENDING: readonly string[] = [
  'Scheduling',
  'Scheduled',
  'PreparingTarget',
  'TargetReady',
  'Running',
];
const HANDED_OFF: readonly string[] = ['PreparingTarget', 'TargetReady', 'Running'];

export const phaseOf = (m: Vmim): MigrationPhase => (m.status?.phase ?? '') as MigrationPhase;
export const isMigrationFinal = (m: Vmim): boolean => phaseOf(m) === 'Succeeded' || phaseOf(m) === 'Failed';
/** upstream's IsRunning: past Pending and not final */
export const isMigrationRunning = (m: Vmim): boolean => AFTER_PENDING.includes(phaseOf(m));

export interface MigrationLimits {
  perCluster: number;
  outboundPerNode: number;
}

export class MigrationController {
  readonly queue = new WorkQueue<string>();
  /** VMIM key -> target Pod creations/deletions */
  readonly podExpectations = new ControllerExpectations();

  constructor(
    private readonly ctx: ControllerContext,
    readonly vmims: Informer<Vmim>,
  ) {}

  /** The limits from the cluster config (the renderer's config object), upstream's defaults without one. */
  limits(): MigrationLimits {
    const c = this.ctx.rendererConfig();
    return {
      perCluster: c?.parallelMigrationsPerCluster ?? DEFAULT_PARALLEL_MIGRATIONS_PER_CLUSTER,
      outboundPerNode: c?.parallelOutboundMigrationsPerNode ?? DEFAULT_PARALLEL_OUTBOUND_MIGRATIONS_PER_NODE,
    };
  }

  /** Wakes VMIM keys on VMIM, target Pod and VMI events. */
  wire(): void {
    const { ctx } = this;
    this.vmims.onChange((m) => this.queue.add(keyOf(m)));
    const byPod = (pod: Pod, created?: boolean, deleted?: boolean) => {
      const uid = pod.metadata?.labels?.[LABEL_MIGRATION_JOB_UID];
      if (!uid) return;
      const m = this.vmims.list(pod.metadata?.namespace).find((x) => x.metadata.uid === uid);
      if (!m) return;
      const key = keyOf(m);
      if (created) this.podExpectations.creationObserved(key);
      if (deleted) this.podExpectations.deletionObserved(key);
      this.queue.add(key);
    };
    ctx.pods.onAdd((p) => byPod(p, true));
    ctx.pods.onUpdate((p) => byPod(p));
    ctx.pods.onDelete((p) => byPod(p, false, true));
    const byVmi = (vmi: Vmi) => {
      for (const m of this.vmims.list(vmi.metadata.namespace))
        if (m.spec.vmiName === vmi.metadata.name) this.queue.add(keyOf(m));
    };
    ctx.vmis.onChange(byVmi);
  }

  /** Target Pods of the migration (label kubevirt.io/migrationJobUID among the VMI's Pods). */
  targetPods(m: Vmim, vmi: Vmi): Pod[] {
    return this.ctx
      .podsOfVmi(vmi.metadata.uid ?? '')
      .filter((p) => p.metadata?.labels?.[LABEL_MIGRATION_JOB_UID] === m.metadata.uid);
  }

  async reconcile(key: string): Promise<void> {
    const m = this.vmims.getByKey(key);
    if (!m) {
      this.podExpectations.deleteExpectations(key);
      return;
    }
    if (!this.podExpectations.satisfiedExpectations(key)) return;
    const vmi = this.ctx.vmis.get(m.metadata.namespace, m.spec.vmiName);
    const pod = vmi ? newest(this.targetPods(m, vmi)) : undefined;
    let syncErr: SyncError | undefined;
    if (vmi && !isMigrationFinal(m)) {
      try {
        await this.sync(key, m, vmi, pod);
      } catch (e) {
        syncErr = e instanceof SyncError ? e : new SyncError('MigrationSyncFailed', errorMessage(e));
      }
    }
    await this.updateStatus(m, vmi, pod, syncErr);
    if (syncErr?.retry) throw syncErr;
  }

  /** The VMIM's status (and finalizer) from the cached VMIM, VMI and target Pod. */
  desired(latest: Vmim, vmi: Vmi | undefined, pod: Pod | undefined, syncErr?: SyncError): Vmim {
    const m = latest;
    const status = (m.status ??= {});
    const old = phaseOf(m);
    const ms = vmi?.status?.migrationState;
    const mine = !!ms && ms.migrationUid === m.metadata.uid;
    const deleting = !!m.metadata.deletionTimestamp;
    const fail = (reason: string, message: string) => {
      status.phase = 'Failed';
      setCondition(status, 'Failed', reason, message);
    };
    const abortCondition = () =>
      setCondition(
        status,
        CONDITION_ABORT_REQUESTED,
        'MigrationCancelled',
        'the migration object was deleted',
      );

    if (isMigrationFinal(m)) {
      // nothing moves a final migration (its state and finalizer are settled below)
    } else if (!vmi) fail('VMINotFound', `VirtualMachineInstance ${m.spec.vmiName} does not exist`);
    else if (isVmiFinal(vmi))
      fail('VMIShutdown', `the VMI is ${vmi.status?.phase}: it shut down during the migration`);
    else if (deleting && !HANDED_OFF.includes(old)) {
      abortCondition();
      status.phase = 'Failed';
    } else if (pod && isPodDownOrGoingDown(pod))
      fail('TargetPodDown', `target pod ${pod.metadata?.name} shut down during the migration`);
    else if (AFTER_PENDING.includes(old) && !pod)
      fail('TargetPodMissing', 'the target pod was removed during the migration');
    else if (HANDED_OFF.includes(old) && !ms)
      fail('MigrationStateCleared', "the VMI's migration state was cleared during the migration");
    else if (HANDED_OFF.includes(old) && !mine)
      fail('MigrationTakenOver', "the VMI's migration state belongs to another migration");
    else if (mine && ms.failed)
      fail('SourceReportedFailure', `the source node reported the migration failed${failureOf(ms)}`);
    else {
      if (deleting) abortCondition();
      switch (old) {
        case '':
          if (this.canMigrate(m, vmi)) status.phase = 'Pending';
          else fail('MigrationInProgress', 'another migration of this VMI is in progress');
          break;
        case 'Pending':
          if (pod) status.phase = 'Scheduling';
          break;
        case 'Scheduling':
          if (pod && isPodReady(pod)) status.phase = 'Scheduled';
          break;
        case 'Scheduled':
          if (mine && ms.targetNode) status.phase = 'PreparingTarget';
          break;
        case 'PreparingTarget':
          if (mine && ms.targetNode && ms.targetNodeAddress) status.phase = 'TargetReady';
          break;
        case 'TargetReady':
          if (mine && ms.startTimestamp) status.phase = 'Running';
          break;
        case 'Running':
          if (mine && ms.completed) status.phase = 'Succeeded';
          break;
      }
    }
    if (phaseOf(m) === old && !isMigrationFinal(m) && syncErr)
      setCondition(status, 'Synchronized', syncErr.reason, syncErr.message, 'False');
    else if (status.conditions) {
      status.conditions = status.conditions.filter((c) => c.type !== 'Synchronized');
      if (status.conditions.length === 0) delete status.conditions;
    }
    if (phaseOf(m) !== old)
      (status.phaseTransitionTimestamps ??= []).push({
        phase: phaseOf(m),
        phaseTransitionTimestamp: nowTimestamp(),
      });
    // the finalizer while the migration can still be cancelled
    if (!isMigrationFinal(m) && !deleting && !hasFinalizer(m, MIGRATION_FINALIZER))
      (m.metadata.finalizers ??= []).push(MIGRATION_FINALIZER);
    if (isMigrationFinal(m)) {
      // a final migration keeps what the VMI recorded about it; the finalizer goes
      if (mine) status.migrationState = structuredClone(ms);
      dropFinalizer(m);
    }
    return m;
  }

  /** No other unfinished migration owns the VMI's migration state (upstream's canMigrateVMI). */
  canMigrate(m: Vmim, vmi: Vmi): boolean {
    const ms = vmi.status?.migrationState;
    if (!ms?.migrationUid || ms.migrationUid === m.metadata.uid) return true;
    const other = this.vmims.list(m.metadata.namespace).find((x) => x.metadata.uid === ms.migrationUid);
    return !other || isMigrationFinal(other);
  }

  private async sync(key: string, m: Vmim, vmi: Vmi, pod: Pod | undefined): Promise<void> {
    if (vmi.metadata.deletionTimestamp) return;
    const ms = vmi.status?.migrationState;
    if (ms && ms.migrationUid === m.metadata.uid && ms.endTimestamp) return;
    if (!this.canMigrate(m, vmi))
      throw new SyncError('MigrationInProgress', 'the VMI is ineligible: another migration of it is running');
    const deleting = !!m.metadata.deletionTimestamp;
    const handedOff = !!ms && ms.migrationUid === m.metadata.uid;
    switch (phaseOf(m)) {
      case 'Pending':
        if (deleting) return this.deleteTargetPod(key, m, pod);
        if (!pod) return this.createTargetPod(key, m, vmi);
        return this.pendingPodTimeout(key, m, vmi, pod);
      case 'Scheduling':
        if (deleting) return this.deleteTargetPod(key, m, pod);
        if (pod) return this.pendingPodTimeout(key, m, vmi, pod);
        return;
      case 'Scheduled':
        if (deleting && !handedOff) return this.deleteTargetPod(key, m, pod);
        if (pod && isPodReady(pod)) return this.handOff(m, vmi, pod);
        return;
      case 'PreparingTarget':
      case 'TargetReady':
        // cancelled before the source started: the target goes (the migration then fails)
        if (deleting && !ms?.startTimestamp) return this.deleteTargetPod(key, m, pod);
        if ((!pod || isPodDownOrGoingDown(pod)) && handedOff) return this.markFailedOnVmi(m, vmi);
        return;
      case 'Failed':
        return;
      case 'Running':
        if (deleting && handedOff && !ms.abortRequested) return this.requestAbort(m, vmi);
        return;
    }
  }

  /** Migrations holding a target Pod or past Pending (upstream's findRunningMigrations). */
  runningMigrations(): Vmim[] {
    return this.vmims.list().filter((x) => {
      if (isMigrationFinal(x)) return false;
      if (isMigrationRunning(x)) return true;
      const vmi = this.ctx.vmis.get(x.metadata.namespace, x.spec.vmiName);
      return !!vmi && this.targetPods(x, vmi).length > 0;
    });
  }

  /** The VMI's running Pod on its node. */
  sourcePod(vmi: Vmi): Pod | undefined {
    const node = vmi.status?.nodeName;
    return this.ctx
      .podsOfVmi(vmi.metadata.uid ?? '')
      .find((p) => !!node && p.spec?.nodeName === node && !isPodDownOrGoingDown(p));
  }

  private async createTargetPod(key: string, m: Vmim, vmi: Vmi): Promise<void> {
    const { ctx } = this;
    if (vmi.status?.phase !== 'Running') return; // waits: a VMI event wakes it
    // the source Pod is gone (a sudden delete): the VMI fails, and the migration with it
    if (!this.sourcePod(vmi)) return;
    // the informer has not shown every target Pod we created yet: counting now could exceed a limit
    if (this.vmims.list().some((x) => this.podExpectations.pendingAdds(keyOf(x)) > 0)) {
      this.queue.addAfter(key, BUSY_RETRY_MS);
      return;
    }
    const active = ctx.podsOfVmi(vmi.metadata.uid ?? '').filter((p) => !isPodDownOrGoingDown(p));
    if (active.length > 1) {
      ctx.log.info('waiting: the VMI already has more than one active pod', { migration: key });
      this.queue.addAfter(key, BUSY_RETRY_MS);
      return;
    }
    const limits = this.limits();
    const running = this.runningMigrations();
    if (running.length >= limits.perCluster) {
      ctx.log.info('waiting: parallel migrations per cluster at the limit', {
        migration: key,
        running: running.length,
        limit: limits.perCluster,
      });
      this.queue.addAfter(key, LIMIT_RETRY_MS);
      return;
    }
    const node = vmi.status?.nodeName;
    const outbound = running.filter(
      (x) => ctx.vmis.get(x.metadata.namespace, x.spec.vmiName)?.status?.nodeName === node,
    ).length;
    if (outbound >= limits.outboundPerNode) {
      ctx.log.info('waiting: outbound migrations of the source node at the limit', {
        migration: key,
        node,
        running: outbound,
        limit: limits.outboundPerNode,
      });
      this.queue.addAfter(key, LIMIT_RETRY_MS);
      return;
    }
    const config = ctx.rendererConfig();
    if (!config)
      throw new SyncError(
        'FailedCreate',
        'the kubevirt-ts config object is missing (launcher image unknown)',
      );
    // the target Pod mounts the claims as the source Pod does: Block claims as devices
    const { claims, missing } = cachedClaims(vmi, (ns, n) => ctx.pvcs.get(ns, n));
    if (missing)
      throw new SyncError(
        'FailedCreate',
        `${missing.field}: PersistentVolumeClaim ${vmi.metadata.namespace}/${missing.claimName} not found`,
      );
    let pod: Pod;
    try {
      pod = renderLaunchPod(vmi, config, claims) as Pod;
    } catch (e) {
      const msg = `failed to render the target pod: ${errorMessage(e)}`;
      throw new SyncError('FailedCreate', msg, !(e instanceof RenderError));
    }
    (pod.metadata!.labels ??= {})[LABEL_MIGRATION_JOB_UID] = m.metadata.uid!;
    (pod.metadata!.annotations ??= {})[ANNOTATION_MIGRATION_JOB_NAME] = m.metadata.name!;
    addAntiAffinity(pod, vmi.metadata.uid!);
    this.podExpectations.expectCreations(key, 1);
    try {
      const created = await ctx.client.create<Pod>(PODS, vmi.metadata.namespace, pod);
      ctx.log.info('created migration target pod', {
        migration: key,
        vmi: vmi.metadata.name,
        pod: created.metadata?.name,
      });
    } catch (e) {
      this.podExpectations.creationObserved(key);
      throw new SyncError('FailedCreate', `failed to create the migration target pod: ${errorMessage(e)}`);
    }
  }

  private async deleteTargetPod(key: string, m: Vmim, pod: Pod | undefined): Promise<void> {
    if (!pod || pod.metadata?.deletionTimestamp) return;
    this.podExpectations.expectDeletions(key, 1);
    try {
      await this.ctx.client.delete(PODS, pod.metadata?.namespace, pod.metadata!.name!, {
        preconditionUid: pod.metadata?.uid,
      });
      this.ctx.log.info('deleted the target pod of a migration', {
        migration: key,
        pod: pod.metadata?.name,
      });
    } catch (e) {
      this.podExpectations.deletionObserved(key);
      if (!isNotFound(e))
        throw new SyncError(
          'FailedDelete',
          `cannot delete target pod ${pod.metadata?.name}: ${errorMessage(e)}`,
        );
    }
    void m;
  }

  /**
   * A target Pod Pending for too long is deleted (upstream's handlePendingPodTimeout): unschedulable (e.g. the
   * other nodes cordoned or full) after the unschedulable timeout, any Pending Pod after the catch-all one. The
   * migration then fails (TargetPodMissing); the source is untouched (nothing was handed off yet).
   */
  private async pendingPodTimeout(key: string, m: Vmim, vmi: Vmi, pod: Pod): Promise<void> {
    if (pod.status?.phase !== 'Pending' || pod.metadata?.deletionTimestamp) return;
    const created = Date.parse(pod.metadata?.creationTimestamp ?? '');
    if (!Number.isFinite(created)) return;
    const pendingS = (Date.now() - created) / 1000;
    const annotations = m.metadata.annotations ?? {};
    const timeout = (name: string, def: number) => {
      const v = Number(annotations[name]);
      return annotations[name] !== undefined && Number.isInteger(v) && v >= 0 ? v : def;
    };
    const unschedulable = pod.status?.conditions?.some(
      (c) => c.type === 'PodScheduled' && c.status === 'False' && c.reason === 'Unschedulable',
    );
    let limit = timeout(ANNOTATION_PENDING_POD_TIMEOUT, DEFAULT_CATCH_ALL_PENDING_TIMEOUT_SECONDS);
    let why = `pending pod ${pod.metadata?.namespace}/${pod.metadata?.name} timeout period exceeded`;
    if (unschedulable) {
      this.ctx.recorder.event(
        migrationRef(m),
        'Warning',
        'MigrationTargetPodUnschedulable',
        `Migration target pod for VMI [${vmi.metadata.namespace}/${vmi.metadata.name}] is currently unschedulable.`,
      );
      const u = timeout(ANNOTATION_UNSCHEDULABLE_POD_TIMEOUT, DEFAULT_UNSCHEDULABLE_PENDING_TIMEOUT_SECONDS);
      if (u < limit) {
        limit = u;
        why = `unschedulable pod ${pod.metadata?.namespace}/${pod.metadata?.name} timeout period exceeded`;
      }
    }
    if (pendingS < limit) {
      this.queue.addAfter(key, Math.ceil(limit - pendingS) * 1000);
      return;
    }
    await this.deleteTargetPod(key, m, pod);
    this.ctx.log.info('deleted a migration target pod that stayed pending too long', { migration: key, why });
    this.ctx.recorder.event(migrationRef(m), 'Normal', 'SuccessfulDelete', why);
  }

  /** The target Pod runs: tell the handlers through the VMI (upstream's handleTargetPodHandoff). */
  private async handOff(m: Vmim, vmi: Vmi, pod: Pod): Promise<void> {
    if (vmi.status?.migrationState?.migrationUid === m.metadata.uid) return;
    const targetNode = pod.spec?.nodeName ?? '';
    const source = this.sourcePod(vmi);
    // upstream: the cluster's migration options (spec.configuration.migrations, defaults filled in) with the
    // matching MigrationPolicy's over them go with the migration; the source handler turns them into
    // MigrateVirtualMachine's options (bandwidth, timeouts, ...)
    let options: MigrationOptions;
    try {
      options = await migrationOptionsFor(
        this.ctx.client,
        vmi,
        migrationConfiguration(this.ctx.rendererConfig()),
      );
    } catch (e) {
      throw new SyncError('FailedMigrationPolicy', `cannot read the migration policies: ${errorMessage(e)}`);
    }
    // migrationConfiguration, migrationPolicyName: upstream's fields, kept by the CRD (the schema preserves unknown
    // fields), not modelled
    const state: MigrationState & {
      migrationConfiguration: MigrationOptions['configuration'];
      migrationPolicyName?: string;
    } = {
      migrationUid: m.metadata.uid,
      targetNode,
      sourceNode: vmi.status?.nodeName,
      targetPod: pod.metadata?.name,
      ...(source?.metadata?.name ? { sourcePod: source.metadata.name } : {}),
      migrationConfiguration: options.configuration,
      ...(options.policyName ? { migrationPolicyName: options.policyName } : {}),
    };
    // one write (the VMI has no status subresource): the hand-off, and the label by which the target node's
    // virt-handler picks the VMI up
    await this.writeVmi(vmi, (v) => {
      (v.status ??= {}).migrationState = state;
      (v.metadata.labels ??= {})[LABEL_MIGRATION_TARGET_NODE] = targetNode;
      return v;
    });
    this.ctx.log.info('handed the migration off to virt-handler', {
      migration: m.metadata.name,
      vmi: vmi.metadata.name,
      targetNode,
    });
  }

  /** The target went away before the source started: the VMI records the failure (upstream does too). */
  private async markFailedOnVmi(m: Vmim, vmi: Vmi): Promise<void> {
    const ms = vmi.status?.migrationState;
    if (!ms || ms.migrationUid !== m.metadata.uid) return;
    if (ms.startTimestamp || ms.failed || ms.completed) return;
    if (ms.targetDirectMigrationNodePorts && Object.keys(ms.targetDirectMigrationNodePorts).length > 0)
      return;
    const now = nowTimestamp();
    await this.writeVmi(vmi, (v) => {
      const s = v.status?.migrationState;
      if (!s || s.migrationUid !== m.metadata.uid) return undefined;
      Object.assign(s, { startTimestamp: now, endTimestamp: now, failed: true, completed: true });
      return v;
    });
  }

  private async requestAbort(m: Vmim, vmi: Vmi): Promise<void> {
    await this.writeVmi(vmi, (v) => {
      const s = v.status?.migrationState;
      if (!s || s.migrationUid !== m.metadata.uid || s.abortRequested) return undefined;
      s.abortRequested = true;
      return v;
    });
    this.ctx.log.info('asked the source to abort the migration', { migration: m.metadata.name });
  }

  private async writeVmi(vmi: Vmi, mutate: (v: Vmi) => Vmi | undefined) {
    try {
      await updateIfChanged<Vmi>({
        client: this.ctx.client,
        resource: VMIS,
        current: vmi,
        mutate,
      });
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
  }

  private async updateStatus(m: Vmim, vmi: Vmi | undefined, pod: Pod | undefined, syncErr?: SyncError) {
    const { client } = this.ctx;
    let cur = m;
    const write = async (sub: 'status' | undefined, pick: (latest: Vmim, want: Vmim) => Vmim) => {
      try {
        const r = await updateIfChanged<Vmim>({
          client,
          resource: VMIMS,
          current: cur,
          subresource: sub,
          mutate: (latest) => pick(latest, this.desired(structuredClone(latest), vmi, pod, syncErr)),
        });
        if (r.object) cur = r.object;
      } catch (e) {
        if (!isNotFound(e)) throw e;
      }
    };
    await write('status', (latest, want) => ({ ...latest, status: want.status }));
    await write(undefined, (latest, want) => ({
      ...latest,
      metadata: { ...latest.metadata, finalizers: want.metadata.finalizers },
    }));
  }
}

const migrationRef = (m: Vmim) => ({
  apiVersion: 'kubevirt.io/v1',
  kind: 'VirtualMachineInstanceMigration',
  metadata: m.metadata,
});

function newest(pods: Pod[]): Pod | undefined {
  let best: Pod | undefined;
  for (const p of pods)
    if (!best || (p.metadata?.creationTimestamp ?? '') > (best.metadata?.creationTimestamp ?? '')) best = p;
  return best;
}

function failureOf(ms: MigrationState): string {
  const r = (ms as { failureReason?: string }).failureReason;
  return r ? `: ${r}` : '';
}

function setCondition(
  status: NonNullable<Vmim['status']>,
  type: string,
  reason: string,
  message: string,
  s = 'True',
): void {
  updateCondition(status, {
    type,
    status: s,
    reason,
    message,
    lastProbeTime: null,
    lastTransitionTime: nowTimestamp(),
  } as Condition);
}

function dropFinalizer(m: Vmim): void {
  if (!m.metadata.finalizers) return;
  m.metadata.finalizers = m.metadata.finalizers.filter((f) => f !== MIGRATION_FINALIZER);
  if (m.metadata.finalizers.length === 0) delete m.metadata.finalizers;
}

/** Required anti-affinity to every Pod of the VMI on the same host (upstream's term). */
export function addAntiAffinity(pod: Pod, vmiUid: string): void {
  const term = {
    labelSelector: { matchLabels: { [LABEL_CREATED_BY]: vmiUid } },
    topologyKey: 'kubernetes.io/hostname',
  };
  const spec = (pod.spec ??= {}) as Record<string, unknown> & { affinity?: Record<string, unknown> };
  const affinity = (spec.affinity ??= {}) as { podAntiAffinity?: Record<string, unknown[]> };
  const anti = (affinity.podAntiAffinity ??= {});
  (anti['requiredDuringSchedulingIgnoredDuringExecution'] ??= []).push(term);
}
