// Helpers of the launcher e2e suites: the test guest, launcher processes, serial console logs.
import { setTimeout as sleep } from 'node:timers/promises';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { chmod, mkdtemp, readFile, readdir, readlink, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setVirtualMachineInstanceDefaults, type VirtualMachineInstance } from '@kubevirt-ts/api';
import { CmdClient, launcherSocketPath } from '@kubevirt-ts/cmd-protocol';
import { LAUNCHER_GID, LAUNCHER_UID, type PodLayout } from '@kubevirt-ts/converter';
import { stageLocalImages } from '@kubevirt-ts/disks';
import { createLayout } from '@kubevirt-ts/virt-launcher';

export const REPO = path.resolve(fileURLToPath(new URL('../../..', import.meta.url)));
export const LAUNCHER_MAIN = path.join(REPO, 'apps/virt-launcher/dist/main.js');
export const CACHE =
  process.env.KVTS_CACHE ??
  path.join(process.env.XDG_CACHE_HOME ?? path.join(process.env.HOME ?? '/root', '.cache'), 'kubevirt-ts');
export const GUEST_DIR = path.join(CACHE, 'guest');
export const GUEST_IMAGE = 'kubevirt-ts/test-guest:latest';
export const READY = 'KUBEVIRT-TS-GUEST-READY';

/** Fails the suite early and clearly when the test guest is not built. */
export function requireGuest(): void {
  for (const f of ['vmlinuz', 'initramfs.img']) {
    if (!existsSync(path.join(GUEST_DIR, f))) {
      throw new Error(`test guest missing: ${path.join(GUEST_DIR, f)} (run bash tools/guest/build.sh)`);
    }
  }
}

/** A short temp dir (libvirt's unix socket paths under it must stay short). */
export async function shortTmp(): Promise<string> {
  const d = await mkdtemp('/tmp/kv-');
  await chmod(d, 0o755); // QEMU runs as uid 107 and must get through
  return d;
}

/**
 * A fresh {@link shortTmp} dir for each test of the calling `describe` block, removed after the test:
 * call it in the block, then `dir()` in a test.
 */
export function tmpDirPerTest(): () => string {
  let dir: string | undefined;
  beforeEach(async () => {
    dir = await shortTmp();
  });
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });
  return () => {
    if (!dir) throw new Error('tmpDirPerTest: no temp dir outside a test');
    return dir;
  };
}

/** The tiny guest VMI, defaulted as a cluster would. */
export function tinyVmi(
  name: string,
  opts: { poweroff?: boolean; uid?: string; grace?: number } = {},
): VirtualMachineInstance {
  const vmi = {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name, namespace: 'e2e', uid: opts.uid ?? `uid-${name}` },
    spec: {
      terminationGracePeriodSeconds: opts.grace ?? 30,
      domain: {
        resources: { requests: { memory: '128Mi' } },
        firmware: {
          kernelBoot: {
            kernelArgs: `console=ttyS0 quiet${opts.poweroff ? ' kvts.poweroff' : ''}`,
            container: { image: GUEST_IMAGE, kernelPath: '/vmlinuz', initrdPath: '/initramfs.img' },
          },
        },
        devices: {
          autoattachGraphicsDevice: false,
          autoattachMemBalloon: false,
          autoattachPodInterface: false,
          disks: [],
        },
      },
      networks: [],
      volumes: [],
    },
  };
  return setVirtualMachineInstanceDefaults(vmi as unknown as VirtualMachineInstance);
}

export async function writeVmiFile(dir: string, vmi: unknown): Promise<string> {
  const f = path.join(dir, 'vmi.json');
  await writeFile(f, JSON.stringify(vmi, null, 2));
  return f;
}

