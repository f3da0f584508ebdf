/**
 * The launcher Pods' seccomp profile, installed on the node by virt-handler (upstream: virt-handler installs
 * `kubevirt/kubevirt.json` under kubelet's seccomp dir when the KubevirtSeccompProfile feature gate is on).
 *
 * Base: the container tools' maintained default profile (Debian's golang-github-containers-common,
 * /usr/share/containers/seccomp.json, the profile podman and buildah apply). Unlike containerd's RuntimeDefault it
 * lets an unprivileged process create a user namespace (unshare, mount and pivot_root inside it), which passt needs
 * for its sandbox when it runs as the launcher's user; everything else it refuses stays refused. Added to it:
 * userfaultfd, as upstream's profile does (post-copy migration).
 *
 * A Pod names it as `seccompProfile: {type: Localhost, localhostProfile: kubevirt-ts/kubevirt.json}`
 * (@kubevirt-ts/renderer's `launcherSeccompProfile`); kubelet refuses to start a Pod whose Localhost profile file is
 * missing, so the handler installs it before it marks the node schedulable.
 */
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/** the profile's name under kubelet's seccomp dir, as Pods name it (localhostProfile) */
export const SECCOMP_PROFILE_NAME = 'kubevirt-ts/kubevirt.json';
/**
 * upstream's name for its launcher profile (virt-handler writes `<kubelet>/seccomp/kubevirt/kubevirt.json` with the
 * KubevirtSeccompProfile feature gate, Beta, on by default): a KubeVirt CR written for upstream names it in
 * `seccompConfiguration.virtualMachineInstanceProfile.customProfile.localhostProfile` (upstream's own e2e
 * configuration does), and kubelet refuses a launcher Pod whose profile file is missing, so the handler writes the
 * same profile under this name too
 */
export const UPSTREAM_SECCOMP_PROFILE_NAME = 'kubevirt/kubevirt.json';
/** Debian's golang-github-containers-common: the containers tools' default profile */
export const DEFAULT_SECCOMP_BASE = '/usr/share/containers/seccomp.json';
/** syscalls the launcher needs beyond the base profile (upstream's addition: post-copy migration) */
export const SECCOMP_EXTRA_SYSCALLS = ['userfaultfd'];

interface SyscallRule {
  names: string[];
  action: string;
  errnoRet?: number;
  args?: unknown[];
  includes?: { arches?: string[]; caps?: string[]; minKernel?: string };
  excludes?: { arches?: string[]; caps?: string[] };
}

/** The node a profile is resolved for: Go's name of its architecture, the launcher's capabilities, its kernel. */
export interface SeccompTarget {
  /** Go's architecture name, as the base profile's `includes.arches` spells it (default: this process's) */
  arch?: string;
  /** capabilities the launcher's processes hold (default none: rules that need one are left out) */
  caps?: readonly string[];
  /** the node's kernel release (default os.release()) */
  kernel?: string;
}

const GO_ARCH: Record<string, string> = { x64: 'amd64', arm64: 'arm64', ppc64: 'ppc64le', s390x: 's390x' };
const SCMP_ARCH: Record<string, string> = {
  amd64: 'SCMP_ARCH_X86_64',
  arm64: 'SCMP_ARCH_AARCH64',
  ppc64le: 'SCMP_ARCH_PPC64LE',
  s390x: 'SCMP_ARCH_S390X',
};

const kernelAtLeast = (release: string, min: string): boolean => {
  const [a = 0, b = 0] = release.split(/[.-]/).map(Number);
  const [c = 0, d = 0] = min.split('.').map(Number);
  return a > c || (a === c && b >= d);
};

/**
 * The launcher profile, in the format container runtimes read a Localhost profile in (the OCI runtime spec's
 * `linux.seccomp`: containerd unmarshals the file as it is), from a base profile in the containers tools' format
 * (`archMap`, rules conditional on `includes`/`excludes` of architecture, capability and kernel). The conditions are
 * resolved as those tools resolve them for a container, for `target`: a rule is kept when the architecture is among
 * its `includes.arches`, every capability of `includes.caps` is held, the kernel is at least `includes.minKernel`,
 * and neither the architecture nor a held capability is among its `excludes`. Each syscall of `extra` is taken out
 * of every rule naming it and allowed by a rule of its own. Throws, naming the field, when the base is not such a
 * profile.
 */
