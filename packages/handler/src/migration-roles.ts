/**
 * The pure rules of virt-handler's migration roles (upstream's pkg/virt-handler/vm.go, v1.1.0): which
 * node plays which role for a VMI, and what the source writes into `status.migrationState` from its
 * domain's migration metadata and at the hand-off. No I/O here (controller.ts acts on them).
 */
import type { MigrationState, VirtualMachineInstance } from '@kubevirt-ts/api';
import type { DomainModel, UpstreamMigrationOptions } from '@kubevirt-ts/cmd-protocol';
import type { EventToRecord } from './status.js';

/** upstream's v1.NodeNameLabel and v1.MigrationTargetNodeNameLabel */
export const LABEL_NODE_NAME = 'kubevirt.io/nodeName';
export const LABEL_MIGRATION_TARGET_NODE = 'kubevirt.io/migrationTargetNodeName';
export const LABEL_OUTDATED_LAUNCHER_IMAGE = 'kubevirt.io/outdatedLauncherImage';
/** how long the source waits, after the migration ended, for the target to report the domain (upstream: 60 s) */
export const TARGET_DOMAIN_TIMEOUT_MS = 60_000;

/**
 * MigrationOptions upstream's handler sends when the VMI's migration state carries no migrationConfiguration
 * (virt-controller writes the cluster config's at the hand-off): upstream's defaults (pkg/virt-config: unlimited
 * bandwidth, 150 s progress timeout, 150 s per GiB; v1.1.0 had 800 s per GiB).
 */
export const DEFAULT_MIGRATION_OPTIONS: UpstreamMigrationOptions = {
  Bandwidth: '0',
  ProgressTimeout: 150,
  CompletionTimeoutPerGiB: 150,
  UnsafeMigration: false,
  AllowAutoConverge: false,
  AllowPostCopy: false,
  ParallelMigrationThreads: null,
};

/** upstream's v1.MultiThreadedQemuMigrationAnnotation */
const THREADS_ANNOTATION = 'kubevirt.io/multiThreadedQemuMigration';

/** The options for MigrateVirtualMachine: the defaults, the VMI's migrationConfiguration, the threads annotation. */
export function migrationOptions(
  vmi: VirtualMachineInstance,
  defaults: UpstreamMigrationOptions = DEFAULT_MIGRATION_OPTIONS,
): UpstreamMigrationOptions {
  const o = { ...defaults };
  const c = (vmi.status?.migrationState as { migrationConfiguration?: Record<string, unknown> } | undefined)
    ?.migrationConfiguration;
  if (c) {
    if (c.bandwidthPerMigration !== undefined) o.Bandwidth = String(c.bandwidthPerMigration);
    if (typeof c.progressTimeout === 'number') o.ProgressTimeout = c.progressTimeout;
    if (typeof c.completionTimeoutPerGiB === 'number') o.CompletionTimeoutPerGiB = c.completionTimeoutPerGiB;
    if (typeof c.unsafeMigrationOverride === 'boolean') o.UnsafeMigration = c.unsafeMigrationOverride;
    if (typeof c.allowAutoConverge === 'boolean') o.AllowAutoConverge = c.allowAutoConverge;
    if (typeof c.allowPostCopy === 'boolean') o.AllowPostCopy = c.allowPostCopy;
  }
  const threads = vmi.metadata.annotations?.[THREADS_ANNOTATION];
  if (threads !== undefined && /^\d+$/.test(threads)) o.ParallelMigrationThreads = Number(threads);
  return o;
}

/** This node is the target of the VMI's migration and does not own the VMI yet (upstream's isPreMigrationTarget). */
export function isPreMigrationTarget(vmi: VirtualMachineInstance, node: string): boolean {
  const target = vmi.metadata.labels?.[LABEL_MIGRATION_TARGET_NODE];
  return !!target && target !== vmi.status?.nodeName && target === node;
}

/** This node runs the VMI and the target listens: it migrates (upstream's isMigrationSource). */
export function isMigrationSource(vmi: VirtualMachineInstance, node: string): boolean {
  const ms = vmi.status?.migrationState;
  return !!ms && ms.sourceNode === node && !!ms.targetNodeAddress && !ms.completed;
}

/** The migration has started and not ended (upstream's migrations.IsMigrating). */
export function isMigrating(ms: MigrationState | undefined): boolean {
  return !!ms?.startTimestamp && !ms.endTimestamp && !ms.completed && !ms.failed;
}

/** The migration is over, either way: the proxies can go (upstream's handlePostMigrationProxyCleanup). */
export function migrationOver(ms: MigrationState | undefined): boolean {
  return !ms || !!ms.completed || !!ms.failed;
}

/** The source domain left by migration: Shutoff with reason Migrated. */
export function domainMigrated(domain: DomainModel | undefined): boolean {
  return !!domain && domain.status.status === 'Shutoff' && domain.status.reason === 'Migrated';
}

