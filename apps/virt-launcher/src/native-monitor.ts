// The native monitor (native/monitor.c, built to dist/virt-launcher-monitor): the small wrapper around the
// launcher that forwards signals, gives QEMU its grace period, reaps (it is a child subreaper, or PID 1),
// and as root in standalone runs the launcher's tree in a PID namespace of its own. The Node process that
// decides its arguments replaces itself with it (process.execve): same pid, same stdio, no Node left.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { LauncherError } from './errors.js';

/** dist/virt-launcher-monitor, beside this module once built */
export const NATIVE_MONITOR = fileURLToPath(new URL('./virt-launcher-monitor', import.meta.url));

export interface NativeMonitorOptions {
  /** the launcher command: [file, ...args] */
  command: string[];
  gracePeriodSeconds: number;
  /** removed when the run ends (the launcher's tree is gone by then) */
  removeDir?: string;
  /** with removeDir: keep it when the launcher failed */
  keepDirOnFailure?: boolean;
  /** run the launcher's tree in a PID namespace of its own (root only) */
  pidNamespace?: boolean;
  /** warnings as `[virt-launcher] monitor: ...` lines (standalone) instead of JSON */
  progress?: boolean;
}

/** The monitor's argv (without argv[0]). */
export function nativeMonitorArgs(o: NativeMonitorOptions): string[] {
  if (!Number.isInteger(o.gracePeriodSeconds) || o.gracePeriodSeconds < 0)
    throw new LauncherError(`--grace-period-seconds: must be a whole number of seconds >= 0`);
  if (o.command.length === 0) throw new LauncherError('monitor: no launcher command');
  return [
    '--grace-period-seconds',
    String(o.gracePeriodSeconds),
    ...(o.removeDir ? ['--remove-dir', o.removeDir] : []),
    ...(o.removeDir && o.keepDirOnFailure ? ['--keep-dir-on-failure'] : []),
    ...(o.pidNamespace ? ['--pid-namespace'] : []),
    ...(o.progress ? ['--progress'] : []),
    '--',
    ...o.command,
  ];
}

/**
 * Environment defaults of the launcher process (what is already set wins): one glibc malloc arena
 * instead of one per thread that allocates (libuv pool, V8 workers, libvirt's event thread): about
 * 1.4 MiB less RSS at steady state (`npm run bench:launcher`), as libvirtd gets (SESSION_DAEMON_ENV).
 */
export const LAUNCHER_ENV_DEFAULTS: Readonly<Record<string, string>> = { MALLOC_ARENA_MAX: '1' };

/** Replaces this process with the native monitor (never returns); the launcher gets LAUNCHER_ENV_DEFAULTS. */
export function execNativeMonitor(o: NativeMonitorOptions, env: NodeJS.ProcessEnv = process.env): never {
  if (!existsSync(NATIVE_MONITOR))
    throw new LauncherError(`the native monitor is missing: ${NATIVE_MONITOR} (build apps/virt-launcher)`);
  if (!process.execve) throw new LauncherError('this Node.js has no process.execve (Node >= 22.15 needed)');
  return process.execve(NATIVE_MONITOR, [NATIVE_MONITOR, ...nativeMonitorArgs(o)], {
    ...LAUNCHER_ENV_DEFAULTS,
    ...env,
  });
}
