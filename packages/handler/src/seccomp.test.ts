// The launcher Pods' seccomp profile: resolved from Debian's containers profile (the real file, installed with
// buildah by tools/setup.sh) into the OCI format containerd reads a Localhost profile in, and installed into a temp
// "kubelet seccomp dir". The cluster e2e (e2e/src/cluster/passt.test.ts) runs a launcher Pod under it.
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  DEFAULT_SECCOMP_BASE,
  SECCOMP_PROFILE_NAME,
  UPSTREAM_SECCOMP_PROFILE_NAME,
  installSeccompProfile,
  launcherSeccompProfile,
} from './seccomp.js';

interface Rule {
  names: string[];
  action: string;
  errnoRet?: number;
  args?: unknown[];
}

/** the actions the rules without arguments give a syscall */
const actionsOf = (p: Record<string, unknown>, name: string): string[] =>
  (p.syscalls as Rule[]).filter((r) => r.names.includes(name) && !r.args).map((r) => r.action);

const BASE = JSON.stringify({
  defaultAction: 'SCMP_ACT_ERRNO',
  defaultErrnoRet: 38,
  defaultErrno: 'ENOSYS',
  archMap: [
    { architecture: 'SCMP_ARCH_X86_64', subArchitectures: ['SCMP_ARCH_X86', 'SCMP_ARCH_X32'] },
    { architecture: 'SCMP_ARCH_AARCH64', subArchitectures: ['SCMP_ARCH_ARM'] },
  ],
  syscalls: [
    { names: ['read', 'unshare', 'mount'], action: 'SCMP_ACT_ALLOW' },
    { names: ['arch_prctl'], action: 'SCMP_ACT_ALLOW', includes: { arches: ['amd64', 'x32'] } },
    { names: ['cacheflush'], action: 'SCMP_ACT_ALLOW', includes: { arches: ['arm64'] } },
    { names: ['bpf'], action: 'SCMP_ACT_ALLOW', includes: { caps: ['CAP_SYS_ADMIN'] } },
    {
      names: ['bpf'],
      action: 'SCMP_ACT_ERRNO',
      errnoRet: 1,
      errno: 'EPERM',
      excludes: { caps: ['CAP_SYS_ADMIN'] },
    },
    { names: ['new_thing'], action: 'SCMP_ACT_ALLOW', includes: { minKernel: '6.5' } },
    { names: ['userfaultfd'], action: 'SCMP_ACT_ERRNO', errnoRet: 1 },
    { names: ['userfaultfd', 'write'], action: 'SCMP_ACT_ALLOW', comment: 'shares a rule' },
    {
      names: ['socket'],
      action: 'SCMP_ACT_ERRNO',
      errnoRet: 22,
      args: [{ index: 0, value: 16, op: 'SCMP_CMP_EQ' }],
      excludes: { caps: ['CAP_AUDIT_WRITE'] },
    },
  ],
});

