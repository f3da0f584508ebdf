// VirtualMachines end to end on the single-node cluster (tools/cluster.sh): `kubectl apply -f deploy/` runs
// virt-controller and virt-handler from their images, then examples/vm-tiny.yaml (the test guest as kernelBoot
// container + containerDisk) goes through its lifecycle: Running with the guest's ready line, stop (ACPI) and start,
// virt-handler restarted under a running guest, delete; and a kill -9 of QEMU under RerunOnFailure.
// Runs only when the cluster is up with the images loaded (tools/test.sh does both; see node.test.ts).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { READY, REPO, processesMentioning, waitFor } from '../launcher/helpers.js';
import {
  NODE_NAME,
  SerialLog,
  clusterGate,
  getJson,
  kubectl,
  kubectlIn,
  kubectlTry,
  mountsUnder,
} from './cluster.js';

const { reason, clusterTest, requireCluster } = clusterGate();
const NS = 'default';
const POWEROFF = 'KUBEVIRT-TS-GUEST-POWEROFF acpi-power-button';
const SLOW = 900_000; // image start, libvirtd and a TCG guest boot on a shared 2-core machine

type Obj = Record<string, any>;

function vmManifest(name: string, runStrategy: string): string {
  return readFileSync(path.join(REPO, 'examples/vm-tiny.yaml'), 'utf8')
    .replace(/^ {2}name: tiny$/m, `  name: ${name}`)
    .replace(/kubevirt\.io\/vm: tiny/, `kubevirt.io/vm: ${name}`)
    .replace(/runStrategy: Always/, `runStrategy: ${runStrategy}`);
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

describe(`VirtualMachines on the single-node cluster (${reason ? `skipped: ${reason}` : 'tools/cluster.sh'})`, () => {
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
      kubectl('apply', '-f', path.join(REPO, 'deploy'));
      // This machine's /dev/kvm is root-only (crw-------), so the uid-107 launcher cannot use KVM: guests run under
      // TCG, as in every test of the project (upstream's developerConfiguration.useEmulation). The controllers read
      // the config when they start: restart them so the next launcher Pod is rendered with --allow-emulation.
      kubectl(
        'patch',
        'configmap',
        '-n',
        'kubevirt-ts',
        'kubevirt-ts-config',
        '--type',
        'merge',
        '-p',
        '{"data":{"useEmulation":"true"}}',
      );
      kubectl('rollout', 'restart', '-n', 'kubevirt-ts', 'deployment/virt-controller');
      kubectl('rollout', 'status', '-n', 'kubevirt-ts', 'deployment/virt-controller', '--timeout=600s');
      kubectl('rollout', 'status', '-n', 'kubevirt-ts', 'daemonset/virt-handler', '--timeout=600s');
      const dep = getJson('deployment', '-n', 'kubevirt-ts', 'virt-controller')!;
      expect(dep.status.readyReplicas).toBe(2);
      const ds = getJson('daemonset', '-n', 'kubevirt-ts', 'virt-handler')!;
      expect(ds.status.numberReady).toBe(1);
      // the handler serves its node: schedulable label, device plugins registered with kubelet
      await waitFor(
        'the node labelled schedulable by virt-handler, with its device plugins',
        () => {
          const node = getJson('node', NODE_NAME)!;
          return (
            node.metadata.labels['kubevirt.io/schedulable'] === 'true' &&
            node.status.allocatable['devices.kubevirt.io/tun'] === '1k' &&
            node.status.allocatable['devices.kubevirt.io/kvm'] === '1k'
          );
        },
        120_000,
        500,
      );
    },
    SLOW,
  );

  let vmi: Obj;
  let serial: SerialLog;

  clusterTest(
    'examples/vm-tiny.yaml: VM Ready, VMI Running on the node, the guest ready line in the serial log, container disks mounted read-only',
    async () => {
      kubectlIn(vmManifest('tiny', 'Always'), 'apply', '-f', '-');
      vmi = await runningVmi('tiny');
      expect(vmi.status.nodeName).toBe(NODE_NAME);
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
      const before = getJson('pods', '-n', 'kubevirt-ts', '-l', 'kubevirt.io=virt-handler')!.items[0].metadata
        .name;
      kubectl('delete', 'pod', '-n', 'kubevirt-ts', before, '--wait=true', '--timeout=300s');
      await waitFor(
        'a new virt-handler Pod Ready',
        () => {
          const p = getJson('pods', '-n', 'kubevirt-ts', '-l', 'kubevirt.io=virt-handler')?.items?.[0];
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
      expect((await qemuOf('tiny')).map((p) => p.pid)).toEqual([qemu!.pid]);
      const now = getJson('vmi', '-n', NS, 'tiny')!;
      expect(now.metadata.uid).toBe(vmi.metadata.uid);
      expect(now.status.phase).toBe('Running');
      expect(now.status.conditions.find((c: Obj) => c.type === 'Ready')?.status).toBe('True');
    },
    SLOW,
  );

  clusterTest(
    'delete the VM (after the handler restart, so the new handler drives it): ACPI shutdown, VM, VMI, Pod, QEMU and mounts gone',
    async () => {
      const podUid = podUidOf(vmi);
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
    },
    SLOW,
  );

  clusterTest(
    'kill -9 of QEMU inside the Pod: the VMI fails, and under RerunOnFailure a new VMI runs the guest again',
    async () => {
      kubectlIn(vmManifest('tiny-rerun', 'RerunOnFailure'), 'apply', '-f', '-');
      const first = await runningVmi('tiny-rerun');
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
});
