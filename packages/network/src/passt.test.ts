// startPasst with the real passt binary (Debian's passt): its socket, its life as our child, its stop, and
// the failures (binary missing, passt exiting with its message, never binding). As root, passt runs as
// uid 107 (passt itself refuses to stay root), in a 0700 dir that user owns.
import { describe, expect, test, afterEach } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { PasstNic } from '@kubevirt-ts/converter';
import { PasstError, passtArgs, startPasst, type PasstProcess } from './passt.js';

const isRoot = process.getuid?.() === 0;
const user = isRoot ? { uid: 107, gid: 107 } : undefined;
const havePasst = spawnSync('sh', ['-c', 'command -v passt'], { encoding: 'utf8' }).status === 0;
const passtTest = havePasst ? test : test.skip;
if (!havePasst)
  test.skip('the real passt tests need passt (Debian package passt; skipped: not installed)', () =>
    undefined);

const dirs: string[] = [];
const procs: PasstProcess[] = [];
function privateDir(): string {
  const d = mkdtempSync(path.join(os.tmpdir(), 'kvts-passt-'));
  chmodSync(d, 0o700);
  if (user) chownSync(d, user.uid, user.gid);
  dirs.push(d);
  return d;
}
afterEach(async () => {
  await Promise.all(procs.splice(0).map((p) => p.stop()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const nic = (socket: string, over: Partial<PasstNic> = {}): PasstNic => ({
  index: 0,
  name: 'default',
  socket,
  mac: '52:54:00:00:00:01',
  device: 'virtio-net-pci-non-transitional',
  mtu: 65520,
  tcpPorts: [],
  udpPorts: [],
  ...over,
});

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('passt', () => {
  test('arguments: foreground, stderr, its socket, the MTU, the forwarded ports (none: none), gateway mapped', () => {
    expect(passtArgs(nic('/x/passt0.sock', { mtu: 1500, tcpPorts: [80, 8080], udpPorts: [53] }))).toEqual([
      '--foreground',
      '--stderr',
      '--socket',
      '/x/passt0.sock',
      '--mtu',
      '1500',
      '--tcp-ports',
      '80,8080',
      '--udp-ports',
      '53',
    ]);
    const none = passtArgs(nic('/x/s'));
    expect(none.slice(-4)).toEqual(['--tcp-ports', 'none', '--udp-ports', 'none']);
    expect(none).not.toContain('--no-map-gw');
  });

  passtTest(
    'starts as our child, binds its socket (0700 dir), forwards a port, and stop leaves nothing',
    async () => {
      const d = privateDir();
      const sock = path.join(d, 'passt0.sock');
      // a stale socket from an earlier run is replaced
      const stale = net.createServer().listen(sock);
      await new Promise((r) => stale.once('listening', r));
      stale.close();
      const fwd = net.createServer();
      await new Promise<void>((r) => fwd.listen(0, '127.0.0.1', r));
      const port = (fwd.address() as net.AddressInfo).port;
      fwd.close();
      const [p] = await startPasst([nic(sock, { tcpPorts: [port] })], { user });
      procs.push(p!);
      expect(lstatSync(sock).isSocket()).toBe(true);
      const status = readFileSync(`/proc/${p!.pid}/status`, 'utf8');
      expect(Number(/^PPid:\s+(\d+)/m.exec(status)![1])).toBe(process.pid);
      if (user) expect(Number(/^Uid:\s+(\d+)/m.exec(status)![1])).toBe(107);
      expect(readFileSync(`/proc/${p!.pid}/cmdline`, 'utf8').split('\0')).toContain(String(port));
      // passt listens on the forwarded port (a connection is accepted even without a guest)
      const c = net.connect(port, '127.0.0.1');
      await new Promise<void>((resolve, reject) => {
        c.once('connect', resolve);
        c.once('error', reject);
      });
      c.destroy();
      await p!.stop();
      expect(alive(p!.pid)).toBe(false);
      expect(existsSync(sock)).toBe(false);
      const end = await p!.exited; // passt handles SIGTERM itself and exits with a code
      expect(end.code !== null || end.signal !== null).toBe(true);
    },
  );

  test('a missing binary fails with a clear error, nothing left', async () => {
    const d = privateDir();
    const err = await startPasst([nic(path.join(d, 's'))], { binary: path.join(d, 'nope') }).catch((e) => e);
    expect(err).toBeInstanceOf(PasstError);
    expect((err as Error).message).toBe(
      `passt: ${path.join(d, 'nope')} not found: install passt (Debian's passt package), or run standalone with --pod-network slirp`,
    );
  });

  passtTest(
    'passt exiting (its forwarded port is taken) fails with its own message; the first NIC is stopped too',
    async () => {
      const d = privateDir();
      const taken = net.createServer();
      await new Promise<void>((r) => taken.listen(0, '::', r));
      const port = (taken.address() as net.AddressInfo).port;
      try {
        const err = await startPasst(
          [
            nic(path.join(d, 'p0.sock')),
            nic(path.join(d, 'p1.sock'), { index: 1, name: 'two', tcpPorts: [port] }),
          ],
          { user },
        ).catch((e) => e);
        expect(err).toBeInstanceOf(PasstError);
        expect((err as Error).message).toMatch(
          /^passt \(interface two\) exited with code 1 before its socket was ready: .*Failed to bind any port/,
        );
        // nothing of either left: no socket, no process naming the dir
        expect(existsSync(path.join(d, 'p0.sock'))).toBe(false);
        expect(existsSync(path.join(d, 'p1.sock'))).toBe(false);
        const ps = spawnSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).stdout;
        expect(ps.split('\n').filter((l) => l.includes(d))).toEqual([]);
      } finally {
        taken.close();
      }
    },
  );

  test("passt unable to create its user namespace (a Pod's RuntimeDefault seccomp): the error says why", async () => {
    // stands in for Debian's passt 2023-03 as a non-root user under a seccomp filter refusing unshare(2)
    // (its message and exit code, seen with the real passt under such a filter)
    const d = privateDir();
    const fake = path.join(d, 'fake-passt');
    writeFileSync(
      fake,
      '#!/bin/sh\necho "Couldn\'t create user namespace: Operation not permitted" >&2\nexit 1\n',
      {
        mode: 0o755,
      },
    );
    const err = await startPasst([nic(path.join(d, 's'))], { binary: fake }).catch((e) => e);
    expect(err).toBeInstanceOf(PasstError);
    expect((err as Error).message).toBe(
      "passt (interface default) exited with code 1 before its socket was ready: Couldn't create user namespace: Operation not permitted (passt run as a non-root user needs to create a user namespace: a container runtime's default seccomp profile (a Pod's RuntimeDefault) or the node (user.max_user_namespaces, kernel.unprivileged_userns_clone) forbids it here)",
    );
  });

  test('a passt that never binds is stopped after the ready timeout', async () => {
    const d = privateDir();
    const fake = path.join(d, 'fake-passt');
    writeFileSync(fake, '#!/bin/sh\nexec sleep 30\n', { mode: 0o755 });
    const err = await startPasst([nic(path.join(d, 's'))], { binary: fake, readyTimeoutMs: 300 }).catch(
      (e) => e,
    );
    expect(err).toBeInstanceOf(PasstError);
    expect((err as Error).message).toBe(
      `passt (interface default) did not bind ${path.join(d, 's')} within 300 ms`,
    );
    const ps = spawnSync('ps', ['-eo', 'args'], { encoding: 'utf8' }).stdout;
    expect(ps.split('\n').filter((l) => l.includes(fake))).toEqual([]);
  });
});
