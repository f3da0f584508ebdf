// The migration proxy with real sockets: a source "launcher" connects to the unix socket upstream's
// launcher derives, bytes go over TCP on loopback to the target listener and into the target
// "launcher's" unix socket, and back.
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { upstreamMigrationTarget } from '@kubevirt-ts/cmd-protocol';
import { MigrationProxyManager } from './migration-proxy.js';
import { openSslPki } from './test-pki.js';

const quiet = {
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  debug: () => undefined,
};
const UID = '6d1f3b4e-0000-4000-8000-000000000001';

let dir: string;
const servers: net.Server[] = [];

/** a launcher-side unix server: answers each connection with sha256(all bytes received) once it ends */
async function hashServer(file: string, got: string[]): Promise<void> {
  const s = net.createServer({ allowHalfOpen: true }, (c) => {
    const h = createHash('sha256');
    c.on('data', (d) => h.update(d));
    c.on('end', () => {
      const digest = h.digest('hex');
      got.push(digest);
      c.end(digest);
    });
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(file, r));
}

/** sends `data`, half-closes, returns what came back */
function roundTrip(file: string, data: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = net.connect({ path: file, allowHalfOpen: true });
    let back = '';
    c.on('data', (d) => (back += d.toString()));
    c.on('end', () => resolve(back));
    c.on('error', reject);
    c.end(data);
  });
}

beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'migr-proxy-'));
});
afterEach(async () => {
  for (const s of servers.splice(0)) s.close();
  await rm(dir, { recursive: true, force: true });
});

