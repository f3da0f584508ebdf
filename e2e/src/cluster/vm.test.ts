// VirtualMachines end to end on the cluster (tools/cluster.sh): `kubectl apply -f deploy/` runs
// virt-controller and virt-handler from their images, then examples/vm-tiny.yaml (the test guest as kernelBoot
// container + containerDisk) goes through its lifecycle: Running with the guest's ready line and its DHCP lease on
// the default pod network (masquerade: the guest reached from the node at the Pod IP and through a ClusterIP
// Service, and reaching the node with the Pod IP as source), stop (ACPI) and start, virt-handler restarted under a
// running guest, delete (nothing of the Pod network left); a kill -9 of QEMU under RerunOnFailure (a VM without a
// pod interface: autoattachPodInterface false); an invalid VM refused by admission with its field path.
// Runs only when the cluster is up with the images loaded (tools/test.sh does both; see node.test.ts).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import type net from 'node:net';
import path from 'node:path';
import { READY, REPO, processesMentioning, waitFor } from '../launcher/helpers.js';
import {
  IMAGES_JSON,
  KUBECONFIG,
  KUBECTL,
  CLIENT_IP,
  SerialLog,
  clusterGate,
  deployKubevirtTs,
  getJson,
  kubectl,
  kubectlIn,
  inNodeNet,
  kubectlTry,
  mountsUnder,
  nodeNames,
  onNode,
  peerEcho,
  tcpLine,
} from './cluster.js';

const { reason, clusterTest, requireCluster } = clusterGate();
const NS = 'default';
const POWEROFF = 'KUBEVIRT-TS-GUEST-POWEROFF acpi-power-button';
const SLOW = 900_000; // image start, libvirtd and a TCG guest boot on a shared 2-core machine
const CONNECT_PORT = 18080; // a listener in the root namespace the guest connects to (kvts.connect)
const NET_LINE = /KUBEVIRT-TS-GUEST-NET ip=(\S+) router=(\S+) dns=\S* search=\S* hostname=(\S+) mtu=(\d+)/;

type Obj = Record<string, any>;

function vmManifest(name: string, runStrategy: string, o: { podNetwork?: boolean } = {}): string {
  let m = readFileSync(path.join(REPO, 'examples/vm-tiny.yaml'), 'utf8')
    .replace(/^ {2}name: tiny$/m, `  name: ${name}`)
    .replace(/kubevirt\.io\/vm: tiny/, `kubevirt.io/vm: ${name}`)
    .replace(/runStrategy: Always/, `runStrategy: ${runStrategy}`)
    // the guest also connects to a listener on the node (outbound masquerade)
    .replace(/kvts\.net$/m, `kvts.net kvts.connect=${CLIENT_IP}:${CONNECT_PORT}`);
  if (o.podNetwork === false)
    m = m.replace(
      /^( +)autoattachMemBalloon: false$/m,
      '$1autoattachMemBalloon: false\n$1autoattachPodInterface: false',
    );
  return m;
}

const podIpOf = (vmi: Obj): string =>
  getJson('pods', '-n', NS, '-l', `kubevirt.io/created-by=${vmi.metadata.uid}`)!.items[0].status.podIP;

/** Whether any process is in the network namespace `ns` (a /proc/<pid>/ns/net link: "net:[inode]"). */
async function inNetns(ns: string): Promise<boolean> {
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (readlinkSync(`/proc/${pid}/ns/net`) === ns) return true;
    } catch {
      /* gone */
    }
  }
  return false;
}

async function runningVmi(name: string, notUid?: string): Promise<Obj> {
  return waitFor(
    `VMI ${name} Running`,
    () => {
      const v = getJson('vmi', '-n', NS, name);
      return v?.status?.phase === 'Running' && v.metadata.uid !== notUid ? v : undefined;
    },
    SLOW,
    500,
  );
}
const podUidOf = (vmi: Obj) => Object.keys(vmi.status.activePods ?? {})[0]!;
async function qemuOf(name: string) {
  return (await processesMentioning(`guest=${NS}_${name},`)).filter((p) => /qemu-system/.test(p.cmd));
}
async function gone(what: string, ...args: string[]) {
  await waitFor(what, () => getJson(...args) === undefined, SLOW, 500);
}

