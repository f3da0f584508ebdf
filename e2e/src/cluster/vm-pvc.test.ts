// A VM whose second disk is a filesystem PersistentVolumeClaim of the cluster's default class (local-path, the storage
// add-on deploy/addons/storage), through the two-node cluster (issue 32): the launcher creates disk.img in the claim's
// directory (sparse raw, the claim's size, uid 107) when the claim holds none; the test guest (kvts.marker=<serial>)
// reads and writes a marker on that disk; `virtctl stop` / `virtctl start` (ours) brings a new launcher Pod that uses
// the disk.img as it is: the guest finds the first boot's marker. Deleting the VM leaves the claim and its disk.img
// (with the second boot's marker); deleting the claim removes the volume and its directory.
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { READY, waitFor } from '../launcher/helpers.js';
import {
  applyStorageAddon,
  claimDiskVmManifest,
  clusterGate,
  deployKubevirtTs,
  diskImageLogLines,
  getJson,
  kubectl,
  kubectlIn,
  kubectlTry,
  launcherPodsIn,
  launcherPodsOfVmi,
  markerOnDisk,
  onNode,
  runningVmiIn,
  serialLine,
  SerialLog,
  virtctlIn,
} from './cluster.js';

const { reason, clusterTest, requireCluster } = clusterGate();
const NS = 'e2e-vm-pvc';
const VM = 'pvc';
const CLAIM = 'vm-pvc-data';
const SERIAL = 'pvcdata';
const SIZE = 64 * 1024 * 1024; // the claim's 64Mi: local-path reports the request as the capacity
const SLOW = 300_000;
const POWEROFF = 'KUBEVIRT-TS-GUEST-POWEROFF acpi-power-button';
type Obj = Record<string, any>;

/** the claim and VM `pvc` in NS: examples/vm-tiny.yaml with a second virtio disk (serial pvcdata) on the claim */
function manifests(): string {
  const vm = claimDiskVmManifest({ name: VM, namespace: NS, claim: CLAIM, serial: SERIAL });
  const claim = `apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: ${CLAIM}
  namespace: ${NS}
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: 64Mi
`;
  return `${claim}---\n${vm}`;
}

const virtctl = (...args: string[]): string => virtctlIn(NS, ...args);

const runningVmi = (notUid?: string): Promise<Obj> => runningVmiIn(NS, VM, notUid, SLOW);
const podOf = (vmi: Obj): Obj => launcherPodsOfVmi(NS, vmi.metadata.uid)[0]!;
const launcherPods = (): Obj[] => launcherPodsIn(NS);
/** the claim's PersistentVolume, its node (local-path: node affinity) and disk.img as the root namespace sees it */
function volume(): { pv: Obj; node: string; dir: string; image: string } {
  const pvc = getJson('pvc', '-n', NS, CLAIM)!;
  expect(pvc.status.phase).toBe('Bound');
  const pv = getJson('pv', pvc.spec.volumeName)!;
  const node: string = pv.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0];
  const dir = onNode(node, pv.spec.hostPath.path);
  return { pv, node, dir, image: path.join(dir, 'disk.img') };
}
/** the launcher's log lines about disk.img (JSON, from the compute container) */
const claimLogLines = (pod: Obj): string[] => diskImageLogLines(NS, pod.metadata.name);

