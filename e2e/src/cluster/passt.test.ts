// The passt binding on the cluster (tools/cluster.sh): a VM whose pod interface is
// `interfaces: [{name: default, passt: {}, ports: [{port: 8080}]}]` boots on the real node; virt-handler runs no
// phase 1 for it, the launcher runs passt in its Pod (uid 107, no capability, under the Localhost seccomp profile
// virt-handler installs on the node: containerd's RuntimeDefault refuses the user namespace passt, run as a non-root
// user, sandboxes itself in), passt's DHCP hands the Pod IP with the CNI's gateway to the guest, the node reaches the
// guest at the Pod IP on the listed port, and the guest reaches the node with the Pod IP as its own address. Runs
// only when the cluster is up with the images loaded (as vm.test.ts).
import { readFileSync } from 'node:fs';
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
  mountsUnder,
  onNode,
  peerEcho,
  tcpLine,
} from './cluster.js';

const { reason, requireCluster, clusterTest } = clusterGate();
const NS = 'default';
const VM = 'tiny-passt';
const SLOW = 900_000;
const CONNECT_PORT = 18082; // a listener in the root namespace the guest connects to (kvts.connect)
const NET_LINE = /KUBEVIRT-TS-GUEST-NET ip=(\S+) router=(\S+) dns=\S* search=\S* hostname=(\S+) mtu=(\d+)/;

/** examples/vm-tiny.yaml as VM `tiny-passt` with the pod network on the passt binding, port 8080 listed */
function vmManifest(): string {
  const m = readFileSync(path.join(REPO, 'examples/vm-tiny.yaml'), 'utf8')
    .replace(/^ {2}name: tiny$/m, `  name: ${VM}`)
    .replace(/kubevirt\.io\/vm: tiny/, `kubevirt.io/vm: ${VM}`)
    .replace(/kvts\.net$/m, `kvts.net kvts.connect=${CLIENT_IP}:${CONNECT_PORT}`)
    .replace(
      /^( +)autoattachMemBalloon: false$/m,
      '$1autoattachMemBalloon: false\n$1interfaces:\n$1  - name: default\n$1    passt: {}\n$1    ports:\n$1      - port: 8080',
    )
    .replace(/^( +)volumes:$/m, '$1networks:\n$1  - name: default\n$1    pod: {}\n$1volumes:');
  expect(m).toContain('passt: {}');
  expect(m).toContain('pod: {}');
  return m;
}

describe(`The passt binding on the cluster (${reason ? `skipped: ${reason}` : 'tools/cluster.sh'})`, () => {
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
    'a VM with interfaces [{name: default, passt: {}, ports: [8080]}]: Running, the guest holds the Pod IP from passt, node -> Pod IP:8080 reaches the guest, the guest reaches the node from the Pod IP; passt in the Pod as uid 107; delete leaves nothing',
    async () => {
      // the close after the guest's FIN: Debian's passt 2023-03 (packages/network's README)
      connectSrv = await peerEcho(CLIENT_IP, CONNECT_PORT, true);
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
        expect.objectContaining({ name: 'default', passt: {} }),
      ]);
      const pod = getJson('pods', '-n', NS, '-l', `kubevirt.io/created-by=${vmi.metadata.uid}`)!.items[0];
      const podIp: string = pod.status.podIP;
      expect(podIp).toMatch(/^10\.244\.\d+\.\d+$/);
      serial = new SerialLog(pod.metadata.uid, vmi.metadata.uid);
      const s = serial;
      await waitFor('guest ready line', () => s.text.includes(READY), SLOW, 500);
      // the lease from passt: the Pod's own address and the CNI's gateway, passt's virtio MTU
      await waitFor('the guest DHCP lease line', () => NET_LINE.test(s.text), SLOW, 500);
      const [, ip, router, , mtu] = NET_LINE.exec(s.text)!;
      expect([ip, router, mtu]).toEqual([`${podIp}/24`, cniGateway(pod.spec.nodeName), '65520']);
      // passt: in the launcher's Pod, as uid 107, on the listed port only
      const passt = (await processesMentioning(vmi.metadata.uid)).filter((p) => p.cmd.startsWith('passt '));
      expect(passt).toHaveLength(1);
      expect(passt[0]!.cmd).toContain('--tcp-ports 8080 --udp-ports none');
      const status = readFileSync(`/proc/${passt[0]!.pid}/status`, 'utf8');
      expect(/^Uid:\s+(\d+)/m.exec(status)![1]).toBe('107');
      // under the Localhost profile virt-handler installed (a seccomp filter: mode 2), without capabilities
      expect(pod.spec.securityContext.seccompProfile).toEqual({
        type: 'Localhost',
        localhostProfile: 'kubevirt-ts/kubevirt.json',
      });
      const profile = JSON.parse(
        readFileSync(onNode(pod.spec.nodeName, '/var/lib/kubelet/seccomp/kubevirt-ts/kubevirt.json'), 'utf8'),
      );
      expect(profile.defaultAction).toBe('SCMP_ACT_ERRNO');
      expect(/^Seccomp:\s+(\d+)/m.exec(status)![1]).toBe('2');
      expect(/^CapEff:\s+(\w+)/m.exec(status)![1]).toBe('0000000000000000');
      // inbound from the node: passt forwards the Pod IP's port 8080 to the guest (the client speaks first)
      const reply = await waitFor(
        'the guest answering at the Pod IP:8080',
        () => tcpLine(podIp, 8080, 'hello\n').catch(() => false as const),
        120_000,
        1000,
      );
      expect(reply).toMatch(new RegExp(`^KUBEVIRT-TS-GUEST-TCP \\S+ ${podIp.replace(/\./g, '\\.')}/24$`));
      // outbound: the node's listener saw the Pod IP
      await waitFor(
        'the guest connected to the node',
        () => /KUBEVIRT-TS-GUEST-CONNECT \S+ (ok|failed)/.test(s.text),
        120_000,
        500,
      );
      expect(/KUBEVIRT-TS-GUEST-CONNECT .*/.exec(s.text)![0]).toBe(
        `KUBEVIRT-TS-GUEST-CONNECT ${CLIENT_IP}:${CONNECT_PORT} ok ${podIp}`,
      );

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
      expect((await processesMentioning(vmi.metadata.uid)).filter((p) => p.cmd.startsWith('passt '))).toEqual(
        [],
      );
      expect(mountsUnder(pod.metadata.uid)).toEqual([]);
    },
    SLOW,
  );
});
