// What a VMI asks of the Pod network: which interface sits on the pod network, with which binding,
// which ports are forwarded. Pure: no system access.
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { isIPv6 } from 'node:net';
import { LAUNCHER_UID, podLayout } from '@kubevirt-ts/converter';
import { ipv6Bytes, ipv6String } from './dhcp6.js';

export class NetworkConfigError extends Error {
  constructor(
    readonly path: string,
    reason: string,
  ) {
    super(`${path}: ${reason}`);
    this.name = 'NetworkConfigError';
  }
}

/** Bindings set up in the Pod's network namespace by phase 1 (passt needs none: the launcher runs passt). */
export type PodBinding = 'masquerade' | 'bridge';
export type Binding = PodBinding | 'passt';

export interface ForwardedPort {
  protocol: 'tcp' | 'udp';
  port: number;
}

/** Upstream's masquerade subnet: the guest is .2, the gateway (the bridge) is .1. */
export const DEFAULT_VM_CIDR = '10.0.2.0/24';
/** Upstream's IPv6 masquerade subnet (when the Pod has IPv6): the guest is ::2, the gateway (the bridge) ::1. */
export const DEFAULT_VM_IPV6_CIDR = 'fd10:0:2::/120';
/** Link-local address on the bridge of the bridge binding (the guest holds the Pod IP). */
export const BRIDGE_FAKE_IP = '169.254.75.10';
/** The launcher's user: the tap belongs to it so its unprivileged QEMU can open it (the converter's Pod layout owns it). */
export { LAUNCHER_UID };

export interface PodNetworkPlan {
  binding: Binding;
  /** index in spec.domain.devices.interfaces (names the tap) */
  interfaceIndex: number;
  interfaceName: string;
  /** the Pod's interface (eth0 in a Pod) */
  podInterface: string;
  /** bridge between the tap and the guest side (masquerade) or the Pod interface (bridge) */
  bridge: string;
  /** tap device the domain's <interface> targets (the converter's name for it) */
  tap: string;
  /** masquerade: forwarded ports; empty = every port */
  ports: ForwardedPort[];
  /** masquerade: the guest's subnet (spec.networks[].pod.vmNetworkCIDR, else 10.0.2.0/24) */
  vmCidr: string;
  /** masquerade, used when the Pod has IPv6: spec.networks[].pod.vmIPv6NetworkCIDR, else fd10:0:2::/120 */
  vmIpv6Cidr: string;
}

/** The plan for the VMI's pod-network interface; undefined when it has none (or it is absent). */
export function planPodNetwork(
  vmi: VirtualMachineInstance,
  podInterface = 'eth0',
): PodNetworkPlan | undefined {
  const networks = vmi.spec.networks ?? [];
  networks.forEach((n, i) => {
    if (n.multus)
      throw new NetworkConfigError(
        `spec.networks[${i}].multus`,
        'Multus secondary networks are not supported yet (only the pod network is)',
      );
  });
  const ifaces = vmi.spec.domain.devices?.interfaces ?? [];
  const podNet = networks.find((n) => n.pod);
  if (!podNet) return undefined;
  const index = ifaces.findIndex((f) => f.name === podNet.name);
  if (index < 0) return undefined;
  const iface = ifaces[index]!;
  if (iface.state === 'absent') return undefined;
  const p = `spec.domain.devices.interfaces[${index}]`;
  let binding: Binding;
  if (iface.masquerade) binding = 'masquerade';
  else if (iface.passt || iface.binding?.name === 'passt') binding = 'passt';
  else if (iface.bridge || !(iface.slirp || iface.sriov || iface.macvtap || iface.binding))
    binding = 'bridge';
  else {
    const b = iface.slirp ? 'slirp' : iface.sriov ? 'sriov' : iface.macvtap ? 'macvtap' : 'binding';
    throw new NetworkConfigError(`${p}.${b}`, `the ${b} binding is not supported on the pod network`);
  }
  const seen = new Set<string>();
  const ports = (iface.ports ?? []).map((pt, j): ForwardedPort => {
    const protocol = (pt.protocol ?? 'TCP').toLowerCase() as 'tcp' | 'udp';
    if (!Number.isInteger(pt.port) || pt.port < 1 || pt.port > 65535)
      throw new NetworkConfigError(`${p}.ports[${j}].port`, `must be between 1 and 65535, got ${pt.port}`);
    const key = `${protocol}/${pt.port}`;
    if (seen.has(key)) throw new NetworkConfigError(`${p}.ports[${j}].port`, `duplicate port ${key}`);
    seen.add(key);
    return { protocol, port: pt.port };
  });
  const vmCidr = podNet.pod?.vmNetworkCIDR || DEFAULT_VM_CIDR;
  const vmIpv6Cidr = podNet.pod?.vmIPv6NetworkCIDR || DEFAULT_VM_IPV6_CIDR;
  if (binding === 'masquerade') {
    const np = `spec.networks[${networks.indexOf(podNet)}].pod`;
    guestAddresses(vmCidr, `${np}.vmNetworkCIDR`);
    guestAddresses6(vmIpv6Cidr, `${np}.vmIPv6NetworkCIDR`);
  }
  return {
    binding,
    interfaceIndex: index,
    interfaceName: iface.name,
    podInterface,
    bridge: `k6t-${podInterface}`,
    tap: podLayout.tapDevice(index),
    ports,
    vmCidr,
    vmIpv6Cidr,
  };
}

