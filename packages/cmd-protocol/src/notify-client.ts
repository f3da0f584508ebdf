import * as grpc from '@grpc/grpc-js';
import { NotifyService, type Response } from './gen/kubevirt/notify/v1/notify.js';
import { UNIX_CHANNEL_OPTIONS } from './grpc-util.js';
import { createLogger, type Logger } from '@kubevirt-ts/log';
import type { DomainEventType } from './notify-server.js';
import { checkSocketPath, unixTarget } from './sockets.js';
import { toUpstreamDomain, type DomainModel } from './upstream/domain-json.js';
import { toUpstreamK8sEvent, type K8sEventModel } from './upstream/k8s-event.js';

export interface NotifyClientOptions {
  /** At most this many k8s events wait for delivery; the oldest are dropped beyond it (default 100). */
  maxQueuedEvents?: number;
  /** Retry backoff while the handler is away: starts here, doubles up to maxBackoffMs (defaults 100 / 5000). */
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  /** Deadline of each notify call (default 5000 ms). */
  callTimeoutMs?: number;
  /** How often the connection is checked for a handler restart (default 1000 ms). */
  watchIntervalMs?: number;
  logger?: Logger;
}

export interface DomainEventInput {
  eventType: DomainEventType;
  /** The domain; sent as domainJSON in upstream's shape (api.Domain, see upstream/domain-json.ts). */
  domain?: DomainModel;
  /** ERROR events: a metav1.Status (`{status: "Failure", message, reason, code}`), sent as statusJSON. */
  status?: unknown;
  /**
   * Which domain this is; only its latest state is kept. Default: metadata.namespace/metadata.name
   * of `domain`, else spec.name, else "".
   */
  key?: string;
}

export interface NotifyClientStats {
  /** Domains whose latest state is not delivered yet. */
  pendingDomains: number;
  /** k8s events waiting for delivery. */
  queuedEvents: number;
  /** k8s events dropped because the queue was full. */
  droppedEvents: number;
  /** Calls the handler answered (success or not). */
  delivered: number;
  /** Calls that failed on the transport and were retried. */
  failedAttempts: number;
  /** Times the current domain state was queued again after a reconnect. */
  resyncs: number;
}

interface DomainState {
  event: DomainEventInput;
  version: number;
  delivered: boolean;
}

const READY = grpc.connectivityState.READY;
const SHUTDOWN = grpc.connectivityState.SHUTDOWN;

/**
 * The launcher's notify client. `sendDomainEvent` / `sendK8sEvent` never block and never throw on
 * transport problems: delivery runs in the background, retried with exponential backoff while the
 * handler is away. Only the latest state per domain is kept, k8s events wait in a bounded FIFO.
 * After the connection is lost and comes back (e.g. the handler restarted) the current state of
 * every domain is sent again, so the handler always gets the last word.
 */
export class NotifyClient {
  readonly socketPath: string;
  private readonly client: grpc.Client;
  private readonly log: Logger;
  private readonly maxQueued: number;
  private readonly initialBackoff: number;
  private readonly maxBackoff: number;
  private readonly callTimeout: number;
  private readonly watchInterval: number;
  private readonly states = new Map<string, DomainState>();
  private readonly events: unknown[] = [];
  private readonly counters = { droppedEvents: 0, delivered: 0, failedAttempts: 0, resyncs: 0 };
  private version = 0;
  private pumping = false;
  private closed = false;
  private lost = false;
  private everReady = false;
  private watching = false;
  /** Ends the current backoff sleep early (on close). */
  private wake: (() => void) | undefined;
  private idleWaiters: Array<(idle: boolean) => void> = [];

  constructor(socketPath: string, opts: NotifyClientOptions = {}) {
    checkSocketPath(socketPath);
    this.socketPath = socketPath;
    this.log = opts.logger ?? createLogger('notify-client');
    this.maxQueued = Math.max(1, opts.maxQueuedEvents ?? 100);
    this.initialBackoff = opts.initialBackoffMs ?? 100;
    this.maxBackoff = Math.max(this.initialBackoff, opts.maxBackoffMs ?? 5000);
    this.callTimeout = opts.callTimeoutMs ?? 5000;
    this.watchInterval = opts.watchIntervalMs ?? 1000;
    this.client = new grpc.Client(
      unixTarget(socketPath),
      grpc.credentials.createInsecure(),
      UNIX_CHANNEL_OPTIONS,
    );
  }

  /** Records the domain's new state (replacing any undelivered older one) and delivers it. */
  sendDomainEvent(event: DomainEventInput): void {
    if (this.closed) throw new Error('NotifyClient: closed');
    const key = event.key ?? domainKey(event.domain);
    this.states.delete(key); // re-insert: pending domains are sent in the order they changed
    this.states.set(key, { event, version: ++this.version, delivered: false });
    this.kick();
  }

  /** Queues a k8s event (sent as a core/v1 Event, as upstream's launcher does); drops the oldest when full. */
  sendK8sEvent(event: K8sEventModel): void {
    if (this.closed) throw new Error('NotifyClient: closed');
    if (this.events.length >= this.maxQueued) {
      this.events.shift();
      this.counters.droppedEvents++;
      if (this.counters.droppedEvents === 1 || this.counters.droppedEvents % 100 === 0) {
        this.log.warn('k8s event queue full, dropping the oldest', { dropped: this.counters.droppedEvents });
      }
    }
    this.events.push(toUpstreamK8sEvent(event));
    this.kick();
  }

