// Against a real libvirtd in session mode running as uid 107 with its own XDG dirs, booting the tiny
// test guest (tools/guest/build.sh) under QEMU TCG emulation and reading its serial console log.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { readdirSync, readlinkSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { chown, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import {
  Connection,
  DomainCreateFlags,
  DomainDeviceModifyFlags,
  DomainMemoryFlags,
  DomainShutdownFlags,
  DomainUndefineFlags,
  DomainVcpuFlags,
  DomainState,
  DomainStatsTypes,
  DomainXMLFlags,
  LibvirtError,
  type AgentLifecycleEvent,
  AgentLifecycleState,
  type DeviceEvent,
  type LifecycleEvent,
  type RebootEvent,
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

const T = 240_000;

describe('session libvirtd (uid 107) with the test guest', () => {
  let env: TestEnv;
  let conn: Connection;
  const lifecycle: LifecycleEvent[] = [];
  const reboots: RebootEvent[] = [];
  const removed: DeviceEvent[] = [];
  const added: DeviceEvent[] = [];
  const agents: AgentLifecycleEvent[] = [];

  const spawns: number[] = [];
  let answered = false;

  beforeAll(async () => {
    env = await startTestEnv({ onSpawn: (pid) => spawns.push(answered ? -pid : pid) });
    answered = true;
    conn = await Connection.open(env.daemon.uri);
    conn.on('lifecycle', (e) => lifecycle.push(e));
    conn.on('reboot', (e) => reboots.push(e));
    conn.on('deviceRemoved', (e) => removed.push(e));
    conn.on('deviceAdded', (e) => added.push(e));
    conn.on('agentLifecycle', (e) => agents.push(e));
  }, T);

  afterAll(async () => {
    await conn?.close();
    await env?.cleanup();
  }, T);

  const seen = (name: string, ev: string, detail?: string) =>
    lifecycle.some(
      (e) => e.domain.name === name && e.eventName === ev && (!detail || e.detailName === detail),
    );

  it(
    'runs libvirtd as uid 107 in session mode with its socket under baseDir',
    async () => {
      expect(env.daemon.socketPath.startsWith(env.baseDir)).toBe(true);
      // onSpawn: called once, with libvirtd's pid, before startSessionLibvirtd resolved
      expect(spawns).toEqual([env.daemon.pid]);
      const status = await readLog(`/proc/${env.daemon.pid}/status`);
      expect(status).toMatch(/^Uid:\s+107\s+107/m);
      expect(await conn.getURI()).toBe(env.daemon.uri);
      expect(await conn.getVersion()).toBeGreaterThan(5_000_000); // QEMU >= 5
      expect(await conn.getCapabilities()).toContain("<domain type='qemu'");
    },
    T,
  );

  it(
    'boots the guest, reads state, stats and XML, pauses, resumes, resets and powers it off by ACPI',
    async () => {
      const name = 'kvts-boot';
      const serialLog = path.join(env.baseDir, `${name}.serial.log`);
      // a small SCSI disk (hot-unplug needs no guest cooperation) for block stats and device events
      const diskPath = path.join(env.baseDir, `${name}-scratch.raw`);
      await writeFile(diskPath, Buffer.alloc(1024 * 1024));
      await chown(diskPath, QEMU_UID, QEMU_GID);
      const xml = guestXml({ name, kernel: env.kernel, initrd: env.initrd, serialLog }).replace(
        '</devices>',
        `<controller type='scsi' model='virtio-scsi' index='0'/>
    <disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='${diskPath}'/>
      <target dev='sda' bus='scsi'/><alias name='ua-scratch'/></disk>
    <channel type='unix'><source mode='bind'/><target type='virtio' name='org.qemu.guest_agent.0'/></channel>
  </devices>`,
      );
      const dom = await conn.defineXML(xml);
      await dom.create();
      await waitForLine(serialLog, READY_LINE);
      await waitForLine(serialLog, 'KUBEVIRT-TS-GUEST-HEARTBEAT 1 ');
      expect(await dom.getState()).toEqual({ state: DomainState.RUNNING, reason: 1, reasonName: 'BOOTED' });
      await waitFor(() => seen(name, 'STARTED', 'BOOTED'), 10_000, 'STARTED/BOOTED event');

      const info = await dom.getInfo();
      expect(info).toMatchObject({ state: DomainState.RUNNING, maxMem: 192 * 1024, nrVirtCpu: 1 });
      expect(info.cpuTime).toBeGreaterThan(0);
      const mem = await dom.memoryStats();
      expect(mem.actual_balloon).toBe(192 * 1024);
      expect(mem.rss).toBeGreaterThan(0);
      const blk = await dom.blockStats('sda');
      expect(blk.rdReq).toBeGreaterThanOrEqual(0);
      const all = await conn.getAllDomainStats(
        DomainStatsTypes.STATE | DomainStatsTypes.CPU_TOTAL | DomainStatsTypes.BALLOON,
      );
      const mine = all.find((r) => r.domain.uuid === dom.uuid);
      expect(mine?.stats['state.state']).toBe(DomainState.RUNNING);
      expect(mine?.stats['cpu.time']).toBeGreaterThan(0);
      expect(mine?.stats['balloon.maximum']).toBe(192 * 1024);
      const live = await dom.getXMLDesc();
      expect(live).toContain("<alias name='ua-scratch'/>");
      expect(live).toMatch(/<domain type='qemu' id='\d+'/);
      expect(await dom.getXMLDesc(DomainXMLFlags.INACTIVE)).toMatch(/<domain type='qemu'>/);

      // guest agent channel present, but this guest runs no agent: libvirt reports the agent state
      // at start (disconnected, reason DOMAIN_STARTED) and agent calls fail with AGENT_UNRESPONSIVE
      await waitFor(() => agents.some((e) => e.domain.uuid === dom.uuid), 10_000, 'agentLifecycle event');
      expect(agents.find((e) => e.domain.uuid === dom.uuid)).toMatchObject({
        state: AgentLifecycleState.DISCONNECTED,
        connected: false,
        reasonName: 'DOMAIN_STARTED',
      });
      for (const call of [
        () => dom.qemuAgentCommand('{"execute":"guest-ping"}', 2),
        () => dom.fsFreeze(),
        () => dom.setTime(),
        () => dom.getGuestInfo(),
        () => dom.shutdown(DomainShutdownFlags.GUEST_AGENT),
      ]) {
        const agentErr = (await call().catch((e: unknown) => e)) as LibvirtError;
        expect(agentErr).toBeInstanceOf(LibvirtError);
        expect(agentErr.codeName).toBe('AGENT_UNRESPONSIVE');
      }

      // hot-unplug the SCSI disk: completes with a deviceRemoved event
      await dom.detachDevice(
        `<disk type='file' device='disk'><source file='${diskPath}'/><target dev='sda' bus='scsi'/></disk>`,
      );
      await waitFor(
        () => removed.some((e) => e.domain.name === name && e.devAlias === 'ua-scratch'),
        30_000,
        'deviceRemoved',
      );
      expect(await dom.getXMLDesc()).not.toContain('ua-scratch');
      // and plug it back in live: deviceAdded
      await dom.attachDevice(
        `<disk type='file' device='disk'><driver name='qemu' type='raw'/><source file='${diskPath}'/>
          <target dev='sdb' bus='scsi'/><alias name='ua-again'/></disk>`,
        DomainDeviceModifyFlags.LIVE,
      );
      await waitFor(
        () => added.some((e) => e.domain.name === name && e.devAlias === 'ua-again'),
        30_000,
        'deviceAdded',
      );
      expect((await dom.blockStats('sdb')).rdReq).toBeGreaterThanOrEqual(0);

      await dom.suspend();
      expect(await dom.getState()).toMatchObject({ state: DomainState.PAUSED, reasonName: 'USER' });
      await waitFor(() => seen(name, 'SUSPENDED', 'PAUSED'), 10_000, 'SUSPENDED event');
      await dom.resume();
      await waitFor(() => seen(name, 'RESUMED', 'UNPAUSED'), 10_000, 'RESUMED event');
      const afterResume = (await readLog(serialLog)).length;
      await waitForLine(serialLog, 'KUBEVIRT-TS-GUEST-HEARTBEAT', 60_000, afterResume);

      // hard reset: QEMU resets the machine, libvirt reports a reboot event, the guest boots again
      const beforeReset = (await readLog(serialLog)).length;
      await dom.reset();
      await waitFor(() => reboots.some((e) => e.domain.uuid === dom.uuid), 30_000, 'reboot event');
      await waitForLine(serialLog, READY_LINE, 120_000, beforeReset);

      // ACPI power button -> guest's acpid powers off -> STOPPED/SHUTDOWN
      let lastPress = 0;
      // (re-pressed every 15 s like virt-launcher re-sends it: a press while the guest's acpid is still
      // starting can be lost)
      await waitForLine(
        serialLog,
        'KUBEVIRT-TS-GUEST-HEARTBEAT',
        60_000,
        (await readLog(serialLog)).lastIndexOf(READY_LINE),
      );
      let presses = 0;
      await waitFor(
        async () => {
          if (
            (await readLog(serialLog))
              .slice(beforeReset)
              .includes('KUBEVIRT-TS-GUEST-POWEROFF acpi-power-button')
          )
            return true;
          if (presses === 0 || Date.now() - lastPress > 15_000) {
            presses++;
            lastPress = Date.now();
            await dom.shutdown(DomainShutdownFlags.ACPI_POWER_BTN);
          }
          return false;
        },
        120_000,
        'guest power-off after ACPI power button',
      );
      await waitFor(() => seen(name, 'STOPPED', 'SHUTDOWN'), 60_000, 'STOPPED/SHUTDOWN event');
      expect(await dom.getState()).toMatchObject({ state: DomainState.SHUTOFF, reasonName: 'SHUTDOWN' });
      await dom.undefine();
      await waitFor(() => seen(name, 'UNDEFINED'), 10_000, 'UNDEFINED event');
    },
    T,
  );

  it(
    'changes vCPUs, memory and devices of a defined guest in its persistent config; undefines with NVRAM flags',
    async () => {
      const name = 'kvts-config';
      const serialLog = path.join(env.baseDir, `${name}.serial.log`);
      const dom = await conn.defineXML(guestXml({ name, kernel: env.kernel, initrd: env.initrd, serialLog }));
      await dom.setVcpus(2, DomainVcpuFlags.CONFIG | DomainVcpuFlags.MAXIMUM);
      await dom.setVcpus(2, DomainVcpuFlags.CONFIG);
      await dom.setMemory(128 * 1024, DomainMemoryFlags.CONFIG);
      await dom.attachDevice(
        `<disk type='file' device='cdrom'><driver name='qemu' type='raw'/><target dev='sdz' bus='sata'/><readonly/></disk>`,
        DomainDeviceModifyFlags.CONFIG,
      );
      let xml = await dom.getXMLDesc(DomainXMLFlags.INACTIVE);
      expect(xml).toMatch(/<vcpu placement='static'>2<\/vcpu>/);
      expect(xml).toContain("<currentMemory unit='KiB'>131072</currentMemory>");
      expect(xml).toContain("<target dev='sdz' bus='sata'/>");
      // live-only changes on a stopped domain are refused with OPERATION_INVALID
      const live = (await dom.setVcpus(1, DomainVcpuFlags.LIVE).catch((e: unknown) => e)) as LibvirtError;
      expect(live.codeName).toBe('OPERATION_INVALID');
      await dom.detachDevice(
        `<disk type='file' device='cdrom'><target dev='sdz' bus='sata'/></disk>`,
        DomainDeviceModifyFlags.CONFIG,
      );
      xml = await dom.getXMLDesc(DomainXMLFlags.INACTIVE);
      expect(xml).not.toContain("dev='sdz'");
      const caps = await conn.getDomainCapabilities({ virttype: 'qemu', arch: 'x86_64' });
      expect(caps).toContain('<domainCapabilities>');
      await dom.undefine(DomainUndefineFlags.NVRAM | DomainUndefineFlags.MANAGED_SAVE);
      const gone = (await dom.getState().catch((e: unknown) => e)) as LibvirtError;
      expect(gone.isNoDomain).toBe(true);
    },
    T,
  );

  it(
    'starts a transient guest paused with autodestroy, which dies with the connection',
    async () => {
      const name = 'kvts-auto';
      const serialLog = path.join(env.baseDir, `${name}.serial.log`);
      const other = await Connection.open(env.daemon.uri);
      const dom = await other.createXML(
        guestXml({ name, kernel: env.kernel, initrd: env.initrd, serialLog }),
        DomainCreateFlags.START_PAUSED | DomainCreateFlags.START_AUTODESTROY,
      );
      expect(await dom.getState()).toMatchObject({ state: DomainState.PAUSED, reasonName: 'USER' });
      expect((await conn.lookupDomainByName(name)).uuid).toBe(dom.uuid);
      await other.close();
      await waitFor(() => seen(name, 'STOPPED', 'DESTROYED'), 30_000, 'autodestroy');
      const err = (await conn.lookupDomainByName(name).catch((e: unknown) => e)) as LibvirtError;
      expect(err.codeName).toBe('NO_DOMAIN');
    },
    T,
  );

  it(
    'keeps the JS event loop running while a call waits on a stopped daemon, and delivers events meanwhile',
    async () => {
      const name = 'kvts-evloop';
      const serialLog = path.join(env.baseDir, `${name}.serial.log`);
      const probe = await Connection.open(env.daemon.uri);
      try {
        process.kill(env.daemon.pid, 'SIGSTOP');
        let ticks = 0;
        const timer = setInterval(() => ticks++, 10);
        let done = false;
        const slow = probe.getHostname().then((h) => {
          done = true;
          return h;
        });
        // more blocked calls than libuv has pool threads (4): Node's own pool work (fs) must still run
        const blocked = Array.from({ length: 8 }, () => probe.getLibVersion());
        const fsResult = await Promise.race([
          readFile('/proc/self/status', 'utf8').then(() => 'fs ok'),
          new Promise((r) => setTimeout(() => r('fs starved'), 5000)),
        ]);
        expect(fsResult).toBe('fs ok');
        await new Promise((r) => setTimeout(r, 500));
        clearInterval(timer);
        expect(done).toBe(false);
        expect(ticks).toBeGreaterThan(10); // the timer kept firing while the libvirt calls were blocked
        process.kill(env.daemon.pid, 'SIGCONT');
        expect(typeof (await slow)).toBe('string');
        const version = await probe.getLibVersion();
        expect(await Promise.all(blocked)).toEqual(Array(8).fill(version));
      } finally {
        process.kill(env.daemon.pid, 'SIGCONT');
        await probe.close();
      }

      // events arrive while other calls are in flight
      const dom = await conn.defineXML(
        guestXml({ name, kernel: env.kernel, initrd: env.initrd, serialLog, cmdline: 'kvts.poweroff' }),
      );
      let inFlightAtEvent = -1;
      const onEv = (e: LifecycleEvent) => {
        if (e.domain.name === name && e.eventName === 'STARTED') inFlightAtEvent = conn.pendingCalls;
      };
      conn.on('lifecycle', onEv);
      let stop = false;
      const hammer = (async () => {
        let n = 0;
        while (!stop) {
          // (stats may race with the guest's own power-off: QEMU's monitor goes away mid-call)
          await Promise.all([
            conn.getAllDomainStats().catch(() => []),
            dom.getState(),
            conn.listAllDomains(),
          ]);
          n++;
        }
        return n;
      })();
      await dom.create();
      await waitFor(() => inFlightAtEvent >= 0, 30_000, 'STARTED event');
      // the guest powers itself off right after the ready line (kvts.poweroff)
      await waitForLine(serialLog, 'KUBEVIRT-TS-GUEST-POWEROFF kvts.poweroff');
      await waitFor(() => seen(name, 'STOPPED', 'SHUTDOWN'), 60_000, 'STOPPED/SHUTDOWN event').catch(
        async (e: Error) => {
          const st = await dom.getState().catch((x: Error) => x.message);
          throw new Error(
            `${e.message}; events: ${JSON.stringify(lifecycle.filter((l) => l.domain.name === name).map((l) => l.eventName + '/' + l.detailName))}; state: ${JSON.stringify(st)}`,
          );
        },
      );
      stop = true;
      expect(await hammer).toBeGreaterThan(0);
      conn.off('lifecycle', onEv);
      expect(inFlightAtEvent).toBeGreaterThan(0);
      await dom.undefine();
    },
    T,
  );

  it(
    'closes remote connections without leaking file descriptors',
    async () => {
      const fds = () => readdirSync('/proc/self/fd').length;
      for (let i = 0; i < 3; i++) await (await Connection.open(env.daemon.uri)).close();
      await new Promise((r) => setTimeout(r, 200));
      const fd0 = fds();
      for (let i = 0; i < 30; i++) {
        const c = await Connection.open(env.daemon.uri);
        await c.listAllDomains();
        await c.close();
      }
      await new Promise((r) => setTimeout(r, 200));
      expect(fds()).toBe(fd0);
    },
    T,
  );
});

