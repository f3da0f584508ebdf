// The common instance types and preferences add-on (deploy/addons/common-instancetypes/): cluster-wide
// instance types of the u1, o1, cx1, m1, d1, n1 and rt1 series and a preference per guest OS, with the names,
// sizes and settings of the kubevirt/common-instancetypes project (Apache-2.0), so that a VM written for an
// upstream cluster that has that bundle (`instancetype: {name: u1.medium}`, `preference: {name: fedora}`) gets
// the same CPU, memory and devices here. Built from the compact tables below (figures checked against the
// project's release COMMON_INSTANCETYPES_VERSION); the descriptions are ours. tools/gen-common-instancetypes.mjs
// writes the files, `--check` tells when they are stale.
import YAML from 'yaml';
import {
  INSTANCETYPE_API_VERSION,
  type Instancetype,
  type Preference,
  type VirtualMachineInstancetypeSpec,
  type VirtualMachinePreferenceSpec,
} from './instancetype.js';

/** The kubevirt/common-instancetypes release whose names, sizes and settings the add-on reproduces. */
export const COMMON_INSTANCETYPES_VERSION = 'v1.7.0';

/** The folder of the add-on, relative to the repository's root. */
export const COMMON_INSTANCETYPES_DIR = 'deploy/addons/common-instancetypes';

const label = (k: string) => `instancetype.kubevirt.io/${k}`;
/** labels every object of the add-on carries (as upstream's release bundles) */
const COMMON_LABELS = {
  [label('vendor')]: 'kubevirt.io',
  [label('common-instancetypes-version')]: COMMON_INSTANCETYPES_VERSION,
};

// ---------------------------------------------------------------- instance types

/** A series of instance types: `<name><version>.<size>`, e.g. u1.medium. */
interface Series {
  /** e.g. `u`; the objects are named `u1.<size>` */
  name: string;
  version: number;
  /** `instancetype.kubevirt.io/class` */
  class: string;
  /** `instancetype.kubevirt.io/displayName` */
  displayName: string;
  /** `instancetype.kubevirt.io/icon-pf` (a PatternFly icon) */
  icon: string;
  /** `instancetype.kubevirt.io/description` (ours) */
  about: string;
  /** `size:vCPUs:memory`, separated by spaces */
  sizes: string;
  /** huge page sizes: the first one's objects take the plain size name, each other one's get its size as a suffix
   * (cx1.medium: 2Mi pages, cx1.medium1gi: 1Gi pages) */
  hugepages?: string[];
  /** CPU settings besides the vCPU count */
  cpu?: Omit<VirtualMachineInstancetypeSpec['cpu'], 'guest'>;
  /** maxSockets set to the vCPU count (no spare sockets for CPU hotplug) */
  maxSocketsIsGuest?: boolean;
  ioThreadsPolicy?: 'auto';
  overcommitPercent?: number;
  /** annotations added to the VMI (and so to its launcher Pod) */
  annotations?: Record<string, string>;
}

/** CRI-O: no CPU load balancing, CFS quota or IRQ balancing on the Pod's CPUs (low-latency series) */
const CRIO_LOW_LATENCY = {
  'cpu-load-balancing.crio.io': 'disable',
  'cpu-quota.crio.io': 'disable',
  'irq-load-balancing.crio.io': 'disable',
};
const DEDICATED = { dedicatedCPUPlacement: true, isolateEmulatorThread: true };
const NUMA = { numa: { guestMappingPassthrough: {} } };