describe('launcherSeccompProfile', () => {
  test('resolves arch, capability and kernel conditions as the container tools do, in OCI form', () => {
    const p = launcherSeccompProfile(BASE, { arch: 'amd64', caps: [], kernel: '6.1.0-56-amd64' });
    expect(p.defaultAction).toBe('SCMP_ACT_ERRNO');
    expect(p.defaultErrnoRet).toBe(38);
    expect(p.architectures).toEqual(['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32']);
    // only fields of the OCI runtime spec's linux.seccomp (containerd unmarshals the file into it)
    expect(Object.keys(p).sort()).toEqual(['architectures', 'defaultAction', 'defaultErrnoRet', 'syscalls']);
    for (const r of p.syscalls as Record<string, unknown>[])
      for (const k of Object.keys(r)) expect(['names', 'action', 'errnoRet', 'args']).toContain(k);
    expect(actionsOf(p, 'unshare')).toEqual(['SCMP_ACT_ALLOW']);
    expect(actionsOf(p, 'arch_prctl')).toEqual(['SCMP_ACT_ALLOW']);
    expect(actionsOf(p, 'cacheflush')).toEqual([]); // arm64 only
    expect(actionsOf(p, 'bpf')).toEqual(['SCMP_ACT_ERRNO']); // no CAP_SYS_ADMIN
    expect(actionsOf(p, 'new_thing')).toEqual([]); // kernel 6.1 < 6.5
    // userfaultfd: out of the refusing rule and the shared one, allowed by one rule of its own
    expect(actionsOf(p, 'userfaultfd')).toEqual(['SCMP_ACT_ALLOW']);
    expect(actionsOf(p, 'write')).toEqual(['SCMP_ACT_ALLOW']);
    const socket = (p.syscalls as Rule[]).find((r) => r.names.includes('socket'))!;
    expect(socket).toEqual({
      names: ['socket'],
      action: 'SCMP_ACT_ERRNO',
      errnoRet: 22,
      args: [{ index: 0, value: 16, op: 'SCMP_CMP_EQ' }],
    });
  });

  test('another target: arm64, CAP_SYS_ADMIN, a newer kernel', () => {
    const p = launcherSeccompProfile(BASE, {
      arch: 'arm64',
      caps: ['CAP_SYS_ADMIN', 'CAP_AUDIT_WRITE'],
      kernel: '6.12.1',
    });
    expect(p.architectures).toEqual(['SCMP_ARCH_AARCH64', 'SCMP_ARCH_ARM']);
    expect(actionsOf(p, 'arch_prctl')).toEqual([]);
    expect(actionsOf(p, 'cacheflush')).toEqual(['SCMP_ACT_ALLOW']);
    expect(actionsOf(p, 'bpf')).toEqual(['SCMP_ACT_ALLOW']);
    expect(actionsOf(p, 'new_thing')).toEqual(['SCMP_ACT_ALLOW']);
    expect((p.syscalls as Rule[]).some((r) => r.names.includes('socket'))).toBe(false);
  });

  test.each([
    ['{', /^not JSON: /],
    ['[]', /^not a JSON object$/],
    ['{"syscalls": []}', /^defaultAction: must be an SCMP_ACT_\* action, got undefined$/],
    ['{"defaultAction": "SCMP_ACT_ERRNO"}', /^syscalls: must be a list$/],
    [
      '{"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [{"names": ["read"], "action": "SCMP_ACT_ALLOW"}, {"names": "write"}]}',
      /^syscalls\[1\]: must have names \(a list\) and action \(a string\)$/,
    ],
  ])('refuses a base that is not a profile: %s', (json, msg) => {
    expect(() => launcherSeccompProfile(json)).toThrow(msg);
  });

  const debian = existsSync(DEFAULT_SECCOMP_BASE) ? test : test.skip;
  debian(
    `Debian's ${DEFAULT_SECCOMP_BASE}: user namespaces allowed, what needs a capability refused`,
    async () => {
      const p = launcherSeccompProfile(await readFile(DEFAULT_SECCOMP_BASE, 'utf8'), {
        arch: 'amd64',
        kernel: '6.1.0',
      });
      expect(p.architectures).toEqual(['SCMP_ARCH_X86_64', 'SCMP_ARCH_X86', 'SCMP_ARCH_X32']);
      // passt's sandbox as a non-root user: a user namespace, then mounts and pivot_root inside it
      for (const s of [
        'unshare',
        'clone',
        'clone3',
        'mount',
        'umount2',
        'pivot_root',
        'userfaultfd',
        'arch_prctl',
      ])
        expect([s, actionsOf(p, s)]).toEqual([s, ['SCMP_ACT_ALLOW']]);
      for (const s of [
        'bpf',
        'perf_event_open',
        'init_module',
        'chroot',
        'open_by_handle_at',
        'settimeofday',
      ])
        expect([s, actionsOf(p, s)]).toEqual([s, ['SCMP_ACT_ERRNO']]);
      expect(actionsOf(p, 'kexec_load')).toEqual(['SCMP_ACT_ERRNO']);
    },
  );
});

