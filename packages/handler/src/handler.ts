/**
 * The node agent, wired: notify server, launcher discovery, VMI informer -> reconcile, heartbeat,
 * /healthz and /metrics. apps/virt-handler only parses flags and handles signals around this.
 */
import { ContainerDisks } from './container-disks.js';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { NotifyServer, notifySocketPath, type CmdClient } from '@kubevirt-ts/cmd-protocol';
import { createLogger, type Logger } from '@kubevirt-ts/log';
import { LAUNCHER_UID } from '@kubevirt-ts/network';
import { VmiController, type MigrationRoleOptions, type NetworkSetup } from './controller.js';
import { MigrationProxyManager, type MigrationTls } from './migration-proxy.js';
import { LABEL_MIGRATION_TARGET_NODE } from './migration-roles.js';
import { KubeApiWriter, VMIS, HEARTBEAT_ANNOTATION, NODE_NAME_LABEL, SCHEDULABLE_LABEL } from './kube.js';
import { DevicePlugin, KUBEVIRT_DEVICES } from './device-plugin.js';
import { installSeccompProfile } from './seccomp.js';
import { discoverLaunchers, podPrivateDir } from './launchers.js';
import { MetricsText, addDomainStats, type StatsLike } from './metrics.js';
import {
  ExponentialFailureRateLimiter,
  Informer,
  WorkQueue,
  runWorkers,
  type ClusterAccess,
  type KubeObject,
} from '@kubevirt-ts/controller-runtime';
import type { VmOptionsInput } from '@kubevirt-ts/cmd-protocol';

export interface HandlerOptions {
  kubeConfig: ClusterAccess;
  nodeName: string;
  /** kubelet's pods dir as seen by the handler (default /var/lib/kubelet/pods) */
  podsDir: string;
  /** the handler's own dir: domain-notify-pipe.sock's target, ghost-records/ (default /var/run/kubevirt) */
  handlerDir: string;
  launcherUid?: number;
  launcherGid?: number;
  launcherReadyTimeoutMs?: number;
  heartbeatIntervalMs?: number;
  /** how often launcher sockets are looked for and every known VMI re-checked (default 5 s) */
  resyncIntervalMs?: number;
  /** /healthz and /metrics; undefined: no HTTP server; 0: any free port */
  httpPort?: number;
  httpHost?: string;
  vmOptions?: VmOptionsInput;
  launcherImageVersion?: string;
  networkSetup?: NetworkSetup;
  logger?: Logger;
  workers?: number;
  /** kubelet's device-plugins dir: serve devices.kubevirt.io/{kvm,tun,vhost-net} there (off when unset) */
  devicePluginDir?: string;
  /** the kvts-hostmount helper: bind-mount containerDisk/kernelBoot files into launcher Pods (off when unset;
   * podsDir must then be the host's path, as in deploy/) */
  containerDiskHelper?: string;
  /** kubelet's pod dir in the host's mount namespace (default: podsDir) */
  hostPodsDir?: string;
  /** the migration roles; `false` turns them off (migrations touching this node are then left alone) */
  migration?: false | HandlerMigrationOptions;
  /**
   * kubelet's seccomp dir (e.g. /var/lib/kubelet/seccomp): the launcher Pods' Localhost profile
   * (kubevirt-ts/kubevirt.json, ./seccomp.ts) is installed there before the node is marked schedulable (off when unset)
   */
  seccompProfileDir?: string;
  /** the profile it is made from (default /usr/share/containers/seccomp.json) */
  seccompBaseProfile?: string;
}

export interface HandlerMigrationOptions extends Partial<
  Pick<MigrationRoleOptions, 'launcherLibvirtSocket' | 'podRoot' | 'options' | 'targetDomainTimeoutMs'>
> {
  /** published as targetNodeAddress (default: `$MY_POD_IP`, else the first non-internal IPv4 address) */
  address?: string;
  /** where the target's TCP listeners bind (default 0.0.0.0) */
  bindAddress?: string;
  /** mutual TLS between the handlers (unset: plain TCP, logged as a warning) */
  tls?: MigrationTls;
  /** owner of the source proxy sockets in the launcher Pod: the user QEMU runs as (default 107) */
  qemuUid?: number;
}