export function launcherSeccompProfile(
  baseJson: string,
  target: SeccompTarget = {},
  extra: readonly string[] = SECCOMP_EXTRA_SYSCALLS,
): Record<string, unknown> {
  let base: unknown;
  try {
    base = JSON.parse(baseJson);
  } catch (e) {
    throw new Error(`not JSON: ${(e as Error).message}`);
  }
  if (!base || typeof base !== 'object' || Array.isArray(base)) throw new Error('not a JSON object');
  const p = base as Record<string, unknown>;
  if (typeof p.defaultAction !== 'string' || !p.defaultAction.startsWith('SCMP_ACT_'))
    throw new Error(`defaultAction: must be an SCMP_ACT_* action, got ${JSON.stringify(p.defaultAction)}`);
  if (!Array.isArray(p.syscalls)) throw new Error('syscalls: must be a list');
  const arch = target.arch ?? GO_ARCH[process.arch] ?? process.arch;
  const caps = target.caps ?? [];
  const kernel = target.kernel ?? os.release();
  const out: Record<string, unknown> = { defaultAction: p.defaultAction };
  if (typeof p.defaultErrnoRet === 'number') out.defaultErrnoRet = p.defaultErrnoRet;
  // the architecture and its sub-architectures (x86_64: also i386 and x32 syscalls are filtered, not refused)
  const scmp = SCMP_ARCH[arch];
  const archMap = Array.isArray(p.archMap)
    ? (p.archMap as { architecture?: string; subArchitectures?: string[] }[])
    : [];
  const entry = archMap.find((a) => a.architecture === scmp);
  if (entry) out.architectures = [entry.architecture, ...(entry.subArchitectures ?? [])];
  else if (Array.isArray(p.architectures)) out.architectures = p.architectures;
  const rules: Record<string, unknown>[] = [];
  p.syscalls.forEach((r: unknown, i) => {
    const rule = r as Partial<SyscallRule> | null;
    if (!rule || typeof rule !== 'object' || !Array.isArray(rule.names) || typeof rule.action !== 'string')
      throw new Error(`syscalls[${i}]: must have names (a list) and action (a string)`);
    const inc = rule.includes ?? {};
    const exc = rule.excludes ?? {};
    if (inc.arches?.length && !inc.arches.includes(arch)) return;
    if (inc.caps?.length && !inc.caps.every((c) => caps.includes(c))) return;
    if (inc.minKernel && !kernelAtLeast(kernel, inc.minKernel)) return;
    if (exc.arches?.includes(arch)) return;
    if (exc.caps?.some((c) => caps.includes(c))) return;
    const names = rule.names.filter((n) => !extra.includes(n));
    if (names.length === 0) return;
    rules.push({
      names,
      action: rule.action,
      ...(typeof rule.errnoRet === 'number' ? { errnoRet: rule.errnoRet } : {}),
      ...(rule.args?.length ? { args: rule.args } : {}),
    });
  });
  if (extra.length) rules.push({ names: [...extra], action: 'SCMP_ACT_ALLOW' });
  out.syscalls = rules;
  return out;
}

/**
 * Writes the launcher profile to `<seccompDir>/kubevirt-ts/kubevirt.json` and, the same profile, to upstream's
 * `<seccompDir>/kubevirt/kubevirt.json` (seccompDir: kubelet's seccomp dir, e.g. /var/lib/kubelet/seccomp; `names`
 * to choose others) from the base profile file, resolved for this node and a launcher without capabilities (its one
 * capability, NET_BIND_SERVICE, gates no rule); each atomically (a temporary file renamed over it), and not at all
 * when the file already holds it. Returns the first path, whether any file was written, and every path. Errors name
 * the file.
 */
export async function installSeccompProfile(
  seccompDir: string,
  baseFile: string = DEFAULT_SECCOMP_BASE,
  names: readonly string[] = [SECCOMP_PROFILE_NAME, UPSTREAM_SECCOMP_PROFILE_NAME],
): Promise<{ path: string; written: boolean; paths: string[] }> {
  let baseJson: string;
  try {
    baseJson = await readFile(baseFile, 'utf8');
  } catch (e) {
    throw new Error(`seccomp base profile ${baseFile}: ${(e as Error).message}`);
  }
  let profile: Record<string, unknown>;
  try {
    profile = launcherSeccompProfile(baseJson);
  } catch (e) {
    throw new Error(`seccomp base profile ${baseFile}: ${(e as Error).message}`);
  }
  if (names.length === 0) throw new Error('seccomp profile: no file name to install the profile under');
  const text = `${JSON.stringify(profile, null, 2)}\n`;
  const paths = names.map((n) => path.join(seccompDir, n));
  let written = false;
  for (const file of paths) {
    const current = await readFile(file, 'utf8').catch(() => undefined);
    if (current === text) continue;
    const tmp = `${file}.${process.pid}.tmp`;
    try {
      await mkdir(path.dirname(file), { recursive: true, mode: 0o755 });
      await writeFile(tmp, text, { mode: 0o644 });
      await rename(tmp, file);
    } catch (e) {
      await rm(tmp, { force: true });
      throw new Error(`seccomp profile ${file}: ${(e as Error).message}`);
    }
    written = true;
  }
  return { path: paths[0]!, written, paths };
}