describe(`VM with a PersistentVolumeClaim disk (${reason ? `skipped: ${reason}` : 'tools/cluster.sh'})`, () => {
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
    // the storage add-on (the default class local-path): applied as storage.test.ts does (idempotent)
    applyStorageAddon();
    kubectl('create', 'namespace', NS);
  }, SLOW);
  afterAll(() => {
    for (const s of serials) s.stop();
    if (!reason) kubectlTry('delete', 'namespace', NS, '--wait=true', '--timeout=180s');
  });

  clusterTest(
    'the VM runs; the launcher created disk.img (sparse raw, 64 MiB, uid 107) in the claim; the guest writes its marker',
    async () => {
      const t0 = Date.now();
      kubectlIn(manifests(), 'apply', '-f', '-');
      vmi = await runningVmi();
      serial = follow(vmi);
      // the claim as virt-controller reported it (what the launcher sized disk.img from)
      const info = vmi.status.volumeStatus.find((s: Obj) => s.name === 'data').persistentVolumeClaimInfo;
      expect(info).toMatchObject({
        claimName: CLAIM,
        requests: { storage: '64Mi' },
        filesystemOverhead: '0.055',
      });
      expect(await line(serial, 'KUBEVIRT-TS-GUEST-MARKER-READ')).toBe('none');
      firstMarker = await line(serial, 'KUBEVIRT-TS-GUEST-MARKER-WRITTEN');
      expect(firstMarker).toMatch(/^boot=1 id=[0-9a-f]{8}$/);
      await waitFor('guest ready line', () => serial.text.includes(READY), SLOW, 200);
      // the guest sees the claim's disk at the size disk.img was created with
      expect(serial.text).toMatch(
        new RegExp(`KUBEVIRT-TS-GUEST-DISK name=vd\\w+ bytes=${SIZE} ro=0 serial=${SERIAL}`),
      );
      const { node, image } = volume();
      expect(node).toBe(vmi.status.nodeName);
      const st = statSync(image);
      expect({ size: st.size, uid: st.uid, sparse: st.blocks * 512 < 4 * 1024 * 1024 }).toEqual({
        size: SIZE,
        uid: 107,
        sparse: true,
      });
      expect(markerOnDisk(image)).toBe(`KVTS-MARKER ${firstMarker}`);
      const logs = claimLogLines(podOf(vmi));
      expect(logs.join('\n')).toContain(
        `volume data: persistentVolumeClaim disk.img created (${SIZE} bytes)`,
      );
      console.log(`VM with a PVC disk Running, marker written, ${Date.now() - t0} ms`);
    },
    SLOW,
  );

  clusterTest(
    'virtctl stop, virtctl start: a new launcher Pod uses disk.img as it is, the guest reads the first boot marker',
    async () => {
      const t0 = Date.now();
      const podName = podOf(vmi).metadata.name;
      expect(virtctl('stop', VM)).toBe(`VM ${VM} was scheduled to stop\n`);
      await waitFor('ACPI power-off in the guest', () => serial.text.includes(POWEROFF), SLOW, 200);
      await waitFor(
        'VMI and launcher Pod gone',
        () => !getJson('vmi', '-n', NS, VM) && launcherPods().length === 0,
        SLOW,
        500,
      );
      await waitFor(
        'VM Stopped',
        () => getJson('vm', '-n', NS, VM)?.status?.printableStatus === 'Stopped',
        SLOW,
        500,
      );
      expect(virtctl('start', VM)).toBe(`VM ${VM} was scheduled to start\n`);
      const again = await runningVmi(vmi.metadata.uid);
      expect(podOf(again).metadata.name).not.toBe(podName);
      vmi = again;
      serial = follow(vmi);
      expect(await line(serial, 'KUBEVIRT-TS-GUEST-MARKER-READ')).toBe(firstMarker);
      const second = await line(serial, 'KUBEVIRT-TS-GUEST-MARKER-WRITTEN');
      expect(second).toMatch(/^boot=2 id=[0-9a-f]{8}$/);
      expect(second.slice(-8)).not.toBe(firstMarker.slice(-8)); // another boot
      const logs = claimLogLines(podOf(vmi)).join('\n');
      expect(logs).toContain('volume data: persistentVolumeClaim disk.img exists');
      expect(logs).not.toContain('disk.img created');
      expect(statSync(volume().image).size).toBe(SIZE);
      console.log(`stop + start with the PVC disk: ${Date.now() - t0} ms`);
    },
    SLOW,
  );

  clusterTest(
    'delete the VM: the claim and its disk.img (with the last marker) remain; delete the claim: volume and directory gone',
    async () => {
      const t0 = Date.now();
      const { pv, image, dir } = volume();
      const last = await line(serial, 'KUBEVIRT-TS-GUEST-MARKER-WRITTEN');
      kubectl('delete', 'vm', '-n', NS, VM, '--wait=true', '--timeout=180s');
      await waitFor(
        'VMI and launcher Pod gone',
        () => !getJson('vmi', '-n', NS, VM) && launcherPods().length === 0,
        SLOW,
        500,
      );
      expect(getJson('pvc', '-n', NS, CLAIM)?.status?.phase).toBe('Bound');
      expect(statSync(image).size).toBe(SIZE);
      expect(markerOnDisk(image)).toBe(`KVTS-MARKER ${last}`);
      kubectl('delete', 'pvc', '-n', NS, CLAIM, '--wait=true', '--timeout=120s');
      await waitFor(
        `volume ${pv.metadata.name} deleted`,
        () => !getJson('pv', pv.metadata.name),
        120_000,
        500,
      );
      expect(existsSync(dir)).toBe(false);
      expect(launcherPods()).toEqual([]);
      expect(getJson('vmis', '-n', NS)?.items).toEqual([]);
      console.log(`delete VM, then claim: ${Date.now() - t0} ms`);
    },
    SLOW,
  );
});
