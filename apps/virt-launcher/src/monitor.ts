// The wrapper process, like upstream's virt-launcher-monitor: it starts the launcher as its child,
// forwards termination signals to it, and when the launcher ends (cleanly or by crashing) makes sure
// nothing it started is left behind: QEMU gets the rest of its grace period to power off (the guest
// may be shutting down), then is killed; the launcher's libvirtd/virtlogd are stopped.
//
// Reaping: Node cannot waitpid() arbitrary pids, so zombies re-parented to the monitor (when it is
// PID 1 of a container) are not reaped by it. Its own child (the launcher) is reaped by libuv.
import { spawn, type ChildProcess } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';

export interface MonitorOptions {
  /** the launcher command: [file, ...args] */
  command: string[];
  /** dir under which the launcher's libvirtd keeps its pid files (searched for *.pid) */
  libvirtBaseDir: string;
  gracePeriodSeconds: number;
  log?: (level: 'info' | 'warn' | 'error', msg: string, fields?: Record<string, unknown>) => void;
  /** test hook */
  env?: NodeJS.ProcessEnv;
}

const FORWARDED: NodeJS.Signals[] = ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT', 'SIGUSR1'];

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function cmdline(pid: number): Promise<string> {
  try {
    return (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').join(' ');
  } catch {
    return '';
  }
}

/** pid files under dir (recursively): QEMU's <domain>.pid, libvirtd.pid, virtlogd.pid. */
export async function findPidFiles(dir: string): Promise<Array<{ file: string; pid: number }>> {
  const out: Array<{ file: string; pid: number }> = [];
  const walk = async (d: string, depth: number) => {
    if (depth > 8) return;
    let entries;
    try {
      entries = await readdir(d, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) await walk(p, depth + 1);
      else if (e.isFile() && e.name.endsWith('.pid')) {
        const pid = Number((await readFile(p, 'utf8').catch(() => '')).trim());
        if (Number.isInteger(pid) && pid > 1) out.push({ file: p, pid });
      }
    }
  };
  await walk(dir, 0);
  return out;
}

/** Live processes the launcher left: QEMU first, then the daemons. */
export async function leftovers(libvirtBaseDir: string): Promise<{ qemu: number[]; daemons: number[] }> {
  const qemu: number[] = [];
  const daemons: number[] = [];
  for (const { pid } of await findPidFiles(libvirtBaseDir)) {
    if (!alive(pid)) continue;
    const cl = await cmdline(pid);
    if (/qemu-system|\/qemu-kvm/.test(cl)) qemu.push(pid);
    else if (/libvirtd|virtlogd/.test(cl)) daemons.push(pid);
  }
  return { qemu, daemons };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitGone(pids: number[], ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (pids.every((p) => !alive(p))) return true;
    await sleep(100);
  }
  return pids.every((p) => !alive(p));
}

/**
 * Runs the launcher under supervision; resolves with the exit code the monitor should end with
 * (the launcher's, or 1 when it died by a signal other than the one forwarded).
 */
export async function runMonitor(opts: MonitorOptions): Promise<number> {
  const log = opts.log ?? (() => undefined);
  const [file, ...args] = opts.command;
  if (!file) throw new Error('monitor: no launcher command');
  const child: ChildProcess = spawn(file, args, { stdio: 'inherit', env: opts.env ?? process.env });
  let termAt: number | undefined;
  const handlers = new Map<NodeJS.Signals, () => void>();
  for (const sig of FORWARDED) {
    const h = () => {
      if ((sig === 'SIGTERM' || sig === 'SIGINT' || sig === 'SIGHUP') && termAt === undefined)
        termAt = Date.now();
      log('info', `forwarding ${sig} to the launcher`, { pid: child.pid, signal: sig });
      child.kill(sig);
    };
    handlers.set(sig, h);
    process.on(sig, h);
  }
  const result = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('error', (e) => {
      log('error', `cannot start the launcher: ${e.message}`, { reason: 'SpawnFailed' });
      resolve({ code: 127, signal: null });
    });
    child.on('exit', (code, signal) => resolve({ code, signal }));
  });
  for (const [sig, h] of handlers) process.off(sig, h);

  const crashed = result.signal !== null || (result.code !== 0 && result.code !== null);
  log(crashed ? 'warn' : 'info', `launcher exited (${result.signal ?? `code ${result.code}`})`, {
    reason: crashed ? 'LauncherFailed' : 'LauncherExited',
  });

  const left = await leftovers(opts.libvirtBaseDir);
  if (left.qemu.length > 0) {
    // the guest may be powering off: give it the rest of the grace period
    const elapsed = termAt !== undefined ? Date.now() - termAt : 0;
    const remaining = Math.max(0, opts.gracePeriodSeconds * 1000 - elapsed);
    log(
      'warn',
      `QEMU still running after the launcher ended; waiting up to ${Math.round(remaining / 1000)}s`,
      {
        pids: left.qemu,
        reason: 'QemuLeftBehind',
      },
    );
    if (!(await waitGone(left.qemu, remaining))) {
      for (const pid of left.qemu) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          /* gone */
        }
      }
      log('warn', 'killed QEMU after the grace period', { pids: left.qemu, reason: 'GracePeriodExpired' });
      await waitGone(left.qemu, 5000);
    }
  }
  for (const pid of left.daemons) {
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      /* gone */
    }
  }
  if (left.daemons.length > 0 && !(await waitGone(left.daemons, 5000))) {
    for (const pid of left.daemons) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  }
  if (result.signal !== null)
    return result.signal === 'SIGTERM' || result.signal === 'SIGINT' || result.signal === 'SIGHUP' ? 0 : 1;
  return result.code ?? 1;
}
