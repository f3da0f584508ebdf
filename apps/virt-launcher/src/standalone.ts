// `virt-launcher standalone`: runs one VMI (or a VM's template) on this host with no cluster, through
// the same path as in a Pod: cmd server -> DomainManager -> converter -> libvirt -> QEMU. It plays
// kubelet (a pod-like root dir with the mapped images) and a minimal virt-handler (a NotifyServer
// printing domain events, a CmdClient sending SyncVirtualMachine).
import { createReadStream } from 'node:fs';
import { chmod, mkdir, rm, stat } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { LAUNCHER_GID, LAUNCHER_UID } from '@kubevirt-ts/converter';
import { ExitCode, LauncherError } from './errors.js';
import type { StandaloneFlags } from './flags.js';
import type { Launcher, LauncherResult } from './launcher.js';
import { createLogger } from '@kubevirt-ts/log';
import { PrepareError, stageLocalImages, type ImageInfo } from '@kubevirt-ts/disks';
import { startPrivateDaemonEarly } from './early.js';
import { createLayout } from './layout.js';
import { loadVmi, makeWorkDir } from './standalone-monitor.js';
import { traceMark, traceToLog } from './start-trace.js';

// the wrapper's part and the environment between the two processes live in modules of their own (start-up time)
export { loadVmi, makeWorkDir, runStandaloneMonitor } from './standalone-monitor.js';
export {
  STANDALONE_CHILD_ENV,
  STANDALONE_VMI_ENV,
  standaloneChildEnv,
  takeStandaloneVmi,
} from './standalone-env.js';

export interface StandaloneIO {
  /** progress lines (human readable) */
  progress: (line: string) => void;
  /** where --console writes the serial console */
  console: NodeJS.WritableStream;
  /** with --console: keyboard input forwarded to the serial console (a terminal's stdin) */
  input?: NodeJS.ReadableStream;
}

/** The uid:gid the private libvirtd runs as when the launcher is root (upstream: qemu, 107). */
export const QEMU_USER = { uid: LAUNCHER_UID, gid: LAUNCHER_GID };

/** Follows a growing file (the serial console log) and writes what is appended. */
export function tailFile(
  file: string,
  out: NodeJS.WritableStream,
  onLine?: (line: string) => void,
): { stop(): Promise<void> } {
  let offset = 0;
  let stopped = false;
  let buf = '';
  let busy: Promise<void> = Promise.resolve();
  const read = async () => {
    let size: number;
    try {
      size = (await stat(file)).size;
    } catch {
      return;
    }
    if (size < offset) offset = 0; // rotated by the launcher (copy and truncate): follow from the start
    if (size <= offset) return;
    await new Promise<void>((resolve) => {
      const s = createReadStream(file, { start: offset, end: size - 1 });
      s.on('data', (chunk: Buffer | string) => {
        const b = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
        out.write(b);
        if (onLine) {
          buf += b.toString('utf8');
          let i: number;
          while ((i = buf.indexOf('\n')) >= 0) {
            onLine(buf.slice(0, i).replace(/\r$/, ''));
            buf = buf.slice(i + 1);
          }
        }
      });
      s.on('close', () => resolve());
      s.on('error', () => resolve());
    });
    offset = size;
  };
  const timer = setInterval(() => {
    if (stopped) return;
    busy = busy.then(read);
  }, 50);
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await busy;
      await read();
    },
  };
}

/** QEMU runs as an unprivileged user: the work dir and every dir above it must let it through. */
async function checkTraversable(dir: string, uid: number): Promise<void> {
  for (let d = dir; ; d = path.dirname(d)) {
    const st = await stat(d);
    const ok = st.uid === uid ? (st.mode & 0o100) !== 0 : (st.mode & 0o001) !== 0 || (st.mode & 0o010) !== 0;
    if (!ok) {
      throw new LauncherError(
        `--work-dir: ${d} is not accessible to uid ${uid} (QEMU's user); use a work dir under /tmp or chmod o+x ${d}`,
        ExitCode.USAGE,
        'dirs',
      );
    }
    if (d === path.dirname(d)) return;
  }
}

export interface StandaloneHandle {
  launcher: Launcher;
  vmi: VirtualMachineInstance;
  root: string;
  /** resolves with the process exit code */
  done: Promise<number>;
}

/**
 * Starts a standalone launcher for flags.vmiFile. Resolves once the launcher is running; `done`
 * resolves when it ended (after cleanup) with the exit code to use.
 */
