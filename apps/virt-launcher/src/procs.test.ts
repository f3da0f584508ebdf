// Which pids from pid files the launcher may kill: real processes, real /proc.
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { findPidFiles, ownedLeftovers, procInfo } from './procs.js';

let dir: string;
const started: number[] = [];
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kvts-procs-'));
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

/** A real child of this process whose command line looks like argv0's (bash exec -a). */
async function proc(argv0: string): Promise<number> {
  const child = spawn('bash', ['-c', `exec -a '${argv0}' sleep 300`], { stdio: 'ignore' });
  started.push(child.pid!);
  for (let i = 0; i < 100 && !(await procInfo(child.pid!))?.cmd.startsWith(argv0); i++)
    await new Promise((r) => setTimeout(r, 20));
  return child.pid!;
}

async function pidFile(rel: string, pid: number | string) {
  const f = path.join(dir, rel);
  await mkdir(path.dirname(f), { recursive: true });
  await writeFile(f, `${pid}\n`);
}

test('procInfo reads parent, start time and command line; undefined for a gone pid', async () => {
  const me = await procInfo(process.pid);
  expect(me?.ppid).toBe(process.ppid);
  expect(me?.start).toBeGreaterThan(0);
  expect(await procInfo(2 ** 22 + 1)).toBeUndefined();
});

test('findPidFiles finds pid files at any depth and skips junk', async () => {
  await pidFile('run/libvirt/qemu/run/d.pid', 1234);
  await pidFile('run/libvirtd.pid', 'junk');
  await pidFile('run/x.pid', 1);
  expect(await findPidFiles(dir)).toEqual([
    { file: path.join(dir, 'run/libvirt/qemu/run/d.pid'), pid: 1234 },
  ]);
});

test('only processes verifiably of this run are offered for killing', async () => {
  const notBefore = (await procInfo(process.pid))!.start;
  const qemu = await proc('/usr/bin/qemu-system-x86_64');
  const daemon = await proc('/usr/sbin/libvirtd');
  const other = await proc('/usr/sbin/sshd');
  await pidFile('qemu/run/vm.pid', qemu);
  await pidFile('libvirtd.pid', daemon);
  await pidFile('evil.pid', other); // a pid file the guest side wrote: not QEMU or a daemon
  await pidFile('init.pid', process.ppid); // jest's parent: started before us, not our child
  const left = await ownedLeftovers(dir, [process.pid], notBefore);
  expect(left.qemu).toEqual([qemu]);
  expect(left.daemons).toEqual([daemon]);
  const why = Object.fromEntries(left.refused.map((r) => [r.pid, r.why]));
  expect(why[other]).toBe('it is not QEMU, libvirtd or virtlogd');
  expect(why[process.ppid]).toMatch(/its parent \d+ is not of this run|started before the launcher/);
  // the same QEMU when this process is not one of the allowed parents: refused
  const strange = await ownedLeftovers(dir, [process.ppid], notBefore);
  expect(strange.qemu).toEqual([]);
  expect(strange.refused.find((r) => r.pid === qemu)?.why).toBe(
    `its parent ${process.pid} is not of this run`,
  );
  // started before the launcher (a far-future launcher start): refused
  const early = await ownedLeftovers(dir, [process.pid], Number.MAX_SAFE_INTEGER);
  expect(early.qemu).toEqual([]);
  expect(early.refused.find((r) => r.pid === qemu)?.why).toBe('it started before the launcher');
});
