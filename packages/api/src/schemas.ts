// kubevirt.io/v1 schemas (upstream KubeVirt v1.1 field names and meanings).
// One TypeBox schema per type: the TS types (Static<>), runtime validation and the CRD
// OpenAPI v3 schemas (crd.ts) all derive from these.
import { Type, type Static } from '@sinclair/typebox';
import {
  Arr,
  Bool,
  Enum,
  Int,
  Line,
  List,
  Loose,
  Opaque,
  Opt,
  Quantity,
  QuantityMap,
  Str,
  Strict,
  StringMap,
  UInt,
} from './schema-helpers.js';

/** The API group of every kind here: `kubevirt.io`. */
export const API_GROUP = 'kubevirt.io';
/** The `apiVersion` of every kind here: `kubevirt.io/v1`. */
export const API_VERSION = 'kubevirt.io/v1';

// ---------------------------------------------------------------- metadata

/** metav1.ObjectMeta, the fields this project reads; other fields are kept as given. */
export const ObjectMetaSchema = Type.Object(
  {
    name: Opt(Str()),
    generateName: Opt(Str()),
    namespace: Opt(Str()),
    uid: Opt(Str()),
    resourceVersion: Opt(Str()),
    generation: Opt(Int()),
    creationTimestamp: Opt(Type.Union([Str(), Type.Null()])),
    deletionTimestamp: Opt(Type.Union([Str(), Type.Null()])),
    deletionGracePeriodSeconds: Opt(Int()),
    labels: Opt(StringMap()),
    annotations: Opt(StringMap()),
    finalizers: Opt(Arr(Str())),
    ownerReferences: Opt(
      Arr(
        Type.Object({
          apiVersion: Str(),
          kind: Str(),
          name: Str(),
          uid: Str(),
          controller: Opt(Bool()),
          blockOwnerDeletion: Opt(Bool()),
        }),
      ),
    ),
  },
  { 'x-kvts-objectmeta': true },
);
/** metav1.ObjectMeta: the fields this project reads; see {@link ObjectMetaSchema}. */
export type ObjectMeta = Static<typeof ObjectMetaSchema>;

/** TypeBox schema of a status condition (metav1 style: `type`, `status` True/False/Unknown, reason,
 * message, timestamps); fields not modelled here are kept. */
export const ConditionSchema = Loose({
  type: Str(),
  status: Str('True, False or Unknown'),
  lastProbeTime: Opt(Type.Union([Str(), Type.Null()])),
  lastTransitionTime: Opt(Type.Union([Str(), Type.Null()])),
  reason: Opt(Str()),
  message: Opt(Str()),
});
/** A status condition of a VMI, VM or migration (e.g. `Ready`, `Paused`, `LiveMigratable`). */
export type Condition = Static<typeof ConditionSchema>;

// ---------------------------------------------------------------- compute

/** TypeBox schema of a CPU feature of `spec.domain.cpu.features` (upstream `v1.CPUFeature`): a
 * feature name and its policy (default `require`, as libvirt's `<feature policy>`). */
export const CPUFeatureSchema = Strict({
  name: Line('CPU feature name, e.g. pcid'),
  policy: Opt(Enum(['force', 'require', 'optional', 'disable', 'forbid'], 'default require')),
});

/** TypeBox schema of `spec.domain.cpu` (upstream `v1.CPU`); unknown fields are rejected. */
export const CPUSchema = Strict(
  {
    cores: Opt(UInt('cores per socket')),
    sockets: Opt(UInt()),
    maxSockets: Opt(UInt('upper bound for CPU hotplug')),
    threads: Opt(UInt('threads per core')),
    model: Opt(Line('CPU model (e.g. host-model, host-passthrough, Haswell-noTSX)')),
    features: Opt(Arr(CPUFeatureSchema)),
    dedicatedCpuPlacement: Opt(Bool('pin each vCPU to a dedicated host CPU')),
    isolateEmulatorThread: Opt(Bool()),
    numa: Opt(Strict({ guestMappingPassthrough: Opt(Strict({})) })),
    realtime: Opt(Strict({ mask: Opt(Line()) })),
  },
  'CPU topology and model of the guest',
);
/** `spec.domain.cpu`: guest CPU topology (sockets × cores × threads), model, features and placement. */
export type CPU = Static<typeof CPUSchema>;

/** TypeBox schema of `spec.domain.memory.hugepages` (upstream `v1.Hugepages`): back guest memory
 * with hugepages of `pageSize` (e.g. `2Mi`). */
export const HugepagesSchema = Strict({ pageSize: Opt(Line('page size, e.g. 2Mi or 1Gi')) });

/** TypeBox schema of `spec.domain.memory` (upstream `v1.Memory`); unknown fields are rejected. */
export const MemorySchema = Strict({
  guest: Opt(Quantity('memory visible to the guest')),
  maxGuest: Opt(Quantity('upper bound for memory hotplug')),
  hugepages: Opt(HugepagesSchema),
});
/** `spec.domain.memory`: guest memory size (a quantity, e.g. `1Gi`), its hotplug bound and hugepages. */
export type Memory = Static<typeof MemorySchema>;

/** TypeBox schema of `spec.domain.resources` (upstream `v1.ResourceRequirements`); unknown fields are rejected. */
export const ResourceRequirementsSchema = Strict({
  requests: Opt(QuantityMap('requested resources (cpu, memory, ...)')),
  limits: Opt(QuantityMap()),
  overcommitGuestOverhead: Opt(Bool("don't ask the scheduler for the guest overhead")),
});
/** `spec.domain.resources`: requests and limits of the launcher Pod's compute container (quantities by
 * resource name); the memory request is the guest memory when `spec.domain.memory.guest` is unset. */
export type ResourceRequirements = Static<typeof ResourceRequirementsSchema>;

/** TypeBox schema of `spec.domain.machine` (upstream `v1.Machine`); unknown fields are rejected. `type` is the QEMU machine type (default `q35`). */
export const MachineSchema = Strict({ type: Opt(Line('QEMU machine type, e.g. q35 or pc-q35-7.2')) });

/** TypeBox schema of `spec.domain.firmware.bootloader.efi` (upstream `v1.EFI`): EFI boot, Secure Boot
 * (default on) and a persistent NVRAM. */
export const EFISchema = Strict({
  secureBoot: Opt(Bool('default true')),
  persistent: Opt(Bool('keep the NVRAM across restarts')),
});

/** TypeBox schema of `spec.domain.firmware.bootloader` (upstream `v1.Bootloader`): BIOS (SeaBIOS, the
 * default) or EFI (OVMF). */
