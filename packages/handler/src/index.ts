export * from './status.js';
export * from './launchers.js';
export * from './domain-cache.js';
export * from './notify-pipe.js';
export * from './runner.js';
export * from './metrics.js';
export * from './kube.js';
export {
  VmiController,
  defaultNetworkSetup,
  syncOptions,
  minimalVmi,
  type ControllerOptions,
  type KubeWriter,
  type NetworkSetup,
} from './controller.js';
export { Handler, defaultDirs, type HandlerOptions } from './handler.js';
export * from './device-plugin.js';