describe('losing the daemon', () => {
  it(
    'emits close and rejects pending calls when libvirtd dies',
    async () => {
      const env = await startTestEnv();
      try {
        const conn = await Connection.open(env.daemon.uri);
        const reasons: string[] = [];
        conn.on('close', (r) => reasons.push(r));
        await conn.getLibVersion();
        process.kill(env.daemon.pid, 'SIGSTOP');
        const pending = conn.getHostname().then(
          () => 'resolved',
          (e: unknown) => e,
        );
        await new Promise((r) => setTimeout(r, 100));
        process.kill(env.daemon.pid, 'SIGKILL');
        const err = (await pending) as LibvirtError;
        expect(err).toBeInstanceOf(LibvirtError);
        await waitFor(() => reasons.length > 0, 30_000, 'close event');
        expect(['eof', 'error']).toContain(reasons[0]);
        expect(conn.isAlive()).toBe(false);
        const after = (await conn.getHostname().catch((e: unknown) => e)) as LibvirtError;
        expect(after).toBeInstanceOf(LibvirtError);
        await conn.close();
        expect(reasons).toHaveLength(1);
      } finally {
        await env.cleanup();
      }
    },
    T,
  );

  it(
    'closes with reason keepalive and rejects pending calls when libvirtd hangs',
    async () => {
      const env = await startTestEnv();
      try {
        const conn = await Connection.open(env.daemon.uri, { keepAlive: { interval: 1, count: 1 } });
        const reasons: string[] = [];
        conn.on('close', (r) => reasons.push(r));
        await conn.getLibVersion();
        process.kill(env.daemon.pid, 'SIGSTOP');
        const err = (await conn.getHostname().catch((e: unknown) => e)) as LibvirtError;
        expect(err).toBeInstanceOf(LibvirtError);
        await waitFor(() => reasons.length > 0, 30_000, 'close event');
        expect(reasons).toEqual(['keepalive']);
        expect(conn.isAlive()).toBe(false);
      } finally {
        process.kill(env.daemon.pid, 'SIGCONT');
        await env.cleanup();
      }
    },
    T,
  );
});

