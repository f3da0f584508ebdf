// console and vnc websockets end to end except QEMU: a client (ws, upstream's subprotocol) -> kube-apiserver
// (aggregation, front proxy) -> this package's server (authentication, SubjectAccessReview, validation) ->
// mutual TLS -> virt-handler's endpoint (@kubevirt-ts/handler) -> the unix sockets a launcher Pod's QEMU
// would serve, here in a temp dir laid out as the Pod's private emptyDir (<private>/<vmi uid>/virt-serial0,
// virt-vnc). The "serial port" echoes what it receives; the "VNC server" greets with RFB 003.008.
import { createHash } from 'node:crypto';
import { rm, symlink } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import WebSocket from 'ws';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { createLogger } from '@kubevirt-ts/log';
import { bindUserRoles, startStreamsTestStack, type StreamsTestStack } from './testing.js';

const NS = 'default';
const log = createLogger({ component: 'test', silent: true });

let stack: StreamsTestStack;
let admin: StreamsTestStack['admin'];
let privateDir: string;
/** what the fake serial port of each VMI received, and its open connections */
const serial = new Map<string, { got: Buffer[]; conns: Socket[] }>();
const vmis = new Map<string, VirtualMachineInstance>();
let aliceKc: KubeConfig;
let bobKc: KubeConfig;

beforeAll(async () => {
  stack = await startStreamsTestStack({ tmpPrefix: 'kvts-streams-', log, pingIntervalMs: 300 });
  ({ admin, privateDir } = stack);
  await bindUserRoles(admin, NS, [
    ['alice', 'kubevirt.io:view'],
    ['bob', 'kubevirt.io:edit'],
  ]);
  aliceKc = new KubeConfig();
  aliceKc.loadFromFile(await stack.api.userKubeconfig('alice'));
  bobKc = new KubeConfig();
  bobKc.loadFromFile(await stack.api.userKubeconfig('bob'));
}, 300000);

afterAll(async () => {
  for (const v of serial.values()) for (const c of v.conns) c.destroy();
  await stack?.stop();
});

/** a Running VMI on node-a whose "launcher" serves an echoing serial port and a VNC greeting */
async function runningVmi(
  name: string,
  devices: Record<string, unknown> = {},
  phase = 'Running',
): Promise<VirtualMachineInstance> {
  const vmi = await stack.createVmi(NS, name, { devices, phase });
  vmis.set(name, vmi);
  const rec = { got: [] as Buffer[], conns: [] as Socket[] };
  serial.set(name, rec);
  await stack.serveStreams(vmi, (c) => {
    rec.conns.push(c);
    c.on('data', (d: Buffer) => {
      rec.got.push(d);
      c.write(d); // a terminal echoes what is typed
    });
    c.on('error', () => undefined);
  });
  return vmi;
}

const url = (kc: KubeConfig, name: string, kind: string, search = '') =>
  `${kc.getCurrentCluster()!.server.replace(/^https/, 'wss')}/apis/subresources.kubevirt.io/v1/namespaces/${NS}/virtualmachineinstances/${name}/${kind}${search}`;

/** opens the websocket as kubectl's user in `kc` does; resolves the socket, or the refusal's status and body */
async function connect(
  kc: KubeConfig,
  name: string,
  kind: 'console' | 'vnc',
  search = '',
): Promise<WebSocket | { status: number; body: string }> {
  const opts: WebSocket.ClientOptions = {};
  await kc.applyToHTTPSOptions(opts);
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url(kc, name, kind, search), ['plain.kubevirt.io'], opts);
    ws.once('open', () => resolve(ws));
    ws.once('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    ws.once('error', reject);
  });
}
async function open(kc: KubeConfig, name: string, kind: 'console' | 'vnc', search = ''): Promise<WebSocket> {
  const r = await connect(kc, name, kind, search);
  if (!(r instanceof WebSocket)) throw new Error(`refused: ${r.status} ${r.body}`);
  return r;
}
async function refused(kc: KubeConfig, name: string, kind: 'console' | 'vnc', search = '') {
  const r = await connect(kc, name, kind, search);
  if (r instanceof WebSocket) {
    r.terminate();
    throw new Error('the websocket opened');
  }
  return r;
}
/** collects binary messages until `want` bytes have come, or until the text so far includes `want` */
function receive(ws: WebSocket, want: number | string): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const got: Buffer[] = [];
    let n = 0;
    const on = (d: Buffer, isBinary: boolean) => {
      if (!isBinary) reject(new Error('a text message: the streams are binary'));
      got.push(d);
      n += d.length;
      const done =
        typeof want === 'number' ? n >= want : Buffer.concat(got).toString('latin1').includes(want);
      if (done) {
        ws.off('message', on);
        resolve(Buffer.concat(got));
      }
    };
    ws.on('message', on);
  });
}

test("console: the subprotocol is upstream's, input reaches the serial port and its output comes back", async () => {
  await runningVmi('con1');
  const ws = await open(bobKc, 'con1', 'console');
  expect(ws.protocol).toBe('plain.kubevirt.io');
  const back = receive(ws, 'hello guest\r');
  ws.send(Buffer.from('hello guest\r'));
  expect((await back).toString()).toBe('hello guest\r');
  expect(Buffer.concat(serial.get('con1')!.got).toString()).toBe('hello guest\r');
  ws.close();
}, 600000);

