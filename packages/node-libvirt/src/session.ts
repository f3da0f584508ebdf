// A private libvirtd in session mode (what virt-launcher runs inside its Pod): its own XDG dirs under
// baseDir, no TCP listener, optionally as another uid/gid and with its own virtlogd.
import { setTimeout as sleep } from 'node:timers/promises';
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { existsSync } from 'node:fs';
import { once } from 'node:events';
import { chown, mkdir, writeFile, stat, chmod, rm, symlink } from 'node:fs/promises';
import path from 'node:path';
import { MAX_SOCKET_PATH_BYTES } from '@kubevirt-ts/api';
import { Connection } from './connection.js';

export interface SessionLogger {
  debug?(msg: string, meta?: Record<string, unknown>): void;
  info(msg: string, meta?: Record<string, unknown>): void;
  warn(msg: string, meta?: Record<string, unknown>): void;
  error(msg: string, meta?: Record<string, unknown>): void;
}

export type ConfValue = string | number | boolean | string[];

export interface SessionLibvirtdOptions {
  /** Directory holding everything (config, runtime, cache, home). Keep it short: unix socket paths under it are limited to 107 bytes. */
  baseDir: string;
  /** Run libvirtd (and so QEMU) as this uid/gid (needs root); a passwd entry must exist for the uid. */
  uid?: number;
  gid?: number;
  /** Also start a private virtlogd and let QEMU log through it (qemu.conf stdio_handler="logd"); default: QEMU writes its log file directly. */
  virtlogd?: boolean;
  logger?: SessionLogger;
  /** Extra libvirtd.conf settings, e.g. { host_uuid: '...' } (written as libvirt conf syntax). */
  libvirtdConf?: Record<string, ConfValue>;
  /** Extra qemu.conf settings (session qemu driver reads $XDG_CONFIG_HOME/libvirt/qemu.conf). */
  qemuConf?: Record<string, ConfValue>;
  /** Extra environment for the daemons (wins over the defaults, e.g. `MALLOC_ARENA_MAX`). */
  env?: Record<string, string>;
  /**
   * libvirt connection drivers libvirtd loads (modules `libvirt_driver_<name>.so`). Default `['qemu']`:
   * a VM's daemon needs nothing else, and leaving out nodedev (which enumerates the host's devices
   * through udev), network, storage, secret, interface and nwfilter saves memory and start-up work.
   * `'all'` loads every installed module (libvirtd's own behaviour).
   */
  drivers?: string[] | 'all';
  /** Where the connection-driver modules are installed (default: found among the usual Debian/Fedora dirs). */
  driverDir?: string;
  /** How long to wait for the socket to answer (default 30 s). */
  timeoutMs?: number;
  /** libvirtd binary (default /usr/sbin/libvirtd). */
  libvirtdPath?: string;
  /** virtlogd binary (default /usr/sbin/virtlogd). */
  virtlogdPath?: string;
  /**
   * Stop the daemons (SIGTERM) when this process dies without calling stop(), via
   * `setpriv --pdeathsig TERM` (util-linux). Default true when /usr/bin/setpriv exists.
   */
  dieWithParent?: boolean;
  /** Called once libvirtd is spawned (before it answers), e.g. to start other work while it boots. */
  onSpawn?: (pid: number) => void;
}

export interface SessionLibvirtd {
  /** qemu+unix:///session?socket=... */
  uri: string;
  socketPath: string;
  pid: number;
  virtlogdPid?: number;
  /** The XDG dirs handed to libvirtd. */
  dirs: { config: string; runtime: string; cache: string; home: string };
  /** Kills QEMU guests it started (via the socket), then libvirtd and virtlogd, and reaps them. */
  stop(): Promise<void>;
}

