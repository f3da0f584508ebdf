// A VM whose second disk is a `volumeMode: Block` PersistentVolumeClaim of class local-block: a static `local`
// PersistentVolume on a loop device that tools/cluster.sh made on the node (issue 32; tools/cluster/README.md "Block
// volumes"). kubelet maps the device into the compute container at /dev/<volume> (the renderer's volumeDevice),
// root 0600 as the node's; virt-handler gives it to the launcher's uid 107 before the first sync; the launcher
// finds the block device there and defines a block disk on it (no disk.img). The test guest (kvts.marker=<serial>)
// sees the device's size and writes a marker; `virtctl stop` / `virtctl start` brings a new launcher Pod that finds
// it; deleting the VM leaves the claim and its data; deleting the claim releases the volume (Retain), which
// `tools/cluster.sh block-volumes` wipes and makes Available again. And a `lun` disk on a Filesystem claim is
// refused by virt-controller with the disk's field named (no launcher Pod).
import { openSync, readSync, closeSync, statSync } from 'node:fs';
import { READY, waitFor } from '../launcher/helpers.js';
import {
  blockVolumes,
  claimDiskVmManifest,
  clusterGate,
  deployKubevirtTs,
  getJson,
  kubectl,
  kubectlIn,
  kubectlTry,
  launcherPodsIn,
  launcherPodsOfVmi,
  markerOnDisk,
  runningVmiIn,
  serialLine,
  SerialLog,
  virtctlIn,
} from './cluster.js';

const { reason, clusterTest, requireCluster } = clusterGate();
const NS = 'e2e-vm-block';
const VM = 'blk';
const CLAIM = 'vm-block-data';
const SERIAL = 'blkdata';
const CLASS = 'local-block';
const SIZE = 128 * 1024 * 1024; // the loop devices tools/cluster.sh makes (KVTS_BLOCK_SIZE_MIB, default 128)
const SLOW = 300_000;
const POWEROFF = 'KUBEVIRT-TS-GUEST-POWEROFF acpi-power-button';
type Obj = Record<string, any>;

const claim = (name: string, mode: 'Block' | 'Filesystem', size: string) => `apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: ${name}
  namespace: ${NS}
spec:
  accessModes: [ReadWriteOnce]
  volumeMode: ${mode}
  storageClassName: ${CLASS}
  resources:
    requests:
      storage: ${size}
`;

/** VM `name` in NS with a second disk (serial SERIAL) on claim `claimName`: a virtio `disk`, or a scsi `lun` */
function vmManifest(name: string, claimName: string, as: 'disk' | 'lun'): string {
  const vm = claimDiskVmManifest({ name, namespace: NS, claim: claimName, serial: SERIAL });
  if (as === 'disk') return vm;
  const lun = vm.replace(
    /^( +- name: data\n( +)serial: \S+\n)\2disk:\n( +)bus: virtio$/m,
    '$1$2lun:\n$3bus: scsi',
  );
  if (lun === vm) throw new Error('claimDiskVmManifest changed: no data disk to make a lun');
  return lun;
}

const runningVmi = (notUid?: string): Promise<Obj> => runningVmiIn(NS, VM, notUid, SLOW);
const podOf = (vmi: Obj): Obj => launcherPodsOfVmi(NS, vmi.metadata.uid)[0]!;
const launcherPods = (): Obj[] => launcherPodsIn(NS);

/** the claim's PersistentVolume: one of tools/cluster.sh's, its node, its loop device and the file behind it */
function volume(): { pv: Obj; node: string; device: string; file: string } {
  const pvc = getJson('pvc', '-n', NS, CLAIM)!;
  expect(pvc.status.phase).toBe('Bound');
  const pv = getJson('pv', pvc.spec.volumeName)!;
  expect(pv.metadata.labels['kubevirt-ts.io/block-volume']).toBe('true');
  const node: string = pv.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0];
  return {
    pv,
    node,
    device: pv.spec.local.path,
    file: pv.metadata.annotations['kubevirt-ts.io/backing-file'],
  };
}
/** the first block of the volume, read from the file behind the loop device (the loop driver writes through it) */
function firstBlock(file: string): Buffer {
  const fd = openSync(file, 'r');
  try {
    const b = Buffer.alloc(512);
    readSync(fd, b, 0, 512, 0);
    return b;
  } finally {
    closeSync(fd);
  }
}
/** major:minor (hex, as stat %t:%T prints them) of a device node */
const rdevHex = (p: string): string => {
  const r = statSync(p).rdev;
  return `${(Math.floor(r / 256) & 0xfff).toString(16)}:${((r & 0xff) | ((r >> 12) & 0xfff00)).toString(16)}`;
};