describe(`VirtualMachines on the cluster (${reason ? `skipped: ${reason}` : 'tools/cluster.sh'})`, () => {
  requireCluster();
  const serials: SerialLog[] = [];
  afterAll(() => {
    for (const s of serials) s.stop();
    if (!reason) {
      kubectlTry(
        'delete',
        'vm',
        '-n',
        NS,
        'tiny',
        'tiny-rerun',
        'tiny-bad',
        '--ignore-not-found',
        '--wait=true',
        '--timeout=300s',
      );
    }
  });
  const follow = (vmi: Obj) => {
    const s = new SerialLog(podUidOf(vmi), vmi.metadata.uid);
    serials.push(s);
    return s;
  };

  clusterTest(
    'kubectl apply -f deploy/: the virt-controller Deployment and the virt-handler DaemonSet become Ready',
    async () => {
      await deployKubevirtTs();
      const dep = getJson('deployment', '-n', 'kubevirt-ts', 'virt-controller')!;
      expect(dep.status.readyReplicas).toBe(2);
      const ds = getJson('daemonset', '-n', 'kubevirt-ts', 'virt-handler')!;
      // one virt-handler per node, each on its node
      expect(ds.status.numberReady).toBe(nodeNames().length);
      expect(
        getJson('pods', '-n', 'kubevirt-ts', '-l', 'kubevirt.io=virt-handler')!
          .items.map((p: Obj) => p.spec.nodeName)
          .sort(),
      ).toEqual(nodeNames().sort());
      // the node runs exactly the images tools/images/build.sh built: the Pods name them by digest, and the
      // container runtime reports those digests for the running containers
      const built = (
        JSON.parse(readFileSync(IMAGES_JSON, 'utf8')) as { images: Record<string, { digest: string }> }
      ).images;
      for (const [app, selector] of [
        ['virt-controller', 'kubevirt.io=virt-controller'],
        ['virt-handler', 'kubevirt.io=virt-handler'],
      ] as const) {
        const pods = getJson('pods', '-n', 'kubevirt-ts', '-l', selector)!.items as {
          metadata: { deletionTimestamp?: string };
          spec: { containers: { image: string }[] };
          status: { containerStatuses?: { imageID: string }[] };
        }[];
        const live = pods.filter((p) => !p.metadata.deletionTimestamp);
        expect(live.length).toBeGreaterThan(0);
        for (const p of live) {
          expect(p.spec.containers[0]!.image).toBe(`localhost/kubevirt-ts/${app}@${built[app]!.digest}`);
          expect(p.status.containerStatuses?.[0]?.imageID).toMatch(new RegExp(`@${built[app]!.digest}$`));
        }
      }
    },
    SLOW,
  );

  let vmi: Obj;
  let serial: SerialLog;

  let connectSrv: net.Server | undefined;
  afterAll(() => connectSrv?.close());

  clusterTest(
    'examples/vm-tiny.yaml: VM Ready, VMI Running on the node, the guest ready line in the serial log, container disks mounted read-only',
    async () => {
      connectSrv = await peerEcho(CLIENT_IP, CONNECT_PORT);
      // the webhook Service may not route to a ready replica yet right after the rollout: retry only that error
      await waitFor(
        'the VM applied (the admission webhook answers)',
        () => {
          const r = spawnSync(KUBECTL, ['--kubeconfig', KUBECONFIG, 'apply', '-f', '-'], {
            input: vmManifest('tiny', 'Always'),
            encoding: 'utf8',
          });
          if (r.status === 0) return true;
          if (!/failed calling webhook/.test(r.stderr)) throw new Error(`kubectl apply: ${r.stderr}`);
          return false;
        },
        120_000,
        2000,
      );
      vmi = await runningVmi('tiny');
      expect(nodeNames()).toContain(vmi.status.nodeName);
      const podUid = podUidOf(vmi);
      serial = follow(vmi);
      await waitFor('guest ready line', () => serial.text.includes(READY), SLOW, 500);
      // the containerDisk image's 64 MiB qcow2 is the guest's vda
      expect(serial.text).toMatch(/KUBEVIRT-TS-GUEST-DISK name=vda bytes=67108864 ro=0/);
      await waitFor('VM Ready', () => getJson('vm', '-n', NS, 'tiny')?.status?.ready === true, SLOW, 500);
      expect(getJson('vm', '-n', NS, 'tiny')!.status.printableStatus).toBe('Running');
      expect(
        mountsUnder(podUid)
          .map((m) => m.replace(/^.*container-disks\//, ''))
          .sort(),
      ).toEqual(['disk_0.img', 'kernel-boot/initramfs.img', 'kernel-boot/vmlinuz']);
      expect(await qemuOf('tiny')).toHaveLength(1);
    },
    SLOW,
  );

  clusterTest(
    'the default pod network (masquerade): the guest gets 10.0.2.2/24 by DHCP, the VMI reports the Pod IP, node -> Pod IP:8080 and a ClusterIP Service reach the guest, the guest reaches the node from the Pod IP',
    async () => {
      const pod = getJson('pods', '-n', NS, '-l', `kubevirt.io/created-by=${vmi.metadata.uid}`)!.items[0];
      const podIp: string = pod.status.podIP;
      expect(podIp).toMatch(/^10\.244\.\d+\.\d+$/);
      // the launcher Pod: the sysctl that lets uid 107 serve DHCP on port 67, no capability added
      expect(pod.spec.securityContext.sysctls).toEqual([
        { name: 'net.ipv4.ip_unprivileged_port_start', value: '67' },
      ]);
      expect(pod.spec.containers.find((c: Obj) => c.name === 'compute').securityContext.capabilities).toEqual(
        {
          drop: ['ALL'],
        },
      );
      // the lease, from the launcher's own DHCP server (hostname: the VMI's name)
      await waitFor('the guest DHCP lease line', () => NET_LINE.test(serial.text), SLOW, 500);
      const [, ip, router, hostname, mtu] = NET_LINE.exec(serial.text)!;
      expect([ip, router, hostname]).toEqual(['10.0.2.2/24', '10.0.2.1', 'tiny']);
      expect(Number(mtu)).toBeGreaterThanOrEqual(1280);
      // status.interfaces: the Pod IP, as upstream reports a masquerade interface
      await waitFor(
        'status.interfaces[0].ipAddress = the Pod IP',
        () => getJson('vmi', '-n', NS, 'tiny')?.status?.interfaces?.[0]?.ipAddress === podIp,
        120_000,
        500,
      );
      expect(getJson('vmi', '-n', NS, 'tiny')!.status.interfaces[0]).toMatchObject({
        name: 'default',
        ipAddress: podIp,
        ipAddresses: [podIp],
      });
      // inbound from the node (this test's own network namespace, the host's) to the Pod IP
      expect(await tcpLine(podIp, 8080)).toBe('KUBEVIRT-TS-GUEST-TCP tiny 10.0.2.2/24');
      // outbound: the guest connected to the node's listener with the Pod IP as its source
      await waitFor(
        'the guest connected to the node',
        () => /KUBEVIRT-TS-GUEST-CONNECT \S+ (ok|failed)/.test(serial.text),
        120_000,
        500,
      );
      expect(serial.text).toContain(`KUBEVIRT-TS-GUEST-CONNECT ${CLIENT_IP}:${CONNECT_PORT} ok ${podIp}`);
      // through a ClusterIP Service (kube-proxy's rules on the node)
      kubectlIn(
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'Service',
          metadata: { name: 'tiny-8080', namespace: NS },
          spec: { selector: { 'kubevirt.io/vm': 'tiny' }, ports: [{ port: 80, targetPort: 8080 }] },
        }),
        'apply',
        '-f',
        '-',
      );
      try {
        const clusterIp: string = getJson('service', '-n', NS, 'tiny-8080')!.spec.clusterIP;
        let answer = '';
        await waitFor(
          `ClusterIP ${clusterIp}:80 answers (kube-proxy has the endpoint)`,
          async () => {
            answer = await tcpLine(clusterIp, 80).catch((e: Error) => e.message);
            return answer.startsWith('KUBEVIRT-TS-GUEST-TCP');
          },
          120_000,
          1000,
        );
        expect(answer).toBe('KUBEVIRT-TS-GUEST-TCP tiny 10.0.2.2/24');
      } finally {
        kubectl('delete', 'service', '-n', NS, 'tiny-8080', '--ignore-not-found');
      }
    },
    SLOW,
  );

  clusterTest(
    'stop (runStrategy Halted): ACPI shutdown, VMI and Pod gone, nothing left on the node; start again: Running',
    async () => {
      const podUid = podUidOf(vmi);
      kubectl('patch', 'vm', '-n', NS, 'tiny', '--type', 'merge', '-p', '{"spec":{"runStrategy":"Halted"}}');
      await waitFor('ACPI power-off in the guest', () => serial.text.includes(POWEROFF), SLOW, 200);
      await gone('VMI gone', 'vmi', '-n', NS, 'tiny');
      await waitFor(
        'launcher Pod gone',
        () => !JSON.stringify(getJson('pods', '-n', NS)?.items ?? []).includes(podUid),
        SLOW,
        500,
      );
      await waitFor(
        'VM Stopped',
        () => getJson('vm', '-n', NS, 'tiny')?.status?.printableStatus === 'Stopped',
        SLOW,
        500,
      );
      // a clean end: the handler recorded Normal Stopped (not a kill after the grace period)
      const events = getJson(
        'events',
        '-n',
        NS,
        '--field-selector',
        `involvedObject.uid=${vmi.metadata.uid}`,
      )!;
      expect(events.items.map((e: Obj) => `${e.type} ${e.reason}`)).toContain('Normal Stopped');
      expect(events.items.map((e: Obj) => `${e.type} ${e.reason}`)).not.toContain('Warning Stopped');
      expect(await qemuOf('tiny')).toEqual([]);
      expect(mountsUnder(podUid)).toEqual([]);

      kubectl('patch', 'vm', '-n', NS, 'tiny', '--type', 'merge', '-p', '{"spec":{"runStrategy":"Always"}}');
      const again = await runningVmi('tiny', vmi.metadata.uid);
      vmi = again;
      serial = follow(vmi);
      await waitFor('guest ready line after the start', () => serial.text.includes(READY), SLOW, 500);
    },
    SLOW,
  );

  clusterTest(
    'virt-handler Pod restarted while the VM runs: the guest keeps running, the VMI stays Running and Ready',
    async () => {
      const [qemu] = await qemuOf('tiny');
      expect(qemu).toBeDefined();
      // the handler of the VMI's node
      const handlers = () =>
        getJson(
          'pods',
          '-n',
          'kubevirt-ts',
          '-l',
          'kubevirt.io=virt-handler',
          '--field-selector',
          `spec.nodeName=${vmi.status.nodeName}`,
        )!.items;
      const before = handlers()[0].metadata.name;
      kubectl('delete', 'pod', '-n', 'kubevirt-ts', before, '--wait=true', '--timeout=300s');
      await waitFor(
        'a new virt-handler Pod Ready',
        () => {
          const p = handlers()[0];
          return (
            p &&
            p.metadata.name !== before &&
            p.status?.conditions?.some((c: Obj) => c.type === 'Ready' && c.status === 'True')
          );
        },
        SLOW,
        500,
      );
      const beats = serial.text.length;
      await waitFor('guest heartbeats after the restart', () => serial.text.length > beats, 60_000, 500);
      expect(await qemuOf('tiny')).toEqual([qemu]); // the same QEMU, and no other (a diff shows both command lines)
      // the new handler reads phase 1's record: the VMI still reports the Pod IP
      await waitFor(
        'status.interfaces[0].ipAddress after the restart',
        () => getJson('vmi', '-n', NS, 'tiny')?.status?.interfaces?.[0]?.ipAddress === podIpOf(vmi),
        120_000,
        500,
      );
      const now = getJson('vmi', '-n', NS, 'tiny')!;
      expect(now.metadata.uid).toBe(vmi.metadata.uid);
      expect(now.status.phase).toBe('Running');
      expect(now.status.conditions.find((c: Obj) => c.type === 'Ready')?.status).toBe('True');
    },
    SLOW,
  );

  clusterTest(
    'delete the VM (after the handler restart, so the new handler drives it): ACPI shutdown, VM, VMI, Pod, QEMU, mounts and the Pod network gone',
    async () => {
      const podUid = podUidOf(vmi);
      // the Pod's network namespace (where the bridge, tap and nft tables live), seen through QEMU
      const [qemu] = await qemuOf('tiny');
      const podNetns = readlinkSync(`/proc/${qemu!.pid}/ns/net`);
      const node: string = vmi.status.nodeName;
      const record = onNode(node, `/run/kubevirt/pod-network/${podUid}.json`);
      expect(existsSync(record)).toBe(true); // the handler's record of phase 1
      expect(await tcpLine(podIpOf(vmi), 8080)).toMatch(/^KUBEVIRT-TS-GUEST-TCP tiny/); // the new handler's VMI too
      kubectl('delete', 'vm', '-n', NS, 'tiny', '--wait=false');
      await waitFor('ACPI power-off in the guest', () => serial.text.includes(POWEROFF), SLOW, 200);
      await gone('VM gone', 'vm', '-n', NS, 'tiny');
      await gone('VMI gone', 'vmi', '-n', NS, 'tiny');
      await waitFor(
        'launcher Pod gone',
        () => !JSON.stringify(getJson('pods', '-n', NS)?.items ?? []).includes(podUid),
        SLOW,
        500,
      );
      expect(await qemuOf('tiny')).toEqual([]);
      expect(mountsUnder(podUid)).toEqual([]);
      // nothing of the Pod network is left: its namespace is gone (no process in it), so are its devices and
      // rules; the node's own network namespace never had them; the handler forgot its record
      await waitFor('the Pod network namespace gone', async () => !(await inNetns(podNetns)), 120_000, 500);
      await waitFor('the handler record gone', () => !existsSync(record), 120_000, 500);
      const hostLinks = JSON.parse(inNodeNet(node, 'ip', '-json', 'link', 'show')) as Obj[];
      expect(hostLinks.map((l) => l.ifname)).toContain('eth0'); // the node's own devices (it is that namespace)
      expect(hostLinks.map((l) => l.ifname)).not.toEqual(expect.arrayContaining(['k6t-eth0']));
      expect(hostLinks.map((l) => l.ifname)).not.toEqual(expect.arrayContaining(['tap0']));
      expect(inNodeNet(node, 'nft', 'list', 'tables')).not.toMatch(/ kubevirt$/m);
    },
    SLOW,
  );

  clusterTest(
    'kill -9 of QEMU inside the Pod: the VMI fails, and under RerunOnFailure a new VMI runs the guest again',
    async () => {
      // without a pod interface (autoattachPodInterface: false): also a VM with no network at all runs
      kubectlIn(vmManifest('tiny-rerun', 'RerunOnFailure', { podNetwork: false }), 'apply', '-f', '-');
      const first = await runningVmi('tiny-rerun');
      expect(first.spec.domain.devices.interfaces ?? []).toEqual([]);
      const s = follow(first);
      await waitFor('guest ready line', () => s.text.includes(READY), SLOW, 500);
      const [qemu] = await qemuOf('tiny-rerun');
      expect(qemu).toBeDefined();
      process.kill(qemu!.pid, 'SIGKILL');
      // the old VMI failed (the handler's Warning Stopped event names it), then a new one runs
      await waitFor(
        'the killed VMI reported Failed',
        () =>
          getJson(
            'events',
            '-n',
            NS,
            '--field-selector',
            `involvedObject.uid=${first.metadata.uid}`,
          )!.items.some((e: Obj) => e.type === 'Warning' && e.reason === 'Stopped'),
        SLOW,
        500,
      );
      const second = await runningVmi('tiny-rerun', first.metadata.uid);
      const s2 = follow(second);
      await waitFor('guest ready line in the new VMI', () => s2.text.includes(READY), SLOW, 500);
      expect(await qemuOf('tiny-rerun')).toHaveLength(1);
      kubectl('delete', 'vm', '-n', NS, 'tiny-rerun', '--wait=true', '--timeout=300s');
      await gone('VMI gone', 'vmi', '-n', NS, 'tiny-rerun');
    },
    SLOW,
  );

  clusterTest(
    'why the launcher Pod uses the ip_unprivileged_port_start sysctl: a uid-107 container with NET_BIND_SERVICE added has no effective capability',
    async () => {
      // the launcher image deploy/ gives virt-controller (--launcher-image)
      const args = JSON.parse(
        kubectl('get', 'deployment', '-n', 'kubevirt-ts', 'virt-controller', '-o', 'json'),
      ).spec.template.spec.containers[0].args as string[];
      const image = args.find((a) => a.startsWith('--launcher-image='))!.slice('--launcher-image='.length);
      const name = 'kvts-capcheck';
      kubectlIn(
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name, namespace: NS },
          spec: {
            restartPolicy: 'Never',
            containers: [
              {
                name: 'c',
                image,
                imagePullPolicy: 'IfNotPresent',
                // the launcher's own binary, as the launcher runs
                command: [
                  '/usr/local/bin/node',
                  '-p',
                  "require('fs').readFileSync('/proc/self/status', 'utf8')",
                ],
                securityContext: {
                  runAsUser: 107,
                  runAsGroup: 107,
                  runAsNonRoot: true,
                  allowPrivilegeEscalation: false,
                  capabilities: { drop: ['ALL'], add: ['NET_BIND_SERVICE'] },
                },
              },
            ],
          },
        }),
        'apply',
        '-f',
        '-',
      );
      try {
        await waitFor(
          'the check Pod done',
          () => getJson('pod', '-n', NS, name)?.status?.phase === 'Succeeded',
          SLOW,
          500,
        );
        const caps = Object.fromEntries(
          kubectl('logs', '-n', NS, name)
            .trim()
            .split('\n')
            .filter((l) => l.startsWith('Cap'))
            .map((l) => l.split(/:\s+/)),
        );
        expect(caps.CapBnd).toBe((1 << 10).toString(16).padStart(16, '0')); // granted to the container...
        expect(caps.CapEff).toBe('0000000000000000'); // ...but not to its uid-107 process
        expect(caps.CapAmb).toBe('0000000000000000');
      } finally {
        kubectl('delete', 'pod', '-n', NS, name, '--ignore-not-found', '--wait=false');
      }
    },
    SLOW,
  );

  clusterTest(
    'an invalid VM is refused by admission (kubectl apply) with the field path; nothing is stored',
    async () => {
      // a second disk named like the first, and a masquerade port listed twice (rules the CRD schema cannot state)
      const bad = vmManifest('tiny-bad', 'Always')
        .replace(
          /^( +)disks:\n( +- name: containerdisk\n +disk:\n +bus: virtio\n)/m,
          (_m, ind: string, disk: string) => `${ind}disks:\n${disk}${disk}`,
        )
        .replace(
          /^( +)autoattachMemBalloon: false$/m,
          '$1autoattachMemBalloon: false\n$1interfaces:\n$1  - name: default\n$1    masquerade: {}\n$1    ports:\n$1      - port: 8080\n$1      - port: 8080',
        );
      expect(bad.match(/- port: 8080/g)).toHaveLength(2);
      const r = spawnSync(KUBECTL, ['--kubeconfig', KUBECONFIG, 'apply', '-f', '-'], {
        input: bad,
        encoding: 'utf8',
      });
      expect(r.status).not.toBe(0);
      // refused by the validating webhook (the CRD schema cannot say this), every error with its path
      expect(r.stderr).toContain('duplicate disk name "containerdisk"');
      expect(r.stderr).toContain('spec.template.spec.domain.devices.disks[1].name');
      expect(r.stderr).toContain('spec.template.spec.domain.devices.interfaces[0].ports[1].port');
      expect(getJson('vm', '-n', NS, 'tiny-bad')).toBeUndefined();
    },
    SLOW,
  );
});
