// findLauncherProcess against real processes: a listener on a unix socket named like a launcher's,
// in the node's network namespace (refused) and, as root, inside a network namespace this test creates
// (found, with that namespace).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import {
  chownSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { findLauncherProcess, podNetworkRecord, prepareTun, resolveInRoot } from './pod-network.js';

const uid = process.getuid!();
const isRoot = uid === 0;
let dir: string;
const children: ChildProcess[] = [];
beforeEach(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'kvts-hnet-'));
});
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

/** A process listening on `<dir>/<name>` (optionally renamed to launcher-sock after listening, as the launcher does). */
async function listener(wrap: string[], name: string, renameTo?: string): Promise<ChildProcess> {
  const sock = path.join(dir, name);
  const code = `const fs=require('fs');require('net').createServer().listen(${JSON.stringify(sock)},()=>{${
    renameTo ? `fs.renameSync(${JSON.stringify(sock)},${JSON.stringify(path.join(dir, renameTo))});` : ''
  }console.log('up')})`;
  const argv = [...wrap, process.execPath, '-e', code];
  const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  await new Promise((resolve, reject) => {
    child.stdout!.once('data', resolve);
    child.once('exit', (c) => reject(new Error(`listener exited ${c}`)));
  });
  return child;
}

test('a launcher socket served from the node network namespace is refused by name', async () => {
  const child = await listener([], 'launcher-init-sock', 'launcher-sock');
  await expect(findLauncherProcess(path.join(dir, 'launcher-sock'), uid)).rejects.toThrow(
    `(pid ${child.pid}) runs in the node's network namespace: refusing`,
  );
});

test('a socket file nobody of that uid listens on: no process, a clear error', async () => {
  await listener([], 'launcher-sock');
  await expect(findLauncherProcess(path.join(dir, 'launcher-sock'), uid + 4242)).rejects.toThrow(
    `no process of uid ${uid + 4242} listens on`,
  );
  // a regular file where the socket should be: not served by anyone
  writeFileSync(path.join(dir, 'other'), '');
  await expect(findLauncherProcess(path.join(dir, 'other'), uid)).rejects.toThrow('no process of uid');
});

(isRoot ? test : test.skip)(
  isRoot
    ? 'a launcher inside a network namespace: found, with that namespace'
    : 'finding a launcher in a network namespace needs root (skipped: not root)',
  async () => {
    const ns = `kvtshnet${process.pid}`;
    spawnSync('ip', ['netns', 'add', ns]);
    try {
      const child = await listener(['ip', 'netns', 'exec', ns], 'launcher-init-sock', 'launcher-sock');
      const found = await findLauncherProcess(path.join(dir, 'launcher-sock'), uid);
      expect(found.pid).toBe(child.pid); // ip netns exec execs the command: same pid
      expect(statSync(found.netns).ino).toBe(statSync(`/run/netns/${ns}`).ino);
    } finally {
      for (const c of children.splice(0)) c.kill('SIGKILL');
      spawnSync('ip', ['netns', 'del', ns]);
    }
  },
);

test('the record of a Pod: one file per pod uid, a uid that is not a file name refused', () => {
  expect(podNetworkRecord('/h', 'pod-1')).toBe('/h/pod-network/pod-1.json');
  expect(() => podNetworkRecord('/h', '../x')).toThrow('cannot be a file name');
});

/** A process in a private mount namespace with `node` bind-mounted at /dev/net/tun (a container's own node). */
async function withOwnTun(node: string): Promise<ChildProcess> {
  const child = spawn(
    'unshare',
    [
      '--mount',
      '--propagation',
      'private',
      'sh',
      '-c',
      'mount --bind "$0" /dev/net/tun && exec sleep 600',
      node,
    ],
    { stdio: 'ignore' },
  );
  children.push(child);
  for (let i = 0; i < 200; i++) {
    const comm = (() => {
      try {
        return readFileSync(`/proc/${child.pid}/comm`, 'utf8').trim();
      } catch {
        return '';
      }
    })();
    if (comm === 'sleep') return child;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('the process with its own /dev/net/tun did not start');
}

(isRoot ? test : test.skip)(
  isRoot
    ? "prepareTun: the Pod's own tun node becomes the launcher's (107); the node's /dev/net/tun and a fake are never changed"
    : 'prepareTun needs root (skipped: not root)',
  async () => {
    const host = statSync('/dev/net/tun');
    try {
      const tun = path.join(dir, 'tun');
      spawnSync('mknod', ['-m', '0600', tun, 'c', '10', '200']);
      const pod = await withOwnTun(tun);
      await prepareTun(pod.pid!, 107);
      expect(statSync(tun)).toMatchObject({ uid: 107, gid: 107, mode: host.mode });
      await prepareTun(pod.pid!, 107); // again: nothing to do
      // a process that sees the node's own /dev/net/tun (no device plugin node of its own): refused
      const plain = spawn('sleep', ['600'], { stdio: 'ignore' });
      children.push(plain);
      await expect(prepareTun(plain.pid!, 107)).rejects.toThrow("is the node's own device node");
      // something else at /dev/net/tun: refused
      const fake = path.join(dir, 'fake');
      writeFileSync(fake, '');
      const faker = await withOwnTun(fake);
      await expect(prepareTun(faker.pid!, 107)).rejects.toThrow('is not the tun device: not touching it');
      expect(statSync(fake).uid).toBe(0);
      const after = statSync('/dev/net/tun');
      expect([after.uid, after.gid, after.mode]).toEqual([host.uid, host.gid, host.mode]);
      // no such process: a clear error
      await expect(prepareTun(2 ** 22 + 7, 107)).rejects.toThrow(
        'cannot open /dev/net/tun in the launcher Pod',
      );
    } finally {
      // never leave the machine's own node changed, even when a check fails
      const now = statSync('/dev/net/tun');
      if (now.uid !== host.uid || now.gid !== host.gid) chownSync('/dev/net/tun', host.uid, host.gid);
    }
  },
);

test("resolveInRoot: links followed inside the process's root (Debian's /var/run -> /run), never outside it", async () => {
  const root = path.join(dir, 'root');
  mkdirSync(path.join(root, 'run/kubevirt/sockets'), { recursive: true });
  mkdirSync(path.join(root, 'var'));
  writeFileSync(path.join(root, 'run/kubevirt/sockets/launcher-sock'), '');
  symlinkSync('/run', path.join(root, 'var/run')); // absolute: the root's /run
  symlinkSync('../../..', path.join(root, 'run/kubevirt/up')); // relative, climbing: stops at the root
  symlinkSync('loop', path.join(root, 'loop'));
  const want = path.join(root, 'run/kubevirt/sockets/launcher-sock');
  expect(await resolveInRoot(root, '/var/run/kubevirt/sockets/launcher-sock')).toBe(want);
  expect(await resolveInRoot(root, '/run/kubevirt/up/var/run/kubevirt/sockets/launcher-sock')).toBe(want);
  expect(await resolveInRoot(root, '/../../var/run/kubevirt/sockets/launcher-sock')).toBe(want);
  expect(await resolveInRoot(root, '/var/nope/x')).toBeUndefined();
  expect(await resolveInRoot(root, '/loop/x')).toBeUndefined();
  // the last component is not followed
  expect(await resolveInRoot(root, '/var/run')).toBe(path.join(root, 'var/run'));
});