describe(`VM with a Block PersistentVolumeClaim disk (${reason ? `skipped: ${reason}` : 'tools/cluster.sh'})`, () => {
  requireCluster();
  const serials: SerialLog[] = [];
  let vmi: Obj;
  let serial: SerialLog;
  let firstMarker: string;
  const follow = (v: Obj) => {
    const s = SerialLog.ofVmi(v);
    serials.push(s);
    return s;
  };
  const line = (s: SerialLog, prefix: string): Promise<string> => serialLine(s, prefix, SLOW);

  beforeAll(async () => {
    if (reason) return;
    kubectlTry('delete', 'namespace', NS, '--wait=true', '--timeout=180s');
    await deployKubevirtTs();
    // the class and volumes `up` made (again when missing; a run that died before its clean-up left a volume
    // Released: wiped and Available again)
    blockVolumes();
    kubectl('create', 'namespace', NS);
  }, SLOW);
  afterAll(() => {
    for (const s of serials) s.stop();
    if (reason) return;
    kubectlTry('delete', 'namespace', NS, '--wait=true', '--timeout=180s');
    try {
      blockVolumes(); // this run's volume back to Available (also when a test failed before releasing it)
    } catch (e) {
      console.warn((e as Error).message);
    }
  }, SLOW);

  clusterTest(
    "the VM runs on a local-block volume: the launcher's /dev/data is the node's loop device, uid 107's; the guest sees its 128 MiB and writes its marker",
    async () => {
      const t0 = Date.now();
      const sc = getJson('storageclass', CLASS)!;
      expect([sc.provisioner, sc.volumeBindingMode, sc.reclaimPolicy]).toEqual([
        'kubernetes.io/no-provisioner',
        'WaitForFirstConsumer',
        'Retain',
      ]);
      kubectlIn(`${claim(CLAIM, 'Block', '128Mi')}---\n${vmManifest(VM, CLAIM, 'disk')}`, 'apply', '-f', '-');
      vmi = await runningVmi();
      serial = follow(vmi);
      // the claim as virt-controller reported it: Block, no filesystem overhead
      const info = vmi.status.volumeStatus.find((s: Obj) => s.name === 'data').persistentVolumeClaimInfo;
      expect(info).toMatchObject({ claimName: CLAIM, volumeMode: 'Block', filesystemOverhead: '0' });
      // the volume bound on the VM's node, one of tools/cluster.sh's loop devices
      const { pv, node, device, file } = volume();
      expect(node).toBe(vmi.status.nodeName);
      expect(pv.spec).toMatchObject({ volumeMode: 'Block', persistentVolumeReclaimPolicy: 'Retain' });
      expect(device).toMatch(/^\/dev\/loop\d+$/);
      expect(statSync(device).isBlockDevice()).toBe(true);
      // the Pod: a volumeDevice, no mount; in the compute container a block device of uid 107 with the loop's number
      const pod = podOf(vmi);
      const compute = pod.spec.containers.find((c: Obj) => c.name === 'compute');
      expect(compute.volumeDevices).toEqual([{ name: 'data', devicePath: '/dev/data' }]);
      expect((compute.volumeMounts ?? []).map((m: Obj) => m.name)).not.toContain('data');
      const inPod = kubectl(
        'exec',
        '-n',
        NS,
        pod.metadata.name,
        '-c',
        'compute',
        '--',
        'stat',
        '-c',
        '%F %u:%g %a %t:%T',
        '/dev/data',
      ).trim();
      expect(inPod).toBe(`block special file 107:107 600 ${rdevHex(device)}`);
      // the node's own device node is not changed
      expect(statSync(device).uid).toBe(0);
      // the guest: the device's size (the whole loop device, not a disk.img), nothing on it yet (wiped)
      await waitFor('guest ready line', () => serial.text.includes(READY), SLOW, 200);
      expect(serial.text).toMatch(
        new RegExp(`KUBEVIRT-TS-GUEST-DISK name=vd\\w+ bytes=${SIZE} ro=0 serial=${SERIAL}`),
      );
      expect(await line(serial, 'KUBEVIRT-TS-GUEST-MARKER-READ')).toBe('none');
      firstMarker = await line(serial, 'KUBEVIRT-TS-GUEST-MARKER-WRITTEN');
      expect(firstMarker).toMatch(/^boot=1 id=[0-9a-f]{8}$/);
      expect(markerOnDisk(file)).toBe(`KVTS-MARKER ${firstMarker}`);
      // the launcher made no disk.img for it
      const logs = kubectl('logs', '-n', NS, pod.metadata.name, '-c', 'compute');
      expect(logs).not.toContain('disk.img');
      console.log(
        `VM with a Block PVC disk (${device} on ${node}) Running, marker written, ${Date.now() - t0} ms`,
      );
    },
    SLOW,
  );

  clusterTest(
    'virtctl stop, virtctl start: a new launcher Pod, the guest reads the first boot marker from the device',
    async () => {
      const t0 = Date.now();
      const podName = podOf(vmi).metadata.name;
      expect(virtctlIn(NS, 'stop', VM)).toBe(`VM ${VM} was scheduled to stop\n`);
      await waitFor('ACPI power-off in the guest', () => serial.text.includes(POWEROFF), SLOW, 200);
      await waitFor(
        'VMI and launcher Pod gone',
        () => !getJson('vmi', '-n', NS, VM) && launcherPods().length === 0,
        SLOW,
        500,
      );
      expect(virtctlIn(NS, 'start', VM)).toBe(`VM ${VM} was scheduled to start\n`);
      const again = await runningVmi(vmi.metadata.uid);
      expect(podOf(again).metadata.name).not.toBe(podName);
      vmi = again;
      serial = follow(vmi);
      expect(await line(serial, 'KUBEVIRT-TS-GUEST-MARKER-READ')).toBe(firstMarker);
      const second = await line(serial, 'KUBEVIRT-TS-GUEST-MARKER-WRITTEN');
      expect(second).toMatch(/^boot=2 id=[0-9a-f]{8}$/);
      expect(second.slice(-8)).not.toBe(firstMarker.slice(-8));
      expect(markerOnDisk(volume().file)).toBe(`KVTS-MARKER ${second}`);
      console.log(`stop + start with the Block PVC disk: ${Date.now() - t0} ms`);
    },
    SLOW,
  );

  clusterTest(
    'delete the VM: claim and data remain; delete the claim: the volume is Released with its data, block-volumes wipes it and makes it Available',
    async () => {
      const t0 = Date.now();
      const { pv, file } = volume();
      const last = await line(serial, 'KUBEVIRT-TS-GUEST-MARKER-WRITTEN');
      kubectl('delete', 'vm', '-n', NS, VM, '--wait=true', '--timeout=180s');
      await waitFor(
        'VMI and launcher Pod gone',
        () => !getJson('vmi', '-n', NS, VM) && launcherPods().length === 0,
        SLOW,
        500,
      );
      expect(getJson('pvc', '-n', NS, CLAIM)?.status?.phase).toBe('Bound');
      expect(markerOnDisk(file)).toBe(`KVTS-MARKER ${last}`);
      kubectl('delete', 'pvc', '-n', NS, CLAIM, '--wait=true', '--timeout=120s');
      const name = pv.metadata.name as string;
      await waitFor(
        `volume ${name} Released`,
        () => getJson('pv', name)?.status?.phase === 'Released',
        120_000,
        500,
      );
      expect(markerOnDisk(file)).toBe(`KVTS-MARKER ${last}`); // Retain: the data stays until the volume is reused
      expect(blockVolumes()).toMatch(new RegExp(`^block volume \\S+ +${name} Available`, 'm'));
      const after = getJson('pv', name)!;
      expect(after.spec.claimRef).toBeUndefined();
      expect(firstBlock(file).every((b) => b === 0)).toBe(true);
      const st = statSync(file);
      expect({ size: st.size, sparse: st.blocks * 512 < 4 * 1024 * 1024 }).toEqual({
        size: SIZE,
        sparse: true,
      });
      console.log(`delete VM, then claim, then block-volumes: ${Date.now() - t0} ms`);
    },
    SLOW,
  );

  clusterTest(
    'a lun disk on a Filesystem claim: virt-controller refuses it (PVCVolumeModeMismatch naming the disk field), no launcher Pod',
    async () => {
      const name = 'blk-lun';
      const fsClaim = 'vm-block-fs';
      kubectlIn(
        `${claim(fsClaim, 'Filesystem', '64Mi')}---\n${vmManifest(name, fsClaim, 'lun')}`,
        'apply',
        '-f',
        '-',
      );
      const cond = await waitFor(
        'Synchronized=False on the VMI',
        () =>
          (getJson('vmi', '-n', NS, name)?.status?.conditions ?? []).find(
            (c: Obj) => c.type === 'Synchronized' && c.status === 'False',
          ),
        120_000,
        500,
      );
      expect(cond.reason).toBe('PVCVolumeModeMismatch');
      expect(cond.message).toBe(
        `spec.domain.devices.disks[1].lun: a lun passes a block device through, but PersistentVolumeClaim ${NS}/${fsClaim} (spec.volumes[0].persistentVolumeClaim.claimName) has volumeMode Filesystem; use a Block claim or a disk`,
      );
      const lunVmi = getJson('vmi', '-n', NS, name)!;
      expect(lunVmi.status.phase).toBe('Pending');
      const events = getJson(
        'events',
        '-n',
        NS,
        '--field-selector',
        `involvedObject.name=${name},reason=PVCVolumeModeMismatch`,
      )!.items;
      expect(events.map((e: Obj) => e.type)).toContain('Warning');
      expect(getJson('pods', '-n', NS, '-l', `kubevirt.io/created-by=${lunVmi.metadata.uid}`)!.items).toEqual(
        [],
      );
      kubectl('delete', 'vm', '-n', NS, name, '--wait=true', '--timeout=120s');
      kubectl('delete', 'pvc', '-n', NS, fsClaim, '--wait=true', '--timeout=120s');
    },
    SLOW,
  );
});
