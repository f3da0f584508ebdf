// DomainManager: what virt-launcher does to its libvirt domain on behalf of virt-handler
// (upstream's LibvirtDomainManager). Method names and shapes match cmd-protocol's CmdBackend,
// so a DomainManager can be handed to CmdServer as is.

import { EventEmitter } from 'node:events';
import {
  parseDomainXml,
  podLayout,
  toDomain,
  toDomainXml,
  type ConverterContext,
  type PodLayout,
} from '@kubevirt-ts/converter';
import { ConnectionHolder, type ConnectionSource } from './connection.js';
import { domainNameOf, newDomain, type DomainSpec, type KubevirtDomain } from './domain.js';
import { deviceXml } from './device-xml.js';
import {
  agentAnswers,
  agentPing,
  guestExec,
  guestFilesystems,
  guestInfo,
  guestUsers,
} from './guest-agent.js';
import type { GuestAgentInfo } from './guest-info.js';
import {
  isInvalidOperation,
  isNotFound,
  Vir,
  type LibvirtConnection,
  type LibvirtDomain,
} from './libvirt.js';
import { createLogger, type Logger } from '@kubevirt-ts/log';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import {
  checkMigrationTarget,
  domainTypeOf,
  ephemeralDisksBytes,
  isBlockMigration,
  migrateCall,
  migrationDataGB,
  monitorMigration,
  parseMigrationOptions,
  pauseForMigration,
  TCG_COHERENT_DIRTY_BITMAP_QEMU,
  type MigrationOptions,
  type MigrationState,
  type MigrationTarget,
} from './migration.js';
import { convertDomainStats, type DomainStats } from './stats.js';
import { convReason, convState, isDomainDown, statusFromLibvirt, type DomainStatus } from './status.js';

/** cmd-protocol's VirtualMachineOptions, as far as the manager uses them. */
export interface SyncOptions {
  VirtualMachineSMBios?:
    { manufacturer?: string; product?: string; version?: string; sku?: string; family?: string } | undefined;
  MemBalloonStatsPeriod?: number;
  /** preallocated / thick-provisioned volumes: their disks get no discard=unmap */
  PreallocatedVolumes?: string[];
  DisksInfo?: Record<string, { format?: string; virtualSize?: number | string } | undefined>;
  clusterConfig?: { FreePageReportingDisabled?: boolean; SerialConsoleLogDisabled?: boolean } | undefined;
}

/**
 * The converter context for one sync: `base` (the launcher's facts about its Pod) with what
 * virt-handler sent in VirtualMachineOptions applied (SMBIOS, balloon stats period, preallocated
 * volumes, image formats, free page reporting, serial console log).
 */
export function contextWithOptions(base: ConverterContext, o: SyncOptions | undefined): ConverterContext {
  if (!o) return base;
  const ctx: ConverterContext = { ...base };
  const smbios = o.VirtualMachineSMBios;
  if (smbios) {
    const entries = Object.entries(smbios).filter(([, v]) => typeof v === 'string' && v !== '');
    if (entries.length) ctx.smbios = Object.fromEntries(entries);
  }
  if (o.MemBalloonStatsPeriod) ctx.memBalloonStatsPeriod = o.MemBalloonStatsPeriod;
  if (o.PreallocatedVolumes?.length) ctx.volumesDiscardIgnore = [...o.PreallocatedVolumes];
  if (o.DisksInfo) {
    const disksInfo: NonNullable<ConverterContext['disksInfo']> = { ...base.disksInfo };
    for (const [volume, info] of Object.entries(o.DisksInfo)) {
      if (info?.format !== 'raw' && info?.format !== 'qcow2') continue;
      const size = Number(info.virtualSize);
      disksInfo[volume] = { format: info.format, ...(size > 0 ? { virtualSize: size } : {}) };
    }
    ctx.disksInfo = disksInfo;
  }
  if (o.clusterConfig) {
    // only ever turned off here: whether it may be on also depends on the VMI (hugepages, dedicated
    // CPUs, ...), which the launcher's base context decides
    if (o.clusterConfig.FreePageReportingDisabled) ctx.freePageReporting = false;
    if (o.clusterConfig.SerialConsoleLogDisabled) ctx.serialConsoleLog = false;
  }
  return ctx;
}

