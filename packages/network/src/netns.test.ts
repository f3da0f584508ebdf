// Real kernel networking: network namespaces this test creates (root only), real ip/nft, the
// package's own DHCP server (the CLI, run inside the Pod netns), busybox udhcpc as the DHCP client of
// a stand-in guest NIC plugged into the Pod's bridge.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { planPodNetwork } from './plan.js';
import { setupPodNetwork, teardownPodNetwork, NFT_TABLE } from './phase1.js';
import {
  isRoot,
  createTopology,
  startDhcpInNetns,
  tcpEcho,
  tcpGet,
  CLI,
  NODE_IP,
  NODE_IP6,
  POD_IP,
  POD_IP6,
  POD_MTU,
  type Topology,
} from './test-netns.js';

const rootTest = isRoot ? test : test.skip;
if (!isRoot) test.skip('network namespace tests need root (skipped: not root)', () => undefined);

const vmi = (iface: object) =>
  ({
    metadata: { name: 'vm1' },
    spec: {
      domain: { devices: { interfaces: [{ name: 'default', ...iface }] } },
      networks: [{ name: 'default', pod: {} }],
    },
  }) as unknown as VirtualMachineInstance;
const hostname = ['--hostname', 'vm1'];
const waitFor = async (cond: () => boolean) => {
  while (!cond()) await new Promise((r) => setTimeout(r, 100));
};
const nftTables = (t: Topology) => t.exec(t.pod, ['nft', 'list', 'tables']);

let t: Topology;
beforeEach(() => {
  if (isRoot) t = createTopology();
});
afterEach(() => {
  if (isRoot) t.destroy();
});

