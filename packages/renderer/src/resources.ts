// Resources of the launcher Pod's compute container: the VMI's requests/limits, the memory overhead of
// everything that runs next to the guest, CPU from the topology, and device-plugin resources.
import { parseQuantity, type VirtualMachineInstance } from '@kubevirt-ts/api';
import { tcgTranslationCacheBytes } from '@kubevirt-ts/converter';
import { RenderError, type ResolvedConfig } from './config.js';

const Mi = 1024 * 1024;

/**
 * Fixed and per-item parts of the memory overhead, in bytes. See README.md ("Memory overhead").
 * Each number is an estimate of resident memory, rounded up, with shared libraries counted per process
 * (a small safety margin).
 */
export const OVERHEAD = {
  // What runs in the Pod besides QEMU: what each charges to the Pod's memory cgroup, measured in the cluster
  // (README "Memory overhead"). Pages of the image's files (the node binary, libvirt's and QEMU's libraries) are
  // shared by every launcher Pod of a node and charged once per node, so they are not a per-Pod cost.
  /** virt-launcher: the Node.js process (runtime, gRPC server, libvirt binding, watchers); 25 MiB of its own */
  launcher: 45 * Mi,
  /** virt-launcher-monitor, the native (static C) wrapper: reaps, forwards signals; measured 0.8 MiB RSS */
  launcherMonitor: 2 * Mi,
  /** the Pod's private libvirtd (qemu driver only, one worker); 4.0-4.4 MiB of its own with one small domain */
  libvirtd: 16 * Mi,
  // no virtlogd: QEMU writes its logs itself (apps/virt-launcher README, Memory)
  /** QEMU's own fixed footprint (binary, main loop, device model) */
  qemu: 30 * Mi,
  /** per vCPU: vCPU thread stack, KVM/TCG per-CPU state */
  perVcpu: 8 * Mi,
  /** per IOThread */
  perIOThread: 8 * Mi,
  /** per disk/cdrom/lun: block driver state, qcow2 L2/refcount caches, bounce buffers */
  perDisk: 2 * Mi,
  /** per network interface: virtio-net/e1000 rings, tap or user-mode buffers */
  perInterface: 1 * Mi,
  /** video RAM of the auto-attached graphics device */
  video: 32 * Mi,
  /** swtpm process of a TPM device */
  tpm: 53 * Mi,
  /** UEFI pflash on arm64 (two 64 MiB flash devices) */
  arm64Pflash: 128 * Mi,
  /** VFIO (GPU / host device): guest RAM plus MMIO space is locked */
  vfio: 1024 * Mi,
  /** dedicated CPUs or Guaranteed QoS: the Pod's cgroup is hard-capped, keep headroom */
  guaranteedHeadroom: 100 * Mi,
  /** page tables: one byte per 512 bytes of guest memory */
  pageTableDivisor: 512,
} as const;

export type ResourceList = Record<string, string>;

/** Number of vCPUs: sockets × cores × threads, else the CPU limit or request (rounded up), else 1. */
export function vcpuCount(vmi: VirtualMachineInstance): number {
  const cpu = vmi.spec.domain.cpu;
  if (cpu && (cpu.cores || cpu.sockets || cpu.threads)) {
    return (cpu.sockets || 1) * (cpu.cores || 1) * (cpu.threads || 1);
  }
  const res = vmi.spec.domain.resources;
  const q = res?.limits?.cpu ?? res?.requests?.cpu;
  if (q !== undefined) return Math.max(1, Math.ceil(quantity(q, 'spec.domain.resources.limits.cpu') - 1e-9));
  return 1;
}

function quantity(q: string | number, path: string): number {
  try {
    return parseQuantity(q);
  } catch (e) {
    throw new RenderError(path, (e as Error).message);
  }
}

function memOf(list: Record<string, string | number> | undefined, path: string): number | undefined {
  const v = list?.memory;
  return v === undefined ? undefined : quantity(v, `${path}.memory`);
}

