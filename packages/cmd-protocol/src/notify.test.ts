// NotifyClient (launcher side) -> NotifyServer (handler side) over real unix sockets.
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { NotifyClient, type NotifyClientOptions } from './notify-client.js';
import { NotifyServer, type DomainEvent } from './notify-server.js';
import { NotifyClient as GenNotifyClient } from './gen/kubevirt/notify/v1/notify.js';
import { ensureSocketDir, notifySocketPath, unixTarget } from './sockets.js';
import { quietLogger, tempDir, waitFor } from './test-util.js';
import type { DomainModel } from './upstream/domain-json.js';
import type { K8sEventModel } from './upstream/k8s-event.js';

let dir: string;
let cleanup: () => Promise<void>;
let path: string;
const toStop: Array<{ stop(): Promise<void> } | { close(): void }> = [];
beforeEach(async () => {
  ({ dir, cleanup } = await tempDir());
  path = notifySocketPath(join(dir, 'handler'));
});
afterEach(async () => {
  for (const x of toStop.splice(0).reverse()) await ('stop' in x ? x.stop() : x.close());
  await cleanup();
});

interface Handler {
  server: NotifyServer;
  domains: DomainEvent[];
  events: unknown[];
}

async function handler(opts: { failDomain?: (e: DomainEvent) => boolean } = {}): Promise<Handler> {
  const h: Handler = { domains: [], events: [] } as unknown as Handler;
  h.server = new NotifyServer({
    socketPath: path,
    logger: quietLogger,
    onDomainEvent: (e) => {
      if (opts.failDomain?.(e)) throw new Error('handler cannot take this one');
      h.domains.push(e);
    },
    onK8sEvent: async (e) => void h.events.push(e),
  });
  await h.server.start();
  toStop.push(h.server);
  return h;
}

function client(opts: NotifyClientOptions = {}): NotifyClient {
  const c = new NotifyClient(path, {
    logger: quietLogger,
    initialBackoffMs: 20,
    maxBackoffMs: 200,
    watchIntervalMs: 100,
    ...opts,
  });
  toStop.push(c);
  return c;
}

// a domain as the handler decodes it; the generation travels in the status reason
const dom = (name: string, gen: number): DomainModel => ({
  kind: 'Domain',
  apiVersion: 'kubevirt.io/v1',
  metadata: { name, namespace: 'default' },
  domainName: `default_${name}`,
  status: { status: 'Running', reason: `g${gen}` },
});
const genOf = (d: DomainModel | undefined) => Number(d?.status.reason.slice(1));
const ev = (reason: string): K8sEventModel => ({ type: 'Normal', reason, message: '' });

test('domain and k8s events arrive decoded', async () => {
  const h = await handler();
  const c = client();
  c.sendDomainEvent({ eventType: 'ADDED', domain: dom('a', 1) });
  c.sendDomainEvent({ eventType: 'ERROR', domain: dom('b', 1), status: { message: 'boom' }, key: 'b' });
  c.sendK8sEvent({ type: 'Normal', reason: 'Created', message: 'VirtualMachineInstance defined.' });
  expect(await c.flush(5000)).toBe(true);
  expect(h.domains).toEqual([
    { eventType: 'ADDED', domain: dom('a', 1) },
    { eventType: 'ERROR', domain: dom('b', 1), status: { message: 'boom' } },
  ]);
  expect(h.events).toEqual([
    { type: 'Normal', reason: 'Created', message: 'VirtualMachineInstance defined.' },
  ]);
  expect(c.stats()).toMatchObject({ pendingDomains: 0, queuedEvents: 0, delivered: 3, droppedEvents: 0 });
});

test('while the handler is away: retries with backoff, keeps only the latest state per domain and a bounded event queue', async () => {
  const c = client({ maxQueuedEvents: 10, initialBackoffMs: 50, maxBackoffMs: 200 });
  for (let i = 1; i <= 50; i++) c.sendDomainEvent({ eventType: 'MODIFIED', domain: dom('a', i) });
  c.sendDomainEvent({ eventType: 'ADDED', domain: dom('b', 1) });
  for (let i = 1; i <= 25; i++) c.sendK8sEvent(ev(`r${i}`));
  expect(c.stats()).toMatchObject({ pendingDomains: 2, queuedEvents: 10, droppedEvents: 15 });
  await sleep(1000);
  const failed = c.stats().failedAttempts;
  expect(failed).toBeGreaterThanOrEqual(3); // it kept trying...
  expect(failed).toBeLessThan(30); // ...but backed off (no busy loop)

  const h = await handler();
  expect(await c.flush(5000)).toBe(true);
  expect(h.domains.map((e) => [e.eventType, e.domain!.metadata.name, genOf(e.domain)])).toEqual([
    ['MODIFIED', 'a', 50],
    ['ADDED', 'b', 1],
  ]);
  expect(h.events).toEqual(Array.from({ length: 10 }, (_, i) => ev(`r${i + 16}`)));
});