/** The address a target handler publishes: `$MY_POD_IP`, else the first non-internal IPv4 address. */
export function defaultMigrationAddress(): string {
  if (process.env.MY_POD_IP) return process.env.MY_POD_IP;
  for (const addrs of Object.values(os.networkInterfaces()))
    for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  return '127.0.0.1';
}

export class Handler {
  readonly log: Logger;
  readonly controller: VmiController;
  /** the project's one work queue (controller-runtime): dedup per key, one worker per key, per-key backoff 5 ms .. 30 s */
  readonly queue = new WorkQueue<string>({
    rateLimiter: new ExponentialFailureRateLimiter<string>(5, 30_000),
  });
  private workers: Promise<void> | undefined;
  readonly kube: KubeApiWriter;
  private notify: NotifyServer;
  private informer: Informer<KubeObject> | undefined;
  /** VMIs whose migration targets this node (label kubevirt.io/migrationTargetNodeName) */
  private targetInformer: Informer<KubeObject> | undefined;
  /** the migration proxy (undefined with `migration: false`) */
  readonly migrationProxy: MigrationProxyManager | undefined;
  private timers: NodeJS.Timeout[] = [];
  private server: http.Server | undefined;
  private synced = false;
  private warned = new Set<string>();
  private early = new Set<string>();
  private stopping = false;
  private plugins: DevicePlugin[] = [];

  constructor(readonly opts: HandlerOptions) {
    this.log = opts.logger ?? createLogger('virt-handler');
    this.kube = new KubeApiWriter(opts.kubeConfig, opts.nodeName);
    const notifySocket = notifySocketPath(opts.handlerDir);
    const m = opts.migration === false ? undefined : (opts.migration ?? {});
    if (m) {
      const qemuUid = m.qemuUid ?? LAUNCHER_UID;
      this.migrationProxy = new MigrationProxyManager({
        logger: this.log,
        bindAddress: m.bindAddress,
        tls: m.tls,
        socketOwner: process.getuid?.() === 0 ? { uid: qemuUid, gid: qemuUid } : undefined,
      });
      if (!m.tls)
        this.log.warn('migration proxy without TLS: the TCP leg between handlers is plain', {
          reason: 'MigrationTLSOff',
        });
    }
    this.controller = new VmiController(
      {
        nodeName: opts.nodeName,
        podsDir: opts.podsDir,
        handlerDir: opts.handlerDir,
        notifySocket,
        launcherUid: opts.launcherUid ?? LAUNCHER_UID,
        launcherGid: opts.launcherGid,
        launcherReadyTimeoutMs: opts.launcherReadyTimeoutMs,
        vmOptions: opts.vmOptions,
        launcherImageVersion: opts.launcherImageVersion,
        networkSetup: opts.networkSetup,
        containerDisks: opts.containerDiskHelper
          ? new ContainerDisks({
              podsDir: opts.podsDir,
              hostPodsDir: opts.hostPodsDir,
              helper: opts.containerDiskHelper,
              log: this.log,
            })
          : undefined,
        getVmi: (key) => {
          const [ns, name] = key.split('/');
          return (this.informer?.get(ns, name!) ?? this.targetInformer?.get(ns, name!)) as
            VirtualMachineInstance | undefined;
        },
        kube: this.kube,
        requeueAfter: (key, ms) => this.queue.addAfter(key, ms),
        log: this.log,
        warned: this.warned,
        migration:
          m && this.migrationProxy
            ? {
                proxy: this.migrationProxy,
                address: m.address ?? defaultMigrationAddress(),
                launcherLibvirtSocket: m.launcherLibvirtSocket,
                podRoot: m.podRoot,
                options: m.options,
                targetDomainTimeoutMs: m.targetDomainTimeoutMs,
              }
            : undefined,
      },
      // nothing is reconciled before the VMI informer has listed: a VMI it has not seen yet is not a
      // VMI that is gone (whose domain would be killed)
      (key) => (this.synced ? this.queue.add(key) : this.early.add(key)),
    );
    const uid = opts.launcherUid ?? LAUNCHER_UID;
    this.notify = new NotifyServer({
      socketPath: notifySocket,
      socketOwner: uid === 0 ? undefined : { uid, gid: opts.launcherGid ?? uid },
      onDomainEvent: (e) => this.controller.domains.apply(e.eventType, e.domain),
      onK8sEvent: async (e) => {
        const io = e.involvedObject;
        if (!io?.namespace || !io.name) return;
        await this.kube.recordEvent(
          { metadata: { namespace: io.namespace, name: io.name, uid: io.uid } } as VirtualMachineInstance,
          { type: e.type === 'Warning' ? 'Warning' : 'Normal', reason: e.reason, message: e.message },
        );
      },
      logger: this.log,
    });
  }

