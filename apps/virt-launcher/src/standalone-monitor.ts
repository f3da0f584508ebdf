// `virt-launcher standalone` before the launcher runs: reads and checks the VMI (an invalid one starts nothing),
// decides the work dir and replaces this process with the native monitor. It loads only the API package and
// the monitor's part of node-libvirt (start-up time: README "Start-up time").
import { randomUUID } from 'node:crypto';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import {
  parseManifests,
  setVirtualMachineInstanceDefaults,
  validateVirtualMachineInstance,
  vmiFromManifest,
  type VirtualMachineInstance,
} from '@kubevirt-ts/api';
import { execNativeMonitor } from '@kubevirt-ts/node-libvirt/native-monitor';
import { ExitCode, LauncherError } from './errors.js';
import type { StandaloneFlags } from './flags.js';
import { standaloneChildEnv } from './standalone-env.js';
import { traceMark } from './start-trace.js';

/** Reads, defaults and validates the VMI of a file; throws a LauncherError listing every field error. */
export async function loadVmi(
  file: string,
  featureGates: readonly string[] = [],
): Promise<VirtualMachineInstance> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    throw new LauncherError(
      `--vmi: cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
      ExitCode.USAGE,
      'vmi',
    );
  }
  let docs: unknown[];
  try {
    docs = parseManifests(text);
  } catch (e) {
    throw new LauncherError(`${file}: ${(e as Error).message}`, ExitCode.INVALID_VMI, 'vmi');
  }
  const first = docs.find((d) => d && typeof d === 'object');
  if (!first)
    throw new LauncherError(
      `${file}: no VirtualMachineInstance or VirtualMachine in the file`,
      ExitCode.INVALID_VMI,
      'vmi',
    );
  let vmi: VirtualMachineInstance;
  try {
    vmi = vmiFromManifest(first) as VirtualMachineInstance;
  } catch (e) {
    throw new LauncherError(`${file}: ${(e as Error).message}`, ExitCode.INVALID_VMI, 'vmi');
  }
  // as a cluster admits it: validated as given and once defaulted (upstream validates after its defaults)
  const defaulted = setVirtualMachineInstanceDefaults(vmi);
  const errors = [
    ...validateVirtualMachineInstance(vmi),
    ...validateVirtualMachineInstance(defaulted),
  ].filter((e, i, all) => all.findIndex((x) => x.path === e.path && x.reason === e.reason) === i);
  // a hostDisk reaches the host's filesystem: only behind the HostDisk gate (--feature-gates HostDisk)
  if (!featureGates.includes('HostDisk'))
    (vmi.spec?.volumes ?? []).forEach((v, i) => {
      if (v.hostDisk)
        errors.push({
          path: `spec.volumes[${i}].hostDisk`,
          reason: 'hostDisk volumes need the HostDisk feature gate, which is off (--feature-gates HostDisk)',
        });
    });
  if (errors.length > 0) {
    throw new LauncherError(
      `${file}: invalid VirtualMachineInstance:\n${errors.map((e) => `  ${e.path}: ${e.reason}`).join('\n')}`,
      ExitCode.INVALID_VMI,
      'vmi',
    );
  }
  defaulted.metadata ??= {};
  defaulted.metadata.namespace ||= 'default';
  defaulted.metadata.uid ||= randomUUID();
  return defaulted;
}

/** A new temp work dir (short: libvirt's per-domain unix sockets live under it, 107 bytes at most), 0755. */
export async function makeWorkDir(): Promise<string> {
  const d = await mkdtemp('/tmp/kv-');
  await chmod(d, 0o755); // QEMU's user must get through
  return d;
}

/**
 * CLI entry of `virt-launcher standalone` (the wrapper): checks the VMI (an invalid one starts nothing),
 * decides the work dir, then replaces this process with the native monitor (`execNativeMonitor`), which runs
 * the launcher (`launcherCommand` + `standalone` + argv, with STANDALONE_CHILD_ENV set), so QEMU and the
 * private daemons are stopped even when the launcher is killed. As root the launcher's tree runs in a PID
 * namespace of its own: the kernel ends it with the monitor. The monitor removes a work dir made here
 * (unless --keep-after-failure and a failure). Returns only on an error, with the exit code.
 */
export async function runStandaloneMonitor(
  flags: StandaloneFlags,
  argv: string[],
  launcherCommand: string[],
): Promise<number> {
  let vmi: VirtualMachineInstance;
  try {
    vmi = await loadVmi(flags.vmiFile, flags.featureGates); // for the grace period; an invalid VMI starts nothing
    traceMark('vmi-validated');
  } catch (e) {
    const err = e instanceof LauncherError ? e : new LauncherError((e as Error).message);
    process.stderr.write(`virt-launcher standalone: ${err.message}\n`);
    return err.exitCode;
  }
  const own = !flags.workDir;
  const root = path.resolve(flags.workDir ?? (await makeWorkDir()));
  traceMark('exec-monitor');
  try {
    return execNativeMonitor(
      {
        command: [...launcherCommand, 'standalone', ...argv, ...(own ? ['--work-dir', root] : [])],
        gracePeriodSeconds: flags.gracePeriodSeconds ?? vmi.spec?.terminationGracePeriodSeconds ?? 30,
        removeDir: own ? root : undefined,
        keepDirOnFailure: flags.keepAfterFailure,
        pidNamespace: process.getuid?.() === 0,
        progress: true,
      },
      { ...process.env, ...standaloneChildEnv(vmi, own) },
    );
  } catch (e) {
    if (own) await rm(root, { recursive: true, force: true }).catch(() => undefined);
    const err = e instanceof LauncherError ? e : new LauncherError((e as Error).message);
    process.stderr.write(`virt-launcher standalone: ${err.message}\n`);
    return err.exitCode;
  }
}
