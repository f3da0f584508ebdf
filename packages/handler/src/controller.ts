/**
 * The VMI controller of the node agent: `reconcile(key)` is level-triggered (it reads the VMI, the
 * domain cache and the launcher, acts, and writes status only when it changed), so which event woke
 * it never matters and a restart costs nothing.
 */
import { existsSync } from 'node:fs';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import {
  CmdClient,
  LauncherUnreachableError,
  RpcFailedError,
  type DomainModel,
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
import { NotifyPipe } from './notify-pipe.js';
import {
  forgetPodNetwork,
  podInterfaceAddresses,
  recordedPodNetwork,
  setUpPodNetwork,
  type LauncherRef,
} from './pod-network.js';
import {
  computeStatus,
  domainActive,
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
  private readonly warned: Set<string>;
  /** status writes done (bench figure) */
  statusWrites = 0;
  private readonly o: ControllerOptions;
  private readonly now: () => number;

  private readonly networkSetup: NetworkSetup;

  constructor(o: ControllerOptions, onDomainChange: (key: string) => void) {
    this.o = o;
    this.networkSetup =
      o.networkSetup ??
      ((vmi, l) =>
        setUpPodNetwork(vmi, l, { launcherUid: o.launcherUid, handlerDir: o.handlerDir, log: o.log }));
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
  liveLaunchers(): Array<{ namespace: string; name: string; client: CmdClient }> {
    const out: Array<{ namespace: string; name: string; client: CmdClient }> = [];
    for (const g of this.ghosts.all()) {
      const l = this.launchers.get(g.socketFile);
      if (l && this.domains.get(`${g.namespace}/${g.name}`, g.uid))
        out.push({ namespace: g.namespace, name: g.name, client: l.client });
    }
    return out;
  }

  async stop(): Promise<void> {
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
        this.o.requeueAfter(key, 1000); // the launcher is not answering yet: try again
        continue;
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
    return (pods.find(([, node]) => node === this.o.nodeName) ?? pods[0])?.[0];
  }

  async reconcile(key: string): Promise<void> {
    const vmi = this.o.getVmi(key);
    const uid = vmi?.metadata.uid;
    await this.killOrphans(key, uid);
    if (!vmi || !uid) return;
    const nodeOf = vmi.status?.nodeName;
    if (nodeOf && nodeOf !== this.o.nodeName) return; // migrated away or not ours
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
    if (alive && l && domainActive(domain) && (deleting || isFinal(phase))) {
      await this.shutdown(vmi, l, ghost, key);
    } else if (alive && l && podUid && !domain && !deleting && !isFinal(phase) && !this.synced.has(uid)) {
      await this.ghosts.put({
        name: vmi.metadata.name!,
        namespace: vmi.metadata.namespace!,
        uid,
        socketFile: l.socketPath,
        podUid,
      });
      try {
        await this.o.containerDisks?.mount(vmi, podUid);
        const net = await this.networkSetup(vmi, {
          socketPath: l.socketPath,
          podUid,
          shareDir: podPublicDir(this.o.podsDir, podUid),
        });
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
      now: new Date(this.now()).toISOString().replace(/\.\d+Z$/, 'Z'),
    });
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
    } else if (isFinal(status.phase) && domainActive(domain) && l && alive && !deleting) {
      await this.shutdown(vmi, l, ghost, key);
    }
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