export async function startStandalone(
  flags: StandaloneFlags,
  io: StandaloneIO,
  /** the VMI as loadVmi returned it for flags.vmiFile (the monitor process read it); default: read the file */
  loaded?: VirtualMachineInstance,
): Promise<StandaloneHandle> {
  const vmi = loaded ?? (await loadVmi(flags.vmiFile, flags.featureGates));
  const name = vmi.metadata!.name!;
  const namespace = vmi.metadata!.namespace!;
  const uid = vmi.metadata!.uid!;
  io.progress(`vmi: ${namespace}/${name} (uid ${uid}) is valid`);

  const isRoot = process.getuid?.() === 0;
  const libvirtUser =
    flags.libvirtUid !== undefined
      ? { uid: flags.libvirtUid, gid: flags.libvirtGid ?? flags.libvirtUid }
      : isRoot
        ? QEMU_USER
        : undefined;
  const ownRoot = !flags.workDir || flags.removeWorkDir === true;
  // short: libvirt's per-domain unix sockets live under the root and are limited to 107 bytes
  const root = flags.workDir ?? (await makeWorkDir());
  // a dir made here (or by the standalone monitor: removeWorkDir) is opened to QEMU's user; a given
  // --work-dir that exists is never chmod-ed: it must already let QEMU's user through
  if ((await mkdir(root, { recursive: true })) !== undefined) await chmod(root, 0o755);
  if (libvirtUser && isRoot) await checkTraversable(root, libvirtUser.uid);
  const logger = createLogger({
    component: 'virt-launcher',
    level: flags.logLevel,
    identity: { kind: 'VirtualMachineInstance', namespace, name, uid },
  });
  // without --trace-start, the start-up marks go to the JSON log at debug level
  if (!flags.traceStart) traceToLog(logger);
  // sockets dirs are made 0700: keep them out of var/run/kubevirt, which holds the container disks QEMU reads
  const shareDir = path.join(root, 'handler');
  const socketsDir = flags.socketDir ?? path.join(root, 'sockets');
  const libvirtBaseDir = path.join(root, 'lv');
  const capsCacheDir =
    process.env.KVTS_QEMU_CAPS_CACHE ??
    path.join(
      process.env.KVTS_CACHE ??
        path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'kubevirt-ts'),
      'qemu-capabilities',
    );
  let launcherResult: LauncherResult | undefined;
  const cleanup = async () => {
    if (ownRoot && !(flags.keepAfterFailure && launcherResult && launcherResult.exitCode !== 0)) {
      await rm(root, { recursive: true, force: true }).catch(() => undefined);
    }
  };

  // images first: a missing image fails before any daemon starts
  let staged: Record<string, ImageInfo> = {};
  try {
    staged = await stageLocalImages(vmi, flags.images, createLayout(root), {
      owner: libvirtUser,
      onStep: (msg) => io.progress(msg),
    });
  } catch (e) {
    await cleanup();
    if (e instanceof PrepareError) throw new LauncherError(e.message, ExitCode.INVALID_VMI, 'images');
    throw e;
  }
  traceMark('images-staged');

  // libvirtd boots while the launcher's other modules (gRPC, the domain manager) load
  const { daemon, spawned } = startPrivateDaemonEarly({
    baseDir: libvirtBaseDir,
    user: libvirtUser,
    logger,
    capsCacheDir,
  });
  await spawned;
  let modules: [typeof import('./launcher.js'), typeof import('@kubevirt-ts/cmd-protocol')];
  try {
    modules = await Promise.all([import('./launcher.js'), import('@kubevirt-ts/cmd-protocol')]);
  } catch (e) {
    await daemon.then((d) => d.stop()).catch(() => undefined);
    await cleanup();
    throw e;
  }
  const [{ Launcher }, { CmdClient, NotifyServer, launcherSocketPath, notifySocketPath }] = modules;
  traceMark('modules-loaded');
  const launcher = new Launcher({
    name,
    namespace,
    uid,
    gracePeriodSeconds: flags.gracePeriodSeconds ?? vmi.spec?.terminationGracePeriodSeconds ?? 30,
    qemuTimeoutMs: flags.qemuTimeoutMs,
    allowEmulation: flags.allowEmulation,
    root,
    socketsDir,
    notifyDir: shareDir,
    shareDir,
    libvirtBaseDir,
    libvirtUser,
    keepAfterFailure: flags.keepAfterFailure,
    logger,
    // no Pod network namespace here: the launcher's own passt, attached with -netdev stream (libvirt 9.0
    // has no passt backend), or QEMU's slirp with --pod-network slirp
    podNetworkBinding: flags.podNetwork,
    ...(flags.passtBinary !== undefined ? { passtBinary: flags.passtBinary } : {}),
    capsCacheDir,
    daemon,
  });
  launcher.on('stage', (stage: string, msg: string) => io.progress(`${stage}: ${msg}`));

  // the handler side: domain events printed as progress
  let lastState = '';
  const notify = new NotifyServer({
    socketPath: notifySocketPath(shareDir),
    logger,
    onDomainEvent: (ev) => {
      const st = (ev.domain as { status?: { status?: string; reason?: string } } | undefined)?.status;
      const s = `${st?.status ?? '?'} (${st?.reason ?? '?'})`;
      if (s !== lastState) io.progress(`domain: ${s}`);
      lastState = s;
    },
    onK8sEvent: () => undefined,
  });
  await notify.start();
  traceMark('notify-server');

  try {
    await launcher.start();
  } catch (e) {
    const err =
      e instanceof LauncherError ? e : new LauncherError((e as Error).message, ExitCode.FAILURE, 'start');
    await launcher.abort(err);
    await notify.stop(500).catch(() => undefined);
    await cleanup();
    throw err;
  }

  let tail: { stop(): Promise<void> } | undefined;
  let consoleSock: net.Socket | undefined;
  if (flags.console) {
    const log = launcher.paths.serialLogFile(uid);
    tail = tailFile(log, io.console);
  }

  let signalled = false;
  const onSignal = (sig: NodeJS.Signals) => {
    // Ctrl-C reaches both the monitor and this process, and the monitor forwards it: act once
    if (launcher.listenerCount('ended') === 0 || signalled) return;
    signalled = true;
    io.progress(`${sig}: shutting the guest down (ACPI, up to ${launcher.config.gracePeriodSeconds}s)`);
    void launcher.terminate(sig);
  };
  // SIGHUP (the terminal went away) is a shutdown request like Ctrl-C
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  process.on('SIGHUP', onSignal);

  const done = (async () => {
    const result = await launcher.ended();
    launcherResult = result;
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    process.off('SIGHUP', onSignal);
    await tail?.stop();
    if (consoleSock) {
      io.input?.unpipe(consoleSock);
      io.input?.pause();
      consoleSock.destroy();
    }
    await notify.stop(500).catch(() => undefined);
    io.progress(`done: ${result.message} (exit ${result.exitCode})`);
    await cleanup();
    return result.exitCode;
  })();
  launcher.on('ended', () => undefined);

  // SyncVirtualMachine through the cmd socket, as virt-handler would
  const client = await CmdClient.connect(launcherSocketPath(socketsDir), {
    timeoutMs: flags.qemuTimeoutMs + 30_000,
  });
  try {
    traceMark('sync-sent');
    await client.syncVMI(vmi, standaloneVmOptions(staged));
    io.progress('sync: domain defined and started');
  } catch (e) {
    io.progress(`sync failed: ${(e as Error).message}`);
    void launcher.fail(ExitCode.FAILURE, 'SyncFailed', `SyncVirtualMachine: ${(e as Error).message}`);
  } finally {
    client.close();
  }
  // keyboard -> serial console (line by line: the terminal stays in cooked mode, so Ctrl-C still shuts down)
  if (flags.console && io.input && !launcherResult) {
    const sock = net.connect(launcher.paths.serialSocket(uid));
    sock.on('error', (e) => io.progress(`console input unavailable: ${e.message}`));
    sock.on('data', () => undefined); // output comes from the log file
    io.input.pipe(sock);
    consoleSock = sock;
  }
  return { launcher, vmi, root, done };
}