test('after the handler restarts, the current state of every domain is delivered again', async () => {
  const h1 = await handler();
  const c = client();
  c.sendDomainEvent({ eventType: 'ADDED', domain: dom('a', 1) });
  c.sendDomainEvent({ eventType: 'MODIFIED', domain: dom('a', 2) });
  c.sendDomainEvent({ eventType: 'ADDED', domain: dom('gone', 1) });
  c.sendDomainEvent({ eventType: 'DELETED', domain: dom('gone', 2) });
  expect(await c.flush(5000)).toBe(true);
  expect(h1.domains.at(-1)).toMatchObject({ eventType: 'DELETED' });

  await h1.server.stop();
  await sleep(300);
  const h2 = await handler(); // a new handler process: knows nothing
  // Nothing new is sent: the client notices the reconnect on its own.
  await waitFor(() => h2.domains.length > 0, 'resent domain state');
  await c.flush(5000);
  expect(h2.domains).toEqual([{ eventType: 'MODIFIED', domain: dom('a', 2) }]); // deleted domains are not resurrected
  expect(c.stats().resyncs).toBeGreaterThanOrEqual(1);
});

test('a send during the outage is delivered, and unchanged domains are resent too', async () => {
  const h1 = await handler();
  const c = client({ watchIntervalMs: 60_000 }); // rely on the send path only
  c.sendDomainEvent({ eventType: 'ADDED', domain: dom('a', 1) });
  c.sendDomainEvent({ eventType: 'ADDED', domain: dom('b', 1) });
  expect(await c.flush(5000)).toBe(true);
  await h1.server.stop();
  c.sendDomainEvent({ eventType: 'MODIFIED', domain: dom('a', 2) });
  await sleep(200);
  const h2 = await handler();
  expect(await c.flush(5000)).toBe(true);
  const seen = h2.domains.map((e) => e.domain!.metadata.name + genOf(e.domain));
  expect(seen.sort()).toEqual(['a2', 'b1']);
});

test('an event the handler rejects is not retried forever', async () => {
  const h = await handler({ failDomain: (e) => e.eventType === 'MODIFIED' });
  const c = client();
  c.sendDomainEvent({ eventType: 'MODIFIED', domain: dom('a', 1) });
  c.sendDomainEvent({ eventType: 'ADDED', domain: dom('b', 1) });
  expect(await c.flush(5000)).toBe(true);
  expect(h.domains.map((e) => e.eventType)).toEqual(['ADDED']);
  expect(c.stats()).toMatchObject({ delivered: 2, pendingDomains: 0 });
});

test('NotifyServer answers success:false for bad input instead of crashing', async () => {
  const h = await handler();
  const raw = new GenNotifyClient(unixTarget(path), grpc.credentials.createInsecure());
  toStop.push(raw);
  const domainEvent = (req: { domainJSON?: Buffer; statusJSON?: Buffer; eventType?: string }) =>
    new Promise<{ success: boolean; message: string }>((resolve, reject) =>
      raw.handleDomainEvent(
        { domainJSON: Buffer.alloc(0), statusJSON: Buffer.alloc(0), eventType: '', ...req },
        (err, res) => (err ? reject(err) : resolve(res)),
      ),
    );
  expect(await domainEvent({ eventType: 'BOOKMARK', domainJSON: Buffer.from('{}') })).toEqual({
    success: false,
    message: 'eventType: must be one of ADDED, MODIFIED, DELETED, ERROR, got "BOOKMARK"',
  });
  expect(await domainEvent({ eventType: 'ADDED', domainJSON: Buffer.from('{"a":') })).toMatchObject({
    success: false,
    message: expect.stringMatching(/^domainJSON: not valid JSON/),
  });
  // JSON that is not a domain (no ObjectMeta.name, no Spec.Name)
  expect(await domainEvent({ eventType: 'ADDED', domainJSON: Buffer.from('{"kind":"Domain"}') })).toEqual({
    success: false,
    message: 'domainJSON: domain JSON: neither ObjectMeta.name nor Spec.Name is set',
  });
  const k8s = (eventJSON: Buffer) =>
    new Promise<{ success: boolean; message: string }>((resolve, reject) =>
      raw.handleK8SEvent({ eventJSON }, (err, res) => (err ? reject(err) : resolve(res))),
    );
  expect(await k8s(Buffer.alloc(0))).toEqual({ success: false, message: 'eventJSON: missing' });
  expect(await k8s(Buffer.from('{"type":"Normal","message":"no reason"}'))).toEqual({
    success: false,
    message: 'eventJSON: reason is missing',
  });
  expect(await k8s(Buffer.from('{"reason":"ok"}'))).toEqual({ success: true, message: '' });
  expect(h.domains).toEqual([]);
  expect(h.events).toEqual([{ type: 'Normal', reason: 'ok', message: '' }]);
});