export interface Proc {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** The node flags of the launcher's shebang (`#!/usr/bin/env -S node FLAGS`): run it as shipped, without relying on the exec bit. */
export function launcherNodeFlags(): string[] {
  const first = readFileSync(LAUNCHER_MAIN, 'utf8').split('\n', 1)[0]!;
  const m = /^#!\/usr\/bin\/env -S node(.*)$/.exec(first);
  return m ? m[1]!.trim().split(/\s+/).filter(Boolean) : [];
}

/** The standalone launcher's flags for the test guest: the VMI file, the guest's image, the console on
 * stdout (unless `console: false`), emulation (TCG), `work` as its work dir; `extra` flags after them. */
export function standaloneArgs(
  file: string,
  work: string,
  extra: string[] = [],
  opts: { console?: boolean } = {},
): string[] {
  return [
    'standalone',
    '--vmi',
    file,
    '--image',
    `${GUEST_IMAGE}=${GUEST_DIR}`,
    ...(opts.console === false ? [] : ['--console']),
    '--allow-emulation',
    '--work-dir',
    work,
    ...extra,
  ];
}

/**
 * Writes `vmi` into `dir` and starts the standalone launcher on it ({@link standaloneArgs}) with `<dir>/w` as
 * its work dir; the process and that work dir.
 */
export async function spawnStandalone(
  dir: string,
  vmi: unknown,
  extra: string[] = [],
  opts: { console?: boolean; processGroup?: boolean } = {},
): Promise<Proc & { file: string; work: string }> {
  const file = await writeVmiFile(dir, vmi);
  const work = path.join(dir, 'w');
  return { ...startLauncher(standaloneArgs(file, work, extra, opts), {}, opts.processGroup), file, work };
}

/**
 * `processGroup`: start it in a process group of its own, as a shell does for a foreground job.
 * `wrap`: a command that execs the launcher (e.g. `ip netns exec NAME`: the launcher in that netns).
 */
export function startLauncher(
  args: string[],
  env: NodeJS.ProcessEnv = {},
  processGroup = false,
  wrap: string[] = [],
): Proc {
  const argv = [...wrap, process.execPath, ...launcherNodeFlags(), LAUNCHER_MAIN, ...args];
  const child = spawn(argv[0]!, argv.slice(1), {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
    detached: processGroup,
  });
  let out = '';
  let err = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, stdout: () => out, stderr: () => err, exited };
}

