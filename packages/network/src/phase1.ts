// Phase 1, privileged (virt-handler, in the launcher Pod's network namespace): the bridge, the tap
// the guest's NIC uses (owned by the launcher's user, the Pod interface's MTU), and for masquerade
// the nftables NAT. Every step is undone in reverse order when a later one fails.
import { randomBytes } from 'node:crypto';
import { isIPv6 } from 'node:net';
import type { Logger } from '@kubevirt-ts/log';
import { ipJson, run, setSysctl, NetworkSetupError, type NetnsOption } from './exec.js';
import {
  BRIDGE_FAKE_IP,
  guestAddresses6,
  LAUNCHER_UID,
  guestAddresses,
  type PodBinding,
  type PodNetworkPlan,
} from './plan.js';

/** nftables table phase 1 owns in the Pod's namespace (deleting it removes every rule it added). */
export const NFT_TABLE = 'kubevirt';

export interface Route {
  dst: string;
  gateway?: string;
}

/** What phase 1 set up: the input of phase 2 (written as JSON between the two). */
export interface PodNetworkConfig {
  binding: PodBinding;
  podInterface: string;
  bridge: string;
  tap: string;
  mtu: number;
  /** the DHCP server's address on the bridge */
  serverAddress: string;
  /** what the guest gets by DHCP */
  guest: { address: string; prefix: number; gateway?: string; routes: Route[] };
  /** the Pod's IPv4 address (masquerade: the source of the guest's outbound traffic) */
  podAddress: string;
  /**
   * masquerade, when the Pod interface has a global IPv6 address: the guest's IPv6 side (upstream's
   * fd10:0:2::2/120 behind the gateway fd10:0:2::1 on the bridge), NATed to and from the Pod's IPv6 address
   */
  ipv6?: { podAddress: string; guest: string; gateway: string; prefix: number };
  /**
   * bridge binding: the Pod interface's former address and routes, restored by teardown, and its former MAC
   * (`mac`): the guest's NIC takes it (upstream's MAC swap: the node's neighbour entry for the Pod IP stays right,
   * so traffic to the Pod IP reaches the guest at once) while the Pod interface gets a random one
   */
  moved?: { address: string; prefix: number; routes: Route[]; mac?: string };
}

export interface Phase1Options extends NetnsOption {
  log?: Logger;
  /** owner of the tap (default 107, the launcher's user) */
  tapOwner?: number;
  /** the nft program (default "nft" from PATH) */
  nft?: string;
}

interface IpLink {
  ifname: string;
  mtu: number;
  address?: string;
}
interface IpAddr {
  addr_info?: { family: string; local: string; prefixlen: number; scope?: string }[];
}
interface IpRoute {
  dst: string;
  gateway?: string;
  protocol?: string;
}

async function podInterfaceInfo(name: string, o: NetnsOption) {
  let link: IpLink | undefined;
  try {
    [link] = await ipJson<IpLink[]>(['link', 'show', 'dev', name], o);
  } catch (e) {
    throw new NetworkSetupError(`Pod interface ${name} not found: ${(e as Error).message}`);
  }
  if (!link) throw new NetworkSetupError(`Pod interface ${name} not found`);
  const [addr] = await ipJson<IpAddr[]>(['-4', 'addr', 'show', 'dev', name], o);
  const v4 = addr?.addr_info?.find((a) => a.family === 'inet' && a.scope !== 'host');
  if (!v4) throw new NetworkSetupError(`Pod interface ${name} has no IPv4 address`);
  const [addr6] = await ipJson<IpAddr[]>(['-6', 'addr', 'show', 'dev', name, 'scope', 'global'], o);
  const v6 = addr6?.addr_info?.find((a) => a.family === 'inet6' && a.scope === 'global');
  const routes = (await ipJson<IpRoute[]>(['-4', 'route', 'show', 'dev', name], o))
    .filter((r) => r.protocol !== 'kernel')
    .map((r): Route => (r.gateway ? { dst: r.dst, gateway: r.gateway } : { dst: r.dst }));
  return {
    mtu: link.mtu,
    mac: link.address,
    address: v4.local,
    prefix: v4.prefixlen,
    routes,
    address6: v6?.local,
  };
}

