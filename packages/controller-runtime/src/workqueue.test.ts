import { ExponentialFailureRateLimiter, WorkQueue, runWorkers } from './workqueue.js';

/** fake timers: fire() runs every timer due by `now` */
function fakeTimers() {
  let now = 0;
  let seq = 0;
  const timers = new Map<number, { at: number; fn: () => void }>();
  return {
    setTimeout: (fn: () => void, ms: number) => {
      const id = ++seq;
      timers.set(id, { at: now + ms, fn });
      return id;
    },
    clearTimeout: (h: unknown) => void timers.delete(h as number),
    advance(ms: number) {
      now += ms;
      for (const [id, t] of [...timers].sort((a, b) => a[1].at - b[1].at))
        if (t.at <= now) {
          timers.delete(id);
          t.fn();
        }
    },
    pending: () => timers.size,
  };
}

describe('WorkQueue', () => {
  it('queues a key once however often it is added', async () => {
    const q = new WorkQueue<string>();
    q.add('a');
    q.add('b');
    q.add('a');
    q.add('a');
    expect(q.len()).toBe(2);
    expect(await q.get()).toBe('a');
    expect(await q.get()).toBe('b');
    expect(q.len()).toBe(0);
  });

  it('never hands a key being processed to a second worker, and re-queues it after done() if it changed', async () => {
    const q = new WorkQueue<string>();
    q.add('a');
    const k = await q.get();
    expect(k).toBe('a');
    q.add('a'); // changed while processing
    q.add('a');
    expect(q.len()).toBe(0); // not handed out while in flight
    let second: string | undefined;
    const waiting = q.get().then((x) => (second = x));
    await Promise.resolve();
    expect(second).toBeUndefined();
    q.done('a');
    await waiting;
    expect(second).toBe('a');
    q.done('a');
    expect(q.len()).toBe(0);
  });

  it('does not re-queue a key after done() when nothing was added meanwhile', async () => {
    const q = new WorkQueue<string>();
    q.add('a');
    await q.get();
    q.done('a');
    expect(q.len()).toBe(0);
    expect(q.inFlight()).toBe(0);
  });

  it('addAfter queues after the delay; the earlier of two delayed adds wins', () => {
    const t = fakeTimers();
    const q = new WorkQueue<string>({ setTimeout: t.setTimeout, clearTimeout: t.clearTimeout });
    q.addAfter('a', 100);
    q.addAfter('a', 50);
    q.addAfter('a', 200); // later: ignored
    expect(q.len()).toBe(0);
    t.advance(49);
    expect(q.len()).toBe(0);
    t.advance(1);
    expect(q.len()).toBe(1);
    t.advance(1000);
    expect(q.len()).toBe(1);
  });

  it('addRateLimited backs off per key 5 ms doubling, forget resets', () => {
    const t = fakeTimers();
    const q = new WorkQueue<string>({ setTimeout: t.setTimeout, clearTimeout: t.clearTimeout });
    const delays: number[] = [];
    for (let i = 0; i < 4; i++) {
      q.addRateLimited('a');
      let waited = 0;
      while (q.len() === 0) {
        t.advance(1);
        waited++;
      }
      delays.push(waited);
      void q.get();
      q.done('a');
    }
    expect(delays).toEqual([5, 10, 20, 40]);
    expect(q.numRequeues('a')).toBe(4);
    q.forget('a');
    expect(q.numRequeues('a')).toBe(0);
    q.addRateLimited('b'); // other keys have their own backoff
    expect(q.numRequeues('b')).toBe(1);
  });

  it('rate limiter caps at 1000 s', () => {
    const rl = new ExponentialFailureRateLimiter<string>();
    let d = 0;
    for (let i = 0; i < 40; i++) d = rl.when('x');
    expect(d).toBe(1_000_000);
    expect(rl.when('y')).toBe(5);
  });

  it('shutDown releases waiting workers and drops delayed adds', async () => {
    const t = fakeTimers();
    const q = new WorkQueue<string>({ setTimeout: t.setTimeout, clearTimeout: t.clearTimeout });
    q.addAfter('a', 10);
    const w = q.get();
    q.shutDown();
    expect(await w).toBeUndefined();
    expect(t.pending()).toBe(0);
    q.add('b');
    expect(q.len()).toBe(0);
  });

  it('runWorkers: one key is never processed by two workers at once; errors retry with backoff', async () => {
    const q = new WorkQueue<string>({ rateLimiter: new ExponentialFailureRateLimiter(1, 10) });
    const active = new Set<string>();
    let overlap = false;
    const calls: Record<string, number> = {};
    for (const k of ['a', 'b', 'c', 'fail', 'a', 'b']) q.add(k);
    const done = runWorkers(q, 4, async (key) => {
      if (active.has(key)) overlap = true;
      active.add(key);
      calls[key] = (calls[key] ?? 0) + 1;
      await new Promise((r) => setTimeout(r, 2));
      if (key === 'a' && calls[key] < 3) q.add('a'); // changed while processing
      active.delete(key);
      if (key === 'fail' && calls[key] < 3) throw new Error('boom');
    });
    while ((calls['fail'] ?? 0) < 3 || (calls['a'] ?? 0) < 3 || q.len() > 0 || q.inFlight() > 0)
      await new Promise((r) => setTimeout(r, 5));
    q.shutDown();
    await done;
    expect(overlap).toBe(false);
    expect(calls).toEqual({ a: 3, b: 1, c: 1, fail: 3 });
    expect(q.numRequeues('fail')).toBe(0); // forgotten after the success
  });
});
