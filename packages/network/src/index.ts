export { NetworkSetupError, run, ipJson, setSysctl } from './exec.js';
export type { NetnsOption } from './exec.js';
export {
  planPodNetwork,
  guestAddresses,
  guestAddresses6,
  netmask,
  NetworkConfigError,
  DEFAULT_VM_CIDR,
  DEFAULT_VM_IPV6_CIDR,
  BRIDGE_FAKE_IP,
  LAUNCHER_UID,
} from './plan.js';
export type { PodNetworkPlan, PodBinding, Binding, ForwardedPort } from './plan.js';
export {
  setupPodNetwork,
  teardownPodNetwork,
  masqueradeRuleset,
  parsePodNetworkConfig,
  NFT_TABLE,
} from './phase1.js';
export type { PodNetworkConfig, Phase1Options, Route } from './phase1.js';
export {
  startDhcpServer,
  startDhcp6Server,
  startGuestDhcp,
  leaseConfig,
  lease6Config,
  withGuestMac,
} from './phase2.js';
export {
  dhcpReply,
  parseDhcpRequest,
  encodeDomainSearch,
  encodeClasslessRoutes,
  DhcpPacketError,
  MessageType,
} from './dhcp.js';
export type { DhcpLeaseConfig, DhcpRequest, DhcpAction } from './dhcp.js';
export type { DhcpOptions, DhcpServer, Dhcp6Options, Dhcp6Server, GuestDhcpOptions } from './phase2.js';
export {
  dhcp6Reply,
  parseDhcp6Request,
  parseDhcp6Message,
  parseOptions6,
  encodeOption6,
  duidLL,
  ipv6Bytes,
  ipv6String,
  Msg6,
  Opt6,
  Status6,
  DHCP6_SERVER_PORT,
  DHCP6_CLIENT_PORT,
  ALL_DHCP_SERVERS,
} from './dhcp6.js';
export type {
  Dhcp6LeaseConfig,
  Dhcp6Request,
  Dhcp6Action,
  Dhcp6Message,
  IaRequest,
  Option6,
} from './dhcp6.js';
export { parseResolvConf, readResolvConf } from './resolv.js';
export type { DnsConfig } from './resolv.js';
export { podNetworkConfigFile, writePodNetworkConfig } from './config-file.js';
export { startPasst, passtArgs, PasstError } from './passt.js';
export type { PasstOptions, PasstProcess } from './passt.js';
