// Domain watcher: turns libvirt domain events into KubeVirt-style watch events
// (ADDED / MODIFIED / DELETED with the latest domain), the way upstream's virt-launcher
// notify client does, plus what upstream gets from its informer: when libvirtd goes away it
// reconnects and re-lists, so a change that happened while disconnected is still reported.

import { EventEmitter } from 'node:events';
import { parseDomainXml } from '@kubevirt-ts/converter';
import { ConnectionHolder, type ConnectionSource } from './connection.js';
import { newDomain, type DomainSpec, type KubevirtDomain } from './domain.js';
import type { LibvirtConnection, LibvirtDomain, LifecycleEvent } from './libvirt.js';
import { isInvalidOperation, isNotFound } from './libvirt.js';
import type { MigrationState } from './migration.js';
import { createLogger, type Logger } from '@kubevirt-ts/log';
import { NON_EXISTENT, statusFromLibvirt } from './status.js';

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface MigrationSource {
  getMigrationState(domainName: string): MigrationState | undefined;
  on(event: 'migration', listener: (domainName: string, state: MigrationState) => void): unknown;
  off(event: 'migration', listener: (domainName: string, state: MigrationState) => void): unknown;
}

const OTHER_EVENTS = ['agentLifecycle', 'deviceAdded', 'deviceRemoved', 'reboot'] as const;

export interface DomainWatchEvent {
  type: WatchEventType;
  domain: KubevirtDomain;
  /** the libvirt lifecycle event behind it; absent for re-list results */
  cause?: { event: number; detail: number };
}

export interface DomainWatcherOptions {
  /** where the connection comes from; a function or ConnectionHolder lets the watcher reconnect */
  connection: ConnectionSource;
  /** only watch domains whose name passes (default: all) */
  filter?: (domainName: string) => boolean;
  /** XML -> domain model (default: @kubevirt-ts/converter's parseDomainXml); errors leave spec out */
  parseXml?: (xml: string) => DomainSpec;
  /** first reconnect delay, doubled up to maxReconnectDelayMs (defaults 100 / 5000) */
  reconnectDelayMs?: number;
  maxReconnectDelayMs?: number;
  /**
   * where outgoing migration states come from (a DomainManager): emitted domains carry
   * `migration`, and every migration update re-reports the domain as MODIFIED
   */
  migrations?: MigrationSource;
  /** re-list every this many ms even without events (0/undefined: never) */
  resyncIntervalMs?: number;
  logger?: Logger;
}

/**
 * Events:
 * - 'event' (DomainWatchEvent): ADDED (a domain appeared: first seen, defined, or arrived by
 *   incoming migration), MODIFIED (it changed), DELETED (it is gone; status NoState/NonExistent,
 *   metadata.deletionTimestamp set).
 * - 'connected' / 'disconnected' (reason) / 'error' (Error) for observability; 'error' is only
 *   emitted when someone listens.
 */
export class DomainWatcher extends EventEmitter {
  private readonly holder: ConnectionHolder;
  private readonly opts: DomainWatcherOptions;
  private readonly log: Logger;
  private readonly known = new Map<string, KubevirtDomain>();
  private readonly queues = new Map<string, Promise<void>>();
  private conn: LibvirtConnection | undefined;
  private running = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private resyncTimer: NodeJS.Timeout | undefined;
  private reconnectDelay: number;
  private listing: Promise<void> | undefined;
  private readonly onLifecycle = (ev: LifecycleEvent) => this.handleLifecycle(ev);
  // Not state changes, but the domain changed (devices, guest agent): report it as MODIFIED, as
  // upstream's launcher does for its device and agent events.
  private readonly onOther = (ev: { domain: { name: string } }) => this.handleOther(ev.domain.name);
  private readonly onMigration = (name: string) => this.handleOther(name);
  private readonly onConnected = (conn: LibvirtConnection) => {
    this.attach(conn);
    // A connection reopened by anyone sharing the holder: catch up on what was missed.
    if (this.started) void this.relist().catch((err: unknown) => this.reportError(err));
  };
  private started = false;
  private readonly onDisconnected = (reason: unknown) => this.handleDisconnect(reason);

