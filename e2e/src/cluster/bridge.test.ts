// The bridge binding on the cluster (tools/cluster.sh): a VM whose pod interface is
// `interfaces: [{name: default, bridge: {}}]` boots on the real node; virt-handler's phase 1 makes the launcher Pod's
// eth0 a port of the bridge, the launcher's DHCP server hands the Pod IP (with the CNI's prefix and gateway) to the
// guest, the VMI reports it, the node reaches the guest at the Pod IP on a TCP port, and the guest reaches the node
// with the Pod IP as its own address. Runs only when the cluster is up with the images loaded (as vm.test.ts).
import { existsSync, readFileSync } from 'node:fs';
import type net from 'node:net';
import path from 'node:path';
import { READY, REPO, processesMentioning, waitFor } from '../launcher/helpers.js';
import {
  CLIENT_IP,
  SerialLog,
  clusterGate,
  cniGateway,
  deployKubevirtTs,
  getJson,
  kubectl,
  kubectlIn,
  kubectlTry,
  inNodeNet,
  mountsUnder,
  onNode,
  peerEcho,
  tcpLine,
} from './cluster.js';

const { reason, clusterTest, requireCluster } = clusterGate();
const NS = 'default';
const VM = 'tiny-bridge';
const SLOW = 900_000;
const CONNECT_PORT = 18081; // a listener in the root namespace the guest connects to (kvts.connect)
const NET_LINE = /KUBEVIRT-TS-GUEST-NET ip=(\S+) router=(\S+) dns=\S* search=\S* hostname=(\S+) mtu=(\d+)/;

/** examples/vm-tiny.yaml as VM `tiny-bridge` with the pod network on the bridge binding */
function vmManifest(): string {
  const m = readFileSync(path.join(REPO, 'examples/vm-tiny.yaml'), 'utf8')
    .replace(/^ {2}name: tiny$/m, `  name: ${VM}`)
    .replace(/kubevirt\.io\/vm: tiny/, `kubevirt.io/vm: ${VM}`)
    .replace(/kvts\.net$/m, `kvts.net kvts.connect=${CLIENT_IP}:${CONNECT_PORT}`)
    .replace(
      /^( +)autoattachMemBalloon: false$/m,
      '$1autoattachMemBalloon: false\n$1interfaces:\n$1  - name: default\n$1    bridge: {}',
    )
    .replace(/^( +)volumes:$/m, '$1networks:\n$1  - name: default\n$1    pod: {}\n$1volumes:');
  expect(m).toContain('bridge: {}');
  expect(m).toContain('pod: {}');
  return m;
}