type NftFamily = 'ip' | 'ip6';

async function nftTableExists(o: Phase1Options, family: NftFamily = 'ip'): Promise<boolean> {
  const out = JSON.parse(await run(o.nft ?? 'nft', ['-j', 'list', 'tables', family], o)) as {
    nftables: { table?: { name: string } }[];
  };
  return out.nftables.some((x) => x.table?.name === NFT_TABLE);
}

/** The masquerade ruleset as nft JSON (one atomic batch): table `ip kubevirt`, or `ip6 kubevirt` for IPv6. */
export function masqueradeRuleset(plan: PodNetworkPlan, guest: string, family: NftFamily = 'ip'): object {
  const table = NFT_TABLE;
  const meta = (key: string, right: unknown) => ({ match: { op: '==', left: { meta: { key } }, right } });
  const rules: object[] = [];
  const rule = (chain: string, expr: object[]) =>
    rules.push({ add: { rule: { family, table, chain, expr } } });
  // inbound: what reaches the Pod interface goes to the guest (all ports, or the listed ones)
  const inbound = [meta('iifname', plan.podInterface)];
  if (plan.ports.length === 0) rule('prerouting', [...inbound, { dnat: { addr: guest } }]);
  for (const proto of ['tcp', 'udp'] as const) {
    const ports = plan.ports.filter((p) => p.protocol === proto).map((p) => p.port);
    if (ports.length === 0) continue;
    const right = ports.length === 1 ? ports[0] : { set: ports };
    rule('prerouting', [
      ...inbound,
      { match: { op: '==', left: { payload: { protocol: proto, field: 'dport' } }, right } },
      { dnat: { addr: guest } },
    ]);
  }
  // outbound: the guest's traffic leaves with the Pod's address
  rule('postrouting', [
    { match: { op: '==', left: { payload: { protocol: family, field: 'saddr' } }, right: guest } },
    { match: { op: '!=', left: { meta: { key: 'oifname' } }, right: plan.bridge } },
    { masquerade: null },
  ]);
  const chain = (name: string, hook: string, prio: number) => ({
    add: { chain: { family, table, name, type: 'nat', hook, prio, policy: 'accept' } },
  });
  return {
    nftables: [
      { add: { table: { family, name: table } } },
      chain('prerouting', 'prerouting', -100),
      chain('postrouting', 'postrouting', 100),
      ...rules,
    ],
  };
}

/**
 * Sets up the Pod network for `plan` (masquerade or bridge) in the namespace `opts.netns`.
 * Fails with a NetworkSetupError, leaving nothing it created behind.
 */