describe('installSeccompProfile', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'kvts-seccomp-'));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  test('writes <dir>/kubevirt-ts/kubevirt.json and upstream <dir>/kubevirt/kubevirt.json once, readable by the runtime; again only when one differs', async () => {
    const base = path.join(dir, 'base.json');
    await writeFile(base, BASE);
    const seccompDir = path.join(dir, 'kubelet', 'seccomp');
    const r = await installSeccompProfile(seccompDir, base);
    const upstream = path.join(seccompDir, 'kubevirt', 'kubevirt.json');
    expect(r).toEqual({
      path: path.join(seccompDir, SECCOMP_PROFILE_NAME),
      written: true,
      paths: [path.join(seccompDir, SECCOMP_PROFILE_NAME), upstream],
    });
    const text = await readFile(r.path, 'utf8');
    expect(JSON.parse(text)).toEqual(launcherSeccompProfile(BASE));
    expect((await stat(r.path)).mode & 0o777).toBe(0o644);
    // upstream's name (a KubeVirt CR written for upstream selects kubevirt/kubevirt.json): the same profile
    expect(path.join(seccompDir, UPSTREAM_SECCOMP_PROFILE_NAME)).toBe(upstream);
    expect(await readFile(upstream, 'utf8')).toBe(text);
    expect((await stat(upstream)).mode & 0o777).toBe(0o644);
    expect(await installSeccompProfile(seccompDir, base)).toEqual({
      path: r.path,
      written: false,
      paths: r.paths,
    });
    // only the upstream-named file changed: it alone is rewritten
    await writeFile(upstream, '{}');
    expect((await installSeccompProfile(seccompDir, base)).written).toBe(true);
    expect(await readFile(upstream, 'utf8')).toBe(text);
    // a changed file (an older handler's, or an edit) is replaced; no temporary file is left
    await writeFile(r.path, '{}');
    expect((await installSeccompProfile(seccompDir, base)).written).toBe(true);
    expect(await readFile(r.path, 'utf8')).toBe(text);
    expect(await readdir(path.dirname(r.path))).toEqual(['kubevirt.json']);
  });

  test('a missing or bad base fails naming the file, and writes nothing', async () => {
    const seccompDir = path.join(dir, 'seccomp');
    await expect(installSeccompProfile(seccompDir, path.join(dir, 'nope.json'))).rejects.toThrow(
      `seccomp base profile ${path.join(dir, 'nope.json')}: ENOENT`,
    );
    const bad = path.join(dir, 'bad.json');
    await writeFile(bad, '{"defaultAction": "ALLOW", "syscalls": []}');
    await expect(installSeccompProfile(seccompDir, bad)).rejects.toThrow(
      `seccomp base profile ${bad}: defaultAction: must be an SCMP_ACT_* action, got "ALLOW"`,
    );
    await writeFile(bad, BASE);
    await expect(installSeccompProfile(seccompDir, bad, [])).rejects.toThrow(
      'seccomp profile: no file name to install the profile under',
    );
    expect(existsSync(seccompDir)).toBe(false);
  });

  test('a profile path that cannot be replaced fails naming it and leaves no temporary file', async () => {
    const base = path.join(dir, 'base.json');
    await writeFile(base, BASE);
    const target = path.join(dir, 'seccomp', SECCOMP_PROFILE_NAME);
    await mkdir(target, { recursive: true }); // a directory where the profile goes: rename(2) refuses, even for root
    await expect(installSeccompProfile(path.join(dir, 'seccomp'), base)).rejects.toThrow(
      `seccomp profile ${target}: EISDIR`,
    );
    expect(await readdir(path.dirname(target))).toEqual(['kubevirt.json']);
  });
});
