// Live migration of a VM whose disk is a ReadWriteMany claim, through the two-node cluster (issue 32). The claim is of
// the storage add-on's local-path-shared class (deploy/addons/storage: a directory on the path both nodes see); the
// launcher creates disk.img there on the first start and uses it as it is after that. virt-handler marks the VMI
// LiveMigratable (the claim is shared, no node-local disk: migrationMethod LiveMigration, nothing copied); the test
// guest writes its marker on the disk at boot (kvts.marker=<serial>) and reads it again every other heartbeat with
// O_DIRECT (kvts.marker-every=2, tools/guest); a VirtualMachineInstanceMigration moves the VM to the other node without
// a reboot (its heartbeat counter goes on across the two launcher Pods' serial logs), and the guest, now on the target,
// reads the marker it wrote before the migration, then one the test writes into disk.img (its reads reach the file).
// virtctl stop powers the guest off (ACPI) on the target, virtctl start boots it again on the same disk.img; deleting
// the VM leaves the claim. A VM on a ReadWriteOnce claim (local-path) is not LiveMigratable, with upstream's reason
// and message, and its migration is refused at admission as upstream's migration-create admitter does. Runs only when
// the cluster is up with two nodes.
import { closeSync, existsSync, openSync, statSync, writeSync } from 'node:fs';
import path from 'node:path';
import { READY, waitFor } from '../launcher/helpers.js';
import {
  applyStorageAddon,
  SerialLog,
  claimDiskVmManifest,
  createVmim,
  deployKubevirtTs,
  diskImageLogLines,
  expectMigratedWithoutReboot,
  getJson,
  kubectl,
  kubectlIn,
  kubectlTry,
  markerOnDisk,
  nodeNames,
  serialLine,
  tryCreateVmim,
  twoNodeGate,
  virtctlIn,
  vmimFinal,
  volumeDir,
} from './cluster.js';

const { reason, requireCluster, clusterTest } = twoNodeGate('RWX live migration');
const twoNodes = nodeNames().length >= 2;
const NS = 'e2e-vm-rwx';
const RWX = { vm: 'rwx', claim: 'vm-rwx-data', serial: 'rwxdata' };
const RWO = { vm: 'rwo', claim: 'vm-rwo-data', serial: 'rwodata' };
const SIZE = 64 * 1024 * 1024;
const SLOW = 900_000;
const POWEROFF = 'KUBEVIRT-TS-GUEST-POWEROFF acpi-power-button';
/** what the test writes into disk.img while the VM runs on the target (8 hex digits as the guest's own ids) */
const HOST_MARKER = 'boot=2 id=e2e0f00d';
const NOT_SHARED = `cannot migrate VMI: PVC ${RWO.claim} is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)`;
type Obj = Record<string, any>;

function claim(name: string, mode: string, storageClass: string): string {
  return `apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: ${name}
  namespace: ${NS}
spec:
  storageClassName: ${storageClass}
  accessModes: [${mode}]
  resources:
    requests:
      storage: 64Mi
`;
}

const vmiOf = (vm: string): Obj | undefined => getJson('vmi', '-n', NS, vm);
const condition = (v: Obj | undefined, type: string): Obj | undefined =>
  v?.status?.conditions?.find((c: Obj) => c.type === type);
/** every launcher Pod of a VMI (source and target during a migration), those being deleted too */
const allPodsOf = (vmiUid: string): Obj[] =>
  getJson('pods', '-n', NS, '-l', `kubevirt.io/created-by=${vmiUid}`)?.items ?? [];
/** the launcher Pods of a VMI that are not being deleted */
const launcherPods = (vmiUid: string): Obj[] =>
  allPodsOf(vmiUid).filter((p) => !p.metadata.deletionTimestamp);
/** a Running VMI of `vm` whose LiveMigratable condition is there (virt-handler sets it), other than `notUid` */
const runningVmi = (vm: string, notUid?: string): Promise<Obj> =>
  waitFor(
    `VMI ${vm} Running with its LiveMigratable condition`,
    () => {
      const v = vmiOf(vm);
      return v?.status?.phase === 'Running' && v.metadata.uid !== notUid && condition(v, 'LiveMigratable')
        ? v
        : undefined;
    },
    SLOW,
    500,
  );
