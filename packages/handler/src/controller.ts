/**
 * The VMI controller of the node agent: `reconcile(key)` is level-triggered (it reads the VMI, the
 * domain cache and the launcher, acts, and writes status only when it changed), so which event woke
 * it never matters and a restart costs nothing.
 */
import { existsSync } from 'node:fs';
import { connect } from 'node:net';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import {
  CmdClient,
  LauncherUnreachableError,
  RpcFailedError,
  migrationProxyKey,
  migrationPortsList,
  migrationProxySocketPath,
  type DomainModel,
  type UpstreamMigrationOptions,
  type VmOptionsInput,
} from '@kubevirt-ts/cmd-protocol';
import type { Logger } from '@kubevirt-ts/log';
import { planPodNetwork, type PodNetworkConfig, type PodNetworkPlan } from '@kubevirt-ts/network';
import type { ContainerDisks } from './container-disks.js';
import { DomainCache } from './domain-cache.js';
import {
  GhostRecords,
  checkLauncherSocket,
  podNotifyPipePath,
  podPublicDir,
  podSocketPath,
  type GhostRecord,
} from './launchers.js';
import type { MigrationProxyManager } from './migration-proxy.js';
import {
  LABEL_NODE_NAME,
  LABEL_OUTDATED_LAUNCHER_IMAGE,
  applyMigrationProgress,
  domainIsActiveOnTarget,
  domainMigrated,
  isMigrationSource,
  isPreMigrationTarget,
  migrationOptions,
  migrationOver,
  migrationStarted,
  sourceAfterMigration,
} from './migration-roles.js';
import { blockVolumeCandidates, prepareBlockDevices, type PreparedBlockDevice } from './block-devices.js';
import { NotifyPipe } from './notify-pipe.js';
import {
  findLauncherProcess,
  resolveInRoot,
  forgetPodNetwork,
  podInterfaceAddresses,
  recordedPodNetwork,
  setUpPodNetwork,
  type LauncherRef,
} from './pod-network.js';
import {
  computeStatus,
  domainActive,
  isBlockMigration,
  isFinal,
  sameStatus,
  type EventToRecord,
  type LauncherObservation,
} from './status.js';

/** Writes to the Kubernetes API (client-node in the handler, a recorder in unit tests). */
export interface KubeWriter {
  /** Replaces the VMI's status (with its resourceVersion: a conflict throws and the key is retried). */
  updateStatus(vmi: VirtualMachineInstance, status: VirtualMachineInstance['status']): Promise<void>;
  recordEvent(vmi: Pick<VirtualMachineInstance, 'metadata'>, event: EventToRecord): Promise<void>;
  /** JSON merge patch of the VMI's labels (null removes one): the migration hand-off moves `kubevirt.io/nodeName`. */
  patchLabels(vmi: VirtualMachineInstance, labels: Record<string, string | null>): Promise<void>;
}

/**
 * Pod network phase 1, run before the first sync of a VMI (default: @kubevirt-ts/network's setup in
 * the launcher Pod's network namespace, see pod-network.ts; nothing for VMIs without a
 * masquerade/bridge pod interface).
 */
export type NetworkSetup = (
  vmi: VirtualMachineInstance,
  launcher: LauncherRef,
) => Promise<PodNetworkConfig | undefined | void>;

/**
 * Block volumes, run before the first sync of a VMI and before a migration target is prepared (default:
 * block-devices.ts, the launcher's uid given the Pod's block device nodes; nothing without claim volumes).
 */
export type BlockDeviceSetup = (
  vmi: VirtualMachineInstance,
  launcher: LauncherRef,
) => Promise<PreparedBlockDevice[] | undefined | void>;

/** The migration roles' parts (see README "Migration roles"). */
export interface MigrationRoleOptions {
  proxy: MigrationProxyManager;
  /** what this node's target role publishes as `migrationState.targetNodeAddress` (upstream: the handler Pod's IP) */
  address: string;
  /** the launcher's libvirt socket inside its Pod (default `/var/run/libvirt/run/libvirt/libvirt-sock`) */
  launcherLibvirtSocket?: string;
  /** the launcher Pod's root as the handler reaches it (default `/proc/<launcher pid>/root`, the pid found by its cmd socket) */
  podRoot?: (launcher: LauncherRef) => Promise<string>;
  /** MigrateVirtualMachine options (default upstream's v1.1.0 defaults) */
  options?: UpstreamMigrationOptions;
  /** after the source's domain left, how long to wait for the target to report it (default 60 s) */
  targetDomainTimeoutMs?: number;
}

export const DEFAULT_LAUNCHER_LIBVIRT_SOCKET = '/var/run/libvirt/run/libvirt/libvirt-sock';

export interface ControllerOptions {
  nodeName: string;
  /** kubelet's pod dir as the handler sees it (host /var/lib/kubelet/pods) */
  podsDir: string;
  /** the handler's own dir: notify socket, ghost records */
  handlerDir: string;
  /** the notify socket the pipes forward to */
  notifySocket: string;
  /** uid launchers run as: their sockets must be owned by it */
  launcherUid: number;
  launcherGid?: number;
  /** a scheduled VMI whose launcher is not ready after this long is Failed (default 5 min) */
  launcherReadyTimeoutMs?: number;
  /** SyncVirtualMachine options from the cluster config (SMBIOS, balloon period, ...) */
  vmOptions?: VmOptionsInput;
  /** reported as status.launcherContainerImageVersion */
  launcherImageVersion?: string;
  networkSetup?: NetworkSetup;
  /** gives the launcher's user the Pod's block volume devices (default: prepareBlockDevices through /proc/<pid>/root) */
  blockDevices?: BlockDeviceSetup;
  /** bind-mounts containerDisk / kernelBoot container files into launcher Pods (none: the files are there) */
  containerDisks?: ContainerDisks;
  getVmi: (key: string) => VirtualMachineInstance | undefined;
  kube: KubeWriter;
  /** ask for the key to be reconciled again after `ms` */
  requeueAfter: (key: string, ms: number) => void;
  log: Logger;
  now?: () => number;
  rpcTimeoutMs?: number;
  /** paths already warned about (shared with discovery: one log line per unusable path) */
  warned?: Set<string>;
  /** the migration roles (unset: migrations touching this node are left alone) */
  migration?: MigrationRoleOptions;
}