  stats(): NotifyClientStats {
    let pendingDomains = 0;
    for (const s of this.states.values()) if (!s.delivered) pendingDomains++;
    return { pendingDomains, queuedEvents: this.events.length, ...this.counters };
  }

  /** Resolves true once everything queued is delivered, false when timeoutMs passes first or on close. */
  flush(timeoutMs = 10_000): Promise<boolean> {
    if (!this.hasPending() && !this.pumping) return Promise.resolve(true);
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        this.idleWaiters = this.idleWaiters.filter((w) => w !== done);
        resolve(false);
      }, timeoutMs);
      const done = (idle: boolean) => {
        clearTimeout(timer);
        resolve(idle);
      };
      this.idleWaiters.push(done);
    });
  }

  /** Stops delivering (whatever is undelivered is dropped) and closes the connection. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.wake?.();
    this.client.close();
    this.settle(false);
  }

  private hasPending(): boolean {
    if (this.events.length > 0) return true;
    for (const s of this.states.values()) if (!s.delivered) return true;
    return false;
  }

  private settle(idle: boolean): void {
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w(idle);
  }

  private kick(): void {
    if (!this.pumping) void this.pump();
  }

  private async pump(): Promise<void> {
    this.pumping = true;
    let backoff = this.initialBackoff;
    try {
      while (!this.closed && this.hasPending()) {
        if (await this.sendNext()) {
          backoff = this.initialBackoff;
          continue;
        }
        this.counters.failedAttempts++;
        await this.sleep(backoff * (0.8 + Math.random() * 0.4));
        backoff = Math.min(backoff * 2, this.maxBackoff);
      }
    } finally {
      this.pumping = false;
    }
    if (!this.closed) this.settle(true);
  }

  /** Sends one pending item. Returns false on a transport failure (to be retried). */
  private async sendNext(): Promise<boolean> {
    for (const [key, state] of this.states) {
      if (state.delivered) continue;
      const { event, version } = state;
      const req = {
        domainJSON: event.domain ? jsonBytes(toUpstreamDomain(event.domain)) : Buffer.alloc(0),
        statusJSON: jsonBytes(event.status),
        eventType: event.eventType,
      };
      const res = await this.call(NotifyService.handleDomainEvent, req);
      if (res === undefined) return false;
      if (!res.success)
        this.log.warn(`handler rejected domain event: ${res.message}`, { reason: res.message, key });
      const cur = this.states.get(key);
      if (cur && cur.version === version) {
        if (event.eventType === 'DELETED') this.states.delete(key);
        else cur.delivered = true;
      }
      return true;
    }
    const event = this.events[0];
    const res = await this.call(NotifyService.handleK8SEvent, { eventJSON: jsonBytes(event) });
    if (res === undefined) return false;
    if (this.events[0] === event) this.events.shift();
    if (!res.success) this.log.warn(`handler rejected k8s event: ${res.message}`, { reason: res.message });
    return true;
  }

  /** One call; undefined on a transport failure. */
  private call<Req>(
    def: { path: string; requestSerialize: (v: Req) => Buffer; responseDeserialize: (b: Buffer) => Response },
    req: Req,
  ): Promise<Response | undefined> {
    return new Promise((resolve) => {
      this.client.makeUnaryRequest(
        def.path,
        def.requestSerialize,
        def.responseDeserialize,
        req,
        new grpc.Metadata(),
        { deadline: Date.now() + this.callTimeout },
        (err: grpc.ServiceError | null, res?: Response) => {
          if (err || !res) {
            if (!this.lost)
              this.log.debug(`notify: handler unreachable: ${err ? err.details : 'empty answer'}`);
            this.lost = true;
            return resolve(undefined);
          }
          this.counters.delivered++;
          this.connected();
          resolve(res);
        },
      );
    });
  }

  /** After a successful call: resend current state if the connection had been lost, watch it from now on. */
  private connected(): void {
    if (this.lost) {
      this.lost = false;
      this.resync();
    }
    this.everReady = true;
    this.startWatch();
  }

  private resync(): void {
    let n = 0;
    for (const s of this.states.values()) {
      if (s.delivered) {
        s.delivered = false;
        n++;
      }
    }
    if (n > 0) {
      this.counters.resyncs++;
      this.log.info('notify: reconnected to handler, resending current domain state', { domains: n });
      this.kick();
    }
  }

  /**
   * Watches the channel so a handler restart is noticed even when nothing new is sent: when the
   * connection drops and comes back, the current state is resent.
   */
  private startWatch(): void {
    if (this.watching || this.closed) return;
    this.watching = true;
    const channel = this.client.getChannel();
    const loop = () => {
      if (this.closed) return;
      const st = channel.getConnectivityState(this.states.size > 0);
      if (st === SHUTDOWN) return;
      if (st === READY) {
        if (this.lost) {
          this.lost = false;
          this.resync();
        }
      } else if (this.everReady) {
        this.lost = true;
      }
      channel.watchConnectivityState(st, Date.now() + this.watchInterval, () => loop());
    };
    loop();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.wake = undefined;
        resolve();
      }, ms);
      this.wake = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
    });
  }
}

function jsonBytes(value: unknown): Buffer {
  return value === undefined ? Buffer.alloc(0) : Buffer.from(JSON.stringify(value));
}

function domainKey(d: DomainModel | undefined): string {
  const name = d?.metadata?.name;
  if (name) return d.metadata.namespace ? `${d.metadata.namespace}/${name}` : name;
  return d?.domainName ?? '';
}
