// Typed model of the part of the libvirt domain XML (https://libvirt.org/formatdomain.html)
// that kubevirt-ts produces and reads back. Field names follow the XML: an attribute or
// child element `foo` is the field `foo`; repeated elements are arrays; an empty marker
// element (e.g. <readonly/>) is `true`. Optional fields are left out when absent, so a
// model survives parseDomainXml(toDomainXml(model)) unchanged.

/** The value of a libvirt yes/no attribute (e.g. `<loader readonly='yes'>`). */
export type YesNo = 'yes' | 'no';
/** The value of a libvirt on/off attribute (e.g. `<relaxed state='on'/>`). */
export type OnOff = 'on' | 'off';

/**
 * A libvirt domain: the root `<domain type=...>` element. `type` is `kvm` with /dev/kvm and `qemu`
 * under software emulation (TCG); `name` is `<namespace>_<name>` of the VMI (see `domainName`).
 */
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
  /**
   * Arguments appended to QEMU's command line through libvirt's QEMU namespace passthrough
   * (`<qemu:commandline><qemu:arg value=.../>`, namespace `xmlns:qemu`): the standalone passt NIC
   * (`-netdev stream` to the launcher's passt). libvirt marks such a domain tainted (custom-argv).
   */
  qemuArgs?: string[];
}

/** `<metadata><kubevirt xmlns="http://kubevirt.io">`: the VMI's uid and its termination grace
 * period in seconds (written as `<graceperiod><deletionGracePeriodSeconds>`), as upstream KubeVirt stores them. */
export interface KubevirtMetadata {
  uid: string;
  gracePeriodSeconds?: number;
}

/** `<cputune>`: pinning of vCPUs, the emulator thread and IO threads to host CPUs (`cpuset` is a
 * libvirt CPU list such as `"2"` or `"2-3"`), from `spec.domain.cpu.dedicatedCpuPlacement`. */
export interface CPUTune {
  vcpupin: { vcpu: number; cpuset: string }[];
  emulatorpin?: { cpuset: string };
  iothreadpin?: { iothread: number; cpuset: string }[];
}

/** `<memoryBacking>`: hugepages (each page `size` in `unit`; no pages: the host's default size),
 * the memory source (memfd with hugepages, as upstream) and shared/private access. */
export interface MemoryBacking {
  hugepages?: { pages?: { size: number; unit: string }[] };
  source?: { type: 'memfd' | 'file' | 'anonymous' };
  access?: { mode: 'shared' | 'private' };
}

/** `<os>`: machine type, firmware (`loader` + `nvram` for EFI, `bios useserial` for BIOS), direct
 * kernel boot (`kernel`, `initrd`, `cmdline`), boot device order and the SMBIOS mode. */
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

/** One `<entry name=...>value</entry>` of an SMBIOS table in `<sysinfo>`. */
export interface SysInfoEntry {
  name: string;
  value: string;
}

/** `<sysinfo type='smbios'>`: the SMBIOS tables (bios, system, baseBoard, chassis) the guest reads;
 * from the VMI's firmware (uuid, serial), `spec.domain.chassis` and the node's `SMBios` settings. */
export interface SysInfo {
  type: 'smbios';
  bios?: SysInfoEntry[];
  system?: SysInfoEntry[];
  baseBoard?: SysInfoEntry[];
  chassis?: SysInfoEntry[];
}

/** A Hyper-V enlightenment that is only switched on or off (e.g. `<relaxed state='on'/>`). */
export interface HypervFeature {
  state: OnOff;
}

/** `<features><hyperv>`: the Hyper-V enlightenments for Windows guests, from
 * `spec.domain.features.hyperv` (one field per libvirt element; written in `HYPERV_KEYS` order). */
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

/** `<features>`: ACPI, APIC, Hyper-V, SMM (needed by Secure Boot), KVM hidden state, pvspinlock,
 * PMU, vmport and, when emulating, TCG's translation-cache size; a marker element such as `<acpi/>` is `true`. */
export interface Features {
  acpi?: true;
  apic?: { eoi?: OnOff };
  hyperv?: Hyperv;
  smm?: true;
  /** `<tcg><tb-cache>`: the size of QEMU's TCG translation cache in bytes (domain type `qemu` only) */
  tcg?: { tbCache: number };
  kvm?: { hidden?: { state: OnOff } };
  pvspinlock?: { state: OnOff };
  pmu?: { state: OnOff };
  vmport?: { state: OnOff };
}

/** `<cpu>`: the CPU mode (`host-model`, `host-passthrough` or a named `custom` model), its
 * sockets/cores/threads topology, CPU feature policies and NUMA cells (cell `memory` in `unit`). */
export interface CPU {
  mode: 'host-model' | 'host-passthrough' | 'custom';
  model?: string;
  topology?: { sockets: number; cores: number; threads: number };
  features?: { name: string; policy: 'force' | 'require' | 'optional' | 'disable' | 'forbid' }[];
  numa?: { cells: { id: number; cpus: string; memory: number; unit: string }[] };
}