interface Launcher {
  socketPath: string;
  podUid: string;
  client: CmdClient;
  pipe?: NotifyPipe;
}

/** The VMI's masquerade/bridge pod interface plan, undefined when it has none or it cannot be planned. */
function planPodNetworkQuiet(vmi: VirtualMachineInstance): PodNetworkPlan | undefined {
  try {
    const plan = planPodNetwork(vmi);
    return plan && plan.binding !== 'passt' ? plan : undefined;
  } catch {
    return undefined;
  }
}

/** SyncVirtualMachine's options as upstream's handler sends them, from the cluster config. */
export function syncOptions(cfg: {
  smbios?: { manufacturer?: string; product?: string; version?: string; sku?: string; family?: string };
  memBalloonStatsPeriod?: number;
  expandDisks?: boolean;
  freePageReportingDisabled?: boolean;
  bochsDisplayForEFIGuests?: boolean;
  serialConsoleLogDisabled?: boolean;
}): VmOptionsInput {
  return {
    VirtualMachineSMBios: cfg.smbios,
    MemBalloonStatsPeriod: cfg.memBalloonStatsPeriod ?? 10,
    PreallocatedVolumes: [],
    topology: { numaCells: [] },
    DisksInfo: {},
    ExpandDisksEnabled: !!cfg.expandDisks,
    clusterConfig: {
      ExpandDisksEnabled: !!cfg.expandDisks,
      FreePageReportingDisabled: !!cfg.freePageReportingDisabled,
      BochsDisplayForEFIGuests: !!cfg.bochsDisplayForEFIGuests,
      SerialConsoleLogDisabled: !!cfg.serialConsoleLogDisabled,
    },
  };
}

/** virt-controller's reason for a VMI failed because its node stopped answering */
export const REASON_NODE_UNRESPONSIVE = 'NodeUnresponsive';

/** a VMI virt-controller failed as lost with its node: whatever still runs of it here must go at once */
export function declaredLost(vmi: VirtualMachineInstance): boolean {
  return vmi.status?.phase === 'Failed' && vmi.status.reason === REASON_NODE_UNRESPONSIVE;
}

/** A VMI carrying only what a launcher needs to find its domain (Kill/Shutdown of a VMI that is gone). */
export function minimalVmi(r: Pick<GhostRecord, 'name' | 'namespace' | 'uid'>): VirtualMachineInstance {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: r.name, namespace: r.namespace, uid: r.uid },
    spec: { domain: { devices: {}, resources: { requests: { memory: '1Mi' } } } },
  } as VirtualMachineInstance;
}

export class VmiController {
  readonly domains: DomainCache;
  readonly ghosts: GhostRecords;
  private launchers = new Map<string, Launcher>(); // socket path -> launcher
  private readyUids = new Set<string>();
  private goneUids = new Set<string>();
  private synced = new Set<string>();
  private syncErrors = new Map<string, string>();
  /** VMI uid -> the pod interface's name and addresses for status (from phase 1's config) */
  private podAddresses = new Map<string, { name: string; addresses: string[] }>();
  private firstSeen = new Map<string, number>();
  /** Pods whose launcher was let go of (ended): never picked again for their VMI */
  private droppedPods = new Set<string>();
  private stopping = false;
  /** `<vmi uid>/<migration uid>` of migrations prepared on this node as the target */
  private preparedTargets = new Set<string>();
  /** `<vmi uid>/<migration uid>` of migrations this node started as the source */
  private migrateSent = new Set<string>();
  /** `<vmi uid>/<migration uid>` of failed migrations whose target Pod was told to go */
  private signalled = new Set<string>();
  private readonly warned: Set<string>;
  /** status writes done (bench figure) */
  statusWrites = 0;
  private readonly o: ControllerOptions;
  private readonly now: () => number;

  private readonly networkSetup: NetworkSetup;
  private readonly blockDevices: BlockDeviceSetup;

  constructor(o: ControllerOptions, onDomainChange: (key: string) => void) {
    this.o = o;
    this.networkSetup =
      o.networkSetup ??
      ((vmi, l) =>
        setUpPodNetwork(vmi, l, { launcherUid: o.launcherUid, handlerDir: o.handlerDir, log: o.log }));
    this.blockDevices =
      o.blockDevices ??
      (async (vmi, l) => {
        if (blockVolumeCandidates(vmi).length === 0) return [];
        const { pid } = await findLauncherProcess(l.socketPath, o.launcherUid, '/proc', {
          allowNodeNetwork: true,
        });
        return prepareBlockDevices(vmi, `/proc/${pid}/root`, o.launcherUid, o.launcherGid ?? o.launcherUid);
      });
    this.now = o.now ?? Date.now;
    this.domains = new DomainCache(onDomainChange);
    this.ghosts = new GhostRecords(o.handlerDir);
    this.warned = o.warned ?? new Set();
  }

  /** Keys the handler must look at after a start: every ghost record and every cached domain. */
  knownKeys(): string[] {
    const keys = new Set<string>();
    for (const r of this.ghosts.all()) keys.add(`${r.namespace}/${r.name}`);
    for (const d of this.domains.all()) keys.add(d.key);
    return [...keys];
  }

