// The launcher's start-up and lifecycle, shared by the in-Pod and the standalone mode:
//   dirs -> libvirtd (session, own XDG dirs; QEMU writes its logs itself) -> connect -> cmd server on launcher-init-sock
//   -> domain watcher + notify client -> ready (rename to launcher-sock)
// then: SyncVirtualMachine prepares the disks, starts the guest's DHCP server (Pod network phase 2,
// from the config virt-handler's phase 1 left in the private dir) and starts the domain through the DomainManager; the
// domain must be Running within the QEMU timeout; domain events go to the handler; the launcher ends
// when the domain ends (exit 0 after a guest shutdown / kill / delete, non-zero after a crash).
import { EventEmitter } from 'node:events';
import { chmod, chown, mkdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '@kubevirt-ts/log';
import { CmdServer, NotifyClient, notifySocketPath, type CmdBackend } from '@kubevirt-ts/cmd-protocol';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { passtNics, type PodLayout } from '@kubevirt-ts/converter';
import {
  podNetworkConfigFile,
  startGuestDhcp,
  startPasst,
  withGuestMac,
  type DhcpServer,
  type PasstProcess,
} from '@kubevirt-ts/network';
import { ExitCode, LauncherError } from './errors.js';
import { findPidFiles, ownStart, ownedLeftovers } from './procs.js';
import { capLogFile } from './serial-log.js';
import { traceMark } from './start-trace.js';
import { disksInfoOf, prepareVolumes, type ClaimImageOptions } from '@kubevirt-ts/disks';
import {
  createLayout,
  openDomainLayer,
  saveCaps,
  type DomainEventLike,
  type DomainLayer,
  type SessionDaemon,
} from './wiring.js';

export interface LauncherConfig {
  name: string;
  namespace: string;
  uid: string;
  gracePeriodSeconds: number;
  qemuTimeoutMs: number;
  allowEmulation: boolean;
  /** prefix of the in-Pod layout ('' in a real Pod) */
  root: string;
  /** dir of launcher-init-sock / launcher-sock */
  socketsDir: string;
  /** dir of the handler's domain-notify-pipe.sock; undefined: no notify client */
  notifyDir?: string;
  /**
   * upstream's virtShareDir: its `migrationproxy/` holds the migration proxy sockets named from the
   * VMI uid (upstreamMigrationTarget); undefined: MigrateVirtualMachine is refused
   */
  shareDir?: string;
  /** base dir of the private libvirtd (XDG dirs, pid files) */
  libvirtBaseDir: string;
  /** uid:gid libvirtd and QEMU run as (needed when the launcher runs as root) */
  libvirtUser?: { uid: number; gid: number };
  keepAfterFailure: boolean;
  logger: Logger;
  /** host-wide cache of libvirt's QEMU capability probes, shared by launchers on one host (optional) */
  capsCacheDir?: string;
  /** where virt-handler's Pod network setup leaves its config (pod-network-<iface>.json; the share dir in a Pod, else the private dir) */
  podNetworkDir?: string;
  /** standalone (no Pod network namespace): the binding of the pod network instead of a tap */
  podNetworkBinding?: 'passt' | 'slirp';
  /** this launcher's Pod (env POD_NAME): a SignalTargetPodCleanup naming it as the migration's target ends the launcher */
  podName?: string;
  /**
   * the private libvirtd, already being started by the caller (early.ts's startPrivateDaemon with this
   * config's libvirtBaseDir, libvirtUser and capsCacheDir) while the launcher's modules load; the
   * `libvirtd` stage waits for it instead of starting one. The launcher owns it: a failed start stops it.
   */
  daemon?: Promise<SessionDaemon>;
  /** the passt binary for NICs on passt (default `passt` from PATH) */
  passtBinary?: string;
  /**
   * how disk.img on a filesystem claim is sized (lessPVCSpaceToleration, minimumReservePVCBytes: the flags
   * --less-pvc-space-toleration, --minimum-reserve-pvc-bytes); unset fields: upstream's defaults
   */
  claimImage?: ClaimImageOptions;
}

export type Stage = 'dirs' | 'libvirtd' | 'connect' | 'cmd-server' | 'notify' | 'ready';

/** What ended the launcher. */
export interface LauncherResult {
  exitCode: number;
  reason: string;
  message: string;
}

/**
 * Events: 'stage' (stage, msg), 'domain' (DomainEventLike), 'synced' (vmi), 'ended' (LauncherResult).
 */
export class Launcher extends EventEmitter {
  readonly paths: PodLayout;
  private readonly log: Logger;
  /** the guest's DHCP server (masquerade/bridge pod interface, in-Pod mode); null: none needed */
  private dhcp: DhcpServer | null | undefined;
  /** the passt processes of the NICs on passt (passt binding; standalone, the pod network); undefined: not started */
  private passt: PasstProcess[] | undefined;
  private session: SessionDaemon | undefined;
  private layer: DomainLayer | undefined;
  private cmd: CmdServer | undefined;
  private notify: NotifyClient | undefined;
  private vmi: VirtualMachineInstance | undefined;
  private prepared = false;
  /** image facts found while preparing disks (by volume), given to the converter */
  private disksInfo: ReturnType<typeof disksInfoOf> = {};
  private started = false;
  private lastStatus: { status: string; reason: string } | undefined;
  private qemuTimer: NodeJS.Timeout | undefined;
  /** keeps the serial console log small (virtlogd's rotation; there is no virtlogd) */
  private serialLogCap: { stop(): void } | undefined;
  private terminating = false;
  /** SignalTargetPodCleanup reached this migration target: end once no domain is left */
  private cleanupSignalled = false;
  private endResult: LauncherResult | undefined;
  private endWaiters: Array<(r: LauncherResult) => void> = [];
  private downWaiters: Array<() => void> = [];
  readonly startedAt = Date.now();

  constructor(readonly config: LauncherConfig) {
    super();
    this.log = config.logger;
    this.paths = createLayout(config.root);
  }

  private stage(stage: Stage, msg: string, fields: Record<string, unknown> = {}): void {
    this.log.info(msg, { stage, ...fields });
    traceMark(stage);
    this.emit('stage', stage, msg);
  }

  private async runStage<T>(stage: Stage, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      if (e instanceof LauncherError) throw e;
      throw new LauncherError(`${stage}: ${(e as Error).message}`, ExitCode.FAILURE, stage);
    }
  }

  /** Runs every start-up stage; the launcher is ready for commands when it resolves. */
  async start(): Promise<void> {
    const c = this.config;
    const owner = c.libvirtUser;
    await this.runStage('dirs', async () => {
      const dirs = [
        this.paths.privateDir,
        this.paths.vmiPrivateDir(c.uid),
        this.paths.ephemeralDisksDir,
        this.paths.containerDisksDir,
        path.dirname(this.paths.emptyDiskImage('x')),
        path.dirname(path.dirname(path.dirname(this.paths.cloudInitIso('noCloud', 'x', 'y')))),
        c.libvirtBaseDir,
      ];
      // only dirs made here are chown-ed/chmod-ed: an existing one (a Pod's emptyDir, a user's
      // --work-dir) is not the launcher's to change
      const privateDir = this.paths.vmiPrivateDir(c.uid);
      // EFI's variable store: a Pod mounts an emptyDir there when the VMI uses EFI (else the image's /var/lib is not
      // the launcher's to write, and nothing needs the dir); standalone, it is made under the work dir
      const nvramDir = path.dirname(this.paths.nvramFile('x'));
      for (const d of [...dirs, nvramDir]) {
        const made = await mkdir(d, { recursive: true }).catch((e: NodeJS.ErrnoException) => {
          if (d === nvramDir && (e.code === 'EACCES' || e.code === 'EROFS' || e.code === 'EPERM'))
            return undefined;
          throw e;
        });
        if (made === undefined) continue;
        if (owner && process.getuid?.() === 0) await chown(d, owner.uid, owner.gid);
        if (d === privateDir) await chmod(d, 0o700);
      }
      const pst = await stat(privateDir);
      if ((pst.mode & 0o077) !== 0)
        throw new LauncherError(
          `dirs: ${privateDir} exists and other users can enter it (mode ${(pst.mode & 0o777).toString(8)}); ` +
            'the launcher does not change the mode of a directory it did not create: remove it or make it 0700',
          ExitCode.FAILURE,
          'dirs',
        );
      this.stage('dirs', 'private dirs ready', { privateDir: this.paths.privateDir });
    });
    this.session = await this.runStage('libvirtd', async () => {
      const s = await (c.daemon ??
        openDomainLayer.startDaemon({
          baseDir: c.libvirtBaseDir,
          user: owner,
          logger: this.log,
          capsCacheDir: c.capsCacheDir,
        }));
      this.stage('libvirtd', 'libvirtd (session mode) answers', { pid: s.pid, uri: s.uri });
      this.watchDaemon(s.pid);
      const serialLog = this.paths.serialLogFile(c.uid);
      this.serialLogCap = capLogFile(serialLog, {
        onRotate: () => this.log.info('serial console log rotated', { file: serialLog }),
        onError: (e) => this.log.warn(`serial console log: ${e.message}`, { file: serialLog }),
      });
      return s;
    });
    this.layer = await this.runStage('connect', async () => {
      const layer = await openDomainLayer.connect(this.session!, {
        root: c.root,
        allowEmulation: c.allowEmulation,
        logger: this.log,
        domainName: `${c.namespace}_${c.name}`,
        disksInfo: () => this.disksInfo,
        podNetworkBinding: c.podNetworkBinding,
        shareDir: c.shareDir,
      });
      // with a capability cache, the QEMU capabilities load from it while the cmd server starts and the
      // handler's sync comes; without one they would be probed (a QEMU process): left to the first define,
      // so that a launcher whose VMI is refused never starts a QEMU
      if (c.capsCacheDir) void layer.warmUp?.().then(() => traceMark('caps-loaded'));
      this.stage('connect', 'connected to libvirt', { libvirtVersion: await layer.libvirtVersion() });
      return layer;
    });
    await this.runStage('cmd-server', async () => {
      this.cmd = new CmdServer({ socketsDir: c.socketsDir, backend: this.backend(), logger: this.log });
      await this.cmd.start();
      this.stage('cmd-server', 'cmd server listening', { socket: this.cmd.socketPath });
    });
    await this.runStage('notify', async () => {
      if (c.notifyDir) {
        this.notify = new NotifyClient(notifySocketPath(c.notifyDir), { logger: this.log });
      }
      this.layer!.onEvent((ev) => this.onDomainEvent(ev));
      await this.layer!.startWatching();
      this.stage(
        'notify',
        c.notifyDir ? 'domain events go to the handler' : 'domain watcher running (no handler)',
        {
          socket: c.notifyDir ? notifySocketPath(c.notifyDir) : undefined,
        },
      );
    });
    await this.runStage('ready', async () => {
      await this.cmd!.ready();
      this.stage('ready', 'launcher ready', {
        socket: this.cmd!.socketPath,
        ms: Date.now() - this.startedAt,
      });
    });
  }

  /** The CmdServer backend: the DomainManager's methods, with disk preparation and the QEMU timeout around sync. */
  private backend(): CmdBackend {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the backend object's methods have their own `this`
    const self = this;
    const dm = () => {
      if (!self.layer) throw new Error('libvirt is not connected');
      return self.layer.manager;
    };
    const checkVmi = (vmi: VirtualMachineInstance) => {
      const n = vmi.metadata?.name;
      const ns = vmi.metadata?.namespace || 'default';
      if (n !== self.config.name || ns !== self.config.namespace) {
        throw new Error(
          `metadata: this launcher runs ${self.config.namespace}/${self.config.name}, not ${ns}/${n ?? ''}`,
        );
      }
    };
    const delegate =
      (method: keyof CmdBackend) =>
      async (...args: unknown[]) => {
        const m = (dm() as unknown as Record<string, unknown>)[method];
        if (typeof m !== 'function')
          throw new Error(`${String(method)} is not supported by the DomainManager`);
        if (args[0] && typeof args[0] === 'object' && 'metadata' in (args[0] as object))
          checkVmi(args[0] as VirtualMachineInstance);
        return (m as (...a: unknown[]) => Promise<unknown>).apply(dm(), args);
      };
    const backend: CmdBackend = {
      async syncVMI(vmi, options) {
        checkVmi(vmi);
        if (self.terminating) throw new Error('the launcher is shutting down');
        self.vmi = vmi;
        traceMark('sync-received');
        if (!self.prepared) {
          const t0 = Date.now();
          const prepared = await prepareVolumes(vmi, self.paths, {
            owner: self.config.libvirtUser,
            claimImage: self.config.claimImage,
            onStep: (msg, f) => self.log.info(msg, { stage: 'prepare', ...f }),
          });
          self.disksInfo = disksInfoOf(prepared);
          self.prepared = true;
          self.log.info('disks prepared', { stage: 'prepare', ms: Date.now() - t0 });
          traceMark('disks-prepared');
        }
        // standalone mode has no Pod network namespace (passt/slirp instead): nothing to serve
        if (self.dhcp === undefined && !self.config.podNetworkBinding) {
          self.dhcp =
            (await startGuestDhcp(vmi, {
              configFile: (iface) =>
                podNetworkConfigFile(self.config.podNetworkDir ?? self.paths.privateDir, iface),
              log: self.log,
            })) ?? null;
        }
        // the NICs on passt (the passt binding; standalone, the pod network): the launcher's own passt
        // children, listening before QEMU connects (in a Pod, in the Pod's network namespace: the guest gets the Pod's addresses)
        if (self.passt === undefined) {
          const nics = passtNics(vmi, {
            ...(self.config.podNetworkBinding ? { podNetworkBinding: self.config.podNetworkBinding } : {}),
            layout: self.paths,
          });
          const procs = await startPasst(nics, {
            binary: self.config.passtBinary,
            user: process.getuid?.() === 0 ? self.config.libvirtUser : undefined,
            log: self.log,
          });
          self.passt = procs;
          for (const p of procs)
            void p.exited.then((r) => {
              // while shutting down (a signal may reach passt with the launcher's process group) it is expected
              if (self.passt?.includes(p) && !self.finishing && !self.terminating)
                self.log.error(
                  `passt (interface ${p.nic.name}, pid ${p.pid}) exited (${r.signal ?? `code ${r.code}`}): the guest's NIC has no network`,
                  { reason: 'PasstExited', pid: p.pid },
                );
            });
        }
        if (!self.started && !self.qemuTimer) self.armQemuTimeout();
        try {
          // the bridge binding's MAC swap: the guest NIC takes the Pod interface's former MAC
          const dom = await dm().syncVMI!(withGuestMac(vmi, self.dhcp), options);
          // a guest NIC without spec'd macAddress got one from libvirt: answer only that from now on
          // (the Pod interface is a port of the bridge binding's bridge: other guests' requests arrive too)
          const mac = dom?.spec?.devices?.interfaces?.find((i) => i.target?.dev === self.dhcp?.tap)?.mac;
          if (self.dhcp && mac) self.dhcp.restrictTo(mac);
        } catch (e) {
          // no domain running: no DHCP server either (the next sync starts both)
          if (!self.started && self.dhcp) {
            await self.dhcp.stop();
            self.dhcp = undefined;
          }
          if (!self.started && self.passt) await self.stopPasst();
          throw e;
        }
        traceMark('sync-done');
        self.emit('synced', vmi);
        if (self.config.capsCacheDir) void saveCaps(self.config.libvirtBaseDir, self.config.capsCacheDir);
        return undefined;
      },
      pauseVMI: delegate('pauseVMI') as CmdBackend['pauseVMI'],
      unpauseVMI: delegate('unpauseVMI') as CmdBackend['unpauseVMI'],
      freezeVMI: delegate('freezeVMI') as CmdBackend['freezeVMI'],
      unfreezeVMI: delegate('unfreezeVMI') as CmdBackend['unfreezeVMI'],
      softRebootVMI: delegate('softRebootVMI') as CmdBackend['softRebootVMI'],
      shutdownVMI: delegate('shutdownVMI') as CmdBackend['shutdownVMI'],
      killVMI: delegate('killVMI') as CmdBackend['killVMI'],
      deleteVMI: delegate('deleteVMI') as CmdBackend['deleteVMI'],
      getDomain: delegate('getDomain') as CmdBackend['getDomain'],
      getDomainStats: delegate('getDomainStats') as CmdBackend['getDomainStats'],
      getGuestInfo: delegate('getGuestInfo') as CmdBackend['getGuestInfo'],
      guestPing: delegate('guestPing') as CmdBackend['guestPing'],
      getUsers: delegate('getUsers') as CmdBackend['getUsers'],
      getFilesystems: delegate('getFilesystems') as CmdBackend['getFilesystems'],
      exec: delegate('exec') as CmdBackend['exec'],
      getQemuVersion: delegate('getQemuVersion') as CmdBackend['getQemuVersion'],
      // migration: passed to the DomainManager, which migrates to the handler's proxy sockets under
      // the share dir (upstream's derivation, DomainManagerOptions.migrationTarget);
      // its starts and outcomes reach the notify client as domain events (the watcher re-reports the domain)
      migrateVMI: delegate('migrateVMI') as CmdBackend['migrateVMI'],
      cancelMigration: delegate('cancelMigration') as CmdBackend['cancelMigration'],
      finalizeMigration: delegate('finalizeMigration') as CmdBackend['finalizeMigration'],
      async prepareMigrationTarget(vmi, options) {
        checkVmi(vmi);
        // the VMI whose domain arrives here: once it runs, SIGTERM shuts it down (ACPI, grace period) as for a domain
        // this launcher started itself; without it a migrated-in guest was killed with the launcher at once
        self.vmi = vmi;
        if (!self.prepared) {
          const prepared = await prepareVolumes(vmi, self.paths, {
            owner: self.config.libvirtUser,
            claimImage: self.config.claimImage,
          });
          self.disksInfo = disksInfoOf(prepared);
          self.prepared = true;
        }
        await dm().prepareMigrationTarget!(vmi, options);
        if (self.config.shareDir) {
          // upstream: the incoming QEMU listens on the migration stream socket under the share dir's
          // migrationproxy/ (same path as the source's), owned by the user QEMU runs as
          const dir = path.join(self.config.shareDir, 'migrationproxy');
          await mkdir(dir, { recursive: true, mode: 0o700 });
          const u = self.config.libvirtUser;
          if (u) await chown(dir, u.uid, u.gid);
        }
        return undefined;
      },
      // upstream's cmd server: when this Pod is the target of the VMI's migration (POD_NAME = migrationState.targetPod),
      // the launcher is told to go (a failed or aborted migration); it ends once no (incoming) domain is left.
      // Any other launcher answers success and carries on, as upstream's.
      async signalTargetPodCleanup(vmi) {
        checkVmi(vmi);
        const me = self.config.podName;
        const target = vmi.status?.migrationState?.targetPod;
        if (!me || target !== me) {
          self.log.info('SignalTargetPodCleanup: this Pod is not the migration target; ignored', {
            reason: 'NotMigrationTarget',
            targetPod: target,
            pod: me,
          });
          return undefined;
        }
        self.log.info(`signalled as migration target Pod ${me} to clean up`, { reason: 'TargetPodCleanup' });
        self.cleanupSignalled = true;
        // after the answer has gone out
        if (!self.domainIsUp()) setImmediate(() => self.endAfterCleanupSignal());
        return undefined;
      },
      async ping() {
        if (!self.layer || !(await self.layer.alive())) throw new Error('libvirt does not answer');
        return undefined;
      },
    };
    // only offer what the DomainManager has, so missing ones answer "<Rpc> is not supported"
    return backend;
  }

  /** libvirtd dying under the launcher is fatal (its QEMU would be unmanaged): poll its pid. */
  private daemonTimer: NodeJS.Timeout | undefined;
  private watchDaemon(pid: number): void {
    this.daemonTimer = setInterval(() => {
      try {
        process.kill(pid, 0);
      } catch {
        clearInterval(this.daemonTimer);
        if (!this.finishing)
          void this.fail(ExitCode.FAILURE, 'LibvirtdExited', `libvirtd (pid ${pid}) exited unexpectedly`);
      }
    }, 1000);
    this.daemonTimer.unref?.();
  }

  private armQemuTimeout(): void {
    const ms = this.config.qemuTimeoutMs;
    this.qemuTimer = setTimeout(() => {
      if (this.started) return;
      void this.fail(
        ExitCode.QEMU_TIMEOUT,
        'QemuTimeout',
        `the domain did not reach Running within --qemu-timeout (${Math.round(ms / 1000)}s)`,
      );
    }, ms);
    this.qemuTimer.unref?.();
  }

  /**
   * Logs QEMU's pid once the domain runs, from libvirt's `<namespace>_<name>.pid` under the private libvirt dir, in
   * upstream's words ("Found PID for <domain>: <pid>", the line upstream's monitor logs and its functional tests look
   * for in the compute container's log); a missing file is logged as upstream's "Still missing PID for".
   */
  private async logQemuPid(): Promise<void> {
    const domain = `${this.config.namespace}_${this.config.name}`;
    const found = (await findPidFiles(this.config.libvirtBaseDir)).find(
      (f) => path.basename(f.file) === `${domain}.pid`,
    );
    if (found) this.log.info(`Found PID for ${domain}: ${found.pid}`, { pid: found.pid, domain });
    else
      this.log.warn(`Still missing PID for ${domain}: no ${domain}.pid under ${this.config.libvirtBaseDir}`, {
        reason: 'QemuPidMissing',
        domain,
      });
  }

  private onDomainEvent(ev: DomainEventLike): void {
    this.emit('domain', ev);
    this.notify?.sendDomainEvent({ eventType: ev.type, domain: ev.domain });
    const { status, reason } = ev.status;
    const prev = this.lastStatus;
    this.lastStatus = { status, reason };
    if (!prev) traceMark('domain-defined');
    if (!prev || prev.status !== status || prev.reason !== reason) {
      this.log.info(`domain ${ev.type.toLowerCase()}: ${status} (${reason})`, {
        reason,
        status,
        event: ev.type,
      });
    }
    if (status === 'Running' || status === 'Paused') {
      if (!this.started) {
        traceMark('domain-running');
        this.started = true;
        if (this.qemuTimer) clearTimeout(this.qemuTimer);
        this.qemuTimer = undefined;
        void this.logQemuPid();
      }
      return;
    }
    const down = ev.type === 'DELETED' || status === 'Shutoff' || status === 'Crashed';
    if (!down) return;
    for (const w of this.downWaiters.splice(0)) w();
    if (status === 'Crashed' || (status === 'Shutoff' && (reason === 'Crashed' || reason === 'Failed'))) {
      void this.fail(ExitCode.DOMAIN_FAILED, 'DomainFailed', `the domain ended: ${status} (${reason})`);
      return;
    }
    if (this.cleanupSignalled && !this.terminating) {
      this.endAfterCleanupSignal();
      return;
    }
    if (this.started && !this.terminating) {
      void this.finish({
        exitCode: ExitCode.OK,
        reason: 'DomainEnded',
        message: `the domain ended: ${status} (${reason})`,
      });
    }
  }

  /** upstream's early exit of a migration target Pod: a failure (the Pod ends Failed), never a domain left behind */
  private endAfterCleanupSignal(): void {
    if (this.terminating || this.endResult) return;
    void this.fail(
      ExitCode.FAILURE,
      'TargetPodCleanup',
      'received the early exit signal: the migration to this target Pod failed or was aborted',
    );
  }

  private domainIsUp(): boolean {
    return (
      this.lastStatus !== undefined &&
      this.lastStatus.status !== 'Shutoff' &&
      this.lastStatus.status !== 'Crashed' &&
      this.lastStatus.reason !== 'NonExistent'
    );
  }

  private waitDown(ms: number): Promise<boolean> {
    if (!this.domainIsUp()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const t = setTimeout(() => resolve(!this.domainIsUp()), ms);
      this.downWaiters.push(() => {
        clearTimeout(t);
        resolve(true);
      });
    });
  }

  /**
   * SIGTERM / Ctrl-C: ACPI shutdown, wait up to the grace period, then destroy. Ends the launcher with
   * exit 0 (the guest shut down cleanly, or was destroyed after the grace period as requested).
   */
  async terminate(signal = 'SIGTERM'): Promise<LauncherResult> {
    if (this.endResult) return this.endResult;
    if (this.terminating) return this.ended();
    this.terminating = true;
    const grace = this.config.gracePeriodSeconds;
    this.log.info(`${signal}: shutting down`, { reason: 'Terminating', gracePeriodSeconds: grace });
    if (this.vmi && this.layer && this.domainIsUp()) {
      let result = 'killed';
      try {
        this.log.info('sending ACPI shutdown to the guest', {
          reason: 'ShuttingDown',
          gracePeriodSeconds: grace,
        });
        result = await this.layer.manager.shutdownVMI(this.vmi, {
          gracePeriodSeconds: grace,
          wait: true,
        });
      } catch (e) {
        this.log.warn(`shutdown failed: ${(e as Error).message}; destroying the domain`, {
          reason: 'ShutdownFailed',
        });
        await this.layer.manager
          .killVMI(this.vmi)
          .catch((e2: Error) => this.log.error(`destroy failed: ${e2.message}`));
      }
      await this.waitDown(10_000);
      const clean = result === 'shutdown' || result === 'already-down' || result === 'absent';
      return this.finish({
        exitCode: ExitCode.OK,
        reason: clean ? 'GuestShutdown' : 'GracePeriodExpired',
        message: clean
          ? 'the guest shut down cleanly'
          : `the guest was destroyed after the ${grace}s grace period`,
      });
    }
    return this.finish({
      exitCode: ExitCode.OK,
      reason: 'Terminated',
      message: `${signal} with no running domain`,
    });
  }

  /** Resolves when the launcher has ended (and cleaned up). */
  ended(): Promise<LauncherResult> {
    if (this.endResult) return Promise.resolve(this.endResult);
    return new Promise((r) => this.endWaiters.push(r));
  }

  /** Ends the launcher with a failure (or, with --keep-after-failure, stays up until terminated). */
  async fail(exitCode: number, reason: string, message: string): Promise<LauncherResult> {
    this.log.error(message, { reason });
    if (this.config.keepAfterFailure) {
      this.log.warn('--keep-after-failure: staying alive for debugging until terminated', {
        reason: 'KeepAfterFailure',
      });
      this.emit('failed', { exitCode, reason, message });
      return this.ended();
    }
    return this.finish({ exitCode, reason, message });
  }

  private finishing: Promise<LauncherResult> | undefined;
  private finish(result: LauncherResult): Promise<LauncherResult> {
    this.finishing ??= (async () => {
      if (this.qemuTimer) clearTimeout(this.qemuTimer);
      if (this.daemonTimer) clearInterval(this.daemonTimer);
      this.serialLogCap?.stop();
      // let the handler get the last domain state
      if (this.notify) {
        await this.notify.flush(3000).catch(() => false);
        this.notify.close();
      }
      await this.shutdownParts();
      this.endResult = result;
      this.log.info(`launcher done: ${result.message}`, { reason: result.reason, exitCode: result.exitCode });
      for (const w of this.endWaiters.splice(0)) w(result);
      this.emit('ended', result);
      return result;
    })();
    return this.finishing;
  }

  private async shutdownParts(): Promise<void> {
    // a daemon started early for a start-up that failed before the libvirtd stage took it
    if (!this.session && this.config.daemon) this.session = await this.config.daemon.catch(() => undefined);
    await this.cmd?.stop(1000).catch(() => undefined);
    await this.dhcp?.stop().catch(() => undefined);
    await this.stopPasst();
    await this.layer?.close().catch(() => undefined);
    await this.session?.stop().catch((e: Error) => this.log.warn(`stopping libvirtd: ${e.message}`));
    // QEMU outlives libvirtd; when libvirtd could not destroy it (e.g. it died), do it here. The pid files
    // are writable by the guest side (libvirtd runs as QEMU's user): only verifiably ours is killed
    const parents = [process.pid, process.ppid, ...(this.session ? [this.session.pid] : [])];
    const left = await ownedLeftovers(this.config.libvirtBaseDir, parents, await ownStart()).catch(() => ({
      qemu: [] as number[],
      daemons: [] as number[],
      refused: [] as Array<{ pid: number; file: string; why: string }>,
    }));
    for (const r of left.refused)
      this.log.warn(`not killing pid ${r.pid} named in ${r.file}: ${r.why}`, {
        reason: 'NotOurs',
        pid: r.pid,
      });
    for (const pid of [...left.qemu, ...left.daemons]) {
      this.log.warn(`killing leftover process ${pid}`, { reason: 'Leftover', pid });
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  }

  private async stopPasst(): Promise<void> {
    const procs = this.passt ?? [];
    this.passt = undefined;
    await Promise.all(procs.map((p) => p.stop().catch(() => undefined)));
  }

  /** Stops everything after a failed start-up (no domain left behind). */
  async abort(err: LauncherError): Promise<LauncherResult> {
    return this.finish({
      exitCode: err.exitCode,
      reason: `${err.stage ?? 'start'}Failed`,
      message: err.message,
    });
  }

  /** Throws when the launcher is not ready yet. */
  get cmdSocket(): string | undefined {
    return this.cmd?.socketPath;
  }
}

/** Removes a work dir (standalone) */
export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}