test('console: backpressure — a client that stops reading stops the serial port, nothing is lost', async () => {
  await runningVmi('con2');
  const ws = await open(bobKc, 'con2', 'console');
  const rec = serial.get('con2')!;
  await new Promise((r) => setTimeout(r, 200));
  const port = rec.conns[0]!;
  // the client reads nothing while the serial port writes 64 MiB: the bridge must stop reading it
  ws.pause();
  const total = 64 << 20;
  const data = Buffer.alloc(total);
  for (let i = 0; i < total; i += 4) data.writeUInt32LE(i, i);
  let drained = false;
  port.write(data, () => (drained = true));
  // wait until the flow stops (the serial port's unsent bytes stay the same for a second)
  let last = -1;
  for (let i = 0; i < 60 && !drained && port.writableLength !== last; i++) {
    last = port.writableLength;
    await new Promise((r) => setTimeout(r, 1000));
  }
  // held back at the serial port, not read into memory somewhere on the way
  expect(drained).toBe(false);
  expect(port.writableLength).toBeGreaterThan(16 << 20);
  const all = receive(ws, total);
  ws.resume();
  const got = await all;
  expect(got.length).toBe(total);
  expect(createHash('sha256').update(got).digest('hex')).toBe(
    createHash('sha256').update(data).digest('hex'),
  );
  ws.close();
}, 600000);

test('console: a second connection closes the first, with the reason', async () => {
  await runningVmi('con3');
  const first = await open(bobKc, 'con3', 'console');
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    first.once('close', (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  const second = await open(bobKc, 'con3', 'console');
  expect(await closed).toEqual({ code: 1000, reason: 'another console connection to this VMI was opened' });
  const back = receive(second, 'x');
  second.send(Buffer.from('x'));
  expect((await back).toString()).toBe('x');
  second.close();
}, 600000);

test('console: an idle connection gets pings through the aggregator and stays open', async () => {
  await runningVmi('con4');
  const ws = await open(bobKc, 'con4', 'console');
  let pings = 0;
  ws.on('ping', () => pings++);
  await new Promise((r) => setTimeout(r, 2000));
  expect(pings).toBeGreaterThanOrEqual(2);
  expect(ws.readyState).toBe(WebSocket.OPEN);
  const back = receive(ws, 'still here');
  ws.send(Buffer.from('still here'));
  await back;
  ws.close();
}, 600000);

test('vnc: the VNC server greets with the RFB version; preserveSession refuses while one is open', async () => {
  await runningVmi('vnc1');
  const ws = await open(bobKc, 'vnc1', 'vnc');
  expect((await receive(ws, '\n')).toString()).toBe('RFB 003.008\n');
  const r = await refused(bobKc, 'vnc1', 'vnc', '?preserveSession=true');
  expect(r.status).toBe(500);
  expect(r.body).toMatch(/answered 503: Active VNC connection. Request denied./);
  ws.close();
}, 600000);

test("refusals: upstream's messages before anything is upgraded", async () => {
  const missing = await refused(bobKc, 'nope', 'console');
  expect(missing.status).toBe(404);
  expect(JSON.parse(missing.body)).toMatchObject({ kind: 'Status', reason: 'NotFound' });
  await runningVmi('noserial', { autoattachSerialConsole: false, autoattachGraphicsDevice: false });
  let r = await refused(bobKc, 'noserial', 'console');
  expect(r.status).toBe(400);
  expect(JSON.parse(r.body).message).toBe('No serial consoles are present.');
  r = await refused(bobKc, 'noserial', 'vnc');
  expect(r.status).toBe(400);
  expect(JSON.parse(r.body).message).toBe('No graphics devices are present.');
  await runningVmi('scheduled', {}, 'Scheduled');
  r = await refused(bobKc, 'scheduled', 'console');
  expect(r.status).toBe(400);
  expect(JSON.parse(r.body).message).toBe('VMI is not running');
  await runningVmi('failed', {}, 'Failed');
  r = await refused(bobKc, 'failed', 'console');
  expect(r.status).toBe(409);
  expect(JSON.parse(r.body).message).toMatch(/VMI is in failed status/);
  // a plain GET (no upgrade) is told what the endpoint is
  const plain = await admin
    .request('GET', `/apis/subresources.kubevirt.io/v1/namespaces/${NS}/virtualmachineinstances/con1/console`)
    .catch((e: { status: number; message: string }) => e);
  expect(plain).toMatchObject({ status: 400 });
}, 600000);

test('RBAC: kubevirt.io:view cannot open the console or VNC, edit can', async () => {
  await runningVmi('rbac1');
  for (const kind of ['console', 'vnc'] as const) {
    const r = await refused(aliceKc, 'rbac1', kind);
    expect(r.status).toBe(403);
    expect(JSON.parse(r.body).message).toContain(
      `User "alice" cannot get resource "virtualmachineinstances/${kind}" in API group "subresources.kubevirt.io"`,
    );
  }
  (await open(bobKc, 'rbac1', 'vnc')).close();
}, 600000);

test('virt-handler refuses a socket path the Pod turned into a symlink', async () => {
  const vmi = await runningVmi('planted');
  const uidDir = join(privateDir, vmi.metadata!.uid!);
  await rm(join(uidDir, 'virt-serial0'));
  // the "launcher" points its console at another socket (here: con1's) to make root connect there
  await symlink(
    join(privateDir, vmis.get('con1')!.metadata!.uid!, 'virt-serial0'),
    join(uidDir, 'virt-serial0'),
  );
  const before = serial.get('con1')!.conns.length;
  const r = await refused(bobKc, 'planted', 'console');
  expect(r.status).toBe(500);
  expect(r.body).toMatch(/virt-serial0 is not a unix socket: refused/);
  expect(serial.get('con1')!.conns.length).toBe(before);
}, 600000);