describe(`The bridge binding on the cluster (${reason ? `skipped: ${reason}` : 'tools/cluster.sh'})`, () => {
  requireCluster();
  let serial: SerialLog | undefined;
  let connectSrv: net.Server | undefined;
  afterAll(() => {
    serial?.stop();
    connectSrv?.close();
    if (!reason)
      kubectlTry('delete', 'vm', '-n', NS, VM, '--ignore-not-found', '--wait=true', '--timeout=300s');
  });

  clusterTest('deploy/ applied: virt-controller and virt-handler Ready', deployKubevirtTs, SLOW);

  clusterTest(
    'a VM with interfaces [{name: default, bridge: {}}]: the guest holds the Pod IP by DHCP, the VMI reports it, node -> Pod IP:8080 reaches the guest, the guest reaches the node from the Pod IP; delete leaves nothing',
    async () => {
      connectSrv = await peerEcho(CLIENT_IP, CONNECT_PORT);
      // the webhook Service may not route to a ready replica yet right after the rollout: retry only that error
      await waitFor(
        'the VM applied (the admission webhook answers)',
        () => {
          try {
            kubectlIn(vmManifest(), 'apply', '-f', '-');
            return true;
          } catch (e) {
            if (!/failed calling webhook/.test(String((e as { stderr?: string }).stderr ?? e))) throw e;
            return false;
          }
        },
        120_000,
        2000,
      );
      const vmi = await waitFor(
        `VMI ${VM} Running`,
        () => {
          const v = getJson('vmi', '-n', NS, VM);
          return v?.status?.phase === 'Running' ? v : undefined;
        },
        SLOW,
        500,
      );
      expect(vmi.spec.domain.devices.interfaces).toEqual([
        expect.objectContaining({ name: 'default', bridge: {} }),
      ]);
      const pod = getJson('pods', '-n', NS, '-l', `kubevirt.io/created-by=${vmi.metadata.uid}`)!.items[0];
      const podIp: string = pod.status.podIP;
      expect(podIp).toMatch(/^10\.244\.\d+\.\d+$/);
      serial = new SerialLog(pod.metadata.uid, vmi.metadata.uid);
      const s = serial;
      await waitFor('guest ready line', () => s.text.includes(READY), SLOW, 500);
      // the lease: the Pod's own address with the CNI's prefix and gateway (the Pod interface is a bridge port)
      await waitFor('the guest DHCP lease line', () => NET_LINE.test(s.text), SLOW, 500);
      const [, ip, router, hostname, mtu] = NET_LINE.exec(s.text)!;
      expect([ip, router, hostname]).toEqual([`${podIp}/24`, cniGateway(pod.spec.nodeName), VM]);
      expect(Number(mtu)).toBeGreaterThanOrEqual(1280);
      // status.interfaces: the address the guest holds, the Pod IP
      await waitFor(
        'status.interfaces[0].ipAddress = the Pod IP',
        () => getJson('vmi', '-n', NS, VM)?.status?.interfaces?.[0]?.ipAddress === podIp,
        120_000,
        500,
      );
      expect(getJson('vmi', '-n', NS, VM)!.status.interfaces[0]).toMatchObject({
        name: 'default',
        ipAddress: podIp,
        ipAddresses: [podIp],
      });
      // inbound from the node: the guest itself answers at the Pod IP (no NAT: it prints the Pod IP as its address)
      expect(await tcpLine(podIp, 8080)).toBe(`KUBEVIRT-TS-GUEST-TCP ${VM} ${podIp}/24`);
      // outbound: the node's listener saw the Pod IP, the guest's own address
      await waitFor(
        'the guest connected to the node',
        () => /KUBEVIRT-TS-GUEST-CONNECT \S+ (ok|failed)/.test(s.text),
        120_000,
        500,
      );
      // (on failure: the node's neighbour entry for the Pod IP, the first thing to look at)
      const connectLine = /KUBEVIRT-TS-GUEST-CONNECT .*/.exec(s.text)![0];
      expect(
        `${connectLine}${/ failed/.test(connectLine) ? ` (node: ${inNodeNet(pod.spec.nodeName, 'ip', 'neigh', 'show', podIp).trim()})` : ''}`,
      ).toBe(`KUBEVIRT-TS-GUEST-CONNECT ${CLIENT_IP}:${CONNECT_PORT} ok ${podIp}`);

      kubectl('delete', 'vm', '-n', NS, VM, '--wait=true', '--timeout=300s');
      await waitFor(
        'launcher Pod gone',
        () => !JSON.stringify(getJson('pods', '-n', NS)?.items ?? []).includes(pod.metadata.uid),
        SLOW,
        500,
      );
      expect(
        (await processesMentioning(`guest=${NS}_${VM},`)).filter((p) => /qemu-system/.test(p.cmd)),
      ).toEqual([]);
      expect(mountsUnder(pod.metadata.uid)).toEqual([]);
      await waitFor(
        "the handler's record of phase 1 gone",
        () => !existsSync(onNode(pod.spec.nodeName, `/run/kubevirt/pod-network/${pod.metadata.uid}.json`)),
        120_000,
        500,
      );
    },
    SLOW,
  );
});