  /** Start-up listing: ghost records and live launchers (their domains into the cache). */
  async resync(found: Array<{ podUid: string; socketPath: string }>): Promise<void> {
    await this.ghosts.load(this.o.log);
    const sockets = new Map(found.map((f) => [f.socketPath, f.podUid]));
    for (const g of this.ghosts.all()) if (!sockets.has(g.socketFile)) sockets.set(g.socketFile, g.podUid);
    for (const [socketPath, podUid] of sockets) {
      const l = await this.launcher(socketPath, podUid);
      if (!l) continue;
      try {
        const d = await l.client.getDomain({ timeoutMs: 10_000 });
        if (d?.metadata?.uid) {
          this.readyUids.add(d.metadata.uid);
          this.synced.add(d.metadata.uid); // it has a domain: never sync (start) it again
          if (!this.ghosts.get(d.metadata.uid))
            await this.ghosts.put({
              name: d.metadata.name,
              namespace: d.metadata.namespace,
              uid: d.metadata.uid,
              socketFile: socketPath,
              podUid,
            });
          this.domains.apply('ADDED', d);
        }
      } catch (err) {
        this.o.log.warn(`launcher ${socketPath}: GetDomain failed: ${(err as Error).message}`, {
          reason: 'LauncherUnreachable',
        });
      }
    }
  }

  /** The launcher at this socket, connected once; undefined when the socket is not usable. */
  private async launcher(socketPath: string, podUid: string): Promise<Launcher | undefined> {
    const pipePath = podNotifyPipePath(this.o.podsDir, podUid);
    let l = this.launchers.get(socketPath);
    if (!l) {
      const check = await checkLauncherSocket(socketPath, this.o.launcherUid);
      if (!check.ok) {
        if (check.reason !== 'missing' && !this.warned.has(socketPath + check.reason)) {
          this.warned.add(socketPath + check.reason);
          this.o.log.warn(check.message, {
            reason: check.reason === 'not-a-socket' ? 'NotASocket' : 'WrongOwner',
            path: socketPath,
          });
        }
        // the pipe goes in before the launcher is ready: its notify client retries until it is there
        if (existsSync(podPublicDir(this.o.podsDir, podUid)))
          await this.ensurePipe(socketPath, podUid, pipePath);
        return undefined;
      }
      l = {
        socketPath,
        podUid,
        client: new CmdClient(socketPath, { timeoutMs: this.o.rpcTimeoutMs ?? 30_000 }),
      };
      this.launchers.set(socketPath, l);
    }
    if (!l.pipe && existsSync(podPublicDir(this.o.podsDir, podUid)))
      await this.ensurePipe(socketPath, podUid, pipePath);
    return l;
  }

  private pendingPipes = new Map<string, NotifyPipe>();
  private async ensurePipe(socketPath: string, podUid: string, pipePath: string): Promise<void> {
    const l = this.launchers.get(socketPath);
    if (l?.pipe) return;
    let pipe = this.pendingPipes.get(pipePath);
    if (!pipe) {
      pipe = new NotifyPipe(pipePath, this.o.notifySocket, this.pipeOwner());
      await pipe.start();
      this.pendingPipes.set(pipePath, pipe);
      this.o.log.info(`notify pipe ${pipePath}`, { podUid });
    }
    if (l) {
      l.pipe = pipe;
      this.pendingPipes.delete(pipePath);
    }
  }
  private pipeOwner() {
    return this.o.launcherUid === 0
      ? undefined
      : { uid: this.o.launcherUid, gid: this.o.launcherGid ?? this.o.launcherUid };
  }

  /** `podGone` false (the handler stopping): the Pod lives on, so its phase-1 record stays for the next handler. */
  private async dropLauncher(socketPath: string, podUid: string, podGone = true): Promise<void> {
    if (!this.stopping) this.droppedPods.add(podUid);
    const l = this.launchers.get(socketPath);
    this.launchers.delete(socketPath);
    l?.client.close();
    await l?.pipe?.stop();
    const pipePath = podNotifyPipePath(this.o.podsDir, podUid);
    await this.pendingPipes.get(pipePath)?.stop();
    this.pendingPipes.delete(pipePath);
    if (podGone) await forgetPodNetwork(this.o.handlerDir, podUid);
    // the container disks go with the launcher (kubelet cannot remove the Pod's emptyDir while they are mounted)
    await this.o.containerDisks
      ?.unmount(podUid)
      .catch((err: Error) =>
        this.o.log.warn(`unmounting container disks failed: ${err.message}`, { podUid }),
      );
  }

  /** The VMI's ghost record: its launcher's socket and Pod on this node (kept across handler restarts). */
  private recordGhost(vmi: VirtualMachineInstance, socketFile: string, podUid: string): Promise<void> {
    return this.ghosts.put({
      name: vmi.metadata.name!,
      namespace: vmi.metadata.namespace!,
      uid: vmi.metadata.uid!,
      socketFile,
      podUid,
    });
  }

  /** Is the launcher there? (Ping; a refused connection or a vanished socket is "gone".) */
  private async alive(l: Launcher | undefined): Promise<boolean> {
    if (!l || !existsSync(l.socketPath)) return false;
    try {
      await l.client.ping({ timeoutMs: 5_000 });
      return true;
    } catch (err) {
      if (err instanceof LauncherUnreachableError) return false;
      throw err;
    }
  }

  /** Launchers with a known ghost record and a live client, for /metrics. */
  liveLaunchers(): Array<{
    namespace: string;
    name: string;
    uid: string;
    podUid: string;
    client: CmdClient;
  }> {
    const out: Array<{ namespace: string; name: string; uid: string; podUid: string; client: CmdClient }> =
      [];
    for (const g of this.ghosts.all()) {
      const l = this.launchers.get(g.socketFile);
      if (l && this.domains.get(`${g.namespace}/${g.name}`, g.uid))
        out.push({ namespace: g.namespace, name: g.name, uid: g.uid, podUid: g.podUid, client: l.client });
    }
    return out;
  }