  async start(): Promise<void> {
    const o = this.opts;
    // before anything else: a launcher Pod naming the profile cannot start on this node without it
    if (o.seccompProfileDir) {
      const r = await installSeccompProfile(o.seccompProfileDir, o.seccompBaseProfile);
      this.log.info(
        `seccomp profile ${r.written ? 'installed' : 'already installed'}: ${r.paths.join(', ')}`,
      );
    }
    await this.notify.start();
    const found = await discoverLaunchers(o.podsDir, o.launcherUid ?? LAUNCHER_UID, this.log, this.warned);
    await this.controller.resync(found);
    const key = (v: KubeObject) => `${v.metadata?.namespace}/${v.metadata?.name}`;
    const add = (k: string) => (this.synced ? this.queue.add(k) : this.early.add(k));
    // list (it rejects when the list fails: without it the handler knows no VMI and would take every domain for an
    // orphan, so it does not go on), then watch; a failed watch is restarted by the informer with a backoff
    const watchVmis = async (labelSelector: string): Promise<Informer<KubeObject>> => {
      const informer = new Informer<KubeObject>(this.kube.client, {
        resource: VMIS,
        labelSelector,
        log: this.log,
      });
      informer.onChange((v) => add(key(v)));
      try {
        await informer.start();
      } catch (e) {
        throw new Error(`cannot list VirtualMachineInstances (${labelSelector}): ${(e as Error).message}`);
      }
      return informer;
    };
    this.informer = await watchVmis(`${NODE_NAME_LABEL}=${o.nodeName}`);
    // upstream's second VMI informer: migrations whose target is this node
    if (this.migrationProxy)
      this.targetInformer = await watchVmis(`${LABEL_MIGRATION_TARGET_NODE}=${o.nodeName}`);
    this.synced = true;
    // a failed reconcile is retried with the key's backoff; it is logged as a warning (the retry follows)
    this.workers = runWorkers(this.queue, this.opts.workers ?? 4, (k) => this.controller.reconcile(k), {
      error: (msg, meta) => this.log.warn(msg, meta),
    });
    for (const k of [...this.early, ...this.controller.knownKeys()]) this.queue.add(k);
    this.early.clear();

    const resync = setInterval(() => void this.periodic(), o.resyncIntervalMs ?? 5000);
    this.timers.push(resync);
    await this.heartbeat(true);
    const hb = setInterval(() => void this.heartbeat(true), o.heartbeatIntervalMs ?? 60_000);
    this.timers.push(hb);
    if (o.httpPort !== undefined) await this.listen(o.httpPort, o.httpHost ?? '127.0.0.1');
    if (o.devicePluginDir) {
      for (const device of KUBEVIRT_DEVICES) {
        const p = new DevicePlugin({ device, dir: o.devicePluginDir, log: this.log });
        this.plugins.push(p);
        void this.startPlugin(p);
      }
    }
    this.log.info('virt-handler started', { node: o.nodeName });
  }

  /** Starts a device plugin, retrying every 10 s while kubelet does not take the registration. */
  private async startPlugin(p: DevicePlugin): Promise<void> {
    try {
      await p.start();
    } catch (err) {
      await p.stop();
      if (this.stopping) return;
      this.log.warn(`device plugin: ${(err as Error).message}; retrying in 10s`, {
        reason: 'DevicePluginFailed',
      });
      const t = setTimeout(() => void this.startPlugin(p), 10_000);
      this.timers.push(t);
    }
  }

  private lastSweep = 0;

