// @kubevirt-ts/operator: virt-operator's logic. The KubeVirt CR's status from the components' rollout and the
// configuration, as upstream's virt-operator reports it; the CA the API server trusts for the webhooks and the
// subresource API, published from the webhook certificate Secret; the common instance types and preferences.
export { CaBundlePublisher, type CaBundleOptions } from './ca-bundles.js';
export {
  CommonInstancetypes,
  commonInstancetypesBundle,
  upToDate,
  MANAGED_BY_LABEL,
  MANAGED_BY_OPERATOR,
  COMPONENT_LABEL,
  COMPONENT,
  INSTALL_STRATEGY_VERSION_ANNOTATION,
  MANAGED_SELECTOR,
  CLUSTER_INSTANCETYPES,
  CLUSTER_PREFERENCES,
  type BundleObject,
  type BundlePart,
  type CommonInstancetypesOptions,
  type ConfigurationSource,
} from './common-instancetypes.js';
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
