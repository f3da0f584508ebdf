// @kubevirt-ts/virt-controller-core: the VM and VMI controllers of virt-controller.
export { VirtController, CONFIG_NAME, CONFIG_NAMESPACE, type VirtControllerOptions } from './manager.js';
export { VmController, startBackoffSeconds, MAX_CRASHLOOP_BACKOFF_SECONDS } from './vm.js';
export { VmiController, isPodReady, isPodDownOrGoingDown } from './vmi.js';
export * from './common.js';
export type { ControllerContext, Pod, PodContainerStatus } from './context.js';
export {
  mutate,
  validate,
  review,
  formatFieldError,
  type AdmissionRequest,
  type AdmissionResponse,
  type AdmissionReview,
} from './admission.js';
export {
  startWebhookServer,
  MUTATE_PATH,
  VALIDATE_PATH,
  type WebhookServer,
  type WebhookServerOptions,
} from './webhook.js';
