export * from './sockets.js';
export * from './errors.js';
export * from './backend.js';
export {
  toUpstreamDomain,
  fromUpstreamDomain,
  domainSpecXmlToGo,
  domainSpecGoToXml,
  type DomainModel,
  type DomainStatusModel,
  type MigrationModel,
  type GoJson,
} from './upstream/domain-json.js';
export { toUpstreamK8sEvent, fromUpstreamK8sEvent, type K8sEventModel } from './upstream/k8s-event.js';
export { toUpstreamDomainStats } from './upstream/stats-json.js';
export type { SocketOwner } from './grpc-util.js';
export { CmdServer, type CmdServerOptions } from './cmd-server.js';
export {
  CmdClient,
  CMD_VERSION,
  type CmdCallOptions,
  type CmdClientOptions,
  type ConnectOptions,
  type VmiInput,
  type VmOptionsInput,
} from './cmd-client.js';
export {
  NotifyServer,
  DOMAIN_EVENT_TYPES,
  type DomainEvent,
  type DomainEventType,
  type NotifyServerOptions,
} from './notify-server.js';
export {
  NotifyClient,
  type DomainEventInput,
  type NotifyClientOptions,
  type NotifyClientStats,
} from './notify-client.js';
/** The options CmdBackend methods receive (generated type). */
export type { VirtualMachineOptions } from './gen/kubevirt/cmd/v1/cmd.js';
/** Generated messages and service definitions (ts-proto). */
export * as cmdv1 from './gen/kubevirt/cmd/v1/cmd.js';
export * as cmdinfo from './gen/kubevirt/cmd/info/info.js';
export * as notifyv1 from './gen/kubevirt/notify/v1/notify.js';
