import { LOG_LEVELS } from '@kubevirt-ts/log';
import { parseDuration, parseLauncherFlags, parseStandaloneFlags } from './flags.js';
import { ExitCode, LauncherError } from './errors.js';
import { podConfig } from './pod-config.js';

const base = ['--name', 'vm1', '--namespace', 'ns1', '--uid', 'u-1'];

function usageError(fn: () => unknown): LauncherError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(LauncherError);
    expect((e as LauncherError).exitCode).toBe(ExitCode.USAGE);
    return e as LauncherError;
  }
  throw new Error('expected a usage error');
}

describe('in-Pod flags', () => {
  it('has upstream defaults', () => {
    const f = parseLauncherFlags(base);
    expect(f).toMatchObject({
      name: 'vm1',
      namespace: 'ns1',
      uid: 'u-1',
      gracePeriodSeconds: 30,
      qemuTimeoutMs: 300_000,
      allowEmulation: false,
      kubevirtShareDir: '/var/run/kubevirt',
      ephemeralDiskDir: '/var/run/kubevirt-ephemeral-disks',
      containerDiskDir: '/var/run/kubevirt/container-disks',
      hookSidecars: 0,
      keepAfterFailure: false,
      logLevel: 'info',
    });
  });
  it('parses every flag, --flag=value and --bool=false forms', () => {
    const f = parseLauncherFlags([
      ...base,
      '--grace-period-seconds=5',
      '--qemu-timeout',
      '1m30s',
      '--allow-emulation',
      '--keep-after-failure=false',
      '--kubevirt-share-dir=/s',
      '--ephemeral-disk-dir',
      '/e',
      '--container-disk-dir=/c',
      '--hook-sidecars=0',
      '--log-level=debug',
      '--libvirt-user=107:108',
      '--root=/r',
    ]);
    expect(f).toMatchObject({
      gracePeriodSeconds: 5,
      qemuTimeoutMs: 90_000,
      allowEmulation: true,
      keepAfterFailure: false,
      kubevirtShareDir: '/s',
      ephemeralDiskDir: '/e',
      containerDiskDir: '/c',
      privateDir: '/r/var/run/kubevirt-private',
      logLevel: 'debug',
      libvirtUid: 107,
      libvirtGid: 108,
    });
  });
  it('--trace-start: off unless given, as a bool flag in both modes', () => {
    expect(parseLauncherFlags(base).traceStart).toBe(false);
    expect(parseLauncherFlags([...base, '--trace-start']).traceStart).toBe(true);
    expect(parseLauncherFlags([...base, '--trace-start=false']).traceStart).toBe(false);
    expect(parseStandaloneFlags(['--vmi', 'v.yaml']).traceStart).toBe(false);
    expect(parseStandaloneFlags(['--vmi', 'v.yaml', '--trace-start=true']).traceStart).toBe(true);
  });
  it("accepts each of @kubevirt-ts/log's levels (flags keep their own copy, so winston loads later)", () => {
    for (const l of LOG_LEVELS) expect(parseLauncherFlags([...base, '--log-level', l]).logLevel).toBe(l);
  });
  it('--less-pvc-space-toleration and --minimum-reserve-pvc-bytes: unset unless given (the disks defaults apply), checked, into the pod config', () => {
    const unset = parseLauncherFlags(base);
    expect(unset.lessPVCSpaceToleration).toBeUndefined();
    expect(unset.minimumReservePVCBytes).toBeUndefined();
    expect(podConfig(unset).claimImage).toEqual({});
    const f = parseLauncherFlags([
      ...base,
      '--less-pvc-space-toleration',
      '0',
      '--minimum-reserve-pvc-bytes=1048576',
    ]);
    expect(f).toMatchObject({ lessPVCSpaceToleration: 0, minimumReservePVCBytes: 1048576 });
    expect(podConfig(f).claimImage).toEqual({ lessPVCSpaceToleration: 0, minimumReservePVCBytes: 1048576 });
    expect(parseLauncherFlags([...base, '--less-pvc-space-toleration=100']).lessPVCSpaceToleration).toBe(100);
    for (const bad of ['101', '-1', '2.5', '10%', ''])
      expect(
        usageError(() => parseLauncherFlags([...base, `--less-pvc-space-toleration=${bad}`])).message,
      ).toBe(
        `--less-pvc-space-toleration: must be an integer percentage from 0 to 100, got ${JSON.stringify(bad)}`,
      );
    for (const bad of ['-1', '1Mi', '0x10', ''])
      expect(
        usageError(() => parseLauncherFlags([...base, `--minimum-reserve-pvc-bytes=${bad}`])).message,
      ).toBe(`--minimum-reserve-pvc-bytes: must be a non-negative integer, got ${JSON.stringify(bad)}`);
    expect(
      usageError(() => parseLauncherFlags([...base, '--minimum-reserve-pvc-bytes', '99999999999999999999']))
        .message,
    ).toBe('--minimum-reserve-pvc-bytes: 99999999999999999999 bytes is too large');
  });
  it('refuses hook sidecars clearly', () => {
    const e = usageError(() => parseLauncherFlags([...base, '--hook-sidecars', '2']));
    expect(e.message).toMatch(
      /--hook-sidecars: 2 hook sidecars requested, but hook sidecars are not supported/,
    );
  });
  it('names the bad flag', () => {
    expect(usageError(() => parseLauncherFlags(['--namespace', 'x', '--uid', 'u'])).message).toBe(
      '--name is required',
    );
    expect(usageError(() => parseLauncherFlags([...base, '--grace-period-seconds=-1'])).message).toMatch(
      /^--grace-period-seconds:/,
    );
    expect(usageError(() => parseLauncherFlags([...base, '--qemu-timeout', '5 minutes'])).message).toMatch(
      /^--qemu-timeout: invalid duration/,
    );
    expect(usageError(() => parseLauncherFlags([...base, '--log-level', 'loud'])).message).toMatch(
      /^--log-level:/,
    );
    expect(usageError(() => parseLauncherFlags([...base, '--bogus'])).message).toMatch(/bogus/);
  });
});

