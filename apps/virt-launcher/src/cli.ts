#!/usr/bin/env -S node --max-semi-space-size=1 --lite-mode
// The V8 flags keep the launcher's own memory small: it does little CPU work, so no optimizing
// compiler (lite mode) and a small young generation suffice. Run it as an executable to get them.
// virt-launcher entry point:
//   virt-launcher [in-Pod flags]                the launcher in a Pod, driven by virt-handler
//   virt-launcher monitor [in-Pod flags]        the wrapper (virt-launcher-monitor) around the above: the native
//                                               monitor (node-libvirt's build/virt-launcher-monitor) replaces this process
//   virt-launcher standalone --vmi FILE ...     one VMI on this host, no cluster
import { realpathSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ExitCode, LauncherError } from './errors.js';
import { parseLauncherFlags, parseStandaloneFlags } from './flags.js';
import { traceMark, traceProcess, traceToLog, traceToStderr } from './start-trace.js';
import { STANDALONE_CHILD_ENV } from './standalone-env.js';
// Everything else is imported by the command that needs it, when it needs it (start-up time: the wrapper
// that becomes the native monitor loads almost nothing, and the launcher starts its libvirtd before it
// loads gRPC and the domain manager; README "Start-up time").

const USAGE = `usage:
  virt-launcher --name N --namespace NS --uid UID [--grace-period-seconds 30] [--qemu-timeout 5m]
                [--allow-emulation] [--kubevirt-share-dir DIR] [--ephemeral-disk-dir DIR]
                [--container-disk-dir DIR] [--hook-sidecars 0] [--keep-after-failure]
                [--log-level info] [--root DIR] [--libvirt-user UID[:GID]]
                [--less-pvc-space-toleration 10] [--minimum-reserve-pvc-bytes 131072]
  virt-launcher monitor <the same flags>
  virt-launcher standalone --vmi FILE.yaml [--image REF=PATH]... [--console] [--allow-emulation]
                [--socket-dir DIR] [--work-dir DIR] [--grace-period-seconds N] [--qemu-timeout 5m]
                [--log-level warn] [--keep-after-failure] [--pod-network passt|slirp] [--passt PATH]
`;

async function runInPod(argv: string[]): Promise<number> {
  const flags = parseLauncherFlags(argv);
  traceProcess('launcher');
  if (flags.traceStart) traceToStderr();
  traceMark('main');
  const { createLogger } = await import('@kubevirt-ts/log');
  const logger = createLogger({
    component: 'virt-launcher',
    level: flags.logLevel,
    identity: {
      kind: 'VirtualMachineInstance',
      namespace: flags.namespace,
      name: flags.name,
      uid: flags.uid,
    },
  });
  if (!flags.traceStart) traceToLog(logger);
  const { podConfig } = await import('./pod-config.js');
  const config = podConfig(flags);
  // libvirtd boots while the rest of the launcher's modules load
  const { startPrivateDaemonEarly } = await import('./early.js');
  const { daemon, spawned } = startPrivateDaemonEarly({
    baseDir: config.libvirtBaseDir,
    user: config.libvirtUser,
    logger,
    capsCacheDir: config.capsCacheDir,
  });
  await spawned;
  const { Launcher } = await import('./launcher.js');
  traceMark('modules-loaded');
  const launcher = new Launcher({ ...config, logger, daemon });
  const onSignal = (sig: NodeJS.Signals) => void launcher.terminate(sig);
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    await launcher.start();
  } catch (e) {
    const err = e instanceof LauncherError ? e : new LauncherError((e as Error).message);
    logger.error(err.message, { stage: err.stage, reason: `${err.stage ?? 'start'}Failed` });
    await launcher.abort(err);
    return err.exitCode;
  }
  const res = await launcher.ended();
  return res.exitCode;
}

/** This program as the monitor runs it: the same V8 flags as the monitor got from the shebang. */
function selfCommand(): string[] {
  return [process.execPath, ...process.execArgv, fileURLToPath(import.meta.url)];
}

/** `standalone`: the monitor, or (STANDALONE_CHILD_ENV set) the launcher it runs. */
async function runStandaloneCmd(argv: string[]): Promise<number> {
  const flags = parseStandaloneFlags(argv);
  const child = process.env[STANDALONE_CHILD_ENV];
  traceProcess(child === undefined ? 'wrapper' : 'launcher');
  if (flags.traceStart) traceToStderr();
  traceMark('main');
  if (child === undefined) {
    const { runStandaloneMonitor } = await import('./standalone-monitor.js');
    return runStandaloneMonitor(flags, argv, selfCommand());
  }
  delete process.env[STANDALONE_CHILD_ENV]; // not for libvirtd/QEMU
  if (child === 'owned') flags.removeWorkDir = true;
  const { runStandalone } = await import('./standalone.js');
  const { takeStandaloneVmi } = await import('./standalone-env.js');
  // the VMI the monitor process read and validated (none when too large: the file is read again)
  return runStandalone(flags, takeStandaloneVmi());
}

/** `monitor`: checks the flags, then becomes the native monitor running the launcher with them. */
async function runMonitorCmd(argv: string[]): Promise<never> {
  const flags = parseLauncherFlags(argv);
  traceProcess('wrapper');
  if (flags.traceStart) traceToStderr();
  traceMark('main');
  // only the monitor's part of node-libvirt: no addon, no converter
  const { execNativeMonitor } = await import('@kubevirt-ts/node-libvirt/native-monitor');
  traceMark('exec-monitor');
  try {
    return execNativeMonitor({
      command: [...selfCommand(), ...argv],
      gracePeriodSeconds: flags.gracePeriodSeconds,
    });
  } catch (e) {
    throw new LauncherError((e as Error).message);
  }
}

/**
 * A broken stdout/stderr (the reader of a pipe went away: EPIPE) must never kill the launcher or the
 * monitor, or QEMU would outlive them: write errors are dropped, the run goes on (JSON logs and progress
 * are lost from then on, nothing else).
 */
function tolerateBrokenOutput(): void {
  for (const s of [process.stdout, process.stderr]) s.on('error', () => undefined);
}

export async function main(argv: string[]): Promise<number> {
  tolerateBrokenOutput();
  try {
    if (argv[0] === '-h' || argv[0] === '--help' || argv[0] === 'help') {
      process.stdout.write(USAGE);
      return 0;
    }
    if (argv[0] === 'standalone') return await runStandaloneCmd(argv.slice(1));
    if (argv[0] === 'monitor') return await runMonitorCmd(argv.slice(1));
    return await runInPod(argv);
  } catch (e) {
    const err = e instanceof LauncherError ? e : new LauncherError((e as Error).stack ?? String(e));
    process.stderr.write(`virt-launcher: ${err.message}\n`);
    if (err.exitCode === ExitCode.USAGE) process.stderr.write(USAGE);
    return err.exitCode;
  }
}

// run when executed (also through the node_modules/.bin symlink), not when imported
if (process.argv[1] && realpathSync(path.resolve(process.argv[1])) === fileURLToPath(import.meta.url)) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (e: unknown) => {
      process.stderr.write(`virt-launcher: ${String(e)}\n`);
      process.exit(1);
    },
  );
}
