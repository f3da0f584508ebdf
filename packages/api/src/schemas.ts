// kubevirt.io/v1 schemas (upstream KubeVirt v1.1 field names and meanings).
// One TypeBox schema per type: the TS types (Static<>), runtime validation and the CRD
// OpenAPI v3 schemas (crd.ts) all derive from these.
import { Type, type Static } from '@sinclair/typebox';
import {
  Arr,
  Bool,
  Enum,
  Int,
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

export const API_GROUP = 'kubevirt.io';
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
export type ObjectMeta = Static<typeof ObjectMetaSchema>;

export const ConditionSchema = Loose({
  type: Str(),
  status: Str('True, False or Unknown'),
  lastProbeTime: Opt(Type.Union([Str(), Type.Null()])),
  lastTransitionTime: Opt(Type.Union([Str(), Type.Null()])),
  reason: Opt(Str()),
  message: Opt(Str()),
});
export type Condition = Static<typeof ConditionSchema>;

// ---------------------------------------------------------------- compute

export const CPUFeatureSchema = Strict({
  name: Str('CPU feature name, e.g. pcid'),
  policy: Opt(Enum(['force', 'require', 'optional', 'disable', 'forbid'], 'default require')),
});

export const CPUSchema = Strict(
  {
    cores: Opt(UInt('cores per socket')),
    sockets: Opt(UInt()),
    maxSockets: Opt(UInt('upper bound for CPU hotplug')),
    threads: Opt(UInt('threads per core')),
    model: Opt(Str('CPU model (e.g. host-model, host-passthrough, Haswell-noTSX)')),
    features: Opt(Arr(CPUFeatureSchema)),
    dedicatedCpuPlacement: Opt(Bool('pin each vCPU to a dedicated host CPU')),
    isolateEmulatorThread: Opt(Bool()),
    numa: Opt(Strict({ guestMappingPassthrough: Opt(Strict({})) })),
    realtime: Opt(Strict({ mask: Opt(Str()) })),
  },
  'CPU topology and model of the guest',
);
export type CPU = Static<typeof CPUSchema>;

export const HugepagesSchema = Strict({ pageSize: Opt(Str('page size, e.g. 2Mi or 1Gi')) });

export const MemorySchema = Strict({
  guest: Opt(Quantity('memory visible to the guest')),
  maxGuest: Opt(Quantity('upper bound for memory hotplug')),
  hugepages: Opt(HugepagesSchema),
});
export type Memory = Static<typeof MemorySchema>;

export const ResourceRequirementsSchema = Strict({
  requests: Opt(QuantityMap('requested resources (cpu, memory, ...)')),
  limits: Opt(QuantityMap()),
  overcommitGuestOverhead: Opt(Bool("don't ask the scheduler for the guest overhead")),
});
export type ResourceRequirements = Static<typeof ResourceRequirementsSchema>;

export const MachineSchema = Strict({ type: Opt(Str('QEMU machine type, e.g. q35 or pc-q35-7.2')) });

export const EFISchema = Strict({
  secureBoot: Opt(Bool('default true')),
  persistent: Opt(Bool('keep the NVRAM across restarts')),
});

export const BootloaderSchema = Strict({
  bios: Opt(Strict({ useSerial: Opt(Bool()) })),
  efi: Opt(EFISchema),
});

export const KernelBootContainerSchema = Strict({
  image: Str(),
  imagePullSecret: Opt(Str()),
  kernelPath: Opt(Str()),
  initrdPath: Opt(Str()),
  imagePullPolicy: Opt(Enum(['Always', 'Never', 'IfNotPresent'])),
});

export const KernelBootSchema = Strict({
  kernelArgs: Opt(Str()),
  container: Opt(KernelBootContainerSchema),
});

export const FirmwareSchema = Strict({
  uuid: Opt(Str('SMBIOS system UUID')),
  serial: Opt(Str('SMBIOS system serial number')),
  bootloader: Opt(BootloaderSchema),
  kernelBoot: Opt(KernelBootSchema),
});
export type Firmware = Static<typeof FirmwareSchema>;

const TickPolicy = Enum(['delay', 'catchup', 'merge', 'discard']);
export const ClockSchema = Strict({
  utc: Opt(Strict({ offsetSeconds: Opt(Int()) })),
  timezone: Opt(Str('IANA time zone, e.g. Europe/Berlin')),
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
export type Clock = Static<typeof ClockSchema>;

const FeatureState = () => Strict({ enabled: Opt(Bool('default true')) });
export const HypervSchema = Strict({
  relaxed: Opt(FeatureState()),
  vapic: Opt(FeatureState()),
  spinlocks: Opt(Strict({ enabled: Opt(Bool()), spinlocks: Opt(UInt('retries, at least 4096')) })),
  vpindex: Opt(FeatureState()),
  runtime: Opt(FeatureState()),
  synic: Opt(FeatureState()),
  synictimer: Opt(Strict({ enabled: Opt(Bool()), direct: Opt(FeatureState()) })),
  reset: Opt(FeatureState()),
  vendorid: Opt(Strict({ enabled: Opt(Bool()), vendorid: Opt(Str()) })),
  frequencies: Opt(FeatureState()),
  reenlightenment: Opt(FeatureState()),
  tlbflush: Opt(FeatureState()),
  ipi: Opt(FeatureState()),
  evmcs: Opt(FeatureState()),
});

export const FeaturesSchema = Strict({
  acpi: Opt(FeatureState()),
  apic: Opt(Strict({ enabled: Opt(Bool()), endOfInterrupt: Opt(Bool()) })),
  hyperv: Opt(HypervSchema),
  smm: Opt(FeatureState()),
  kvm: Opt(Strict({ hidden: Opt(Bool()) })),
  pvspinlock: Opt(FeatureState()),
});
export type Features = Static<typeof FeaturesSchema>;

// ---------------------------------------------------------------- devices

export const DISK_BUSES = ['virtio', 'sata', 'scsi', 'usb'] as const;
export const DiskTargetSchema = Strict({
  bus: Opt(Str('virtio, sata, scsi or usb (default virtio)')),
  readonly: Opt(Bool()),
  pciAddress: Opt(Str('guest PCI address, e.g. 0000:81:01.1')),
});
export const CDRomTargetSchema = Strict({
  bus: Opt(Str('sata or scsi (default sata)')),
  readonly: Opt(Bool('default true')),
  tray: Opt(Enum(['open', 'closed'])),
});
export const LunTargetSchema = Strict({
  bus: Opt(Str('default scsi')),
  readonly: Opt(Bool()),
  reservation: Opt(Bool()),
});

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
  tag: Opt(Str()),
  shareable: Opt(Bool()),
  errorPolicy: Opt(Enum(['stop', 'ignore', 'report', 'enospace'])),
  blockSize: Opt(
    Strict({
      custom: Opt(Strict({ logical: UInt(), physical: UInt() })),
      matchVolume: Opt(FeatureState()),
    }),
  ),
});
export type Disk = Static<typeof DiskSchema>;

export const PortSchema = Strict({
  name: Opt(Str()),
  protocol: Opt(Enum(['TCP', 'UDP'])),
  port: Int(),
});

export const INTERFACE_BINDINGS = [
  'bridge',
  'masquerade',
  'sriov',
  'slirp',
  'macvtap',
  'passt',
  'binding',
] as const;
export const INTERFACE_MODELS = ['e1000', 'e1000e', 'igb', 'ne2k_pci', 'pcnet', 'rtl8139', 'virtio'] as const;

export const InterfaceSchema = Strict({
  name: Str('must match a network name'),
  model: Opt(Str('virtio (default), e1000, e1000e, igb, ne2k_pci, pcnet, rtl8139')),
  bridge: Opt(Strict({})),
  masquerade: Opt(Strict({})),
  sriov: Opt(Strict({})),
  slirp: Opt(Strict({})),
  macvtap: Opt(Strict({})),
  passt: Opt(Strict({})),
  binding: Opt(Strict({ name: Str() })),
  ports: Opt(Arr(PortSchema)),
  macAddress: Opt(Str()),
  bootOrder: Opt(Int()),
  pciAddress: Opt(Str()),
  dhcpOptions: Opt(Opaque()),
  tag: Opt(Str()),
  acpiIndex: Opt(Int()),
  state: Opt(Enum(['absent'])),
});
export type Interface = Static<typeof InterfaceSchema>;

export const InputSchema = Strict({
  name: Str(),
  type: Str('tablet'),
  bus: Opt(Str('usb or virtio')),
});
export type Input = Static<typeof InputSchema>;

export const WatchdogSchema = Strict({
  name: Str(),
  i6300esb: Opt(Strict({ action: Opt(Enum(['poweroff', 'reset', 'shutdown'], 'default reset')) })),
});

export const SoundSchema = Strict({ name: Str(), model: Opt(Enum(['ich9', 'ac97'])) });

export const DevicesSchema = Strict({
  disks: Opt(Arr(DiskSchema)),
  interfaces: Opt(Arr(InterfaceSchema)),
  inputs: Opt(Arr(InputSchema)),
  watchdog: Opt(WatchdogSchema),
  rng: Opt(Strict({})),
  sound: Opt(SoundSchema),
  tpm: Opt(Strict({ persistent: Opt(Bool()) })),
  filesystems: Opt(Arr(Strict({ name: Str(), virtiofs: Strict({}) }))),
  gpus: Opt(Arr(Loose({ name: Str(), deviceName: Str() }))),
  hostDevices: Opt(Arr(Loose({ name: Str(), deviceName: Str() }))),
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
export type Devices = Static<typeof DevicesSchema>;

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
      manufacturer: Opt(Str()),
      version: Opt(Str()),
      serial: Opt(Str()),
      asset: Opt(Str()),
      sku: Opt(Str()),
    }),
  ),
  launchSecurity: Opt(Opaque()),
});
export type DomainSpec = Static<typeof DomainSpecSchema>;

