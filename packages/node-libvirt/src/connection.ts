import { EventEmitter } from 'node:events';
import {
  AgentLifecycleReason,
  AgentLifecycleState,
  CloseReasonNames,
  type CloseReasonName,
  type DomainState,
  domainEventDetailName,
  domainEventName,
  domainStateReasonName,
  MemoryStatTags,
  TypedParamType,
} from './constants.js';
import { LibvirtError } from './errors.js';
import { nativeAddon, type NativeConnection, type NativeDomRef } from './native.js';

export interface DomainRef {
  name: string;
  uuid: string;
}

/** Typed-parameter values as libvirt reports them (numbers, strings, booleans; repeated strings as arrays). */
export type TypedParams = Record<string, number | string | boolean | string[]>;

export interface LifecycleEvent {
  domain: DomainRef;
  /** virDomainEventType (DomainEventType). */
  event: number;
  /** Detail for that event type (virDomainEvent*DetailType). */
  detail: number;
  eventName: string;
  detailName: string;
}
export interface RebootEvent {
  domain: DomainRef;
}
export interface AgentLifecycleEvent {
  domain: DomainRef;
  /** AgentLifecycleState: 1 connected, 2 disconnected. */
  state: number;
  /** AgentLifecycleReason. */
  reason: number;
  connected: boolean;
  reasonName: string;
}
export interface DeviceEvent {
  domain: DomainRef;
  devAlias: string;
}
export interface JobCompletedEvent {
  domain: DomainRef;
  /** Job statistics (same fields as getJobInfo().params). */
  params: TypedParams;
}
export interface MigrationIterationEvent {
  domain: DomainRef;
  iteration: number;
}

export interface ConnectionEvents {
  /** The connection ended: 'client' after close(), else 'eof' | 'error' | 'keepalive' when it was lost. */
  close: [reason: CloseReasonName];
  lifecycle: [LifecycleEvent];
  reboot: [RebootEvent];
  agentLifecycle: [AgentLifecycleEvent];
  deviceRemoved: [DeviceEvent];
  deviceAdded: [DeviceEvent];
  deviceRemovalFailed: [DeviceEvent];
  jobCompleted: [JobCompletedEvent];
  migrationIteration: [MigrationIterationEvent];
}

export interface OpenOptions {
  /** virConnectOpenReadOnly instead of virConnectOpen. */
  readOnly?: boolean;
  /**
   * virConnectSetKeepAlive for remote connections: a hung or vanished daemon closes the connection
   * (reason 'keepalive') after interval * (count + 1) seconds and pending calls are rejected.
   * Default { interval: 5, count: 3 }; interval 0 disables it.
   */
  keepAlive?: { interval: number; count: number };
  /** Like socket.unref(): an open connection does not keep the process alive (default false). */
  unref?: boolean;
}

export interface DomainStateInfo {
  state: DomainState;
  reason: number;
  reasonName: string;
}

export interface DomainInfo {
  state: DomainState;
  /** KiB */
  maxMem: number;
  /** KiB */
  memory: number;
  nrVirtCpu: number;
  /** nanoseconds */
  cpuTime: number;
}

export interface DomainStatsRecord {
  domain: DomainRef;
  stats: TypedParams;
}

export interface BlockStats {
  rdReq: number;
  rdBytes: number;
  wrReq: number;
  wrBytes: number;
  errs: number;
}

export interface InterfaceStats {
  rxBytes: number;
  rxPackets: number;
  rxErrs: number;
  rxDrop: number;
  txBytes: number;
  txPackets: number;
  txErrs: number;
  txDrop: number;
}

export interface JobInfo {
  /** DomainJobType */
  type: number;
  params: TypedParams;
}

export interface InterfaceAddresses {
  name: string;
  hwaddr: string;
  addrs: { type: number; addr: string; prefix: number }[];
}

