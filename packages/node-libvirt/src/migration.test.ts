// Live migration between two session libvirtds (uid 107, each with its own host_uuid) on this host:
// peer-to-peer over the unix socket, QEMU's migration stream over TCP on loopback. The test guest keeps
// printing heartbeats on its serial console (a file both QEMUs append to) after the move.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm, chown } from 'node:fs/promises';
import path from 'node:path';
import {
  Connection,
  DomainJobStatsFlags,
  DomainJobType,
  DomainState,
  LibvirtError,
  MigrateFlags,
  type JobCompletedEvent,
  type JobInfo,
  type LifecycleEvent,
  type MigrationIterationEvent,
} from './index.js';
import {
  guestXml,
  QEMU_GID,
  QEMU_UID,
  READY_LINE,
  readLog,
  startTestEnv,
  waitFor,
  waitForLine,
  type TestEnv,
} from './test-guest.js';

const T = 300_000;

describe('live migration between two session libvirtds', () => {
  let src: TestEnv;
  let dst: TestEnv;
  let srcConn: Connection;
  let dstConn: Connection;
  let shared: string;

  beforeAll(async () => {
    [src, dst] = await Promise.all([
      startTestEnv({ libvirtdConf: { host_uuid: randomUUID() } }),
      startTestEnv({ libvirtdConf: { host_uuid: randomUUID() } }),
    ]);
    srcConn = await Connection.open(src.daemon.uri);
    dstConn = await Connection.open(dst.daemon.uri);
    shared = await mkdtemp('/tmp/kvm-');
    await chown(shared, QEMU_UID, QEMU_GID);
  }, T);

  afterAll(async () => {
    await srcConn?.close();
    await dstConn?.close();
    await Promise.all([src?.cleanup(), dst?.cleanup()]);
    if (shared) await rm(shared, { recursive: true, force: true });
  }, T);

  it(
    'moves a running guest and reports iterations, job stats and lifecycle events on both sides',
    async () => {
      const name = 'kvts-migrate';
      const serialLog = path.join(shared, 'serial.log');
      const xml = guestXml({ name, kernel: src.kernel, initrd: src.initrd, serialLog }).replace(
        `<source path='${serialLog}'/>`,
        `<source path='${serialLog}' append='on'/>`,
      );
      const srcEvents: LifecycleEvent[] = [];
      const dstEvents: LifecycleEvent[] = [];
      const iterations: MigrationIterationEvent[] = [];
      const completed: JobCompletedEvent[] = [];
      srcConn.on('lifecycle', (e) => srcEvents.push(e));
      dstConn.on('lifecycle', (e) => dstEvents.push(e));
      srcConn.on('migrationIteration', (e) => iterations.push(e));
      srcConn.on('jobCompleted', (e) => completed.push(e));

      const dom = await srcConn.createXML(xml);
      await waitForLine(serialLog, READY_LINE);

      // the same host UUID would be refused; here each daemon has its own
      const t0 = Date.now();
      await dom.migrateToURI3(
        dst.daemon.uri,
        { uri: 'tcp://127.0.0.1', listenAddress: '127.0.0.1', bandwidth: 1000 },
        MigrateFlags.LIVE | MigrateFlags.PEER2PEER,
      );
      const ms = Date.now() - t0;
      console.log(`live migration of a ${192} MiB TCG guest over loopback took ${ms} ms`);

      const moved = await dstConn.lookupDomainByName(name);
      expect(moved.uuid).toBe(dom.uuid);
      expect(await moved.getState()).toMatchObject({ state: DomainState.RUNNING, reasonName: 'MIGRATED' });
      const gone = (await dom.getState().catch((e: unknown) => e)) as LibvirtError;
      expect(gone.codeName).toBe('NO_DOMAIN');

      await waitFor(() => completed.length > 0, 30_000, 'jobCompleted event');
      expect(completed[0]!.domain.uuid).toBe(dom.uuid);
      expect(completed[0]!.params.operation).toBeGreaterThan(0);
      expect(completed[0]!.params.memory_total).toBeGreaterThan(0);
      expect(iterations.length).toBeGreaterThan(0);
      expect(iterations[0]!.iteration).toBeGreaterThanOrEqual(1);
      await waitFor(
        () => srcEvents.some((e) => e.eventName === 'STOPPED' && e.detailName === 'MIGRATED'),
        30_000,
        'source STOPPED/MIGRATED',
      );
      await waitFor(
        () => dstEvents.some((e) => e.eventName === 'RESUMED' && e.detailName === 'MIGRATED'),
        30_000,
        'destination RESUMED/MIGRATED',
      );
      expect(dstEvents.some((e) => e.eventName === 'STARTED' && e.detailName === 'MIGRATED')).toBe(true);

      // the guest is still alive: new heartbeats after the move
      const after = (await readLog(serialLog)).length;
      await waitForLine(serialLog, 'KUBEVIRT-TS-GUEST-HEARTBEAT', 60_000, after);

      // completed job stats on the destination
      const job = await moved.getJobInfo(DomainJobStatsFlags.COMPLETED);
      expect([DomainJobType.COMPLETED, DomainJobType.NONE]).toContain(job.type);
      await moved.destroy();
    },
    T,
  );

  it(
    'aborts a migration in progress',
    async () => {
      const name = 'kvts-abort';
      const serialLog = path.join(shared, 'abort.log');
      const dom = await srcConn.createXML(
        guestXml({ name, kernel: src.kernel, initrd: src.initrd, serialLog }),
      );
      await waitForLine(serialLog, READY_LINE);
      // 1 MiB/s: the migration cannot finish before we abort it
      const migrating = dom
        .migrateToURI3(
          dst.daemon.uri,
          { uri: 'tcp://127.0.0.1', listenAddress: '127.0.0.1', bandwidth: 1 },
          MigrateFlags.LIVE | MigrateFlags.PEER2PEER,
        )
        .then(
          () => 'finished',
          (e: unknown) => e,
        );
      // (memory counters appear once QEMU has started sending, after the setup phase)
      let running: JobInfo | undefined;
      await waitFor(
        async () => {
          running = await dom.getJobInfo();
          return running.type === DomainJobType.UNBOUNDED && Number(running.params.memory_processed ?? 0) > 0;
        },
        60_000,
        'migration job transferring memory',
      );
      expect(running!.params.memory_total).toBeGreaterThan(0);
      await dom.abortJob();
      const result = (await migrating) as LibvirtError;
      expect(result).toBeInstanceOf(LibvirtError);
      expect(result.codeName).toBe('OPERATION_ABORTED');
      expect(await dom.getState()).toMatchObject({ state: DomainState.RUNNING });
      const notThere = (await dstConn.lookupDomainByName(name).catch((e: unknown) => e)) as LibvirtError;
      expect(notThere.codeName).toBe('NO_DOMAIN');
      await dom.destroy();
    },
    T,
  );
});