describe('session libvirtd with its own virtlogd', () => {
  it(
    'logs QEMU through virtlogd and stop() reaps both daemons',
    async () => {
      const env = await startTestEnv({ virtlogd: true });
      const { pid, virtlogdPid } = env.daemon;
      try {
        expect(virtlogdPid).toBeGreaterThan(0);
        expect(await readLog(`/proc/${virtlogdPid}/status`)).toMatch(/^Uid:\s+107\s/m);
        const conn = await Connection.open(env.daemon.uri);
        const name = 'kvts-logd';
        const serialLog = path.join(env.baseDir, `${name}.serial.log`);
        const dom = await conn.createXML(
          guestXml({ name, kernel: env.kernel, initrd: env.initrd, serialLog }),
        );
        await waitForLine(serialLog, READY_LINE);
        // QEMU's stdout/stderr go to virtlogd (stdio_handler = "logd"), which holds the log file open
        const qemuLogPath = path.join(env.daemon.dirs.cache, 'libvirt', 'qemu', 'log', `${name}.log`);
        const virtlogdFiles = readdirSync(`/proc/${virtlogdPid}/fd`).map((fd) => {
          try {
            return readlinkSync(`/proc/${virtlogdPid}/fd/${fd}`);
          } catch {
            return '';
          }
        });
        expect(virtlogdFiles).toContain(qemuLogPath);
        expect(await readLog(qemuLogPath)).toContain('qemu-system-x86_64');
        // the memory defaults: only the qemu connection driver, one malloc arena, few idle workers
        expect(connectionDrivers(await readLog(`/proc/${pid}/maps`))).toEqual(['libvirt_driver_qemu.so']);
        for (const p of [pid, virtlogdPid])
          expect((await readLog(`/proc/${p}/environ`)).split('\0')).toContain('MALLOC_ARENA_MAX=1');
        expect(await readLog(path.join(env.daemon.dirs.config, 'libvirt', 'libvirtd.conf'))).toMatch(
          /^min_workers = 1\nprio_workers = 1\n/m,
        );
        await dom.destroy();
        await conn.close();
      } finally {
        await env.cleanup();
      }
      expect(await readLog(`/proc/${pid}/status`)).toBe('');
      expect(await readLog(`/proc/${virtlogdPid}/status`)).toBe('');
    },
    T,
  );
});

