import { describe, expect, it } from '@jest/globals';
import { migrateParamList } from './connection.js';
import {
  domainEventDetailName,
  domainEventName,
  domainStateName,
  domainStateReasonName,
  DomainState,
  ErrorCode,
  TypedParamType,
} from './constants.js';
import { LibvirtError } from './errors.js';
import { mkdtemp, rm } from 'node:fs/promises';
import { confText, confValue, startSessionLibvirtd } from './session.js';

describe('migrateParamList', () => {
  it('maps typed params to libvirt names and types, repeating list entries', () => {
    expect(
      migrateParamList({
        uri: 'tcp://127.0.0.1:49152',
        bandwidth: 100,
        migrateDisks: ['vda', 'vdb'],
        disksUri: 'unix:///s/migrationproxy/u-49153-source.sock',
        migrateDisksDetectZeroes: ['vda', 'vdb'],
        parallelConnections: 4,
      }),
    ).toEqual([
      ['migrate_uri', TypedParamType.STRING, 'tcp://127.0.0.1:49152'],
      ['bandwidth', TypedParamType.ULLONG, 100],
      ['migrate_disks', TypedParamType.STRING, 'vda'],
      ['migrate_disks', TypedParamType.STRING, 'vdb'],
      ['disks_uri', TypedParamType.STRING, 'unix:///s/migrationproxy/u-49153-source.sock'],
      ['migrate_disks_detect_zeroes', TypedParamType.STRING, 'vda'],
      ['migrate_disks_detect_zeroes', TypedParamType.STRING, 'vdb'],
      ['parallel.connections', TypedParamType.INT, 4],
    ]);
  });
  it('rejects wrong types and unknown keys, naming the field', () => {
    expect(() => migrateParamList({ bandwidth: -1 })).toThrow('params.bandwidth');
    expect(() => migrateParamList({ uri: 5 as unknown as string })).toThrow('params.uri: expected a string');
    expect(() => migrateParamList({ nope: 1 } as never)).toThrow('params.nope: unknown');
    expect(() => migrateParamList({ uri: ['a'] as unknown as string })).toThrow(
      'params.uri: expected a single value',
    );
  });
});

describe('constants', () => {
  it('names states, reasons and lifecycle events like libvirt', () => {
    expect(domainStateName(DomainState.PAUSED)).toBe('PAUSED');
    expect(domainStateReasonName(DomainState.SHUTOFF, 2)).toBe('DESTROYED');
    expect(domainStateReasonName(DomainState.RUNNING, 2)).toBe('MIGRATED');
    expect(domainStateReasonName(DomainState.RUNNING, 99)).toBe('UNKNOWN_REASON_99');
    expect(domainEventName(5)).toBe('STOPPED');
    expect(domainEventDetailName(5, 0)).toBe('SHUTDOWN');
    expect(domainEventDetailName(2, 1)).toBe('MIGRATED');
    expect(ErrorCode.NO_DOMAIN).toBe(42);
    expect(ErrorCode.OPERATION_INVALID).toBe(55);
  });
});

describe('LibvirtError', () => {
  it('keeps code, domain and message from the native rejection', () => {
    const e = LibvirtError.from('domain.create(x)', {
      code: 42,
      domain: 10,
      libvirtMessage: 'Domain not found',
    });
    expect(e).toBeInstanceOf(LibvirtError);
    const le = e as LibvirtError;
    expect(le.message).toBe('domain.create(x): Domain not found');
    expect(le.codeName).toBe('NO_DOMAIN');
    expect(le.domainName).toBe('QEMU');
    expect(le.isNoDomain).toBe(true);
  });
});

describe('conf files', () => {
  it('quotes and escapes strings and refuses newlines and bad keys', () => {
    expect(confValue('a"b\\c')).toBe('"a\\"b\\\\c"');
    expect(confValue(['x', 'y'])).toBe('["x", "y"]');
    expect(confValue(true)).toBe('1');
    expect(confText({ host_uuid: 'u', max_clients: 5 })).toContain('host_uuid = "u"\nmax_clients = 5\n');
    expect(() => confValue('a\nb')).toThrow('newlines');
    expect(() => confText({ 'a b': 1 })).toThrow('not a valid name');
    expect(() => confValue(1.5)).toThrow('integers');
  });
});

describe('startSessionLibvirtd argument checks', () => {
  const asRoot = process.getuid?.() === 0;

  // the check only applies to root: skipped visibly otherwise
  (asRoot ? it : it.skip)(
    'refuses to start a system-mode daemon as root without an unprivileged uid (root only)',
    async () => {
      await expect(startSessionLibvirtd({ baseDir: '/tmp/kvl-unused' })).rejects.toThrow('system mode');
      await expect(startSessionLibvirtd({ baseDir: '/tmp/kvl-unused', uid: 0, gid: 0 })).rejects.toThrow(
        'system mode',
      );
    },
  );

  it('refuses a baseDir whose socket path would be too long for a unix socket', async () => {
    await expect(
      startSessionLibvirtd({ baseDir: `/tmp/${'x'.repeat(100)}`, uid: 107, gid: 107 }),
    ).rejects.toThrow(/longer than 107 bytes/);
  });

  (asRoot ? it : it.skip)('refuses unknown or malformed connection-driver names (root only)', async () => {
    const base = await mkdtemp('/tmp/kvl-');
    try {
      await expect(
        startSessionLibvirtd({ baseDir: base, uid: 107, gid: 107, drivers: ['qemu', 'nosuch'] }),
      ).rejects.toThrow(/drivers: libvirt_driver_nosuch\.so not found in \//);
      await expect(
        startSessionLibvirtd({ baseDir: base, uid: 107, gid: 107, drivers: ['../qemu'] }),
      ).rejects.toThrow('drivers: invalid name "../qemu"');
    } finally {
      await rm(base, { recursive: true, force: true });
    }
  });

  it('reports a daemon that exits before answering, with its output', async () => {
    if (!asRoot) return expect(asRoot).toBe(false); // needs root for uid 107
    const base = await mkdtemp('/tmp/kvl-');
    try {
      const err = (await startSessionLibvirtd({
        baseDir: base,
        uid: 107,
        gid: 107,
        libvirtdPath: '/usr/bin/false',
      }).catch((e: unknown) => e)) as Error;
      expect(err.message).toMatch(/libvirtd exited before answering \(1\)/);
    } finally {
      await rm(base, { recursive: true, force: true });
    }
  });
});