describe('durations', () => {
  it.each([
    ['30', 30_000],
    ['1.5', 1500],
    ['300s', 300_000],
    ['5m', 300_000],
    ['1h2m3s', 3_723_000],
    ['250ms', 250],
  ])('%s', (v, ms) => expect(parseDuration('x', v)).toBe(ms));
  it.each(['', 's', '5x', '5m junk', '-5s'])('rejects %j', (v) => {
    usageError(() => parseDuration('x', v));
  });
});

describe('standalone flags', () => {
  it('parses images, console, socket dir', () => {
    const f = parseStandaloneFlags([
      '--vmi',
      '/a/vmi.yaml',
      '--image',
      'kvts/guest:1=/cache/guest',
      '--image=reg.io/a/b@sha256:1=/x/y.img',
      '--console',
      '--allow-emulation',
      '--socket-dir',
      '/tmp/s',
    ]);
    expect(f.vmiFile).toBe('/a/vmi.yaml');
    expect([...f.images]).toEqual([
      ['kvts/guest:1', '/cache/guest'],
      ['reg.io/a/b@sha256:1', '/x/y.img'],
    ]);
    expect(f).toMatchObject({ console: true, allowEmulation: true, socketDir: '/tmp/s' });
  });
  it('--pod-network passt (default) or slirp, --passt PATH (a bare name stays a PATH lookup)', () => {
    expect(parseStandaloneFlags(['--vmi', 'x'])).toMatchObject({ podNetwork: 'passt' });
    expect(parseStandaloneFlags(['--vmi', 'x']).passtBinary).toBeUndefined();
    expect(parseStandaloneFlags(['--vmi', 'x', '--pod-network', 'slirp']).podNetwork).toBe('slirp');
    expect(parseStandaloneFlags(['--vmi', 'x', '--passt', '/opt/passt/bin/passt']).passtBinary).toBe(
      '/opt/passt/bin/passt',
    );
    expect(parseStandaloneFlags(['--vmi', 'x', '--passt', 'passt']).passtBinary).toBe('passt');
    expect(usageError(() => parseStandaloneFlags(['--vmi', 'x', '--pod-network', 'tap'])).message).toBe(
      '--pod-network: must be passt or slirp, got "tap"',
    );
    expect(usageError(() => parseStandaloneFlags(['--vmi', 'x', '--passt', ''])).message).toBe(
      '--passt: a path to the passt binary is required',
    );
  });
  it('requires --vmi and REF=PATH', () => {
    expect(usageError(() => parseStandaloneFlags([])).message).toMatch(/--vmi/);
    expect(usageError(() => parseStandaloneFlags(['--vmi', 'x', '--image', 'noequals'])).message).toMatch(
      /--image: expected REF=PATH/,
    );
  });
});