export interface DomainManagerOptions {
  /** libvirt connection (or how to open one: then the manager reopens it after libvirtd restarts) */
  connection: ConnectionSource;
  /**
   * converter context for a VMI (paths, arch, emulation, ...): a fixed object (the options of each
   * call are applied to it with contextWithOptions) or a function deciding per call
   */
  context:
    ConverterContext | ((vmi: VirtualMachineInstance, options: SyncOptions | undefined) => ConverterContext);
  /**
   * Called after conversion, before a new domain is defined: create what the domain refers to
   * (cloud-init ISOs, overlays, directories). Also called by prepareMigrationTarget.
   */
  prepare?: (
    vmi: VirtualMachineInstance,
    domain: DomainSpec,
    options: SyncOptions | undefined,
  ) => Promise<void>;
  /** grace period when neither shutdownVMI's argument nor the VMI's spec gives one (default 30) */
  defaultGracePeriodSeconds?: number;
  /** how often to poll the domain state while waiting (default 200 ms) */
  pollIntervalMs?: number;
  /**
   * Where migrateVMI sends a VMI when its caller gives no target: upstream's launcher derives it
   * from its share dir and the VMI uid (upstreamMigrationTarget), never from the request.
   */
  migrationTarget?: (vmi: VirtualMachineInstance) => MigrationTarget;
  logger?: Logger;
}

export interface ShutdownOptions {
  /** seconds to wait for the guest after the ACPI request before destroying the domain */
  gracePeriodSeconds?: number;
  /** resolve only once the domain is down (default: resolve once the request was sent) */
  wait?: boolean;
}

export type ShutdownResult = 'absent' | 'already-down' | 'shutdown' | 'killed' | 'requested';

/** virDomainStatsTypes: STATE | CPU_TOTAL | BALLOON | VCPU | INTERFACE | BLOCK */
const STATS_GROUPS = 1 | 2 | 4 | 8 | 16 | 32;

/** Paused reasons during which syncVMI must not resume the domain (libvirt or a job owns it). */
const SYSTEM_PAUSE_REASONS = new Set([
  'Migration',
  'Postcopy',
  'PostcopyFailed',
  'StartingUp',
  'Save',
  'Dump',
  'Snapshot',
]);

/**
 * Events: 'migration' (domainName, MigrationState) when an outgoing migration starts, ends or is
 * being aborted; a DomainWatcher given this manager as `migrations` re-reports the domain then.
 */
export class DomainManager extends EventEmitter {
  readonly holder: ConnectionHolder;
  private readonly opts: DomainManagerOptions;
  private readonly log: Logger;
  /** domains the user paused (syncVMI leaves them paused) */
  private readonly pausedByUser = new Set<string>();
  private readonly shutdowns = new Map<string, Promise<ShutdownResult>>();
  private closed = false;
  private readonly unfreezeTimers = new Map<string, NodeJS.Timeout>();
  private readonly frozen = new Set<string>();
  private readonly migrationTargets = new Set<string>();
  private readonly migrations = new Map<string, { state: MigrationState; done: Promise<MigrationState> }>();

  constructor(opts: DomainManagerOptions) {
    super();
    this.opts = opts;
    this.holder = ConnectionHolder.from(opts.connection);
    this.log = opts.logger ?? createLogger('domain-manager');
  }

  /** Where the VMI's files live (the converter context's layout). */
  private layoutOf(vmi: VirtualMachineInstance): PodLayout {
    const ctx =
      typeof this.opts.context === 'function' ? this.opts.context(vmi, undefined) : this.opts.context;
    return ctx.layout ?? podLayout;
  }

  /** virConnectGetLibVersion as a number (0 when unknown). */
  private async libvirtVersion(): Promise<number> {
    try {
      const v = Number(await (await this.conn()).getLibVersion());
      return Number.isFinite(v) ? v : 0;
    } catch {
      return 0;
    }
  }

  /** libvirt's hypervisor (QEMU) version as a number, major*1e6+minor*1e3+micro (0 when unknown). */
  private async qemuVersionNumber(): Promise<number> {
    try {
      const v = await (await this.conn()).getVersion();
      if (typeof v === 'number') return v;
      const m = /^(\d+)\.(\d+)\.(\d+)/.exec(v);
      return m ? Number(m[1]) * 1_000_000 + Number(m[2]) * 1000 + Number(m[3]) : 0;
    } catch {
      return 0;
    }
  }

