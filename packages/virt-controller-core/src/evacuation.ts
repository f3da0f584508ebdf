// The evacuation controller (upstream's pkg/virt-controller/watch/drain/evacuation): a VMI marked for evacuation
// (status.evacuationNodeName = its node, set by the pod-eviction webhook when a drain evicted its launcher Pod) gets a
// VirtualMachineInstanceMigration, named kubevirt-evacuation-<random> and annotated kubevirt.io/evacuationMigration
// with the node. Keyed by node, as upstream's: each pass looks at the node's marked VMIs that are not migrating,
// not final or deleting, want to migrate on eviction (LiveMigrate, or LiveMigrateIfPossible and migratable), are
// LiveMigratable, have no unfinished migration and only one active Pod. The cluster-wide and per-node migration
// limits are the migration controller's (as upstream v1.9.0: its evacuation controller creates every migration and
// the migration controller queues them). A VMI whose previous evacuation migrations failed waits 20 s, doubling
// per failure since the last success, after the last failure (upstream's migration backoff).
import { ControllerExpectations, WorkQueue, keyOf } from '@kubevirt-ts/controller-runtime';
import { VMIMS, errorMessage, isFinal, type Vmi } from './common.js';
import type { ControllerContext } from './context.js';
import { migratableOnEviction, isLiveMigratable, type EvictionStrategy } from './eviction.js';
import { isMigrationFinal, phaseOf, type Vmim } from './migration.js';
import type { Informer } from '@kubevirt-ts/controller-runtime';

/** on a migration the evacuation controller created: the node evacuated (upstream's name) */
export const EVACUATION_MIGRATION_ANNOTATION = 'kubevirt.io/evacuationMigration';
/** generateName of the evacuation migrations (upstream's) */
export const EVACUATION_MIGRATION_PREFIX = 'kubevirt-evacuation-';
/** the first wait after a failed evacuation migration; doubled per further failure */
export const EVACUATION_BACKOFF_MS = 20_000;

/** the VMI is live-migrating (its migration state started and not ended) */
export const isVmiMigrating = (vmi: Vmi): boolean =>
  !!vmi.status?.migrationState?.startTimestamp && !vmi.status.migrationState.endTimestamp;

/** the Pods of a VMI that still run or may (not Succeeded/Failed) */
const isPodActive = (p: { status?: { phase?: string } }) =>
  p.status?.phase !== 'Succeeded' && p.status?.phase !== 'Failed';

/**
 * How long (ms) the VMI still waits before its next evacuation migration: failed evacuation migrations of it
 * since its last successful one give 20 s, 40 s, 80 s... counted from the newest failure; 0 when it may go now.
 */
export function evacuationBackoffMs(migrationsOfVmi: readonly Vmim[], now = Date.now()): number {
  const evac = migrationsOfVmi
    .filter((m) => m.metadata.annotations?.[EVACUATION_MIGRATION_ANNOTATION] !== undefined)
    .filter((m) => !m.metadata.deletionTimestamp)
    .sort((a, b) => created(b) - created(a));
  let backoff = 0;
  let lastFailed: number | undefined;
  for (const m of evac) {
    if (phaseOf(m) === 'Succeeded') break;
    if (phaseOf(m) !== 'Failed') continue;
    backoff = backoff === 0 ? EVACUATION_BACKOFF_MS : backoff * 2;
    lastFailed ??= failedAt(m);
  }
  if (backoff === 0 || lastFailed === undefined) return 0;
  return Math.max(0, lastFailed + backoff - now);
}
const created = (m: Vmim) => Date.parse(m.metadata.creationTimestamp ?? '') || 0;
const failedAt = (m: Vmim) => {
  const ts = m.status?.phaseTransitionTimestamps?.find((t) => t.phase === 'Failed')?.phaseTransitionTimestamp;
  return Date.parse(ts ?? '') || created(m);
};

/** The migration the evacuation controller creates for `vmi` leaving `node`. */
export function evacuationMigration(vmi: Vmi, node: string): Vmim {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstanceMigration',
    metadata: {
      generateName: EVACUATION_MIGRATION_PREFIX,
      namespace: vmi.metadata.namespace,
      annotations: { [EVACUATION_MIGRATION_ANNOTATION]: node },
    },
    spec: { vmiName: vmi.metadata.name! },
  } as Vmim;
}

