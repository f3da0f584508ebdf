// @kubevirt-ts/operator: virt-operator's logic. The KubeVirt CR's status from the components' rollout and the
// configuration, as upstream's virt-operator reports it.
export { VirtOperator, type OperatorOptions } from './operator.js';
export {
  kubeVirtStatus,
  controllerNotReady,
  handlerNotReady,
  REASONS,
  type Components,
  type DaemonSet,
  type Deployment,
  type StatusOptions,
} from './status.js';
