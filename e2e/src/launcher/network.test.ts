// Pod networking end to end with the real test guest (root only): a "node" netns and a "Pod" netns
// joined by a veth; phase 1 (what virt-handler runs) through @kubevirt-ts/network in the Pod netns;
// a real in-Pod launcher started inside the Pod netns and driven over its cmd socket; its DHCP server
// (phase 2) gives the guest its lease; TCP both ways between the node netns and the guest.
import { spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { CmdClient, NotifyServer, notifySocketPath } from '@kubevirt-ts/cmd-protocol';
import {
  planPodNetwork,
  setupPodNetwork,
  teardownPodNetwork,
  writePodNetworkConfig,
  type PodNetworkConfig,
} from '@kubevirt-ts/network';
import {
  connectLauncher,
  killMentioning,
  launcherPodFlags,
  processesMentioning,
  readText,
  requireGuest,
  shortTmp,
  stageTestGuest,
  startLauncher,
  tinyVmi,
  waitFor,
  type Proc,
} from './helpers.js';
import {
  NODE_IP,
  NODE_IP6,
  POD_DNS6,
  POD_IP,
  POD_IP6,
  POD_MTU,
  createNet,
  isRoot,
  launcherInNetns,
  sh,
  tcpGet,
  tcpServer,
  type Net,
} from './net-helpers.js';

const rootIt = isRoot ? it : it.skip;
if (!isRoot)
  it.skip('Pod networking with a real guest needs root for network namespaces (skipped: not root)', () =>
    undefined);

beforeAll(() => {
  if (isRoot) requireGuest();
});

/** a second address of the node netns on the Pod's link (NODE_IP is the Pod's gateway) */
const NODE_IP_2 = '192.168.79.5';

function netVmi(name: string, iface: object, kernelArgs: string): VirtualMachineInstance {
  const vmi = tinyVmi(name);
  const boot = vmi.spec.domain.firmware!.kernelBoot!;
  boot.kernelArgs = `${boot.kernelArgs} ${kernelArgs}`;
  vmi.spec.domain.devices!.interfaces = [{ name: 'default', ...iface } as never];
  vmi.spec.networks = [{ name: 'default', pod: {} }];
  return vmi;
}

interface Pod {
  root: string;
  vmi: VirtualMachineInstance;
  proc: Proc;
  client: CmdClient;
  serialLog: string;
  stop(): Promise<void>;
}

/** The launcher "Pod" inside the Pod netns; `config` (phase 1's output) is written where the launcher reads it. */
async function startPod(net: Net, vmi: VirtualMachineInstance, config?: PodNetworkConfig): Promise<Pod> {
  const root = await shortTmp();
  const share = path.join(root, 'handler');
  const layout = await stageTestGuest(vmi, root);
  // what virt-handler does after phase 1: the config in the launcher's share dir
  if (config) {
    mkdirSync(share, { recursive: true });
    writePodNetworkConfig(share, 'default', config);
  }
  const notify = new NotifyServer({
    socketPath: notifySocketPath(share),
    onDomainEvent: () => undefined,
    onK8sEvent: () => undefined,
  });
  await notify.start();
  const proc = startLauncher(
    launcherPodFlags(vmi, root, share, { grace: 5 }),
    {},
    false,
    launcherInNetns(net, root),
  );
  const client = await connectLauncher(share, { exitCode: () => proc.child.exitCode, stderr: proc.stderr });
  return {
    root,
    vmi,
    proc,
    client,
    serialLog: layout.serialLogFile(vmi.metadata!.uid!),
    async stop() {
      client.close();
      if (proc.child.exitCode === null && proc.child.signalCode === null) {
        proc.child.kill('SIGTERM');
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([proc.exited, new Promise((r) => (timer = setTimeout(r, 30_000)))]);
        clearTimeout(timer);
      }
      if (proc.child.exitCode === null && proc.child.signalCode === null) {
        proc.child.kill('SIGKILL');
        await proc.exited;
      }
      await killMentioning(root);
      await notify.stop(500);
      await rm(root, { recursive: true, force: true });
    },
  };
}

/** The guest's KUBEVIRT-TS-GUEST-NET (or -NET6) line as fields. */
async function guestNet(serialLog: string, tag = 'NET'): Promise<Record<string, string>> {
  const line = await waitFor(
    `the guest ${tag} lease line`,
    async () => new RegExp(`KUBEVIRT-TS-GUEST-${tag} (.*)`).exec(await readText(serialLog))?.[1],
    240_000,
    250,
  ).catch(async (e: Error) => {
    // what the guest said instead
    throw new Error(`${e.message}; the serial log ends: ${(await readText(serialLog)).slice(-1500)}`);
  });
  return Object.fromEntries(
    line
      .trim()
      .split(' ')
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
}

describe('Pod network with a real guest, launcher in the Pod netns', () => {
  rootIt(
    'masquerade: lease 10.0.2.2/24 via 10.0.2.1 with the Pod DNS/search/MTU/hostname; node -> Pod IP:8080 reaches the guest; the guest reaches the node as the Pod IP; an unlisted port stays in the Pod',
    async () => {
      const net = createNet('m');
      let pod: Pod | undefined;
      let config: PodNetworkConfig | undefined;
      const servers: ChildProcess[] = [];
      try {
        const vmi = netVmi(
          'net-masq',
          { masquerade: {}, ports: [{ port: 8080 }] },
          `kvts.net kvts.connect=${NODE_IP}:9090`,
        );
        config = await setupPodNetwork(planPodNetwork(vmi)!, { netns: net.podPath });
        // the node listens for the guest's connection and answers with the source address it saw
        const nodeSrv = tcpServer(net.node, 9090);
        servers.push(nodeSrv.child);
        await nodeSrv.ready;
        // something in the Pod itself on an unlisted port: reached directly, not DNATed to the guest
        const podSrv = tcpServer(net.pod, 8081, 'the-pod-itself');
        servers.push(podSrv.child);
        await podSrv.ready;

        pod = await startPod(net, vmi, config);
        await pod.client.syncVMI(vmi);
        expect(await guestNet(pod.serialLog)).toEqual({
          ip: '10.0.2.2/24',
          router: '10.0.2.1',
          dns: '10.96.0.10',
          search: 'e2e.svc.cluster.local,svc.cluster.local',
          hostname: 'net-masq',
          mtu: String(POD_MTU),
        });
        // outbound: masqueraded to the Pod IP
        const connected = await waitFor(
          'the guest connection line',
          async () => /KUBEVIRT-TS-GUEST-CONNECT (.*)/.exec(await readText(pod!.serialLog))?.[1],
          120_000,
        );
        expect(connected.trim()).toBe(`${NODE_IP}:9090 ok ${POD_IP}`);
        // inbound: the listed port reaches the guest
        expect(tcpGet(net.node, POD_IP, 8080)).toBe('KUBEVIRT-TS-GUEST-TCP net-masq 10.0.2.2/24');
        expect(tcpGet(net.node, POD_IP, 8081)).toBe('the-pod-itself');
        // the launcher's DHCP server logged the lease
        expect(pod.proc.stderr()).toContain('"msg":"DHCP lease"');
        // the MAC libvirt gave the NIC is the only client answered from then on
        expect(pod.proc.stderr()).toMatch(/"msg":"DHCP server answers only the guest NIC"/);
      } finally {
        for (const s of servers) s.kill();
        await pod?.stop();
        if (config) await teardownPodNetwork(config, { netns: net.podPath });
        net.destroy();
      }
      expect(sh(['ip', 'netns', 'list'])).not.toContain(net.pod);
      expect(await processesMentioning(net.pod)).toEqual([]);
    },
    600_000,
  );

  rootIt(
    'masquerade, dual stack: the guest gets fd10:0:2::2 with the Pod IPv6 DNS and search list by DHCPv6 (ISC dhclient in the guest), reaches the node over IPv6 as the Pod IPv6; node -> [Pod IPv6]:8080 reaches the guest',
    async () => {
      const net = createNet('6', { ipv6: true });
      let pod: Pod | undefined;
      let config: PodNetworkConfig | undefined;
      const servers: ChildProcess[] = [];
      try {
        // no router advertisements (see packages/network's README): the guest's default route is its own,
        // here from kvts.gw6 (as cloud-init networkData would give it)
        const vmi = netVmi(
          'net-dual',
          { masquerade: {}, ports: [{ port: 8080 }] },
          `kvts.net kvts.net6 kvts.gw6=fd10:0:2::1 kvts.connect6=${NODE_IP6},9096`,
        );
        config = await setupPodNetwork(planPodNetwork(vmi)!, { netns: net.podPath });
        expect(config.ipv6).toMatchObject({ podAddress: POD_IP6, guest: 'fd10:0:2::2' });
        const nodeSrv = tcpServer(net.node, 9096, undefined, '::');
        servers.push(nodeSrv.child);
        await nodeSrv.ready;

        pod = await startPod(net, vmi, config);
        await pod.client.syncVMI(vmi);
        expect(await guestNet(pod.serialLog)).toMatchObject({ ip: '10.0.2.2/24', router: '10.0.2.1' });
        const net6 = await guestNet(pod.serialLog, 'NET6').catch((e: Error) => {
          // and what the launcher's DHCPv6 server logged
          const lines = pod!.proc
            .stderr()
            .split('\n')
            .filter((l) => l.includes('DHCPv6'));
          throw new Error(`${e.message}; the launcher logged: ${lines.join('\n')}`);
        });
        expect(net6).toMatchObject({ dns: POD_DNS6, search: 'e2e.svc.cluster.local.,svc.cluster.local.' });
        expect(net6.ip).toMatch(/^fd10:0:2::2\/\d+$/);
        // the launcher's DHCPv6 server logged the lease it replied with
        await waitFor(
          'the DHCPv6 lease log line',
          () => pod!.proc.stderr().includes('"msg":"DHCPv6 lease"'),
          60_000,
        );
        // outbound over IPv6: masqueraded to the Pod's IPv6 address
        const connected = await waitFor(
          'the guest IPv6 connection line',
          async () => /KUBEVIRT-TS-GUEST-CONNECT6 (.*)/.exec(await readText(pod!.serialLog))?.[1],
          120_000,
        );
        expect(connected.trim()).toBe(`${NODE_IP6},9096 ok ${POD_IP6}`);
        // inbound over IPv6: the listed port of the Pod IPv6 reaches the guest
        expect(tcpGet(net.node, POD_IP6, 8080)).toBe('KUBEVIRT-TS-GUEST-TCP net-dual 10.0.2.2/24');
      } finally {
        for (const s of servers) s.kill();
        await pod?.stop();
        if (config) await teardownPodNetwork(config, { netns: net.podPath });
        net.destroy();
      }
    },
    600_000,
  );

  rootIt(
    "passt: no phase 1 (no bridge, no tap); the launcher's passt in the Pod netns gives the guest the Pod IP, gateway and DNS; node -> Pod IP:8080 (ports:) reaches the guest; the guest reaches a second node address as the Pod IP (the gateway address is passt's way to the Pod's loopback); QEMU's -netdev stream, no <interface>; no passt after SIGTERM",
    async () => {
      const net = createNet('t');
      let pod: Pod | undefined;
      const servers: ChildProcess[] = [];
      try {
        const vmi = netVmi(
          'net-passt',
          { passt: {}, ports: [{ port: 8080 }] },
          `kvts.net kvts.connect=${NODE_IP_2}:9090`,
        );
        // phase 1 (virt-handler) does nothing for passt: no config, nothing in the Pod netns
        expect(planPodNetwork(vmi)!.binding).toBe('passt');
        // passt maps the gateway address (NODE_IP) to the Pod's own loopback: the node's other address
        sh(['ip', '-n', net.node, 'addr', 'add', `${NODE_IP_2}/24`, 'dev', 'node0']);
        const nodeSrv = tcpServer(net.node, 9090, undefined, '0.0.0.0', true);
        servers.push(nodeSrv.child);
        await nodeSrv.ready;

        pod = await startPod(net, vmi);
        await pod.client.syncVMI(vmi);
        const links = (JSON.parse(sh(['ip', '-n', net.pod, '-j', 'link'])) as Array<{ ifname: string }>).map(
          (l) => l.ifname,
        );
        expect(links.sort()).toEqual(['eth0', 'lo']);
        // passt's DHCP: the Pod's address and gateway, the Pod's name server, passt's virtio MTU
        expect(await guestNet(pod.serialLog)).toMatchObject({
          ip: `${POD_IP}/24`,
          router: NODE_IP,
          dns: '10.96.0.10',
          mtu: '65520',
        });
        // outbound: the node sees the Pod IP (passt's own sockets in the Pod)
        const connected = await waitFor(
          'the guest connection line',
          async () => /KUBEVIRT-TS-GUEST-CONNECT (.*)/.exec(await readText(pod!.serialLog))?.[1],
          120_000,
        );
        expect(connected.trim()).toBe(`${NODE_IP_2}:9090 ok ${POD_IP}`);
        // inbound: passt forwards the listed port of the Pod to the guest (the client speaks first: Debian's
        // passt 2023-03, see packages/network's README); the guest's listener may come up after its lease
        const reply = await waitFor(
          'the guest answering on the Pod IP:8080',
          () => {
            try {
              return tcpGet(net.node, POD_IP, 8080, 'hello\n') || false;
            } catch {
              return false;
            }
          },
          120_000,
          1000,
        );
        expect(reply).toBe(`KUBEVIRT-TS-GUEST-TCP (none) ${POD_IP}/24`);
        // passt: the launcher's child, as QEMU's user, its socket in the VMI's 0700 private dir
        const passt = (await processesMentioning(pod.root)).filter((p) => p.cmd.startsWith('passt '));
        expect(passt).toHaveLength(1);
        const status = readFileSync(`/proc/${passt[0]!.pid}/status`, 'utf8');
        const launcher = (await processesMentioning(pod.root)).find(
          (p) => p.cmd.startsWith(`${process.execPath} `) && p.cmd.includes('--name net-passt'),
        );
        expect(Number(/^PPid:\s+(\d+)/m.exec(status)![1])).toBe(launcher!.pid);
        expect(Number(/^Uid:\s+(\d+)/m.exec(status)![1])).toBe(107);
        const args = passt[0]!.cmd.split(' ');
        const sock = args[args.indexOf('--socket') + 1]!;
        expect(sock).toBe(path.join(pod.root, 'var/run/kubevirt-private', vmi.metadata.uid!, 'passt0.sock'));
        expect(statSync(path.dirname(sock)).mode & 0o777).toBe(0o700);
        expect(passt[0]!.cmd).toContain('--tcp-ports 8080 --udp-ports none');
        // the domain: no <interface> (no libvirt passt backend), the NIC in QEMU's passthrough
        const dom = await pod.client.getDomain();
        expect(dom?.spec?.devices?.interfaces ?? []).toEqual([]);
        const qemu = (await processesMentioning(pod.root)).find((p) => p.cmd.includes('qemu-system'));
        expect(qemu?.cmd).toContain(
          JSON.stringify({
            type: 'stream',
            id: 'kvts-passt0',
            server: false,
            addr: { type: 'unix', path: sock },
          }),
        );
        // the launcher's end stops passt and removes its socket
        pod.client.close();
        pod.proc.child.kill('SIGTERM');
        await pod.proc.exited;
        expect(pod.proc.stderr()).not.toContain('PasstExited');
        expect((await processesMentioning(pod.root)).filter((p) => p.cmd.startsWith('passt '))).toEqual([]);
        expect(existsSync(sock)).toBe(false);
      } finally {
        for (const s of servers) s.kill();
        await pod?.stop();
        net.destroy();
      }
      expect(await processesMentioning(net.pod)).toEqual([]);
    },
    600_000,
  );

  rootIt(
    'bridge: the guest holds the Pod IP and the Pod gateway and answers on it',
    async () => {
      const net = createNet('b');
      let pod: Pod | undefined;
      let config: PodNetworkConfig | undefined;
      try {
        const vmi = netVmi('net-bridge', { bridge: {} }, 'kvts.net');
        config = await setupPodNetwork(planPodNetwork(vmi)!, { netns: net.podPath });
        pod = await startPod(net, vmi, config);
        await pod.client.syncVMI(vmi);
        expect(await guestNet(pod.serialLog)).toMatchObject({
          ip: `${POD_IP}/24`,
          router: NODE_IP,
          hostname: 'net-bridge',
          mtu: String(POD_MTU),
        });
        expect(tcpGet(net.node, POD_IP, 8080)).toBe(`KUBEVIRT-TS-GUEST-TCP net-bridge ${POD_IP}/24`);
      } finally {
        await pod?.stop();
        if (config) await teardownPodNetwork(config, { netns: net.podPath });
        net.destroy();
      }
    },
    600_000,
  );

  rootIt(
    'no phase-1 config for a masquerade interface: the sync fails naming the interface and the file; no domain',
    async () => {
      const net = createNet('x');
      let pod: Pod | undefined;
      try {
        const vmi = netVmi('net-missing', { masquerade: {} }, 'kvts.net');
        pod = await startPod(net, vmi);
        await expect(pod.client.syncVMI(vmi)).rejects.toThrow(
          /spec\.domain\.devices\.interfaces\[0\] \(default, masquerade\): the Pod network is not set up: .*pod-network-default\.json does not exist/,
        );
        expect(await pod.client.getDomain()).toBeUndefined(); // nothing defined
        expect(
          spawnSync('pgrep', ['-f', `qemu-system.*${pod.root}`]).status, // 1: no QEMU
        ).toBe(1);
      } finally {
        await pod?.stop();
        net.destroy();
      }
    },
    300_000,
  );
});