/** Creates the migrations of the VMIs marked for evacuation, one node (the queue's key) at a time. */
export class EvacuationController {
  /** node names */
  readonly queue = new WorkQueue<string>();
  /** node -> evacuation migrations created, until the informer shows them */
  readonly expectations = new ControllerExpectations();

  constructor(
    private readonly ctx: ControllerContext,
    private readonly vmims: Informer<Vmim>,
    /** whether the node exists (a VMI marked for a deleted node is the node controller's) */
    private readonly nodeExists: (name: string) => boolean,
  ) {}

  private clusterStrategy(): EvictionStrategy | undefined {
    return this.ctx.clusterDefaults().evictionStrategy;
  }

  /** Wakes the node of a marked VMI on its events, and on its migrations' events. */
  wire(): void {
    const { ctx } = this;
    const byVmi = (vmi: Vmi | undefined) => {
      const node = vmi?.status?.nodeName;
      if (node && vmi.status?.evacuationNodeName) this.queue.add(node);
    };
    ctx.vmis.onChange(byVmi);
    this.vmims.onAdd((m) => {
      const node = m.metadata.annotations?.[EVACUATION_MIGRATION_ANNOTATION];
      if (node !== undefined) {
        this.expectations.creationObserved(node);
        this.queue.add(node);
      }
      byVmi(ctx.vmis.get(m.metadata.namespace, m.spec.vmiName));
    });
    this.vmims.onUpdate((m) => byVmi(ctx.vmis.get(m.metadata.namespace, m.spec.vmiName)));
    this.vmims.onDelete((m) => byVmi(ctx.vmis.get(m.metadata.namespace, m.spec.vmiName)));
  }

  /** The VMIs of `node` to migrate now; the smallest backoff of the others (ms; 0: none waits). */
  candidates(node: string): { vmis: Vmi[]; retryAfterMs: number } {
    const { ctx } = this;
    const out: Vmi[] = [];
    let retryAfterMs = 0;
    for (const vmi of ctx.vmis.list()) {
      const s = vmi.status;
      if (s?.nodeName !== node || s.evacuationNodeName !== node || isVmiMigrating(vmi)) continue;
      if (isFinal(vmi) || vmi.metadata.deletionTimestamp) continue;
      if (!migratableOnEviction(vmi, this.clusterStrategy()) || !isLiveMigratable(vmi)) continue;
      const mine = this.vmims
        .list(vmi.metadata.namespace)
        .filter((m) => m.spec.vmiName === vmi.metadata.name);
      if (mine.some((m) => !isMigrationFinal(m))) continue;
      // the Pods of an earlier migration still going
      if (ctx.podsOfVmi(vmi.metadata.uid ?? '').filter(isPodActive).length > 1) continue;
      const wait = evacuationBackoffMs(mine);
      if (wait > 0) {
        retryAfterMs = retryAfterMs === 0 ? wait : Math.min(retryAfterMs, wait);
        continue;
      }
      out.push(vmi);
    }
    return { vmis: out, retryAfterMs };
  }

  async reconcile(node: string): Promise<void> {
    const { ctx } = this;
    if (!this.nodeExists(node)) {
      this.expectations.deleteExpectations(node);
      return;
    }
    if (!this.expectations.satisfiedExpectations(node)) return;
    const { vmis, retryAfterMs } = this.candidates(node);
    if (retryAfterMs > 0) this.queue.addAfter(node, retryAfterMs);
    if (vmis.length === 0) return;
    ctx.log.info('evacuating VMIs from node', { node, vmis: vmis.map((v) => keyOf(v)) });
    this.expectations.expectCreations(node, vmis.length);
    const errors: string[] = [];
    await Promise.all(
      vmis.map(async (vmi) => {
        try {
          const m = await ctx.client.create<Vmim>(
            VMIMS,
            vmi.metadata.namespace,
            evacuationMigration(vmi, node),
          );
          ctx.recorder.event(vmi, 'Normal', 'SuccessfulCreate', `Created Migration ${m.metadata.name}`);
        } catch (e) {
          this.expectations.creationObserved(node);
          ctx.recorder.event(
            vmi,
            'Warning',
            'FailedCreate',
            `Error creating a Migration: ${errorMessage(e)}`,
          );
          errors.push(`${keyOf(vmi)}: ${errorMessage(e)}`);
        }
      }),
    );
    if (errors.length) throw new Error(`creating evacuation migrations: ${errors.join('; ')}`);
  }
}