describe('masquerade, dual stack (the Pod has IPv4 and IPv6)', () => {
  let t6: Topology;
  beforeEach(() => {
    if (isRoot) t6 = createTopology({ ipv6: true });
  });
  afterEach(() => {
    if (isRoot) t6.destroy();
  });
  rootTest(
    'the guest side gets fd10:0:2::1/120 on the bridge, the guest fd10:0:2::2 by DHCPv6 (with DNS and search list); node -> Pod IPv6:8080 reaches the guest at fd10:0:2::2, the guest reaches the node with the Pod IPv6 as source; IPv4 unchanged; teardown removes both tables',
    async () => {
      const plan = planPodNetwork(vmi({ masquerade: {}, ports: [{ port: 8080 }] }))!;
      const config = await setupPodNetwork(plan, { netns: t6.podPath });
      expect(config.ipv6).toEqual({
        podAddress: POD_IP6,
        guest: 'fd10:0:2::2',
        gateway: 'fd10:0:2::1',
        prefix: 120,
      });
      const bridge6 = JSON.parse(
        t6.exec(t6.pod, ['ip', '-6', '-json', 'addr', 'show', 'dev', 'k6t-eth0', 'scope', 'global']),
      )[0].addr_info.map((a: { local: string; prefixlen: number }) => `${a.local}/${a.prefixlen}`);
      expect(bridge6).toEqual(['fd10:0:2::1/120']);
      expect(t6.exec(t6.pod, ['sysctl', '-n', 'net.ipv6.conf.all.forwarding']).trim()).toBe('1');
      const guest = t6.addGuest(plan.bridge);
      const dhcp = await startDhcpInNetns(t6, config);
      try {
        expect(t6.dhcp(guest)).toMatchObject({ ip: '10.0.2.2', router: '10.0.2.1' });
        // the IPv6 address, DNS server and search list by DHCPv6 (ISC dhclient -6, stateful)
        expect(t6.dhcp6(guest)).toMatchObject({
          reason: 'BOUND6',
          new_ip6_address: 'fd10:0:2::2',
          new_dhcp6_name_servers: 'fd00:10:96::a',
          new_dhcp6_domain_search: 'ns1.svc.cluster.local. cluster.local.',
        });
        expect(await dhcp.waitForLease6()).toMatch(/^fd10:0:2::2 [0-9a-f]+$/);
        // no router advertisements (see the README): the default route is the guest's own, as upstream's
        t6.exec(guest, ['ip', '-6', 'route', 'add', 'fd10:0:2::1', 'dev', 'eth0']);
        t6.exec(guest, ['ip', '-6', 'route', 'add', 'default', 'via', 'fd10:0:2::1']);
        const inbound = tcpEcho(guest, '::', 8080);
        await inbound.ready;
        expect(tcpGet(t6.node, POD_IP6, 8080)).toBe(NODE_IP6);
        expect(tcpGet(t6.node, POD_IP, 8080)).toMatch(
          new RegExp(`^(::ffff:)?${NODE_IP.replace(/\./g, '\\.')}$`),
        );
        inbound.stop();
        const other = tcpEcho(guest, '::', 8081);
        await other.ready;
        expect(() => tcpGet(t6.node, POD_IP6, 8081)).toThrow('ECONNREFUSED');
        other.stop();
        const outbound = tcpEcho(t6.node, NODE_IP6, 9090);
        await outbound.ready;
        expect(tcpGet(guest, NODE_IP6, 9090)).toBe(POD_IP6);
        outbound.stop();
      } finally {
        await dhcp.stop();
      }
      const tables = nftTables(t6);
      expect(tables).toContain(`table ip ${NFT_TABLE}`);
      expect(tables).toContain(`table ip6 ${NFT_TABLE}`);
      // a second setup is refused (the tables exist), nothing changed
      await expect(setupPodNetwork(plan, { netns: t6.podPath })).rejects.toThrow('already exists');
      await teardownPodNetwork(config, { netns: t6.podPath });
      expect(nftTables(t6)).not.toContain(NFT_TABLE);
      expect(t6.links(t6.pod)).not.toContain('k6t-eth0');
    },
  );

  rootTest(
    "DHCPv6 as uid 107 with no capability (the Pod's ip_unprivileged_port_start=67 covers port 547): the guest gets fd10:0:2::2",
    async () => {
      const config = await setupPodNetwork(planPodNetwork(vmi({ masquerade: {} }))!, { netns: t6.podPath });
      t6.exec(t6.pod, ['sysctl', '-q', '-w', 'net.ipv4.ip_unprivileged_port_start=67']);
      const dhcp = await startDhcpInNetns(t6, config, { caps: [], args: hostname });
      try {
        const status = readFileSync(`/proc/${dhcp.pid}/status`, 'utf8');
        expect(/^Uid:\s+(\d+)/m.exec(status)![1]).toBe('107');
        expect(/^CapEff:\s+(\w+)/m.exec(status)![1]).toBe('0000000000000000');
        const guest = t6.addGuest(config.bridge);
        expect(t6.dhcp6(guest)).toMatchObject({ reason: 'BOUND6', new_ip6_address: 'fd10:0:2::2' });
        expect(await dhcp.waitForLease6()).toMatch(/^fd10:0:2::2 /);
      } finally {
        expect(await dhcp.stop()).toBe(0);
      }
      await teardownPodNetwork(config, { netns: t6.podPath });
    },
  );

  rootTest('an IPv4-only Pod gets no IPv6 side (no ip6 table, no IPv6 address on the bridge)', async () => {
    const config = await setupPodNetwork(planPodNetwork(vmi({ masquerade: {} }))!, { netns: t.podPath });
    expect(config.ipv6).toBeUndefined();
    expect(nftTables(t)).not.toContain('ip6');
    await teardownPodNetwork(config, { netns: t.podPath });
  });
});