test('close() stops delivery: flush reports false, further sends throw', async () => {
  const c = client();
  c.sendK8sEvent(ev('x'));
  const flushed = c.flush(5000);
  c.close();
  expect(await flushed).toBe(false);
  expect(() => c.sendK8sEvent(ev('y'))).toThrow(/closed/);
});

test('one handler serves many launchers at once', async () => {
  const h = await handler();
  const clients = Array.from({ length: 20 }, () => client());
  clients.forEach((c, i) => {
    for (let g = 1; g <= 5; g++) c.sendDomainEvent({ eventType: 'MODIFIED', domain: dom(`vm${i}`, g) });
    c.sendK8sEvent(ev(`Started-${i}`));
  });
  expect(await Promise.all(clients.map((c) => c.flush(10_000)))).toEqual(clients.map(() => true));
  // Per launcher: the last state (earlier ones may or may not have gone out before being replaced).
  for (let i = 0; i < 20; i++) {
    const mine = h.domains.filter((e) => e.domain!.metadata.name === `vm${i}`);
    expect(genOf(mine.at(-1)!.domain)).toBe(5);
  }
  expect(h.events.length).toBe(20);
}, 30_000);

test('a flapping handler still ends with the last word', async () => {
  const c = client({ initialBackoffMs: 10, maxBackoffMs: 100 });
  let gen = 0;
  const sender = setInterval(
    () => c.sendDomainEvent({ eventType: 'MODIFIED', domain: dom('vm', ++gen) }),
    15,
  );
  const seen: number[] = [];
  try {
    for (let round = 0; round < 5; round++) {
      const h = await handler();
      await sleep(100 + round * 20);
      seen.push(...h.domains.map((e) => genOf(e.domain)));
      await h.server.stop();
      await sleep(60);
    }
  } finally {
    clearInterval(sender);
  }
  const last = await handler();
  expect(await c.flush(10_000)).toBe(true);
  await waitFor(() => last.domains.length > 0, 'final state');
  const finalGen = genOf(last.domains.at(-1)!.domain);
  expect(finalGen).toBe(gen);
  // Each handler instance saw increasing generations (no stale state after a newer one).
  expect(seen.length).toBeGreaterThan(0);
  for (let i = 1; i < last.domains.length; i++) {
    const g = (e: DomainEvent) => genOf(e.domain);
    expect(g(last.domains[i]!)).toBeGreaterThanOrEqual(g(last.domains[i - 1]!));
  }
});

test('a handler that accepts but never answers: calls time out and are retried until a real one is there', async () => {
  await ensureSocketDir(join(dir, 'handler'));
  const held: Socket[] = [];
  const mute = createServer((s) => void held.push(s));
  await new Promise<void>((r) => mute.listen(path, r));
  const c = client({ callTimeoutMs: 200, initialBackoffMs: 20, maxBackoffMs: 50 });
  c.sendDomainEvent({ eventType: 'ADDED', domain: dom('a', 1) });
  try {
    await waitFor(() => c.stats().failedAttempts >= 2, 'timed-out attempts');
    expect(c.stats().pendingDomains).toBe(1);
  } finally {
    for (const s of held) s.destroy();
    await new Promise<void>((r) => mute.close(() => r()));
  }
  const h = await handler();
  expect(await c.flush(10_000)).toBe(true);
  expect(h.domains).toEqual([{ eventType: 'ADDED', domain: dom('a', 1) }]);
});