/** Formats one libvirt .conf value (strings quoted and escaped, lists as ["a", "b"]). */
export function confValue(v: ConfValue): string {
  if (typeof v === 'number') {
    if (!Number.isInteger(v)) throw new TypeError(`conf value ${v}: only integers are allowed`);
    return String(v);
  }
  if (typeof v === 'boolean') return v ? '1' : '0';
  if (Array.isArray(v)) return `[${v.map((s) => confValue(s)).join(', ')}]`;
  if (/[\n\r\0]/.test(v)) throw new TypeError(`conf value ${JSON.stringify(v)}: newlines are not allowed`);
  return `"${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

export function confText(settings: Record<string, ConfValue>): string {
  let out = '# written by @kubevirt-ts/node-libvirt startSessionLibvirtd\n';
  for (const [k, v] of Object.entries(settings)) {
    if (!/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(k))
      throw new TypeError(`conf key ${JSON.stringify(k)}: not a valid name`);
    out += `${k} = ${confValue(v)}\n`;
  }
  return out;
}

/**
 * Memory defaults for a per-VM daemon (measured with the test guest running; see README): few idle
 * worker threads (libvirtd starts more on demand, up to max_workers = 20, as before), and one malloc
 * arena per daemon instead of one per thread.
 */
export const SESSION_LIBVIRTD_CONF: Record<string, ConfValue> = { min_workers: 1, prio_workers: 1 };
export const SESSION_DAEMON_ENV: Record<string, string> = { MALLOC_ARENA_MAX: '1' };

const MULTIARCH: Record<string, string> = { x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu' };

/** The directory holding libvirt's connection-driver modules (libvirt_driver_qemu.so, ...), if found. */
export function findDriverDir(): string | undefined {
  const candidates = [
    ...(MULTIARCH[process.arch] ? [`/usr/lib/${MULTIARCH[process.arch]}/libvirt/connection-driver`] : []),
    '/usr/lib64/libvirt/connection-driver',
    '/usr/lib/libvirt/connection-driver',
  ];
  return candidates.find((d) => existsSync(path.join(d, 'libvirt_driver_qemu.so')));
}

/**
 * A directory with links to just the modules named (libvirtd reads modules from $LIBVIRT_DRIVER_DIR
 * instead of its built-in dir; a module it does not find there is skipped, not an error).
 */
async function linkDrivers(dir: string, from: string, drivers: string[]): Promise<void> {
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  for (const name of drivers) {
    if (!/^[a-z0-9_]+$/.test(name))
      throw new Error(`startSessionLibvirtd: drivers: invalid name ${JSON.stringify(name)}`);
    const file = `libvirt_driver_${name}.so`;
    if (!existsSync(path.join(from, file)))
      throw new Error(`startSessionLibvirtd: drivers: ${file} not found in ${from}`);
    await symlink(path.join(from, file), path.join(dir, file));
  }
}

// libvirtd's log line format: "<timestamp>: <thread>: <level> : <message>"
const LIBVIRT_LINE = /^\S+ \S+: \d+: (debug|info|warning|error) : (.*)$/;
// Messages every session libvirtd prints in a container or CI machine, harmless for the qemu driver.
const KNOWN_NOISE = [
  /dnsmasq/,
  /D-Bus|system bus|session bus/,
  /udevGetDMIData/,
  /\/dev\/kvm/,
  /GLib-GObject-CRITICAL|g_object_(un)?ref/,
];

function forward(child: ChildProcess, name: string, logger: SessionLogger | undefined, tail: string[]): void {
  const onData = (buf: Buffer) => {
    for (const line of buf.toString('utf8').split('\n')) {
      if (!line.trim()) continue;
      tail.push(line);
      if (tail.length > 40) tail.shift();
      if (!logger) continue;
      const meta = { component: name, pid: child.pid };
      const m = LIBVIRT_LINE.exec(line);
      const level = m?.[1];
      const msg = m?.[2] ?? line;
      if (KNOWN_NOISE.some((re) => re.test(line)) || level === 'debug') logger.debug?.(msg, meta);
      else if (level === 'info') logger.info(msg, meta);
      else logger.warn(msg, meta);
    }
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
}

async function terminate(child: ChildProcess, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  child.kill('SIGCONT'); // a stopped daemon would not act on SIGTERM
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  try {
    await exited;
  } finally {
    clearTimeout(timer);
  }
}

const SETPRIV = '/usr/bin/setpriv';

// setpriv execs the daemon in place (same pid) after setting the parent-death signal.
function spawnDaemon(
  file: string,
  args: string[],
  options: SpawnOptions,
  dieWithParent: boolean,
): ChildProcess {
  if (!dieWithParent) return spawn(file, args, options);
  return spawn(SETPRIV, ['--pdeathsig', 'TERM', '--', file, ...args], options);
}

/**
 * Starts /usr/sbin/libvirtd in session mode with XDG_CONFIG_HOME, XDG_RUNTIME_DIR, XDG_CACHE_HOME and
 * HOME under baseDir, and waits until its socket answers a libvirt call.
 */
export async function startSessionLibvirtd(opts: SessionLibvirtdOptions): Promise<SessionLibvirtd> {
  const base = path.resolve(opts.baseDir);
  const dirs = {
    config: path.join(base, 'config'),
    runtime: path.join(base, 'run'),
    cache: path.join(base, 'cache'),
    home: path.join(base, 'home'),
  };
  const socketPath = path.join(dirs.runtime, 'libvirt', 'libvirt-sock');
  if (Buffer.byteLength(socketPath) > MAX_SOCKET_PATH_BYTES)
    throw new Error(
      `baseDir ${base}: socket path ${socketPath} is longer than ${MAX_SOCKET_PATH_BYTES} bytes`,
    );
  const asUser = opts.uid !== undefined || opts.gid !== undefined;
  if (asUser && process.getuid?.() !== 0) throw new Error('startSessionLibvirtd: uid/gid need root');
  if (asUser && opts.uid === 0)
    throw new Error('startSessionLibvirtd: uid 0 would run libvirtd in system mode');
  if (!asUser && process.getuid?.() === 0)
    throw new Error(
      'startSessionLibvirtd: as root, libvirtd runs in system mode; pass an unprivileged uid/gid',
    );

  await mkdir(base, { recursive: true });
  for (const d of Object.values(dirs)) await mkdir(d, { recursive: true });
  await mkdir(path.join(dirs.config, 'libvirt'), { recursive: true });
  await chmod(dirs.runtime, 0o700);

  const libvirtdConf = path.join(dirs.config, 'libvirt', 'libvirtd.conf');
  await writeFile(libvirtdConf, confText({ ...SESSION_LIBVIRTD_CONF, ...opts.libvirtdConf }));
  const driverEnv: Record<string, string> = {};
  const drivers = opts.drivers ?? ['qemu'];
  if (drivers !== 'all') {
    const from = opts.driverDir ?? findDriverDir();
    if (from) {
      const dir = path.join(base, 'drivers');
      await linkDrivers(dir, from, drivers);
      driverEnv.LIBVIRT_DRIVER_DIR = dir;
    } else {
      opts.logger?.warn('libvirt connection-driver directory not found: libvirtd loads all its drivers', {
        component: 'libvirtd',
      });
    }
  }
  await writeFile(
    path.join(dirs.config, 'libvirt', 'qemu.conf'),
    confText({ stdio_handler: opts.virtlogd ? 'logd' : 'file', ...opts.qemuConf }),
  );
  if (asUser) {
    const uid = opts.uid ?? process.getuid!();
    const gid = opts.gid ?? process.getgid!();
    for (const p of [
      base,
      ...Object.values(dirs),
      path.join(dirs.config, 'libvirt'),
      libvirtdConf,
      path.join(dirs.config, 'libvirt', 'qemu.conf'),
    ]) {
      await chown(p, uid, gid);
    }
  }

  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
    HOME: dirs.home,
    XDG_CONFIG_HOME: dirs.config,
    XDG_RUNTIME_DIR: dirs.runtime,
    XDG_CACHE_HOME: dirs.cache,
    LANG: 'C',
    ...SESSION_DAEMON_ENV,
    ...driverEnv,
    ...opts.env,
  };
  const spawnOpts = {
    env,
    cwd: dirs.home,
    stdio: ['ignore', 'pipe', 'pipe'] as ['ignore', 'pipe', 'pipe'],
    // A session of their own: a Ctrl-C on the starting process's terminal (SIGINT to the whole
    // foreground process group) must reach only that process, which then shuts the guest down
    // through libvirt; the daemons (and QEMU under them) stop when it says so, or die with it.
    detached: true,
    ...(asUser ? { uid: opts.uid ?? process.getuid!(), gid: opts.gid ?? process.getgid!() } : {}),
  };
  const logger = opts.logger;
  const dieWithParent = opts.dieWithParent ?? existsSync(SETPRIV);
  const children: ChildProcess[] = [];
  const stopAll = async () => {
    for (const c of children.reverse()) await terminate(c, 5000);
  };

  let virtlogd: ChildProcess | undefined;
  const vtail: string[] = [];
  if (opts.virtlogd) {
    virtlogd = spawnDaemon(opts.virtlogdPath ?? '/usr/sbin/virtlogd', [], spawnOpts, dieWithParent);
    children.push(virtlogd);
    forward(virtlogd, 'virtlogd', logger, vtail);
    virtlogd.on('error', (e) => logger?.error(`virtlogd: ${e.message}`, { component: 'virtlogd' }));
    const vsock = path.join(dirs.runtime, 'libvirt', 'virtlogd-sock');
    const deadline = Date.now() + (opts.timeoutMs ?? 30000);
    while (!(await exists(vsock))) {
      if (virtlogd.exitCode !== null || virtlogd.signalCode !== null) {
        await stopAll();
        throw new Error(`virtlogd exited (${virtlogd.exitCode ?? virtlogd.signalCode}): ${vtail.join('\n')}`);
      }
      if (Date.now() > deadline) {
        await stopAll();
        throw new Error(`virtlogd: socket ${vsock} did not appear in time`);
      }
      await sleep(20);
    }
  }

  const libvirtd = spawnDaemon(
    opts.libvirtdPath ?? '/usr/sbin/libvirtd',
    ['-f', libvirtdConf],
    spawnOpts,
    dieWithParent,
  );
  children.push(libvirtd);
  const tail: string[] = [];
  forward(libvirtd, 'libvirtd', logger, tail);
  let spawnError: Error | undefined;
  libvirtd.on('error', (e) => (spawnError = e));
  if (libvirtd.pid !== undefined) opts.onSpawn?.(libvirtd.pid);

  const uri = `qemu+unix:///session?socket=${socketPath}`;
  const deadline = Date.now() + (opts.timeoutMs ?? 30000);
  for (;;) {
    if (spawnError || libvirtd.exitCode !== null || libvirtd.signalCode !== null) {
      await stopAll();
      throw new Error(
        `libvirtd exited before answering (${spawnError?.message ?? libvirtd.exitCode ?? libvirtd.signalCode}):\n${tail.join('\n')}`,
      );
    }
    if (await exists(socketPath)) {
      try {
        const c = await Connection.open(uri);
        try {
          await c.getLibVersion();
        } finally {
          await c.close();
        }
        break;
      } catch {
        // not answering yet
      }
    }
    if (Date.now() > deadline) {
      await stopAll();
      throw new Error(
        `libvirtd: ${socketPath} did not answer within ${opts.timeoutMs ?? 30000} ms:\n${tail.join('\n')}`,
      );
    }
    await sleep(25);
  }
  logger?.info('session libvirtd ready', { component: 'libvirtd', pid: libvirtd.pid, socket: socketPath });

  let stopping: Promise<void> | undefined;
  return {
    uri,
    socketPath,
    pid: libvirtd.pid!,
    virtlogdPid: virtlogd?.pid,
    dirs,
    stop() {
      stopping ??= (async () => {
        // bounded: a hung daemon must not keep stop() from killing it
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('timed out after 10 s')), 10_000);
        });
        await Promise.race([destroyAll(uri), timeout])
          .catch((e: Error) =>
            logger?.warn(`could not destroy remaining domains: ${e.message}`, { component: 'libvirtd' }),
          )
          .finally(() => clearTimeout(timer));
        await stopAll();
      })();
      return stopping;
    },
  };
}

// QEMU processes outlive libvirtd by design; stop() ends the guests this daemon started.
async function destroyAll(uri: string): Promise<void> {
  const c = await Connection.open(uri);
  try {
    for (const d of await c.listAllDomains(1 /* ACTIVE */)) {
      await d.destroy().catch(() => undefined);
    }
  } finally {
    await c.close();
  }
}

async function exists(p: string): Promise<boolean> {
  try {
    await stat(p);
    return true;
  } catch {
    return false;
  }
}