describe('masquerade', () => {
  rootTest(
    'tap owned by 107 with the Pod MTU; the guest gets 10.0.2.2, gateway, DNS, search, hostname, MTU by DHCP; NAT both ways',
    async () => {
      const plan = planPodNetwork(vmi({ masquerade: {}, ports: [{ port: 8080 }] }))!;
      const config = await setupPodNetwork(plan, { netns: t.podPath });
      const tap = JSON.parse(t.exec(t.pod, ['ip', '-d', '-json', 'link', 'show', 'tap0']))[0];
      expect(tap.mtu).toBe(POD_MTU);
      expect(tap.master).toBe('k6t-eth0');
      expect(tap.linkinfo.info_kind).toBe('tun');
      expect(String(tap.linkinfo.info_data.user)).toMatch(/^(107|qemu)$/);
      expect(config).toMatchObject({
        podAddress: POD_IP,
        mtu: POD_MTU,
        guest: { address: '10.0.2.2', gateway: '10.0.2.1' },
      });

      const guest = t.addGuest(plan.bridge);
      const dhcp = await startDhcpInNetns(t, config, { args: hostname });
      try {
        const lease = t.dhcp(guest);
        expect(lease).toMatchObject({
          ip: '10.0.2.2',
          mask: '24',
          router: '10.0.2.1',
          dns: '10.96.0.10 10.96.0.11',
          search: 'ns1.svc.cluster.local cluster.local',
          hostname: 'vm1',
          mtu: String(POD_MTU),
        });
        expect(await dhcp.waitForLease()).toMatch(/^10\.0\.2\.2 ([0-9a-f]{2}:){5}[0-9a-f]{2} vm1$/);
        // inbound: node -> Pod IP:8080 reaches the guest
        const inbound = tcpEcho(guest, '0.0.0.0', 8080);
        await inbound.ready;
        expect(tcpGet(t.node, POD_IP, 8080)).toBe(NODE_IP);
        inbound.stop();
        // a port not listed is not forwarded (nothing listens in the Pod itself)
        const other = tcpEcho(guest, '0.0.0.0', 8081);
        await other.ready;
        expect(() => tcpGet(t.node, POD_IP, 8081)).toThrow('ECONNREFUSED');
        other.stop();
        // outbound: the guest reaches the node with the Pod IP as its source
        const outbound = tcpEcho(t.node, NODE_IP, 9090);
        await outbound.ready;
        expect(tcpGet(guest, NODE_IP, 9090)).toBe(POD_IP);
        outbound.stop();
      } finally {
        await dhcp.stop();
      }
      await teardownPodNetwork(config, { netns: t.podPath });
      expect(t.links(t.pod)).not.toContain('tap0');
      expect(t.links(t.pod)).not.toContain('k6t-eth0');
      expect(nftTables(t)).not.toContain(NFT_TABLE);
    },
  );

  rootTest('no ports listed: every port is forwarded', async () => {
    const config = await setupPodNetwork(planPodNetwork(vmi({ masquerade: {} }))!, { netns: t.podPath });
    const guest = t.addGuest(config.bridge);
    const dhcp = await startDhcpInNetns(t, config);
    try {
      t.dhcp(guest);
      const srv = tcpEcho(guest, '0.0.0.0', 2222);
      await srv.ready;
      expect(tcpGet(t.node, POD_IP, 2222)).toBe(NODE_IP);
      srv.stop();
    } finally {
      await dhcp.stop();
    }
  });
});

