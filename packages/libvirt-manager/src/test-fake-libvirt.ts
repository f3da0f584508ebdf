// A small in-memory stand-in for a node-libvirt Connection, for fast unit tests of the manager's
// and the watcher's logic only (the real behaviour is tested against a real libvirtd). States,
// reasons and lifecycle events follow what libvirt's QEMU driver does; events arrive
// asynchronously, as from libvirt's event loop.

import { EventEmitter } from 'node:events';
import { XMLParser } from 'fast-xml-parser';
import type { LibvirtConnection, LibvirtDomain, MigrateParams } from './libvirt.js';
import { VirDomainEventType as E, VirDomainState as S } from './status.js';

const parser = new XMLParser({ ignoreAttributes: false });

export class FakeLibvirtError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

const noDomain = (name: string) =>
  new FakeLibvirtError(42, `Domain not found: no domain with matching name '${name}'`);
const invalid = (msg: string) => new FakeLibvirtError(55, `Requested operation is not valid: ${msg}`);

interface DomainRecord {
  name: string;
  uuid: string;
  xml: string;
  state: number;
  reason: number;
  persistent: boolean;
}

/** What the fake "guest" does on an ACPI power button press. */
export type AcpiBehaviour = 'poweroff' | 'ignore';

/** Shared "hosts" for migration: target URI -> connection. */
const peers = new Map<string, FakeConnection>();

export class FakeConnection extends EventEmitter implements LibvirtConnection {
  readonly domains = new Map<string, DomainRecord>();
  readonly calls: string[] = [];
  alive = true;
  acpi: AcpiBehaviour = 'poweroff';
  agent: ((cmd: string) => unknown) | undefined;
  /** how long a fake migration takes */
  migrationMs = 20;
  /** data_remaining a running migration job reports */
  jobRemaining: () => number = () => 1000;
  version = 7_002_000;
  stats: unknown[] = [];
  private nextUuid = 1;

  constructor(readonly uri = 'fake:///default') {
    super();
    peers.set(uri, this);
  }

  private check(op: string): void {
    this.calls.push(op);
    if (!this.alive) throw new FakeLibvirtError(-1, `${op}: connection closed`);
  }

  emitLifecycle(name: string, event: number, detail: number): void {
    const rec = this.domains.get(name);
    const uuid = rec?.uuid ?? '';
    setImmediate(() => {
      if (this.alive) this.emit('lifecycle', { domain: { name, uuid }, event, detail });
    });
  }

  /** libvirtd went away: 'close' fires and every call fails until a new connection is made. */
  drop(): void {
    this.alive = false;
    setImmediate(() => this.emit('close', 'eof'));
  }

  /** A new connection to the same "libvirtd" (shares the domains). */
  reopen(): FakeConnection {
    const c = new FakeConnection(this.uri);
    for (const [k, v] of this.domains) c.domains.set(k, v);
    Object.defineProperty(c, 'domains', { value: this.domains });
    c.acpi = this.acpi;
    c.agent = this.agent;
    return c;
  }

  async close(): Promise<void> {
    this.alive = false;
    setImmediate(() => this.emit('close', 'client'));
  }
  isAlive(): boolean {
    return this.alive;
  }
  async getVersion(): Promise<number> {
    this.check('getVersion');
    return this.version;
  }
  async getLibVersion(): Promise<number> {
    this.check('getLibVersion');
    return 9_000_000;
  }
  async defineXML(xml: string): Promise<LibvirtDomain> {
    this.check('defineXML');
    const doc = parser.parse(xml) as { domain?: { name?: string; uuid?: string } };
    const name = doc.domain?.name;
    if (!name) throw new FakeLibvirtError(27, 'XML error: missing domain name');
    const existing = this.domains.get(name);
    if (existing) {
      existing.xml = xml;
      existing.persistent = true;
      this.emitLifecycle(name, E.DEFINED, 1);
    } else {
      const uuid = doc.domain?.uuid ?? `00000000-0000-4000-8000-${String(this.nextUuid++).padStart(12, '0')}`;
      this.domains.set(name, { name, uuid, xml, state: S.SHUTOFF, reason: 0, persistent: true });
      this.emitLifecycle(name, E.DEFINED, 0);
    }
    return new FakeDomain(this, name);
  }
  async lookupDomainByName(name: string): Promise<LibvirtDomain> {
    this.check('lookupDomainByName');
    if (!this.domains.has(name)) throw noDomain(name);
    return new FakeDomain(this, name);
  }
  async listAllDomains(): Promise<LibvirtDomain[]> {
    this.check('listAllDomains');
    return [...this.domains.keys()].map((n) => new FakeDomain(this, n));
  }
  async getAllDomainStats(): Promise<unknown> {
    this.check('getAllDomainStats');
    return this.stats;
  }

