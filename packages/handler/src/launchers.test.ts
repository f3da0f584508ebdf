// Real files and real unix sockets in temp dirs: what discovery accepts and refuses, ghost records, the notify pipe.
import { chown, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { NotifyClient, NotifyServer, type DomainEvent } from '@kubevirt-ts/cmd-protocol';
import { createLogger } from '@kubevirt-ts/log';
import {
  GhostRecords,
  checkLauncherSocket,
  discoverLaunchers,
  podPublicDir,
  podSocketPath,
  podSocketsDir,
} from './launchers.js';
import { NotifyPipe } from './notify-pipe.js';

const isRoot = process.getuid?.() === 0;
const me = process.getuid?.() ?? 0;

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const stream = new Writable({
    write(chunk: Buffer, _e, cb) {
      for (const l of chunk.toString().split('\n').filter(Boolean))
        lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  return { log: createLogger({ component: 'test', stream, level: 'debug' }), lines };
}

async function listen(p: string): Promise<net.Server> {
  await mkdir(path.dirname(p), { recursive: true });
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(p, r));
  return s;
}

let dir: string;
const servers: net.Server[] = [];
beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'kvh-'));
});
afterEach(async () => {
  for (const s of servers.splice(0)) s.close();
  await rm(dir, { recursive: true, force: true });
});

describe('launcher discovery', () => {
  it('finds the sockets of launcher pods, ignores a regular file and a symlink with a log line each', async () => {
    servers.push(await listen(podSocketPath(dir, 'pod-a')));
    await mkdir(podSocketsDir(dir, 'pod-b'), { recursive: true });
    await writeFile(podSocketPath(dir, 'pod-b'), 'not a socket');
    await mkdir(podSocketsDir(dir, 'pod-c'), { recursive: true });
    await symlink(podSocketPath(dir, 'pod-a'), podSocketPath(dir, 'pod-c'));
    await mkdir(path.join(dir, 'pod-d'), { recursive: true }); // a pod without a launcher
    const { log, lines } = capture();
    const found = await discoverLaunchers(dir, me, log);
    expect(found).toEqual([{ podUid: 'pod-a', socketPath: podSocketPath(dir, 'pod-a') }]);
    const warns = lines.filter((l) => l.level === 'warn');
    expect(warns.map((w) => [w.reason, w.path])).toEqual([
      ['NotASocket', podSocketPath(dir, 'pod-b')],
      ['NotASocket', podSocketPath(dir, 'pod-c')],
    ]);
    expect(String(warns[0]!.msg)).toContain('not a unix socket, ignored');
    // once per path
    await discoverLaunchers(
      dir,
      me,
      log,
      new Set([`${podSocketPath(dir, 'pod-b')}not-a-socket`, `${podSocketPath(dir, 'pod-c')}not-a-socket`]),
    );
    expect(lines.filter((l) => l.level === 'warn')).toHaveLength(2);
  });

  (isRoot ? it : it.skip)(
    'ignores a socket owned by another uid than the launchers’ (needs root to chown)',
    async () => {
      const p = podSocketPath(dir, 'pod-x');
      servers.push(await listen(p));
      await chown(p, 4242, 4242);
      const r = await checkLauncherSocket(p, 107);
      expect(r).toEqual({
        ok: false,
        reason: 'wrong-owner',
        message: `${p}: owned by uid 4242, launchers run as uid 107, ignored`,
      });
      await chown(p, 107, 107);
      expect(await checkLauncherSocket(p, 107)).toEqual({ ok: true });
    },
  );

  it('a missing pods dir is no launchers', async () => {
    expect(await discoverLaunchers(path.join(dir, 'nope'), me, capture().log)).toEqual([]);
  });
});

describe('ghost records', () => {
  it('survive a new instance (a restarted handler), are deleted, and a bad file is skipped with a log line', async () => {
    const a = new GhostRecords(dir);
    await a.load(capture().log);
    const rec = { name: 'vm', namespace: 'ns', uid: 'uid-1', socketFile: '/x/launcher-sock', podUid: 'p' };
    await a.put(rec);
    await writeFile(path.join(a.dir, 'garbage'), '{');
    const { log, lines } = capture();
    const b = new GhostRecords(dir);
    expect(await b.load(log)).toEqual([rec]);
    expect(lines.some((l) => l.reason === 'BadGhostRecord')).toBe(true);
    expect(b.byKey('ns/vm')).toEqual([rec]);
    await b.put({ ...rec, shutdownStartedAt: 5 });
    expect(JSON.parse(await readFile(path.join(a.dir, 'uid-1'), 'utf8'))).toMatchObject({
      shutdownStartedAt: 5,
    });
    await b.delete('uid-1');
    expect(await new GhostRecords(dir).load(log)).toEqual([]);
  });
  it('refuses a uid that is not a file name', async () => {
    const g = new GhostRecords(dir);
    await expect(
      g.put({ name: 'a', namespace: 'b', uid: '../x', socketFile: 's', podUid: 'p' }),
    ).rejects.toThrow(/not a valid file name/);
  });
});

describe('notify pipe', () => {
  it('a NotifyClient dialing the pipe in the pod dir reaches the handler NotifyServer', async () => {
    const events: DomainEvent[] = [];
    const server = new NotifyServer({
      socketPath: path.join(dir, 'handler', 'domain-notify-pipe.sock'),
      onDomainEvent: (e) => void events.push(e),
      onK8sEvent: () => undefined,
    });
    await server.start();
    await mkdir(podPublicDir(dir, 'pod-a'), { recursive: true });
    const pipe = new NotifyPipe(
      path.join(podPublicDir(dir, 'pod-a'), 'domain-notify-pipe.sock'),
      server.socketPath,
    );
    await pipe.start();
    const client = new NotifyClient(pipe.pipePath);
    client.sendDomainEvent({
      eventType: 'ADDED',
      domain: {
        metadata: { name: 'a', namespace: 'ns', uid: 'u' },
        domainName: 'ns_a',
        status: { status: 'Running', reason: 'Booted' },
      },
    });
    expect(await client.flush(10_000)).toBe(true);
    expect(events.map((e) => [e.eventType, e.domain?.metadata.uid, e.domain?.status.status])).toEqual([
      ['ADDED', 'u', 'Running'],
    ]);
    client.close();
    await pipe.stop();
    await server.stop(500);
  });
});