export async function setupPodNetwork(
  plan: PodNetworkPlan,
  opts: Phase1Options = {},
): Promise<PodNetworkConfig> {
  if (plan.binding !== 'masquerade' && plan.binding !== 'bridge')
    throw new NetworkSetupError(`the ${plan.binding} binding needs no Pod network setup`);
  const o: NetnsOption = { netns: opts.netns };
  const log = opts.log;
  const uid = String(opts.tapOwner ?? LAUNCHER_UID);
  const undo: { what: string; fn: () => Promise<unknown> }[] = [];
  const ip = (...args: string[]) => run('ip', args, o);
  const step = async (what: string, doIt: () => Promise<unknown>, undoIt?: () => Promise<unknown>) => {
    await doIt();
    if (undoIt) undo.push({ what, fn: undoIt });
  };
  try {
    const pod = await podInterfaceInfo(plan.podInterface, o);
    if (plan.binding === 'masquerade')
      for (const family of ['ip', 'ip6'] as const)
        if (await nftTableExists(opts, family))
          throw new NetworkSetupError(
            `nftables table ${family} ${NFT_TABLE} already exists: the Pod network is already set up`,
          );
    await step(
      `bridge ${plan.bridge}`,
      () => ip('link', 'add', 'name', plan.bridge, 'type', 'bridge'),
      () => ip('link', 'del', plan.bridge),
    );
    await step(
      `tap ${plan.tap}`,
      () => ip('tuntap', 'add', 'dev', plan.tap, 'mode', 'tap', 'user', uid, 'group', uid),
      () => ip('link', 'del', plan.tap),
    );
    await ip('link', 'set', 'dev', plan.tap, 'mtu', String(pod.mtu), 'master', plan.bridge, 'up');
    let config: PodNetworkConfig;
    if (plan.binding === 'masquerade') {
      const g = guestAddresses(plan.vmCidr);
      await ip('addr', 'add', `${g.gateway}/${g.prefix}`, 'dev', plan.bridge);
      await ip('link', 'set', 'dev', plan.bridge, 'up');
      await setSysctl('net.ipv4.ip_forward', '1', o);
      const ruleset = JSON.stringify(masqueradeRuleset(plan, g.guest));
      await step(
        `nftables table ip ${NFT_TABLE}`,
        () => run(opts.nft ?? 'nft', ['-j', ruleset], o), // one argument: no shell, one atomic batch
        () => run(opts.nft ?? 'nft', ['delete', 'table', 'ip', NFT_TABLE], o),
      );
      let ipv6: PodNetworkConfig['ipv6'];
      if (pod.address6) {
        // dual stack: the guest's IPv6 side, NATed like IPv4 (no DAD on the bridge: it is the only router there)
        const g6 = guestAddresses6(plan.vmIpv6Cidr);
        await ip('-6', 'addr', 'add', `${g6.gateway}/${g6.prefix}`, 'dev', plan.bridge, 'nodad');
        await setSysctl('net.ipv6.conf.all.forwarding', '1', o);
        const ruleset6 = JSON.stringify(masqueradeRuleset(plan, g6.guest, 'ip6'));
        await step(
          `nftables table ip6 ${NFT_TABLE}`,
          () => run(opts.nft ?? 'nft', ['-j', ruleset6], o),
          () => run(opts.nft ?? 'nft', ['delete', 'table', 'ip6', NFT_TABLE], o),
        );
        ipv6 = { podAddress: pod.address6, guest: g6.guest, gateway: g6.gateway, prefix: g6.prefix };
      }
      config = {
        binding: 'masquerade',
        podInterface: plan.podInterface,
        bridge: plan.bridge,
        tap: plan.tap,
        mtu: pod.mtu,
        serverAddress: g.gateway,
        guest: { address: g.guest, prefix: g.prefix, gateway: g.gateway, routes: [] },
        podAddress: pod.address,
        ...(ipv6 ? { ipv6 } : {}),
      };
    } else {
      // bridge: the Pod's address moves to the guest; the Pod interface becomes a bridge port
      const gw = pod.routes.find((r) => r.dst === 'default')?.gateway;
      const cidr = `${pod.address}/${pod.prefix}`;
      await step(
        `address ${cidr} of ${plan.podInterface}`,
        () => ip('addr', 'del', cidr, 'dev', plan.podInterface),
        async () => {
          await ip('addr', 'add', cidr, 'dev', plan.podInterface);
          for (const r of pod.routes)
            await ip(
              'route',
              'replace',
              r.dst,
              ...(r.gateway ? ['via', r.gateway] : []),
              'dev',
              plan.podInterface,
            );
        },
      );
      // the MAC swap: the guest's NIC gets the Pod interface's MAC (the launcher puts it in the domain), the Pod
      // interface a random locally administered one, so the node's neighbour entry for the Pod IP stays right
      const podMac = pod.mac;
      if (podMac && MAC_RE.test(podMac))
        await step(
          `a new MAC for ${plan.podInterface}`,
          () => ip('link', 'set', 'dev', plan.podInterface, 'address', randomMac()),
          () => ip('link', 'set', 'dev', plan.podInterface, 'address', podMac),
        );
      await step(
        `${plan.podInterface} in ${plan.bridge}`,
        () => ip('link', 'set', 'dev', plan.podInterface, 'master', plan.bridge),
        () => ip('link', 'set', 'dev', plan.podInterface, 'nomaster'),
      );
      // no MAC learning on the Pod interface's port (as upstream): a CNI bridge in hairpin mode sends the
      // guest's broadcasts back in through it, and the bridge would then place the guest's MAC behind the Pod
      // interface and drop the node's replies to the guest (same port in and out) until it re-learns it
      await ip('link', 'set', 'dev', plan.podInterface, 'type', 'bridge_slave', 'learning', 'off');
      await ip('addr', 'add', `${BRIDGE_FAKE_IP}/32`, 'dev', plan.bridge);
      await ip('link', 'set', 'dev', plan.bridge, 'up');
      config = {
        binding: 'bridge',
        podInterface: plan.podInterface,
        bridge: plan.bridge,
        tap: plan.tap,
        mtu: pod.mtu,
        serverAddress: BRIDGE_FAKE_IP,
        guest: {
          address: pod.address,
          prefix: pod.prefix,
          ...(gw ? { gateway: gw } : {}),
          routes: pod.routes.filter((r) => r.dst !== 'default'),
        },
        podAddress: pod.address,
        moved: {
          address: pod.address,
          prefix: pod.prefix,
          routes: pod.routes,
          ...(pod.mac && MAC_RE.test(pod.mac) ? { mac: pod.mac } : {}),
        },
      };
    }
    log?.info('pod network set up', {
      binding: plan.binding,
      bridge: plan.bridge,
      tap: plan.tap,
      mtu: pod.mtu,
    });
    return config;
  } catch (e) {
    for (const u of undo.reverse()) {
      try {
        await u.fn();
      } catch (ue) {
        log?.error('undoing a pod network step failed', { step: u.what, reason: (ue as Error).message });
      }
    }
    log?.error('pod network setup failed', { binding: plan.binding, reason: (e as Error).message });
    throw e;
  }
}