/** Guest memory: spec.domain.memory.guest, else the memory request, else the memory limit. */
export function guestMemory(vmi: VirtualMachineInstance): number {
  const d = vmi.spec.domain;
  if (d.memory?.guest !== undefined) return quantity(d.memory.guest, 'spec.domain.memory.guest');
  const req = memOf(d.resources?.requests, 'spec.domain.resources.requests');
  if (req !== undefined) return req;
  const lim = memOf(d.resources?.limits, 'spec.domain.resources.limits');
  if (lim !== undefined) return lim;
  throw new RenderError(
    'spec.domain.resources.requests.memory',
    'no guest memory: set spec.domain.memory.guest or spec.domain.resources.requests.memory',
  );
}

/** Number of IOThreads QEMU gets (see README). */
export function ioThreadCount(vmi: VirtualMachineInstance): number {
  const disks = vmi.spec.domain.devices?.disks ?? [];
  const dedicated = disks.filter((d) => d.dedicatedIOThread).length;
  const shared = disks.length - dedicated;
  if (vmi.spec.domain.ioThreadsPolicy === 'auto') {
    return Math.min(Math.max(shared, 1), 2 * vcpuCount(vmi)) + dedicated;
  }
  return 1 + dedicated;
}

export function isDedicatedCpu(vmi: VirtualMachineInstance): boolean {
  return vmi.spec.domain.cpu?.dedicatedCpuPlacement === true;
}

/** Guaranteed QoS asked for: CPU and memory limits given and equal to the requests (or requests absent). */
export function wantsGuaranteedQos(vmi: VirtualMachineInstance): boolean {
  const r = vmi.spec.domain.resources;
  const lim = r?.limits;
  if (!lim || lim.cpu === undefined || lim.memory === undefined) return false;
  const req = r?.requests ?? {};
  const eq = (k: 'cpu' | 'memory') =>
    req[k] === undefined ||
    quantity(req[k]!, `spec.domain.resources.requests.${k}`) ===
      quantity(lim[k]!, `spec.domain.resources.limits.${k}`);
  return eq('cpu') && eq('memory');
}

function usesVfio(vmi: VirtualMachineInstance): boolean {
  const d = vmi.spec.domain.devices;
  return (d?.gpus?.length ?? 0) > 0 || (d?.hostDevices?.length ?? 0) > 0;
}

export interface MemoryOverhead {
  /** total in bytes, rounded up to a whole MiB, after the additional ratio */
  bytes: number;
  /** each part in bytes (before rounding and ratio) */
  parts: Record<string, number>;
}

/** The memory the Pod needs beyond the guest's RAM (formula in README.md). */
export function memoryOverhead(
  vmi: VirtualMachineInstance,
  config: Pick<ResolvedConfig, 'arch' | 'additionalOverheadRatio'> & { useEmulation?: boolean },
): MemoryOverhead {
  const d = vmi.spec.domain;
  const devices = d.devices ?? {};
  const parts: Record<string, number> = {
    launcher: OVERHEAD.launcher,
    launcherMonitor: OVERHEAD.launcherMonitor,
    libvirtd: OVERHEAD.libvirtd,
    qemu: OVERHEAD.qemu,
    pageTables: Math.ceil(guestMemory(vmi) / OVERHEAD.pageTableDivisor),
    vcpus: OVERHEAD.perVcpu * vcpuCount(vmi),
    ioThreads: OVERHEAD.perIOThread * ioThreadCount(vmi),
    disks: OVERHEAD.perDisk * (devices.disks?.length ?? 0),
    interfaces: OVERHEAD.perInterface * interfaceCount(vmi),
  };
  if (devices.autoattachGraphicsDevice !== false) parts.video = OVERHEAD.video;
  if (devices.tpm) parts.tpm = OVERHEAD.tpm;
  if (config.arch === 'arm64') parts.arm64Pflash = OVERHEAD.arm64Pflash;
  // emulated: QEMU's TCG translation cache, capped by the converter at exactly this size (libvirt <tcg><tb-cache>)
  if (config.useEmulation) parts.tcgTranslationCache = tcgTranslationCacheBytes(guestMemory(vmi));
  if (usesVfio(vmi)) parts.vfio = OVERHEAD.vfio;
  if (isDedicatedCpu(vmi) || wantsGuaranteedQos(vmi)) parts.guaranteedHeadroom = OVERHEAD.guaranteedHeadroom;
  const sum = Object.values(parts).reduce((a, b) => a + b, 0);
  const bytes = Math.ceil((sum * config.additionalOverheadRatio) / Mi) * Mi;
  return { bytes, parts };
}