  record(name: string): DomainRecord {
    const r = this.domains.get(name);
    if (!r) throw noDomain(name);
    return r;
  }

  static peer(uri: string): FakeConnection | undefined {
    return peers.get(uri);
  }
}

export class FakeDomain implements LibvirtDomain {
  constructor(
    private readonly conn: FakeConnection,
    readonly name: string,
  ) {}

  get uuid(): string {
    return this.conn.domains.get(this.name)?.uuid ?? '';
  }

  private rec(op: string): DomainRecord {
    this.conn.calls.push(`${op}(${this.name})`);
    if (!this.conn.alive) throw new FakeLibvirtError(-1, `${op}: connection closed`);
    return this.conn.record(this.name);
  }

  private active(r: DomainRecord): boolean {
    return r.state !== S.SHUTOFF && r.state !== S.CRASHED && r.state !== S.NOSTATE;
  }

  private set(r: DomainRecord, state: number, reason: number, event: number, detail: number): void {
    r.state = state;
    r.reason = reason;
    this.conn.emitLifecycle(r.name, event, detail);
  }

  async getState() {
    const r = this.rec('getState');
    return { state: r.state, reason: r.reason, reasonName: '' };
  }
  async getXMLDesc(): Promise<string> {
    return this.rec('getXMLDesc').xml;
  }
  async create(flags = 0): Promise<void> {
    const r = this.rec('create');
    if (this.active(r)) throw invalid('domain is already running');
    if (flags & 1) {
      r.state = S.PAUSED;
      r.reason = 1;
      this.conn.emitLifecycle(r.name, E.STARTED, 0);
      this.conn.emitLifecycle(r.name, E.SUSPENDED, 0);
    } else this.set(r, S.RUNNING, 1, E.STARTED, 0);
  }
  async suspend(): Promise<void> {
    const r = this.rec('suspend');
    if (!this.active(r)) throw invalid('domain is not running');
    this.set(r, S.PAUSED, 1, E.SUSPENDED, 0);
  }
  async resume(): Promise<void> {
    const r = this.rec('resume');
    if (!this.active(r)) throw invalid('domain is not running');
    this.set(r, S.RUNNING, 5, E.RESUMED, 0);
  }
  async shutdown(): Promise<void> {
    const r = this.rec('shutdown');
    if (!this.active(r)) throw invalid('domain is not running');
    if (this.conn.acpi === 'poweroff' && r.state === S.RUNNING) {
      setTimeout(() => {
        if (r.state === S.RUNNING) {
          this.set(r, S.SHUTOFF, 1, E.STOPPED, 0);
          this.afterStop(r);
        }
      }, 20);
    }
  }
  async reboot(flags = 0): Promise<void> {
    const r = this.rec('reboot');
    this.conn.calls.push(`reboot-flags:${flags}`);
    if (!this.active(r)) throw invalid('domain is not running');
  }
  async destroy(): Promise<void> {
    const r = this.rec('destroy');
    if (!this.active(r)) throw invalid('domain is not running');
    this.set(r, S.SHUTOFF, 2, E.STOPPED, 1);
    this.afterStop(r);
  }
  private afterStop(r: DomainRecord): void {
    if (!r.persistent) {
      this.conn.domains.delete(r.name);
      this.conn.emitLifecycle(r.name, E.UNDEFINED, 0);
    }
  }
  async undefine(): Promise<void> {
    const r = this.rec('undefine');
    if (this.active(r)) {
      r.persistent = false;
    } else {
      this.conn.domains.delete(r.name);
    }
    this.conn.emitLifecycle(r.name, E.UNDEFINED, 0);
  }
  async setTime(): Promise<void> {
    this.agentCall('{"execute":"guest-set-time"}');
  }
  private agentCall(cmd: string): unknown {
    const r = this.rec('qemuAgentCommand');
    if (!this.active(r)) throw invalid('domain is not running');
    if (!this.conn.agent)
      throw new FakeLibvirtError(86, 'Guest agent is not responding: QEMU guest agent is not connected');
    return this.conn.agent(cmd);
  }
  async qemuAgentCommand(cmd: string): Promise<string> {
    return JSON.stringify({ return: this.agentCall(cmd) });
  }
  async fsFreeze(): Promise<number> {
    this.agentCall('{"execute":"guest-fsfreeze-freeze"}');
    return 1;
  }
  async fsThaw(): Promise<number> {
    this.agentCall('{"execute":"guest-fsfreeze-thaw"}');
    return 1;
  }
  async attachDevice(xml: string): Promise<void> {
    this.rec('attachDevice');
    this.conn.calls.push(`attach:${xml}`);
  }
  async detachDevice(xml: string): Promise<void> {
    this.rec('detachDevice');
    this.conn.calls.push(`detach:${xml}`);
  }
  async getJobInfo(): Promise<unknown> {
    this.rec('getJobInfo');
    if (!FakeDomain.aborts.has(this.name)) return { type: 0, params: {} };
    return { type: 2, params: { data_remaining: this.conn.jobRemaining() } };
  }
  async abortJob(): Promise<void> {
    this.rec('abortJob');
    const a = FakeDomain.aborts.get(this.name);
    if (!a) throw invalid('no job is active on the domain');
    a();
  }
  static readonly aborts = new Map<string, () => void>();
  async migrateToURI3(dconnuri: string, params: MigrateParams, flags = 0): Promise<void> {
    const r = this.rec('migrateToURI3');
    if (!(flags & 2))
      throw new FakeLibvirtError(
        3,
        'this function is not supported by the connection driver: virDomainMigrateToURI3',
      );
    const target = FakeConnection.peer(dconnuri);
    if (!target)
      throw new FakeLibvirtError(38, `Failed to connect socket to '${dconnuri}': No such file or directory`);
    if (!this.active(r)) throw invalid('domain is not running');
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(resolve, this.conn.migrationMs);
      FakeDomain.aborts.set(this.name, () => {
        clearTimeout(t);
        reject(new FakeLibvirtError(78, 'operation aborted: migration out: canceled by client'));
      });
    }).finally(() => FakeDomain.aborts.delete(this.name));
    const xml = params.destXml ?? r.xml;
    target.domains.set(r.name, {
      name: r.name,
      uuid: r.uuid,
      xml,
      state: S.RUNNING,
      reason: 2,
      persistent: !!(flags & 8),
    });
    target.emitLifecycle(r.name, E.STARTED, 1);
    target.emitLifecycle(r.name, E.RESUMED, 1);
    this.set(r, S.SHUTOFF, 4, E.STOPPED, 3);
    this.afterStop(r);
  }
  async setMemory(): Promise<void> {
    this.rec('setMemory');
  }
  async setVcpus(): Promise<void> {
    this.rec('setVcpus');
  }
}

/** A logger that drops everything (unit tests). */
export const quietLogger = {
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  debug: () => undefined,
} as unknown as import('@kubevirt-ts/log').Logger;

/** Resolves once `pred()` is true (polling), rejects after `ms`. */
export async function until(pred: () => boolean, ms = 3000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Minimal domain XML for the fake. */
export function fakeXml(name: string): string {
  return `<domain type="qemu"><name>${name}</name><memory unit="b">134217728</memory><vcpu>1</vcpu><os><type arch="x86_64" machine="q35">hvm</type></os><devices/></domain>`;
}