/** virDomainMigrateToURI3 parameters (VIR_MIGRATE_PARAM_*), typed. */
export interface MigrateParams {
  /** migrate_uri: where QEMU's migration stream goes, e.g. tcp://127.0.0.1:49152 */
  uri?: string;
  destName?: string;
  destXml?: string;
  persistXml?: string;
  /** MiB/s */
  bandwidth?: number;
  bandwidthPostcopy?: number;
  graphicsUri?: string;
  listenAddress?: string;
  migrateDisks?: string[];
  /** migrate_disks_detect_zeroes: the disks (of migrateDisks) whose zero blocks are not sent (libvirt >= 10.9.0) */
  migrateDisksDetectZeroes?: string[];
  disksPort?: number;
  disksUri?: string;
  compression?: string[];
  compressionMtLevel?: number;
  compressionMtThreads?: number;
  compressionMtDthreads?: number;
  compressionXbzrleCache?: number;
  autoConvergeInitial?: number;
  autoConvergeIncrement?: number;
  parallelConnections?: number;
  tlsDestination?: string;
}

const MIGRATE_PARAMS: Record<keyof MigrateParams, [string, number]> = {
  uri: ['migrate_uri', TypedParamType.STRING],
  destName: ['destination_name', TypedParamType.STRING],
  destXml: ['destination_xml', TypedParamType.STRING],
  persistXml: ['persistent_xml', TypedParamType.STRING],
  bandwidth: ['bandwidth', TypedParamType.ULLONG],
  bandwidthPostcopy: ['bandwidth.postcopy', TypedParamType.ULLONG],
  graphicsUri: ['graphics_uri', TypedParamType.STRING],
  listenAddress: ['listen_address', TypedParamType.STRING],
  migrateDisks: ['migrate_disks', TypedParamType.STRING],
  migrateDisksDetectZeroes: ['migrate_disks_detect_zeroes', TypedParamType.STRING],
  disksPort: ['disks_port', TypedParamType.INT],
  disksUri: ['disks_uri', TypedParamType.STRING],
  compression: ['compression', TypedParamType.STRING],
  compressionMtLevel: ['compression.mt.level', TypedParamType.INT],
  compressionMtThreads: ['compression.mt.threads', TypedParamType.INT],
  compressionMtDthreads: ['compression.mt.dthreads', TypedParamType.INT],
  compressionXbzrleCache: ['compression.xbzrle.cache', TypedParamType.ULLONG],
  autoConvergeInitial: ['auto_converge.initial', TypedParamType.INT],
  autoConvergeIncrement: ['auto_converge.increment', TypedParamType.INT],
  parallelConnections: ['parallel.connections', TypedParamType.INT],
  tlsDestination: ['tls.destination', TypedParamType.STRING],
};

/** The parameters libvirt takes more than once (one entry per value). */
const LIST_PARAMS = new Set<keyof MigrateParams>(['migrateDisks', 'migrateDisksDetectZeroes', 'compression']);

/** Turns typed MigrateParams into the [name, type, value] list the addon takes (exported for tests). */
export function migrateParamList(params: MigrateParams): [string, number, string | number][] {
  const out: [string, number, string | number][] = [];
  for (const [key, value] of Object.entries(params) as [keyof MigrateParams, unknown][]) {
    if (value === undefined) continue;
    const spec = MIGRATE_PARAMS[key];
    if (!spec) throw new TypeError(`params.${key}: unknown migration parameter`);
    const [name, type] = spec;
    const values = Array.isArray(value) ? value : [value];
    if (Array.isArray(value) && !LIST_PARAMS.has(key))
      throw new TypeError(`params.${key}: expected a single value`);
    for (const v of values) {
      if (type === TypedParamType.STRING) {
        if (typeof v !== 'string') throw new TypeError(`params.${key}: expected a string`);
      } else if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) {
        throw new TypeError(`params.${key}: expected a non-negative integer`);
      }
      out.push([name, type, v as string | number]);
    }
  }
  return out;
}

let nextId = 0;

/**
 * A libvirt connection (virConnectPtr). Every call runs on the addon's own thread pool and returns a Promise.
 * Domain events arrive as EventEmitter events (see ConnectionEvents) while other calls run.
 */
export class Connection extends EventEmitter<ConnectionEvents> {
  readonly uri: string;
  readonly id = ++nextId;
  #native: NativeConnection;
  #closed = false;
  #closing: Promise<void> | undefined;
  #pending = new Set<(e: Error) => void>();