test('source unix socket -> TCP -> target unix socket, both streams (libvirt and QEMU), data intact both ways', async () => {
  const targetShare = path.join(dir, 'target');
  const sourceShare = path.join(dir, 'source');
  const libvirtSock = path.join(dir, 'target-libvirt-sock');
  const qemuSock = path.join(targetShare, 'migrationproxy', `${UID}-49152-source.sock`);
  await import('node:fs/promises').then((f) => f.mkdir(path.dirname(qemuSock), { recursive: true }));
  const gotLibvirt: string[] = [];
  const gotQemu: string[] = [];
  await hashServer(libvirtSock, gotLibvirt);
  await hashServer(qemuSock, gotQemu);

  const target = new MigrationProxyManager({ logger: quiet as never, bindAddress: '127.0.0.1' });
  const source = new MigrationProxyManager({ logger: quiet as never });
  await target.startTargetListener(UID, [libvirtSock, qemuSock]);
  const ports = target.targetListenerPorts(UID);
  expect(Object.values(ports).sort()).toEqual([0, 49152]);
  for (const p of Object.keys(ports)) expect(Number(p)).toBeGreaterThan(0);
  // idempotent for the same sockets: the same ports
  await target.startTargetListener(UID, [libvirtSock, qemuSock]);
  expect(target.targetListenerPorts(UID)).toEqual(ports);

  await source.startSourceListener(UID, '127.0.0.1', ports, sourceShare);
  // exactly the sockets upstream's launcher migrates to (cmd-protocol's upstreamMigrationTarget)
  const t = upstreamMigrationTarget(sourceShare, UID);
  const libvirtPath = t.targetURI.replace(/^qemu\+unix:\/\/\/session\?socket=/, '');
  const qemuPath = t.migrationURI.replace(/^unix:\/\//, '');
  expect(source.sourceListenerFiles(UID).sort()).toEqual([libvirtPath, qemuPath].sort());
  expect((await stat(libvirtPath)).isSocket()).toBe(true);

  const small = Buffer.from('libvirt rpc hello');
  const big = randomBytes(16 * 1024 * 1024);
  const [a, b] = await Promise.all([roundTrip(libvirtPath, small), roundTrip(qemuPath, big)]);
  expect(a).toBe(createHash('sha256').update(small).digest('hex'));
  expect(b).toBe(createHash('sha256').update(big).digest('hex'));
  expect(gotLibvirt).toEqual([a]);
  expect(gotQemu).toEqual([b]);
  // several connections at once on one socket (libvirt opens more than one)
  const many = await Promise.all([1, 2, 3, 4].map((i) => roundTrip(libvirtPath, Buffer.alloc(1000 * i, i))));
  expect(new Set(many).size).toBe(4);
  expect(source.openListenerCount() + target.openListenerCount()).toBe(4);
  // 6 connections through each side; the bytes both ways counted (16 MiB + the small ones in, hashes out)
  for (const m of [source, target]) {
    const st = m.proxyStats(UID);
    expect(st.connections).toBe(6);
    expect(st.bytesIn).toBe(small.length + big.length + 1000 * (1 + 2 + 3 + 4));
    expect(st.bytesOut).toBe(64 * 6);
  }

  await source.stopSourceListener(UID);
  await expect(stat(libvirtPath)).rejects.toMatchObject({ code: 'ENOENT' });
  await target.stopTargetListener(UID);
  expect(source.openListenerCount() + target.openListenerCount()).toBe(0);
  await expect(
    new Promise((resolve, reject) => {
      const c = net.connect({ host: '127.0.0.1', port: Number(Object.keys(ports)[0]) });
      c.on('connect', () => resolve(c.destroy()));
      c.on('error', reject);
    }),
  ).rejects.toMatchObject({ code: 'ECONNREFUSED' });
});

test("block migration: a third stream (49153, the target QEMU's NBD server) next to libvirt's and QEMU's", async () => {
  const targetShare = path.join(dir, 'target');
  const sourceShare = path.join(dir, 'source');
  const libvirtSock = path.join(dir, 'target-libvirt-sock');
  const sock = (port: number) => path.join(targetShare, 'migrationproxy', `${UID}-${port}-source.sock`);
  await import('node:fs/promises').then((f) =>
    f.mkdir(path.join(targetShare, 'migrationproxy'), { recursive: true }),
  );
  const got = { libvirt: [] as string[], qemu: [] as string[], nbd: [] as string[] };
  await hashServer(libvirtSock, got.libvirt);
  await hashServer(sock(49152), got.qemu);
  await hashServer(sock(49153), got.nbd);

  const target = new MigrationProxyManager({ logger: quiet as never, bindAddress: '127.0.0.1' });
  const source = new MigrationProxyManager({ logger: quiet as never });
  try {
    await target.startTargetListener(UID, [libvirtSock, sock(49152), sock(49153)]);
    const ports = target.targetListenerPorts(UID);
    expect(Object.values(ports).sort()).toEqual([0, 49152, 49153]);
    await source.startSourceListener(UID, '127.0.0.1', ports, sourceShare);
    // the launcher's disks_uri is the source socket of key <uid>-49153
    const t = upstreamMigrationTarget(sourceShare, UID);
    const nbdPath = t.disksURI.replace(/^unix:\/\//, '');
    expect(source.sourceListenerFiles(UID)).toContain(nbdPath);
    expect(source.sourceListenerFiles(UID)).toHaveLength(3);
    const disk = randomBytes(4 * 1024 * 1024);
    const hash = await roundTrip(nbdPath, disk);
    expect(hash).toBe(createHash('sha256').update(disk).digest('hex'));
    // only the NBD socket got it
    expect(got).toEqual({ libvirt: [], qemu: [], nbd: [hash] });
  } finally {
    await source.close();
    await target.close();
  }
});

test('a target that does not answer closes the source connection; new sockets replace old ones; no listeners after close()', async () => {
  const source = new MigrationProxyManager({ logger: quiet as never });
  const share = path.join(dir, 's');
  // nothing listens on the target port
  const free = await new Promise<number>((r) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => r(p));
    });
  });
  await source.startSourceListener(UID, '127.0.0.1', { [String(free)]: 0 }, share);
  const file = source.sourceListenerFiles(UID)[0]!;
  const closed = await new Promise<boolean>((resolve) => {
    const c = net.connect(file);
    c.on('close', () => resolve(true));
    c.on('error', () => undefined);
  });
  expect(closed).toBe(true);
  // another target address: the listener is replaced
  await source.startSourceListener(UID, '127.0.0.2', { [String(free)]: 49152 }, share);
  expect(source.sourceListenerFiles(UID)).toEqual([
    path.join(share, 'migrationproxy', `${UID}-49152-source.sock`),
  ]);
  await expect(stat(file)).rejects.toMatchObject({ code: 'ENOENT' });
  await source.close();
  expect(source.openListenerCount()).toBe(0);
  await expect(source.startSourceListener(UID, '127.0.0.1', { '1': 0 }, share)).rejects.toThrow(
    /shutting down/,
  );
  await expect(
    new MigrationProxyManager({ logger: quiet as never }).startSourceListener(UID, '127.0.0.1', {}, share),
  ).rejects.toThrow(/targetDirectMigrationNodePorts: empty/);
});