/** The migrated domain runs on the target (Running, or paused by the user). */
export function domainIsActiveOnTarget(domain: DomainModel | undefined): boolean {
  if (!domain) return false;
  return (
    domain.status.status === 'Running' ||
    (domain.status.status === 'Paused' && domain.status.reason === 'User')
  );
}

/** The source's migration metadata of this migration (same migration uid), if the domain has it. */
function metadataOf(ms: MigrationState | undefined, domain: DomainModel | undefined) {
  const m = domain?.migration;
  return ms && m && m.uid && m.uid === ms.migrationUid ? m : undefined;
}

/** The source launcher started this migration already (upstream's isMigrationInProgress). */
export function migrationStarted(ms: MigrationState | undefined, domain: DomainModel | undefined): boolean {
  return !!metadataOf(ms, domain)?.startTimestamp;
}

/**
 * Copies the source domain's migration metadata into `ms` (upstream's setMigrationProgressStatus):
 * startTimestamp and endTimestamp once, abortStatus, completed, failed, mode, and the failure reason.
 * Returns the event to record when the migration just failed.
 */
export function applyMigrationProgress(
  ms: MigrationState,
  domain: DomainModel | undefined,
): EventToRecord | undefined {
  const m = metadataOf(ms, domain);
  if (!m) return undefined;
  let event: EventToRecord | undefined;
  if (!ms.endTimestamp && m.endTimestamp && m.failed)
    event = {
      type: 'Warning',
      reason: 'Migrated',
      message: `VirtualMachineInstance migration uid ${m.uid} failed. reason:${m.failureReason ?? ''}`,
    };
  if (!ms.startTimestamp && m.startTimestamp) ms.startTimestamp = m.startTimestamp;
  if (!ms.endTimestamp && m.endTimestamp) ms.endTimestamp = m.endTimestamp;
  if (m.abortStatus) ms.abortStatus = m.abortStatus;
  else delete ms.abortStatus;
  ms.completed = !!m.completed;
  ms.failed = !!m.failed;
  if (m.failureReason) (ms as Record<string, unknown>).failureReason = m.failureReason;
  if (m.mode) ms.mode = m.mode;
  return event;
}

export interface SourceHandOff {
  status: NonNullable<VirtualMachineInstance['status']>;
  events: EventToRecord[];
  /** the node the VMI moves to (labels to write after the status): set only on a hand-off */
  handOffTo?: string;
  /** look again after this long (waiting for the target to see the domain) */
  requeueMs?: number;
}

/**
 * The source's status once its domain is Shutoff/Migrated (upstream's migrationSourceUpdateVMIStatus):
 * endTimestamp; when the target has reported the domain running (targetNodeDomainDetected and
 * targetNodeDomainReadyTimestamp), the hand-off (nodeName -> target, completed, launcher image version
 * cleared); no target known, or no report within 60 s of the end -> Failed.
 */
export function sourceAfterMigration(
  vmi: VirtualMachineInstance,
  domain: DomainModel,
  nowIso: string,
  nowMs: number,
  timeoutMs = TARGET_DOMAIN_TIMEOUT_MS,
): SourceHandOff {
  const status = structuredClone(vmi.status ?? {});
  const events: EventToRecord[] = [];
  const ms = status.migrationState;
  if (!ms) return { status, events }; // a domain migrated away with no migration known: nothing to say
  const e = applyMigrationProgress(ms, domain);
  if (e) events.push(e);
  ms.endTimestamp ??= nowIso;
  const host = ms.targetNode ?? '';
  const fail = (message: string) => {
    status.phase = 'Failed';
    ms.completed = true;
    ms.failed = true;
    events.push({ type: 'Warning', reason: 'Migrated', message });
  };
  if (!host) {
    fail('The VirtualMachineInstance migrated to unknown host.');
    return { status, events };
  }
  if (!(ms.targetNodeDomainDetected && ms.targetNodeDomainReadyTimestamp)) {
    const left = Date.parse(ms.endTimestamp) + timeoutMs - nowMs;
    if (!(left > 0)) {
      fail(
        "The VirtualMachineInstance's domain was never observed on the target after the migration completed within the timeout period.",
      );
      return { status, events };
    }
    return { status, events, requeueMs: Math.min(left, 5000) };
  }
  // the migration ACK: the target has seen the domain running
  status.nodeName = host;
  delete status.launcherContainerImageVersion;
  delete (status as Record<string, unknown>).evacuationNodeName;
  ms.completed = true;
  (status as Record<string, unknown>).migrationTransport = 'Unix';
  events.push({
    type: 'Normal',
    reason: 'Migrated',
    message: `The VirtualMachineInstance migrated to node ${host}.`,
  });
  return { status, events, handOffTo: host };
}