export const BootloaderSchema = Strict({
  bios: Opt(Strict({ useSerial: Opt(Bool()) })),
  efi: Opt(EFISchema),
});

/** TypeBox schema of `spec.domain.firmware.kernelBoot.container` (upstream `v1.KernelBootContainer`):
 * a container image holding the kernel and initrd at `kernelPath` / `initrdPath`. */
export const KernelBootContainerSchema = Strict({
  image: Line(),
  imagePullSecret: Opt(Line()),
  kernelPath: Opt(Line()),
  initrdPath: Opt(Line()),
  imagePullPolicy: Opt(Enum(['Always', 'Never', 'IfNotPresent'])),
});

/** TypeBox schema of `spec.domain.firmware.kernelBoot` (upstream `v1.KernelBoot`): direct kernel boot
 * with `kernelArgs` as the kernel command line. */
export const KernelBootSchema = Strict({
  kernelArgs: Opt(Line('the kernel command line')),
  container: Opt(KernelBootContainerSchema),
});

/** TypeBox schema of `spec.domain.firmware` (upstream `v1.Firmware`); unknown fields are rejected. */
export const FirmwareSchema = Strict({
  uuid: Opt(Str('SMBIOS system UUID')),
  serial: Opt(Str('SMBIOS system serial number')),
  bootloader: Opt(BootloaderSchema),
  kernelBoot: Opt(KernelBootSchema),
});
/** `spec.domain.firmware`: SMBIOS uuid and serial, bootloader (BIOS or EFI) and direct kernel boot. */
export type Firmware = Static<typeof FirmwareSchema>;

const TickPolicy = Enum(['delay', 'catchup', 'merge', 'discard']);
/** TypeBox schema of `spec.domain.clock` (upstream `v1.Clock`); unknown fields are rejected. */
export const ClockSchema = Strict({
  utc: Opt(Strict({ offsetSeconds: Opt(Int()) })),
  timezone: Opt(Line('IANA time zone, e.g. Europe/Berlin')),
  timer: Opt(
    Strict({
      hpet: Opt(Strict({ tickPolicy: Opt(TickPolicy), present: Opt(Bool()) })),
      kvm: Opt(Strict({ present: Opt(Bool()) })),
      pit: Opt(Strict({ tickPolicy: Opt(TickPolicy), present: Opt(Bool()) })),
      rtc: Opt(
        Strict({ tickPolicy: Opt(TickPolicy), present: Opt(Bool()), track: Opt(Enum(['guest', 'wall'])) }),
      ),
      hyperv: Opt(Strict({ present: Opt(Bool()) })),
    }),
  ),
});
/** `spec.domain.clock`: the guest clock's offset (UTC with `offsetSeconds`, or a time zone) and timers. */
export type Clock = Static<typeof ClockSchema>;

const FeatureState = () => Strict({ enabled: Opt(Bool('default true')) });
/** TypeBox schema of `spec.domain.features.hyperv` (upstream `v1.FeatureHyperv`): the Hyper-V
 * enlightenments for Windows guests, each enabled by default when present. */
export const HypervSchema = Strict({
  relaxed: Opt(FeatureState()),
  vapic: Opt(FeatureState()),
  spinlocks: Opt(Strict({ enabled: Opt(Bool()), spinlocks: Opt(UInt('retries, at least 4096')) })),
  vpindex: Opt(FeatureState()),
  runtime: Opt(FeatureState()),
  synic: Opt(FeatureState()),
  synictimer: Opt(Strict({ enabled: Opt(Bool()), direct: Opt(FeatureState()) })),
  reset: Opt(FeatureState()),
  vendorid: Opt(Strict({ enabled: Opt(Bool()), vendorid: Opt(Line()) })),
  frequencies: Opt(FeatureState()),
  reenlightenment: Opt(FeatureState()),
  tlbflush: Opt(FeatureState()),
  ipi: Opt(FeatureState()),
  evmcs: Opt(FeatureState()),
});

/** TypeBox schema of `spec.domain.features` (upstream `v1.Features`); unknown fields are rejected. */
export const FeaturesSchema = Strict({
  acpi: Opt(FeatureState()),
  apic: Opt(Strict({ enabled: Opt(Bool()), endOfInterrupt: Opt(Bool()) })),
  hyperv: Opt(HypervSchema),
  smm: Opt(FeatureState()),
  kvm: Opt(Strict({ hidden: Opt(Bool()) })),
  pvspinlock: Opt(FeatureState()),
});
/** `spec.domain.features`: ACPI, APIC, Hyper-V enlightenments, SMM, KVM hiding and pvspinlock. */
export type Features = Static<typeof FeaturesSchema>;

// ---------------------------------------------------------------- devices

/** The disk buses `spec.domain.devices.disks[].{disk,cdrom,lun}.bus` accepts. */
export const DISK_BUSES = ['virtio', 'sata', 'scsi', 'usb'] as const;
/** TypeBox schema of a disk's `disk` target (upstream `v1.DiskTarget`): bus (default virtio),
 * read-only, and the guest PCI address. */
export const DiskTargetSchema = Strict({
  bus: Opt(Str('virtio, sata, scsi or usb (default virtio)')),
  readonly: Opt(Bool()),
  pciAddress: Opt(Str('guest PCI address, e.g. 0000:81:01.1')),
});
/** TypeBox schema of a disk's `cdrom` target (upstream `v1.CDRomTarget`): bus (default sata),
 * read-only (default true) and tray state. */
export const CDRomTargetSchema = Strict({
  bus: Opt(Str('sata or scsi (default sata)')),
  readonly: Opt(Bool('default true')),
  tray: Opt(Enum(['open', 'closed'])),
});
/** TypeBox schema of a disk's `lun` target (upstream `v1.LunTarget`): a SCSI LUN (bus default scsi),
 * optionally with SCSI persistent reservation. */
export const LunTargetSchema = Strict({
  bus: Opt(Str('default scsi')),
  readonly: Opt(Bool()),
  reservation: Opt(Bool()),
});

