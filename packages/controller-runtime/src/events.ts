// Kubernetes Events (core/v1) as client-go's EventRecorder writes them: fire and forget (a reconcile never
// waits for or fails on an event), and a repeat of the same event on the same object within the
// aggregation window patches `count` and `lastTimestamp` instead of creating another object.
import type { Logger } from '@kubevirt-ts/log';
import { isAlreadyExists, isNotFound, type KubeClient, type KubeObject, type Resource } from './client.js';

export const EVENTS: Resource = { group: '', version: 'v1', plural: 'events', namespaced: true };

/** the object an event is about: enough of it to name it */
export interface EventSubject {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; uid?: string; resourceVersion?: string };
}

export interface EventRecorderOptions {
  client: KubeClient;
  /** source.component and reportingComponent, e.g. virt-controller */
  component: string;
  /** reportingInstance (the Pod or node name) */
  instance?: string;
  log?: Logger;
  /** repeats within this window are counted on the first event (default 10 min) */
  aggregateWindowMs?: number;
  /** how many distinct events are remembered for aggregation (default 4096, as client-go's cache) */
  cacheSize?: number;
  /**
   * event writes sent at a time (default 1, as client-go's broadcaster, which writes them one by one): events are
   * informational, so they do not compete with the controller's own writes for the API server
   */
  maxInFlight?: number;
  /** events waiting to be written beyond which new ones are dropped with a warning (default 1000, as client-go) */
  maxQueued?: number;
}

interface Seen {
  name: string;
  namespace: string;
  count: number;
  first: number;
  /** the last write of this event: the next one waits for it */
  chain: Promise<void>;
}

const MAX_MESSAGE = 1024;
const ts = (ms: number) => new Date(ms).toISOString().replace(/\.\d+Z$/, 'Z');

export class EventRecorder {
  private readonly seen = new Map<string, Seen>();
  private readonly inFlight = new Set<Promise<void>>();
  private seq = 0;
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  /** events written (creates + patches), for tests and benchmarks */
  written = 0;
  /** events dropped because too many were waiting */
  dropped = 0;

  /** runs `fn` when fewer than maxInFlight writes are being sent */
  private async limited(fn: () => Promise<void>): Promise<void> {
    if (this.active >= (this.o.maxInFlight ?? 1)) await new Promise<void>((r) => this.waiting.push(r));
    this.active++;
    try {
      await fn();
    } finally {
      this.active--;
      this.waiting.shift()?.();
    }
  }

  constructor(private readonly o: EventRecorderOptions) {}

  /**
   * Records an event about `obj` (in the background). Cluster-scoped objects (Nodes) get it in `default`.
   * Writes for the same event are chained, so a repeat patches the event its first write created.
   */
  event(obj: EventSubject, type: 'Normal' | 'Warning', reason: string, message: string): void {
    const m = obj.metadata ?? {};
    if (this.inFlight.size >= (this.o.maxQueued ?? 1000)) {
      this.dropped++;
      this.o.log?.warn('dropping an event: too many waiting to be written', {
        reason,
        object: `${obj.kind}/${m.namespace ?? ''}/${m.name ?? ''}`,
      });
      return;
    }
    const namespace = m.namespace || 'default';
    const msg = message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE - 3)}...` : message;
    const key = JSON.stringify([obj.kind, namespace, m.name, m.uid, type, reason, msg]);
    const now = Date.now();
    const prev = this.seen.get(key);
    let write: () => Promise<void>;
    let entry: Seen;
    if (prev && now - prev.first < (this.o.aggregateWindowMs ?? 10 * 60_000)) {
      entry = prev;
      const count = ++prev.count;
      this.seen.delete(key); // most recently used last
      write = async () => {
        try {
          this.written++;
          await this.o.client.patch(
            EVENTS,
            entry.namespace,
            entry.name,
            { count, lastTimestamp: ts(now) },
            'merge',
          );
        } catch (e) {
          if (!isNotFound(e)) throw e;
          // expired by the API server (its TTL): a new event
          await this.create(obj, entry, type, reason, msg, now, count);
        }
      };
    } else {
      const name = `${m.name ?? 'object'}.${(BigInt(now) * 1_000_000n + BigInt(this.seq++ % 1_000_000)).toString(16)}`;
      entry = { name, namespace, count: 1, first: now, chain: Promise.resolve() };
      write = () => this.create(obj, entry, type, reason, msg, now, 1);
    }
    this.seen.set(key, entry);
    while (this.seen.size > (this.o.cacheSize ?? 4096)) this.seen.delete(this.seen.keys().next().value!);
    const p = entry.chain
      .then(() => this.limited(write))
      .catch((e: unknown) => {
        this.o.log?.warn('could not record an event', {
          reason,
          object: `${obj.kind}/${m.namespace ?? ''}/${m.name ?? ''}`,
          error: e instanceof Error ? e.message : String(e),
        });
      })
      .finally(() => {
        this.inFlight.delete(p);
      });
    entry.chain = p;
    this.inFlight.add(p);
  }

  /** waits for the events being written */
  async flush(): Promise<void> {
    while (this.inFlight.size) await Promise.all([...this.inFlight]);
  }

  private async create(
    obj: EventSubject,
    entry: Seen,
    type: string,
    reason: string,
    message: string,
    now: number,
    count: number,
  ): Promise<void> {
    const m = obj.metadata ?? {};
    const body: KubeObject & Record<string, unknown> = {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: entry.name, namespace: entry.namespace },
      involvedObject: {
        apiVersion: obj.apiVersion,
        kind: obj.kind,
        name: m.name,
        namespace: m.namespace,
        uid: m.uid,
        resourceVersion: m.resourceVersion,
      },
      type,
      reason,
      message,
      source: { component: this.o.component },
      firstTimestamp: ts(now),
      lastTimestamp: ts(now),
      count,
      reportingComponent: this.o.component,
      reportingInstance: this.o.instance ?? '',
    };
    this.written++;
    try {
      await this.o.client.create(EVENTS, entry.namespace, body);
    } catch (e) {
      if (!isAlreadyExists(e)) throw e;
      // an event of that name from an earlier life of this process: a new name
      entry.name = `${entry.name}-${this.seq++}`;
      await this.o.client.create(EVENTS, entry.namespace, {
        ...body,
        metadata: { ...body.metadata, name: entry.name },
      });
    }
  }
}