/** The series of the add-on, their sizes and settings (upstream's figures). */
const SERIES: Series[] = [
  {
    name: 'u',
    version: 1,
    class: 'general.purpose',
    displayName: 'General Purpose',
    icon: 'pficon-server-group',
    about:
      'General purpose: 4 GiB of memory per vCPU from medium up. The vCPUs are ordinary threads of the\n' +
      'launcher Pod: the node time-shares its CPUs between them and other workloads.',
    sizes:
      'nano:1:512Mi micro:1:1Gi small:1:2Gi medium:1:4Gi 2xmedium:2:4Gi large:2:8Gi xlarge:4:16Gi ' +
      '2xlarge:8:32Gi 4xlarge:16:64Gi 8xlarge:32:128Gi',
  },
  {
    name: 'o',
    version: 1,
    class: 'overcommitted',
    displayName: 'Overcommitted',
    icon: 'pficon-virtual-machine',
    about:
      "The u1 sizes with memory overcommitted: the launcher Pod requests half of the guest's memory\n" +
      '(overcommitPercent 50), so more VMs fit on a node as long as their guests do not all use their memory.',
    sizes:
      'nano:1:512Mi micro:1:1Gi small:1:2Gi medium:1:4Gi large:2:8Gi xlarge:4:16Gi 2xlarge:8:32Gi ' +
      '4xlarge:16:64Gi 8xlarge:32:128Gi',
    overcommitPercent: 50,
  },
  {
    name: 'cx',
    version: 1,
    class: 'compute.exclusive',
    displayName: 'Compute Exclusive',
    icon: 'pficon-registry',
    about:
      'Compute exclusive, 2 GiB per vCPU: each vCPU runs on a host CPU of its own and the emulator thread on\n' +
      'another one, the guest sees the NUMA layout of those CPUs, IO threads are placed automatically and\n' +
      'memory is backed by huge pages (2Mi; the sizes ending in 1gi: 1Gi pages). maxSockets is the vCPU count,\n' +
      'so no spare sockets are reserved for CPU hotplug (they could exceed the CPUs a node has).\n' +
      "Needs the kubelet's static CPU manager policy and huge pages on the nodes.",
    sizes: 'medium:1:2Gi large:2:4Gi xlarge:4:8Gi 2xlarge:8:16Gi 4xlarge:16:32Gi 8xlarge:32:64Gi',
    hugepages: ['2Mi', '1Gi'],
    cpu: { ...DEDICATED, ...NUMA },
    maxSocketsIsGuest: true,
    ioThreadsPolicy: 'auto',
  },
  {
    name: 'm',
    version: 1,
    class: 'memory.intensive',
    displayName: 'Memory Intensive',
    icon: 'fa-memory',
    about:
      'Memory intensive: 8 GiB per vCPU, backed by huge pages (2Mi; the sizes ending in 1gi: 1Gi pages).\n' +
      'Needs huge pages on the nodes.',
    sizes: 'large:2:16Gi xlarge:4:32Gi 2xlarge:8:64Gi 4xlarge:16:128Gi 8xlarge:32:256Gi',
    hugepages: ['2Mi', '1Gi'],
  },
  {
    name: 'd',
    version: 1,
    class: 'dedicated.vcpu',
    displayName: 'Dedicated vCPU',
    icon: 'pficon-server-group',
    about:
      'The u1 sizes on dedicated CPUs: each vCPU runs on a host CPU of its own and the emulator thread on\n' +
      "another one; IO threads are placed automatically. Needs the kubelet's static CPU manager policy.",
    sizes:
      'nano:1:512Mi micro:1:1Gi small:1:2Gi medium:1:4Gi 2xmedium:2:4Gi large:2:8Gi xlarge:4:16Gi ' +
      '2xlarge:8:32Gi 4xlarge:16:64Gi 8xlarge:32:128Gi',
    cpu: DEDICATED,
    ioThreadsPolicy: 'auto',
  },
  {
    name: 'n',
    version: 1,
    class: 'network',
    displayName: 'Network',
    icon: 'pficon-network',
    about:
      'Packet processing (DPDK and similar): dedicated CPUs and a separate emulator thread CPU, 1Gi huge pages,\n' +
      "and CRI-O annotations that keep load balancing, CPU quota and IRQs off the Pod's CPUs. Needs the kubelet's\n" +
      'static CPU manager policy, 1Gi huge pages and CRI-O with the high-performance runtime handler.',
    sizes: 'medium:4:4Gi large:4:8Gi xlarge:8:16Gi 2xlarge:16:32Gi 4xlarge:32:64Gi 8xlarge:64:128Gi',
    hugepages: ['1Gi'],
    cpu: DEDICATED,
    annotations: CRIO_LOW_LATENCY,
  },
  {
    name: 'rt',
    version: 1,
    class: 'realtime',
    displayName: 'Realtime',
    icon: 'pficon-server-group',
    about:
      'Realtime guests: dedicated CPUs and a separate emulator thread CPU, the NUMA layout of those CPUs,\n' +
      'realtime scheduling of the vCPUs, 1Gi huge pages and the CRI-O low-latency annotations of n1. Needs a\n' +
      "realtime-capable node, the kubelet's static CPU manager policy and 1Gi huge pages.",
    sizes:
      'micro:1:1Gi small:1:2Gi medium:1:4Gi large:2:8Gi xlarge:4:16Gi 2xlarge:8:32Gi 4xlarge:16:64Gi 8xlarge:32:128Gi',
    hugepages: ['1Gi'],
    cpu: { ...DEDICATED, ...NUMA, realtime: {} },
    annotations: CRIO_LOW_LATENCY,
  },
];

