// Typed model of the part of the libvirt domain XML (https://libvirt.org/formatdomain.html)
// that kubevirt-ts produces and reads back. Field names follow the XML: an attribute or
// child element `foo` is the field `foo`; repeated elements are arrays; an empty marker
// element (e.g. <readonly/>) is `true`. Optional fields are left out when absent, so a
// model survives parseDomainXml(toDomainXml(model)) unchanged.

export type YesNo = 'yes' | 'no';
export type OnOff = 'on' | 'off';

export interface Domain {
  type: 'kvm' | 'qemu';
  name: string;
  uuid?: string;
  metadata?: KubevirtMetadata;
  /** bytes (serialized with unit="b") */
  memory: number;
  /** bytes (serialized with unit="b") */
  currentMemory?: number;
  memoryBacking?: MemoryBacking;
  vcpu: { placement?: 'static' | 'auto'; count: number };
  iothreads?: number;
  cputune?: CPUTune;
  os: DomainOS;
  sysinfo?: SysInfo;
  features?: Features;
  cpu?: CPU;
  clock?: Clock;
  devices: Devices;
}

export interface KubevirtMetadata {
  uid: string;
  gracePeriodSeconds?: number;
}

export interface CPUTune {
  vcpupin: { vcpu: number; cpuset: string }[];
  emulatorpin?: { cpuset: string };
  iothreadpin?: { iothread: number; cpuset: string }[];
}

export interface MemoryBacking {
  hugepages?: { pages?: { size: number; unit: string }[] };
  source?: { type: 'memfd' | 'file' | 'anonymous' };
  access?: { mode: 'shared' | 'private' };
}

export interface DomainOS {
  type: { arch: string; machine: string; value: 'hvm' };
  loader?: { path: string; readonly?: YesNo; secure?: YesNo; type?: 'pflash' | 'rom' };
  nvram?: { path: string; template?: string };
  kernel?: string;
  initrd?: string;
  cmdline?: string;
  boot?: { dev: 'hd' | 'cdrom' | 'network' | 'fd' }[];
  bootmenu?: { enable: YesNo; timeout?: number };
  bios?: { useserial: YesNo };
  smbios?: { mode: 'sysinfo' | 'host' | 'emulate' };
}

export interface SysInfoEntry {
  name: string;
  value: string;
}

export interface SysInfo {
  type: 'smbios';
  bios?: SysInfoEntry[];
  system?: SysInfoEntry[];
  baseBoard?: SysInfoEntry[];
  chassis?: SysInfoEntry[];
}

export interface HypervFeature {
  state: OnOff;
}

export interface Hyperv {
  mode?: 'custom' | 'passthrough';
  relaxed?: HypervFeature;
  vapic?: HypervFeature;
  spinlocks?: { state: OnOff; retries?: number };
  vpindex?: HypervFeature;
  runtime?: HypervFeature;
  synic?: HypervFeature;
  stimer?: { state: OnOff; direct?: HypervFeature };
  reset?: HypervFeature;
  vendor_id?: { state: OnOff; value?: string };
  frequencies?: HypervFeature;
  reenlightenment?: HypervFeature;
  tlbflush?: HypervFeature;
  ipi?: HypervFeature;
  evmcs?: HypervFeature;
}

/** The hyperv feature elements in libvirt's order (the converter writes, and XML parsing reads, this order). */
export const HYPERV_KEYS: readonly (keyof Hyperv)[] = [
  'relaxed',
  'vapic',
  'spinlocks',
  'vpindex',
  'runtime',
  'synic',
  'stimer',
  'reset',
  'vendor_id',
  'frequencies',
  'reenlightenment',
  'tlbflush',
  'ipi',
  'evmcs',
];

export interface Features {
  acpi?: true;
  apic?: { eoi?: OnOff };
  hyperv?: Hyperv;
  smm?: true;
  kvm?: { hidden?: { state: OnOff } };
  pvspinlock?: { state: OnOff };
  pmu?: { state: OnOff };
  vmport?: { state: OnOff };
}

export interface CPU {
  mode: 'host-model' | 'host-passthrough' | 'custom';
  model?: string;
  topology?: { sockets: number; cores: number; threads: number };
  features?: { name: string; policy: 'force' | 'require' | 'optional' | 'disable' | 'forbid' }[];
  numa?: { cells: { id: number; cpus: string; memory: number; unit: string }[] };
}

export interface Timer {
  name: 'rtc' | 'pit' | 'hpet' | 'kvmclock' | 'hypervclock' | 'tsc' | 'platform';
  tickpolicy?: 'delay' | 'catchup' | 'merge' | 'discard';
  present?: YesNo;
  track?: 'boot' | 'guest' | 'wall';
  frequency?: number;
}

export interface Clock {
  offset: 'utc' | 'localtime' | 'timezone' | 'variable';
  timezone?: string;
  adjustment?: string;
  basis?: 'utc' | 'localtime';
  timers?: Timer[];
}