/** Interfaces the guest gets: spec.domain.devices.interfaces, or the auto-attached pod interface. */
export function interfaceCount(vmi: VirtualMachineInstance): number {
  const ifaces = vmi.spec.domain.devices?.interfaces;
  if (ifaces && ifaces.length > 0) return ifaces.filter((i) => i.state !== 'absent').length;
  const auto = vmi.spec.domain.devices?.autoattachPodInterface !== false;
  return auto && (vmi.spec.networks === undefined || vmi.spec.networks.length > 0) ? 1 : 0;
}

/** "1.5Gi"-free exact formatting: whole MiB as "<n>Mi", else plain bytes. */
export function formatBytes(bytes: number): string {
  const b = Math.ceil(bytes);
  if (b % Mi === 0) return `${b / Mi}Mi`;
  return String(b);
}

/** CPU as cores ("2") or millicores ("100m"), rounded up to a millicore. */
export function formatCpu(cores: number): string {
  const milli = Math.ceil(cores * 1000 - 1e-6);
  return milli % 1000 === 0 ? String(milli / 1000) : `${milli}m`;
}

export const DEVICE_KVM = 'devices.kubevirt.io/kvm';
export const DEVICE_TUN = 'devices.kubevirt.io/tun';
export const DEVICE_VHOST_NET = 'devices.kubevirt.io/vhost-net';
export const DEVICE_VHOST_VSOCK = 'devices.kubevirt.io/vhost-vsock';
/** ephemeral storage the launcher itself writes (logs, sockets, small files), added to the request */
export const EPHEMERAL_STORAGE_OVERHEAD = '50M';

/** The interfaces on the pod network (the auto-attached one counts as masquerade). */
export function podNetworkInterfaces(vmi: VirtualMachineInstance) {
  const networks = vmi.spec.networks;
  const ifaces = vmi.spec.domain.devices?.interfaces ?? [];
  if (ifaces.length === 0) {
    // auto-attached pod interface: masquerade (upstream default binding)
    return interfaceCount(vmi) > 0
      ? [{ name: 'default', masquerade: {} } as { name: string; [k: string]: unknown }]
      : [];
  }
  const podNets = new Set((networks ?? []).filter((n) => n.pod).map((n) => n.name));
  return ifaces.filter((i) => podNets.has(i.name) && i.state !== 'absent') as {
    name: string;
    [k: string]: unknown;
  }[];
}

/** Whether a masquerade/bridge interface is on the pod network (a tap and the launcher's DHCP server). */
export function hasTapPodInterface(vmi: VirtualMachineInstance): boolean {
  return podNetworkInterfaces(vmi).some((i) => i.bridge !== undefined || i.masquerade !== undefined);
}