test('mutual TLS on the TCP leg: data intact through two handlers with certificates of the same CA; a plain or foreign client is refused', async () => {
  const ca = await openSslPki(dir);
  const nodeA = await ca.issue('virt-handler-a', 'serverAuth,clientAuth');
  const nodeB = await ca.issue('virt-handler-b', 'serverAuth,clientAuth');
  const stranger = await (await openSslPki(dir)).issue('stranger', 'serverAuth,clientAuth');
  const refused: string[] = [];
  const targetLog = {
    ...quiet,
    warn: (_m: string, meta: { reason: string }) => void refused.push(meta.reason),
  };
  const libvirtSock = path.join(dir, 'target-libvirt-sock');
  const qemuSock = path.join(dir, 'tq', 'migrationproxy', `${UID}-49152-source.sock`);
  await import('node:fs/promises').then((f) => f.mkdir(path.dirname(qemuSock), { recursive: true }));
  const got: string[] = [];
  await hashServer(libvirtSock, got);
  await hashServer(qemuSock, []);
  const target = new MigrationProxyManager({
    logger: targetLog as never,
    bindAddress: '127.0.0.1',
    tls: { ...nodeB, ca: ca.ca },
  });
  const source = new MigrationProxyManager({ logger: quiet as never, tls: { ...nodeA, ca: ca.ca } });
  await target.startTargetListener(UID, [libvirtSock, qemuSock]);
  const ports = target.targetListenerPorts(UID);
  await source.startSourceListener(UID, '127.0.0.1', ports, path.join(dir, 'src'));
  const libvirtPath = upstreamMigrationTarget(path.join(dir, 'src'), UID).targetURI.replace(
    /^qemu\+unix:\/\/\/session\?socket=/,
    '',
  );
  const big = randomBytes(4 * 1024 * 1024);
  const back = await roundTrip(libvirtPath, big);
  expect(back).toBe(createHash('sha256').update(big).digest('hex'));
  expect(got).toEqual([back]);
  expect(source.proxyStats(UID).bytesIn).toBe(big.length);

  const tcpPort = Number(Object.entries(ports).find(([, v]) => v === 0)![0]);
  // the TCP port does not speak plain TCP: a plain client gets no byte of the launcher's socket
  const plain = await new Promise<string>((resolve) => {
    const c = net.connect({ host: '127.0.0.1', port: tcpPort });
    let b = '';
    c.on('data', (d) => (b += d.toString('latin1')));
    c.on('close', () => resolve(b));
    c.on('error', () => undefined);
    c.end('hello');
  });
  expect(plain).not.toMatch(/^[0-9a-f]{64}$/);
  // a client certificate of another CA is refused in the handshake
  const tls = await import('node:tls');
  const foreign = await new Promise<string>((resolve) => {
    const c = tls.connect({
      host: '127.0.0.1',
      port: tcpPort,
      ...stranger,
      ca: ca.ca,
      checkServerIdentity: () => undefined,
    });
    c.on('secureConnect', () => c.end('x'));
    c.on('data', () => resolve('data'));
    c.on('error', (e) => resolve(`error: ${e.message}`));
    c.on('close', () => resolve('closed'));
  });
  expect(foreign).not.toBe('data');
  // the source refuses a target whose certificate is not of its CA
  const sourceOtherCa = new MigrationProxyManager({
    logger: quiet as never,
    tls: { ...nodeA, ca: stranger.cert },
  });
  await sourceOtherCa.startSourceListener(UID, '127.0.0.1', ports, path.join(dir, 'src2'));
  const libvirt2 = sourceOtherCa.sourceListenerFiles(UID).find((f) => !f.includes('-49152-'))!;
  const closed = await new Promise<string>((resolve) => {
    const c = net.connect(libvirt2);
    let b = '';
    c.on('data', (d) => (b += d));
    c.on('close', () => resolve(b));
    c.on('error', () => undefined);
    c.end('x');
  });
  expect(closed).toBe('');
  expect(got).toHaveLength(1); // nothing else reached the launcher's socket
  expect(refused.length).toBeGreaterThanOrEqual(1);
  await sourceOtherCa.close();
  await source.close();
  await target.close();
});

