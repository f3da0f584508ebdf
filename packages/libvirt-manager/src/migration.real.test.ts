// Live migration for real: two session libvirtds on this host (each its own host_uuid and its own
// "Pod" root), the running test guest moved from one to the other over TCP on loopback
// (virDomainMigrateToURI3, peer-to-peer), still printing heartbeats on its serial console afterwards.
// Under software emulation on a QEMU before 9.0 (this host: TCG, QEMU 7.2) the guest is paused for the whole
// migration (issue 31: that TCG loses guest writes made during a live migration); the guest then goes through
// repeated migrations under a bandwidth cap, the workload that made it panic on the target.
// Block migration: the guest with a containerDisk (a qcow2 overlay in each "Pod" over the same image) moved
// with its overlay copied by libvirt's non-shared incremental copy (NON_SHARED_INC, the target QEMU's NBD
// server on a unix socket), never with VIR_MIGRATE_UNSAFE.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chown, mkdir, mkdtemp, rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { ConnectionHolder } from './connection.js';
import { DomainManager } from './manager.js';
import { TCG_COHERENT_DIRTY_BITMAP_QEMU } from './migration.js';
import {
  freePort,
  guestVMI,
  lastHeartbeat,
  QEMU_GID,
  QEMU_UID,
  READY,
  readLog,
  startPod,
  waitFor,
  waitForLog,
  type PodEnv,
} from './test-real-env.js';
import { quietLogger } from './test-fake-libvirt.js';
import { DomainWatcher, type DomainWatchEvent } from './watcher.js';

const T = 240_000;
const UID = 'u-mig-1';

interface Side {
  pod: PodEnv;
  holder: ConnectionHolder;
  mgr: DomainManager;
  watcher: DomainWatcher;
  events: DomainWatchEvent[];
}

async function side(
  hostUuid: string,
  prepareMore?: (pod: PodEnv, vmi: VirtualMachineInstance) => Promise<void>,
): Promise<Side> {
  const pod = await startPod({ hostUuid });
  const holder = new ConnectionHolder(() => pod.open());
  const mgr = new DomainManager({
    connection: holder,
    context: pod.context,
    prepare: async (v, s) => {
      await prepareMore?.(pod, v);
      await pod.prepare(v, s);
    },
    logger: quietLogger,
  });
  const watcher = new DomainWatcher({ connection: holder, migrations: mgr, logger: quietLogger });
  const events: DomainWatchEvent[] = [];
  watcher.on('event', (e: DomainWatchEvent) => events.push(e));
  await watcher.start();
  return { pod, holder, mgr, watcher, events };
}

async function teardown(s: Side | undefined): Promise<void> {
  if (!s) return;
  await s.watcher.stop();
  await s.mgr.close();
  await s.holder.close();
  await s.pod.cleanup();
}

const summary = (e: DomainWatchEvent) => `${e.type} ${e.domain.status.status}/${e.domain.status.reason}`;