/** Names of the libvirt connection-driver modules mapped in a process (from /proc/PID/maps). */
function connectionDrivers(maps: string): string[] {
  return [...new Set([...maps.matchAll(/\/(libvirt_driver_[a-z0-9_]+\.so)$/gm)].map((m) => m[1]!))].sort();
}

describe('connection drivers', () => {
  it(
    "drivers: 'all' loads every installed module (libvirtd's own behaviour), the default only qemu",
    async () => {
      const all = await startTestEnv({ drivers: 'all' });
      try {
        const loaded = connectionDrivers(await readLog(`/proc/${all.daemon.pid}/maps`));
        expect(loaded).toEqual(
          expect.arrayContaining(['libvirt_driver_qemu.so', 'libvirt_driver_nodedev.so']),
        );
        expect(loaded.length).toBeGreaterThan(2);
      } finally {
        await all.cleanup();
      }
      const def = await startTestEnv();
      try {
        expect(connectionDrivers(await readLog(`/proc/${def.daemon.pid}/maps`))).toEqual([
          'libvirt_driver_qemu.so',
        ]);
        const conn = await Connection.open(def.daemon.uri);
        try {
          // the qemu driver alone answers node and capability calls
          expect(await conn.getCapabilities()).toContain('<capabilities>');
        } finally {
          await conn.close();
        }
      } finally {
        await def.cleanup();
      }
    },
    T,
  );
});