  /**
   * Container disks of a Pod whose launcher is gone (its socket missing or refusing connections) are unmounted,
   * whatever the VMI's status says: kubelet cannot remove the Pod's emptyDir while they are mounted, so a path that
   * missed the launcher's end would leave the Pod Terminating for good (seen once: the target of a migration that
   * failed when the source's handler was killed; two silent paths that fit it are closed since, the target role's when
   * the Pod had left status.activePods and killOrphans' endless retry of a launcher that had ended; this stays the
   * safety net). The handler's periodic resync
   * runs it every 30 s. Disks are mounted only while the launcher answers, and a launcher Pod's launcher is never
   * restarted, so a gone launcher never needs them again.
   */
  async sweepContainerDisks(): Promise<void> {
    const cd = this.o.containerDisks;
    if (!cd) return;
    for (const podUid of await cd.mountedPods()) {
      // only a unix socket of the launcher's user is connected to (as for every launcher socket): anything else
      // there (a symlink, another user's socket) is not a launcher, so it is gone too
      const socketPath = podSocketPath(this.o.podsDir, podUid);
      const check = await checkLauncherSocket(socketPath, this.o.launcherUid);
      if (check.ok && (await socketAnswers(socketPath))) continue;
      this.o.log.info('the launcher of this Pod is gone: unmounting its container disks', { podUid });
      await cd
        .unmount(podUid)
        .catch((err: Error) =>
          this.o.log.warn(`unmounting container disks failed: ${err.message}`, { podUid }),
        );
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    for (const l of [...this.launchers.values()]) await this.dropLauncher(l.socketPath, l.podUid, false);
    for (const p of this.pendingPipes.values()) await p.stop();
    this.pendingPipes.clear();
  }

  /** Domains of this key that belong to no live VMI (old uid, or VMI gone): kill them, then forget them. */
  private async killOrphans(key: string, keepUid: string | undefined): Promise<void> {
    const orphans = new Map<string, GhostRecord>();
    for (const g of this.ghosts.byKey(key)) if (g.uid !== keepUid) orphans.set(g.uid, g);
    for (const { key: k, uid } of this.domains.all())
      if (k === key && uid !== keepUid && !orphans.has(uid)) this.domains.forget(key, uid); // no launcher known
    for (const g of orphans.values()) {
      const domain = this.domains.get(key, g.uid);
      const l = g.socketFile ? await this.launcher(g.socketFile, g.podUid) : undefined;
      if (domainActive(domain) && l && (await this.alive(l))) {
        this.o.log.info('the VMI of this domain is gone: killing the domain', {
          namespace: g.namespace,
          name: g.name,
          uid: g.uid,
          reason: 'VMIGone',
        });
        try {
          await l.client.killVMI(minimalVmi(g));
        } catch (err) {
          if (!(err instanceof LauncherUnreachableError)) throw err;
        }
        this.o.requeueAfter(key, 1000);
        continue;
      }
      if (domainActive(domain) && l) {
        // a slow launcher is asked again; one whose socket is missing or refuses ended (a Pod's launcher is never
        // restarted, and its monitor stops QEMU when it ends): its domain is gone, what it held here goes below
        if (await socketAnswers(l.socketPath)) {
          this.o.requeueAfter(key, 1000);
          continue;
        }
        this.o.log.info('the launcher of this orphaned domain is gone: forgetting the domain', {
          namespace: g.namespace,
          name: g.name,
          uid: g.uid,
          podUid: g.podUid,
          reason: 'LauncherGone',
        });
      }
      // a domain that is down but still there (e.g. the source of a finished migration): delete it, so
      // that its launcher has nothing left to run (upstream's processVmDelete of a dead domain)
      if (domain && l && (await this.alive(l))) {
        await l.client
          .deleteVMI(minimalVmi(g))
          .catch((err: Error) =>
            this.o.log.info(`DeleteVirtualMachine: ${err.message}`, { namespace: g.namespace, name: g.name }),
          );
      }
      if (g.socketFile) await this.dropLauncher(g.socketFile, g.podUid);
      await this.ghosts.delete(g.uid);
      this.domains.forget(key, g.uid);
      this.forgetUid(g.uid);
    }
  }

  private forgetUid(uid: string): void {
    this.readyUids.delete(uid);
    this.goneUids.delete(uid);
    this.synced.delete(uid);
    this.syncErrors.delete(uid);
    this.firstSeen.delete(uid);
    this.podAddresses.delete(uid);
  }

  private notePodAddresses(vmi: VirtualMachineInstance, uid: string, config: PodNetworkConfig | undefined) {
    const plan = planPodNetworkQuiet(vmi);
    if (plan && config)
      this.podAddresses.set(uid, { name: plan.interfaceName, addresses: podInterfaceAddresses(config) });
  }

  /** The Pod of this VMI on this node (status.activePods: pod uid -> node name). */
  private podOf(vmi: VirtualMachineInstance): string | undefined {
    const pods = Object.entries(vmi.status?.activePods ?? {});
    return this.podOnNode(vmi) ?? pods[0]?.[0];
  }

  /**
   * The VMI's Pod on this node. After a migration away and back a node has two (the old source's, whose
   * launcher ended, and the new target's): the one whose launcher socket is there, else the last listed.
   */
  private podOnNode(vmi: VirtualMachineInstance): string | undefined {
    const here = Object.entries(vmi.status?.activePods ?? {})
      .filter(([, node]) => node === this.o.nodeName)
      .map(([uid]) => uid);
    if (here.length <= 1) return here[0];
    // Pods whose launcher this handler let go of are out (a killed launcher leaves its socket file behind)
    const live = here.filter((uid) => !this.droppedPods.has(uid));
    const pick = live.length > 0 ? live : here;
    return pick.find((uid) => existsSync(podSocketPath(this.o.podsDir, uid))) ?? pick[pick.length - 1];
  }

  async reconcile(key: string): Promise<void> {
    const vmi = this.o.getVmi(key);
    const uid = vmi?.metadata.uid;
    const me = this.o.nodeName;
    if (vmi && uid && this.o.migration) {
      const ms = vmi.status?.migrationState;
      if (migrationOver(ms)) await this.stopMigrationProxies(uid);
      if (isPreMigrationTarget(vmi, me)) {
        await this.killOrphans(key, uid);
        return this.migrationTarget(vmi, key);
      }
      const nodeLabel = vmi.metadata.labels?.[LABEL_NODE_NAME];
      const owner = vmi.status?.nodeName;
      if (
        owner &&
        owner !== me &&
        nodeLabel === me &&
        ms?.sourceNode === me &&
        ms.targetNode === owner &&
        ms.completed &&
        !ms.failed
      ) {
        // the hand-off's status write went out, its label did not: finish it
        await this.finishHandOff(vmi, owner);
        return;
      }
      // the VMI lives on another node now (upstream's isOrphanedMigrationSource): this node's domain goes.
      // Not while the status names this node: the hand-off writes the status first, the label after it
      if (nodeLabel && nodeLabel !== me && owner !== me) {
        await this.killOrphans(key, undefined);
        return;
      }
    }
    await this.killOrphans(key, uid);
    if (!vmi || !uid) return;
    const nodeOf = vmi.status?.nodeName;
    if (nodeOf && nodeOf !== me) return; // migrated away or not ours
    // before virt-controller saw its Pod scheduled (Pending/Scheduling) the VMI is not the handler's yet
    if (!['Scheduled', 'Running', 'Succeeded', 'Failed'].includes(vmi.status?.phase ?? '')) return;
    const log = { namespace: vmi.metadata.namespace, name: vmi.metadata.name, uid };

    const ghost = this.ghosts.get(uid);
    const podUid = this.podOf(vmi) ?? ghost?.podUid;
    const socketPath = podUid ? podSocketPath(this.o.podsDir, podUid) : ghost?.socketFile;
    const l = socketPath && podUid ? await this.launcher(socketPath, podUid) : undefined;
    const last = this.domains.last(key, uid);
    // a DELETED event keeps the final state (Shutoff/Crashed) for the phase; an active one means gone
    let domain: DomainModel | undefined =
      last && !(last.deleted && domainActive(last.domain)) ? last.domain : undefined;
    const phase = vmi.status?.phase;

    let alive = false;
    if (l) alive = await this.alive(l);
    if (alive) {
      this.readyUids.add(uid);
      this.goneUids.delete(uid);
    } else if (this.readyUids.has(uid)) {
      this.goneUids.add(uid);
      if (domainActive(domain)) domain = undefined; // nobody runs it any more
    }

    // a live launcher is the source of truth: ask it before concluding that a domain is missing
    if (alive && l && !domain) {
      const d = await l.client.getDomain({ timeoutMs: 10_000 });
      if (d?.metadata?.uid === uid && `${d.metadata.namespace}/${d.metadata.name}` === key) {
        this.synced.add(uid);
        this.domains.apply('MODIFIED', d);
        domain = d;
      }
    }
    const deleting = !!vmi.metadata.deletionTimestamp;
    // the domain left by migration: the source's status is the migration's (upstream: the phase is no longer ours)
    if (this.o.migration && domainMigrated(domain) && vmi.status?.migrationState && !isFinal(phase)) {
      await this.migrationSourceDone(vmi, key, domain!);
      return;
    }
    if (
      this.o.migration &&
      alive &&
      l &&
      podUid &&
      domainActive(domain) &&
      !deleting &&
      !isFinal(phase) &&
      isMigrationSource(vmi, me)
    )
      await this.migrationSource(vmi, key, l, podUid, domain);
    if (alive && l && domainActive(domain) && declaredLost(vmi)) {
      await this.killDeclaredLost(vmi, l, key);
    } else if (alive && l && domainActive(domain) && (deleting || isFinal(phase))) {
      await this.shutdown(vmi, l, ghost, key);
    } else if (alive && l && podUid && !domain && !deleting && !isFinal(phase) && !this.synced.has(uid)) {
      await this.recordGhost(vmi, l.socketPath, podUid);
      try {
        await this.o.containerDisks?.mount(vmi, podUid);
        const ref: LauncherRef = {
          socketPath: l.socketPath,
          podUid,
          shareDir: podPublicDir(this.o.podsDir, podUid),
        };
        await this.prepareBlockDevices(vmi, ref);
        const net = await this.networkSetup(vmi, ref);
        this.notePodAddresses(vmi, uid, net || undefined);
        await l.client.syncVMI(vmi, this.o.vmOptions ?? syncOptions({}));
        this.synced.add(uid);
        this.syncErrors.delete(uid);
        this.o.log.info('SyncVirtualMachine sent', log);
      } catch (err) {
        const msg = err instanceof RpcFailedError ? err.launcherMessage : (err as Error).message;
        this.syncErrors.set(uid, msg);
        this.o.log.warn(`SyncVirtualMachine failed: ${msg}`, { ...log, reason: 'SyncFailed' });
        await this.kube.recordEvent(vmi, { type: 'Warning', reason: 'SyncFailed', message: msg });
        this.o.requeueAfter(key, 5_000);
      }
    }

    const obs: LauncherObservation = {
      ready: this.readyUids.has(uid),
      gone: this.goneUids.has(uid),
      syncError: this.syncErrors.get(uid),
    };
    if (!obs.ready && !isFinal(phase) && !deleting) {
      const first = this.firstSeen.get(uid) ?? this.now();
      this.firstSeen.set(uid, first);
      const timeout = this.o.launcherReadyTimeoutMs ?? 300_000;
      const waited = this.now() - first;
      if (waited >= timeout)
        obs.notReadyTimeout = `virt-launcher did not become ready within ${Math.round(timeout / 1000)}s (${
          socketPath ? `no usable ${socketPath}` : 'no launcher Pod in status.activePods'
        })`;
      else this.o.requeueAfter(key, Math.min(1000, timeout - waited));
    }

    // after a handler restart: phase 1's record of this Pod (written by this handler) has the addresses
    if (domain && podUid && !this.podAddresses.has(uid) && planPodNetworkQuiet(vmi))
      this.notePodAddresses(vmi, uid, await recordedPodNetwork(this.o.handlerDir, podUid));
    const { status, events } = computeStatus({
      vmi,
      domain,
      launcher: obs,
      podInterface: this.podAddresses.get(uid),
      nodeName: this.o.nodeName,
      launcherImageVersion: this.o.launcherImageVersion,
      now: this.nowIso(),
    });
    const ms = status.migrationState;
    if (this.o.migration && ms && ms.sourceNode === me && !isFinal(phase)) {
      const e = applyMigrationProgress(ms, domain);
      if (e) events.push(e);
    }
    if (!sameStatus(status, vmi.status ?? {})) {
      await this.kube.updateStatus(vmi, status);
      this.statusWrites++;
      for (const e of events) await this.kube.recordEvent(vmi, e);
      if (status.phase !== phase)
        this.o.log.info(`phase ${phase ?? ''} -> ${status.phase}`, { ...log, reason: status.reason });
    }
    // a VMI that is done and whose domain is gone: let go of its launcher
    if (isFinal(status.phase) && !domainActive(domain) && (!alive || !domain)) {
      if (socketPath && podUid && !alive) await this.dropLauncher(socketPath, podUid);
      if (!alive) await this.ghosts.delete(uid);
    } else if (
      isFinal(status.phase) &&
      domainActive(domain) &&
      l &&
      alive &&
      !deleting &&
      !declaredLost(vmi)
    ) {
      await this.shutdown(vmi, l, ghost, key);
    }
  }

  /**
   * A guest virt-controller declared lost with its node (Failed, NodeUnresponsive) is still running here: the
   * node came back (or was only cut off). Its replacement may already run elsewhere, so no graceful shutdown
   * (the guest would go on writing its disks for the grace period): the domain is destroyed at once.
   */
  private async killDeclaredLost(vmi: VirtualMachineInstance, l: Launcher, key: string): Promise<void> {
    this.o.log.warn('the VMI was failed as lost with its node: destroying its domain', {
      namespace: vmi.metadata.namespace,
      name: vmi.metadata.name,
      uid: vmi.metadata.uid,
      reason: REASON_NODE_UNRESPONSIVE,
    });
    await l.client.killVMI(vmi);
    await this.kube.recordEvent(vmi, {
      type: 'Warning',
      reason: 'Stopped',
      message: 'The VMI was failed as its node was unresponsive: the domain left on this node was destroyed',
    });
    this.o.requeueAfter(key, 1000);
  }

  private nowIso(): string {
    return new Date(this.now()).toISOString().replace(/\.\d+Z$/, 'Z');
  }

  private async stopMigrationProxies(uid: string): Promise<void> {
    const p = this.o.migration?.proxy;
    if (!p) return;
    await p.stopTargetListener(uid);
    await p.stopSourceListener(uid);
  }

  /** The Pod's block volume devices given to the launcher's user (logged when one changed). */
  private async prepareBlockDevices(vmi: VirtualMachineInstance, ref: LauncherRef): Promise<void> {
    const done = (await this.blockDevices(vmi, ref)) || [];
    const changed = done.filter((d) => d.changed).map((d) => d.volume);
    if (changed.length)
      this.o.log.info('block volume devices given to the launcher user', {
        namespace: vmi.metadata.namespace,
        name: vmi.metadata.name,
        uid: vmi.metadata.uid,
        volumes: changed,
      });
  }

  /** Writes a status when it differs, then its events. */
  private async writeStatus(
    vmi: VirtualMachineInstance,
    status: NonNullable<VirtualMachineInstance['status']>,
    events: EventToRecord[],
  ): Promise<boolean> {
    if (sameStatus(status, vmi.status ?? {})) return false;
    await this.kube.updateStatus(vmi, status);
    this.statusWrites++;
    for (const e of events) await this.kube.recordEvent(vmi, e);
    return true;
  }

  /** The launcher's libvirt socket as this handler reaches it (through the Pod's root). */
  private async targetLibvirtSocket(ref: LauncherRef): Promise<string> {
    const m = this.o.migration!;
    const root = m.podRoot
      ? await m.podRoot(ref)
      : `/proc/${(await findLauncherProcess(ref.socketPath, this.o.launcherUid, '/proc', { allowNodeNetwork: true })).pid}/root`;
    // through the launcher's root: its /var/run is a link to /run, which path.join would follow in the handler's
    // own root (the handler's /run has no such socket: "connect ENOENT" on the first migration through a cluster)
    const socket = m.launcherLibvirtSocket ?? DEFAULT_LAUNCHER_LIBVIRT_SOCKET;
    const inRoot = await resolveInRoot(root, socket);
    if (!inRoot)
      throw new Error(`the target launcher's libvirt socket ${socket} is not there (under ${root})`);
    return inRoot;
  }

  /**
   * The target role (upstream's migrationTargetExecute + migrationTargetUpdateVMIStatus): SyncMigrationTarget
   * on the target Pod's launcher, the proxy's TCP listeners, then `targetNodeAddress` and
   * `targetDirectMigrationNodePorts`; once the domain arrives `targetNodeDomainDetected`, once it runs
   * `targetNodeDomainReadyTimestamp` (and FinalizeVirtualMachineMigration). A failed migration: the target
   * Pod is told to go (SignalTargetPodCleanup); a VMI deleted or final: the domain here goes.
   */
  private async migrationTarget(vmi: VirtualMachineInstance, key: string): Promise<void> {
    const mig = this.o.migration!;
    const me = this.o.nodeName;
    const uid = vmi.metadata.uid!;
    const ms = vmi.status?.migrationState;
    const log = { namespace: vmi.metadata.namespace, name: vmi.metadata.name, uid };
    // a migration that is over (or a VMI going away) only uses a launcher already known, never connects anew
    const winding = !!ms?.failed || !!vmi.metadata.deletionTimestamp || isFinal(vmi.status?.phase);
    // winding down, the target Pod may have left status.activePods already (virt-controller lists the Pods that
    // exist, and a deleted Pod can go before this handler sees the failure): the record written while preparing
    // names it, and what this handler holds for it (launcher client, container disks) must still go
    const podUid = this.podOnNode(vmi) ?? (winding ? this.ghosts.get(uid)?.podUid || undefined : undefined);
    const socketPath = podUid ? podSocketPath(this.o.podsDir, podUid) : undefined;
    let l =
      socketPath && podUid
        ? winding
          ? this.launchers.get(socketPath)
          : await this.launcher(socketPath, podUid)
        : undefined;
    // ... except after a restart of this handler (it never knew the launcher): look once whether it is still there
    if (!l && winding && socketPath && podUid && existsSync(socketPath) && !this.droppedPods.has(podUid))
      l = await this.launcher(socketPath, podUid);
    const alive = await this.alive(l);
    // the target launcher is gone: one this handler knew that stopped answering, or one whose socket went while
    // this handler was down (its container disks are still mounted in the Pod, which kubelet cannot remove then)
    const launcherGone =
      !alive && !!socketPath && !!podUid && !this.droppedPods.has(podUid) && (!!l || !existsSync(socketPath));
    const last = this.domains.last(key, uid);
    const domain = last && !last.deleted ? last.domain : undefined;

    if (vmi.metadata.deletionTimestamp || isFinal(vmi.status?.phase)) {
      // abort the preparation: no domain may stay here
      await mig.proxy.stopTargetListener(uid);
      if (alive && l && domain) {
        if (domainActive(domain)) await l.client.killVMI(vmi);
        else await l.client.deleteVMI(vmi).catch(() => undefined);
        this.o.requeueAfter(key, 1000);
        return;
      }
      if (launcherGone) await this.dropLauncher(socketPath, podUid);
      await this.ghosts.delete(uid);
      this.forgetUid(uid);
      return;
    }
    if (!ms?.migrationUid || ms.targetNode !== me) return; // not handed off to this node (yet)
    if (ms.failed) {
      await mig.proxy.stopTargetListener(uid);
      const sig = `${uid}/${ms.migrationUid}`;
      if (alive && l && !this.signalled.has(sig)) {
        // the target Pod may go: its launcher ends (upstream's SignalTargetPodCleanup)
        await l.client.signalTargetPodCleanup(vmi).catch((err: Error) => {
          this.o.log.warn(`SignalTargetPodCleanup failed: ${err.message}`, log);
        });
        this.signalled.add(sig);
        this.o.log.info('signalled the target pod of a failed migration to clean up', log);
      }
      if (launcherGone) {
        await this.dropLauncher(socketPath, podUid);
        await this.ghosts.delete(uid);
      }
      return;
    }
    if (vmi.status?.phase !== 'Running') return;
    if (!alive || !l || !podUid) {
      this.o.requeueAfter(key, 1000); // the target launcher is not ready yet
      return;
    }
    this.readyUids.add(uid);
    const prepared = `${uid}/${ms.migrationUid}`;
    // before the source starts: prepare once, then publish where to connect (after the start, or once the
    // migration is over and its listeners closed, there is nothing left to prepare or publish)
    const beforeStart = !ms.startTimestamp && !migrationOver(ms);
    if (beforeStart && !this.preparedTargets.has(prepared)) {
      await this.recordGhost(vmi, l.socketPath, podUid);
      const shareDir = podPublicDir(this.o.podsDir, podUid);
      const ref: LauncherRef = { socketPath: l.socketPath, podUid, shareDir };
      try {
        await this.o.containerDisks?.mount(vmi, podUid);
        await this.prepareBlockDevices(vmi, ref);
        await this.networkSetup(vmi, ref);
        await l.client.prepareMigrationTarget(vmi, this.o.vmOptions ?? syncOptions({}));
        // the libvirt connection, QEMU's stream and, for a block migration, the target QEMU's NBD server
        // (upstream's GetMigrationPortsList): the sockets at the source's paths, in the target Pod
        await mig.proxy.startTargetListener(uid, [
          await this.targetLibvirtSocket(ref),
          ...migrationPortsList(isBlockMigration(vmi)).map((port) =>
            migrationProxySocketPath(shareDir, migrationProxyKey(uid, port)),
          ),
        ]);
      } catch (err) {
        const msg = err instanceof RpcFailedError ? err.launcherMessage : (err as Error).message;
        this.o.log.warn(`preparing the migration target failed: ${msg}`, { ...log, reason: 'SyncFailed' });
        await this.kube.recordEvent(vmi, {
          type: 'Warning',
          reason: 'SyncFailed',
          message: `syncing migration target failed: ${msg}`,
        });
        this.o.requeueAfter(key, 5_000);
        return;
      }
      this.preparedTargets.add(prepared);
      this.synced.add(uid); // the domain comes by migration: never SyncVirtualMachine it
      this.o.log.info('migration target prepared', { ...log, migration: ms.migrationUid });
      await this.kube.recordEvent(vmi, {
        type: 'Normal',
        reason: 'PreparingTarget',
        message: 'VirtualMachineInstance Migration Target Prepared.',
      });
    }

    const status = structuredClone(vmi.status!);
    const out = status.migrationState!;
    const events: EventToRecord[] = [];
    if (domain && !out.targetNodeDomainDetected) {
      this.o.log.info('The target node received the migrated domain', log);
      out.targetNodeDomainDetected = true;
    }
    if (domainIsActiveOnTarget(domain) && !out.targetNodeDomainReadyTimestamp) {
      this.o.log.info('The target node received the running migrated domain', log);
      await l.client.finalizeMigration(vmi);
      out.targetNodeDomainReadyTimestamp = this.nowIso();
    }
    if (beforeStart) {
      const ports = mig.proxy.targetListenerPorts(uid);
      if (Object.keys(ports).length === 0)
        throw new Error('target migration listener is not up for this vmi');
      if (out.targetNodeAddress !== mig.address) {
        out.targetNodeAddress = mig.address;
        out.targetDirectMigrationNodePorts = ports;
        events.push({
          type: 'Normal',
          reason: 'PreparingTarget',
          message: `Migration Target is listening at ${mig.address}, on ports: ${Object.keys(ports).join(',')}`,
        });
      }
    }
    await this.writeStatus(vmi, status, events);
  }

  /**
   * The source role before and during the migration (upstream's vmUpdateHelperMigrationSource):
   * abortRequested -> CancelVirtualMachineMigration once; not started yet -> the proxy's unix listeners
   * in the source Pod's share dir, then MigrateVirtualMachine (the launcher derives the proxied URIs).
   */
  private async migrationSource(
    vmi: VirtualMachineInstance,
    key: string,
    l: Launcher,
    podUid: string,
    domain: DomainModel | undefined,
  ): Promise<void> {
    const mig = this.o.migration!;
    const uid = vmi.metadata.uid!;
    const ms = vmi.status!.migrationState!;
    const log = {
      namespace: vmi.metadata.namespace,
      name: vmi.metadata.name,
      uid,
      migration: ms.migrationUid,
    };
    if (ms.abortRequested) {
      const handled = (s: string | undefined) => s === 'Aborting' || s === 'Succeeded';
      if (handled(ms.abortStatus) || handled(domain?.migration?.abortStatus)) return;
      if (!migrationStarted(ms, domain)) return; // nothing runs yet: the controller fails the migration
      await l.client.cancelMigration(vmi);
      this.o.log.info('migration abort requested', log);
      await this.kube.recordEvent(vmi, {
        type: 'Normal',
        reason: 'Migrating',
        message: 'VirtualMachineInstance is aborting migration.',
      });
      return;
    }
    if (migrationStarted(ms, domain) || this.migrateSent.has(`${uid}/${ms.migrationUid}`)) return;
    const ports = ms.targetDirectMigrationNodePorts;
    if (!ports || Object.keys(ports).length === 0) {
      this.o.requeueAfter(key, 1000); // the target has not published its ports yet
      return;
    }
    await mig.proxy.startSourceListener(
      uid,
      ms.targetNodeAddress!,
      ports,
      podPublicDir(this.o.podsDir, podUid),
    );
    const options = migrationOptions(vmi, mig.options);
    this.o.log.info(
      `migration options matched for vmi ${vmi.metadata.name}: ${JSON.stringify(options)}`,
      log,
    );
    await l.client.migrateVMI(vmi, options);
    this.migrateSent.add(`${uid}/${ms.migrationUid}`);
    await this.kube.recordEvent(vmi, {
      type: 'Normal',
      reason: 'Migrating',
      message: 'VirtualMachineInstance is migrating.',
    });
  }

  /** The source's domain left by migration: hand the VMI to the target once it reports the domain running. */
  private async migrationSourceDone(vmi: VirtualMachineInstance, key: string, domain: DomainModel) {
    const mig = this.o.migration!;
    const r = sourceAfterMigration(vmi, domain, this.nowIso(), this.now(), mig.targetDomainTimeoutMs);
    await this.writeStatus(vmi, r.status, r.events);
    if (r.handOffTo) {
      this.o.log.info(`migration completed to node ${r.handOffTo}`, {
        namespace: vmi.metadata.namespace,
        name: vmi.metadata.name,
        uid: vmi.metadata.uid,
      });
      await this.finishHandOff(vmi, r.handOffTo);
    }
    if (r.requeueMs) this.o.requeueAfter(key, r.requeueMs);
  }

  /** The hand-off's labels: the VMI's node label moves to the target (its informer takes it from here). */
  private async finishHandOff(vmi: VirtualMachineInstance, target: string): Promise<void> {
    const labels: Record<string, string | null> = { [LABEL_NODE_NAME]: target };
    if (vmi.metadata.labels?.[LABEL_OUTDATED_LAUNCHER_IMAGE] !== undefined)
      labels[LABEL_OUTDATED_LAUNCHER_IMAGE] = null;
    await this.kube.patchLabels(vmi, labels);
  }

  private get kube(): KubeWriter {
    return this.o.kube;
  }

  /** ACPI shutdown, then Kill once the grace period (from the first shutdown) is over. */
  private async shutdown(
    vmi: VirtualMachineInstance,
    l: Launcher,
    ghost: GhostRecord | undefined,
    key: string,
  ) {
    const uid = vmi.metadata.uid!;
    const grace = (vmi.spec.terminationGracePeriodSeconds ?? 30) * 1000;
    const record: GhostRecord = ghost ?? {
      name: vmi.metadata.name!,
      namespace: vmi.metadata.namespace!,
      uid,
      socketFile: l.socketPath,
      podUid: l.podUid,
    };
    const log = { namespace: vmi.metadata.namespace, name: vmi.metadata.name, uid };
    if (record.shutdownStartedAt === undefined) {
      await this.ghosts.put({ ...record, shutdownStartedAt: this.now() });
      this.o.log.info(`shutting down the domain (grace period ${grace / 1000}s)`, {
        ...log,
        reason: 'ShuttingDown',
      });
      await l.client.shutdownVMI(vmi);
      await this.kube.recordEvent(vmi, {
        type: 'Normal',
        reason: 'ShuttingDown',
        message: 'Signaled Graceful Shutdown',
      });
      this.o.requeueAfter(key, Math.min(grace, 1000));
      return;
    }
    const left = record.shutdownStartedAt + grace - this.now();
    if (left <= 0) {
      this.o.log.info('grace period expired: killing the domain', { ...log, reason: 'GracePeriodExpired' });
      await l.client.killVMI(vmi);
      await this.kube.recordEvent(vmi, {
        type: 'Warning',
        reason: 'Stopped',
        message: 'The grace period expired, the domain was killed',
      });
      this.o.requeueAfter(key, 1000);
    } else {
      this.o.requeueAfter(key, Math.min(left, 1000));
    }
  }
}

/**
 * Does a process listen on this unix socket? False only when it is missing or refuses connections (nobody listens:
 * its launcher ended); any other outcome (connected, a slow or odd answer) counts as there. Nothing is sent.
 */
export function socketAnswers(socketPath: string, timeoutMs = 2000): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(socketPath);
    const done = (v: boolean) => {
      clearTimeout(t);
      s.destroy();
      resolve(v);
    };
    const t = setTimeout(() => done(true), timeoutMs);
    s.once('connect', () => done(true));
    s.once('error', (e: NodeJS.ErrnoException) => done(e.code !== 'ENOENT' && e.code !== 'ECONNREFUSED'));
  });
}