/** CLI entry of `virt-launcher standalone`: returns the exit code. */
export async function runStandalone(
  flags: StandaloneFlags,
  loaded?: VirtualMachineInstance,
): Promise<number> {
  const io: StandaloneIO = {
    progress: (line) => process.stderr.write(`[virt-launcher] ${line}\n`),
    console: process.stdout,
    input: process.stdin.isTTY ? process.stdin : undefined,
  };
  try {
    const h = await startStandalone(flags, io, loaded);
    return await h.done;
  } catch (e) {
    const err = e instanceof LauncherError ? e : new LauncherError((e as Error).message);
    process.stderr.write(`virt-launcher standalone: ${err.message}\n`);
    return err.exitCode;
  }
}

/**
 * The VirtualMachineOptions standalone mode sends with SyncVirtualMachine, as virt-handler would:
 * the default SMBIOS of a KubeVirt cluster config and the disksInfo of the staged container disks.
 */
export function standaloneVmOptions(found: Record<string, ImageInfo>): {
  VirtualMachineSMBios: { manufacturer: string; product: string; family: string };
  DisksInfo: Record<string, { format: string; virtualSize: number; backingFile: string }>;
} {
  return {
    VirtualMachineSMBios: { manufacturer: 'KubeVirt', product: 'None', family: 'KubeVirt' },
    DisksInfo: Object.fromEntries(
      Object.entries(found).map(([vol, i]) => [
        vol,
        { format: i.format, virtualSize: i.virtualSize, backingFile: i.backingFile ?? '' },
      ]),
    ),
  };
}