/** One size of a series as written in its table. */
export interface CommonSize {
  /** the object's name, e.g. u1.medium */
  name: string;
  vcpus: number;
  memory: string;
  /** the huge page size backing the memory, if any */
  hugepages?: string;
}

function sizesOf(s: Series): CommonSize[] {
  const out: CommonSize[] = [];
  const pages = s.hugepages ?? [undefined];
  pages.forEach((page, i) => {
    for (const entry of s.sizes.split(/\s+/)) {
      const [size, vcpus, memory] = entry.split(':') as [string, string, string];
      const suffix = i === 0 || !page ? '' : page.toLowerCase();
      out.push({
        name: `${s.name}${s.version}.${size}${suffix}`,
        vcpus: Number(vcpus),
        memory,
        ...(page ? { hugepages: page } : {}),
      });
    }
  });
  return out;
}

function instancetypeOf(s: Series, z: CommonSize): Instancetype {
  const spec: VirtualMachineInstancetypeSpec = {
    cpu: { guest: z.vcpus, ...structuredClone(s.cpu ?? {}) },
    memory: { guest: z.memory },
  };
  if (s.maxSocketsIsGuest) spec.cpu.maxSockets = z.vcpus;
  if (z.hugepages) spec.memory.hugepages = { pageSize: z.hugepages };
  if (s.overcommitPercent) spec.memory.overcommitPercent = s.overcommitPercent;
  if (s.ioThreadsPolicy) spec.ioThreadsPolicy = s.ioThreadsPolicy;
  if (s.annotations) spec.annotations = { ...s.annotations };
  // the labels tell what the spec holds, so that `kubectl get -l` finds instance types by their traits
  const labels: Record<string, string> = {
    ...COMMON_LABELS,
    [label('class')]: s.class,
    [label('version')]: String(s.version),
    [label('icon-pf')]: s.icon,
    [label('cpu')]: String(z.vcpus),
    [label('memory')]: z.memory,
    [label('size')]: z.name.slice(z.name.indexOf('.') + 1),
  };
  const c = spec.cpu;
  if (c.dedicatedCPUPlacement) labels[label('dedicatedCPUPlacement')] = 'true';
  if (c.isolateEmulatorThread) labels[label('isolateEmulatorThread')] = 'true';
  if (c.numa) labels[label('numa')] = 'true';
  if (c.realtime) labels[label('realtime')] = 'true';
  if (z.hugepages) labels[label('hugepages')] = z.hugepages;
  return {
    apiVersion: INSTANCETYPE_API_VERSION,
    kind: 'VirtualMachineClusterInstancetype',
    metadata: {
      name: z.name,
      labels: sorted(labels),
      annotations: { [label('description')]: s.about, [label('displayName')]: s.displayName },
    },
    spec: sorted(spec),
  };
}

/** Every size of every series, in table order: name, vCPUs, memory and huge pages. */
export function commonInstancetypeSizes(): CommonSize[] {
  return SERIES.flatMap(sizesOf);
}

/** The VirtualMachineClusterInstancetypes of the add-on, in table order (series, then size). */
export function commonClusterInstancetypes(): Instancetype[] {
  return SERIES.flatMap((s) => sizesOf(s).map((z) => instancetypeOf(s, z)));
}

// ---------------------------------------------------------------- preferences

type Spec = VirtualMachinePreferenceSpec;

