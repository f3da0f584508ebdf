// Socket permissions against real other users: a child process running as uid 107 (qemu, the
// launcher's user) or 108 connect()s to sockets served by this (root) process. connect() on a unix
// socket is where the kernel checks the 0700 directory and the 0600 socket, so the child only needs
// node itself (it loads nothing from the repository, which may not be readable by those users).
// Needs root; CI runs as root.
import { spawn } from 'node:child_process';
import { chmod } from 'node:fs/promises';
import { join } from 'node:path';
import { CmdServer } from './cmd-server.js';
import { NotifyServer } from './notify-server.js';
import { launcherSocketPath, notifySocketPath } from './sockets.js';
import { quietLogger, tempDir } from './test-util.js';

const isRoot = process.getuid?.() === 0;
const rootTest = isRoot ? test : test.skip;
if (!isRoot) console.warn('users.test: not root, cross-user socket tests skipped');

/** connect()s to `path` as `uid`: 'connected' or the errno code. */
function connectAs(uid: number, path: string): Promise<string> {
  const code = `
    const s = require('node:net').connect(${JSON.stringify(path)});
    s.on('connect', () => { console.log('connected'); process.exit(0); });
    s.on('error', (e) => { console.log(e.code); process.exit(3); });`;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', code], {
      uid,
      gid: uid,
      cwd: '/',
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: '/usr/bin:/bin' },
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    child.on('error', reject);
    child.on('exit', () => {
      clearTimeout(timer);
      resolve(out.trim());
    });
  });
}

let dir: string;
let cleanup: () => Promise<void>;
beforeEach(async () => {
  ({ dir, cleanup } = await tempDir());
  await chmod(dir, 0o755); // like /var/run/kubevirt: traversable; the socket dirs below are 0700
});
afterEach(() => cleanup());

rootTest(
  'the notify socket admits launchers (uid 107) only when chown-ed to them',
  async () => {
    const path = notifySocketPath(join(dir, 'handler'));
    const start = async (owned: boolean) => {
      const s = new NotifyServer({
        socketPath: path,
        logger: quietLogger,
        socketOwner: owned ? { uid: 107, gid: 107 } : undefined,
        onDomainEvent: () => undefined,
        onK8sEvent: () => undefined,
      });
      await s.start();
      return s;
    };
    let server = await start(false);
    try {
      expect(await connectAs(107, path)).toBe('EACCES');
    } finally {
      await server.stop();
    }
    server = await start(true);
    try {
      expect(await connectAs(107, path)).toBe('connected');
      expect(await connectAs(108, path)).toBe('EACCES'); // anybody else: 0700 dir, 0600 socket
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
      backend: {},
      logger: quietLogger,
      socketOwner: { uid: 107, gid: 107 },
    });
    await server.start();
    await server.ready();
    try {
      expect(await connectAs(107, launcherSocketPath(socketsDir))).toBe('connected');
      expect(await connectAs(108, launcherSocketPath(socketsDir))).toBe('EACCES');
      expect(await connectAs(0, launcherSocketPath(socketsDir))).toBe('connected');
    } finally {
      await server.stop();
    }
  },
  60_000,
);