test("names, as deployed: the target serves virt-handler's server certificate and takes only a virt-handler-client certificate; the source takes only a target named virt-handler", async () => {
  const ca = await openSslPki(dir);
  const server = await ca.issue('virt-handler', 'serverAuth');
  const client = await ca.issue('virt-handler-client', 'clientAuth');
  const controllerClient = await ca.issue('virt-controller', 'clientAuth');
  const otherServer = await ca.issue('not-a-handler', 'serverAuth');
  const names = { clientName: 'virt-handler-client', serverName: 'virt-handler' };
  const refused: string[] = [];
  const targetLog = {
    ...quiet,
    warn: (_m: string, meta: { reason: string }) => void refused.push(meta.reason),
  };
  const deployed = (c: { cert: string; key: string }) => ({
    ...server,
    ca: ca.ca,
    clientCert: c.cert,
    clientKey: c.key,
    ...names,
  });
  const libvirtSock = path.join(dir, 'n-libvirt-sock');
  const got: string[] = [];
  await hashServer(libvirtSock, got);
  const target = new MigrationProxyManager({
    logger: targetLog as never,
    bindAddress: '127.0.0.1',
    tls: deployed(client),
  });
  await target.startTargetListener(UID, [libvirtSock]);
  const ports = target.targetListenerPorts(UID);
  const through = async (m: MigrationProxyManager, share: string): Promise<string> => {
    await m.startSourceListener(UID, '127.0.0.1', ports, share);
    const file = m.sourceListenerFiles(UID)[0]!;
    return new Promise<string>((resolve) => {
      const c = net.connect({ path: file, allowHalfOpen: true });
      let b = '';
      c.on('data', (d) => (b += d));
      c.on('close', () => resolve(b));
      c.on('error', () => undefined);
      c.end('ping');
    });
  };
  // the deployed pair: data passes
  const source = new MigrationProxyManager({ logger: quiet as never, tls: deployed(client) });
  expect(await through(source, path.join(dir, 'n1'))).toBe(createHash('sha256').update('ping').digest('hex'));
  // virt-controller's client certificate (same CA, other name) gets nothing
  const asController = new MigrationProxyManager({ logger: quiet as never, tls: deployed(controllerClient) });
  expect(await through(asController, path.join(dir, 'n2'))).toBe('');
  expect(refused).toContain('ClientNameRefused');
  // a target whose certificate carries another name (same CA) gets nothing from the source
  const wrongTarget = new MigrationProxyManager({
    logger: quiet as never,
    bindAddress: '127.0.0.1',
    tls: { ...deployed(client), ...otherServer },
  });
  await wrongTarget.startTargetListener('other', [libvirtSock]);
  const source2 = new MigrationProxyManager({ logger: quiet as never, tls: deployed(client) });
  await source2.startSourceListener(
    UID,
    '127.0.0.1',
    wrongTarget.targetListenerPorts('other'),
    path.join(dir, 'n3'),
  );
  const viaWrong = await new Promise<string>((resolve) => {
    const c = net.connect({ path: source2.sourceListenerFiles(UID)[0]!, allowHalfOpen: true });
    let b = '';
    c.on('data', (d) => (b += d));
    c.on('close', () => resolve(b));
    c.on('error', () => undefined);
    c.end('ping');
  });
  expect(viaWrong).toBe('');
  expect(got).toHaveLength(1);
  for (const m of [source, asController, source2, wrongTarget, target]) await m.close();
});

test('socket paths longer than sun_path (a Pod share dir under the pods dir) are bound and dialled through their directory', async () => {
  const deep = path.join(dir, 'volumes', 'kubernetes.io~empty-dir', 'public', 'x'.repeat(40));
  const targetSock = path.join(deep, 'target', 'migrationproxy', `${UID}-49152-source.sock`);
  await import('node:fs/promises').then((f) => f.mkdir(path.dirname(targetSock), { recursive: true }));
  expect(Buffer.byteLength(targetSock)).toBeGreaterThan(107);
  const got: string[] = [];
  // the launcher side binds its own short path; the handler sees it under the long one (a link to the dir)
  const shortDir = await mkdtemp(path.join(os.tmpdir(), 'l-'));
  await hashServer(path.join(shortDir, 's.sock'), got);
  await import('node:fs/promises').then((f) => f.rename(path.join(shortDir, 's.sock'), targetSock));
  const libvirt = path.join(dir, 'lv.sock');
  await hashServer(libvirt, []);
  const target = new MigrationProxyManager({ logger: quiet as never, bindAddress: '127.0.0.1' });
  const source = new MigrationProxyManager({ logger: quiet as never });
  await target.startTargetListener(UID, [libvirt, targetSock]);
  const srcShare = path.join(deep, 'source');
  await source.startSourceListener(UID, '127.0.0.1', target.targetListenerPorts(UID), srcShare);
  const files = source.sourceListenerFiles(UID);
  for (const f of files) {
    expect(Buffer.byteLength(f)).toBeGreaterThan(107);
    expect((await stat(f)).isSocket()).toBe(true);
  }
  const qemuFile = files.find((f) => f.includes('-49152-'))!;
  // a client reaches the long-named source socket through a short link to its dir (as the launcher's own path)
  const link = path.join(shortDir, 'mp');
  await import('node:fs/promises').then((f) => f.symlink(path.dirname(qemuFile), link));
  const data = randomBytes(256 * 1024);
  const back = await roundTrip(path.join(link, path.basename(qemuFile)), data);
  expect(back).toBe(createHash('sha256').update(data).digest('hex'));
  expect(got).toEqual([back]);
  await source.close();
  await target.close();
  await rm(shortDir, { recursive: true, force: true });
});