/** Removes what setupPodNetwork created (what is already gone is skipped). */
export async function teardownPodNetwork(config: PodNetworkConfig, opts: Phase1Options = {}): Promise<void> {
  const o: NetnsOption = { netns: opts.netns };
  const quiet = (p: Promise<unknown>) => p.catch(() => undefined);
  if (config.binding === 'masquerade')
    for (const family of ['ip', 'ip6'] as const)
      if (await nftTableExists(opts, family))
        await run(opts.nft ?? 'nft', ['delete', 'table', family, NFT_TABLE], o);
  await quiet(run('ip', ['link', 'del', config.tap], o));
  if (config.moved) await quiet(run('ip', ['link', 'set', 'dev', config.podInterface, 'nomaster'], o));
  if (config.moved?.mac)
    await quiet(run('ip', ['link', 'set', 'dev', config.podInterface, 'address', config.moved.mac], o));
  await quiet(run('ip', ['link', 'del', config.bridge], o));
  if (config.moved) {
    const m = config.moved;
    await quiet(run('ip', ['addr', 'add', `${m.address}/${m.prefix}`, 'dev', config.podInterface], o));
    for (const r of m.routes)
      await quiet(
        run(
          'ip',
          ['route', 'replace', r.dst, ...(r.gateway ? ['via', r.gateway] : []), 'dev', config.podInterface],
          o,
        ),
      );
  }
}

const IPV4_RE = /^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}$/;
const IFNAME_RE = /^[A-Za-z0-9_.-]{1,15}$/;
const MAC_RE = /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/;

/** A random unicast, locally administered MAC address. */
function randomMac(): string {
  const b = randomBytes(6);
  b[0] = (b[0]! & 0xfc) | 0x02;
  return [...b].map((x) => x.toString(16).padStart(2, '0')).join(':');
}

/**
 * Reads a PodNetworkConfig written by phase 1 (virt-handler) as untrusted input: the Pod can write
 * where it lies, so every field is checked, and it must match what the launcher's own plan of the
 * VMI says (binding, bridge, tap, Pod interface). Throws a NetworkSetupError naming the field.
 */
