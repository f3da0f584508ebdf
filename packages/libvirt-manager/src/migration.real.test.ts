// Live migration for real: two session libvirtds on this host (each its own host_uuid and its own
// "Pod" root), the running test guest moved from one to the other over TCP on loopback
// (virDomainMigrateToURI3, peer-to-peer), still printing heartbeats on its serial console afterwards.
import { ConnectionHolder } from './connection.js';
import { DomainManager } from './manager.js';
import {
  freePort,
  guestVMI,
  lastHeartbeat,
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

async function side(hostUuid: string): Promise<Side> {
  const pod = await startPod({ hostUuid });
  const holder = new ConnectionHolder(() => pod.open());
  const mgr = new DomainManager({
    connection: holder,
    context: pod.context,
    prepare: (v, s) => pod.prepare(v, s),
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
      const state = await src.mgr.waitForMigration(vmi);
      const ms = Date.now() - t0;
      expect(state).toMatchObject({ completed: true, failed: false });
      console.log(`live migration over tcp://127.0.0.1:${port} took ${ms} ms`);
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
});