function toInt(ip: string): number {
  return ip.split('.').reduce((a, o) => a * 256 + Number(o), 0);
}
function toIp(n: number): string {
  return [24, 16, 8, 0].map((s) => Math.floor(n / 2 ** s) % 256).join('.');
}

/** Gateway (first host) and guest (second host) of an IPv4 CIDR with room for both. */
export function guestAddresses(
  cidr: string,
  path = 'vmNetworkCIDR',
): { gateway: string; guest: string; prefix: number } {
  const m = /^(\d{1,3}(?:\.\d{1,3}){3})\/(\d{1,2})$/.exec(cidr);
  const prefix = m ? Number(m[2]) : NaN;
  if (!m || m[1]!.split('.').some((o) => Number(o) > 255) || prefix > 30)
    throw new NetworkConfigError(path, `${JSON.stringify(cidr)} is not an IPv4 CIDR with room for two hosts`);
  const base = toInt(m[1]!) - (toInt(m[1]!) % 2 ** (32 - prefix));
  return { gateway: toIp(base + 1), guest: toIp(base + 2), prefix };
}

/** Gateway (first host, ::1) and guest (second host, ::2) of an IPv6 CIDR with room for both. */
export function guestAddresses6(
  cidr: string,
  path = 'vmIPv6NetworkCIDR',
): { gateway: string; guest: string; prefix: number } {
  const m = /^([0-9A-Fa-f:.]+)\/(\d{1,3})$/.exec(cidr);
  const prefix = m ? Number(m[2]) : NaN;
  if (!m || !isIPv6(m[1]!) || m[1]!.includes('.') || !(prefix <= 126))
    throw new NetworkConfigError(path, `${JSON.stringify(cidr)} is not an IPv6 CIDR with room for two hosts`);
  const hostBits = BigInt(128 - prefix);
  const base = (ip6ToBigInt(m[1]!) >> hostBits) << hostBits;
  return { gateway: bigIntToIp6(base + 1n), guest: bigIntToIp6(base + 2n), prefix };
}

// the address <-> 16 bytes conversions of the DHCPv6 code, read as one 128-bit number
const ip6ToBigInt = (ip: string): bigint => BigInt(`0x${ipv6Bytes(ip).toString('hex')}`);
const bigIntToIp6 = (n: bigint): string => ipv6String(Buffer.from(n.toString(16).padStart(32, '0'), 'hex'));

/** Dotted netmask of a prefix length. */
export function netmask(prefix: number): string {
  return toIp(prefix === 0 ? 0 : 2 ** 32 - 2 ** (32 - prefix));
}