export interface DriveAddress {
  type: 'drive';
  controller: number;
  bus: number;
  unit: number;
}

export interface PciAddress {
  type: 'pci';
  domain: string;
  bus: string;
  slot: string;
  function: string;
}

export interface Disk {
  type: 'file' | 'block';
  device: 'disk' | 'cdrom' | 'lun';
  model?: 'virtio' | 'virtio-transitional' | 'virtio-non-transitional';
  /** exactly one of file/dev, or none for an empty cdrom */
  source?: { file?: string; dev?: string };
  target: { dev: string; bus: 'virtio' | 'sata' | 'scsi' | 'usb'; tray?: 'open' | 'closed' };
  driver: DiskDriver;
  /** `terminated`: an empty <backingStore/> inside ends the chain, so libvirt does not probe the
   * backing image for a backing file of its own */
  backingStore?: {
    type: 'file' | 'block';
    format: string;
    source: { file?: string; dev?: string };
    terminated?: boolean;
  };
  readonly?: true;
  shareable?: true;
  serial?: string;
  boot?: { order: number };
  blockio?: { logical_block_size: number; physical_block_size: number };
  alias?: string;
  address?: DriveAddress | PciAddress;
}

export interface DiskDriver {
  name: 'qemu';
  type: 'raw' | 'qcow2';
  cache?: 'none' | 'writethrough' | 'writeback' | 'directsync' | 'unsafe';
  io?: 'native' | 'threads' | 'io_uring';
  discard?: 'unmap' | 'ignore';
  error_policy?: 'stop' | 'ignore' | 'report' | 'enospace';
  iothread?: number;
  queues?: number;
}

export interface Interface {
  type: 'ethernet' | 'user' | 'bridge' | 'network';
  mac?: string;
  target?: { dev: string; managed?: YesNo };
  model: string;
  driver?: { name?: 'vhost' | 'qemu'; queues?: number };
  boot?: { order: number };
  rom?: { enabled: YesNo };
  mtu?: number;
  acpi?: { index: number };
  alias?: string;
  address?: PciAddress;
  /** type='user' with libvirt's passt backend (passt runs unprivileged, started by libvirt) */
  backend?: { type: 'passt' };
  /** passt: ports of the host side forwarded to the guest (<portForward proto=...><range start=.../>) */
  portForward?: { proto: 'tcp' | 'udp'; ranges: { start: number }[] }[];
}

export interface Controller {
  type: 'usb' | 'scsi' | 'virtio-serial' | 'pci' | 'sata';
  index: number;
  model?: string;
  driver?: { iothread?: number; queues?: number };
}

export interface Channel {
  type: 'unix';
  source?: { mode: 'bind' | 'connect'; path?: string };
  target: { type: 'virtio'; name: string };
}

export interface Serial {
  type: 'unix' | 'pty';
  source?: { mode: 'bind' | 'connect'; path: string };
  target: { port: number };
  log?: { file: string; append?: OnOff };
}

export interface Console {
  type: 'pty';
  target: { type: 'serial'; port: number };
}

export interface Graphics {
  type: 'vnc';
  listen: { type: 'socket'; socket: string };
}

export interface Video {
  model: { type: 'vga' | 'cirrus' | 'virtio' | 'bochs' | 'ramfb' | 'none'; heads?: number; vram?: number };
}

export interface MemBalloon {
  model: 'virtio' | 'virtio-transitional' | 'virtio-non-transitional' | 'none';
  freePageReporting?: OnOff;
  stats?: { period: number };
}

export interface Rng {
  model: 'virtio' | 'virtio-transitional' | 'virtio-non-transitional';
  backend: { model: 'random'; path: string };
}

export interface Watchdog {
  model: 'i6300esb' | 'ib700' | 'diag288' | 'itco';
  action: 'reset' | 'shutdown' | 'poweroff' | 'pause' | 'none' | 'dump' | 'inject-nmi';
  alias?: string;
}

export interface Input {
  type: 'tablet' | 'mouse' | 'keyboard';
  bus: 'usb' | 'virtio' | 'ps2';
  model?: string;
  alias?: string;
}

export interface Sound {
  model: 'ich9' | 'ac97' | 'ich6' | 'es1370' | 'sb16' | 'usb';
  alias?: string;
}

export interface Tpm {
  model: 'tpm-tis' | 'tpm-crb';
  backend: { type: 'emulator'; version: '2.0' | '1.2'; persistent_state?: YesNo };
}

export interface Devices {
  emulator?: string;
  disks?: Disk[];
  interfaces?: Interface[];
  controllers?: Controller[];
  channels?: Channel[];
  serials?: Serial[];
  consoles?: Console[];
  inputs?: Input[];
  graphics?: Graphics[];
  video?: Video[];
  sound?: Sound[];
  watchdog?: Watchdog[];
  rng?: Rng[];
  tpm?: Tpm[];
  memballoon?: MemBalloon;
}