/** the bound claim's volume and its disk.img as the root namespace sees it */
function volume(name: string): { pv: Obj; dir: string; image: string } {
  const pvc = getJson('pvc', '-n', NS, name)!;
  expect(pvc.status.phase).toBe('Bound');
  const pv = getJson('pv', pvc.spec.volumeName)!;
  const dir = volumeDir(pv);
  return { pv, dir, image: path.join(dir, 'disk.img') };
}
/** the markers the guest read again (kvts.marker-every), in the order of its heartbeats */
const markersNow = (s: SerialLog): Array<{ beat: number; marker: string }> =>
  [...s.text.matchAll(/^KUBEVIRT-TS-GUEST-MARKER-NOW (\d+) (.*)$/gm)].map((m) => ({
    beat: Number(m[1]),
    marker: m[2]!,
  }));

describe(`VM with a ReadWriteMany claim disk: live migration (${reason ? `skipped: ${reason}` : 'tools/cluster.sh'})`, () => {
  requireCluster();
  const serials: SerialLog[] = [];
  let vmi: Obj;
  let serial: SerialLog; // the current launcher Pod's serial log
  let firstMarker: string;
  const follow = (podUid: string, v: Obj) => {
    const s = new SerialLog(podUid, v.metadata.uid);
    serials.push(s);
    return s;
  };

  beforeAll(async () => {
    if (reason || !twoNodes) return;
    kubectlTry('delete', 'namespace', NS, '--wait=true', '--timeout=180s');
    await deployKubevirtTs();
    applyStorageAddon(); // the storage add-on (idempotent)
    kubectl('create', 'namespace', NS);
  }, SLOW);
  afterAll(() => {
    for (const s of serials) s.stop();
    if (!reason && twoNodes) kubectlTry('delete', 'namespace', NS, '--wait=true', '--timeout=300s');
  });

  clusterTest(
    'a VM on a local-path-shared ReadWriteMany claim runs LiveMigratable (LiveMigration: nothing to copy); the guest writes its marker',
    async () => {
      const t0 = Date.now();
      const vm = claimDiskVmManifest({
        name: RWX.vm,
        namespace: NS,
        claim: RWX.claim,
        serial: RWX.serial,
        kernelArgs: 'kvts.marker-every=2',
        containerDisk: false,
      });
      kubectlIn(`${claim(RWX.claim, 'ReadWriteMany', 'local-path-shared')}---\n${vm}`, 'apply', '-f', '-');
      vmi = await runningVmi(RWX.vm);
      expect(condition(vmi, 'LiveMigratable')).toMatchObject({ status: 'True' });
      expect(vmi.status.migrationMethod).toBe('LiveMigration');
      const info = vmi.status.volumeStatus.find((s: Obj) => s.name === 'data').persistentVolumeClaimInfo;
      expect(info).toMatchObject({ claimName: RWX.claim, accessModes: ['ReadWriteMany'] });
      serial = follow(launcherPods(vmi.metadata.uid)[0]!.metadata.uid, vmi);
      expect(await serialLine(serial, 'KUBEVIRT-TS-GUEST-MARKER-READ', SLOW)).toBe('none');
      firstMarker = await serialLine(serial, 'KUBEVIRT-TS-GUEST-MARKER-WRITTEN', SLOW);
      expect(firstMarker).toMatch(/^boot=1 id=[0-9a-f]{8}$/);
      await waitFor('guest ready line', () => serial.text.includes(READY), SLOW, 200);
      // the guest reads it again from the disk (O_DIRECT) while it runs
      await waitFor('the marker read again', () => markersNow(serial).length > 0, 120_000, 500);
      expect(markersNow(serial).map((m) => m.marker)).toEqual(markersNow(serial).map(() => firstMarker));
      // disk.img in the shared directory (no node affinity), the guest's marker in it
      const { pv, image } = volume(RWX.claim);
      expect(pv.spec.nodeAffinity).toBeUndefined();
      const st = statSync(image);
      expect({ size: st.size, uid: st.uid }).toEqual({ size: SIZE, uid: 107 });
      expect(markerOnDisk(image)).toBe(`KVTS-MARKER ${firstMarker}`);
      expect(diskImageLogLines(NS, launcherPods(vmi.metadata.uid)[0]!.metadata.name).join('\n')).toContain(
        `volume data: persistentVolumeClaim disk.img created (${SIZE} bytes)`,
      );
      console.log(`RWX VM Running and LiveMigratable, marker ${firstMarker} written, ${Date.now() - t0} ms`);
    },
    SLOW,
  );

  clusterTest(
    'a VirtualMachineInstanceMigration moves it to the other node without a reboot; on the target the guest reads the marker it wrote before',
    async () => {
      const t0 = Date.now();
      const source: string = vmi.status.nodeName;
      const target = nodeNames().find((n) => n !== source)!;
      const sourcePod = launcherPods(vmi.metadata.uid)[0]!.metadata.uid;
      const before = serial;
      const inode = statSync(volume(RWX.claim).image).ino;
      const name = createVmim(NS, RWX.vm);
      const m = await vmimFinal(NS, name, SLOW);
      if (m.status.phase !== 'Succeeded')
        throw new Error(`migration ${name} ${m.status.phase}: ${JSON.stringify(m.status.conditions)}`);
      const r = await expectMigratedWithoutReboot({
        namespace: NS,
        vmi: RWX.vm,
        vmiUid: vmi.metadata.uid,
        source,
        target,
        sourcePodUid: sourcePod,
        before,
        follow: (podUid) => follow(podUid, vmi),
        timeoutMs: SLOW,
      });
      serial = r.serial;
      const { vmi: now, last, first } = r;
      // the target launcher used disk.img as it was: the same file (its preparation logs nothing of it)
      expect(statSync(volume(RWX.claim).image).ino).toBe(inode);
      // the guest, on the target, reads from the disk the marker it wrote on the source before the migration
      const after = await waitFor('the marker read on the target', () => markersNow(serial)[0], 120_000, 500);
      expect(after).toEqual({ beat: expect.any(Number), marker: firstMarker });
      expect(after.beat).toBeGreaterThan(last);
      const { image } = volume(RWX.claim);
      expect(markerOnDisk(image)).toBe(`KVTS-MARKER ${firstMarker}`);
      // and its reads reach disk.img on the shared storage: a marker the test writes there is what it reads next
      const block = Buffer.alloc(512);
      block.write(`KVTS-MARKER ${HOST_MARKER}\n`, 'latin1');
      const fd = openSync(image, 'r+');
      try {
        writeSync(fd, block, 0, 512, 0);
      } finally {
        closeSync(fd);
      }
      await waitFor(
        'the marker the test wrote, read by the guest on the target',
        () => markersNow(serial).some((x) => x.marker === HOST_MARKER),
        120_000,
        500,
      );
      const ms = now.status.migrationState;
      console.log(
        `RWX migration ${name}: ${source} -> ${target}, ${(Date.parse(ms.endTimestamp) - Date.parse(ms.startTimestamp)) / 1000} s from start to end, heartbeats ${last} -> ${first}, marker ${after.marker} read at beat ${after.beat}; ${Date.now() - t0} ms`,
      );
    },
    SLOW,
  );

  clusterTest(
    'virtctl stop / start: the new boot reads the last marker from the claim; deleting the VM leaves the claim and disk.img',
    async () => {
      const t0 = Date.now();
      const stopped: string = vmi.metadata.uid;
      expect(virtctlIn(NS, 'stop', RWX.vm)).toBe(`VM ${RWX.vm} was scheduled to stop\n`);
      // the guest, migrated in, is shut down by the target's launcher as by one that started it (ACPI power button)
      await waitFor(
        'ACPI power-off in the guest on the target',
        () => serial.text.includes(POWEROFF),
        SLOW,
        200,
      );
      await waitFor(
        'VMI and launcher Pod gone',
        () => !vmiOf(RWX.vm) && allPodsOf(stopped).length === 0,
        SLOW,
        500,
      );
      await waitFor(
        'VM Stopped',
        () => getJson('vm', '-n', NS, RWX.vm)?.status?.printableStatus === 'Stopped',
        SLOW,
        500,
      );
      expect(virtctlIn(NS, 'start', RWX.vm)).toBe(`VM ${RWX.vm} was scheduled to start\n`);
      const again = await runningVmi(RWX.vm, vmi.metadata.uid);
      expect(condition(again, 'LiveMigratable')).toMatchObject({ status: 'True' });
      vmi = again;
      serial = follow(launcherPods(vmi.metadata.uid)[0]!.metadata.uid, vmi);
      expect(await serialLine(serial, 'KUBEVIRT-TS-GUEST-MARKER-READ', SLOW)).toBe(HOST_MARKER);
      const written = await serialLine(serial, 'KUBEVIRT-TS-GUEST-MARKER-WRITTEN', SLOW);
      expect(written).toMatch(/^boot=3 id=[0-9a-f]{8}$/);
      const { pv, image, dir } = volume(RWX.claim);
      kubectl('delete', 'vm', '-n', NS, RWX.vm, '--wait=true', '--timeout=180s');
      await waitFor(
        'VMI and launcher Pod gone',
        () => !vmiOf(RWX.vm) && allPodsOf(vmi.metadata.uid).length === 0,
        SLOW,
        500,
      );
      expect(getJson('pvc', '-n', NS, RWX.claim)?.status?.phase).toBe('Bound');
      expect(statSync(image).size).toBe(SIZE);
      expect(markerOnDisk(image)).toBe(`KVTS-MARKER ${written}`);
      kubectl('delete', 'pvc', '-n', NS, RWX.claim, '--wait=true', '--timeout=120s');
      await waitFor(
        `volume ${pv.metadata.name} deleted`,
        () => !getJson('pv', pv.metadata.name),
        120_000,
        500,
      );
      expect(existsSync(dir)).toBe(false);
      console.log(`RWX VM stop + start, delete VM then claim: ${Date.now() - t0} ms`);
    },
    SLOW,
  );

  clusterTest(
    'a VM on a local-path ReadWriteOnce claim is not LiveMigratable (upstream’s reason and message); its migration is refused',
    async () => {
      const t0 = Date.now();
      const vm = claimDiskVmManifest({
        name: RWO.vm,
        namespace: NS,
        claim: RWO.claim,
        serial: RWO.serial,
        containerDisk: false,
      });
      kubectlIn(`${claim(RWO.claim, 'ReadWriteOnce', 'local-path')}---\n${vm}`, 'apply', '-f', '-');
      const v = await runningVmi(RWO.vm);
      expect(condition(v, 'LiveMigratable')).toMatchObject({
        status: 'False',
        reason: 'DisksNotLiveMigratable',
        message: NOT_SHARED,
      });
      const r = tryCreateVmim(NS, RWO.vm);
      expect(r.status).not.toBe(0);
      expect(r.stderr).toContain(
        `Cannot migrate VMI, Reason: DisksNotLiveMigratable, Message: ${NOT_SHARED}`,
      );
      expect((getJson('vmim', '-n', NS)?.items ?? []).filter((x: Obj) => x.spec.vmiName === RWO.vm)).toEqual(
        [],
      );
      expect(vmiOf(RWO.vm)?.status?.migrationState).toBeUndefined();
      const { pv, dir } = volume(RWO.claim);
      kubectl('delete', 'vm', '-n', NS, RWO.vm, '--wait=true', '--timeout=180s');
      await waitFor(
        'VMI and launcher Pod gone',
        () => !vmiOf(RWO.vm) && allPodsOf(v.metadata.uid).length === 0,
        SLOW,
        500,
      );
      kubectl('delete', 'pvc', '-n', NS, RWO.claim, '--wait=true', '--timeout=120s');
      await waitFor(
        `volume ${pv.metadata.name} deleted`,
        () => !getJson('pv', pv.metadata.name),
        120_000,
        500,
      );
      expect(existsSync(dir)).toBe(false);
      console.log(`RWO VM not LiveMigratable, migration refused: ${Date.now() - t0} ms`);
    },
    SLOW,
  );
});
