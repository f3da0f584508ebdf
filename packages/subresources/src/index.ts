// @kubevirt-ts/subresources: the aggregated API subresources.kubevirt.io/v1.
export {
  startSubresourceServer,
  loadRequestHeaderConfig,
  apiResourceList,
  versionInfo,
  GROUP,
  VERSION,
  GROUP_VERSION,
  API_SERVICE,
  SERVICE,
  type RequestHeaderConfig,
  type SubresourceServer,
  type SubresourceServerOptions,
} from './server.js';
export {
  Subresources,
  VMS,
  VMIS,
  VMIMS,
  PODS,
  NODE_CONNECTOR_MISSING,
  type NodeConnector,
  type VmVerb,
  type VmiVerb,
  STREAM_KINDS,
  type StreamKind,
  type StreamRequest,
  type UpgradedStream,
} from './verbs.js';
export * from './status.js';
export {
  handlerConnector,
  HANDLER_TLS_NAME,
  type HandlerConnector,
  type HandlerConnectorOptions,
} from './handler-connector.js';
