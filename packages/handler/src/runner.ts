/**
 * A minimal adapter that drives a level-triggered `reconcile(key)` the way client-go's work queue
 * does (a key queued once however often it is added, never processed by two workers at once,
 * processed again if it changed meanwhile, per-key exponential backoff on failure). It is here only
 * until the shared control-plane queue lands; the handler uses nothing but `add`, `addAfter`,
 * `stop`, so swapping it is a few lines.
 */
export type Reconcile = (key: string) => Promise<void>;

export interface RunnerOptions {
  workers?: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
  onError?: (key: string, err: unknown) => void;
}

export class KeyedRunner {
  private queue: string[] = [];
  private queued = new Set<string>();
  private processing = new Set<string>();
  private dirty = new Set<string>();
  private failures = new Map<string, number>();
  private timers = new Set<NodeJS.Timeout>();
  private active = 0;
  private stopped = false;
  private idleWaiters: Array<() => void> = [];
  private readonly workers: number;
  private readonly base: number;
  private readonly max: number;

  constructor(
    private readonly reconcile: Reconcile,
    private readonly opts: RunnerOptions = {},
  ) {
    this.workers = opts.workers ?? 4;
    this.base = opts.baseDelayMs ?? 5;
    this.max = opts.maxDelayMs ?? 30_000;
  }

  add(key: string): void {
    if (this.stopped) return;
    if (this.processing.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.queue.push(key);
    this.pump();
  }

  addAfter(key: string, ms: number): void {
    if (this.stopped) return;
    const t = setTimeout(() => {
      this.timers.delete(t);
      this.add(key);
    }, ms);
    t.unref?.();
    this.timers.add(t);
  }

  /** Resolves when nothing is queued or running (timers not counted). */
  idle(): Promise<void> {
    if (this.active === 0 && this.queue.length === 0) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  stop(): void {
    this.stopped = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.queue = [];
    this.queued.clear();
  }

  private pump(): void {
    while (!this.stopped && this.active < this.workers && this.queue.length > 0) {
      const key = this.queue.shift()!;
      this.queued.delete(key);
      this.processing.add(key);
      this.active++;
      void this.run(key);
    }
  }

  private async run(key: string): Promise<void> {
    try {
      await this.reconcile(key);
      this.failures.delete(key);
    } catch (err) {
      const n = (this.failures.get(key) ?? 0) + 1;
      this.failures.set(key, n);
      this.opts.onError?.(key, err);
      this.addAfter(key, Math.min(this.max, this.base * 2 ** (n - 1)));
    } finally {
      this.processing.delete(key);
      this.active--;
      if (this.dirty.delete(key)) this.add(key);
      this.pump();
      if (this.active === 0 && this.queue.length === 0) for (const w of this.idleWaiters.splice(0)) w();
    }
  }
}