  /** Converts a VMI to the domain the manager would define for it (no libvirt involved). */
  convert(vmi: VirtualMachineInstance, options?: SyncOptions): DomainSpec {
    const ctx =
      typeof this.opts.context === 'function'
        ? this.opts.context(vmi, options)
        : contextWithOptions(this.opts.context, options);
    return toDomain(vmi, ctx);
  }

  /**
   * Brings the domain to what the VMI asks for: converts it, defines and starts it when absent
   * (paused when spec.startStrategy is Paused), starts a defined but stopped domain unless the
   * VMI already ran, resumes a domain paused by the system, and applies what can change live
   * (disk hot-plug / unplug). Idempotent: a second call on a running domain changes nothing.
   */
  async syncVMI(vmi: VirtualMachineInstance, options?: SyncOptions): Promise<KubevirtDomain> {
    const name = domainNameOf(vmi);
    const log = this.vmiLog(vmi);
    const spec = this.convert(vmi, options);
    const conn = await this.conn();
    let dom = await this.lookup(conn, name);
    let created = false;
    if (!dom && this.migrationTargets.has(name)) {
      // prepared as a migration target: the domain comes with the migration, never from a fresh boot
      throw new Error(`domain ${name} is waiting for an incoming migration; it is not started here`);
    }
    if (!dom) {
      if (this.opts.prepare) await this.opts.prepare(vmi, spec, options);
      dom = await conn.defineXML(toDomainXml(spec));
      created = true;
      log.info('Domain defined.');
    }
    const st = await dom.getState();
    const status = statusFromLibvirt(st.state, st.reason);
    if (isDomainDown(status)) {
      const phase = vmi.status?.phase;
      const alreadyRan = phase === 'Running' || phase === 'Succeeded' || phase === 'Failed';
      if (!created) {
        // Keep the definition current while the domain is down (upstream does the same); libvirt
        // refuses a redefinition under another UUID, so keep the one it has.
        if (this.opts.prepare) await this.opts.prepare(vmi, spec, options);
        dom = await conn.defineXML(toDomainXml(spec.uuid ? spec : { ...spec, uuid: dom.uuid }));
      }
      if (alreadyRan || status.reason === 'Migrated') {
        log.info('Domain is down and the VMI already ran; not starting it again.', { reason: status.reason });
      } else {
        const paused = vmi.spec.startStrategy === 'Paused';
        await dom.create(paused ? Vir.DOMAIN_START_PAUSED : 0);
        if (paused) this.pausedByUser.add(name);
        log.info(paused ? 'Domain started paused (startStrategy Paused).' : 'Domain started.');
      }
    } else if (
      status.status === 'Paused' &&
      !this.pausedByUser.has(name) &&
      !SYSTEM_PAUSE_REASONS.has(status.reason)
    ) {
      await dom.resume();
      log.info('Domain resumed.', { reason: status.reason });
    } else if (status.status === 'Running' || status.status === 'Paused' || status.status === 'Blocked') {
      await this.applyLiveChanges(dom, spec, log);
    }
    return this.describe(dom, name);
  }

  /** Hot-plugs disks the VMI gained and unplugs hot-pluggable disks it lost (by target dev). */
  private async applyLiveChanges(dom: LibvirtDomain, desired: DomainSpec, log: Logger): Promise<void> {
    const live = parseDomainXml(await dom.getXMLDesc(0));
    const liveDisks = new Map((live.devices.disks ?? []).map((d) => [d.target.dev, d]));
    const wantDisks = new Map((desired.devices.disks ?? []).map((d) => [d.target.dev, d]));
    for (const [dev, disk] of wantDisks) {
      if (liveDisks.has(dev)) continue;
      await dom.attachDevice(deviceXml(desired, 'disk', dev), Vir.DOMAIN_AFFECT_LIVE);
      log.info('Disk attached.', { target: dev, disk: disk.alias });
    }
    for (const [dev, disk] of liveDisks) {
      if (wantDisks.has(dev)) continue;
      if (disk.target.bus !== 'scsi' && disk.target.bus !== 'virtio' && disk.target.bus !== 'usb') {
        log.warn('Disk is gone from the VMI but its bus cannot unplug it; leaving it.', {
          target: dev,
          bus: disk.target.bus,
        });
        continue;
      }
      await dom.detachDevice(deviceXml(live, 'disk', dev), Vir.DOMAIN_AFFECT_LIVE);
      log.info('Disk detached.', { target: dev });
    }
  }

