// DomainManager and DomainWatcher against a real session libvirtd (uid 107, own XDG dirs) booting
// the tiny test guest under QEMU TCG emulation, checked on the guest's serial console log.
import { setTimeout as sleep } from 'node:timers/promises';
import { chown, mkdir, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ConnectionHolder } from './connection.js';
import { DomainManager } from './manager.js';
import {
  countLines,
  guestVMI,
  HEARTBEAT,
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

const T = 180_000;
const UID = 'u-real-1';

describe('DomainManager + DomainWatcher on a real session libvirtd', () => {
  let pod: PodEnv;
  let holder: ConnectionHolder;
  let mgr: DomainManager;
  let watcher: DomainWatcher;
  const events: DomainWatchEvent[] = [];
  const vmi = guestVMI('real', UID);
  const name = 'default_real';
  const log = () => pod.serialLog(UID);
  const statuses = () =>
    events
      .filter((e) => e.domain.domainName === name)
      .map((e) => `${e.type} ${e.domain.status.status}/${e.domain.status.reason}`);

  beforeAll(async () => {
    pod = await startPod();
    holder = new ConnectionHolder(() => pod.open());
    mgr = new DomainManager({
      connection: holder,
      context: pod.context,
      prepare: (v, s) => pod.prepare(v, s),
      logger: quietLogger,
    });
    watcher = new DomainWatcher({
      connection: holder,
      logger: quietLogger,
      reconnectDelayMs: 100,
      maxReconnectDelayMs: 500,
    });
    watcher.on('event', (e: DomainWatchEvent) => events.push(e));
    await watcher.start();
  }, T);

  afterAll(async () => {
    await watcher?.stop();
    await mgr?.close();
    await holder?.close();
    await pod?.cleanup();
  }, T);

  test(
    'syncVMI defines and boots the guest; the watcher reports it; a second sync changes nothing',
    async () => {
      const t0 = Date.now();
      const d = await mgr.syncVMI(vmi);
      expect(d.status).toEqual({ status: 'Running', reason: 'Booted' });
      await waitForLog(log(), (t) => t.includes(READY), 120_000, 'guest ready line');
      console.log(`guest booted to its ready line in ${Date.now() - t0} ms (TCG)`);
      await waitFor(() => statuses().includes('MODIFIED Running/Booted'), 10_000, 'Running event');
      // the first report is ADDED; its status is whatever the domain was in when the watcher looked
      expect(statuses()[0]).toMatch(/^ADDED /);
      expect(statuses().filter((s) => s.startsWith('ADDED'))).toHaveLength(1);
      const uuid = d.domainUUID;
      const n = events.length;
      const again = await mgr.syncVMI(vmi);
      expect(again.domainUUID).toBe(uuid);
      expect(again.status).toEqual({ status: 'Running', reason: 'Booted' });
      await sleep(300);
      expect(events.length).toBe(n); // no define, no start: libvirt sent no event
      const got = await mgr.getDomain();
      expect(got?.metadata).toMatchObject({ name: 'real', namespace: 'default', uid: UID });
      expect(got?.spec?.devices.serials?.[0]?.log?.file).toBe(log());
    },
    T,
  );

  test(
    'pause stops the guest (no heartbeats), unpause resumes it',
    async () => {
      await waitForLog(log(), (t) => lastHeartbeat(t) >= 1, 30_000, 'first heartbeat');
      await mgr.pauseVMI(vmi);
      await waitFor(() => statuses().at(-1) === 'MODIFIED Paused/User', 10_000, 'Paused event');
      const before = lastHeartbeat(await readLog(log()));
      await sleep(2500);
      expect(lastHeartbeat(await readLog(log()))).toBeLessThanOrEqual(before + 1);
      // a sync must not undo a user's pause
      await mgr.syncVMI(vmi);
      expect((await mgr.getDomain(name))?.status).toEqual({ status: 'Paused', reason: 'User' });
      await mgr.unpauseVMI(vmi);
      await waitFor(() => statuses().at(-1) === 'MODIFIED Running/Unpaused', 10_000, 'Unpaused event');
      await waitForLog(log(), (t) => lastHeartbeat(t) >= before + 2, 30_000, 'heartbeats after unpause');
    },
    T,
  );

  test(
    'a disk added to the VMI is hot-plugged into the running guest, and unplugged when removed',
    async () => {
      const withDisk = structuredClone(vmi) as typeof vmi & { spec: { volumes?: unknown[] } };
      (withDisk.spec.domain as { devices: { disks?: unknown[] } }).devices.disks = [
        { name: 'data', disk: { bus: 'scsi' } },
      ];
      withDisk.spec.volumes = [{ name: 'data', hostDisk: { path: '/data/disk.img', type: 'Disk' } }];
      const image = mgr.convert(withDisk).devices.disks?.[0]?.source?.file;
      expect(image).toBe(`${pod.root}/var/run/kubevirt-private/vmi-disks/data/disk.img`);
      await mkdir(path.dirname(image!), { recursive: true });
      await writeFile(image!, Buffer.alloc(0));
      await truncate(image!, 16 * 2 ** 20);
      for (const p of [image!, path.dirname(image!), path.dirname(path.dirname(image!))])
        await chown(p, QEMU_UID, QEMU_GID);

      const n = events.length;
      await mgr.syncVMI(withDisk);
      const disks = async () =>
        ((await mgr.getDomain(name))?.spec?.devices.disks ?? []).map(
          (d) => `${d.target.dev}:${d.source?.file}`,
        );
      expect(await disks()).toEqual([`sda:${image}`]);
      // libvirt's device-added event makes the watcher report the new spec
      await waitFor(
        () => (watcher.get(name)?.spec?.devices.disks?.length ?? 0) === 1,
        10_000,
        'watcher saw the disk',
      );
      expect(events.length).toBeGreaterThan(n);
      await mgr.syncVMI(withDisk); // nothing more to attach
      expect(await disks()).toEqual([`sda:${image}`]);

      await mgr.syncVMI(vmi);
      await waitFor(async () => (await disks()).length === 0, 15_000, 'disk unplugged');
      await waitFor(
        () => (watcher.get(name)?.spec?.devices.disks?.length ?? 0) === 0,
        10_000,
        'watcher saw the unplug',
      );
      expect(statuses().at(-1)).toBe('MODIFIED Running/Unpaused');
    },
    T,
  );

  test(
    'stats and version come from the real daemon; guest agent calls fail clearly (the guest has none)',
    async () => {
      const stats = await mgr.getDomainStats();
      expect(stats?.Name).toBe(name);
      expect(Number(stats?.Cpu?.Time)).toBeGreaterThan(0);
      expect(stats?.NrVirtCpu).toBe(1);
      expect(await mgr.getQemuVersion()).toMatch(/^\d+\.\d+\.\d+$/);
      await expect(mgr.guestPing(name, 1)).rejects.toThrow(/agent/i);
      await expect(mgr.getGuestInfo()).rejects.toThrow(/agent/i);
      await expect(mgr.freezeVMI(vmi, 0)).rejects.toThrow(/agent/i);
      await expect(mgr.exec(name, '/bin/true', [], 1)).rejects.toThrow(/agent/i);
    },
    T,
  );

  test(
    'libvirtd restarts: the watcher reconnects, re-lists, and reports what changed while it was down',
    async () => {
      await waitFor(() => statuses().at(-1) === 'MODIFIED Running/Unpaused', 1000, 'running before restart');
      let disconnected = 0;
      watcher.once('disconnected', () => disconnected++);
      const n = events.length;
      // while libvirtd is down, QEMU keeps running; the guest is killed behind libvirt's back
      await pod.restartLibvirtd(300, async () => {
        const pidFile = `${pod.daemon.dirs.runtime}/libvirt/qemu/run/${name}.pid`;
        const pid = Number((await readLog(pidFile)).trim());
        expect(pid).toBeGreaterThan(0);
        process.kill(pid, 'SIGKILL');
      });
      await waitFor(() => disconnected === 1, 10_000, 'watcher noticed the lost connection');
      await waitFor(
        () => events.length > n && events.at(-1)!.domain.status.status === 'Shutoff',
        30_000,
        'event after reconnect',
      );
      const after = events.slice(n).map((e) => `${e.type} ${e.domain.status.status}`);
      expect(after.at(-1)).toBe('MODIFIED Shutoff');
      expect(after).not.toContain('DELETED Shutoff');
      // the manager's calls work on the new connection too
      expect((await mgr.getDomain(name))?.status.status).toBe('Shutoff');
    },
    T,
  );

  test(
    'a stopped domain is started again by syncVMI (VMI not yet Running); kill destroys it',
    async () => {
      const logBefore = countLines(await readLog(log()), READY);
      await mgr.syncVMI({ ...vmi, status: { phase: 'Scheduled' } });
      await waitForLog(log(), (t) => countLines(t, READY) > logBefore, 120_000, 'guest ready again');
      await mgr.killVMI(vmi);
      await waitFor(() => statuses().at(-1) === 'MODIFIED Shutoff/Destroyed', 10_000, 'Destroyed event');
      await mgr.killVMI(vmi); // idempotent
      // a VMI that already ran is not brought back by a sync
      await mgr.syncVMI({ ...vmi, status: { phase: 'Running' } });
      expect((await mgr.getDomain(name))?.status).toEqual({ status: 'Shutoff', reason: 'Destroyed' });
    },
    T,
  );

  test(
    'softRebootVMI (no guest agent: ACPI) reboots the guest; the domain stays Running',
    async () => {
      const readyBefore = countLines(await readLog(log()), READY);
      await mgr.syncVMI({ ...vmi, status: { phase: 'Scheduled' } });
      await waitForLog(
        log(),
        (t) => countLines(t, READY) > readyBefore && t.lastIndexOf(HEARTBEAT) > t.lastIndexOf(READY),
        120_000,
        'guest up',
      );
      const readyCount = countLines(await readLog(log()), READY);
      await mgr.softRebootVMI(vmi);
      await waitForLog(
        log(),
        (t) => countLines(t, READY) > readyCount,
        120_000,
        'guest booted again after the reboot',
      );
      expect(await readLog(log())).toContain('KUBEVIRT-TS-GUEST-POWER-BUTTON');
      expect((await mgr.getDomain(name))?.status.status).toBe('Running');
    },
    T,
  );

  test(
    'shutdownVMI presses the ACPI power button; the guest powers off within the grace period',
    async () => {
      await mgr.syncVMI(vmi);
      await waitForLog(log(), (t) => t.lastIndexOf(HEARTBEAT) > t.lastIndexOf(READY), 120_000, 'guest up');
      const t0 = Date.now();
      const result = await mgr.shutdownVMI(vmi, { gracePeriodSeconds: 60, wait: true });
      expect(result).toBe('shutdown');
      console.log(`ACPI shutdown took ${Date.now() - t0} ms`);
      expect(await readLog(log())).toContain('KUBEVIRT-TS-GUEST-POWER-BUTTON');
      await waitFor(() => statuses().at(-1) === 'MODIFIED Shutoff/Shutdown', 10_000, 'Shutdown event');
    },
    T,
  );

  test(
    'shutdownVMI destroys a guest that ignores ACPI once the grace period is over',
    async () => {
      // acpi=off: the guest kernel never sees the power button
      const deaf = guestVMI('deaf', 'u-real-deaf', { kernelArgs: 'console=ttyS0 quiet acpi=off' });
      await mgr.syncVMI(deaf);
      await waitForLog(pod.serialLog('u-real-deaf'), (t) => lastHeartbeat(t) >= 1, 120_000, 'deaf guest up');
      const t0 = Date.now();
      expect(await mgr.shutdownVMI(deaf, { gracePeriodSeconds: 3, wait: true })).toBe('killed');
      const took = Date.now() - t0;
      expect(took).toBeGreaterThanOrEqual(3000); // the guest had its grace period ...
      expect((await mgr.getDomain('default_deaf'))?.status).toEqual({
        status: 'Shutoff',
        reason: 'Destroyed',
      });
      expect(await readLog(pod.serialLog('u-real-deaf'))).not.toContain('KUBEVIRT-TS-GUEST-POWER-BUTTON');
      await mgr.deleteVMI(deaf);
    },
    T,
  );

  test(
    'deleteVMI undefines the domain; the watcher reports DELETED',
    async () => {
      await mgr.deleteVMI(vmi);
      await waitFor(() => statuses().at(-1) === 'DELETED NoState/NonExistent', 10_000, 'DELETED event');
      expect(await mgr.getDomain()).toBeUndefined();
      expect(watcher.get(name)).toBeUndefined();
    },
    T,
  );
});