describe('bridge', () => {
  let th: Topology;
  beforeEach(() => {
    if (isRoot) th = createTopology({ hairpinBridge: true });
  });
  afterEach(() => {
    if (isRoot) th.destroy();
  });
  rootTest(
    "the node side a bridge in hairpin mode (the CNI bridge's hairpinMode): the guest's broadcasts come back through the Pod interface, whose port learns no MAC, so the guest's MAC stays on its own port and it reaches the node at once",
    async () => {
      const config = await setupPodNetwork(planPodNetwork(vmi({ bridge: {} }))!, { netns: th.podPath });
      expect(th.exec(th.pod, ['bridge', '-d', 'link', 'show', 'dev', 'eth0'])).toMatch(/learning off/);
      const guest = th.addGuest(config.bridge);
      th.exec(guest, ['ip', 'link', 'set', 'dev', 'eth0', 'address', config.moved!.mac!]);
      const dhcp = await startDhcpInNetns(th, config, { args: [...hostname, '--mac', config.moved!.mac!] });
      try {
        expect(th.dhcp(guest)).toMatchObject({ ip: POD_IP, router: NODE_IP });
        // a broadcast from the guest (an ARP request for the node), hairpinned back into the Pod
        const out = tcpEcho(th.node, NODE_IP, 9092);
        await out.ready;
        expect(tcpGet(guest, NODE_IP, 9092)).toBe(POD_IP);
        out.stop();
        const fdb = JSON.parse(th.exec(th.pod, ['bridge', '-json', 'fdb', 'show', 'br', config.bridge])) as {
          mac: string;
          ifname: string;
          flags?: string[];
          state?: string;
        }[];
        // the guest's MAC is known on the guest's port only; nothing was learned on the Pod interface
        expect(
          fdb.filter((e) => e.mac === config.moved!.mac && e.state !== 'permanent').map((e) => e.ifname),
        ).toEqual([expect.stringMatching(/^gst/)]);
        expect(fdb.filter((e) => e.ifname === 'eth0' && e.state !== 'permanent')).toEqual([]);
      } finally {
        await dhcp.stop();
      }
      await teardownPodNetwork(config, { netns: th.podPath });
    },
  );

  rootTest(
    'the guest holds the Pod IP and the Pod gateway, and the Pod MAC (the node reaches it at once); teardown gives the address and MAC back',
    async () => {
      const mac = (ns: string) =>
        (JSON.parse(t.exec(ns, ['ip', '-json', 'link', 'show', 'dev', 'eth0'])) as { address: string }[])[0]!
          .address;
      const podMac = mac(t.pod);
      // the node has talked to the Pod before (its neighbour entry for the Pod IP holds the Pod's MAC)
      const before = tcpEcho(t.pod, POD_IP, 8079);
      await before.ready;
      expect(tcpGet(t.node, POD_IP, 8079)).toBe(NODE_IP);
      before.stop();
      const config = await setupPodNetwork(planPodNetwork(vmi({ bridge: {} }))!, { netns: t.podPath });
      expect(t.exec(t.pod, ['ip', '-4', 'addr', 'show', 'dev', 'eth0'])).not.toContain(POD_IP);
      // the MAC swap: the Pod interface has a new MAC, the guest's NIC gets the old one (the launcher puts it in
      // the domain: withGuestMac; here the stand-in guest's veth takes it)
      expect(config.moved?.mac).toBe(podMac);
      expect(mac(t.pod)).not.toBe(podMac);
      const guest = t.addGuest(config.bridge);
      t.exec(guest, ['ip', 'link', 'set', 'dev', 'eth0', 'address', podMac]);
      const dhcp = await startDhcpInNetns(t, config, { args: [...hostname, '--mac', podMac] });
      try {
        expect(t.dhcp(guest)).toMatchObject({ ip: POD_IP, mask: '24', router: NODE_IP, hostname: 'vm1' });
        // right after the lease, both ways: the node's neighbour entry for the Pod IP is still right
        const out = tcpEcho(t.node, NODE_IP, 9091);
        await out.ready;
        expect(tcpGet(guest, NODE_IP, 9091)).toBe(POD_IP);
        out.stop();
        const srv = tcpEcho(guest, POD_IP, 8080);
        await srv.ready;
        expect(tcpGet(t.node, POD_IP, 8080)).toBe(NODE_IP);
        srv.stop();
      } finally {
        await dhcp.stop();
      }
      await teardownPodNetwork(config, { netns: t.podPath });
      expect(mac(t.pod)).toBe(podMac);
      expect(t.exec(t.pod, ['ip', '-4', 'addr', 'show', 'dev', 'eth0'])).toContain(`${POD_IP}/24`);
      expect(t.exec(t.pod, ['ip', 'route', 'show', 'default'])).toContain(NODE_IP);
      expect(t.links(t.pod)).not.toContain('k6t-eth0');
    },
  );
});