/** TypeBox schema of a disk of `spec.domain.devices.disks` (upstream `v1.Disk`); unknown fields are rejected. */
export const DiskSchema = Strict({
  name: Str('must match a volume name'),
  disk: Opt(DiskTargetSchema),
  cdrom: Opt(CDRomTargetSchema),
  lun: Opt(LunTargetSchema),
  bootOrder: Opt(Int('boot order, 1 first; unique across disks and interfaces')),
  serial: Opt(Str('serial number, characters [A-Za-z0-9_.+-]')),
  dedicatedIOThread: Opt(Bool()),
  cache: Opt(Enum(['none', 'writethrough', 'writeback'])),
  io: Opt(Enum(['native', 'threads', 'default'])),
  tag: Opt(Line()),
  shareable: Opt(Bool()),
  errorPolicy: Opt(Enum(['stop', 'ignore', 'report', 'enospace'])),
  blockSize: Opt(
    Strict({
      custom: Opt(Strict({ logical: UInt(), physical: UInt() })),
      matchVolume: Opt(FeatureState()),
    }),
  ),
});
/** A disk of `spec.domain.devices.disks`: how the guest sees the volume of the same name (disk,
 * cdrom or lun; bus, boot order, cache and IO modes, ...). */
export type Disk = Static<typeof DiskSchema>;

/** TypeBox schema of a port of an interface (upstream `v1.Port`): a port the masquerade (or slirp)
 * binding forwards to the guest; protocol TCP or UDP. */
export const PortSchema = Strict({
  name: Opt(Str()),
  protocol: Opt(Enum(['TCP', 'UDP'])),
  port: Int(),
});

/** The binding methods an interface can name (exactly one per interface; `binding` is a network
 * binding plugin). */
export const INTERFACE_BINDINGS = [
  'bridge',
  'masquerade',
  'sriov',
  'slirp',
  'macvtap',
  'passt',
  'binding',
] as const;
/** The NIC models `spec.domain.devices.interfaces[].model` accepts (default virtio). */
export const INTERFACE_MODELS = ['e1000', 'e1000e', 'igb', 'ne2k_pci', 'pcnet', 'rtl8139', 'virtio'] as const;

/** TypeBox schema of an interface of `spec.domain.devices.interfaces` (upstream `v1.Interface`); unknown fields are rejected. */
export const InterfaceSchema = Strict({
  name: Str('must match a network name'),
  model: Opt(Str('virtio (default), e1000, e1000e, igb, ne2k_pci, pcnet, rtl8139')),
  bridge: Opt(Strict({})),
  masquerade: Opt(Strict({})),
  sriov: Opt(Strict({})),
  slirp: Opt(Strict({})),
  macvtap: Opt(Strict({})),
  passt: Opt(Strict({})),
  binding: Opt(Strict({ name: Line() })),
  ports: Opt(Arr(PortSchema)),
  macAddress: Opt(Str()),
  bootOrder: Opt(Int()),
  pciAddress: Opt(Str()),
  dhcpOptions: Opt(Opaque()),
  tag: Opt(Line()),
  acpiIndex: Opt(Int()),
  state: Opt(Enum(['absent'])),
});
/** An interface of `spec.domain.devices.interfaces`: a NIC of the guest on the network of the same
 * name, with its binding method (masquerade, bridge, ...), model, MAC address and ports. */
export type Interface = Static<typeof InterfaceSchema>;

/** TypeBox schema of an input device of `spec.domain.devices.inputs` (upstream `v1.Input`); unknown fields are rejected. */
export const InputSchema = Strict({
  name: Line(),
  type: Str('tablet'),
  bus: Opt(Str('usb or virtio')),
});
/** An input device of `spec.domain.devices.inputs` (a tablet, on the USB or virtio bus). */
export type Input = Static<typeof InputSchema>;

/** TypeBox schema of `spec.domain.devices.watchdog` (upstream `v1.Watchdog`): an i6300esb watchdog
 * and its action when it fires (default reset). */
export const WatchdogSchema = Strict({
  name: Line(),
  i6300esb: Opt(Strict({ action: Opt(Enum(['poweroff', 'reset', 'shutdown'], 'default reset')) })),
});

/** TypeBox schema of `spec.domain.devices.sound` (upstream `v1.SoundDevice`): an ich9 or ac97 sound card. */
export const SoundSchema = Strict({ name: Line(), model: Opt(Enum(['ich9', 'ac97'])) });

/** Video device models (`spec.domain.devices.video.type`): libvirt's models QEMU provides on the architectures
 * kubevirt-ts runs (upstream names virtio, vga, bochs and ramfb; it passes the value to libvirt unchecked). */
export const VIDEO_TYPES = ['vga', 'cirrus', 'virtio', 'bochs', 'ramfb'] as const;

/** TypeBox schema of `spec.domain.devices` (upstream `v1.Devices`); unknown fields are rejected. */
export const DevicesSchema = Strict({
  disks: Opt(List(DiskSchema)),
  interfaces: Opt(List(InterfaceSchema)),
  inputs: Opt(Arr(InputSchema)),
  watchdog: Opt(WatchdogSchema),
  rng: Opt(Strict({})),
  sound: Opt(SoundSchema),
  tpm: Opt(Strict({ persistent: Opt(Bool()) })),
  video: Opt(
    Strict(
      { type: Opt(Enum([...VIDEO_TYPES], 'the display adapter QEMU emulates')) },
      'the video device of the VNC display (default vga on amd64); not with autoattachGraphicsDevice false',
    ),
  ),
  filesystems: Opt(Arr(Strict({ name: Line(), virtiofs: Strict({}) }))),
  gpus: Opt(Arr(Loose({ name: Line(), deviceName: Line() }))),
  hostDevices: Opt(Arr(Loose({ name: Line(), deviceName: Line() }))),
  clientPassthrough: Opt(Strict({})),
  downwardMetrics: Opt(Strict({}, 'virtio-serial port exposing host metrics to the guest')),
  logSerialConsole: Opt(Bool('log the serial console to a file the launcher exposes (default on)')),
  autoattachPodInterface: Opt(Bool('default true')),
  autoattachGraphicsDevice: Opt(Bool('default true')),
  autoattachSerialConsole: Opt(Bool('default true')),
  autoattachMemBalloon: Opt(Bool('default true')),
  autoattachInputDevice: Opt(Bool('default false')),
  autoattachVSOCK: Opt(Bool('default false')),
  networkInterfaceMultiqueue: Opt(Bool()),
  blockMultiQueue: Opt(Bool()),
  useVirtioTransitional: Opt(Bool()),
  disableHotplug: Opt(Bool()),
});
/** `spec.domain.devices`: disks, interfaces, inputs and other devices, and the `autoattach*` switches
 * for the devices added by default (pod interface, VNC, serial console, balloon, ...). */
export type Devices = Static<typeof DevicesSchema>;