  async pauseVMI(vmi: VirtualMachineInstance): Promise<void> {
    const name = domainNameOf(vmi);
    const dom = await this.mustLookup(name);
    const st = await dom.getState();
    if (convState(st.state) === 'Running' || convState(st.state) === 'Blocked') {
      await dom.suspend();
      this.vmiLog(vmi).info('Domain paused.');
    } else if (convState(st.state) !== 'Paused') {
      throw new Error(
        `cannot pause domain ${name}: it is ${convState(st.state)} (${convReason(st.state, st.reason)})`,
      );
    }
    this.pausedByUser.add(name);
  }

  async unpauseVMI(vmi: VirtualMachineInstance): Promise<void> {
    const name = domainNameOf(vmi);
    const dom = await this.mustLookup(name);
    const st = await dom.getState();
    if (convState(st.state) === 'Paused') {
      await dom.resume();
      this.vmiLog(vmi).info('Domain unpaused.');
      // The guest's clock stood still while paused: ask the agent to fix it (best effort).
      void dom
        .setTime()
        .catch((err: unknown) =>
          this.vmiLog(vmi).debug('setTime after unpause failed', { reason: String(err) }),
        );
    } else if (convState(st.state) !== 'Running') {
      throw new Error(
        `cannot unpause domain ${name}: it is ${convState(st.state)} (${convReason(st.state, st.reason)})`,
      );
    }
    this.pausedByUser.delete(name);
  }

  /** Freezes the guest's filesystems (guest agent); thaws them after unfreezeTimeoutSeconds (0: never). */
  async freezeVMI(vmi: VirtualMachineInstance, unfreezeTimeoutSeconds = 0): Promise<void> {
    const name = domainNameOf(vmi);
    const dom = await this.mustLookup(name);
    await dom.fsFreeze();
    this.frozen.add(name);
    this.clearTimer(this.unfreezeTimers, name);
    if (unfreezeTimeoutSeconds > 0) {
      const t = setTimeout(() => {
        this.unfreezeTimers.delete(name);
        void this.unfreezeVMI(vmi).catch((err: unknown) =>
          this.vmiLog(vmi).warn('automatic unfreeze failed', { reason: String(err) }),
        );
      }, unfreezeTimeoutSeconds * 1000);
      t.unref();
      this.unfreezeTimers.set(name, t);
    }
    this.vmiLog(vmi).info('Guest filesystems frozen.', { unfreezeTimeoutSeconds });
  }

  async unfreezeVMI(vmi: VirtualMachineInstance): Promise<void> {
    const name = domainNameOf(vmi);
    this.clearTimer(this.unfreezeTimers, name);
    const dom = await this.mustLookup(name);
    await dom.fsThaw();
    this.frozen.delete(name);
    this.vmiLog(vmi).info('Guest filesystems thawed.');
  }

  /** Reboots the guest: through the guest agent when it answers, else by ACPI when the domain has ACPI. */
  async softRebootVMI(vmi: VirtualMachineInstance): Promise<void> {
    const name = domainNameOf(vmi);
    const dom = await this.mustLookup(name);
    if (await agentAnswers(dom, 1)) {
      await dom.reboot(Vir.DOMAIN_REBOOT_GUEST_AGENT);
      this.vmiLog(vmi).info('Guest reboot requested through the guest agent.');
      return;
    }
    const live = parseDomainXml(await dom.getXMLDesc(0));
    if (!live.features?.acpi) {
      throw new Error(`cannot soft-reboot ${name}: no guest agent answers and ACPI is disabled`);
    }
    await dom.reboot(Vir.DOMAIN_REBOOT_ACPI_POWER_BTN);
    this.vmiLog(vmi).info('Guest reboot requested by ACPI.');
  }