/** One `<timer>` of `<clock>` (rtc, pit, hpet, kvmclock, hypervclock, ...); `frequency` in Hz (tsc). */
export interface Timer {
  name: 'rtc' | 'pit' | 'hpet' | 'kvmclock' | 'hypervclock' | 'tsc' | 'platform';
  tickpolicy?: 'delay' | 'catchup' | 'merge' | 'discard';
  present?: YesNo;
  track?: 'boot' | 'guest' | 'wall';
  frequency?: number;
}

/** `<clock>`: the guest clock's offset (UTC, or a `timezone` name) and its timers; from `spec.domain.clock`. */
export interface Clock {
  offset: 'utc' | 'localtime' | 'timezone' | 'variable';
  timezone?: string;
  adjustment?: string;
  basis?: 'utc' | 'localtime';
  timers?: Timer[];
}

/** `<address type='drive'>`: controller, bus and unit of a disk on a SATA/SCSI controller. */
export interface DriveAddress {
  type: 'drive';
  controller: number;
  bus: number;
  unit: number;
}

/** `<address type='pci'>`: a PCI address, each part a hex string as libvirt writes it
 * (`domain='0x0000' bus='0x00' slot='0x05' function='0x0'`). */
export interface PciAddress {
  type: 'pci';
  domain: string;
  bus: string;
  slot: string;
  function: string;
}

/** `<disk>`: one block device of the guest, from a disk of `spec.domain.devices.disks` and its
 * volume (`type='file'` for images, `type='block'` for block-mode PVCs). */
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

/** `<driver name='qemu'>` of a disk: image format (raw/qcow2), cache and IO modes, discard,
 * error policy, the IO thread serving it and the number of virtio queues. */
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

/** `<interface>`: one NIC of the guest, from `spec.domain.devices.interfaces`: a tap device
 * (`ethernet`, set up by the launcher's network phase 1) or user-mode networking (`user`: slirp). A NIC on
 * the launcher's passt has none: it is in `qemuArgs`. */
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
}

/** `<controller>`: a USB, SCSI, virtio-serial, PCI or SATA controller with its `index`. */
export interface Controller {
  type: 'usb' | 'scsi' | 'virtio-serial' | 'pci' | 'sata';
  index: number;
  model?: string;
  driver?: { iothread?: number; queues?: number };
}

/** `<channel type='unix'>`: a virtio-serial channel, e.g. the QEMU guest agent's `org.qemu.guest_agent.0`. */
export interface Channel {
  type: 'unix';
  source?: { mode: 'bind' | 'connect'; path?: string };
  target: { type: 'virtio'; name: string };
}

/** `<serial>`: a serial port; the console is a unix socket the launcher binds (mode `bind`),
 * optionally logged to a file. */
export interface Serial {
  type: 'unix' | 'pty';
  source?: { mode: 'bind' | 'connect'; path: string };
  target: { port: number };
  log?: { file: string; append?: OnOff };
}

/** `<console type='pty'>`: the console on serial port `target.port`. */
export interface Console {
  type: 'pty';
  target: { type: 'serial'; port: number };
}

/** `<graphics type='vnc'>`: the VNC server, listening on a unix socket in the Pod (never on TCP). */
export interface Graphics {
  type: 'vnc';
  listen: { type: 'socket'; socket: string };
}

/** `<video><model type=...>`: the display adapter; `vram` in KiB. */
export interface Video {
  model: { type: 'vga' | 'cirrus' | 'virtio' | 'bochs' | 'ramfb' | 'none'; heads?: number; vram?: number };
}

/** `<memballoon>`: the virtio balloon device (`none` disables it); statistics `period` in seconds. */
export interface MemBalloon {
  model: 'virtio' | 'virtio-transitional' | 'virtio-non-transitional' | 'none';
  freePageReporting?: OnOff;
  stats?: { period: number };
}

/** `<rng>`: a virtio random-number generator fed from a host device (`backend.path`, e.g. /dev/urandom). */
export interface Rng {
  model: 'virtio' | 'virtio-transitional' | 'virtio-non-transitional';
  backend: { model: 'random'; path: string };
}

/** `<watchdog>`: an emulated watchdog device and what happens to the guest when it fires. */
export interface Watchdog {
  model: 'i6300esb' | 'ib700' | 'diag288' | 'itco';
  action: 'reset' | 'shutdown' | 'poweroff' | 'pause' | 'none' | 'dump' | 'inject-nmi';
  alias?: string;
}

/** `<input>`: a tablet, mouse or keyboard on the USB, virtio or PS/2 bus. */
export interface Input {
  type: 'tablet' | 'mouse' | 'keyboard';
  bus: 'usb' | 'virtio' | 'ps2';
  model?: string;
  alias?: string;
}

/** `<sound>`: an emulated sound card. */
export interface Sound {
  model: 'ich9' | 'ac97' | 'ich6' | 'es1370' | 'sb16' | 'usb';
  alias?: string;
}

/** `<tpm>`: an emulated TPM (swtpm), version 2.0 or 1.2, its state optionally persistent. */
export interface Tpm {
  model: 'tpm-tis' | 'tpm-crb';
  backend: { type: 'emulator'; version: '2.0' | '1.2'; persistent_state?: YesNo };
}

/** `<devices>`: every device of the domain; `emulator` is the QEMU binary's path. */
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