/** TypeBox schema of `spec.domain` (upstream `v1.DomainSpec`); unknown fields are rejected. */
export const DomainSpecSchema = Strict({
  resources: Opt(ResourceRequirementsSchema),
  cpu: Opt(CPUSchema),
  memory: Opt(MemorySchema),
  machine: Opt(MachineSchema),
  firmware: Opt(FirmwareSchema),
  clock: Opt(ClockSchema),
  features: Opt(FeaturesSchema),
  devices: Opt(DevicesSchema),
  ioThreadsPolicy: Opt(Enum(['shared', 'auto'])),
  chassis: Opt(
    Strict({
      manufacturer: Opt(Line()),
      version: Opt(Line()),
      serial: Opt(Line()),
      asset: Opt(Line()),
      sku: Opt(Line()),
    }),
  ),
  launchSecurity: Opt(Opaque()),
});
/** `spec.domain`: the virtual hardware of the guest (CPU, memory, firmware, clock, features, devices). */
export type DomainSpec = Static<typeof DomainSpecSchema>;

// ---------------------------------------------------------------- volumes and networks

const SecretRef = (description?: string) => Strict({ name: Line() }, description);
const CloudInitSource = (what: string) =>
  Strict(
    {
      userData: Opt(Str()),
      userDataBase64: Opt(Str()),
      secretRef: Opt(SecretRef('Secret holding the user data (key userdata or userData)')),
      networkData: Opt(Str()),
      networkDataBase64: Opt(Str()),
      networkDataSecretRef: Opt(SecretRef()),
    },
    `cloud-init ${what} data source, attached as a disk`,
  );

/** The volume sources a volume of `spec.volumes` can name (exactly one per volume). */
export const VOLUME_SOURCES = [
  'containerDisk',
  'ephemeral',
  'persistentVolumeClaim',
  'dataVolume',
  'emptyDisk',
  'hostDisk',
  'cloudInitNoCloud',
  'cloudInitConfigDrive',
  'configMap',
  'secret',
  'serviceAccount',
  'downwardAPI',
  'downwardMetrics',
  'sysprep',
  'memoryDump',
] as const;

/** TypeBox schema of a volume of `spec.volumes` (upstream `v1.Volume`); unknown fields are rejected. */
export const VolumeSchema = Strict({
  name: Str(),
  containerDisk: Opt(
    Strict({
      image: Line(),
      imagePullSecret: Opt(Line()),
      path: Opt(Line()),
      imagePullPolicy: Opt(Enum(['Always', 'Never', 'IfNotPresent'])),
    }),
  ),
  ephemeral: Opt(
    Strict({ persistentVolumeClaim: Opt(Strict({ claimName: Line(), readOnly: Opt(Bool()) })) }),
  ),
  persistentVolumeClaim: Opt(Strict({ claimName: Line(), readOnly: Opt(Bool()), hotpluggable: Opt(Bool()) })),
  dataVolume: Opt(Strict({ name: Line(), hotpluggable: Opt(Bool()) })),
  emptyDisk: Opt(Strict({ capacity: Quantity() })),
  hostDisk: Opt(
    Strict({
      path: Line(),
      type: Enum(['Disk', 'DiskOrCreate']),
      capacity: Opt(Quantity()),
      shared: Opt(Bool()),
    }),
  ),
  cloudInitNoCloud: Opt(CloudInitSource('NoCloud')),
  cloudInitConfigDrive: Opt(CloudInitSource('ConfigDrive')),
  configMap: Opt(Strict({ name: Opt(Line()), optional: Opt(Bool()), volumeLabel: Opt(Line()) })),
  secret: Opt(Strict({ secretName: Opt(Line()), optional: Opt(Bool()), volumeLabel: Opt(Line()) })),
  serviceAccount: Opt(Strict({ serviceAccountName: Opt(Line()) })),
  downwardAPI: Opt(Strict({ fields: Opt(Arr(Opaque())), volumeLabel: Opt(Line()) })),
  downwardMetrics: Opt(Strict({})),
  sysprep: Opt(Strict({ configMap: Opt(SecretRef()), secret: Opt(SecretRef()) })),
  memoryDump: Opt(Strict({ claimName: Line(), hotpluggable: Opt(Bool()) })),
});
/** A volume of `spec.volumes`: where the data of the disk of the same name comes from (a container
 * disk, a PVC, an empty disk, cloud-init data, a ConfigMap, ...). */
export type Volume = Static<typeof VolumeSchema>;

/** TypeBox schema of a network of `spec.networks` (upstream `v1.Network`); unknown fields are rejected. */
export const NetworkSchema = Strict({
  name: Str(),
  pod: Opt(Strict({ vmNetworkCIDR: Opt(Line()), vmIPv6NetworkCIDR: Opt(Line()) })),
  multus: Opt(Strict({ networkName: Line(), default: Opt(Bool()) })),
});
/** A network of `spec.networks`: the Pod network (`pod`) or a Multus network the interface of the same
 * name attaches to. */
export type Network = Static<typeof NetworkSchema>;

