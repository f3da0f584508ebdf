// Phase 2, in the launcher (unprivileged but for NET_BIND_SERVICE, port 67): a small DHCP server for
// the guest, like upstream's launcher has. It runs in the caller's network namespace (the Pod's) and
// needs neither NET_ADMIN nor NET_RAW: replies are broadcast, so no ARP entry has to be injected.
//
// Sockets (Node cannot bind to a device): one on 0.0.0.0:67 receives the broadcasts, one on the
// bridge's own address :67 sends every reply to 255.255.255.255:68 (Linux routes a limited broadcast
// out of the device that owns the source address: the bridge) and receives unicast renewals.
import dgram from 'node:dgram';
import { readFileSync } from 'node:fs';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import type { Logger } from '@kubevirt-ts/log';
import { run, NetworkSetupError } from './exec.js';
import {
  dhcpReply,
  DhcpPacketError,
  messageTypeName,
  MessageType,
  DHCP_CLIENT_PORT,
  DHCP_SERVER_PORT,
  type DhcpLeaseConfig,
} from './dhcp.js';
import { parsePodNetworkConfig, type PodNetworkConfig } from './phase1.js';
import { planPodNetwork } from './plan.js';
import { readResolvConf, type DnsConfig } from './resolv.js';
import {
  ALL_DHCP_SERVERS,
  DHCP6_SERVER_PORT,
  dhcp6Reply,
  duidLL,
  msg6Name,
  type Dhcp6LeaseConfig,
} from './dhcp6.js';

export interface DhcpOptions {
  config: PodNetworkConfig;
  dns: DnsConfig;
  /** the guest's hostname (the VMI's name, or spec.hostname) */
  hostname?: string;
  /** answer only this MAC (the guest's NIC); absent: whoever asks on the bridge */
  mac?: string;
  log?: Logger;
  /** the server port (default 67; tests of the logic may use another) */
  port?: number;
}

export interface DhcpServer {
  /** the tap of the guest's NIC (from phase 1's config) */
  readonly tap: string;
  /** the DHCPv6 server beside it (masquerade in a Pod with IPv6; started by startGuestDhcp) */
  readonly v6?: Dhcp6Server;
  /**
   * bridge binding, an interface without macAddress (startGuestDhcp): the MAC its NIC must have, the Pod
   * interface's former one (see `withGuestMac`)
   */
  readonly guestNic?: { interfaceName: string; mac: string };
  /** from now on answer only this MAC (e.g. the one libvirt gave the guest's NIC) */
  restrictTo(mac: string): void;
  /** resolves with "ip mac [hostname]" of the first lease acknowledged */
  waitForLease(): Promise<string>;
  stop(): Promise<void>;
}

/** A hostname DHCP option 12 can carry: labels of letters, digits and '-'. */
const HOSTNAME =
  /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
const MAC = /^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$/;

/** What the server hands out for `o` (validated: a hostname or MAC that cannot be sent is refused). */
export function leaseConfig(o: DhcpOptions): DhcpLeaseConfig {
  const c = o.config;
  const g = c.guest;
  if (o.hostname !== undefined && (!HOSTNAME.test(o.hostname) || o.hostname.length > 253))
    throw new NetworkSetupError(`hostname ${JSON.stringify(o.hostname)} cannot be sent by DHCP`);
  if (o.mac !== undefined && !MAC.test(o.mac))
    throw new NetworkSetupError(`MAC address ${JSON.stringify(o.mac)} is not aa:bb:cc:dd:ee:ff`);
  return {
    serverAddress: c.serverAddress,
    address: g.address,
    prefix: g.prefix,
    ...(g.gateway ? { router: g.gateway } : {}),
    routes: g.routes
      .filter((r) => r.gateway && r.dst !== 'default')
      .map((r) => ({ dst: r.dst, gateway: r.gateway! })),
    mtu: c.mtu,
    dnsServers: o.dns.nameservers,
    searchDomains: o.dns.searchDomains,
    ...(o.hostname !== undefined ? { hostname: o.hostname } : {}),
    ...(o.mac !== undefined ? { mac: o.mac.toLowerCase() } : {}),
  };
}

function bindSocket(address: string, port: number): Promise<dgram.Socket> {
  const s = dgram.createSocket({ type: 'udp4', reuseAddr: true });
  return new Promise((resolve, reject) => {
    s.once('error', (e) => {
      s.close();
      reject(e);
    });
    s.bind({ address, port }, () => {
      s.removeAllListeners('error');
      resolve(s);
    });
  });
}

/**
 * Starts the DHCP server for the guest on the bridge phase 1 created and resolves once it listens;
 * rejects with a NetworkSetupError (the reason, e.g. the missing bridge or capability) leaving no
 * socket open.
 */