/** A preference's entry: its name, OS type, what it prefers and requires, and how UIs show it. */
interface PreferenceDef {
  name: string;
  os: 'linux' | 'windows' | 'legacy';
  /** `openshift.io/display-name` */
  displayName: string;
  /** `iconClass` */
  icon: string;
  /** `tags` after `hidden,kubevirt` */
  tags: string;
  /** the building blocks merged in order (later ones win), then `spec` */
  use: Spec[];
  spec?: Spec;
  /** minimum vCPUs and guest memory */
  requires?: [vcpus: number, memory: string];
  /** the architecture the guest needs and is given */
  arch?: 'amd64' | 'arm64' | 's390x';
}

// building blocks
/** a virtio guest: virtio disks and NICs, an RNG device */
const VIRTIO: Spec = {
  devices: { preferredDiskBus: 'virtio', preferredInterfaceModel: 'virtio', preferredRng: {} },
};
/** a dedicated IO thread per virtio disk */
const IOTHREAD: Spec = { devices: { preferredDiskDedicatedIoThread: true } };
/** a desktop: a virtio tablet for the pointer */
const TABLET: Spec = {
  devices: {
    preferredAutoattachInputDevice: true,
    preferredInputBus: 'virtio',
    preferredInputType: 'tablet',
  },
};
/** UEFI without secure boot */
const EFI: Spec = { firmware: { preferredEfi: { secureBoot: false } } };
/** UEFI secure boot, which needs SMM */
const SECURE_BOOT: Spec = {
  firmware: { preferredEfi: { secureBoot: true } },
  features: { preferredSmm: {} },
};
/** UEFI secure boot with its variables kept, and a TPM whose state is kept */
const PERSISTENT_TPM_EFI: Spec = {
  firmware: { preferredEfi: { secureBoot: true, persistent: true } },
  features: { preferredSmm: {} },
  devices: { preferredTPM: { persistent: true } },
};
/** packet processing: vCPUs spread over sockets, cores and threads (4 per core pair), multi-queue NICs */
const DPDK: Spec = {
  cpu: { preferredCPUTopology: 'spread', spreadOptions: { across: 'SocketsCoresThreads', ratio: 4 } },
  devices: { preferredNetworkInterfaceMultiQueue: true },
};
/** a realtime guest: spread topology, no graphics or balloon, a serial console, multi-queue NICs */
const REALTIME: Spec = {
  cpu: { preferredCPUTopology: 'spread', spreadOptions: { across: 'SocketsCoresThreads' } },
  devices: {
    preferredAutoattachGraphicsDevice: false,
    preferredAutoattachMemBalloon: false,
    preferredAutoattachSerialConsole: true,
    preferredNetworkInterfaceMultiQueue: true,
  },
};
/** what every Windows guest gets: UTC clock and the timers Windows expects, Hyper-V enlightenments, ACPI and
 * APIC, one socket per vCPU, a USB tablet, an hour to shut down */
const WINDOWS: Spec = {
  clock: {
    preferredClockOffset: { utc: {} },
    preferredTimer: {
      hpet: { present: false },
      hyperv: {},
      pit: { tickPolicy: 'delay' },
      rtc: { tickPolicy: 'catchup' },
    },
  },
  cpu: { preferredCPUTopology: 'sockets' },
  devices: { preferredAutoattachInputDevice: true },
  features: {
    preferredAcpi: {},
    preferredApic: {},
    preferredHyperv: {
      frequencies: {},
      ipi: {},
      reenlightenment: {},
      relaxed: {},
      reset: {},
      runtime: {},
      spinlocks: { spinlocks: 8191 },
      synic: {},
      synictimer: { direct: {} },
      tlbflush: {},
      vapic: {},
      vpindex: {},
    },
  },
  preferredTerminationGracePeriodSeconds: 3600,
};
/** emulated devices a Windows install finds drivers for: SATA disks, an e1000e NIC */
const WINDOWS_EMULATED: Spec = { devices: { preferredDiskBus: 'sata', preferredInterfaceModel: 'e1000e' } };
/** virtio devices (the virtio-win drivers installed): disks, NIC, tablet, video. */
const WINDOWS_VIRTIO: Spec = {
  devices: {
    preferredDiskBus: 'virtio',
    preferredInterfaceModel: 'virtio',
    preferredInputBus: 'virtio',
    preferredInputType: 'tablet',
    preferredVideoType: 'virtio',
  },
};
/** guests that cannot use a 64-bit PCI hole */
const NO_PCI_HOLE64: Spec = { annotations: { 'kubevirt.io/disablePCIHole64': 'true' } };