// ---------------------------------------------------------------- volumes and networks

const SecretRef = (description?: string) => Strict({ name: Str() }, description);
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

export const VolumeSchema = Strict({
  name: Str(),
  containerDisk: Opt(
    Strict({
      image: Str(),
      imagePullSecret: Opt(Str()),
      path: Opt(Str()),
      imagePullPolicy: Opt(Enum(['Always', 'Never', 'IfNotPresent'])),
    }),
  ),
  ephemeral: Opt(Strict({ persistentVolumeClaim: Opt(Strict({ claimName: Str(), readOnly: Opt(Bool()) })) })),
  persistentVolumeClaim: Opt(Strict({ claimName: Str(), readOnly: Opt(Bool()), hotpluggable: Opt(Bool()) })),
  dataVolume: Opt(Strict({ name: Str(), hotpluggable: Opt(Bool()) })),
  emptyDisk: Opt(Strict({ capacity: Quantity() })),
  hostDisk: Opt(
    Strict({
      path: Str(),
      type: Enum(['Disk', 'DiskOrCreate']),
      capacity: Opt(Quantity()),
      shared: Opt(Bool()),
    }),
  ),
  cloudInitNoCloud: Opt(CloudInitSource('NoCloud')),
  cloudInitConfigDrive: Opt(CloudInitSource('ConfigDrive')),
  configMap: Opt(Strict({ name: Opt(Str()), optional: Opt(Bool()), volumeLabel: Opt(Str()) })),
  secret: Opt(Strict({ secretName: Opt(Str()), optional: Opt(Bool()), volumeLabel: Opt(Str()) })),
  serviceAccount: Opt(Strict({ serviceAccountName: Opt(Str()) })),
  downwardAPI: Opt(Strict({ fields: Opt(Arr(Opaque())), volumeLabel: Opt(Str()) })),
  downwardMetrics: Opt(Strict({})),
  sysprep: Opt(Strict({ configMap: Opt(SecretRef()), secret: Opt(SecretRef()) })),
  memoryDump: Opt(Strict({ claimName: Str(), hotpluggable: Opt(Bool()) })),
});
export type Volume = Static<typeof VolumeSchema>;

