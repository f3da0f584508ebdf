// @kubevirt-ts/virt-controller-core: the VM and VMI controllers of virt-controller.
export { VirtController, CONFIG_NAMESPACE, type VirtControllerOptions } from './manager.js';
export { VmController, startBackoffSeconds, MAX_CRASHLOOP_BACKOFF_SECONDS } from './vm.js';
export { VmiController, isPodReady, isPodDownOrGoingDown } from './vmi.js';
export {
  MigrationController,
  MIGRATION_FINALIZER,
  LABEL_MIGRATION_JOB_UID,
  LABEL_MIGRATION_TARGET_NODE,
  ANNOTATION_MIGRATION_JOB_NAME,
  CONDITION_ABORT_REQUESTED,
  DEFAULT_PARALLEL_MIGRATIONS_PER_CLUSTER,
  DEFAULT_PARALLEL_OUTBOUND_MIGRATIONS_PER_NODE,
  isMigrationFinal,
  isMigrationRunning,
  type MigrationLimits,
  type MigrationPhase,
  type Vmim,
} from './migration.js';
export {
  ReplicaSetController,
  VMIRSS,
  BURST_REPLICAS,
  deletionOrder,
  setControllerOwner,
  replicaConditions,
  type ControllerOwnerRef,
  type Vmirs,
} from './replicaset.js';
export {
  PoolController,
  POOLS,
  poolVmName,
  poolVmIndex,
  indexVmSpec,
  poolDeletionOrder,
  poolOwnerReference,
  type Pool,
} from './pool.js';
export {
  NodeController,
  NODES,
  HEARTBEAT_ANNOTATION,
  SCHEDULABLE_LABEL,
  REASON_NODE_UNRESPONSIVE,
  DEFAULT_HEARTBEAT_TIMEOUT_MS,
  DEFAULT_NODE_RECHECK_MS,
  isPodAlive,
  type NodeControllerOptions,
} from './node.js';
export * from './common.js';
export type { ControllerContext, Pod, PodContainerStatus } from './context.js';
export {
  mutate,
  mutateWithPresets,
  PRESETS,
  validate,
  migrationCreateDenied,
  validateWithInstancetypes,
  review,
  formatFieldError,
  reservedLabelErrors,
  componentUsers,
  RESERVED_VMI_LABELS,
  COMPONENT_SERVICE_ACCOUNTS,
  type ValidateOptions,
  type AdmissionRequest,
  type AdmissionResponse,
  type AdmissionReview,
} from './admission.js';
export {
  findVmSpecs,
  storeVmRevisions,
  instancetypeAnnotations,
  INSTANCETYPES,
  CLUSTER_INSTANCETYPES,
  PREFERENCES,
  CLUSTER_PREFERENCES,
  CONTROLLER_REVISIONS,
  type VmSpecs,
} from './instancetype.js';
export {
  startWebhookServer,
  MUTATE_PATH,
  VALIDATE_PATH,
  type WebhookServer,
  type WebhookServerOptions,
} from './webhook.js';
export { createCA, createServingCert, splitPem, type KeyPair } from './certs.js';
export {
  ensureHandlerCertificates,
  HandlerCertManager,
  DEFAULT_CA_PROPAGATION_MS,
  DEFAULT_HANDLER_CA_VALIDITY_MS,
  DEFAULT_HANDLER_CERT_VALIDITY_MS,
  NEXT_CA_PUBLISHED_ANNOTATION,
  type HandlerCertOptions,
  HANDLER_CA_SECRET,
  HANDLER_CERTS_SECRET,
  HANDLER_SERVER_NAME,
  HANDLER_CLIENT_CERTS_SECRET,
  HANDLER_CLIENT_NAME,
  CONTROLLER_CLIENT_NAME,
  type HandlerClientTls,
} from './handler-certs.js';
export {
  WebhookCertManager,
  startManagedWebhooks,
  serviceDnsNames,
  SECRETS,
  MUTATING_WEBHOOKS,
  VALIDATING_WEBHOOKS,
  MANAGED_BY_ANNOTATION,
  MANAGED_BY,
  DEFAULT_CA_VALIDITY_MS,
  DEFAULT_CERT_VALIDITY_MS,
  DEFAULT_RENEW_AFTER,
  type WebhookCertOptions,
  type ManagedWebhooksOptions,
} from './webhook-certs.js';
