// Socket permissions against real other users: a child process running as uid 107 (qemu, the
// launcher's user) or 108 connects to sockets served by this (root) process. Needs root; CI runs
// as root (tools/setup.d/10-qemu-user.sh creates uid 107).
import { spawn } from 'node:child_process';
import { chmod } from 'node:fs/promises';
import { join } from 'node:path';
import { CmdServer } from './cmd-server.js';
import { NotifyServer, type DomainEvent } from './notify-server.js';
import { launcherSocketPath, notifySocketPath } from './sockets.js';
import { quietLogger, tempDir } from './test-util.js';

const isRoot = process.getuid?.() === 0;
const rootTest = isRoot ? test : test.skip;
if (!isRoot) console.warn('users.test: not root, cross-user socket tests skipped');

const indexUrl = new URL('./index.js', import.meta.url).href;

/** Runs an ES module snippet as `uid`; resolves with its exit code and output. */
function runAs(uid: number, code: string, timeoutMs = 15_000): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', code], {
      uid,
      gid: uid,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', KVTS_LOG_LEVEL: 'error' },
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('exit', (c) => {
      clearTimeout(timer);
      resolve({ code: c, out });
    });
  });
}

let dir: string;
let cleanup: () => Promise<void>;
beforeEach(async () => {
  ({ dir, cleanup } = await tempDir());
  await chmod(dir, 0o755); // like /var/run/kubevirt: traversable, the socket dirs below are 0700
});
afterEach(() => cleanup());

const sendDomainEvent = (path: string) => `
  import { NotifyClient } from ${JSON.stringify(indexUrl)};
  const c = new NotifyClient(${JSON.stringify(path)}, { initialBackoffMs: 50, maxBackoffMs: 200 });
  c.sendDomainEvent({ eventType: 'ADDED', domain: { metadata: { name: 'vm', namespace: 'ns' } } });
  const ok = await c.flush(1500);
  c.close();
  console.log('uid', process.getuid(), 'delivered', ok);
  process.exit(ok ? 0 : 3);
`;

rootTest(
  'a launcher running as uid 107 reaches the notify socket only when it is chown-ed to it',
  async () => {
    const got: DomainEvent[] = [];
    const path = notifySocketPath(join(dir, 'handler'));
    const start = async (owned: boolean) => {
      const s = new NotifyServer({
        socketPath: path,
        logger: quietLogger,
        socketOwner: owned ? { uid: 107, gid: 107 } : undefined,
        onDomainEvent: (e) => void got.push(e),
        onK8sEvent: () => undefined,
      });
      await s.start();
      return s;
    };

    let server = await start(false);
    try {
      const denied = await runAs(107, sendDomainEvent(path));
      expect(denied.code).toBe(3);
      expect(got).toEqual([]);
    } finally {
      await server.stop();
    }

    server = await start(true);
    try {
      const ok = await runAs(107, sendDomainEvent(path));
      expect(ok).toEqual({ code: 0, out: expect.stringContaining('uid 107 delivered true') });
      expect(got).toEqual([{ eventType: 'ADDED', domain: { metadata: { name: 'vm', namespace: 'ns' } } }]);
      // Another unprivileged user still cannot (0700 dir, 0600 socket).
      const other = await runAs(108, sendDomainEvent(path));
      expect(other.code).toBe(3);
      expect(got.length).toBe(1);
    } finally {
      await server.stop();
    }
  },
  60_000,
);

rootTest(
  'the launcher socket is reachable by its owner and root, not by other users',
  async () => {
    const socketsDir = join(dir, 'sockets');
    const server = new CmdServer({
      socketsDir,
      backend: { getQemuVersion: async () => '7.2.0' },
      logger: quietLogger,
      socketOwner: { uid: 107, gid: 107 },
    });
    await server.start();
    await server.ready();
    const path = launcherSocketPath(socketsDir);
    const connect = `
    import { CmdClient } from ${JSON.stringify(indexUrl)};
    try {
      const c = await CmdClient.connect(${JSON.stringify(path)}, { connectTimeoutMs: 3000 });
      console.log('version', await c.getQemuVersion());
      c.close();
      process.exit(0);
    } catch (e) {
      console.log(e.name, e.message);
      process.exit(3);
    }
  `;
    try {
      const owner = await runAs(107, connect);
      expect(owner).toEqual({ code: 0, out: expect.stringContaining('version 7.2.0') });
      const other = await runAs(108, connect);
      expect(other.code).toBe(3);
      expect(other.out).toMatch(/LauncherUnreachableError/);
    } finally {
      await server.stop();
    }
  },
  60_000,
);
