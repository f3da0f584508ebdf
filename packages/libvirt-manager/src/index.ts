export { DomainManager, contextWithOptions } from './manager.js';
export type { DomainManagerOptions, SyncOptions, ShutdownOptions, ShutdownResult } from './manager.js';
export { DomainWatcher } from './watcher.js';
export type { DomainWatcherOptions, DomainWatchEvent, WatchEventType, MigrationSource } from './watcher.js';
export { ConnectionHolder } from './connection.js';
export type { ConnectionSource } from './connection.js';
export { domainNameOf, splitDomainName, newDomain } from './domain.js';
export type { KubevirtDomain, DomainSpec } from './domain.js';
export {
  convState,
  convReason,
  statusFromLibvirt,
  isDomainDown,
  NON_EXISTENT,
  VirDomainState,
  VirDomainEventType,
} from './status.js';
export type {
  DomainStatus,
  LifeCycle,
  StateChangeReason,
  DomainInterfaceStatus,
  GuestOSInfo,
} from './status.js';
export {
  parseMigrationOptions,
  checkMigrationTarget,
  classifyVolumesForMigration,
  diskTargetsForMigration,
  isBlockMigration,
  DETECT_ZEROES_MIN_LIBVIRT,
  pauseForMigration,
  TCG_COHERENT_DIRTY_BITMAP_QEMU,
  UPSTREAM_MIGRATION_OPTION_FIELDS,
} from './migration.js';
export type { MigrationOptions, MigrationState, MigrationTarget, VolumeClasses } from './migration.js';
export { convertDomainStats } from './stats.js';
export type { DomainStats } from './stats.js';
export { buildGuestInfo } from './guest-info.js';
export type { GuestAgentInfo } from './guest-info.js';
export { isNotFound, isInvalidOperation, Vir, VirErrorCode } from './libvirt.js';
export type { LibvirtConnection, LibvirtDomain, LifecycleEvent, MigrateParams } from './libvirt.js';
export type { Logger } from '@kubevirt-ts/log';