export async function startDhcpServer(o: DhcpOptions): Promise<DhcpServer> {
  const c = o.config;
  const lc = leaseConfig(o);
  const log = o.log;
  const port = o.port ?? DHCP_SERVER_PORT;
  // a missing bridge/tap means phase 1 did not run in this namespace
  for (const dev of [c.bridge, c.tap])
    await run('ip', ['link', 'show', 'dev', dev]).catch((e: Error) => {
      throw new NetworkSetupError(`${dev} does not exist: the Pod network is not set up (${e.message})`);
    });
  const sockets: dgram.Socket[] = [];
  const closeAll = () =>
    Promise.all(sockets.splice(0).map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  const fail = async (e: NodeJS.ErrnoException, what: string): Promise<never> => {
    await closeAll();
    const why =
      e.code === 'EACCES'
        ? 'permission denied (port 67 needs net.ipv4.ip_unprivileged_port_start <= 67 in the Pod, or CAP_NET_BIND_SERVICE)'
        : e.code === 'EADDRNOTAVAIL'
          ? `${c.serverAddress} is not an address here (the Pod network is not set up)`
          : e.code === 'EADDRINUSE'
            ? 'address already in use'
            : e.message;
    const err = new NetworkSetupError(`DHCP server for ${c.bridge} cannot bind ${what}: ${why}`);
    log?.error('DHCP server failed', { reason: err.message });
    throw err;
  };
  const any = await bindSocket('0.0.0.0', port).catch((e) => fail(e, `0.0.0.0:${port}`));
  sockets.push(any);
  const own = await bindSocket(c.serverAddress, port).catch((e) => fail(e, `${c.serverAddress}:${port}`));
  sockets.push(own);
  own.setBroadcast(true);

  let lease: string | undefined;
  const leaseWaiters: ((l: string) => void)[] = [];
  const onMessage = (socket: string, buf: Buffer, from: dgram.RemoteInfo) => {
    let action;
    try {
      action = dhcpReply(buf, lc);
    } catch (e) {
      if (!(e instanceof DhcpPacketError)) throw e;
      log?.warn('DHCP packet dropped', { from: `${from.address}:${from.port}`, reason: e.message });
      return;
    }
    const req = action.request;
    const fields = {
      mac: req.mac,
      xid: req.xid,
      request: messageTypeName(req.type),
      from: `${from.address}:${from.port}`,
      socket,
    };
    switch (action.kind) {
      case 'ignored':
        log?.debug('DHCP request ignored', { ...fields, reason: action.reason });
        return;
      case 'released':
        lease = undefined;
        log?.info('DHCP lease released', fields);
        return;
      case 'declined':
        log?.warn('the guest declined its address (in use on the link?)', { ...fields, ip: c.guest.address });
        return;
      case 'reply':
        own.send(action.packet, DHCP_CLIENT_PORT, '255.255.255.255', (err) => {
          if (err) {
            log?.warn('DHCP reply not sent', { ...fields, reason: err.message });
            return;
          }
          log?.debug('DHCP reply sent', { ...fields, reply: messageTypeName(action.type) });
          if (action.type === MessageType.ACK && req.type === MessageType.REQUEST) {
            const l = `${c.guest.address} ${req.mac}${o.hostname ? ` ${o.hostname}` : ''}`;
            if (lease === undefined) log?.info('DHCP lease', { ip: c.guest.address, mac: req.mac });
            lease = l;
            for (const w of leaseWaiters.splice(0)) w(l);
          }
        });
    }
  };
  for (const [s, bound] of [
    [any, '0.0.0.0'],
    [own, c.serverAddress],
  ] as const) {
    s.on('message', (buf, from) => onMessage(bound, buf, from));
    s.on('error', (e) => log?.warn('DHCP socket error', { reason: e.message }));
  }
  log?.info('DHCP server started', { bridge: c.bridge, guest: c.guest.address, server: c.serverAddress });
  let stopped: Promise<void> | undefined;
  return {
    tap: c.tap,
    restrictTo(mac: string) {
      if (!MAC.test(mac))
        throw new NetworkSetupError(`MAC address ${JSON.stringify(mac)} is not aa:bb:cc:dd:ee:ff`);
      if (lc.mac === mac.toLowerCase()) return;
      lc.mac = mac.toLowerCase();
      log?.info('DHCP server answers only the guest NIC', { mac: lc.mac });
    },
    waitForLease: () =>
      lease !== undefined ? Promise.resolve(lease) : new Promise((resolve) => leaseWaiters.push(resolve)),
    stop: () =>
      (stopped ??= closeAll().then(() => {
        log?.info('DHCP server stopped', { bridge: c.bridge });
      })),
  };
}

export interface GuestDhcpOptions {
  /** where phase 1 wrote the config of the pod-network interface named `interfaceName` */
  configFile(interfaceName: string): string;
  /** the Pod's resolv.conf (default /etc/resolv.conf; missing: no DNS options) */
  resolvConf?: string;
  log?: Logger;
  port?: number;
  /** the DHCPv6 server's port (default 547) */
  port6?: number;
}

/**
 * The launcher's phase 2 for a VMI: when its pod-network interface uses masquerade or bridge, reads
 * and checks the config phase 1 left for it and starts the DHCP server (hostname: spec.hostname, else
 * the VMI's name; only the interface's MAC when it has one), and the DHCPv6 server when phase 1 gave the guest
 * an IPv6 side (`v6` of the result). Resolves undefined when there is nothing
 * to serve. Rejects (NetworkConfigError/NetworkSetupError with the interface's path) when the config
 * is missing or wrong, or the server cannot start.
 */
export async function startGuestDhcp(
  vmi: VirtualMachineInstance,
  o: GuestDhcpOptions,
): Promise<DhcpServer | undefined> {
  const plan = planPodNetwork(vmi);
  if (!plan || plan.binding === 'passt') return undefined;
  const p = `spec.domain.devices.interfaces[${plan.interfaceIndex}]`;
  const file = o.configFile(plan.interfaceName);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new NetworkSetupError(
      `${p} (${plan.interfaceName}, ${plan.binding}): the Pod network is not set up: ${
        code === 'ENOENT'
          ? `${file} does not exist (virt-handler writes it before the first sync)`
          : `${file}: ${(e as Error).message}`
      }`,
    );
  }
  const config = parsePodNetworkConfig(text, plan, file);
  let dns: DnsConfig = { nameservers: [], searchDomains: [] };
  try {
    dns = readResolvConf(o.resolvConf);
  } catch (e) {
    o.log?.warn('no resolv.conf: the guest gets no DNS servers', { reason: (e as Error).message });
  }
  const iface = vmi.spec.domain.devices?.interfaces?.[plan.interfaceIndex];
  const hostname = (vmi.spec.hostname || vmi.metadata?.name || '').slice(0, 63) || undefined;
  // the bridge binding's MAC swap: without a macAddress of its own, the NIC takes the Pod interface's
  const swapped = !iface?.macAddress && config.moved?.mac ? config.moved.mac : undefined;
  const mac = iface?.macAddress ? iface.macAddress.replace(/-/g, ':').toLowerCase() : swapped;
  const started = await startDhcpServer({
    config,
    dns,
    ...(hostname ? { hostname } : {}),
    ...(mac ? { mac } : {}),
    log: o.log,
    port: o.port,
  });
  const v4: DhcpServer = swapped
    ? {
        tap: started.tap,
        guestNic: { interfaceName: plan.interfaceName, mac: swapped },
        restrictTo: (m) => started.restrictTo(m),
        waitForLease: () => started.waitForLease(),
        stop: () => started.stop(),
      }
    : started;
  if (!config.ipv6) return v4;
  // a Pod with IPv6 (masquerade): DHCPv6 beside DHCPv4; neither is left running when the other fails
  const v6 = await startDhcp6Server({ config, dns, log: o.log, port: o.port6 }).catch(async (e: unknown) => {
    await v4.stop();
    throw e;
  });
  return {
    tap: v4.tap,
    v6,
    ...(v4.guestNic ? { guestNic: v4.guestNic } : {}),
    restrictTo: (mac) => v4.restrictTo(mac),
    waitForLease: () => v4.waitForLease(),
    stop: () => Promise.all([v4.stop(), v6.stop()]).then(() => undefined),
  };
}