/** Resources of the compute container. */
export function computeResources(
  vmi: VirtualMachineInstance,
  config: ResolvedConfig,
): { requests: ResourceList; limits: ResourceList; overhead: MemoryOverhead } {
  const d = vmi.spec.domain;
  const rq = d.resources?.requests ?? {};
  const lm = d.resources?.limits ?? {};
  const requests: ResourceList = {};
  const limits: ResourceList = {};
  // Anything else the user asked for (ephemeral-storage, extended resources) goes through unchanged.
  for (const [k, v] of Object.entries(rq)) if (k !== 'memory' && k !== 'cpu') requests[k] = String(v);
  for (const [k, v] of Object.entries(lm)) if (k !== 'memory' && k !== 'cpu') limits[k] = String(v);

  const overhead = memoryOverhead(vmi, config);
  const hugepages = d.memory?.hugepages;
  const dedicated = isDedicatedCpu(vmi);
  const vcpus = vcpuCount(vmi);

  // ---- memory
  let memRequest = memOf(rq, 'spec.domain.resources.requests');
  const memLimit = memOf(lm, 'spec.domain.resources.limits');
  if (memRequest === undefined && memLimit !== undefined) memRequest = memLimit;
  if (memRequest === undefined) {
    const guest = guestMemory(vmi);
    memRequest =
      config.memoryOvercommit === 100 || hugepages || dedicated
        ? guest
        : Math.floor((guest * 100) / config.memoryOvercommit);
  }
  if (hugepages) {
    const size = hugepages.pageSize;
    if (!size)
      throw new RenderError(
        'spec.domain.memory.hugepages.pageSize',
        'page size is required (e.g. 2Mi or 1Gi)',
      );
    quantity(size, 'spec.domain.memory.hugepages.pageSize');
    const guest = d.memory?.guest !== undefined ? Math.min(guestMemory(vmi), memRequest) : memRequest;
    requests[`hugepages-${size}`] = formatBytes(guest);
    limits[`hugepages-${size}`] = formatBytes(guest);
    // the guest's RAM comes from hugepages: regular memory covers only the overhead (+ request above guest)
    requests.memory = formatBytes(overhead.bytes + Math.max(0, memRequest - guest));
    if (memLimit !== undefined) limits.memory = formatBytes(overhead.bytes + Math.max(0, memLimit - guest));
  } else {
    requests.memory = formatBytes(memRequest + (d.resources?.overcommitGuestOverhead ? 0 : overhead.bytes));
    if (memLimit !== undefined) limits.memory = formatBytes(memLimit + overhead.bytes);
  }

  // ---- cpu
  const ioThreadCpus = 0; // supplemental IOThread pools are not part of this API version
  if (dedicated) {
    const n = vcpus + ioThreadCpus + (d.cpu?.isolateEmulatorThread ? 1 : 0);
    requests.cpu = String(n);
    limits.cpu = String(n);
    limits.memory = requests.memory; // Guaranteed QoS needs memory limit == request
  } else {
    if (rq.cpu !== undefined)
      requests.cpu = formatCpu(quantity(rq.cpu, 'spec.domain.resources.requests.cpu'));
    else if (lm.cpu !== undefined)
      requests.cpu = formatCpu(quantity(lm.cpu, 'spec.domain.resources.limits.cpu'));
    else requests.cpu = formatCpu(vcpus / config.cpuAllocationRatio);
    if (lm.cpu !== undefined) limits.cpu = formatCpu(quantity(lm.cpu, 'spec.domain.resources.limits.cpu'));
  }

  // ---- ephemeral storage the launcher writes itself
  const eph = requests['ephemeral-storage'];
  requests['ephemeral-storage'] =
    eph === undefined
      ? EPHEMERAL_STORAGE_OVERHEAD
      : String(
          quantity(eph, 'spec.domain.resources.requests.ephemeral-storage') +
            parseQuantity(EPHEMERAL_STORAGE_OVERHEAD),
        );
  if (limits['ephemeral-storage'] !== undefined) {
    limits['ephemeral-storage'] = String(
      quantity(limits['ephemeral-storage'], 'spec.domain.resources.limits.ephemeral-storage') +
        parseQuantity(EPHEMERAL_STORAGE_OVERHEAD),
    );
  }

  // ---- device-plugin resources: extended resources need requests == limits
  const bump = (name: string): void => {
    limits[name] = String((Number(limits[name] ?? 0) || 0) + 1);
    requests[name] = limits[name];
  };
  if (!config.useEmulation) bump(DEVICE_KVM);
  const podIfaces = podNetworkInterfaces(vmi);
  // bridge/masquerade bindings connect QEMU to a tap device in the Pod's network namespace
  if (hasTapPodInterface(vmi)) bump(DEVICE_TUN);
  const virtioIfaces =
    (d.devices?.interfaces ?? []).some((i) => (i.model ?? 'virtio') === 'virtio' && i.state !== 'absent') ||
    ((d.devices?.interfaces ?? []).length === 0 && podIfaces.length > 0);
  if (virtioIfaces && !config.useEmulation) bump(DEVICE_VHOST_NET);
  if (d.devices?.autoattachVSOCK) bump(DEVICE_VHOST_VSOCK);
  for (const g of d.devices?.gpus ?? []) bump(g.deviceName);
  for (const h of d.devices?.hostDevices ?? []) bump(h.deviceName);

  return { requests, limits, overhead };
}
