/**
 * Container disks, upstream's way: each containerDisk volume and the kernelBoot container of a VMI run as a
 * sidecar of the launcher Pod (`container-disk --copy-path <dir>/<vmi uid>/<name>`, see @kubevirt-ts/renderer)
 * whose root filesystem holds the files. The handler finds that process, locates its root filesystem in the
 * host's mount table and bind-mounts the files, read-only, into the Pod's `container-disks` emptyDir (on the
 * host: `<podsDir>/<pod uid>/volumes/kubernetes.io~empty-dir/container-disks`), where the launcher expects
 * them: `disk_<volume index>.img`, and `kernel-boot/<base name>` for the kernel and initrd. The mounts are
 * made in the host's mount namespace by the static helper `kvts-hostmount` (kubelet's dir is a shared mount,
 * so they propagate into the Pod), and removed when the launcher is gone.
 */
import { execFile } from 'node:child_process';
import { constants } from 'node:fs';
import { access, lstat, mkdir, open, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import type { Logger } from '@kubevirt-ts/log';
import { EMPTY_DIR } from './launchers.js';

const run = promisify(execFile);

export function podContainerDisksDir(podsDir: string, podUid: string): string {
  return path.join(podsDir, podUid, EMPTY_DIR, 'container-disks');
}

/** One file to mount: from the sidecar `socket`'s root filesystem (`imagePath`) to `target`. */
export interface ContainerDiskFile {
  /** the spec field it comes from, for errors */
  field: string;
  /** the sidecar's --copy-path base name: disk_<i> or kernel-boot */
  socket: string;
  /** absolute path inside the image; undefined: the only file in /disk (upstream's default) */
  imagePath?: string;
  /** path relative to the Pod's container-disks dir */
  target: string;
}

/** What the VMI needs mounted (the renderer's sidecar names, the converter's file names). */
export function containerDiskFiles(vmi: VirtualMachineInstance): ContainerDiskFile[] {
  const out: ContainerDiskFile[] = [];
  (vmi.spec.volumes ?? []).forEach((v, i) => {
    if (v.containerDisk)
      out.push({
        field: `spec.volumes[${i}].containerDisk`,
        socket: `disk_${i}`,
        imagePath: v.containerDisk.path || undefined,
        target: `disk_${i}.img`,
      });
  });
  const kb = vmi.spec.domain.firmware?.kernelBoot?.container;
  if (kb) {
    const field = 'spec.domain.firmware.kernelBoot.container';
    for (const [k, p] of [
      ['kernelPath', kb.kernelPath],
      ['initrdPath', kb.initrdPath],
    ] as const)
      if (p)
        out.push({
          field: `${field}.${k}`,
          socket: 'kernel-boot',
          imagePath: p,
          target: `kernel-boot/${path.posix.basename(p)}`,
        });
  }
  return out;
}

interface MountEntry {
  root: string;
  mountPoint: string;
  fsType: string;
  source: string;
  superOptions: string;
}

/** /proc/<pid>/mountinfo, with the kernel's octal escapes (\040 for a space) undone. */
export function parseMountInfo(text: string): MountEntry[] {
  const unescape = (s: string) =>
    s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
  const out: MountEntry[] = [];
  for (const line of text.split('\n')) {
    if (!line) continue;
    const [left, right] = line.split(' - ');
    if (!left || !right) continue;
    const f = left.split(' ');
    const r = right.split(' ');
    out.push({
      root: unescape(f[3] ?? ''),
      mountPoint: unescape(f[4] ?? ''),
      fsType: r[0] ?? '',
      source: unescape(r[1] ?? ''),
      superOptions: r[2] ?? '',
    });
  }
  return out;
}

export class ContainerDiskError extends Error {}

export interface ContainerDiskOptions {
  /** kubelet's pod dir as the handler sees it */
  podsDir: string;
  /** the same dir in the host's mount namespace (default: podsDir) */
  hostPodsDir?: string;
  /** the kvts-hostmount helper (tools/images/src/hostmount.c) */
  helper: string;
  log: Logger;
  /** /proc of the host's pid namespace (the handler runs with hostPID) */
  procDir?: string;
}

export class ContainerDisks {
  private readonly proc: string;
  constructor(private readonly o: ContainerDiskOptions) {
    this.proc = o.procDir ?? '/proc';
  }

  /**
   * Mounts every container disk file of the VMI into its Pod (idempotent: a mounted target is left as it is).
   * Throws a ContainerDiskError naming the field when a sidecar is not running yet or its image lacks the file.
   */
  async mount(vmi: VirtualMachineInstance, podUid: string): Promise<void> {
    const files = containerDiskFiles(vmi);
    if (files.length === 0) return;
    const uid = vmi.metadata.uid!;
    const dir = podContainerDisksDir(this.o.podsDir, podUid);
    const hostDir = podContainerDisksDir(this.o.hostPodsDir ?? this.o.podsDir, podUid);
    const nsPid = await this.hostNsPid();
    const hostMounts = await this.mountsOf(nsPid);
    const mounted = new Set(hostMounts.map((m) => m.mountPoint));
    const roots = new Map<string, { pid: number; hostRoot: string }>();
    for (const f of files) {
      const target = path.join(dir, f.target);
      const hostTarget = path.join(hostDir, f.target);
      if (mounted.has(hostTarget)) continue;
      let side = roots.get(f.socket);
      if (!side) {
        const pid = await this.sidecarPid(uid, podUid, f.socket);
        if (pid === undefined)
          throw new ContainerDiskError(`${f.field}: its container (${f.socket}) is not running yet`);
        side = { pid, hostRoot: await this.hostRootOf(pid, hostMounts, f) };
        roots.set(f.socket, side);
      }
      const imagePath = f.imagePath ?? (await this.onlyDiskFile(side.pid, f));
      await this.checkImageFile(side.pid, imagePath, f);
      await mkdir(path.dirname(target), { recursive: true, mode: 0o755 });
      // the mount point: an empty file (the helper refuses a symlink put there in its place)
      await (
        await open(target, constants.O_CREAT | constants.O_WRONLY | constants.O_NOFOLLOW, 0o644)
      ).close();
      await this.helper(nsPid, 'bind-ro', path.join(side.hostRoot, imagePath), hostTarget);
      this.o.log.info(`mounted ${f.field} (${imagePath}) read-only at ${hostTarget}`, {
        namespace: vmi.metadata.namespace,
        name: vmi.metadata.name,
        uid,
      });
    }
  }

  /** Unmounts every mount under the Pod's container-disks dir (nothing to do when there is none). */
  async unmount(podUid: string): Promise<void> {
    const dir = podContainerDisksDir(this.o.hostPodsDir ?? this.o.podsDir, podUid) + '/';
    const nsPid = await this.hostNsPid();
    const mounts = (await this.mountsOf(nsPid))
      .map((m) => m.mountPoint)
      .filter((p) => p.startsWith(dir))
      .sort()
      .reverse();
    for (const p of mounts) {
      await this.helper(nsPid, 'umount', p);
      this.o.log.info(`unmounted ${p}`, { podUid });
    }
  }

  /** The uids of the Pods that have container disks mounted (in the host's mount namespace). */
  async mountedPods(): Promise<string[]> {
    const root = (this.o.hostPodsDir ?? this.o.podsDir) + '/';
    const marker = `/${EMPTY_DIR}/container-disks/`;
    const nsPid = await this.hostNsPid();
    const uids = new Set<string>();
    for (const m of await this.mountsOf(nsPid)) {
      if (!m.mountPoint.startsWith(root)) continue;
      const rest = m.mountPoint.slice(root.length);
      const slash = rest.indexOf('/');
      if (slash > 0 && rest.slice(slash).startsWith(marker)) uids.add(rest.slice(0, slash));
    }
    return [...uids];
  }

  /** The mount table of process `pid`'s mount namespace. */
  private async mountsOf(pid: number): Promise<ReturnType<typeof parseMountInfo>> {
    return parseMountInfo(await readFile(path.join(this.proc, String(pid), 'mountinfo'), 'utf8'));
  }

  /** The host's mount namespace: PID 1's, or, where PID 1's namespaces are closed to us (a sandboxed init),
   * our parent's (the container runtime's shim, which runs in the host's mount namespace). */
  private async hostNsPid(): Promise<number> {
    try {
      await (await open(path.join(this.proc, '1/ns/mnt'), 'r')).close();
      return 1;
    } catch {
      return process.ppid;
    }
  }

  /** The sidecar: the process running `container-disk --copy-path <...>/<vmi uid>/<socket>` in this Pod's cgroup. */
  private async sidecarPid(vmiUid: string, podUid: string, socket: string): Promise<number | undefined> {
    const suffix = `/${vmiUid}/${socket}`;
    const podIds = [podUid, podUid.replace(/-/g, '_')]; // cgroupfs and systemd cgroup drivers
    for (const e of await readdir(this.proc)) {
      if (!/^\d+$/.test(e)) continue;
      let argv: string[];
      try {
        argv = (await readFile(path.join(this.proc, e, 'cmdline'), 'utf8')).split('\0');
      } catch {
        continue; // gone meanwhile
      }
      const i = argv.indexOf('--copy-path');
      if (i < 0 || !argv[i + 1]?.endsWith(suffix)) continue;
      const cgroup = await readFile(path.join(this.proc, e, 'cgroup'), 'utf8').catch(() => '');
      if (podIds.some((id) => cgroup.includes(`pod${id}`))) return Number(e);
    }
    return undefined;
  }

  /** Where the sidecar's root filesystem is mounted on the host: its "/" mount, found by its superblock. */
  private async hostRootOf(pid: number, hostMounts: MountEntry[], f: ContainerDiskFile): Promise<string> {
    const own = await this.mountsOf(pid);
    const root = own.filter((m) => m.mountPoint === '/').pop();
    if (!root) throw new ContainerDiskError(`${f.field}: no root mount in /proc/${pid}/mountinfo`);
    const host = hostMounts.find(
      (m) =>
        m.fsType === root.fsType &&
        m.source === root.source &&
        m.superOptions === root.superOptions &&
        m.root === root.root,
    );
    if (!host)
      throw new ContainerDiskError(
        `${f.field}: the root filesystem of its container (${root.fsType} ${root.source}) is not mounted on the host`,
      );
    return host.mountPoint;
  }

  /** upstream's default: the one regular file in the image's /disk */
  private async onlyDiskFile(pid: number, f: ContainerDiskFile): Promise<string> {
    const entries = await readdir(path.join(this.proc, String(pid), 'root/disk')).catch(() => []);
    if (entries.length !== 1)
      throw new ContainerDiskError(
        `${f.field}: the image has ${entries.length} files in /disk (exactly one is needed when path is not set)`,
      );
    return `/disk/${entries[0]}`;
  }

  /** The path exists in the image as a regular file, with no symlink on the way. */
  private async checkImageFile(pid: number, imagePath: string, f: ContainerDiskFile): Promise<void> {
    if (!path.posix.isAbsolute(imagePath) || imagePath.split('/').includes('..'))
      throw new ContainerDiskError(
        `${f.field}: ${JSON.stringify(imagePath)} must be an absolute path without '..'`,
      );
    const rootDir = path.join(this.proc, String(pid), 'root');
    const parts = imagePath.split('/').filter(Boolean);
    for (let i = 1; i <= parts.length; i++) {
      const p = '/' + parts.slice(0, i).join('/');
      const st = await lstat(path.join(rootDir, p)).catch(() => undefined);
      if (!st) throw new ContainerDiskError(`${f.field}: ${p} does not exist in the image`);
      if (st.isSymbolicLink())
        throw new ContainerDiskError(`${f.field}: ${p} is a symlink in the image (refused)`);
      if (i === parts.length && !st.isFile())
        throw new ContainerDiskError(`${f.field}: ${imagePath} is not a regular file in the image`);
    }
  }

  private async helper(nsPid: number, ...args: string[]): Promise<void> {
    try {
      await access(this.o.helper, constants.X_OK);
    } catch {
      throw new ContainerDiskError(`container disks: the mount helper ${this.o.helper} is missing`);
    }
    try {
      await run(this.o.helper, [String(nsPid), ...args], { timeout: 30_000 });
    } catch (err) {
      const e = err as { stderr?: string; message: string };
      throw new ContainerDiskError((e.stderr || e.message).trim());
    }
  }
}
