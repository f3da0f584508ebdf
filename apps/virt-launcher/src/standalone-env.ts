// The environment between the standalone wrapper (which becomes the native monitor) and the launcher it runs;
// a module of its own, loaded by both before anything heavy.
import type { VirtualMachineInstance } from '@kubevirt-ts/api';

/**
 * Set in the environment of the launcher a standalone monitor runs: 'owned' (the monitor made the
 * work dir, the launcher removes it at its end too) or 'given' (the user's --work-dir, kept).
 */
export const STANDALONE_CHILD_ENV = 'KVTS_STANDALONE_CHILD';
/**
 * Set by the standalone monitor process for the launcher it runs: the VMI it read, validated and
 * defaulted, as JSON, so the launcher neither parses nor validates the file again (the YAML parser alone
 * is about 3 MiB of the launcher's RSS) and both use the same VMI (uid included). Unset when the JSON is
 * larger than STANDALONE_VMI_ENV_MAX (the kernel limits one environment string to 128 KiB): the launcher
 * then reads the file itself.
 */
export const STANDALONE_VMI_ENV = 'KVTS_STANDALONE_VMI';
export const STANDALONE_VMI_ENV_MAX = 64 * 1024;

/** The environment the standalone monitor process gives the launcher it runs (STANDALONE_CHILD_ENV, STANDALONE_VMI_ENV). */
export function standaloneChildEnv(vmi: VirtualMachineInstance, ownWorkDir: boolean): Record<string, string> {
  const json = JSON.stringify(vmi);
  return {
    [STANDALONE_CHILD_ENV]: ownWorkDir ? 'owned' : 'given',
    ...(Buffer.byteLength(json) <= STANDALONE_VMI_ENV_MAX ? { [STANDALONE_VMI_ENV]: json } : {}),
  };
}

/**
 * In the launcher the standalone monitor runs: the VMI it was given (undefined when none: read the file),
 * removing the variable from `env` (libvirtd and QEMU do not get it).
 */
export function takeStandaloneVmi(env: NodeJS.ProcessEnv = process.env): VirtualMachineInstance | undefined {
  const json = env[STANDALONE_VMI_ENV];
  delete env[STANDALONE_VMI_ENV];
  return json ? (JSON.parse(json) as VirtualMachineInstance) : undefined;
}