  /**
   * Graceful shutdown: presses the ACPI power button, and destroys the domain when it is still up
   * after the grace period (the argument, else spec.terminationGracePeriodSeconds, else the
   * manager's default). Resolves once the request was sent, or with `wait` once the domain is down.
   */
  async shutdownVMI(vmi: VirtualMachineInstance, opts: ShutdownOptions = {}): Promise<ShutdownResult> {
    const name = domainNameOf(vmi);
    const log = this.vmiLog(vmi);
    const dom = await this.lookup(await this.conn(), name);
    if (!dom) return 'absent';
    const st = await dom.getState();
    if (isDomainDown(statusFromLibvirt(st.state, st.reason))) return 'already-down';
    const grace =
      opts.gracePeriodSeconds ??
      vmi.spec.terminationGracePeriodSeconds ??
      this.opts.defaultGracePeriodSeconds ??
      30;
    if (grace > 0) {
      try {
        await dom.shutdown(Vir.DOMAIN_SHUTDOWN_ACPI_POWER_BTN);
        log.info('Signaled graceful shutdown (ACPI).', { gracePeriodSeconds: grace });
      } catch (err) {
        if (isNotFound(err)) return 'absent';
        if (!isInvalidOperation(err)) throw err;
      }
    }
    let pending = this.shutdowns.get(name);
    if (!pending) {
      const deadline = Date.now() + grace * 1000;
      pending = this.waitDown(name, deadline)
        .then(async (down): Promise<ShutdownResult> => {
          if (down) return 'shutdown';
          if (this.closed) return 'requested';
          log.info('Grace period expired; destroying the domain.', {
            gracePeriodSeconds: grace,
            reason: 'GracePeriodExpired',
          });
          await this.killVMI(vmi);
          return 'killed';
        })
        .finally(() => this.shutdowns.delete(name));
      this.shutdowns.set(name, pending);
      pending.catch((err: unknown) =>
        log.error('shutdown after the grace period failed', { reason: String(err) }),
      );
    }
    return opts.wait ? pending : 'requested';
  }

  /** Destroys (powers off) the domain; a missing or stopped domain is fine. */
  async killVMI(vmi: VirtualMachineInstance): Promise<void> {
    const name = domainNameOf(vmi);
    const dom = await this.lookup(await this.conn(), name);
    if (!dom) return;
    const st = await dom.getState();
    if (isDomainDown(statusFromLibvirt(st.state, st.reason))) return;
    try {
      await dom.destroy(Vir.DOMAIN_DESTROY_GRACEFUL);
    } catch (err) {
      if (isNotFound(err)) return;
      if (isInvalidOperation(err)) return; // stopped meanwhile
      this.vmiLog(vmi).info('Graceful destroy failed; forcing it.', { reason: String(err) });
      await dom.destroy(Vir.DOMAIN_DESTROY_DEFAULT);
    }
    this.vmiLog(vmi).info('Domain destroyed.');
  }

  /** Removes the domain: destroys it when running, then undefines it (with its NVRAM). */
  async deleteVMI(vmi: VirtualMachineInstance): Promise<void> {
    const name = domainNameOf(vmi);
    this.forget(name);
    const dom = await this.lookup(await this.conn(), name);
    if (!dom) return;
    await this.killVMI(vmi);
    try {
      await dom.undefine(Vir.DOMAIN_UNDEFINE_NVRAM);
    } catch (err) {
      if (isNotFound(err)) return;
      throw err;
    }
    this.vmiLog(vmi).info('Domain undefined.');
  }