export interface Dhcp6Options {
  config: PodNetworkConfig;
  dns: DnsConfig;
  log?: Logger;
  /** the server port (default 547; tests of the logic may use another) */
  port?: number;
}

export interface Dhcp6Server {
  /** resolves with "address client-DUID" of the first address the guest was given in a REPLY */
  waitForLease(): Promise<string>;
  stop(): Promise<void>;
}

/** What the DHCPv6 server hands out for `o` (throws when the config has no IPv6 side). */
export function lease6Config(o: Dhcp6Options, bridgeMac: string): Dhcp6LeaseConfig {
  const v6 = o.config.ipv6;
  if (!v6) throw new NetworkSetupError(`the Pod network of ${o.config.bridge} has no IPv6 side`);
  return {
    serverDuid: duidLL(bridgeMac),
    address: v6.guest,
    dnsServers: o.dns.nameservers6 ?? [],
    searchDomains: o.dns.searchDomains,
  };
}

/**
 * Starts the DHCPv6 server (stateful, one IA_NA address: the guest's fd10:0:2::2) on the bridge phase 1
 * created, and resolves once it listens. Unprivileged: UDP port 547 is above the Pod's
 * net.ipv4.ip_unprivileged_port_start (67; the sysctl covers IPv6 too) and joining ff02::1:2 needs no
 * capability. The socket is bound to [::]:547 but joins the servers' group on the bridge only, so solicits
 * from other links (the Pod interface) are not delivered to it. Replies go to the client's link-local
 * address and port, out of the bridge. No router advertisements (see the README): the guest's default route
 * is its own to configure, as with upstream's launcher.
 */