const linux = (
  name: string,
  displayName: string,
  icon: string,
  tags: string,
  use: Spec[],
  requires?: [number, string],
  arch?: PreferenceDef['arch'],
): PreferenceDef => ({
  name,
  os: 'linux',
  displayName,
  icon,
  tags,
  use: [VIRTIO, ...use],
  requires,
  arch,
});

/** The RHEL-like guests of a release: plain, desktop, DPDK (with the DPDK requirements) per architecture. */
const RHEL_TAGS = 'linux,rhel';
const CENTOS_TAGS = 'linux,centos-stream';

/** A Windows release: the emulated-device preference and, unless `virtio` is false, its `.virtio` twin. */
function windows(
  release: string,
  displayName: string,
  requires: [number, string],
  firmware: Spec[],
  o: { emulated?: Spec; virtio?: boolean; extra?: Spec[] } = {},
): PreferenceDef[] {
  const base = { os: 'windows' as const, icon: 'icon-windows', tags: 'windows', requires };
  const out: PreferenceDef[] = [
    {
      ...base,
      name: `windows.${release}`,
      displayName,
      use: [WINDOWS, WINDOWS_EMULATED, ...(o.emulated ? [o.emulated] : []), ...firmware, ...(o.extra ?? [])],
    },
  ];
  if (o.virtio !== false)
    out.push({
      ...base,
      name: `windows.${release}.virtio`,
      displayName: `${displayName} (virtio)`,
      use: [WINDOWS, WINDOWS_VIRTIO, ...firmware, ...(o.extra ?? [])],
    });
  return out;
}

const ARCHES = [
  ['amd64', ''],
  ['arm64', '.arm64'],
  ['s390x', '.s390x'],
] as const;