  constructor(opts: DomainWatcherOptions) {
    super();
    this.opts = opts;
    this.holder = ConnectionHolder.from(opts.connection);
    this.log = opts.logger ?? createLogger('domain-watcher');
    this.reconnectDelay = opts.reconnectDelayMs ?? 100;
  }

  /** Connects, lists the existing domains (each one an ADDED event) and starts watching. */
  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    this.holder.on('connected', this.onConnected);
    this.holder.on('disconnected', this.onDisconnected);
    this.opts.migrations?.on('migration', this.onMigration);
    const conn = await this.holder.get();
    if (this.conn !== conn) this.attach(conn);
    await this.relist();
    this.started = true;
    if (this.opts.resyncIntervalMs) {
      this.resyncTimer = setInterval(() => {
        if (this.conn) void this.relist().catch((err: unknown) => this.reportError(err));
      }, this.opts.resyncIntervalMs);
      this.resyncTimer.unref();
    }
  }

  /** Stops watching; the shared connection stays open (close its holder to close it). */
  async stop(): Promise<void> {
    this.running = false;
    this.started = false;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    this.holder.off('connected', this.onConnected);
    this.holder.off('disconnected', this.onDisconnected);
    this.opts.migrations?.off('migration', this.onMigration);
    this.detach();
    await Promise.allSettled([...this.queues.values(), this.listing]);
  }

  /** The latest domain the watcher reported under this name (undefined once DELETED). */
  get(domainName: string): KubevirtDomain | undefined {
    return this.known.get(domainName);
  }

  list(): KubevirtDomain[] {
    return [...this.known.values()];
  }

  /**
   * Lists all domains and reports the differences from what was last reported: ADDED for new
   * ones, MODIFIED for changed ones, DELETED for vanished ones. Runs after every (re)connect.
   */
  relist(): Promise<void> {
    if (!this.listing) {
      this.listing = this.doRelist().finally(() => {
        this.listing = undefined;
      });
    }
    return this.listing;
  }

  private async doRelist(): Promise<void> {
    const conn = await this.holder.get();
    const domains = await conn.listAllDomains();
    const seen = new Set<string>();
    for (const d of domains) {
      if (!this.wanted(d.name)) continue;
      seen.add(d.name);
      await this.enqueue(d.name, () => this.refresh(conn, d.name, undefined, true, d));
    }
    for (const name of [...this.known.keys()]) {
      if (!seen.has(name)) await this.enqueue(name, () => this.refresh(conn, name, undefined, true));
    }
  }

  private wanted(name: string): boolean {
    return this.opts.filter ? this.opts.filter(name) : true;
  }

  private attach(conn: LibvirtConnection): void {
    if (!this.running || this.conn === conn) return;
    this.detach();
    this.conn = conn;
    conn.on('lifecycle', this.onLifecycle);
    for (const e of OTHER_EVENTS) conn.on(e, this.onOther);
    this.reconnectDelay = this.opts.reconnectDelayMs ?? 100;
    this.log.info('watching libvirt domain events');
    this.emit('connected');
  }

  private detach(): void {
    if (this.conn) {
      this.conn.off('lifecycle', this.onLifecycle);
      for (const e of OTHER_EVENTS) this.conn.off(e, this.onOther);
    }
    this.conn = undefined;
  }

  private handleDisconnect(reason: unknown): void {
    this.detach();
    if (!this.running) return;
    this.log.warn('libvirt connection lost; reconnecting', { reason: String(reason) });
    this.emit('disconnected', reason);
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (!this.running || this.reconnectTimer) return;
    const delay = this.reconnectDelay;
    this.reconnectDelay = Math.min(delay * 2, this.opts.maxReconnectDelayMs ?? 5000);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      if (!this.running) return;
      this.holder
        .get()
        .then(async (conn) => {
          if (!this.running) return;
          if (this.conn !== conn) this.attach(conn);
          await this.relist();
          this.log.info('reconnected to libvirt and re-listed domains', { domains: this.known.size });
        })
        .catch((err: unknown) => {
          this.log.debug('reconnect failed', { reason: String(err) });
          this.scheduleReconnect();
        });
    }, delay);
    this.reconnectTimer.unref?.();
  }

  private handleLifecycle(ev: LifecycleEvent): void {
    const name = ev.domain.name;
    if (!this.wanted(name)) return;
    const conn = this.conn;
    if (!conn) return;
    void this.enqueue(name, () => this.refresh(conn, name, { event: ev.event, detail: ev.detail }, false));
  }

  private handleOther(name: string): void {
    if (!this.wanted(name)) return;
    const conn = this.conn;
    if (!conn) return;
    void this.enqueue(name, () => this.refresh(conn, name, undefined, false));
  }

  /** Runs domain work one at a time per domain name, in event order. */
  private enqueue(name: string, work: () => Promise<void>): Promise<void> {
    const prev = this.queues.get(name) ?? Promise.resolve();
    const next = prev.then(work).catch((err: unknown) => this.reportError(err, name));
    this.queues.set(name, next);
    void next.then(() => {
      if (this.queues.get(name) === next) this.queues.delete(name);
    });
    return next;
  }

  /**
   * Reads the domain's current state and spec and reports it. `dedupe`: only report when it
   * differs from what was last reported (re-lists); lifecycle events are always reported.
   */
  private async refresh(
    conn: LibvirtConnection,
    name: string,
    cause: { event: number; detail: number } | undefined,
    dedupe: boolean,
    handle?: LibvirtDomain,
  ): Promise<void> {
    let dom: LibvirtDomain | undefined = handle;
    if (!dom) {
      try {
        dom = await conn.lookupDomainByName(name);
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }
    let current: KubevirtDomain | undefined;
    if (dom) {
      try {
        const st = await dom.getState();
        let spec: DomainSpec | undefined;
        try {
          spec = this.parse(await dom.getXMLDesc(0));
        } catch (err) {
          // The XML of a domain that is migrating away may not be readable; keep the last spec.
          if (isNotFound(err)) throw err;
          if (!isInvalidOperation(err))
            this.log.warn('could not read domain XML', { name, reason: String(err) });
          spec = this.known.get(name)?.spec;
        }
        current = newDomain(name, statusFromLibvirt(st.state, st.reason), spec, dom.uuid);
        const migration = this.opts.migrations?.getMigrationState(name);
        if (migration) current.migration = migration;
      } catch (err) {
        if (!isNotFound(err)) throw err;
        current = undefined;
      }
    }
    const previous = this.known.get(name);
    if (!current) {
      if (!previous) return;
      this.known.delete(name);
      const gone = newDomain(name, NON_EXISTENT, previous.spec, previous.domainUUID);
      gone.metadata.deletionTimestamp = new Date().toISOString();
      this.publish({ type: 'DELETED', domain: gone, cause });
      return;
    }
    this.known.set(name, current);
    // ADDED when the domain is new to the watcher's clients: first seen, defined (DEFINED/ADDED)
    // or arrived by incoming migration (STARTED/MIGRATED). Upstream sends ADDED on those two events
    // even for a domain it already reported; a watch stream never repeats ADDED for a known object,
    // so a late DEFINED/ADDED after the initial list becomes MODIFIED here.
    if (!previous) {
      this.publish({ type: 'ADDED', domain: current, cause });
      return;
    }
    if (dedupe && sameDomain(previous, current)) return;
    this.publish({ type: 'MODIFIED', domain: current, cause });
  }

  private parse(xml: string): DomainSpec | undefined {
    try {
      return (this.opts.parseXml ?? parseDomainXml)(xml);
    } catch (err) {
      this.log.warn('could not parse domain XML', { reason: String(err) });
      return undefined;
    }
  }

  private publish(ev: DomainWatchEvent): void {
    this.log.debug('domain event', {
      type: ev.type,
      namespace: ev.domain.metadata.namespace,
      name: ev.domain.metadata.name,
      status: ev.domain.status.status,
      reason: ev.domain.status.reason,
    });
    this.emit('event', ev);
  }

  private reportError(err: unknown, name?: string): void {
    this.log.warn('domain watcher error', { domain: name, reason: String(err) });
    if (this.listenerCount('error') > 0)
      this.emit('error', err instanceof Error ? err : new Error(String(err)));
  }
}

function sameDomain(a: KubevirtDomain, b: KubevirtDomain): boolean {
  return (
    a.status.status === b.status.status &&
    a.status.reason === b.status.reason &&
    a.domainUUID === b.domainUUID &&
    JSON.stringify(a.migration) === JSON.stringify(b.migration) &&
    JSON.stringify(a.spec) === JSON.stringify(b.spec)
  );
}
