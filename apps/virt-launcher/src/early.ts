// The private libvirtd's start, in a module of its own that loads only node-libvirt: the launcher starts
// its libvirtd before it loads the rest of its modules (gRPC, libvirt-manager, network, disks), so the daemon
// boots (another process, another core) while Node compiles them. See README "Start-up time".
import type { Logger } from '@kubevirt-ts/log';
import { traceMark } from './start-trace.js';

export interface SessionDaemon {
  uri: string;
  pid: number;
  stop(): Promise<void>;
}

/** What startPrivateDaemon needs (the LauncherConfig's fields of the same meaning). */
export interface PrivateDaemonOptions {
  baseDir: string;
  user?: { uid: number; gid: number };
  logger: Logger;
  /** host-wide cache of QEMU capability probes (node-libvirt's seedQemuCaps) */
  capsCacheDir?: string;
  /** called once libvirtd is spawned (it boots from then on) */
  onSpawn?: () => void;
}

/**
 * Seeds the capability cache, starts the session libvirtd (as `user`, no virtlogd) and resolves when it
 * answers. The native binding is loaded here, on first use: importing the launcher's modules (tests, tools)
 * does not load libvirt into the process.
 */
export async function startPrivateDaemon(opts: PrivateDaemonOptions): Promise<SessionDaemon> {
  const { startSessionLibvirtd, seedQemuCaps } = await import('@kubevirt-ts/node-libvirt');
  if (opts.capsCacheDir)
    await seedQemuCaps(opts.baseDir, opts.capsCacheDir, opts.user).catch(() => undefined);
  traceMark('libvirtd-spawn');
  const s = await startSessionLibvirtd({
    baseDir: opts.baseDir,
    uid: opts.user?.uid,
    gid: opts.user?.gid,
    // no virtlogd (about 18 MiB RSS per VM): QEMU writes its log and the serial console log itself
    // (qemu.conf stdio_handler = "file"); the launcher caps the serial log (serial-log.ts)
    virtlogd: false,
    logger: opts.logger,
    onSpawn: opts.onSpawn,
  });
  traceMark('libvirtd-answers');
  return { uri: s.uri, pid: s.pid, stop: () => s.stop() };
}

/**
 * startPrivateDaemon for a caller that loads its other modules meanwhile: `spawned` resolves once libvirtd
 * runs (or the start failed before), so the caller starts its imports only then: the event loop is
 * mostly busy compiling modules during imports, which would delay the daemon's own start-up steps.
 */
export function startPrivateDaemonEarly(opts: PrivateDaemonOptions): {
  daemon: Promise<SessionDaemon>;
  spawned: Promise<void>;
} {
  let onSpawn: () => void = () => undefined;
  const spawned = new Promise<void>((resolve) => (onSpawn = resolve));
  const daemon = startPrivateDaemon({ ...opts, onSpawn });
  daemon.then(onSpawn, onSpawn); // failed before spawning: the launcher's libvirtd stage reports it
  return { daemon, spawned };
}