/** The preferences of the add-on (upstream's names, settings and requirements). */
const PREFERENCES: PreferenceDef[] = [
  linux('alpine', 'Alpine', 'icon-alpine', 'alpine', [], [1, '512Mi']),
  ...(['9', '10'] as const).flatMap((v) => [
    linux(`centos.stream${v}`, `CentOS Stream ${v}`, 'icon-centos', CENTOS_TAGS, [IOTHREAD], [1, '1.5Gi']),
    linux(
      `centos.stream${v}.desktop`,
      `CentOS Stream ${v}`,
      'icon-centos',
      CENTOS_TAGS,
      [IOTHREAD, TABLET],
      [1, '1.5Gi'],
    ),
  ]),
  linux(
    'centos.stream9.dpdk',
    'CentOS Stream 9',
    'icon-centos',
    `${CENTOS_TAGS},dpdk`,
    [IOTHREAD, DPDK],
    [8, '1.5Gi'],
  ),
  linux('cirros', 'Cirros', 'icon-cirros', 'cirros', [], [1, '256Mi']),
  linux('debian', 'Debian', 'icon-debian', 'debian', [EFI], [1, '512Mi']),
  ...ARCHES.map(([arch, suffix]) =>
    linux(
      `fedora${suffix}`,
      `Fedora (${arch})`,
      'icon-fedora',
      'fedora',
      arch === 'amd64' ? [SECURE_BOOT] : [],
      [1, '2Gi'],
      arch,
    ),
  ),
  {
    name: 'legacy',
    os: 'legacy',
    displayName: 'Legacy Guest',
    icon: 'icon-other',
    tags: 'legacy',
    use: [{ devices: { preferredDiskBus: 'sata', preferredInterfaceModel: 'e1000' } }],
  },
  linux('linux', 'Linux Guest', 'icon-linux', 'linux', []),
  linux('linux.efi', 'Linux EFI Guest', 'icon-linux', 'linux-efi', [EFI]),
  linux(
    'linux.virtiotransitional',
    'Linux Virtio Transitional Guest',
    'icon-linux',
    'linux-virtio-transitional',
    [{ devices: { preferredUseVirtioTransitional: true } }],
  ),
  linux('opensuse.leap', 'OpenSUSE Leap', 'icon-opensuse-leap', 'opensuse.leap', [], [1, '2Gi']),
  linux(
    'opensuse.tumbleweed',
    'OpenSUSE Tumbleweed',
    'icon-opensuse-tumbleweed',
    'opensuse.tumbleweed',
    [],
    [1, '2Gi'],
  ),
  linux('oraclelinux', 'Oracle Linux', 'icon-oracle', 'oraclelinux', [EFI], [2, '4Gi']),
  ...ARCHES.map(([arch, suffix]) =>
    linux(
      `rhel.10${suffix}`,
      `Red Hat Enterprise Linux 10 (${arch})`,
      'icon-rhel',
      RHEL_TAGS,
      [IOTHREAD, ...(arch === 'amd64' ? [SECURE_BOOT] : [])],
      [1, '1.5Gi'],
      arch,
    ),
  ),
  linux('rhel.7', 'Red Hat Enterprise Linux 7', 'icon-rhel', RHEL_TAGS, [], [1, '1Gi']),
  linux('rhel.7.desktop', 'Red Hat Enterprise Linux 7', 'icon-rhel', RHEL_TAGS, [TABLET], [1, '1Gi']),
  linux('rhel.8', 'Red Hat Enterprise Linux 8', 'icon-rhel', RHEL_TAGS, [], [1, '1.5Gi']),
  linux('rhel.8.desktop', 'Red Hat Enterprise Linux 8', 'icon-rhel', RHEL_TAGS, [TABLET], [1, '1.5Gi']),
  linux('rhel.8.dpdk', 'Red Hat Enterprise Linux 8', 'icon-rhel', `${RHEL_TAGS},dpdk`, [DPDK], [8, '1.5Gi']),
  ...ARCHES.map(([arch, suffix]) =>
    linux(
      `rhel.9${suffix}`,
      `Red Hat Enterprise Linux 9 (${arch})`,
      'icon-rhel',
      RHEL_TAGS,
      [IOTHREAD, ...(arch === 'amd64' ? [SECURE_BOOT] : [])],
      [1, '1.5Gi'],
      arch,
    ),
  ),
  linux(
    'rhel.9.desktop',
    'Red Hat Enterprise Linux 9 Desktop (amd64)',
    'icon-rhel',
    RHEL_TAGS,
    [IOTHREAD, TABLET, SECURE_BOOT],
    [1, '1.5Gi'],
    'amd64',
  ),
  linux(
    'rhel.9.dpdk',
    'Red Hat Enterprise Linux 9 DPDK (amd64)',
    'icon-rhel',
    `${RHEL_TAGS},dpdk`,
    [IOTHREAD, DPDK, SECURE_BOOT],
    [8, '1.5Gi'],
    'amd64',
  ),
  linux(
    'rhel.9.realtime',
    'Red Hat Enterprise Linux 9 Realtime (amd64)',
    'icon-rhel',
    `${RHEL_TAGS},realtime`,
    [IOTHREAD, REALTIME, SECURE_BOOT],
    [4, '4Gi'],
    'amd64',
  ),
  linux('sles', 'SUSE Linux Enterprise Server', 'icon-sles', 'sles', [], [1, '2Gi']),
  linux('ubuntu', 'Ubuntu', 'icon-ubuntu', 'ubuntu', [], [1, '2Gi']),
  ...windows('10', 'Microsoft Windows 10', [1, '2Gi'], [SECURE_BOOT]),
  ...windows('11', 'Microsoft Windows 11', [2, '4Gi'], [PERSISTENT_TPM_EFI]),
  ...windows('2k12', 'Microsoft Windows Server 2012/2012 R2', [1, '512Mi'], []),
  ...windows('2k16', 'Microsoft Windows Server 2016', [1, '2Gi'], [SECURE_BOOT]),
  ...windows('2k19', 'Microsoft Windows Server 2019', [1, '2Gi'], [SECURE_BOOT]),
  ...windows('2k22', 'Microsoft Windows Server 2022', [1, '2Gi'], [PERSISTENT_TPM_EFI]),
  ...windows('2k25', 'Microsoft Windows Server 2025', [1, '2Gi'], [PERSISTENT_TPM_EFI]),
  ...windows('2k3', 'Microsoft Windows Server 2003', [1, '256Mi'], [], {
    emulated: { devices: { preferredInterfaceModel: 'rtl8139' } },
    virtio: false,
    extra: [NO_PCI_HOLE64],
  }),
  ...windows('2k8', 'Microsoft Windows Server 2008/2008 R2', [1, '512Mi'], [], {
    emulated: { devices: { preferredInterfaceModel: 'e1000' } },
  }),
  ...windows('7', 'Microsoft Windows 7', [1, '2Gi'], []),
  ...windows('xp', 'Microsoft Windows XP', [1, '128Mi'], [], { virtio: false, extra: [NO_PCI_HOLE64] }),
];

