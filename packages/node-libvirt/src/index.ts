export * from './constants.js';
export { LibvirtError } from './errors.js';
export {
  Connection,
  Domain,
  migrateParamList,
  type AgentLifecycleEvent,
  type BlockStats,
  type ConnectionEvents,
  type DeviceEvent,
  type DomainInfo,
  type DomainRef,
  type DomainStateInfo,
  type DomainStatsRecord,
  type InterfaceAddresses,
  type InterfaceStats,
  type JobCompletedEvent,
  type JobInfo,
  type LifecycleEvent,
  type MigrateParams,
  type MigrationIterationEvent,
  type OpenOptions,
  type RebootEvent,
  type TypedParams,
} from './connection.js';
export {
  startSessionLibvirtd,
  confText,
  confValue,
  type ConfValue,
  type SessionLibvirtd,
  type SessionLibvirtdOptions,
  type SessionLogger,
} from './session.js';
export { qemuCapsDir, seedQemuCaps, saveQemuCaps } from './qemu-caps.js';
export {
  NATIVE_MONITOR,
  nativeMonitorArgs,
  execNativeMonitor,
  LAUNCHER_ENV_DEFAULTS,
  type NativeMonitorOptions,
} from './native-monitor.js';