export async function startDhcp6Server(o: Dhcp6Options): Promise<Dhcp6Server> {
  const c = o.config;
  const log = o.log;
  const port = o.port ?? DHCP6_SERVER_PORT;
  let mac: string;
  try {
    mac = readFileSync(`/sys/class/net/${c.bridge}/address`, 'utf8').trim();
  } catch (e) {
    throw new NetworkSetupError(
      `${c.bridge} does not exist: the Pod network is not set up (${(e as Error).message})`,
    );
  }
  const lc = lease6Config(o, mac);
  const s = dgram.createSocket({ type: 'udp6', reuseAddr: true, ipv6Only: true });
  try {
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.bind({ address: '::', port }, () => {
        s.removeListener('error', reject);
        resolve();
      });
    });
    s.addMembership(ALL_DHCP_SERVERS, `::%${c.bridge}`);
  } catch (e) {
    await new Promise<void>((resolve) => s.close(() => resolve()));
    const code = (e as NodeJS.ErrnoException).code;
    const why =
      code === 'EACCES'
        ? `permission denied (port ${port} needs net.ipv4.ip_unprivileged_port_start <= ${port} in the Pod, or CAP_NET_BIND_SERVICE)`
        : code === 'EADDRINUSE'
          ? 'address already in use'
          : (e as Error).message;
    const err = new NetworkSetupError(`DHCPv6 server for ${c.bridge} cannot listen on [::]:${port}: ${why}`);
    log?.error('DHCPv6 server failed', { reason: err.message });
    throw err;
  }
  let lease: string | undefined;
  const leaseWaiters: ((l: string) => void)[] = [];
  s.on('message', (buf, from) => {
    // link-local peers need the bridge as their zone
    const to =
      /^fe80:/i.test(from.address) && !from.address.includes('%')
        ? `${from.address}%${c.bridge}`
        : from.address;
    let action;
    try {
      action = dhcp6Reply(buf, lc);
    } catch (e) {
      if (!(e instanceof DhcpPacketError)) throw e;
      log?.warn('DHCPv6 packet dropped', { from: `[${to}]:${from.port}`, reason: e.message });
      return;
    }
    const fields = {
      request: msg6Name(action.request.type),
      xid: action.request.xid,
      client: action.request.clientId.toString('hex'),
      from: `[${to}]:${from.port}`,
    };
    if (action.kind === 'ignored') {
      log?.debug('DHCPv6 request ignored', { ...fields, reason: action.reason });
      return;
    }
    s.send(action.packet, from.port, to, (err) => {
      if (err) {
        log?.warn('DHCPv6 reply not sent', { ...fields, reason: err.message });
        return;
      }
      log?.debug('DHCPv6 reply sent', { ...fields, reply: msg6Name(action.type) });
      if (action.leased) {
        const l = `${lc.address} ${fields.client}`;
        if (lease === undefined) log?.info('DHCPv6 lease', { ip: lc.address, client: fields.client });
        lease = l;
        for (const w of leaseWaiters.splice(0)) w(l);
      }
    });
  });
  s.on('error', (e) => log?.warn('DHCPv6 socket error', { reason: e.message }));
  log?.info('DHCPv6 server started', { bridge: c.bridge, guest: lc.address });
  let stopped: Promise<void> | undefined;
  return {
    waitForLease: () =>
      lease !== undefined ? Promise.resolve(lease) : new Promise((resolve) => leaseWaiters.push(resolve)),
    stop: () =>
      (stopped ??= new Promise<void>((resolve) => s.close(() => resolve())).then(() => {
        log?.info('DHCPv6 server stopped', { bridge: c.bridge });
      })),
  };
}

/**
 * The VMI the domain is made from: with the bridge binding's MAC swap (`server.guestNic`), a copy whose pod
 * interface has the Pod interface's former MAC as its macAddress; otherwise `vmi` itself.
 */
export function withGuestMac(
  vmi: VirtualMachineInstance,
  server: Pick<DhcpServer, 'guestNic'> | null | undefined,
): VirtualMachineInstance {
  const nic = server?.guestNic;
  const ifaces = vmi.spec.domain.devices?.interfaces;
  const i = ifaces?.findIndex((x) => x.name === nic?.interfaceName) ?? -1;
  if (!nic || i < 0 || ifaces![i]!.macAddress) return vmi;
  const copy = structuredClone(vmi);
  copy.spec.domain.devices!.interfaces![i]!.macAddress = nic.mac;
  return copy;
}
