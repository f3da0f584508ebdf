import type { PodLayout } from './layout.js';

/** SMBIOS system values the node operator sets for every VM (upstream's KubeVirt CR
 * `spec.configuration.smbios`). Empty values are left out of the domain. */
export interface SMBios {
  manufacturer?: string;
  product?: string;
  version?: string;
  sku?: string;
  family?: string;
}

/** EFI firmware files as seen inside the launcher. */
export interface EFIConfiguration {
  /** firmware code for secureBoot: false */
  code: string;
  /** variable store template for secureBoot: false */
  vars: string;
  /** firmware code with Secure Boot support (used when secureBoot is true, the default) */
  secureCode: string;
  /** variable store template with enrolled keys, for Secure Boot */
  secureVars: string;
}

/**
 * Default EFI firmware: Debian 12's OVMF files under /usr/share/OVMF (package ovmf; the launcher image carries these
 * four), the 2 MiB flash layout. Secure Boot uses Debian's variable store with Microsoft's keys enrolled and Secure
 * Boot on (`OVMF_VARS.ms.fd`: upstream's CentOS-based image names its equivalent `OVMF_VARS.secboot.fd`).
 */
export const DEFAULT_EFI: EFIConfiguration = {
  code: '/usr/share/OVMF/OVMF_CODE.fd',
  vars: '/usr/share/OVMF/OVMF_VARS.fd',
  secureCode: '/usr/share/OVMF/OVMF_CODE.secboot.fd',
  secureVars: '/usr/share/OVMF/OVMF_VARS.ms.fd',
};

/** Facts about a volume's image the launcher found on disk (upstream's DisksInfo). */
export interface DiskInfo {
  /** image format of a containerDisk's image file (its backing store) */
  format: 'raw' | 'qcow2';
  /** virtual size in bytes, when known */
  virtualSize?: number;
}

/**
 * Everything besides the VMI that decides the domain: facts about the node and the Pod the
 * launcher runs in. Every field is optional; the defaults describe a standard amd64 launcher Pod
 * on a node with /dev/kvm.
 */
export interface ConverterContext {
  /** Kubernetes architecture name of the node: only 'amd64' is implemented (default 'amd64';
   * `spec.architecture` of the VMI wins when set). */
  architecture?: string;
  /** upstream's `useEmulation` (KubeVirt CR developerConfiguration.useEmulation): software
   * emulation (TCG) may be used when KVM is not available. Default false. */
  allowEmulation?: boolean;
  /** whether /dev/kvm can be used. Default true. As upstream: the domain type is `qemu` only
   * when KVM is not available and emulation is allowed; KVM unavailable without emulation is an
   * error; otherwise the type is `kvm`. */
  kvmAvailable?: boolean;
  /** host CPUs of the Pod's exclusive cpuset (the launcher reads its cgroup), for
   * spec.domain.cpu.dedicatedCpuPlacement: vCPU i is pinned to cpuSet[i]; with
   * isolateEmulatorThread the next one takes the emulator and IO threads. */
  cpuSet?: number[];
  /** SMBIOS system entries (manufacturer, product, ...). Default none. */
  smbios?: SMBios;
  /** EFI firmware paths (default: Debian/upstream OVMF under /usr/share/OVMF). */
  efi?: EFIConfiguration;
  /** where files live in the Pod (default: the standard in-Pod layout, `podLayout`). */
  layout?: PodLayout;
  /** by volume name: image facts; a containerDisk without an entry is taken to be qcow2. */
  disksInfo?: Record<string, DiskInfo>;
  /** by volume name: the PVC (persistentVolumeClaim or ephemeral) is volumeMode Block. */
  isBlockPVC?: Record<string, boolean>;
  /** by volume name: the DataVolume's PVC is volumeMode Block. */
  isBlockDV?: Record<string, boolean>;
  /** by volume name: PVC/DataVolume volumes that are hotplugged (upstream's HotplugVolumes, from the
   * VMI's volume status): their images live under the hotplug directory; `ready: false` (not yet
   * mounted into the Pod) leaves the disk out of the domain. `isBlock` as for isBlockPVC. */
  hotplugVolumes?: Record<string, { ready?: boolean; isBlock?: boolean }>;
  /** volumes whose disks get no discard=unmap (e.g. thick-provisioned storage). */
  volumesDiscardIgnore?: string[];
  /** memory balloon statistics period in seconds; 0 or unset: no <stats>. */
  memBalloonStatsPeriod?: number;
  /** free page reporting on the balloon (upstream turns it off for dedicated CPUs, hugepages, ...). Default false. */
  freePageReporting?: boolean;
  /** log the serial console to a file beside its socket (upstream's serial console log). Default false. */
  serialConsoleLog?: boolean;
  /** the binding of the pod network's interface when no Pod network namespace is set up by phase 1
   * (standalone): 'passt' (the masquerade, bridge and passt bindings alike go through a passt the launcher
   * runs) or 'slirp' (QEMU user-mode networking, every binding: no passt at all). Default: the binding the
   * VMI names (masquerade/bridge: a tap set up by phase 1; passt: a passt the launcher runs, one per
   * interface, listening on `layout.passtSocket(uid, i)`, attached by `-netdev stream` through
   * `qemuArgs`: libvirt 9.0 has no passt backend). */
  podNetworkBinding?: 'passt' | 'slirp';
}

/** A {@link ConverterContext} with every default filled in, as {@link resolveContext} returns it. */
export interface ResolvedContext {
  arch: 'amd64';
  domainType: 'kvm' | 'qemu';
  smbios: SMBios;
  efi: EFIConfiguration;
  layout: PodLayout;
  disksInfo: Record<string, DiskInfo>;
  isBlockPVC: Record<string, boolean>;
  isBlockDV: Record<string, boolean>;
  hotplugVolumes: Record<string, { ready?: boolean; isBlock?: boolean }>;
  cpuSet: number[];
  volumesDiscardIgnore: Set<string>;
  memBalloonStatsPeriod: number;
  freePageReporting: boolean;
  serialConsoleLog: boolean;
  podNetworkBinding?: 'passt' | 'slirp';
}