  /**
   * Starts a live migration of the running domain to the target libvirtd (peer-to-peer,
   * virDomainMigrateToURI3) and returns once it started; follow it with getMigrationState /
   * waitForMigration. `options` is MigrationRequest.options: upstream's MigrationOptions JSON.
   * The target is `target` when given (in-process callers), else DomainManagerOptions.migrationTarget.
   */
  async migrateVMI(
    vmi: VirtualMachineInstance,
    options: unknown,
    target?: MigrationTarget,
  ): Promise<MigrationState> {
    const name = domainNameOf(vmi);
    const log = this.vmiLog(vmi);
    const parsed = parseMigrationOptions(options);
    const to = checkMigrationTarget(target ?? this.opts.migrationTarget?.(vmi));
    // upstream's IsBlockMigration: the handler decided it from the volumes (status.migrationMethod)
    const mo: MigrationOptions = { ...parsed, ...to, blockMigration: isBlockMigration(vmi) };
    const running = this.migrations.get(name);
    if (running && !running.state.completed) throw new Error(`domain ${name} is already migrating`);
    const dom = await this.mustLookup(name);
    const st = await dom.getState();
    const life = convState(st.state);
    if (life !== 'Running' && life !== 'Paused' && life !== 'Blocked') {
      throw new Error(`cannot migrate domain ${name}: it is ${life} (${convReason(st.state, st.reason)})`);
    }
    const sourceXml = await dom.getXMLDesc(Vir.DOMAIN_XML_MIGRATABLE);
    // software emulation on a QEMU whose TCG loses the guest's writes during a live migration: paused throughout
    const pauseGuest = pauseForMigration(domainTypeOf(sourceXml), await this.qemuVersionNumber());
    const { params, flags } = migrateCall(mo, sourceXml, {
      vmi,
      libvirtVersion: mo.blockMigration ? await this.libvirtVersion() : undefined,
      pauseGuest,
    });
    const localDisksBytes = mo.blockMigration
      ? await ephemeralDisksBytes(this.layoutOf(vmi).ephemeralDisksDir)
      : 0;

    // upstream's migration metadata UID is the migration's (status.migrationState.migrationUid): the
    // handler ties the outcome to the migration by it; without a migration state (direct use) the VMI's uid
    const migrationUid = (vmi.status?.migrationState as { migrationUid?: string } | undefined)?.migrationUid;
    const state: MigrationState = {
      uid: migrationUid || vmi.metadata?.uid,
      targetURI: mo.targetURI,
      migrationURI: mo.migrationURI,
      startTimestamp: new Date().toISOString(),
      completed: false,
      failed: false,
      mode: pauseGuest ? 'Paused' : 'PreCopy',
    };
    log.info('Starting live migration.', {
      targetURI: mo.targetURI,
      migrationURI: mo.migrationURI,
      flags,
      ...(pauseGuest
        ? {
            pausedGuest: true,
            pauseReason: `software emulation (TCG) on QEMU older than ${TCG_COHERENT_DIRTY_BITMAP_QEMU / 1_000_000}.0.0 loses the guest's writes during a live migration: the guest is paused for the transfer`,
          }
        : {}),
      // block migration: the disks copied, where to, and whether libvirt skips their zero blocks
      ...(mo.blockMigration
        ? {
            migrationMethod: 'BlockMigration',
            migrateDisks: params.migrateDisks ?? [],
            disksURI: params.disksUri,
            detectZeroes: params.migrateDisksDetectZeroes !== undefined,
          }
        : {}),
      // libvirt's typed parameter (MiB/s; absent: unlimited) and the monitor's limits
      bandwidthMiB: params.bandwidth,
      progressTimeoutSeconds: mo.progressTimeoutMs ? mo.progressTimeoutMs / 1000 : undefined,
      completionTimeoutPerGiB: mo.completionTimeoutPerGiB,
    });
    const started = Date.now();
    const call = dom.migrateToURI3(mo.targetURI, params, flags);
    const monitor = monitorMigration(
      dom,
      state,
      mo,
      started,
      migrationDataGB(vmi, localDisksBytes),
      (reason, why) => {
        this.log.warn(`${why}; aborting the migration.`, { name: dom.name, reason });
        this.emitMigration(dom.name, state);
      },
    );
    const done = call.then(
      () => {
        monitor.stop();
        state.completed = true;
        state.endTimestamp = new Date().toISOString();
        if (state.abortStatus === 'Aborting') state.abortStatus = 'Failed'; // it finished before the abort took
        log.info('Live migration succeeded.', { seconds: (Date.now() - started) / 1000 });
        this.emitMigration(name, state);
        return state;
      },
      (err: unknown) => {
        monitor.stop();
        const msg = err instanceof Error ? err.message : String(err);
        state.completed = true;
        state.failed = true;
        state.endTimestamp = new Date().toISOString();
        // a timeout's reason says why libvirt's "operation aborted" happened
        state.failureReason = state.failureReason ? `${state.failureReason}: ${msg}` : msg;
        if (state.abortStatus === 'Aborting') state.abortStatus = 'Succeeded';
        log.error('Live migration failed.', { reason: state.failureReason });
        this.emitMigration(name, state);
        return state;
      },
    );
    this.migrations.set(name, { state, done });
    this.emitMigration(name, state);
    return { ...state };
  }

  private emitMigration(name: string, state: MigrationState): void {
    this.emit('migration', name, { ...state });
  }

  /** The latest migration's state for the domain (undefined when it never migrated from here). */
  getMigrationState(domainName?: string): MigrationState | undefined {
    const m = domainName ? this.migrations.get(domainName) : [...this.migrations.values()].at(-1);
    return m ? { ...m.state } : undefined;
  }

  /** Resolves when the domain's current migration ended (successfully or not). */
  async waitForMigration(vmiOrName: VirtualMachineInstance | string): Promise<MigrationState> {
    const name = typeof vmiOrName === 'string' ? vmiOrName : domainNameOf(vmiOrName);
    const m = this.migrations.get(name);
    if (!m) throw new Error(`domain ${name} has no migration`);
    return { ...(await m.done) };
  }