/** TypeBox schema of a toleration of `spec.tolerations` (core/v1 Toleration), copied to the launcher Pod. */
export const TolerationSchema = Strict({
  key: Opt(Str()),
  operator: Opt(Enum(['Exists', 'Equal'])),
  value: Opt(Str()),
  effect: Opt(Enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute'])),
  tolerationSeconds: Opt(Int()),
});

/** TypeBox schema of `spec.affinity` (core/v1 Affinity, kept as given), copied to the launcher Pod. */
export const AffinitySchema = Strict({
  nodeAffinity: Opt(Opaque('core/v1 NodeAffinity')),
  podAffinity: Opt(Opaque('core/v1 PodAffinity')),
  podAntiAffinity: Opt(Opaque('core/v1 PodAntiAffinity')),
});

/** TypeBox schema of `spec.livenessProbe` / `spec.readinessProbe` (upstream `v1.Probe`); unknown fields are rejected. */
export const ProbeSchema = Strict({
  initialDelaySeconds: Opt(Int()),
  timeoutSeconds: Opt(Int()),
  periodSeconds: Opt(Int()),
  successThreshold: Opt(Int()),
  failureThreshold: Opt(Int()),
  exec: Opt(Strict({ command: Opt(Arr(Str())) }, 'run a command in the guest (through the guest agent)')),
  httpGet: Opt(Opaque('core/v1 HTTPGetAction')),
  tcpSocket: Opt(Opaque('core/v1 TCPSocketAction')),
  guestAgentPing: Opt(Strict({})),
});
/** A liveness or readiness probe of a VMI: an HTTP, TCP, guest-agent ping or guest command check
 * with Kubernetes' probe timings (seconds). */
export type Probe = Static<typeof ProbeSchema>;

// ---------------------------------------------------------------- VirtualMachineInstance

/** TypeBox schema of the VMI `spec` (upstream `v1.VirtualMachineInstanceSpec`); unknown fields are rejected. */
export const VirtualMachineInstanceSpecSchema = Strict({
  domain: DomainSpecSchema,
  volumes: Opt(List(VolumeSchema)),
  networks: Opt(List(NetworkSchema)),
  nodeSelector: Opt(StringMap()),
  affinity: Opt(AffinitySchema),
  tolerations: Opt(Arr(TolerationSchema)),
  topologySpreadConstraints: Opt(Arr(Opaque())),
  schedulerName: Opt(Line()),
  priorityClassName: Opt(Line()),
  terminationGracePeriodSeconds: Opt(UInt('seconds between ACPI shutdown and destroy, default 30')),
  evictionStrategy: Opt(Enum(['None', 'LiveMigrate', 'LiveMigrateIfPossible', 'External'])),
  startStrategy: Opt(Enum(['Paused'])),
  hostname: Opt(Str()),
  subdomain: Opt(Str()),
  livenessProbe: Opt(ProbeSchema),
  readinessProbe: Opt(ProbeSchema),
  dnsPolicy: Opt(Enum(['ClusterFirstWithHostNet', 'ClusterFirst', 'Default', 'None', ''])),
  dnsConfig: Opt(Opaque()),
  accessCredentials: Opt(List(Opaque())),
  architecture: Opt(Str()),
});
/** The `spec` of a VirtualMachineInstance: domain, volumes, networks and the launcher Pod's scheduling
 * (node selector, affinity, tolerations), probes and termination grace period. */
export type VirtualMachineInstanceSpec = Static<typeof VirtualMachineInstanceSpecSchema>;

/** The phases of a VirtualMachineInstance (upstream `v1.VirtualMachineInstancePhase`). */
export const VMI_PHASES = [
  'Pending',
  'Scheduling',
  'Scheduled',
  'Running',
  'Succeeded',
  'Failed',
  'Unknown',
] as const;
/** A VMI phase: Pending, Scheduling, Scheduled, Running, Succeeded, Failed or Unknown. */
export type VirtualMachineInstancePhase = (typeof VMI_PHASES)[number];

/** TypeBox schema of `status.migrationState` (upstream `v1.VirtualMachineInstanceMigrationState`); fields not modelled here are kept. */
export const MigrationStateSchema = Loose({
  migrationUid: Opt(Str()),
  sourceNode: Opt(Str()),
  targetNode: Opt(Str()),
  targetNodeAddress: Opt(Str()),
  targetPod: Opt(Str()),
  sourcePod: Opt(Str()),
  /** target node's migration proxy ports: TCP port -> the launcher's (0: libvirt, 49152: QEMU stream) */
  targetDirectMigrationNodePorts: Opt(Type.Record(Str(), Int())),
  targetNodeDomainDetected: Opt(Bool()),
  targetNodeDomainReadyTimestamp: Opt(Type.Union([Str(), Type.Null()])),
  startTimestamp: Opt(Type.Union([Str(), Type.Null()])),
  endTimestamp: Opt(Type.Union([Str(), Type.Null()])),
  completed: Opt(Bool()),
  failed: Opt(Bool()),
  abortRequested: Opt(Bool()),
  abortStatus: Opt(Str()),
  mode: Opt(Str()),
});
/** `status.migrationState` of a VMI (and of a migration): source and target node and Pod, timestamps,
 * and whether the migration completed, failed or was aborted. */
export type MigrationState = Static<typeof MigrationStateSchema>;

/** TypeBox schema of an entry of `status.interfaces` (upstream `v1.VirtualMachineInstanceNetworkInterface`); fields not modelled here are kept.
 * Name, IPs and MAC of a guest NIC. */
export const VMIInterfaceStatusSchema = Loose({
  name: Opt(Str()),
  ipAddress: Opt(Str()),
  ipAddresses: Opt(Arr(Str())),
  mac: Opt(Str()),
  interfaceName: Opt(Str()),
  infoSource: Opt(Str()),
  queueCount: Opt(Int()),
});

/** TypeBox schema of `status.guestOSInfo` (upstream `v1.VirtualMachineInstanceGuestOSInfo`); fields not modelled here are kept.
 * What the guest agent reports about the guest OS. */
export const GuestOSInfoSchema = Loose({
  name: Opt(Str()),
  kernelRelease: Opt(Str()),
  version: Opt(Str()),
  prettyName: Opt(Str()),
  versionId: Opt(Str()),
  kernelVersion: Opt(Str()),
  machine: Opt(Str()),
  id: Opt(Str()),
});

/** TypeBox schema of `status.volumeStatus[].persistentVolumeClaimInfo` (upstream `v1.PersistentVolumeClaimInfo`); fields not modelled here are kept. */
export const PersistentVolumeClaimInfoSchema = Loose({
  claimName: Opt(Str()),
  accessModes: Opt(Arr(Str())),
  volumeMode: Opt(Str()),
  capacity: Opt(QuantityMap()),
  requests: Opt(QuantityMap()),
  filesystemOverhead: Opt(Str()),
});
/** What a VMI's status says about the claim behind a PVC or DataVolume volume: its name, access modes (ReadWriteMany:
 * shared between nodes, so live migration need not copy it), volume mode, capacity, requests and filesystem overhead. */
export type PersistentVolumeClaimInfo = Static<typeof PersistentVolumeClaimInfoSchema>;

/** TypeBox schema of the VMI `status` (upstream `v1.VirtualMachineInstanceStatus`); fields not modelled here are kept. */
export const VirtualMachineInstanceStatusSchema = Loose({
  phase: Opt(Enum([...VMI_PHASES, ''])),
  reason: Opt(Str()),
  conditions: Opt(Arr(ConditionSchema)),
  nodeName: Opt(Str()),
  interfaces: Opt(Arr(VMIInterfaceStatusSchema)),
  guestOSInfo: Opt(GuestOSInfoSchema),
  migrationState: Opt(MigrationStateSchema),
  migrationMethod: Opt(Str()),
  migrationTransport: Opt(Str()),
  qosClass: Opt(Str()),
  launcherContainerImageVersion: Opt(Str()),
  evacuationNodeName: Opt(Str()),
  activePods: Opt(StringMap()),
  phaseTransitionTimestamps: Opt(Arr(Loose({ phase: Opt(Str()), phaseTransitionTimestamp: Opt(Str()) }))),
  volumeStatus: Opt(
    Arr(
      Loose({
        name: Str(),
        target: Opt(Str()),
        phase: Opt(Str()),
        reason: Opt(Str()),
        message: Opt(Str()),
        /** the claim behind a PVC or DataVolume volume (upstream `PersistentVolumeClaimInfo`, filled by virt-controller);
         * virt-handler decides from `accessModes` whether the volume is shared between nodes (ReadWriteMany) */
        persistentVolumeClaimInfo: Opt(PersistentVolumeClaimInfoSchema),
      }),
    ),
  ),
  machine: Opt(Loose({ type: Opt(Str()) })),
  currentCPUTopology: Opt(Loose({ cores: Opt(Int()), sockets: Opt(Int()), threads: Opt(Int()) })),
  memory: Opt(
    Loose({ guestAtBoot: Opt(Quantity()), guestCurrent: Opt(Quantity()), guestRequested: Opt(Quantity()) }),
  ),
  virtualMachineRevisionName: Opt(Str()),
});
/** The `status` of a VirtualMachineInstance: phase, conditions, node, interfaces, guest OS info,
 * migration state and volume status, written by virt-controller and virt-handler. */
export type VirtualMachineInstanceStatus = Static<typeof VirtualMachineInstanceStatusSchema>;

/** TypeBox schema of a whole VirtualMachineInstance object (apiVersion, kind, metadata, spec, status);
 * the CRD's OpenAPI schema is generated from it. */
export const VirtualMachineInstanceSchema = Type.Object(
  {
    apiVersion: Type.Literal(API_VERSION),
    kind: Type.Literal('VirtualMachineInstance'),
    metadata: ObjectMetaSchema,
    spec: VirtualMachineInstanceSpecSchema,
    status: Opt(VirtualMachineInstanceStatusSchema),
  },
  { description: 'VirtualMachineInstance is a running virtual machine: one launcher Pod, one QEMU process.' },
);
/** A kubevirt.io/v1 VirtualMachineInstance: a running virtual machine (one launcher Pod, one QEMU process). */
export type VirtualMachineInstance = Static<typeof VirtualMachineInstanceSchema>;

// ---------------------------------------------------------------- VirtualMachine

/** The run strategies of a VirtualMachine (upstream `v1.VirtualMachineRunStrategy`). */
export const RUN_STRATEGIES = ['Always', 'RerunOnFailure', 'Manual', 'Halted', 'Once'] as const;
/** A VirtualMachine run strategy: Always, RerunOnFailure, Manual, Halted or Once. */
export type RunStrategy = (typeof RUN_STRATEGIES)[number];

/** TypeBox schema of `spec.template` of a VM (upstream `v1.VirtualMachineInstanceTemplateSpec`); unknown fields are rejected. */
export const VirtualMachineInstanceTemplateSpecSchema = Strict({
  metadata: Opt(ObjectMetaSchema),
  spec: VirtualMachineInstanceSpecSchema,
});
/** `spec.template` of a VirtualMachine: the metadata and spec of the VMIs it creates. */
export type VirtualMachineInstanceTemplateSpec = Static<typeof VirtualMachineInstanceTemplateSpecSchema>;

/** `spec.instancetype` / `spec.preference` of a VM (upstream `InstancetypeMatcher` / `PreferenceMatcher`): the
 * object's name and kind (default the cluster-wide kind), a ControllerRevision holding it, or the volume whose
 * labels name it (inferred at admission). */
const Matcher = (kinds: [string, string], what: string, description: string) =>
  Strict(
    {
      name: Opt(Line(`the ${what}`)),
      // any case, singular or plural, as upstream (`virtctl create vm` writes virtualmachineinstancetype)
      kind: Opt(Line(`${kinds[0]} or ${kinds[1]} (any case, singular or plural; default ${kinds[1]})`)),
      revisionName: Opt(Line(`a ControllerRevision holding the ${what} to use`)),
      inferFromVolume: Opt(
        Line(
          `a volume of the template (PVC or DataVolume) whose instancetype.kubevirt.io/default-* labels name the ${what}; replaced by name and kind at admission`,
        ),
      ),
      inferFromVolumeFailurePolicy: Opt(
        Enum(
          ['Ignore', 'Reject'],
          'Reject (default): the VM is refused when nothing can be inferred; Ignore: the matcher is dropped instead',
        ),
      ),
    },
    description,
  );

/** TypeBox schema of the VM `spec` (upstream `v1.VirtualMachineSpec`); unknown fields are rejected. */
export const VirtualMachineSpecSchema = Strict({
  running: Opt(Bool('true: keep a VMI running (Always), false: Halted; mutually exclusive with runStrategy')),
  runStrategy: Opt(Enum([...RUN_STRATEGIES])),
  template: VirtualMachineInstanceTemplateSpecSchema,
  dataVolumeTemplates: Opt(Arr(Opaque())),
  instancetype: Opt(
    Matcher(
      ['VirtualMachineInstancetype', 'VirtualMachineClusterInstancetype'],
      'instance type',
      'the instance type (instancetype.kubevirt.io) whose CPU, memory and devices the VMIs get',
    ),
  ),
  preference: Opt(
    Matcher(
      ['VirtualMachinePreference', 'VirtualMachineClusterPreference'],
      'preference',
      'the preference (instancetype.kubevirt.io) that fills what the template leaves unset',
    ),
  ),
});
/** The `spec` of a VirtualMachine: `running` or `runStrategy` (exclusive), and the VMI template. */
export type VirtualMachineSpec = Static<typeof VirtualMachineSpecSchema>;

/** The values of a VirtualMachine's `status.printableStatus` (upstream `v1.VirtualMachinePrintableStatus`). */
export const PRINTABLE_STATUSES = [
  'Stopped',
  'Provisioning',
  'Starting',
  'Running',
  'Paused',
  'Stopping',
  'Terminating',
  'CrashLoopBackOff',
  'Migrating',
  'Unknown',
  'ErrorUnschedulable',
  'ErrImagePull',
  'ImagePullBackOff',
  'ErrorPvcNotFound',
  'DataVolumeError',
  'WaitingForVolumeBinding',
] as const;

/** `status.instancetypeRef` / `status.preferenceRef` (upstream `InstancetypeStatusRef`): what the VM uses and
 * the ControllerRevision it is stored in. */
const InstancetypeStatusRef = () =>
  Loose({
    name: Opt(Str()),
    kind: Opt(Str()),
    controllerRevisionRef: Opt(Loose({ name: Opt(Str()) })),
  });

/** TypeBox schema of the VM `status` (upstream `v1.VirtualMachineStatus`); fields not modelled here are kept. */
export const VirtualMachineStatusSchema = Loose({
  printableStatus: Opt(Str()),
  ready: Opt(Bool()),
  created: Opt(Bool()),
  conditions: Opt(Arr(ConditionSchema)),
  runStrategy: Opt(Str()),
  observedGeneration: Opt(Int()),
  desiredGeneration: Opt(Int()),
  stateChangeRequests: Opt(Arr(Loose({ action: Str(), data: Opt(StringMap()), uid: Opt(Str()) }))),
  startFailure: Opt(
    Loose({
      consecutiveFailCount: Opt(Int()),
      retryAfterTimestamp: Opt(Str()),
      lastFailedVMIUID: Opt(Str()),
    }),
  ),
  snapshotInProgress: Opt(Str()),
  restoreInProgress: Opt(Str()),
  volumeRequests: Opt(Arr(Opaque())),
  volumeSnapshotStatuses: Opt(Arr(Opaque())),
  instancetypeRef: Opt(InstancetypeStatusRef()),
  preferenceRef: Opt(InstancetypeStatusRef()),
});
/** The `status` of a VirtualMachine: printable status, ready/created, conditions, state change
 * requests and start failures, written by virt-controller. */
export type VirtualMachineStatus = Static<typeof VirtualMachineStatusSchema>;

/** TypeBox schema of a whole VirtualMachine object (apiVersion, kind, metadata, spec, status). */
export const VirtualMachineSchema = Type.Object(
  {
    apiVersion: Type.Literal(API_VERSION),
    kind: Type.Literal('VirtualMachine'),
    metadata: ObjectMetaSchema,
    spec: VirtualMachineSpecSchema,
    status: Opt(VirtualMachineStatusSchema),
  },
  {
    description:
      'VirtualMachine keeps a VirtualMachineInstance running (or not) according to its run strategy.',
  },
);
/** A kubevirt.io/v1 VirtualMachine: keeps a VirtualMachineInstance running (or not) per its run strategy. */
export type VirtualMachine = Static<typeof VirtualMachineSchema>;

// ---------------------------------------------------------------- VirtualMachineInstanceMigration

/** The phases of a VirtualMachineInstanceMigration (upstream `v1.VirtualMachineInstanceMigrationPhase`;
 * '' before the first). */
export const MIGRATION_PHASES = [
  '',
  'Pending',
  'Scheduling',
  'Scheduled',
  'PreparingTarget',
  'TargetReady',
  'Running',
  'Succeeded',
  'Failed',
] as const;

/** TypeBox schema of the migration `spec` (upstream `v1.VirtualMachineInstanceMigrationSpec`); unknown fields are rejected. */
export const VirtualMachineInstanceMigrationSpecSchema = Strict({
  vmiName: Str('name of the VMI to migrate, in the same namespace'),
});
/** The `spec` of a VirtualMachineInstanceMigration: the name of the VMI to migrate (same namespace). */
export type VirtualMachineInstanceMigrationSpec = Static<typeof VirtualMachineInstanceMigrationSpecSchema>;

/** TypeBox schema of the migration `status` (upstream `v1.VirtualMachineInstanceMigrationStatus`); fields not modelled here are kept. */
export const VirtualMachineInstanceMigrationStatusSchema = Loose({
  phase: Opt(Str()),
  conditions: Opt(Arr(ConditionSchema)),
  migrationState: Opt(MigrationStateSchema),
  phaseTransitionTimestamps: Opt(Arr(Loose({ phase: Opt(Str()), phaseTransitionTimestamp: Opt(Str()) }))),
});
/** The `status` of a VirtualMachineInstanceMigration: phase, conditions and migration state. */
export type VirtualMachineInstanceMigrationStatus = Static<
  typeof VirtualMachineInstanceMigrationStatusSchema
>;

/** TypeBox schema of a whole VirtualMachineInstanceMigration object (apiVersion, kind, metadata, spec, status). */
export const VirtualMachineInstanceMigrationSchema = Type.Object(
  {
    apiVersion: Type.Literal(API_VERSION),
    kind: Type.Literal('VirtualMachineInstanceMigration'),
    metadata: ObjectMetaSchema,
    spec: VirtualMachineInstanceMigrationSpecSchema,
    status: Opt(VirtualMachineInstanceMigrationStatusSchema),
  },
  { description: 'VirtualMachineInstanceMigration tracks one live migration of a VMI to another node.' },
);
/** A kubevirt.io/v1 VirtualMachineInstanceMigration: one live migration of a VMI to another node. */
export type VirtualMachineInstanceMigration = Static<typeof VirtualMachineInstanceMigrationSchema>;

// ---------------------------------------------------------------- VirtualMachineInstanceReplicaSet

/** The operators of a label selector requirement (meta/v1 `LabelSelectorOperator`). */
export const LABEL_SELECTOR_OPERATORS = ['In', 'NotIn', 'Exists', 'DoesNotExist'] as const;

/** TypeBox schema of a meta/v1 LabelSelector: matchLabels and matchExpressions, ANDed; unknown fields are rejected. */
export const LabelSelectorSchema = Strict(
  {
    matchLabels: Opt(StringMap('labels an object must carry, exactly')),
    matchExpressions: Opt(
      Arr(
        Strict({
          key: Str('the label key'),
          operator: Enum([...LABEL_SELECTOR_OPERATORS]),
          values: Opt(Arr(Str(), 'non-empty for In and NotIn, empty for Exists and DoesNotExist')),
        }),
      ),
    ),
  },
  'a label selector (meta/v1): every matchLabels entry and every matchExpressions requirement must hold',
);
/** A meta/v1 LabelSelector. */
export type LabelSelector = Static<typeof LabelSelectorSchema>;

/** TypeBox schema of the replica set `spec` (upstream `v1.VirtualMachineInstanceReplicaSetSpec`); unknown fields are rejected. */
export const VirtualMachineInstanceReplicaSetSpecSchema = Strict({
  replicas: Opt(UInt('how many VMIs to keep (default 1)')),
  selector: LabelSelectorSchema,
  template: VirtualMachineInstanceTemplateSpecSchema,
  paused: Opt(Bool('true: the controller neither creates nor deletes VMIs')),
});
/** The `spec` of a VirtualMachineInstanceReplicaSet: replicas, the selector, the VMI template, paused. */
export type VirtualMachineInstanceReplicaSetSpec = Static<typeof VirtualMachineInstanceReplicaSetSpecSchema>;

/** TypeBox schema of the replica set `status` (upstream `v1.VirtualMachineInstanceReplicaSetStatus`); fields not modelled here are kept. */
export const VirtualMachineInstanceReplicaSetStatusSchema = Loose({
  replicas: Opt(Int('VMIs owned that are neither final nor being deleted')),
  readyReplicas: Opt(Int('of those, the VMIs whose Ready condition is True')),
  labelSelector: Opt(Str('spec.selector as a string (the scale subresource reads it)')),
  conditions: Opt(Arr(ConditionSchema)),
});
/** The `status` of a VirtualMachineInstanceReplicaSet, written by virt-controller. */
export type VirtualMachineInstanceReplicaSetStatus = Static<
  typeof VirtualMachineInstanceReplicaSetStatusSchema
>;

/** TypeBox schema of a whole VirtualMachineInstanceReplicaSet object (apiVersion, kind, metadata, spec, status). */
export const VirtualMachineInstanceReplicaSetSchema = Type.Object(
  {
    apiVersion: Type.Literal(API_VERSION),
    kind: Type.Literal('VirtualMachineInstanceReplicaSet'),
    metadata: ObjectMetaSchema,
    spec: VirtualMachineInstanceReplicaSetSpecSchema,
    status: Opt(VirtualMachineInstanceReplicaSetStatusSchema),
  },
  { description: 'VirtualMachineInstanceReplicaSet keeps a number of VMIs from one template running.' },
);
/** A kubevirt.io/v1 VirtualMachineInstanceReplicaSet: keeps `replicas` VMIs of its template running. */
export type VirtualMachineInstanceReplicaSet = Static<typeof VirtualMachineInstanceReplicaSetSchema>;

// ---------------------------------------------------------------- VirtualMachinePool (pool.kubevirt.io)

/** The API group and stored version of VirtualMachinePools (upstream also serves v1alpha1, the same shape). */
export const POOL_GROUP = 'pool.kubevirt.io';
/** `pool.kubevirt.io/v1beta1`, the version pools are stored in */
export const POOL_API_VERSION = `${POOL_GROUP}/v1beta1`;
/** the apiVersions a VirtualMachinePool may be written in */
export const POOL_API_VERSIONS = [POOL_API_VERSION, `${POOL_GROUP}/v1alpha1`] as const;

/** TypeBox schema of `spec.virtualMachineTemplate` of a pool: the metadata and spec of the VMs it creates. */
export const VirtualMachineTemplateSpecSchema = Strict({
  metadata: Opt(ObjectMetaSchema),
  spec: VirtualMachineSpecSchema,
});

/** TypeBox schema of the pool `spec` (upstream `v1beta1.VirtualMachinePoolSpec`); unknown fields are rejected. */
export const VirtualMachinePoolSpecSchema = Strict({
  replicas: Opt(UInt('how many VMs to keep (default 1)')),
  selector: LabelSelectorSchema,
  virtualMachineTemplate: VirtualMachineTemplateSpecSchema,
  paused: Opt(Bool('true: the controller neither creates nor deletes VMs')),
  nameGeneration: Opt(
    Strict({
      appendIndexToConfigMapRefs: Opt(Bool('configMap volumes of VM <pool>-<i> name <configMap>-<i>')),
      appendIndexToSecretRefs: Opt(
        Bool('secret volumes and cloud-init secret references of VM <pool>-<i> name <secret>-<i>'),
      ),
    }),
  ),
  // upstream's rollout and scale-in policies: not implemented here, refused by validation with the field's name
  maxUnavailable: Opt(Opaque('not implemented by kubevirt-ts')),
  scaleInStrategy: Opt(Opaque('not implemented by kubevirt-ts')),
  updateStrategy: Opt(Opaque('not implemented by kubevirt-ts')),
  autohealing: Opt(Opaque('not implemented by kubevirt-ts')),
});
/** The `spec` of a VirtualMachinePool: replicas, the selector, the VM template, paused, name generation. */
export type VirtualMachinePoolSpec = Static<typeof VirtualMachinePoolSpecSchema>;

/** TypeBox schema of the pool `status` (upstream `v1beta1.VirtualMachinePoolStatus`); fields not modelled here are kept. */
export const VirtualMachinePoolStatusSchema = Loose({
  replicas: Opt(Int('VMs owned that are not being deleted')),
  readyReplicas: Opt(Int('of those, the VMs whose Ready condition is True')),
  labelSelector: Opt(Str('spec.selector as a string (the scale subresource reads it)')),
  conditions: Opt(Arr(ConditionSchema)),
});
/** The `status` of a VirtualMachinePool, written by virt-controller. */
export type VirtualMachinePoolStatus = Static<typeof VirtualMachinePoolStatusSchema>;

/** TypeBox schema of a whole VirtualMachinePool object (apiVersion, kind, metadata, spec, status). */
export const VirtualMachinePoolSchema = Type.Object(
  {
    apiVersion: Type.Union(POOL_API_VERSIONS.map((v) => Type.Literal(v))),
    kind: Type.Literal('VirtualMachinePool'),
    metadata: ObjectMetaSchema,
    spec: VirtualMachinePoolSpecSchema,
    status: Opt(VirtualMachinePoolStatusSchema),
  },
  { description: 'VirtualMachinePool keeps a number of VMs, named <pool>-<index>, from one template.' },
);
/** A pool.kubevirt.io/v1beta1 VirtualMachinePool: keeps `replicas` VMs of its template, named `<pool>-<index>`. */
export type VirtualMachinePool = Static<typeof VirtualMachinePoolSchema>;

// ---------------------------------------------------------------- VirtualMachineInstancePreset (deprecated upstream)

/** TypeBox schema of a preset's `spec` (upstream `v1.VirtualMachineInstancePresetSpec`); unknown fields are rejected. */
export const VirtualMachineInstancePresetSpecSchema = Strict({
  selector: LabelSelectorSchema,
  domain: Opt(DomainSpecSchema),
});
/** The `spec` of a VirtualMachineInstancePreset: which VMIs (selector) get which domain settings. */
export type VirtualMachineInstancePresetSpec = Static<typeof VirtualMachineInstancePresetSpecSchema>;

/** TypeBox schema of a whole VirtualMachineInstancePreset (kubevirt.io/v1 or the stored v1alpha3; both deprecated). */
export const VirtualMachineInstancePresetSchema = Type.Object(
  {
    apiVersion: Type.Union([Type.Literal(API_VERSION), Type.Literal('kubevirt.io/v1alpha3')]),
    kind: Type.Literal('VirtualMachineInstancePreset'),
    metadata: ObjectMetaSchema,
    spec: VirtualMachineInstancePresetSpecSchema,
  },
  {
    description:
      'VirtualMachineInstancePreset (deprecated upstream) fills domain settings of matching new VMIs.',
  },
);
/** A kubevirt.io/v1 VirtualMachineInstancePreset (deprecated upstream): domain settings for matching new VMIs. */
export type VirtualMachineInstancePreset = Static<typeof VirtualMachineInstancePresetSchema>;
