// The shape of the kubevirt.io/v1 VirtualMachineInstance fields the converter reads, with
// upstream's field names. Structural on purpose: the full types (and validation, defaults) are
// @kubevirt-ts/api's; any VirtualMachineInstance of that package is assignable to these.

export type Quantity = string | number;

interface FeatureState {
  enabled?: boolean;
}

export interface VmiDisk {
  name: string;
  disk?: { bus?: string; readonly?: boolean; pciAddress?: string };
  cdrom?: { bus?: string; readonly?: boolean; tray?: 'open' | 'closed' };
  lun?: { bus?: string; readonly?: boolean; reservation?: boolean };
  bootOrder?: number;
  serial?: string;
  dedicatedIOThread?: boolean;
  cache?: 'none' | 'writethrough' | 'writeback';
  io?: 'native' | 'threads' | 'default';
  shareable?: boolean;
  errorPolicy?: 'stop' | 'ignore' | 'report' | 'enospace';
  blockSize?: { custom?: { logical: number; physical: number }; matchVolume?: { enabled?: boolean } };
}

export interface VmiInterface {
  name: string;
  model?: string;
  bridge?: object;
  masquerade?: object;
  sriov?: object;
  slirp?: object;
  macvtap?: object;
  passt?: object;
  binding?: { name: string };
  macAddress?: string;
  bootOrder?: number;
  pciAddress?: string;
  acpiIndex?: number;
  ports?: { name?: string; protocol?: string; port: number }[];
  state?: 'absent';
}

export interface VmiVolume {
  name: string;
  containerDisk?: { image: string; path?: string };
  ephemeral?: { persistentVolumeClaim?: { claimName: string; readOnly?: boolean } };
  persistentVolumeClaim?: { claimName: string; readOnly?: boolean; hotpluggable?: boolean };
  dataVolume?: { name: string; hotpluggable?: boolean };
  emptyDisk?: { capacity: Quantity };
  hostDisk?: { path: string; type: 'Disk' | 'DiskOrCreate'; capacity?: Quantity; shared?: boolean };
  cloudInitNoCloud?: object;
  cloudInitConfigDrive?: object;
  configMap?: object;
  secret?: object;
  serviceAccount?: object;
  downwardAPI?: object;
  downwardMetrics?: object;
  sysprep?: object;
  memoryDump?: object;
}

export interface VmiNetwork {
  name: string;
  pod?: object;
  multus?: { networkName: string; default?: boolean };
}

export interface VmiDomainSpec {
  resources?: { requests?: Record<string, Quantity>; limits?: Record<string, Quantity> };
  cpu?: {
    cores?: number;
    sockets?: number;
    threads?: number;
    maxSockets?: number;
    model?: string;
    features?: { name: string; policy?: 'force' | 'require' | 'optional' | 'disable' | 'forbid' }[];
    dedicatedCpuPlacement?: boolean;
    isolateEmulatorThread?: boolean;
    numa?: { guestMappingPassthrough?: object };
    realtime?: { mask?: string };
  };
  memory?: { guest?: Quantity; maxGuest?: Quantity; hugepages?: { pageSize?: string } };
  machine?: { type?: string };
  firmware?: {
    uuid?: string;
    serial?: string;
    bootloader?: { bios?: { useSerial?: boolean }; efi?: { secureBoot?: boolean; persistent?: boolean } };
    kernelBoot?: {
      kernelArgs?: string;
      container?: { image: string; kernelPath?: string; initrdPath?: string };
    };
  };
  clock?: {
    utc?: { offsetSeconds?: number };
    timezone?: string;
    timer?: {
      hpet?: { tickPolicy?: string; present?: boolean };
      kvm?: { present?: boolean };
      pit?: { tickPolicy?: string; present?: boolean };
      rtc?: { tickPolicy?: string; present?: boolean; track?: 'guest' | 'wall' };
      hyperv?: { present?: boolean };
    };
  };
  features?: {
    acpi?: FeatureState;
    apic?: { enabled?: boolean; endOfInterrupt?: boolean };
    hyperv?: {
      relaxed?: FeatureState;
      vapic?: FeatureState;
      spinlocks?: { enabled?: boolean; spinlocks?: number };
      vpindex?: FeatureState;
      runtime?: FeatureState;
      synic?: FeatureState;
      synictimer?: { enabled?: boolean; direct?: FeatureState };
      reset?: FeatureState;
      vendorid?: { enabled?: boolean; vendorid?: string };
      frequencies?: FeatureState;
      reenlightenment?: FeatureState;
      tlbflush?: FeatureState;
      ipi?: FeatureState;
      evmcs?: FeatureState;
    };
    smm?: FeatureState;
    kvm?: { hidden?: boolean };
    pvspinlock?: FeatureState;
  };
  devices?: {
    disks?: VmiDisk[];
    interfaces?: VmiInterface[];
    inputs?: { name: string; type: string; bus?: string }[];
    watchdog?: { name: string; i6300esb?: { action?: 'poweroff' | 'reset' | 'shutdown' } };
    rng?: object;
    sound?: { name: string; model?: 'ich9' | 'ac97' };
    tpm?: { persistent?: boolean };
    filesystems?: unknown[];
    gpus?: unknown[];
    hostDevices?: unknown[];
    clientPassthrough?: object;
    autoattachPodInterface?: boolean;
    autoattachGraphicsDevice?: boolean;
    autoattachSerialConsole?: boolean;
    autoattachMemBalloon?: boolean;
    autoattachInputDevice?: boolean;
    autoattachVSOCK?: boolean;
    networkInterfaceMultiqueue?: boolean;
    blockMultiQueue?: boolean;
    useVirtioTransitional?: boolean;
    disableHotplug?: boolean;
  };
  ioThreadsPolicy?: 'shared' | 'auto';
  chassis?: { manufacturer?: string; version?: string; serial?: string; asset?: string; sku?: string };
  launchSecurity?: unknown;
}

/** The fields of a kubevirt.io/v1 VirtualMachineInstance the converter reads. Structural: any
 * `VirtualMachineInstance` of @kubevirt-ts/api is assignable to it. Pass the VMI with the API
 * defaults applied (upstream's virt-controller does so before the launcher sees it). */
export interface VmiLike {
  apiVersion?: string;
  kind?: string;
  metadata?: { name?: string; namespace?: string; uid?: string; annotations?: Record<string, string> };
  spec: {
    domain: VmiDomainSpec;
    volumes?: VmiVolume[];
    networks?: VmiNetwork[];
    terminationGracePeriodSeconds?: number;
    hostname?: string;
    subdomain?: string;
    architecture?: string;
  };
}