describe('live migration between two session libvirtds', () => {
  let src: Side;
  let dst: Side;
  const vmi = guestVMI('mig', UID);

  beforeAll(async () => {
    src = await side('4b1c1d2e-0000-4000-8000-00000000000a');
    dst = await side('4b1c1d2e-0000-4000-8000-00000000000b');
  }, T);

  afterAll(async () => {
    await teardown(src);
    await teardown(dst);
  }, T);

  test(
    'the daemons have distinct host UUIDs (libvirt refuses to migrate to the same host otherwise)',
    async () => {
      const caps = async (s: Side) => {
        const c = await s.pod.open();
        try {
          return /<uuid>([^<]+)<\/uuid>/.exec(await c.getCapabilities())?.[1];
        } finally {
          await c.close();
        }
      };
      expect(await caps(src)).toBe('4b1c1d2e-0000-4000-8000-00000000000a');
      expect(await caps(dst)).toBe('4b1c1d2e-0000-4000-8000-00000000000b');
    },
    T,
  );

  test(
    'a running guest moves to the other daemon and keeps running there',
    async () => {
      const srcLog = src.pod.serialLog(UID);
      const dstLog = dst.pod.serialLog(UID);
      await src.mgr.syncVMI(vmi);
      await waitForLog(
        srcLog,
        (t) => t.includes(READY) && lastHeartbeat(t) >= 2,
        120_000,
        'guest running on the source',
      );
      await dst.mgr.prepareMigrationTarget(vmi);

      // a daemon with the same host UUID (here: the source itself) is refused by libvirt
      await src.mgr.migrateVMI(vmi, {}, { targetURI: src.pod.daemon.uri });
      const refused = await src.mgr.waitForMigration(vmi);
      expect(refused).toMatchObject({ completed: true, failed: true });
      expect(refused.failureReason).toMatch(
        /Attempt to migrate guest to the same host 4b1c1d2e-0000-4000-8000-00000000000a/,
      );

      // this host runs the guest under TCG (no usable /dev/kvm) on a QEMU older than 9.0: paused for the migration
      const qemu = await src.mgr.getQemuVersion();
      const [major, minor, micro] = qemu.split('.').map(Number) as [number, number, number];
      const paused = major * 1_000_000 + minor * 1000 + micro < TCG_COHERENT_DIRTY_BITMAP_QEMU;
      expect(src.mgr.convert(vmi).type).toBe('qemu');

      const port = await freePort();
      const t0 = Date.now();
      const started = await src.mgr.migrateVMI(
        vmi,
        {},
        {
          targetURI: dst.pod.daemon.uri,
          migrationURI: `tcp://127.0.0.1:${port}`,
          // both "Pods" live on one host: the target's files are under its own root
          destinationXML: (xml: string) => xml.split(src.pod.root + '/').join(dst.pod.root + '/'),
        },
      );
      expect(started.completed).toBe(false);
      expect(started.mode).toBe(paused ? 'Paused' : 'PreCopy');
      // the source domain's states while the migration runs (libvirt pauses a non-live migration's guest)
      const seen = new Set<string>();
      let polling = true;
      const poll = (async () => {
        while (polling) {
          const d = await src.mgr.getDomain('default_mig').catch(() => undefined);
          if (d) seen.add(`${d.status.status}/${d.status.reason}`);
          await new Promise((r) => setTimeout(r, 20));
        }
      })();
      const state = await src.mgr.waitForMigration(vmi);
      polling = false;
      await poll;
      const ms = Date.now() - t0;
      expect(state).toMatchObject({ completed: true, failed: false, mode: paused ? 'Paused' : 'PreCopy' });
      console.log(
        `migration over tcp://127.0.0.1:${port} (QEMU ${qemu}) took ${ms} ms; source states ${[...seen].join(', ')}`,
      );
      if (paused) expect(seen).toContain('Paused/Migration');

      const beatAtSwitch = lastHeartbeat(await readLog(srcLog));

      // target: the domain arrived (ADDED), running because it migrated
      await waitFor(
        () => dst.events.some((e) => e.domain.domainName === 'default_mig' && e.type === 'ADDED'),
        10_000,
        'ADDED on target',
      );
      await waitFor(() => dst.events.at(-1)?.domain.status.status === 'Running', 10_000, 'Running on target');
      expect((await dst.mgr.getDomain('default_mig'))?.status).toEqual({
        status: 'Running',
        reason: 'Migrated',
      });
      // source: the domain stopped because it migrated
      await waitFor(
        () => src.events.at(-1)?.domain.status.reason === 'Migrated',
        10_000,
        'Migrated on source',
      );
      expect(summary(src.events.at(-1)!)).toBe('MODIFIED Shutoff/Migrated');
      // what virt-handler learns from the source's domain events: the migration completed
      await waitFor(
        () => src.events.some((e) => e.domain.migration?.completed === true && !e.domain.migration.failed),
        10_000,
        'migration state on source events',
      );
      expect(src.events.at(-1)!.domain.migration).toMatchObject({
        completed: true,
        failed: false,
        targetURI: dst.pod.daemon.uri,
      });

      // the same guest (its heartbeat counter continues, no new boot) prints on the target's console
      await waitForLog(
        dstLog,
        (t) => lastHeartbeat(t) >= beatAtSwitch + 3,
        60_000,
        'heartbeats on the target',
      );
      const dstText = await readLog(dstLog);
      expect(dstText).not.toContain(READY);
      const first = Number(/KUBEVIRT-TS-GUEST-HEARTBEAT (\d+)/.exec(dstText)?.[1]);
      expect(first).toBeGreaterThan(1);
      expect(first).toBeLessThanOrEqual(beatAtSwitch + 2);
      console.log(`last heartbeat on source ${beatAtSwitch}, first on target ${first}`);

      await dst.mgr.finalizeMigration(vmi);
      // the source must not start its migrated-away copy again
      await src.mgr.syncVMI({ ...vmi, status: { phase: 'Running' } });
      expect((await src.mgr.getDomain('default_mig'))?.status).toEqual({
        status: 'Shutoff',
        reason: 'Migrated',
      });
      // the target owns the guest now: syncVMI there is a no-op on the running domain
      await dst.mgr.syncVMI({ ...vmi, status: { phase: 'Running' } });
      expect((await dst.mgr.getDomain('default_mig'))?.status.status).toBe('Running');
    },
    T,
  );

  test(
    'migrating back while the target refuses (wrong URI) fails cleanly and the guest keeps running',
    async () => {
      await dst.mgr.migrateVMI(
        vmi,
        {},
        {
          targetURI: `qemu+unix:///session?socket=${dst.pod.baseDir}/nonexistent-sock`,
        },
      );
      const st = await dst.mgr.waitForMigration(vmi);
      expect(st.failed).toBe(true);
      expect(st.failureReason).toMatch(/nonexistent-sock|No such file/);
      expect((await dst.mgr.getDomain('default_mig'))?.status.status).toBe('Running');
    },
    T,
  );

  test(
    'cancelMigration aborts a migration in flight; the guest stays on the source',
    async () => {
      // back to the source daemon, throttled to 1 MiB/s so it cannot finish before the abort
      const port = await freePort();
      await dst.mgr.migrateVMI(
        vmi,
        { Bandwidth: '1Mi' },
        {
          targetURI: src.pod.daemon.uri,
          migrationURI: `tcp://127.0.0.1:${port}`,
          destinationXML: (xml: string) => xml.split(dst.pod.root + '/').join(src.pod.root + '/'),
        },
      );
      await new Promise((r) => setTimeout(r, 1500));
      await dst.mgr.cancelMigration(vmi);
      const st = await dst.mgr.waitForMigration(vmi);
      expect(st).toMatchObject({ completed: true, failed: true, abortStatus: 'Succeeded' });
      const d = await dst.mgr.getDomain('default_mig');
      expect(d?.status.status).toBe('Running');
      const log = dst.pod.serialLog(UID);
      const beat = lastHeartbeat(await readLog(log));
      await waitForLog(
        log,
        (t) => lastHeartbeat(t) >= beat + 2,
        30_000,
        'heartbeats after the aborted migration',
      );
    },
    T,
  );

  test('repeated migrations back and forth at 2 MiB/s (issue 31): the guest keeps beating on every target, no panic', async () => {
    // the workload that made the TCG guest panic on the target in the e2e: several memory passes per migration
    const ROUNDS = 4;
    let [from, to] = [dst, src]; // the guest is on dst after the aborted migration
    for (let i = 1; i <= ROUNDS; i++) {
      await to.mgr.prepareMigrationTarget(vmi);
      const fromLog = from.pod.serialLog(UID);
      const toLog = to.pod.serialLog(UID);
      const beatAtStart = lastHeartbeat(await readLog(fromLog));
      const port = await freePort();
      const t0 = Date.now();
      const [fromRoot, toRoot] = [from.pod.root, to.pod.root];
      await from.mgr.migrateVMI(
        vmi,
        { Bandwidth: '2Mi' },
        {
          targetURI: to.pod.daemon.uri,
          migrationURI: `tcp://127.0.0.1:${port}`,
          destinationXML: (xml: string) => xml.split(fromRoot + '/').join(toRoot + '/'),
        },
      );
      const state = await from.mgr.waitForMigration(vmi);
      const seconds = (Date.now() - t0) / 1000;
      expect(state).toMatchObject({ completed: true, failed: false });
      const beatAtSwitch = lastHeartbeat(await readLog(fromLog));
      await waitForLog(
        toLog,
        (t) => lastHeartbeat(t) >= beatAtSwitch + 5 || PANIC.test(t),
        60_000,
        `heartbeats on the target after migration ${i}`,
      );
      const text = await readLog(toLog);
      console.log(
        `migration ${i}: ${seconds} s, mode ${state.mode}, heartbeats ${beatAtStart} at the start, ` +
          `${beatAtSwitch} at the switch, ${lastHeartbeat(text)} on the target`,
      );
      expect(text).not.toMatch(PANIC);
      expect((await to.mgr.getDomain('default_mig'))?.status.status).toBe('Running');
      // paused for the copy (TCG before QEMU 9.0): the guest beat only while libvirt prepared the target
      if (state.mode === 'Paused') expect(beatAtSwitch - beatAtStart).toBeLessThan(Math.max(5, seconds / 4));
      await to.mgr.finalizeMigration(vmi);
      [from, to] = [to, from];
    }
  }, 900_000);
});