export function parsePodNetworkConfig(
  text: string,
  plan: PodNetworkPlan,
  source = 'pod network config',
): PodNetworkConfig {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new NetworkSetupError(`${source}: not JSON (${(e as Error).message})`);
  }
  const bad = (field: string, why: string): never => {
    throw new NetworkSetupError(`${source}: ${field}: ${why}`);
  };
  const obj = (v: unknown, field: string): Record<string, unknown> =>
    typeof v === 'object' && v !== null && !Array.isArray(v)
      ? (v as Record<string, unknown>)
      : bad(field, 'must be an object');
  const ip = (v: unknown, field: string): string =>
    typeof v === 'string' && IPV4_RE.test(v) ? v : bad(field, `${JSON.stringify(v)} is not an IPv4 address`);
  const ip6 = (v: unknown, field: string): string =>
    typeof v === 'string' && isIPv6(v) ? v : bad(field, `${JSON.stringify(v)} is not an IPv6 address`);
  const int = (v: unknown, field: string, min: number, max: number): number =>
    Number.isInteger(v) && (v as number) >= min && (v as number) <= max
      ? (v as number)
      : bad(field, `${JSON.stringify(v)} is not an integer in [${min}, ${max}]`);
  const same = (v: unknown, field: string, want: string): string =>
    v === want ? want : bad(field, `${JSON.stringify(v)} is not ${JSON.stringify(want)} (the VMI's plan)`);
  const cidr = (v: unknown, field: string): string => {
    if (v === 'default') return v;
    const m = typeof v === 'string' ? /^([\d.]+)\/(\d{1,2})$/.exec(v) : null;
    if (!m || !IPV4_RE.test(m[1]!) || Number(m[2]) > 32)
      bad(field, `${JSON.stringify(v)} is not an IPv4 CIDR`);
    return v as string;
  };
  const routes = (v: unknown, field: string): Route[] => {
    if (!Array.isArray(v)) return bad(field, 'must be a list');
    return v.map((r, i) => {
      const o = obj(r, `${field}[${i}]`);
      const dst = cidr(o.dst, `${field}[${i}].dst`);
      return o.gateway === undefined ? { dst } : { dst, gateway: ip(o.gateway, `${field}[${i}].gateway`) };
    });
  };
  const c = obj(raw, 'config');
  const g = obj(c.guest, 'guest');
  const out: PodNetworkConfig = {
    binding: same(c.binding, 'binding', plan.binding) as PodBinding,
    podInterface: same(c.podInterface, 'podInterface', plan.podInterface),
    bridge: same(c.bridge, 'bridge', plan.bridge),
    tap: same(c.tap, 'tap', plan.tap),
    mtu: int(c.mtu, 'mtu', 68, 65535),
    serverAddress: ip(c.serverAddress, 'serverAddress'),
    guest: {
      address: ip(g.address, 'guest.address'),
      prefix: int(g.prefix, 'guest.prefix', 0, 32),
      ...(g.gateway !== undefined ? { gateway: ip(g.gateway, 'guest.gateway') } : {}),
      routes: routes(g.routes, 'guest.routes'),
    },
    podAddress: ip(c.podAddress, 'podAddress'),
  };
  if (c.ipv6 !== undefined) {
    const v = obj(c.ipv6, 'ipv6');
    out.ipv6 = {
      podAddress: ip6(v.podAddress, 'ipv6.podAddress'),
      guest: ip6(v.guest, 'ipv6.guest'),
      gateway: ip6(v.gateway, 'ipv6.gateway'),
      prefix: int(v.prefix, 'ipv6.prefix', 0, 128),
    };
  }
  if (c.moved !== undefined) {
    const m = obj(c.moved, 'moved');
    out.moved = {
      address: ip(m.address, 'moved.address'),
      prefix: int(m.prefix, 'moved.prefix', 0, 32),
      routes: routes(m.routes, 'moved.routes'),
      ...(m.mac !== undefined
        ? {
            mac:
              typeof m.mac === 'string' && MAC_RE.test(m.mac)
                ? m.mac
                : bad('moved.mac', `${JSON.stringify(m.mac)} is not aa:bb:cc:dd:ee:ff`),
          }
        : {}),
    };
  }
  if (!IFNAME_RE.test(out.bridge) || !IFNAME_RE.test(out.tap)) bad('bridge', 'not an interface name');
  return out;
}