/** `a` with `b` merged in: objects merged key by key, anything else replaced */
function merge<T>(a: T, b: T): T {
  if (!isPlain(a) || !isPlain(b)) return structuredClone(b);
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) out[k] = k in out ? merge(out[k], v) : structuredClone(v);
  return out as T;
}
const isPlain = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** `o` with the keys of every object sorted, so that the files read the same whatever the merge order */
function sorted<T>(o: T): T {
  if (Array.isArray(o)) return o.map(sorted) as T;
  if (!isPlain(o)) return o;
  return Object.fromEntries(
    Object.keys(o)
      .sort()
      .map((k) => [k, sorted(o[k])]),
  ) as T;
}

function preferenceOf(d: PreferenceDef): Preference {
  let spec: Spec = { annotations: { 'vm.kubevirt.io/os': d.os } };
  for (const part of [...d.use, d.spec ?? {}]) spec = merge(spec, part);
  const labels: Record<string, string> = { ...COMMON_LABELS, [label('os-type')]: d.os };
  if (d.requires) {
    const [vcpus, memory] = d.requires;
    spec.requirements = { cpu: { guest: vcpus }, memory: { guest: memory } };
    labels[label('required-cpu')] = String(vcpus);
    labels[label('required-memory')] = memory;
  }
  if (d.arch) {
    spec.preferredArchitecture = d.arch;
    spec.requirements = { ...spec.requirements, architecture: d.arch };
    labels[label('arch')] = d.arch;
    labels[label('preferred-architecture')] = d.arch;
    labels[label('required-architecture')] = d.arch;
  }
  return {
    apiVersion: INSTANCETYPE_API_VERSION,
    kind: 'VirtualMachineClusterPreference',
    metadata: {
      name: d.name,
      labels: sorted(labels),
      annotations: {
        iconClass: d.icon,
        'openshift.io/display-name': d.displayName,
        'openshift.io/documentation-url': 'https://github.com/kubevirt/common-instancetypes',
        'openshift.io/provider-display-name': 'KubeVirt',
        'openshift.io/support-url': 'https://github.com/kubevirt/common-instancetypes/issues',
        tags: `hidden,kubevirt,${d.tags}`,
      },
    },
    spec: sorted(spec),
  };
}

/** The VirtualMachineClusterPreferences of the add-on, sorted by name. */
export function commonClusterPreferences(): Preference[] {
  return PREFERENCES.map(preferenceOf).sort((a, b) => (a.metadata.name! < b.metadata.name! ? -1 : 1));
}

// ---------------------------------------------------------------- files

const HEADER =
  `# Generated by tools/gen-common-instancetypes.mjs from packages/api/src/common-instancetypes.ts: do not edit.\n` +
  `# Names, sizes and settings: kubevirt/common-instancetypes ${COMMON_INSTANCETYPES_VERSION} (Apache-2.0).\n`;

const toYaml = (o: unknown) => new YAML.Document(o).toString({ lineWidth: 0 });

/**
 * The files of the add-on's folder ({@link COMMON_INSTANCETYPES_DIR}): name -> content. `kubectl apply -f` on the
 * folder, after deploy/ (which installs the CRDs), creates them.
 */
export function commonInstancetypesFiles(): Record<string, string> {
  const its = commonClusterInstancetypes();
  const prefs = commonClusterPreferences();
  return {
    'instancetypes.yaml':
      `${HEADER}# ${its.length} VirtualMachineClusterInstancetypes: the ${SERIES.map((s) => `${s.name}${s.version}`).join(', ')} series.\n` +
      its.map(toYaml).join('---\n'),
    'preferences.yaml':
      `${HEADER}# ${prefs.length} VirtualMachineClusterPreferences: one per guest OS (and variant).\n` +
      prefs.map(toYaml).join('---\n'),
  };
}