describe('failures leave nothing behind', () => {
  rootTest('a failed nft command: clear error, no bridge, tap or table', async () => {
    const failingNft = path.join(t.tmp, 'nft');
    // the real nft for the checks, a failure for the ruleset (-f)
    writeFileSync(
      failingNft,
      '#!/bin/sh\ncase "$2" in "{"*) echo "Error: injected" >&2; exit 1;; esac\nexec nft "$@"\n',
      {
        mode: 0o755,
      },
    );
    await expect(
      setupPodNetwork(planPodNetwork(vmi({ masquerade: {} }))!, { netns: t.podPath, nft: failingNft }),
    ).rejects.toThrow(/nft -j \{.*\} failed \(exit 1\): Error: injected/);
    expect(t.links(t.pod)).toEqual(['lo', 'eth0']);
    expect(nftTables(t)).not.toContain(NFT_TABLE);
  });

  rootTest('a missing Pod interface: clear error, nothing created', async () => {
    await expect(
      setupPodNetwork(planPodNetwork(vmi({ masquerade: {} }), 'eth9')!, { netns: t.podPath }),
    ).rejects.toThrow('Pod interface eth9 not found');
    expect(t.links(t.pod)).toEqual(['lo', 'eth0']);
  });

  rootTest('a second setup is refused and leaves the first intact', async () => {
    const plan = planPodNetwork(vmi({ masquerade: {} }))!;
    await setupPodNetwork(plan, { netns: t.podPath });
    await expect(setupPodNetwork(plan, { netns: t.podPath })).rejects.toThrow('already exists');
    expect(t.links(t.pod)).toEqual(expect.arrayContaining(['tap0', 'k6t-eth0']));
  });

  rootTest('DHCP without phase 1 (no bridge/tap): clear error, no process', async () => {
    const config = {
      binding: 'masquerade' as const,
      podInterface: 'eth0',
      bridge: 'k6t-eth0',
      tap: 'tap0',
      mtu: 1500,
      serverAddress: '10.0.2.1',
      guest: { address: '10.0.2.2', prefix: 24, gateway: '10.0.2.1', routes: [] },
      podAddress: POD_IP,
    };
    await expect(startDhcpInNetns(t, config)).rejects.toThrow(
      /DHCP server exited 1: .*k6t-eth0 does not exist: the Pod network is not set up/,
    );
  });

  rootTest('DHCP server that cannot bind: the reason in the error, the process gone', async () => {
    const config = await setupPodNetwork(planPodNetwork(vmi({ masquerade: {} }))!, { netns: t.podPath });
    // something else holds the DHCP port in the Pod (without SO_REUSEADDR)
    const holder = spawn(
      'ip',
      [
        'netns',
        'exec',
        t.pod,
        process.execPath,
        '-e',
        "require('dgram').createSocket('udp4').bind(67, () => console.log('up'))",
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      await new Promise((resolve) => holder.stdout.once('data', resolve));
      await expect(startDhcpInNetns(t, config)).rejects.toThrow(
        /DHCP server exited 1: .*DHCP server for k6t-eth0 cannot bind 0\.0\.0\.0:67: address already in use/,
      );
    } finally {
      holder.kill();
    }
  });
});

describe('DHCP server as the launcher user (uid 107)', () => {
  rootTest(
    'only CAP_NET_BIND_SERVICE: serves a lease; without it: a clear error; the CLI sets up and tears down from a manifest',
    async () => {
      const dir = mkdtempSync(path.join(os.tmpdir(), 'kvts-cli-'));
      try {
        const vmiFile = path.join(dir, 'vmi.yaml');
        writeFileSync(
          vmiFile,
          'apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: vm1}\nspec:\n  domain:\n    devices:\n      interfaces: [{name: default, masquerade: {}}]\n    resources: {requests: {memory: 64Mi}}\n  networks: [{name: default, pod: {}}]\n',
        );
        const cfg = path.join(dir, 'net.json');
        const setup = spawnSync(
          process.execPath,
          [CLI, 'setup', '--vmi', vmiFile, '--netns', t.podPath, '--out', cfg],
          { encoding: 'utf8' },
        );
        expect(setup.stderr).not.toMatch(/error/);
        expect(setup.status).toBe(0);
        const config = JSON.parse(readFileSync(cfg, 'utf8')) as object;
        await expect(startDhcpInNetns(t, config, { caps: [] })).rejects.toThrow(
          'cannot bind 0.0.0.0:67: permission denied (port 67 needs net.ipv4.ip_unprivileged_port_start <= 67 in the Pod, or CAP_NET_BIND_SERVICE)',
        );
        const dhcp = await startDhcpInNetns(t, config, { caps: ['net_bind_service'], args: hostname });
        try {
          // the server process: uid 107, and no capability but NET_BIND_SERVICE (bit 10)
          const status = readFileSync(`/proc/${dhcp.pid}/status`, 'utf8');
          expect(/^Uid:\s+(\d+)/m.exec(status)![1]).toBe('107');
          expect(/^CapEff:\s+(\w+)/m.exec(status)![1]).toBe((1 << 10).toString(16).padStart(16, '0'));
          const guest = t.addGuest('k6t-eth0');
          expect(t.dhcp(guest)).toMatchObject({ ip: '10.0.2.2', router: '10.0.2.1', hostname: 'vm1' });
          expect(await dhcp.waitForLease()).toMatch(/^10\.0\.2\.2 \S+ vm1$/);
        } finally {
          expect(await dhcp.stop()).toBe(0); // a clean stop on SIGTERM
        }
        const down = spawnSync(process.execPath, [CLI, 'teardown', '--config', cfg, '--netns', t.podPath], {
          encoding: 'utf8',
        });
        expect(down.status).toBe(0);
        expect(t.links(t.pod)).not.toEqual(expect.arrayContaining(['tap0']));
        expect(t.links(t.pod)).not.toEqual(expect.arrayContaining(['k6t-eth0']));
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  rootTest(
    "no capability at all, the Pod netns' net.ipv4.ip_unprivileged_port_start=67 (what the launcher Pod gets): uid 107 serves a lease",
    async () => {
      const config = await setupPodNetwork(planPodNetwork(vmi({ masquerade: {} }))!, { netns: t.podPath });
      t.exec(t.pod, ['sysctl', '-q', '-w', 'net.ipv4.ip_unprivileged_port_start=67']);
      // the node's own setting is untouched: the sysctl is per network namespace
      expect(readFileSync('/proc/sys/net/ipv4/ip_unprivileged_port_start', 'utf8').trim()).toBe('1024');
      const dhcp = await startDhcpInNetns(t, config, { caps: [], args: hostname });
      try {
        const status = readFileSync(`/proc/${dhcp.pid}/status`, 'utf8');
        expect(/^Uid:\s+(\d+)/m.exec(status)![1]).toBe('107');
        expect(/^CapEff:\s+(\w+)/m.exec(status)![1]).toBe('0000000000000000');
        const guest = t.addGuest('k6t-eth0');
        expect(t.dhcp(guest)).toMatchObject({ ip: '10.0.2.2', router: '10.0.2.1', hostname: 'vm1' });
      } finally {
        expect(await dhcp.stop()).toBe(0);
      }
    },
  );

  rootTest(
    'a unicast renewal (udhcpc SIGUSR1) reaches the server on the bridge address and is acknowledged',
    async () => {
      const config = await setupPodNetwork(planPodNetwork(vmi({ masquerade: {} }))!, { netns: t.podPath });
      const dhcp = await startDhcpInNetns(t, config, {
        caps: ['net_bind_service'],
        args: hostname,
        env: { KVTS_LOG_LEVEL: 'debug' },
      });
      const guest = t.addGuest(config.bridge);
      const out = path.join(t.tmp, 'renew');
      const client = t.dhcpClient(guest, out);
      try {
        await waitFor(() => existsSync(`${out}.bound`));
        // udhcpc renews by a REQUEST sent by unicast from its address to the server identifier
        client.kill('SIGUSR1');
        await waitFor(() => existsSync(`${out}.renew`));
        expect(readFileSync(`${out}.renew`, 'utf8')).toContain('ip=10.0.2.2');
        const replies = dhcp
          .stderr()
          .split('\n')
          .filter((l) => l.includes('DHCP reply sent'))
          .map((l) => JSON.parse(l) as { from: string; socket: string; request: string; reply: string });
        expect(replies).toContainEqual(
          expect.objectContaining({
            from: '10.0.2.2:68',
            socket: '10.0.2.1',
            request: 'REQUEST',
            reply: 'ACK',
          }),
        );
      } finally {
        client.kill('SIGTERM');
        await dhcp.stop();
      }
    },
  );
});