describe('stopping a hung daemon', () => {
  it(
    'stop() still kills and reaps a SIGSTOPped libvirtd',
    async () => {
      const env = await startTestEnv();
      const { pid } = env.daemon;
      process.kill(pid, 'SIGSTOP');
      await env.cleanup();
      expect(await readLog(`/proc/${pid}/status`)).toBe('');
    },
    T,
  );
});

describe('daemon lifetime tied to its parent', () => {
  it(
    'libvirtd and virtlogd stop when the process that started them is killed',
    async () => {
      const base = await mkdtemp('/tmp/kvl-');
      await chown(base, QEMU_UID, QEMU_GID);
      const mod = new URL('./index.js', import.meta.url).href;
      const script = `const { startSessionLibvirtd } = await import(${JSON.stringify(mod)});
      const d = await startSessionLibvirtd({ baseDir: ${JSON.stringify(base)}, uid: 107, gid: 107, virtlogd: true });
      console.log(JSON.stringify({ pid: d.pid, virtlogdPid: d.virtlogdPid }));
      setInterval(() => {}, 1000);`;
      const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let out = '';
      child.stdout.on('data', (b: Buffer) => (out += b.toString()));
      try {
        await waitFor(() => out.includes('}'), 60_000, 'daemon started by the child');
        const { pid, virtlogdPid } = JSON.parse(out) as { pid: number; virtlogdPid: number };
        expect(await readLog(`/proc/${pid}/status`)).toMatch(/^Uid:\s+107\s/m);
        child.kill('SIGKILL');
        await waitFor(async () => (await readLog(`/proc/${pid}/status`)) === '', 30_000, 'libvirtd gone');
        await waitFor(
          async () => (await readLog(`/proc/${virtlogdPid}/status`)) === '',
          30_000,
          'virtlogd gone',
        );
      } finally {
        child.kill('SIGKILL');
        await rm(base, { recursive: true, force: true });
      }
    },
    T,
  );
});