  private constructor(uri: string, native: NativeConnection) {
    super();
    this.uri = uri;
    this.#native = native;
  }

  /** virConnectOpen (or virConnectOpenReadOnly), then registers domain event callbacks and the close callback. */
  static async open(uri: string, opts: OpenOptions = {}): Promise<Connection> {
    const { NativeConnection } = nativeAddon();
    const native = new NativeConnection();
    const conn = new Connection(uri, native);
    try {
      const ka = opts.keepAlive ?? { interval: 5, count: 3 };
      await native.open(
        uri,
        !!opts.readOnly,
        (type, data) => conn.#onEvent(type, data),
        ka.interval,
        ka.count,
      );
      if (opts.unref) conn.unref();
    } catch (e) {
      await native.close().catch(() => undefined);
      throw LibvirtError.from(`open(${uri})`, e);
    }
    return conn;
  }

  /** False after close() or once the connection was lost. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Deregisters event callbacks and closes the connection (virConnectClose), off the JS thread.
   * Calls still pending are rejected at once with a LibvirtError. Idempotent.
   */
  close(): Promise<void> {
    return this.#shutdown('client');
  }

  #shutdown(reason: CloseReasonName): Promise<void> {
    if (this.#closing) return this.#closing;
    this.#closed = true;
    const err = new LibvirtError(`connection ${this.uri}`, -1, 0, `connection closed (${reason})`);
    for (const reject of this.#pending) reject(err);
    this.#pending.clear();
    this.#closing = this.#native
      .close()
      .then(() => undefined)
      .catch(() => undefined)
      .finally(() => {
        this.emit('close', reason);
      });
    return this.#closing;
  }

  /** Lets the process exit while this connection is open (events stop keeping it alive). */
  unref(): this {
    (this.#native.unref as () => void)();
    return this;
  }
  /** Undoes unref(). */
  ref(): this {
    (this.#native.ref as () => void)();
    return this;
  }

  /** virConnectIsAlive (local check, no round trip). */
  isAlive(): boolean {
    return !this.#closed && this.#native.isAlive();
  }

  #onEvent(type: string, data: Record<string, unknown>): void {
    if (this.#closed) return;
    switch (type) {
      case 'close': {
        const reason = CloseReasonNames[data.reason as number] ?? 'error';
        void this.#shutdown(reason);
        return;
      }
      case 'lifecycle': {
        const event = data.event as number;
        const detail = data.detail as number;
        this.emit('lifecycle', {
          domain: data.domain as DomainRef,
          event,
          detail,
          eventName: domainEventName(event),
          detailName: domainEventDetailName(event, detail),
        });
        return;
      }
      case 'agentLifecycle': {
        const state = data.state as number;
        const reason = data.reason as number;
        this.emit('agentLifecycle', {
          domain: data.domain as DomainRef,
          state,
          reason,
          connected: state === AgentLifecycleState.CONNECTED,
          reasonName:
            Object.entries(AgentLifecycleReason).find(([, v]) => v === reason)?.[0] ?? `UNKNOWN_${reason}`,
        });
        return;
      }
      case 'reboot':
      case 'deviceRemoved':
      case 'deviceAdded':
      case 'deviceRemovalFailed':
      case 'jobCompleted':
      case 'migrationIteration':
        (this.emit as (t: string, d: unknown) => boolean)(type, data);
        return;
      default:
        return;
    }
  }

  /** Runs a native method; rejects with LibvirtError; rejected at once when the connection closes. */
  call<T>(operation: string, method: string, ...args: unknown[]): Promise<T> {
    if (this.#closed) {
      return Promise.reject(new LibvirtError(operation, -1, 0, 'connection is closed'));
    }
    const fn = this.#native[method] as (...a: unknown[]) => Promise<T>;
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const onClose = (e: Error) => {
        if (settled) return;
        settled = true;
        reject(LibvirtError.from(operation, e));
      };
      this.#pending.add(onClose);
      let p: Promise<T>;
      try {
        p = fn.apply(this.#native, args);
      } catch (e) {
        this.#pending.delete(onClose);
        reject(LibvirtError.from(operation, e));
        return;
      }
      p.then(
        (v) => {
          this.#pending.delete(onClose);
          if (settled) return;
          settled = true;
          resolve(v);
        },
        (e: unknown) => {
          this.#pending.delete(onClose);
          if (settled) return;
          settled = true;
          reject(LibvirtError.from(operation, e));
        },
      );
    });
  }

  /** Number of calls in flight (for tests and diagnostics). */
  get pendingCalls(): number {
    return this.#pending.size;
  }

  #domain(ref: NativeDomRef): Domain {
    return new Domain(this, ref.name, ref.uuid);
  }

  /** virConnectGetLibVersion: libvirt library version as major*1e6 + minor*1e3 + release. */
  getLibVersion(): Promise<number> {
    return this.call('getLibVersion', 'getLibVersion');
  }
  /** virConnectGetVersion: hypervisor version (e.g. QEMU) as major*1e6 + minor*1e3 + release. */
  getVersion(): Promise<number> {
    return this.call('getVersion', 'getVersion');
  }
  /** virConnectGetHostname */
  getHostname(): Promise<string> {
    return this.call('getHostname', 'getHostname');
  }
  /** virConnectGetURI: the canonical URI of this connection. */
  getURI(): Promise<string> {
    return this.call('getURI', 'getURI');
  }
  /** virConnectGetCapabilities: capabilities XML. */
  getCapabilities(): Promise<string> {
    return this.call('getCapabilities', 'getCapabilities');
  }
  /** virConnectGetDomainCapabilities */
  getDomainCapabilities(
    opts: { emulatorbin?: string; arch?: string; machine?: string; virttype?: string } = {},
    flags = 0,
  ): Promise<string> {
    return this.call(
      'getDomainCapabilities',
      'getDomainCapabilities',
      opts.emulatorbin,
      opts.arch,
      opts.machine,
      opts.virttype,
      flags,
    );
  }
  /** virDomainDefineXMLFlags (flags: DomainDefineFlags). */
  async defineXML(xml: string, flags = 0): Promise<Domain> {
    return this.#domain(await this.call<NativeDomRef>('defineXML', 'defineXML', xml, flags));
  }
  /** virDomainCreateXML: starts a transient domain (flags: DomainCreateFlags, e.g. START_PAUSED | START_AUTODESTROY). */
  async createXML(xml: string, flags = 0): Promise<Domain> {
    return this.#domain(await this.call<NativeDomRef>('createXML', 'createXML', xml, flags));
  }
  /** virDomainLookupByName; rejects with code NO_DOMAIN when absent. */
  async lookupDomainByName(name: string): Promise<Domain> {
    return this.#domain(
      await this.call<NativeDomRef>(`lookupDomainByName(${name})`, 'lookupDomainByName', name),
    );
  }
  /** virDomainLookupByUUIDString */
  async lookupDomainByUUID(uuid: string): Promise<Domain> {
    return this.#domain(
      await this.call<NativeDomRef>(`lookupDomainByUUID(${uuid})`, 'lookupDomainByUUID', uuid),
    );
  }
  /** virConnectListAllDomains (flags: ListAllDomainsFlags; 0 = all). */
  async listAllDomains(flags = 0): Promise<Domain[]> {
    const refs = await this.call<NativeDomRef[]>('listAllDomains', 'listAllDomains', flags);
    return refs.map((r) => this.#domain(r));
  }
  /** virConnectGetAllDomainStats (stats: DomainStatsTypes, 0 = all supported; flags: GetAllDomainStatsFlags). */
  getAllDomainStats(stats = 0, flags = 0): Promise<DomainStatsRecord[]> {
    return this.call('getAllDomainStats', 'getAllDomainStats', stats, flags);
  }
}

