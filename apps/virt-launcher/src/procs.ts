// Which leftover processes the launcher may kill. Pid files under the libvirt dir are written by libvirtd,
// which runs as QEMU's user: the guest side can write them, so a pid read there is killed only when the
// process is verifiably of this run: its parent is this launcher, its libvirtd, or the reaper of the
// launcher's tree (the monitor: a child subreaper, or PID 1 of the Pod / PID namespace), it started no
// earlier than the launcher, and its command is QEMU, libvirtd or virtlogd.
import { readFile, readdir } from 'node:fs/promises';
import path from 'node:path';

export interface ProcInfo {
  ppid: number;
  /** start time in clock ticks after boot (/proc/<pid>/stat field 22) */
  start: number;
  cmd: string;
}

export async function procInfo(pid: number): Promise<ProcInfo | undefined> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // comm (field 2) may hold spaces and parens: the fields after it follow the last ')'
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (f[0] === 'Z') return undefined; // a zombie is gone already
    const cmd = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0').join(' ');
    return { ppid: Number(f[1]), start: Number(f[19]), cmd };
  } catch {
    return undefined;
  }
}

/** pid files under dir (recursively): QEMU's <domain>.pid, libvirtd.pid, virtlogd.pid. */
export async function findPidFiles(dir: string): Promise<Array<{ file: string; pid: number }>> {
  const out: Array<{ file: string; pid: number }> = [];
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true, recursive: true });
  } catch {
    return out;
  }
  for (const e of entries) {
    if (!e.isFile() || !e.name.endsWith('.pid')) continue;
    const text = await readFile(path.join(e.parentPath, e.name), 'utf8').catch(() => '');
    const pid = Number(text.trim());
    if (Number.isInteger(pid) && pid > 1) out.push({ file: path.join(e.parentPath, e.name), pid });
  }
  return out;
}

export interface Leftovers {
  /** QEMU first, then the daemons: verifiably of this run */
  qemu: number[];
  daemons: number[];
  /** named in a pid file but not verifiably ours: never killed */
  refused: Array<{ pid: number; file: string; why: string }>;
}

/**
 * Live processes the launcher left, from the pid files under libvirtBaseDir, checked as above.
 * `parents`: the pids a process of this run may have as parent.
 */
export async function ownedLeftovers(
  libvirtBaseDir: string,
  parents: number[],
  notBefore: number,
): Promise<Leftovers> {
  const out: Leftovers = { qemu: [], daemons: [], refused: [] };
  for (const { pid, file } of await findPidFiles(libvirtBaseDir)) {
    const p = await procInfo(pid);
    if (!p) continue;
    const isQemu = /qemu-system|\/qemu-kvm/.test(p.cmd);
    const isDaemon = /libvirtd|virtlogd/.test(p.cmd);
    const why = !parents.includes(p.ppid)
      ? `its parent ${p.ppid} is not of this run`
      : p.start < notBefore
        ? 'it started before the launcher'
        : !isQemu && !isDaemon
          ? 'it is not QEMU, libvirtd or virtlogd'
          : undefined;
    if (why) out.refused.push({ pid, file, why });
    else (isQemu ? out.qemu : out.daemons).push(pid);
  }
  return out;
}

let selfStart: number | undefined;
/** This process's start time (clock ticks after boot). */
export async function ownStart(): Promise<number> {
  selfStart ??= (await procInfo(process.pid))?.start ?? 0;
  return selfStart;
}
