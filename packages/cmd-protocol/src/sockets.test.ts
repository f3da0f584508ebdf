import { mkdir, stat, writeFile, chmod } from 'node:fs/promises';
import { join } from 'node:path';
import {
  checkSocketPath,
  ensureSocketDir,
  launcherInitSocketPath,
  launcherSocketPath,
  LIBVIRT_BLOCK_MIGRATION_PORT,
  LIBVIRT_DIRECT_MIGRATION_PORT,
  migrationPortsList,
  migrationProxyKey,
  migrationProxySocketPath,
  notifySocketPath,
  prepareSocketPath,
  removeSocketFile,
  upstreamMigrationTarget,
} from './sockets.js';
import { CmdServer } from './cmd-server.js';
import { NotifyServer } from './notify-server.js';
import { quietLogger, tempDir } from './test-util.js';

const mode = async (p: string) => (await stat(p)).mode & 0o777;

test('socket names are the upstream ones', () => {
  expect(launcherSocketPath('/var/run/kubevirt/sockets')).toBe('/var/run/kubevirt/sockets/launcher-sock');
  expect(launcherInitSocketPath('/var/run/kubevirt/sockets')).toBe(
    '/var/run/kubevirt/sockets/launcher-init-sock',
  );
  expect(notifySocketPath('/var/run/kubevirt')).toBe('/var/run/kubevirt/domain-notify-pipe.sock');
});

test('checkSocketPath rejects paths a unix socket cannot have', () => {
  expect(() => checkSocketPath('/tmp/' + 'a'.repeat(120))).toThrow(/limited to 107/);
  expect(() => checkSocketPath('')).toThrow(/non-empty/);
  expect(() => checkSocketPath('/tmp/a\0b')).toThrow(/NUL/);
  expect(() => new CmdServer({ socketsDir: '/tmp/' + 'x'.repeat(110), backend: {} })).toThrow(
    /^socketsDir: /,
  );
});

test('ensureSocketDir creates 0700 dirs and never changes the mode of a dir it did not create', async () => {
  const { dir, cleanup } = await tempDir();
  try {
    const d = join(dir, 'a', 'b');
    expect(await ensureSocketDir(d)).toBe(true);
    expect(await mode(d)).toBe(0o700);
    expect(await ensureSocketDir(d)).toBe(false); // now it exists: used as it is
    expect(await mode(d)).toBe(0o700);
    const loose = join(dir, 'loose');
    await mkdir(loose, { mode: 0o755 });
    await chmod(loose, 0o777);
    expect(await ensureSocketDir(loose)).toBe(false);
    expect(await mode(loose)).toBe(0o777);
    // a socket bound in it is still 0600
    const server = new CmdServer({ socketsDir: loose, backend: {} });
    await server.start();
    try {
      expect(await mode(join(loose, 'launcher-init-sock'))).toBe(0o600);
    } finally {
      await server.stop(100);
    }
    expect(await mode(loose)).toBe(0o777);
    const file = join(dir, 'file');
    await writeFile(file, '');
    await expect(ensureSocketDir(file)).rejects.toThrow(/EEXIST|not a directory/);
  } finally {
    await cleanup();
  }
});

test('prepareSocketPath refuses to remove a regular file', async () => {
  const { dir, cleanup } = await tempDir();
  try {
    const f = join(dir, 'launcher-sock');
    await writeFile(f, 'not a socket');
    await expect(prepareSocketPath(f)).rejects.toThrow(/not a unix socket/);
    await expect(removeSocketFile(join(dir, 'missing'))).resolves.toBeUndefined();
  } finally {
    await cleanup();
  }
});

test('servers create their dirs 0700 and sockets 0600, and remove the socket on stop', async () => {
  const { dir, cleanup } = await tempDir();
  try {
    const socketsDir = join(dir, 'sockets');
    const cmd = new CmdServer({ socketsDir, backend: {}, logger: quietLogger });
    await cmd.start();
    expect(await mode(socketsDir)).toBe(0o700);
    expect(await mode(launcherInitSocketPath(socketsDir))).toBe(0o600);
    expect((await stat(launcherInitSocketPath(socketsDir))).isSocket()).toBe(true);
    await cmd.ready();
    expect(await mode(launcherSocketPath(socketsDir))).toBe(0o600);
    await cmd.stop();
    await expect(stat(launcherSocketPath(socketsDir))).rejects.toThrow(/ENOENT/);

    const handlerDir = join(dir, 'handler');
    const notify = new NotifyServer({
      socketPath: notifySocketPath(handlerDir),
      onDomainEvent: () => undefined,
      onK8sEvent: () => undefined,
      logger: quietLogger,
    });
    await notify.start();
    expect(await mode(handlerDir)).toBe(0o700);
    expect(await mode(notifySocketPath(handlerDir))).toBe(0o600);
    await notify.stop();
    await expect(stat(notifySocketPath(handlerDir))).rejects.toThrow(/ENOENT/);
  } finally {
    await cleanup();
  }
});

test('start() fails with a clear error when the socket directory cannot be made, and can stop()', async () => {
  const { dir, cleanup } = await tempDir();
  try {
    await writeFile(join(dir, 'file'), 'x');
    const s = new NotifyServer({
      socketPath: join(dir, 'file', 'sock'), // the parent is a regular file
      onDomainEvent: () => undefined,
      onK8sEvent: () => undefined,
      logger: quietLogger,
    });
    await expect(s.start()).rejects.toThrow(/EEXIST|ENOTDIR/);
    await s.stop();
  } finally {
    await cleanup();
  }
});

test("migration proxy ports and sockets are upstream's (49152 stream, 49153 block migration disks)", () => {
  expect(LIBVIRT_DIRECT_MIGRATION_PORT).toBe(49152);
  expect(LIBVIRT_BLOCK_MIGRATION_PORT).toBe(49153);
  expect(migrationPortsList(false)).toEqual([49152]);
  expect(migrationPortsList(true)).toEqual([49152, 49153]);
  expect(migrationProxyKey('u1')).toBe('u1');
  expect(migrationProxyKey('u1', 49153)).toBe('u1-49153');
  expect(migrationProxySocketPath('/var/run/kubevirt/', 'u1-49153')).toBe(
    '/var/run/kubevirt/migrationproxy/u1-49153-source.sock',
  );
  expect(upstreamMigrationTarget('/var/run/kubevirt', 'u1')).toEqual({
    targetURI: 'qemu+unix:///session?socket=/var/run/kubevirt/migrationproxy/u1-source.sock',
    migrationURI: 'unix:///var/run/kubevirt/migrationproxy/u1-49152-source.sock',
    disksURI: 'unix:///var/run/kubevirt/migrationproxy/u1-49153-source.sock',
  });
  expect(() => upstreamMigrationTarget('/x', '')).toThrow('metadata.uid: required');
});