/**
 * A domain, addressed by UUID: each call looks it up and releases it on the pool thread, so no
 * native handle is held between calls. Calls reject with code NO_DOMAIN once the domain is gone.
 */
export class Domain {
  readonly connection: Connection;
  readonly name: string;
  readonly uuid: string;

  constructor(connection: Connection, name: string, uuid: string) {
    this.connection = connection;
    this.name = name;
    this.uuid = uuid;
  }

  #call<T>(op: string, method: string, ...args: unknown[]): Promise<T> {
    return this.connection.call<T>(`domain.${op}(${this.name})`, method, this.uuid, ...args);
  }

  /** virDomainGetState with the reason's symbolic name. */
  async getState(): Promise<DomainStateInfo> {
    const s = await this.#call<{ state: DomainState; reason: number }>('getState', 'domainGetState');
    return { ...s, reasonName: domainStateReasonName(s.state, s.reason) };
  }
  /** virDomainGetXMLDesc (flags: DomainXMLFlags). */
  getXMLDesc(flags = 0): Promise<string> {
    return this.#call('getXMLDesc', 'domainGetXMLDesc', flags);
  }
  /** virDomainGetID: -1 when not running. */
  getID(): Promise<number> {
    return this.#call('getID', 'domainGetID');
  }
  /** virDomainIsActive */
  isActive(): Promise<boolean> {
    return this.#call('isActive', 'domainIsActive');
  }
  /** virDomainIsPersistent */
  isPersistent(): Promise<boolean> {
    return this.#call('isPersistent', 'domainIsPersistent');
  }
  /** virDomainCreateWithFlags: starts a defined domain (flags: DomainCreateFlags). */
  create(flags = 0): Promise<void> {
    return this.#call('create', 'domainCreate', flags);
  }
  /** virDomainSuspend */
  suspend(): Promise<void> {
    return this.#call('suspend', 'domainSuspend');
  }
  /** virDomainResume */
  resume(): Promise<void> {
    return this.#call('resume', 'domainResume');
  }
  /** virDomainShutdownFlags (flags: DomainShutdownFlags, e.g. ACPI_POWER_BTN, GUEST_AGENT). */
  shutdown(flags = 0): Promise<void> {
    return this.#call('shutdown', 'domainShutdown', flags);
  }
  /** virDomainReboot (flags: DomainRebootFlags). */
  reboot(flags = 0): Promise<void> {
    return this.#call('reboot', 'domainReboot', flags);
  }
  /** virDomainReset: hard reset, no guest cooperation. */
  reset(): Promise<void> {
    return this.#call('reset', 'domainReset', 0);
  }
  /** virDomainDestroyFlags (flags: DomainDestroyFlags, e.g. GRACEFUL). */
  destroy(flags = 0): Promise<void> {
    return this.#call('destroy', 'domainDestroy', flags);
  }
  /** virDomainUndefineFlags (flags: DomainUndefineFlags, e.g. NVRAM | MANAGED_SAVE). */
  undefine(flags = 0): Promise<void> {
    return this.#call('undefine', 'domainUndefine', flags);
  }
  /** virDomainGetInfo */
  getInfo(): Promise<DomainInfo> {
    return this.#call('getInfo', 'domainGetInfo');
  }
  /**
   * virDomainSetTime: sets the guest clock through the guest agent; defaults to the host's current time.
   * flags: DomainSetTimeFlags (SYNC: let the guest read its RTC instead, time is then ignored).
   */
  setTime(time: { seconds: number; nseconds: number } = hostTime(), flags = 0): Promise<void> {
    return this.#call('setTime', 'domainSetTime', time.seconds, time.nseconds, flags);
  }
  /** virDomainMemoryStats, keyed by tag name (e.g. actual_balloon, rss, available, unused), values in KiB. */
  async memoryStats(flags = 0): Promise<Record<string, number>> {
    const list = await this.#call<{ tag: number; val: number }[]>('memoryStats', 'domainMemoryStats', flags);
    const out: Record<string, number> = {};
    for (const { tag, val } of list) out[MemoryStatTags[tag] ?? `tag_${tag}`] = val;
    return out;
  }
  /** virDomainBlockStats for one disk (target name like `vda` or the image path). */
  blockStats(dev: string): Promise<BlockStats> {
    return this.#call('blockStats', 'domainBlockStats', dev);
  }
  /** virDomainInterfaceStats for one interface (target dev name or MAC). */
  interfaceStats(dev: string): Promise<InterfaceStats> {
    return this.#call('interfaceStats', 'domainInterfaceStats', dev);
  }
  /** virDomainQemuAgentCommand: raw guest agent JSON command; resolves to the agent's JSON reply text. */
  qemuAgentCommand(cmd: string, timeoutSec: number, flags = 0): Promise<string> {
    return this.#call('qemuAgentCommand', 'domainQemuAgentCommand', cmd, timeoutSec, flags);
  }
  /** virDomainFSFreeze (all filesystems when mountpoints is empty); resolves to the number frozen. */
  fsFreeze(mountpoints: string[] = [], flags = 0): Promise<number> {
    return this.#call('fsFreeze', 'domainFSFreeze', mountpoints, flags);
  }
  /** virDomainFSThaw; resolves to the number thawed. */
  fsThaw(mountpoints: string[] = [], flags = 0): Promise<number> {
    return this.#call('fsThaw', 'domainFSThaw', mountpoints, flags);
  }
  /** virDomainAttachDeviceFlags (flags: DomainDeviceModifyFlags). */
  attachDevice(xml: string, flags = 0): Promise<void> {
    return this.#call('attachDevice', 'domainAttachDevice', xml, flags);
  }
  /** virDomainDetachDeviceFlags (flags: DomainDeviceModifyFlags); completion is the deviceRemoved event. */
  detachDevice(xml: string, flags = 0): Promise<void> {
    return this.#call('detachDevice', 'domainDetachDevice', xml, flags);
  }
  /** virDomainGetJobStats (flags: DomainJobStatsFlags, e.g. COMPLETED for the last finished job). */
  getJobInfo(flags = 0): Promise<JobInfo> {
    return this.#call('getJobInfo', 'domainGetJobStats', flags);
  }
  /** virDomainAbortJob */
  abortJob(): Promise<void> {
    return this.#call('abortJob', 'domainAbortJob');
  }
  /**
   * virDomainMigrateToURI3. dconnuri is the destination libvirt URI for peer-to-peer migration
   * (flags include PEER2PEER), or '' for direct migration. Resolves when the migration has finished.
   * Note: occupies one of the addon's pool threads for the whole migration.
   */
  migrateToURI3(dconnuri: string, params: MigrateParams = {}, flags = 0): Promise<void> {
    return this.#call('migrateToURI3', 'domainMigrateToURI3', dconnuri, migrateParamList(params), flags);
  }
  /** virDomainMigrateSetMaxSpeed (MiB/s) */
  migrateSetMaxSpeed(mibPerSec: number, flags = 0): Promise<void> {
    return this.#call('migrateSetMaxSpeed', 'domainMigrateSetMaxSpeed', mibPerSec, flags);
  }
  /** virDomainMigrateSetMaxDowntime (ms) */
  migrateSetMaxDowntime(ms: number, flags = 0): Promise<void> {
    return this.#call('migrateSetMaxDowntime', 'domainMigrateSetMaxDowntime', ms, flags);
  }
  /** virDomainMigrateStartPostCopy */
  migrateStartPostCopy(flags = 0): Promise<void> {
    return this.#call('migrateStartPostCopy', 'domainMigrateStartPostCopy', flags);
  }
  /** virDomainSetMemoryFlags (KiB; flags: DomainMemoryFlags, default CURRENT). */
  setMemory(kib: number, flags = 0): Promise<void> {
    return this.#call('setMemory', 'domainSetMemory', kib, flags);
  }
  /** virDomainSetVcpusFlags (flags: DomainVcpuFlags, default CURRENT). */
  setVcpus(n: number, flags = 0): Promise<void> {
    return this.#call('setVcpus', 'domainSetVcpus', n, flags);
  }
  /** virDomainGetGuestInfo (types: GuestInfoTypes, 0 = all); needs the guest agent. */
  getGuestInfo(types = 0, flags = 0): Promise<TypedParams> {
    return this.#call('getGuestInfo', 'domainGetGuestInfo', types, flags);
  }
  /** virDomainInterfaceAddresses (source: InterfaceAddressesSource). */
  interfaceAddresses(source = 0, flags = 0): Promise<InterfaceAddresses[]> {
    return this.#call('interfaceAddresses', 'domainInterfaceAddresses', source, flags);
  }
}

function hostTime(): { seconds: number; nseconds: number } {
  const ms = Date.now();
  return { seconds: Math.floor(ms / 1000), nseconds: (ms % 1000) * 1e6 };
}
