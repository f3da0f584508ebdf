// A typed work queue with client-go's semantics (k8s.io/client-go/util/workqueue):
// - a key is queued once however often it is added before a worker takes it;
// - a key being processed is never handed to a second worker; if it is added meanwhile it is
//   queued again when the worker calls done();
// - addRateLimited backs off per key (exponential, 5 ms doubling up to 1000 s); forget resets it.

/** How long to wait before retrying a key, per key. */
export interface RateLimiter<K> {
  when(key: K): number;
  forget(key: K): void;
  numRequeues(key: K): number;
}

/** base * 2^failures ms, capped at max (client-go's ItemExponentialFailureRateLimiter: 5 ms .. 1000 s). */
export class ExponentialFailureRateLimiter<K> implements RateLimiter<K> {
  private readonly failures = new Map<K, number>();
  constructor(
    readonly baseMs = 5,
    readonly maxMs = 1_000_000,
  ) {}
  when(key: K): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    const d = this.baseMs * 2 ** n;
    return Number.isFinite(d) && d < this.maxMs ? d : this.maxMs;
  }
  forget(key: K): void {
    this.failures.delete(key);
  }
  numRequeues(key: K): number {
    return this.failures.get(key) ?? 0;
  }
}

export interface WorkQueueOptions<K> {
  rateLimiter?: RateLimiter<K>;
  /** injectable timers (tests) */
  setTimeout?: (fn: () => void, ms: number) => unknown;
  clearTimeout?: (handle: unknown) => void;
}

export class WorkQueue<K = string> {
  private readonly queue: K[] = [];
  /** keys that need processing (queued, or added while being processed) */
  private readonly dirty = new Set<K>();
  private readonly processing = new Set<K>();
  private readonly waiters: ((key: K | undefined) => void)[] = [];
  private readonly delayed = new Map<K, { at: number; handle: unknown }>();
  private shutting = false;
  readonly rateLimiter: RateLimiter<K>;
  private readonly setT: (fn: () => void, ms: number) => unknown;
  private readonly clearT: (handle: unknown) => void;

  constructor(opts: WorkQueueOptions<K> = {}) {
    this.rateLimiter = opts.rateLimiter ?? new ExponentialFailureRateLimiter<K>();
    this.setT =
      opts.setTimeout ??
      ((fn, ms) => {
        const t = setTimeout(fn, ms);
        t.unref?.();
        return t;
      });
    this.clearT = opts.clearTimeout ?? ((h) => clearTimeout(h as NodeJS.Timeout));
  }

  /** Queue `key` (a no-op if it is already queued; deferred until done() if it is being processed). */
  add(key: K): void {
    if (this.shutting || this.dirty.has(key)) return;
    this.dirty.add(key);
    if (this.processing.has(key)) return;
    this.push(key);
  }

  /** Queue `key` after `ms`; an earlier pending delayed add of the same key wins. */
  addAfter(key: K, ms: number): void {
    if (this.shutting) return;
    if (ms <= 0) return this.add(key);
    const at = Date.now() + ms;
    const prev = this.delayed.get(key);
    if (prev && prev.at <= at) return;
    if (prev) this.clearT(prev.handle);
    const handle = this.setT(() => {
      this.delayed.delete(key);
      this.add(key);
    }, ms);
    this.delayed.set(key, { at, handle });
  }

  /** Queue `key` after its per-key backoff (which grows with each call until forget()). */
  addRateLimited(key: K): void {
    this.addAfter(key, this.rateLimiter.when(key));
  }

  /** Reset the backoff of `key` (call after it was processed successfully). */
  forget(key: K): void {
    this.rateLimiter.forget(key);
  }

  numRequeues(key: K): number {
    return this.rateLimiter.numRequeues(key);
  }

  /** The next key to process, waiting for one; undefined once the queue is shut down. */
  get(): Promise<K | undefined> {
    if (this.queue.length > 0) return Promise.resolve(this.take());
    if (this.shutting) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** The worker finished `key`; if it was added meanwhile it is queued again. */
  done(key: K): void {
    this.processing.delete(key);
    if (this.dirty.has(key)) this.push(key);
  }

  /** Keys waiting to be processed. */
  len(): number {
    return this.queue.length;
  }

  /** Keys being processed right now. */
  inFlight(): number {
    return this.processing.size;
  }

  isShuttingDown(): boolean {
    return this.shutting;
  }

  /** Stop handing out keys: waiting get() calls resolve with undefined; delayed adds are dropped. */
  shutDown(): void {
    this.shutting = true;
    for (const { handle } of this.delayed.values()) this.clearT(handle);
    this.delayed.clear();
    for (const w of this.waiters.splice(0)) w(undefined);
  }

  private push(key: K): void {
    const w = this.waiters.shift();
    if (w) {
      this.dirty.delete(key);
      this.processing.add(key);
      w(key);
    } else this.queue.push(key);
  }

  private take(): K {
    const key = this.queue.shift()!;
    this.dirty.delete(key);
    this.processing.add(key);
    return key;
  }
}

export interface WorkerLogger {
  error(msg: string, meta?: Record<string, unknown>): unknown;
}

/**
 * Run `n` workers on `queue`: each takes a key, awaits `handler(key)`, forgets the key's backoff on
 * success, re-adds it rate-limited on error. Resolves when the queue is shut down and workers are idle.
 */
export async function runWorkers<K>(
  queue: WorkQueue<K>,
  n: number,
  handler: (key: K) => Promise<void>,
  log?: WorkerLogger,
): Promise<void> {
  const worker = async (): Promise<void> => {
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      try {
        await handler(key);
        queue.forget(key);
      } catch (e) {
        log?.error('reconcile failed, retrying with backoff', {
          key: String(key),
          requeues: queue.numRequeues(key),
          reason: e instanceof Error ? e.message : String(e),
        });
        queue.addRateLimited(key);
      } finally {
        queue.done(key);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, n) }, worker));
}
