import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { findPidFiles, leftovers, runMonitor } from './monitor.js';

let dir: string;
const started: number[] = [];
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kvts-monitor-'));
});
afterEach(async () => {
  for (const pid of started.splice(0)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  await rm(dir, { recursive: true, force: true });
});

/** A real process whose command line looks like QEMU's (bash exec -a sets argv[0]). */
async function fakeQemu(ignoreTerm = false): Promise<number> {
  const child = spawn(
    'bash',
    ['-c', `${ignoreTerm ? "trap '' TERM; " : ''}exec -a /usr/bin/qemu-system-x86_64 sleep 300`],
    { stdio: 'ignore', detached: true },
  );
  child.unref();
  started.push(child.pid!);
  await new Promise((r) => setTimeout(r, 100));
  return child.pid!;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('monitor', () => {
  it('finds pid files and classifies live QEMU processes', async () => {
    const qemu = await fakeQemu();
    await mkdir(path.join(dir, 'run/libvirt/qemu/run'), { recursive: true });
    await writeFile(path.join(dir, 'run/libvirt/qemu/run/ns_vm.pid'), `${qemu}\n`);
    await writeFile(path.join(dir, 'run/libvirt/stale.pid'), '999999\n');
    await writeFile(path.join(dir, 'run/libvirt/self.pid'), `${process.pid}`);
    expect((await findPidFiles(dir)).map((p) => p.pid).sort()).toEqual([qemu, 999999, process.pid].sort());
    expect(await leftovers(dir)).toEqual({ qemu: [qemu], daemons: [] });
  });

  it('passes the launcher exit code through; a QEMU left behind gets the grace period, then SIGKILL', async () => {
    const qemu = await fakeQemu(true);
    await mkdir(path.join(dir, 'run'), { recursive: true });
    await writeFile(path.join(dir, 'run/vm.pid'), String(qemu));
    const logs: string[] = [];
    const t0 = Date.now();
    const code = await runMonitor({
      command: [process.execPath, '-e', 'setTimeout(() => process.exit(7), 50)'],
      libvirtBaseDir: dir,
      gracePeriodSeconds: 1,
      log: (_l, msg, f) => logs.push(`${msg} ${f?.reason ?? ''}`),
    });
    expect(code).toBe(7);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1000);
    await new Promise((r) => setTimeout(r, 200));
    expect(alive(qemu)).toBe(false);
    expect(logs.join('\n')).toMatch(/LauncherFailed/);
    expect(logs.join('\n')).toMatch(/QemuLeftBehind/);
    expect(logs.join('\n')).toMatch(/GracePeriodExpired/);
  });

  it('a launcher that exits 0 with nothing left: exit 0 without waiting for the grace period', async () => {
    // a grace period far beyond the test's timeout: waiting for it would fail the test
    const code = await runMonitor({
      command: [process.execPath, '-e', ''],
      libvirtBaseDir: dir,
      gracePeriodSeconds: 3600,
    });
    expect(code).toBe(0);
  });

  it('a launcher that cannot be started: exit 127', async () => {
    expect(
      await runMonitor({ command: ['/nonexistent/launcher'], libvirtBaseDir: dir, gracePeriodSeconds: 1 }),
    ).toBe(127);
  });
});
