// connectLauncherSocket against real unix sockets, symlinks and (as root) files of another owner.
import { chown, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connectLauncherSocket } from './launcher-socket.js';

const uid = process.getuid!();
let dir: string;
let servers: Server[] = [];
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kvts-lsock-'));
  servers = [];
});
afterEach(async () => {
  for (const s of servers) s.close();
  await rm(dir, { recursive: true, force: true });
});
const serve = (path: string, greeting: string) =>
  new Promise<void>((resolve) => {
    const s = createServer((c) => c.end(greeting));
    servers.push(s);
    s.listen(path, resolve);
  });
const read = (s: import('node:net').Socket) =>
  new Promise<string>((resolve) => {
    let t = '';
    s.on('data', (d: Buffer) => (t += d.toString()));
    s.on('end', () => resolve(t));
  });

test('connects to <private>/<uid>/<name>, even where the full path is longer than a socket address may be', async () => {
  const deep = join(dir, 'x'.repeat(60), 'volumes', 'kubernetes.io~empty-dir', 'private');
  const vmiUid = '0123456789abcdef0123456789abcdef0123';
  await mkdir(join(deep, vmiUid), { recursive: true });
  // listen through a short relative path: the server may bind it, only the full path is too long
  const cwd = process.cwd();
  process.chdir(join(deep, vmiUid));
  try {
    await serve('virt-serial0', 'from the serial port');
  } finally {
    process.chdir(cwd);
  }
  expect(join(deep, vmiUid, 'virt-serial0').length).toBeGreaterThan(108);
  const s = await connectLauncherSocket(deep, vmiUid, 'virt-serial0', uid);
  expect(await read(s)).toBe('from the serial port');
});

test('refuses a symlinked socket, a symlinked VMI dir, a regular file, a missing socket and bad names', async () => {
  await mkdir(join(dir, 'other'), { recursive: true });
  await serve(join(dir, 'other', 'real'), 'elsewhere');
  await mkdir(join(dir, 'p', 'u1'), { recursive: true });
  await symlink(join(dir, 'other', 'real'), join(dir, 'p', 'u1', 'virt-serial0'));
  await expect(connectLauncherSocket(join(dir, 'p'), 'u1', 'virt-serial0', uid)).rejects.toThrow(
    /virt-serial0 is not a unix socket: refused/,
  );
  await symlink(join(dir, 'other'), join(dir, 'p', 'u2'));
  await expect(connectLauncherSocket(join(dir, 'p'), 'u2', 'real', uid)).rejects.toThrow(
    /is a symlink or not a directory: refused/,
  );
  await writeFile(join(dir, 'p', 'u1', 'virt-vnc'), 'x');
  await expect(connectLauncherSocket(join(dir, 'p'), 'u1', 'virt-vnc', uid)).rejects.toThrow(
    /virt-vnc is not a unix socket: refused/,
  );
  await expect(connectLauncherSocket(join(dir, 'p'), 'u1', 'nothing', uid)).rejects.toThrow(
    /nothing does not exist/,
  );
  await expect(connectLauncherSocket(join(dir, 'p'), '..', 'virt-vnc', uid)).rejects.toThrow(
    /is not a file name/,
  );
  await expect(connectLauncherSocket(join(dir, 'p'), 'u1', 'a/b', uid)).rejects.toThrow(/is not a file name/);
});

(uid === 0 ? test : test.skip)('refuses a socket another user owns (root: chown)', async () => {
  await mkdir(join(dir, 'p', 'u1'), { recursive: true });
  await serve(join(dir, 'p', 'u1', 'virt-serial0'), 'x');
  await chown(join(dir, 'p', 'u1', 'virt-serial0'), 4242, 4242);
  await expect(connectLauncherSocket(join(dir, 'p'), 'u1', 'virt-serial0', 107)).rejects.toThrow(
    /owned by uid 4242, launchers run as uid 107: refused/,
  );
});