export const NetworkSchema = Strict({
  name: Str(),
  pod: Opt(Strict({ vmNetworkCIDR: Opt(Str()), vmIPv6NetworkCIDR: Opt(Str()) })),
  multus: Opt(Strict({ networkName: Str(), default: Opt(Bool()) })),
});
export type Network = Static<typeof NetworkSchema>;

export const TolerationSchema = Strict({
  key: Opt(Str()),
  operator: Opt(Enum(['Exists', 'Equal'])),
  value: Opt(Str()),
  effect: Opt(Enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute'])),
  tolerationSeconds: Opt(Int()),
});

export const AffinitySchema = Strict({
  nodeAffinity: Opt(Opaque('core/v1 NodeAffinity')),
  podAffinity: Opt(Opaque('core/v1 PodAffinity')),
  podAntiAffinity: Opt(Opaque('core/v1 PodAntiAffinity')),
});

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
export type Probe = Static<typeof ProbeSchema>;

// ---------------------------------------------------------------- VirtualMachineInstance

export const VirtualMachineInstanceSpecSchema = Strict({
  domain: DomainSpecSchema,
  volumes: Opt(Arr(VolumeSchema)),
  networks: Opt(Arr(NetworkSchema)),
  nodeSelector: Opt(StringMap()),
  affinity: Opt(AffinitySchema),
  tolerations: Opt(Arr(TolerationSchema)),
  topologySpreadConstraints: Opt(Arr(Opaque())),
  schedulerName: Opt(Str()),
  priorityClassName: Opt(Str()),
  terminationGracePeriodSeconds: Opt(UInt('seconds between ACPI shutdown and destroy, default 30')),
  evictionStrategy: Opt(Enum(['None', 'LiveMigrate', 'LiveMigrateIfPossible', 'External'])),
  startStrategy: Opt(Enum(['Paused'])),
  hostname: Opt(Str()),
  subdomain: Opt(Str()),
  livenessProbe: Opt(ProbeSchema),
  readinessProbe: Opt(ProbeSchema),
  dnsPolicy: Opt(Enum(['ClusterFirstWithHostNet', 'ClusterFirst', 'Default', 'None', ''])),
  dnsConfig: Opt(Opaque()),
  accessCredentials: Opt(Arr(Opaque())),
  architecture: Opt(Str()),
});
export type VirtualMachineInstanceSpec = Static<typeof VirtualMachineInstanceSpecSchema>;

export const VMI_PHASES = [
  'Pending',
  'Scheduling',
  'Scheduled',
  'Running',
  'Succeeded',
  'Failed',
  'Unknown',
] as const;
export type VirtualMachineInstancePhase = (typeof VMI_PHASES)[number];

export const MigrationStateSchema = Loose({
  migrationUid: Opt(Str()),
  sourceNode: Opt(Str()),
  targetNode: Opt(Str()),
  targetNodeAddress: Opt(Str()),
  targetPod: Opt(Str()),
  startTimestamp: Opt(Type.Union([Str(), Type.Null()])),
  endTimestamp: Opt(Type.Union([Str(), Type.Null()])),
  completed: Opt(Bool()),
  failed: Opt(Bool()),
  abortRequested: Opt(Bool()),
  abortStatus: Opt(Str()),
  mode: Opt(Str()),
});
export type MigrationState = Static<typeof MigrationStateSchema>;

export const VMIInterfaceStatusSchema = Loose({
  name: Opt(Str()),
  ipAddress: Opt(Str()),
  ipAddresses: Opt(Arr(Str())),
  mac: Opt(Str()),
  interfaceName: Opt(Str()),
  infoSource: Opt(Str()),
  queueCount: Opt(Int()),
});

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
      Loose({ name: Str(), target: Opt(Str()), phase: Opt(Str()), reason: Opt(Str()), message: Opt(Str()) }),
    ),
  ),
  machine: Opt(Loose({ type: Opt(Str()) })),
  currentCPUTopology: Opt(Loose({ cores: Opt(Int()), sockets: Opt(Int()), threads: Opt(Int()) })),
  memory: Opt(
    Loose({ guestAtBoot: Opt(Quantity()), guestCurrent: Opt(Quantity()), guestRequested: Opt(Quantity()) }),
  ),
  virtualMachineRevisionName: Opt(Str()),
});
export type VirtualMachineInstanceStatus = Static<typeof VirtualMachineInstanceStatusSchema>;

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
export type VirtualMachineInstance = Static<typeof VirtualMachineInstanceSchema>;