export async function waitFor<T>(
  what: string,
  fn: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs = 90_000,
  everyMs = 100,
): Promise<T> {
  const start = Date.now();
  const deadline = start + timeoutMs;
  let noted = false;
  for (;;) {
    const v = await fn();
    if (v) {
      if (noted) noteProgress({ event: 'waited', what, ms: Date.now() - start });
      return v;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    if (!noted && Date.now() - start >= LONG_WAIT_MS) {
      noted = true;
      noteProgress({ event: 'waiting', what, ms: Date.now() - start, timeoutMs });
    }
    await sleep(everyMs);
  }
}

const LONG_WAIT_MS = 60_000;
/**
 * A wait longer than a minute, in $JEST_JSON_DIR/progress.jsonl through the reporter's own writer, next to its test
 * starts and ends: when tools/test.sh stops a phase at its time bound, tools/summarize-tests.js names what the
 * running test waited for.
 */
const noteProgress = (
  createRequire(import.meta.url)(path.join(REPO, 'tools/jest-count-reporter.cjs')) as {
    progress: (rec: Record<string, unknown>) => void;
  }
).progress;

export async function readText(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch {
    return '';
  }
}

/** The number of the guest's last heartbeat in serial console text (0: none yet). */
export const lastBeat = (t: string): number =>
  Math.max(0, ...[...t.matchAll(/KUBEVIRT-TS-GUEST-HEARTBEAT (\d+)/g)].map((m) => Number(m[1])));

/**
 * Waits until the guest's last heartbeat in the serial log `file` is `beat` or later. On a timeout the error says how
 * far the log got and how it ends.
 */
export async function waitForBeat(
  file: string,
  where: string,
  beat: number,
  timeoutMs: number,
): Promise<void> {
  try {
    await waitFor(`heartbeats on ${where}`, async () => lastBeat(await readText(file)) >= beat, timeoutMs);
  } catch (e) {
    const t = await readText(file);
    throw new Error(
      `${(e as Error).message} (heartbeat ${beat}; ${file}: ${t.length} bytes, last heartbeat ${lastBeat(t)}, ` +
        `ends with ${JSON.stringify(t.slice(-400))})`,
    );
  }
}

/** Waits for the guest's ready line in the serial log `file` (up to `readyMs`), then for its second heartbeat. */
export async function guestBeating(
  file: string,
  where: string,
  readyMs: number,
  beatsMs: number,
): Promise<void> {
  await waitFor(`guest ready on ${where}`, async () => (await readText(file)).includes(READY), readyMs);
  await waitForBeat(file, where, 2, beatsMs);
}

export function heartbeats(text: string): number {
  return (text.match(/KUBEVIRT-TS-GUEST-HEARTBEAT/g) ?? []).length;
}

/**
 * A launcher "Pod" root as kubelet would leave it: the test guest's kernel boot files (and container
 * disks) of `vmi` staged under `root`, owned by the launcher's user. Returns the root's layout.
 */
export async function stageTestGuest(
  vmi: VirtualMachineInstance,
  root: string,
  /** more image references (containerDisk images) -> local file or folder, as standalone's --image */
  images: ReadonlyMap<string, string> = new Map(),
): Promise<PodLayout> {
  const layout = createLayout(root);
  await stageLocalImages(vmi, new Map([[GUEST_IMAGE, GUEST_DIR], ...images]), layout, {
    owner: { uid: LAUNCHER_UID, gid: LAUNCHER_GID },
  });
  return layout;
}

/** The in-Pod launcher's flags for `vmi` with its Pod root and kubevirt share dir. */
export function launcherPodFlags(
  vmi: VirtualMachineInstance,
  root: string,
  share: string,
  opts: { grace?: number; qemuTimeout?: string; logLevel?: string } = {},
): string[] {
  return [
    ...['--name', vmi.metadata.name!, '--namespace', vmi.metadata.namespace!, '--uid', vmi.metadata.uid!],
    ...['--root', root, '--kubevirt-share-dir', share, '--allow-emulation'],
    ...(opts.grace !== undefined ? ['--grace-period-seconds', String(opts.grace)] : []),
    ...['--qemu-timeout', opts.qemuTimeout ?? '120s'],
    ...(opts.logLevel ? ['--log-level', opts.logLevel] : []),
  ];
}

/**
 * Waits until the launcher's cmd socket under `share` is there (it is ready) or the launcher exited
 * (then throws with its stderr), and connects to it.
 */
export async function connectLauncher(
  share: string,
  launcher: { exitCode: () => number | null; stderr: () => string },
  timeoutMs = 60_000,
): Promise<CmdClient> {
  const sock = launcherSocketPath(path.join(share, 'sockets'));
  await waitFor('launcher-sock', () => existsSync(sock) || launcher.exitCode() !== null, timeoutMs);
  if (launcher.exitCode() !== null)
    throw new Error(`launcher exited ${launcher.exitCode()}: ${launcher.stderr()}`);
  return CmdClient.connect(sock, { timeoutMs: 120_000 });
}

/** SIGKILLs what a test run left: every process whose command line mentions `needle` (its root dir). */
export async function killMentioning(needle: string): Promise<void> {
  for (const p of await processesMentioning(needle)) {
    try {
      process.kill(p.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
}

/** pids of live processes whose command line mentions `needle` (e.g. a test's root dir). */
export async function processesMentioning(needle: string): Promise<Array<{ pid: number; cmd: string }>> {
  const out: Array<{ pid: number; cmd: string }> = [];
  for (const e of await readdir('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    const cmd = (await readText(`/proc/${e}/cmdline`)).split('\0').join(' ');
    if (cmd.includes(needle) && Number(e) !== process.pid) out.push({ pid: Number(e), cmd });
  }
  return out;
}

/** pids of every process in the mount namespace of `pid` (none when it is gone). */
export async function processesInMountNs(pid: number): Promise<number[]> {
  let ns: string;
  try {
    ns = await readlink(`/proc/${pid}/ns/mnt`);
  } catch {
    return [];
  }
  const out: number[] = [];
  for (const e of await readdir('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      if ((await readlink(`/proc/${e}/ns/mnt`)) === ns) out.push(Number(e));
    } catch {
      /* gone */
    }
  }
  return out;
}

/** QEMU pid of a domain run by the session libvirtd whose base dir is `libvirtBase` (libvirt's <domain>.pid). */
export async function qemuPid(libvirtBase: string, domainName: string): Promise<number | undefined> {
  const pid = Number(
    (await readText(path.join(libvirtBase, 'run/libvirt/qemu/run', `${domainName}.pid`))).trim(),
  );
  if (!(pid > 1)) return undefined;
  const cmd = await readText(`/proc/${pid}/cmdline`);
  return cmd.includes('qemu-system') ? pid : undefined;
}

/** Every live descendant of pid (children first), from /proc/<pid>/task/<tid>/children. */
export function descendants(pid: number): number[] {
  const out: number[] = [];
  const walk = (p: number) => {
    let tasks: string[];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      return;
    }
    for (const t of tasks) {
      let kids: number[] = [];
      try {
        kids = readFileSync(`/proc/${p}/task/${t}/children`, 'utf8')
          .trim()
          .split(/\s+/)
          .filter(Boolean)
          .map(Number);
      } catch {
        /* gone */
      }
      for (const k of kids) {
        out.push(k);
        walk(k);
      }
    }
  };
  walk(pid);
  return out;
}

/** The launcher (the Node process running main.js) under a standalone monitor, and its --work-dir. */
export function standaloneLauncher(monitorPid: number): { pid: number; work: string } {
  for (const pid of descendants(monitorPid)) {
    let args: string[];
    try {
      args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    } catch {
      continue;
    }
    if (args[0] === process.execPath && args.includes(LAUNCHER_MAIN))
      return { pid, work: args[args.indexOf('--work-dir') + 1]! };
  }
  throw new Error(`no launcher under the monitor ${monitorPid}`);
}
