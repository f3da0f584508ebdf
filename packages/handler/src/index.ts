export * from './status.js';
export * from './launchers.js';
export * from './domain-cache.js';
export * from './notify-pipe.js';
export * from './metrics.js';
export * from './kube.js';
export {
  VmiController,
  syncOptions,
  minimalVmi,
  type ControllerOptions,
  type KubeWriter,
  type NetworkSetup,
  type BlockDeviceSetup,
  type MigrationRoleOptions,
  DEFAULT_LAUNCHER_LIBVIRT_SOCKET,
} from './controller.js';
export {
  Handler,
  defaultDirs,
  defaultMigrationAddress,
  type HandlerOptions,
  type HandlerMigrationOptions,
} from './handler.js';
/** uid launchers run as (the default of HandlerOptions.launcherUid; the converter's Pod layout owns it) */
export { LAUNCHER_UID } from '@kubevirt-ts/network';
export * from './migration-roles.js';
export * from './device-plugin.js';
export {
  MigrationProxyManager,
  MIGRATION_PORTS,
  type MigrationProxyOptions,
  type MigrationProxyStats,
  type MigrationTls,
} from './migration-proxy.js';
export * from './pod-network.js';
export * from './block-devices.js';
export * from './subresource-endpoint.js';
export * from './container-disks.js';
export * from './launcher-socket.js';
export * from './tls-files.js';
export * from './seccomp.js';
export * from './healthz.js';