  /** Aborts the running outgoing migration. */
  async cancelMigration(vmi: VirtualMachineInstance): Promise<void> {
    const name = domainNameOf(vmi);
    const m = this.migrations.get(name);
    if (!m || m.state.completed) throw new Error(`cannot cancel migration of ${name}: it is not migrating`);
    m.state.abortStatus = 'Aborting';
    this.emitMigration(name, m.state);
    const dom = await this.mustLookup(name);
    await dom.abortJob();
    this.vmiLog(vmi).info('Migration abort requested.');
  }

  /**
   * Target side, before the migration: prepares what the incoming domain refers to (the
   * prepare hook) and remembers that the domain will arrive by migration.
   */
  async prepareMigrationTarget(vmi: VirtualMachineInstance, options?: SyncOptions): Promise<void> {
    const name = domainNameOf(vmi);
    const spec = this.convert(vmi, options);
    if (this.opts.prepare) await this.opts.prepare(vmi, spec, options);
    this.migrationTargets.add(name);
    this.vmiLog(vmi).info('Prepared as migration target.');
  }

  /** Target side, after the migration: the domain must be here and running; fixes the guest clock. */
  async finalizeMigration(vmi: VirtualMachineInstance): Promise<void> {
    const name = domainNameOf(vmi);
    const dom = await this.mustLookup(name);
    const st = await dom.getState();
    const life = convState(st.state);
    if (life !== 'Running' && life !== 'Paused') {
      throw new Error(
        `cannot finalize migration of ${name}: domain is ${life} (${convReason(st.state, st.reason)})`,
      );
    }
    this.migrationTargets.delete(name);
    void dom
      .setTime()
      .catch((err: unknown) =>
        this.vmiLog(vmi).debug('setTime after migration failed', { reason: String(err) }),
      );
    this.vmiLog(vmi).info('Migration finalized on the target.');
  }