/** What the guest kernel prints when it dies (an oops, a GP fault, a panic). */
const PANIC = /Kernel panic|general protection fault|BUG: |Oops: /;

const run = promisify(execFile);

/**
 * Block migration of a guest whose disk is a containerDisk: each "Pod" has the container image linked where the
 * converter points (disk_0.img) and its own qcow2 overlay over it (what @kubevirt-ts/disks prepareVolumes makes
 * in the launcher, on the target too before the incoming migration: libvirt wants the destination file there).
 */
describe('block migration of a containerDisk overlay between two session libvirtds', () => {
  const BUID = 'u-blockmig-1';
  const PATTERN = '0x5a';
  let images: string;
  let src: Side;
  let dst: Side;
  const vmi = guestVMI('bmig', BUID, { kernelArgs: 'console=ttyS0 quiet kvts.disks' });
  vmi.spec.domain.devices!.disks = [{ name: 'root', disk: { bus: 'virtio' } }];
  vmi.spec.volumes = [{ name: 'root', containerDisk: { image: 'example.com/kvts-disk:1' } }];
  const block = { ...vmi, status: { migrationMethod: 'BlockMigration' } } as VirtualMachineInstance;
  const live = { ...vmi, status: { migrationMethod: 'LiveMigration' } } as VirtualMachineInstance;

  /** the Pod's containerDisk: the shared image linked in, a fresh overlay over it (kept when it exists) */
  const containerDisk = async (pod: PodEnv) => {
    const base = pod.layout.containerDiskImage(0);
    const overlay = pod.layout.ephemeralOverlay('root');
    if (existsSync(overlay)) return;
    await mkdir(path.dirname(base), { recursive: true });
    await run('ln', ['-sf', path.join(images, 'disk.qcow2'), base]);
    await mkdir(path.dirname(overlay), { recursive: true });
    await run('qemu-img', ['create', '-q', '-f', 'qcow2', '-b', base, '-F', 'qcow2', overlay]);
  };
  /** reads 1 MiB at 1 MiB of the overlay (through its chain), -U: the running QEMU holds its lock */
  const holdsPattern = async (overlay: string) => {
    // qemu-io exits non-zero when the pattern does not match: its output says which
    const out = await run('qemu-io', [
      '-U',
      '-r',
      '-f',
      'qcow2',
      '-c',
      `read -P ${PATTERN} 1M 1M`,
      overlay,
    ]).then(
      (r) => r.stdout,
      (e: { stdout?: string; stderr?: string }) => `${e.stdout ?? ''}${e.stderr ?? ''}`,
    );
    if (/Pattern verification failed/.test(out)) return false;
    if (/read 1048576\/1048576 bytes/.test(out)) return true;
    throw new Error(`qemu-io ${overlay}: ${out}`);
  };

  beforeAll(async () => {
    images = await mkdtemp('/tmp/kvlm-img-');
    await run('qemu-img', ['create', '-q', '-f', 'qcow2', path.join(images, 'disk.qcow2'), '64M']);
    await chown(images, QEMU_UID, QEMU_GID);
    await chown(path.join(images, 'disk.qcow2'), QEMU_UID, QEMU_GID);
    src = await side('4b1c1d2e-0000-4000-8000-00000000001a', containerDisk);
    dst = await side('4b1c1d2e-0000-4000-8000-00000000001b', containerDisk);
  }, T);

  afterAll(async () => {
    await teardown(src);
    await teardown(dst);
    if (images) await rm(images, { recursive: true, force: true });
  }, T);

  test(
    'the overlay is copied to the target (NON_SHARED_INC over a unix NBD socket) and the guest keeps running',
    async () => {
      // the guest's disk holds data written before it booted: only the overlay has it, not the image
      await containerDisk(src.pod);
      const srcOverlay = src.pod.layout.ephemeralOverlay('root');
      await run('qemu-io', ['-f', 'qcow2', '-c', `write -P ${PATTERN} 1M 1M`, srcOverlay]);
      await run('chown', ['-R', `${QEMU_UID}:${QEMU_GID}`, src.pod.root]);
      const srcLog = src.pod.serialLog(BUID);
      const dstLog = dst.pod.serialLog(BUID);
      await src.mgr.syncVMI(block);
      await waitForLog(
        srcLog,
        (t) => t.includes(READY) && lastHeartbeat(t) >= 2,
        120_000,
        'guest running on the source',
      );
      // the guest sees its containerDisk (kvts.disks: 64 MiB, writable)
      expect(await readLog(srcLog)).toMatch(/KUBEVIRT-TS-GUEST-DISK name=vda bytes=67108864 ro=0/);
      await dst.mgr.prepareMigrationTarget(block);
      const dstOverlay = dst.pod.layout.ephemeralOverlay('root');
      expect(existsSync(dstOverlay)).toBe(true);
      expect(await holdsPattern(dstOverlay)).toBe(false); // a fresh overlay: the data is not there yet

      // both "Pods" are on this host: the unix sockets are reached directly (in a cluster the handlers' proxies
      // carry them, the same path in both Pods; e2e/src/handler/migration.test.ts)
      const sockDir = path.join(dst.pod.baseDir, 'mp');
      await mkdir(sockDir);
      await chown(sockDir, QEMU_UID, QEMU_GID);
      const target = {
        targetURI: dst.pod.daemon.uri,
        migrationURI: `unix://${sockDir}/${BUID}-49152-source.sock`,
        disksURI: `unix://${sockDir}/${BUID}-49153-source.sock`,
        destinationXML: (xml: string) => xml.split(src.pod.root + '/').join(dst.pod.root + '/'),
      };

      // without block migration (status.migrationMethod LiveMigration) libvirt refuses the local disk
      await src.mgr.migrateVMI(live, {}, target);
      const refused = await src.mgr.waitForMigration(live);
      expect(refused).toMatchObject({ completed: true, failed: true });
      expect(refused.failureReason).toMatch(/Migration without shared storage is unsafe/);
      expect((await src.mgr.getDomain('default_bmig'))?.status.status).toBe('Running');

      const t0 = Date.now();
      await src.mgr.migrateVMI(block, { UnsafeMigration: false }, target);
      const state = await src.mgr.waitForMigration(block);
      expect(state).toMatchObject({ completed: true, failed: false });
      console.log(`block migration (containerDisk overlay) took ${Date.now() - t0} ms`);
      const beatAtSwitch = lastHeartbeat(await readLog(srcLog));
      await waitFor(() => dst.events.at(-1)?.domain.status.status === 'Running', 10_000, 'Running on target');
      expect((await dst.mgr.getDomain('default_bmig'))?.status).toEqual({
        status: 'Running',
        reason: 'Migrated',
      });
      await waitFor(
        () => src.events.at(-1)?.domain.status.reason === 'Migrated',
        10_000,
        'Migrated on source',
      );

      // the data written on the source is in the target's overlay now: libvirt copied it
      expect(await holdsPattern(dstOverlay)).toBe(true);
      // the same guest (no new boot) goes on beating on the target, reading and writing its disk there
      await waitForLog(
        dstLog,
        (t) => lastHeartbeat(t) >= beatAtSwitch + 3,
        60_000,
        'heartbeats on the target',
      );
      const dstText = await readLog(dstLog);
      expect(dstText).not.toContain(READY);
      const first = Number(/KUBEVIRT-TS-GUEST-HEARTBEAT (\d+)/.exec(dstText)?.[1]);
      expect(first).toBeGreaterThan(1);
      expect(first).toBeLessThanOrEqual(beatAtSwitch + 2);
      // the target domain's disk is its own overlay, over the image in its own "Pod"
      const disk = (await dst.mgr.getDomain('default_bmig'))?.spec?.devices.disks?.[0];
      expect(disk?.source?.file).toBe(dstOverlay);
      await dst.mgr.finalizeMigration(block);
    },
    T,
  );
});
