export { NetworkSetupError, run, ipJson } from './exec.js';
export type { NetnsOption } from './exec.js';
export {
  planPodNetwork,
  guestAddresses,
  netmask,
  NetworkConfigError,
  DEFAULT_VM_CIDR,
  BRIDGE_FAKE_IP,
  LAUNCHER_UID,
} from './plan.js';
export type { PodNetworkPlan, PodBinding, Binding, ForwardedPort } from './plan.js';
export { setupPodNetwork, teardownPodNetwork, masqueradeRuleset, NFT_TABLE } from './phase1.js';
export type { PodNetworkConfig, Phase1Options, Route } from './phase1.js';
export { startDhcpServer, dnsmasqArgs } from './phase2.js';
export type { DhcpOptions, DhcpServer } from './phase2.js';
export { parseResolvConf, readResolvConf } from './resolv.js';
export type { DnsConfig } from './resolv.js';