  /** Looks for new launcher sockets (logging unusable paths) and re-checks every VMI of this node. */
  private async periodic(): Promise<void> {
    try {
      await discoverLaunchers(
        this.opts.podsDir,
        this.opts.launcherUid ?? LAUNCHER_UID,
        this.log,
        this.warned,
      );
      for (const v of [...(this.informer?.list() ?? []), ...(this.targetInformer?.list() ?? [])])
        this.queue.add(`${v.metadata?.namespace}/${v.metadata?.name}`);
      for (const k of this.controller.knownKeys()) this.queue.add(k);
      // every 30 s: it connects to the launcher socket of every Pod with container disks
      if (Date.now() - this.lastSweep >= 30_000) {
        this.lastSweep = Date.now();
        await this.controller.sweepContainerDisks();
      }
    } catch (err) {
      this.log.warn(`resync: ${(err as Error).message}`, { reason: 'ResyncFailed' });
    }
  }

  private async heartbeat(schedulable: boolean): Promise<void> {
    try {
      await this.kube.patchNode(
        { [SCHEDULABLE_LABEL]: String(schedulable) },
        { [HEARTBEAT_ANNOTATION]: new Date().toISOString().replace(/\.\d+Z$/, 'Z') },
      );
    } catch (err) {
      this.log.warn(`heartbeat: ${(err as Error).message}`, { reason: 'HeartbeatFailed' });
    }
  }

  /** /healthz: the notify server and the informer are up. /metrics: kubevirt_vmi_* of every running domain. */
  private async listen(port: number, host: string): Promise<void> {
    const server = http.createServer((req, res) => {
      void (async () => {
        if (req.url === '/healthz') {
          res.writeHead(this.synced ? 200 : 503, { 'content-type': 'text/plain' });
          res.end(this.synced ? 'ok\n' : 'starting\n');
        } else if (req.url === '/metrics') {
          res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
          res.end(await this.metrics());
        } else {
          res.writeHead(404).end();
        }
      })().catch((err: Error) => {
        res.writeHead(500).end(err.message);
      });
    });
    await new Promise<void>((resolve) => server.listen(port, host, resolve));
    this.server = server;
  }

  /** The VMI and its live launcher's cmd client, when this node runs it (the subresource endpoint's lookup). */
  launcherFor(
    namespace: string,
    name: string,
  ): { vmi: VirtualMachineInstance; client: CmdClient; privateDir: string } | undefined {
    const vmi = this.informer?.get(namespace, name) as VirtualMachineInstance | undefined;
    const live = this.controller
      .liveLaunchers()
      .find((l) => l.namespace === namespace && l.name === name && l.uid === vmi?.metadata?.uid);
    return vmi && live
      ? { vmi, client: live.client, privateDir: podPrivateDir(this.opts.podsDir, live.podUid) }
      : undefined;
  }

  get httpAddress(): string | undefined {
    const a = this.server?.address();
    return a && typeof a === 'object' ? `http://${a.address}:${a.port}` : undefined;
  }

  async metrics(): Promise<string> {
    const m = new MetricsText();
    for (const { namespace, name, client } of this.controller.liveLaunchers()) {
      try {
        const st = (await client.getDomainStats({ timeoutMs: 5000 })) as StatsLike | undefined;
        if (st) addDomainStats(m, { node: this.opts.nodeName, namespace, name }, st);
      } catch {
        /* a launcher going away: no sample */
      }
    }
    m.add(
      'kubevirt_handler_vmi_status_writes_total',
      'counter',
      'VMI status writes by this handler.',
      { node: this.opts.nodeName },
      this.controller.statusWrites,
    );
    return m.toString();
  }

  /** Stops everything; marks the node unschedulable (the launchers and their guests keep running). */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    for (const t of this.timers) clearTimeout(t);
    this.queue.shutDown();
    await this.workers;
    for (const inf of [this.informer, this.targetInformer]) await inf?.stop();
    for (const p of this.plugins) await p.stop();
    await this.heartbeat(false);
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
    await this.controller.stop();
    await this.migrationProxy?.close();
    await this.notify.stop(1000);
    this.log.info('virt-handler stopped');
  }
}

export const defaultDirs = {
  podsDir: '/var/lib/kubelet/pods',
  handlerDir: '/var/run/kubevirt',
  ghostDir: path.join('/var/run/kubevirt', 'ghost-records'),
};
