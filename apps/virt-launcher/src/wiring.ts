// Glue between the launcher and the packages below it: node-libvirt's private session libvirtd and
// connection, libvirt-manager's DomainManager + DomainWatcher, the converter's pod layout and context.
import { accessSync, constants } from 'node:fs';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import type { Logger } from '@kubevirt-ts/log';
import type { ConverterContext } from '@kubevirt-ts/converter';
import {
  ConnectionHolder,
  contextWithOptions,
  DomainManager,
  DomainWatcher,
  type DomainWatchEvent,
  type KubevirtDomain,
  type SyncOptions,
} from '@kubevirt-ts/libvirt-manager';
import type { Connection } from '@kubevirt-ts/node-libvirt';
import { upstreamMigrationTarget } from '@kubevirt-ts/cmd-protocol';
import { blockVolumesInPod } from '@kubevirt-ts/disks';
import { createLayout } from './layout.js';
import { startPrivateDaemon, type SessionDaemon } from './early.js';

export { createLayout, type SessionDaemon };

// The native binding is loaded on first use only: importing this app's modules (tests, tools, the
// monitor process) must not load libvirt into the process.
const nodeLibvirt = () => import('@kubevirt-ts/node-libvirt');

/** A domain event as the launcher sees it. */
export interface DomainEventLike {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  domain: KubevirtDomain;
  status: { status: string; reason: string };
}

export interface DomainLayer {
  manager: DomainManager;
  onEvent(fn: (ev: DomainEventLike) => void): void;
  startWatching(): Promise<void>;
  libvirtVersion(): Promise<string>;
  /**
   * Has libvirtd load the QEMU capabilities of the domain's emulator (from the capability cache, or a probe)
   * now, off the start path, rather than at the first define; best effort.
   */
  warmUp?(): Promise<void>;
  alive(): Promise<boolean>;
  close(): Promise<void>;
}

/**
 * Whether QEMU may use KVM. `KVTS_KVM=1|0` forces it; otherwise KVM is used unless emulation is allowed
 * (then the domain is type "qemu" / TCG): on hosts whose /dev/kvm opens but cannot run guests (like
 * this project's CI) an open() check is not enough, so --allow-emulation means "emulate".
 */