// ---------------------------------------------------------------- VirtualMachine

export const RUN_STRATEGIES = ['Always', 'RerunOnFailure', 'Manual', 'Halted', 'Once'] as const;
export type RunStrategy = (typeof RUN_STRATEGIES)[number];

export const VirtualMachineInstanceTemplateSpecSchema = Strict({
  metadata: Opt(ObjectMetaSchema),
  spec: VirtualMachineInstanceSpecSchema,
});
export type VirtualMachineInstanceTemplateSpec = Static<typeof VirtualMachineInstanceTemplateSpecSchema>;

export const VirtualMachineSpecSchema = Strict({
  running: Opt(Bool('true: keep a VMI running (Always), false: Halted; mutually exclusive with runStrategy')),
  runStrategy: Opt(Enum([...RUN_STRATEGIES])),
  template: VirtualMachineInstanceTemplateSpecSchema,
  dataVolumeTemplates: Opt(Arr(Opaque())),
  instancetype: Opt(Opaque()),
  preference: Opt(Opaque()),
});
export type VirtualMachineSpec = Static<typeof VirtualMachineSpecSchema>;

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
});
export type VirtualMachineStatus = Static<typeof VirtualMachineStatusSchema>;

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
export type VirtualMachine = Static<typeof VirtualMachineSchema>;

// ---------------------------------------------------------------- VirtualMachineInstanceMigration

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

export const VirtualMachineInstanceMigrationSpecSchema = Strict({
  vmiName: Str('name of the VMI to migrate, in the same namespace'),
});
export type VirtualMachineInstanceMigrationSpec = Static<typeof VirtualMachineInstanceMigrationSpecSchema>;

export const VirtualMachineInstanceMigrationStatusSchema = Loose({
  phase: Opt(Str()),
  conditions: Opt(Arr(ConditionSchema)),
  migrationState: Opt(MigrationStateSchema),
  phaseTransitionTimestamps: Opt(Arr(Loose({ phase: Opt(Str()), phaseTransitionTimestamp: Opt(Str()) }))),
});
export type VirtualMachineInstanceMigrationStatus = Static<
  typeof VirtualMachineInstanceMigrationStatusSchema
>;

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
export type VirtualMachineInstanceMigration = Static<typeof VirtualMachineInstanceMigrationSchema>;
