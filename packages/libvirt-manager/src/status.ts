// KubeVirt-style domain status: libvirt's virDomainState + reason code mapped to the
// LifeCycle / StateChangeReason strings upstream's virt-launcher reports
// (pkg/virt-launcher/virtwrap/api types and util.ConvState / util.ConvReason).

import { DomainEventType, DomainState } from '@kubevirt-ts/node-libvirt';

/** virDomainState (libvirt-domain.h): node-libvirt's DomainState. */
export const VirDomainState = DomainState;

/** The domain's life cycle as KubeVirt names it (api.LifeCycle). */
export type LifeCycle =
  'NoState' | 'Running' | 'Blocked' | 'Paused' | 'ShuttingDown' | 'Shutoff' | 'Crashed' | 'PMSuspended';

/** Why the domain is in its state (api.StateChangeReason). */
export type StateChangeReason =
  | 'Unknown'
  | 'NonExistent'
  // running
  | 'Booted'
  | 'Migrated'
  | 'Restored'
  | 'FromSnapshot'
  | 'Unpaused'
  | 'MigrationCanceled'
  | 'SaveCanceled'
  | 'Wakeup'
  | 'Crashed'
  | 'Postcopy'
  | 'PostcopyFailed'
  // paused
  | 'User'
  | 'Migration'
  | 'Save'
  | 'Dump'
  | 'IOError'
  | 'Watchdog'
  | 'ShuttingDown'
  | 'Snapshot'
  | 'StartingUp'
  | 'APIError'
  // shut off
  | 'Shutdown'
  | 'Destroyed'
  | 'Saved'
  | 'Failed'
  | 'Daemon'
  // crashed
  | 'Panicked';

const LIFECYCLE: readonly LifeCycle[] = [
  'NoState',
  'Running',
  'Blocked',
  'Paused',
  'ShuttingDown',
  'Shutoff',
  'Crashed',
  'PMSuspended',
];

// Reason tables indexed by libvirt's reason code for each state (virDomain<State>Reason enums).
const REASONS: Record<number, readonly StateChangeReason[]> = {
  [VirDomainState.NOSTATE]: ['Unknown'],
  [VirDomainState.RUNNING]: [
    'Unknown', // VIR_DOMAIN_RUNNING_UNKNOWN
    'Booted', // BOOTED
    'Migrated', // MIGRATED
    'Restored', // RESTORED
    'FromSnapshot', // FROM_SNAPSHOT
    'Unpaused', // UNPAUSED
    'MigrationCanceled', // MIGRATION_CANCELED
    'SaveCanceled', // SAVE_CANCELED
    'Wakeup', // WAKEUP
    'Crashed', // CRASHED
    'Postcopy', // POSTCOPY
    'PostcopyFailed', // POSTCOPY_FAILED
  ],
  [VirDomainState.BLOCKED]: ['Unknown'],
  [VirDomainState.PAUSED]: [
    'Unknown', // VIR_DOMAIN_PAUSED_UNKNOWN
    'User', // USER
    'Migration', // MIGRATION
    'Save', // SAVE
    'Dump', // DUMP
    'IOError', // IOERROR
    'Watchdog', // WATCHDOG
    'FromSnapshot', // FROM_SNAPSHOT
    'ShuttingDown', // SHUTTING_DOWN
    'Snapshot', // SNAPSHOT
    'Crashed', // CRASHED
    'StartingUp', // STARTING_UP
    'Postcopy', // POSTCOPY
    'PostcopyFailed', // POSTCOPY_FAILED
    'APIError', // API_ERROR
  ],
  [VirDomainState.SHUTDOWN]: ['Unknown', 'User'],
  [VirDomainState.SHUTOFF]: [
    'Unknown', // VIR_DOMAIN_SHUTOFF_UNKNOWN
    'Shutdown', // SHUTDOWN
    'Destroyed', // DESTROYED
    'Crashed', // CRASHED
    'Migrated', // MIGRATED
    'Saved', // SAVED
    'Failed', // FAILED
    'FromSnapshot', // FROM_SNAPSHOT
    'Daemon', // DAEMON
  ],
  [VirDomainState.CRASHED]: ['Unknown', 'Panicked'],
  [VirDomainState.PMSUSPENDED]: ['Unknown'],
};

/** libvirt virDomainState -> KubeVirt LifeCycle (unknown values -> NoState, as upstream). */
export function convState(state: number): LifeCycle {
  return LIFECYCLE[state] ?? 'NoState';
}

/** libvirt (state, reason) -> KubeVirt StateChangeReason (unknown codes -> Unknown). */
export function convReason(state: number, reason: number): StateChangeReason {
  return REASONS[state]?.[reason] ?? 'Unknown';
}

/** Status of a domain as KubeVirt reports it (api.DomainStatus; JSON field names as upstream). */
export interface DomainStatus {
  status: LifeCycle;
  reason: StateChangeReason;
  interfaces?: DomainInterfaceStatus[];
  osInfo?: GuestOSInfo;
  fsFreezeStatus?: { status: 'frozen' | 'thawed' | string };
}

export interface DomainInterfaceStatus {
  name?: string;
  mac?: string;
  ip?: string;
  ips?: string[];
  interfaceName?: string;
}

export interface GuestOSInfo {
  name?: string;
  kernelRelease?: string;
  version?: string;
  prettyName?: string;
  versionId?: string;
  kernelVersion?: string;
  machine?: string;
  id?: string;
}

export function statusFromLibvirt(state: number, reason: number): DomainStatus {
  return { status: convState(state), reason: convReason(state, reason) };
}

/** Status of a domain libvirt does not know (any more). */
export const NON_EXISTENT: Readonly<DomainStatus> = Object.freeze({
  status: 'NoState',
  reason: 'NonExistent',
});

/** Shut off / crashed: QEMU is not running (any more). */
export function isDomainDown(s: DomainStatus): boolean {
  return s.status === 'Shutoff' || s.status === 'Crashed' || s.status === 'NoState';
}

/** libvirt lifecycle event types (virDomainEventType: node-libvirt's DomainEventType) and the details the watcher cares about. */
export const VirDomainEventType = DomainEventType;
export const VIR_DOMAIN_EVENT_DEFINED_ADDED = 0;
export const VIR_DOMAIN_EVENT_STARTED_MIGRATED = 1;