export function kvmAvailable(allowEmulation: boolean): boolean {
  const env = process.env.KVTS_KVM;
  if (env === '1') return true;
  if (env === '0') return false;
  if (allowEmulation) return false;
  try {
    accessSync('/dev/kvm', constants.R_OK | constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

const HOST_ARCH: Record<string, string> = {
  x64: 'x86_64',
  arm64: 'aarch64',
  ppc64: 'ppc64le',
  s390x: 's390x',
};

function versionString(v: number): string {
  return `${Math.floor(v / 1_000_000)}.${Math.floor(v / 1000) % 1000}.${v % 1000}`;
}

/** Keeps what this libvirtd probed for the next launcher (best effort; node-libvirt's QEMU capability cache). */
export async function saveCaps(baseDir: string, cacheDir: string): Promise<void> {
  const { saveQemuCaps } = await nodeLibvirt();
  await saveQemuCaps(baseDir, cacheDir);
}

/**
 * The converter context of one sync, as upstream's launcher builds it: the handler's
 * VirtualMachineOptions (SMBIOS, balloon stats period, preallocated volumes, disksInfo, cluster config)
 * over the launcher's base; free page reporting on unless the cluster, the VMI (no balloon,
 * dedicated CPUs / realtime / hugepages, annotation kubevirt.io/free-page-reporting-disabled) turns
 * it off; serial console log unless the VMI or the cluster turns it off. `found` (what disk
 * preparation found) wins over the handler's disksInfo: it describes the file QEMU will open.
 */
export function launcherContext(
  base: ConverterContext,
  vmi: Pick<VirtualMachineInstance, 'metadata' | 'spec'> | undefined,
  options: SyncOptions | undefined,
  found?: ConverterContext['disksInfo'],
): ConverterContext {
  const cluster = options?.clusterConfig;
  const dom = vmi?.spec.domain;
  const highPerformance =
    dom?.cpu?.dedicatedCpuPlacement === true || dom?.cpu?.realtime != null || dom?.memory?.hugepages != null;
  const freePageReporting = !(
    cluster?.FreePageReportingDisabled === true ||
    dom?.devices?.autoattachMemBalloon === false ||
    highPerformance ||
    vmi?.metadata?.annotations?.['kubevirt.io/free-page-reporting-disabled'] === 'true'
  );
  const logSerial = dom?.devices?.logSerialConsole;
  const ctx = contextWithOptions(
    {
      ...base,
      freePageReporting,
      serialConsoleLog: logSerial ?? cluster?.SerialConsoleLogDisabled !== true,
    },
    options,
  );
  // contextWithOptions turns these off from the cluster config; the VMI's own setting wins (upstream)
  ctx.serialConsoleLog = logSerial ?? cluster?.SerialConsoleLogDisabled !== true;
  if (found && Object.keys(found).length > 0) ctx.disksInfo = { ...ctx.disksInfo, ...found };
  return ctx;
}

export const openDomainLayer = {
  /** the private libvirtd (early.ts; replaced by tests with a fake) */
  startDaemon: startPrivateDaemon,

  async connect(
    daemon: SessionDaemon,
    opts: {
      root: string;
      allowEmulation: boolean;
      logger: Logger;
      domainName: string;
      /** what disk preparation found (image formats, sizes by volume), read at each sync */
      disksInfo?: () => ConverterContext['disksInfo'];
      /** no Pod network set up by phase 1 (standalone): the pod network's binding instead */
      podNetworkBinding?: 'passt' | 'slirp';
      /** upstream's virtShareDir: where the migration proxy sockets are (see LauncherConfig.shareDir) */
      shareDir?: string;
    },
  ): Promise<DomainLayer> {
    const { Connection } = await nodeLibvirt();
    const holder = new ConnectionHolder(() => Connection.open(daemon.uri));
    const conn = await holder.get();
    const layout = createLayout(opts.root);
    const base: ConverterContext = {
      allowEmulation: opts.allowEmulation,
      kvmAvailable: kvmAvailable(opts.allowEmulation),
      layout,
      ...(opts.podNetworkBinding ? { podNetworkBinding: opts.podNetworkBinding } : {}),
    };
    // the handler's VirtualMachineOptions (SMBIOS, balloon stats period, disksInfo, cluster config)
    // applied as libvirt-manager does; upstream logs the serial console to a file unless the cluster
    // config disables it. What this launcher found on disk wins over the handler's disksInfo: it is
    // the file QEMU will open.
    // Block claims: the volumes whose /dev/<volume> is a block device in this Pod (read at each sync)
    const context = (vmi: VirtualMachineInstance, options: SyncOptions | undefined): ConverterContext => ({
      ...launcherContext(base, vmi, options, opts.disksInfo?.()),
      ...blockVolumesInPod(vmi, layout),
    });
    const shareDir = opts.shareDir;
    const manager = new DomainManager({
      connection: holder,
      context,
      logger: opts.logger,
      // upstream's launcher: no target in MigrationOptions; the handler's proxy sockets for this VMI
      migrationTarget: (vmi) => {
        if (!shareDir) throw new Error('migration: this launcher has no share dir (--kubevirt-share-dir)');
        return upstreamMigrationTarget(shareDir, String(vmi.metadata?.uid ?? ''));
      },
    });
    const watcher = new DomainWatcher({
      connection: holder,
      filter: (n) => n === opts.domainName,
      logger: opts.logger,
      // migration starts and outcomes re-report the domain, so they reach the notify client
      migrations: manager,
    });
    const listeners: Array<(ev: DomainEventLike) => void> = [];
    watcher.on('event', (ev: DomainWatchEvent) => {
      const e: DomainEventLike = { type: ev.type, domain: ev.domain, status: ev.domain.status };
      for (const l of listeners) l(e);
    });
    watcher.on('error', (e: Error) => opts.logger.warn(`domain watcher: ${e.message}`));
    return {
      manager,
      onEvent: (fn) => listeners.push(fn),
      startWatching: () => watcher.start(),
      warmUp: async () => {
        await (conn as unknown as Connection)
          .getDomainCapabilities({
            arch: HOST_ARCH[process.arch] ?? process.arch,
            virttype: base.kvmAvailable ? 'kvm' : 'qemu',
          })
          .catch(() => undefined);
      },
      libvirtVersion: async () =>
        versionString(Number(await (conn as unknown as Connection).getLibVersion())),
      alive: async () => {
        try {
          await (await holder.get()).getLibVersion();
          return true;
        } catch {
          return false;
        }
      },
      close: async () => {
        await watcher.stop().catch(() => undefined);
        await manager.close(false).catch(() => undefined);
        await holder.close();
      },
    };
  },
};
