// @kubevirt-ts/controller-runtime: the control-plane plumbing shared by virt-controller and virt-handler.
export {
  WorkQueue,
  ExponentialFailureRateLimiter,
  runWorkers,
  type RateLimiter,
  type WorkQueueOptions,
  type WorkerLogger,
} from './workqueue.js';
export { closeServer } from './server.js';
export { ControllerExpectations, EXPECTATIONS_TIMEOUT_MS, type Expectation } from './expectations.js';
export {
  KubeClient,
  KubeApiError,
  resourcePath,
  isNotFound,
  isConflict,
  isAlreadyExists,
  PODS,
  SECRETS,
  MUTATING_WEBHOOKS,
  VALIDATING_WEBHOOKS,
  API_SERVICES,
  DAEMONSETS,
  DEPLOYMENTS,
  KUBEVIRTS,
  LEASES,
  VMS,
  VMIS,
  VMIMS,
  type KubeObject,
  type KubeList,
  type ObjectMeta,
  type Resource,
  type ListOptions,
  type PatchType,
  type WatchEvent,
} from './client.js';
export {
  caBundleTargets,
  caBundlesOf,
  caBundlePatch,
  type CaBundleNames,
  type CaBundleCarrier,
} from './ca-bundles.js';
export { LiteKubeConfig, KubeConfigError, type ClusterAccess } from './kubeconfig.js';
export { Informer, keyOf, splitKey, type InformerOptions, type Handler } from './informer.js';
export { updateIfChanged, type UpdateIfChangedOptions, type UpdateResult } from './status.js';
export { deepEqual, clone } from './equal.js';
export { LeaderElector, type LeaderElectorOptions, type Lease } from './leader.js';
export { MetricsRegistry, Counter, Gauge, Histogram, PROMETHEUS_CONTENT_TYPE } from './metrics.js';
export { EventRecorder, EVENTS, type EventRecorderOptions, type EventSubject } from './events.js';