  /** The (first) domain with its live spec and status; with a name, that domain. Undefined when absent. */
  async getDomain(domainName?: string): Promise<KubevirtDomain | undefined> {
    const conn = await this.conn();
    let dom: LibvirtDomain | undefined;
    if (domainName) dom = await this.lookup(conn, domainName);
    else dom = (await conn.listAllDomains())[0];
    if (!dom) return undefined;
    try {
      return await this.describe(dom, dom.name);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** Stats of the (first or named) domain in KubeVirt's shape; undefined when there is none. */
  async getDomainStats(domainName?: string): Promise<DomainStats | undefined> {
    const conn = await this.conn();
    // the groups upstream reports; asking for all (0) also takes the slow ones (e.g. a dirty-rate probe)
    const all = await conn.getAllDomainStats(STATS_GROUPS);
    const list = Array.isArray(all) ? all : [];
    const rec = domainName ? list.find((r) => recordName(r) === domainName) : list[0];
    return rec ? convertDomainStats(rec) : undefined;
  }

  /** guest-ping through the guest agent; rejects when the agent does not answer. */
  async guestPing(domainName: string, timeoutSeconds = 5): Promise<void> {
    await agentPing(await this.mustLookup(domainName), timeoutSeconds);
  }

  /** upstream's GuestAgentInfo (agent version, OS, hostname, timezone, users, filesystems). */
  async getGuestInfo(domainName?: string): Promise<GuestAgentInfo> {
    const dom = domainName ? await this.mustLookup(domainName) : await this.firstDomain();
    return guestInfo(dom, this.frozen.has(dom.name));
  }

  /** upstream's VirtualMachineInstanceGuestOSUserList: users logged in to the guest (guest agent). */
  async getUsers(domainName?: string): Promise<{ items: NonNullable<GuestAgentInfo['userList']> }> {
    return guestUsers(domainName ? await this.mustLookup(domainName) : await this.firstDomain());
  }

  /** upstream's VirtualMachineInstanceFileSystemList: the guest's filesystems (guest agent). */
  async getFilesystems(
    domainName?: string,
  ): Promise<{ items: NonNullable<GuestAgentInfo['fsInfo']>['disks'] }> {
    return guestFilesystems(domainName ? await this.mustLookup(domainName) : await this.firstDomain());
  }

  /**
   * Runs a command in the guest through the agent (guest-exec, then guest-exec-status until it
   * exited or timeoutSeconds passed) and returns its exit code and stdout.
   */
  async exec(
    domainName: string,
    command: string,
    args: string[],
    timeoutSeconds: number,
  ): Promise<{ exitCode: number; stdout: string }> {
    return guestExec(await this.mustLookup(domainName), command, args, timeoutSeconds);
  }

  /** QEMU's version as "major.minor.micro" (libvirt's hypervisor version). */
  async getQemuVersion(): Promise<string> {
    const v = await (await this.conn()).getVersion();
    if (typeof v === 'string') return v;
    return `${Math.floor(v / 1_000_000)}.${Math.floor(v / 1000) % 1000}.${v % 1000}`;
  }

  /** Forgets timers and per-domain state; the connection is closed only when `closeConnection`. */
  async close(closeConnection = false): Promise<void> {
    this.closed = true;
    for (const t of this.unfreezeTimers.values()) clearTimeout(t);
    this.unfreezeTimers.clear();
    if (closeConnection) await this.holder.close();
  }

  // ---- helpers ----

  private async conn(): Promise<LibvirtConnection> {
    return this.holder.get();
  }

  private async lookup(conn: LibvirtConnection, name: string): Promise<LibvirtDomain | undefined> {
    try {
      return await conn.lookupDomainByName(name);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  private async mustLookup(name: string): Promise<LibvirtDomain> {
    const dom = await this.lookup(await this.conn(), name);
    if (!dom) throw new Error(`domain ${name} not found`);
    return dom;
  }

  private async firstDomain(): Promise<LibvirtDomain> {
    const dom = (await (await this.conn()).listAllDomains())[0];
    if (!dom) throw new Error('no domain');
    return dom;
  }

  private async describe(dom: LibvirtDomain, name: string): Promise<KubevirtDomain> {
    const st = await dom.getState();
    let spec: DomainSpec | undefined;
    try {
      spec = parseDomainXml(await dom.getXMLDesc(0));
    } catch (err) {
      if (isNotFound(err)) throw err;
      this.log.warn('could not read the domain spec', { name, reason: String(err) });
    }
    const d = newDomain(name, statusFromLibvirt(st.state, st.reason), spec, dom.uuid);
    if (this.frozen.has(name)) d.status.fsFreezeStatus = { status: 'frozen' };
    const m = this.migrations.get(name);
    if (m) d.migration = { ...m.state };
    return d;
  }

  /** Polls until the domain is down or gone (true) or the deadline passed (false). */
  private async waitDown(name: string, deadline: number): Promise<boolean> {
    const every = this.opts.pollIntervalMs ?? 200;
    for (;;) {
      const dom = await this.lookup(await this.conn(), name);
      if (!dom) return true;
      let status: DomainStatus;
      try {
        const st = await dom.getState();
        status = statusFromLibvirt(st.state, st.reason);
      } catch (err) {
        if (isNotFound(err)) return true;
        throw err;
      }
      if (isDomainDown(status)) return true;
      if (Date.now() >= deadline || this.closed) return false;
      await new Promise((r) => setTimeout(r, Math.min(every, Math.max(0, deadline - Date.now()))));
    }
  }

  private forget(name: string): void {
    this.pausedByUser.delete(name);
    this.frozen.delete(name);
    this.migrationTargets.delete(name);
    this.clearTimer(this.unfreezeTimers, name);
  }

  private clearTimer(map: Map<string, NodeJS.Timeout>, name: string): void {
    const t = map.get(name);
    if (t) clearTimeout(t);
    map.delete(name);
  }

  private vmiLog(vmi: VirtualMachineInstance): Logger {
    const meta = {
      kind: 'VirtualMachineInstance',
      namespace: vmi.metadata?.namespace ?? 'default',
      name: vmi.metadata?.name,
      uid: vmi.metadata?.uid,
    };
    const l = this.log;
    return {
      info: (msg: string, extra?: object) => l.info(msg, { ...meta, ...extra }),
      warn: (msg: string, extra?: object) => l.warn(msg, { ...meta, ...extra }),
      error: (msg: string, extra?: object) => l.error(msg, { ...meta, ...extra }),
      debug: (msg: string, extra?: object) => l.debug(msg, { ...meta, ...extra }),
    } as Logger;
  }
}

function recordName(r: unknown): string | undefined {
  if (r && typeof r === 'object') {
    const d = (r as { domain?: { name?: string }; name?: string }).domain;
    return d?.name ?? (r as { name?: string }).name;
  }
  return undefined;
}
