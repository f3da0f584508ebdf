// Defaults as a cluster applies them on admission (upstream virt-api mutating webhook,
// SetObjectDefaults_VirtualMachineInstance, and the VM controller's stable firmware UUID).
// Every default here is listed in the package README.
import { createHash } from 'node:crypto';
import { quantityValue } from './quantity.js';
import type { Disk, Interface, RunStrategy, VirtualMachine, VirtualMachineInstance, VirtualMachineInstanceSpec } from './schemas.js';
import { dropNulls } from './validate.js';

export interface DefaultsOptions {
  /** Node architecture (amd64, arm64, s390x, ppc64le). Default: spec.architecture, else amd64. */
  arch?: string;
}

/** Upstream's namespace UUID for firmware UUIDs ("magicUUID" in pkg/virt-controller/watch/vm.go). */
export const FIRMWARE_UUID_NAMESPACE = '6a1a24a1-4061-4607-8bf4-a3963d0c5895';

/** RFC 4122 UUID version 5 (SHA-1) of `name` in namespace `ns` (both as upstream's uuid.NewSHA1). */
export function uuidV5(ns: string, name: string): string {
  const nsBytes = Buffer.from(ns.replace(/-/g, ''), 'hex');
  if (nsBytes.length !== 16) throw new Error(`uuidV5: namespace ${JSON.stringify(ns)} is not a UUID`);
  const h = createHash('sha1').update(nsBytes).update(Buffer.from(name, 'utf8')).digest();
  const b = h.subarray(0, 16);
  b[6] = (b[6]! & 0x0f) | 0x50;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const x = b.toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

/** The firmware UUID upstream derives for a VM/VMI named `name` (CalculateLegacyUUID: UUID v5 of the name). */
export function firmwareUUID(name: string): string {
  return uuidV5(FIRMWARE_UUID_NAMESPACE, name);
}

export const DEFAULT_MACHINE_TYPE: Record<string, string> = {
  amd64: 'q35',
  arm64: 'virt',
  ppc64le: 'pseries',
  s390x: 's390-ccw-virtio',
};

export const DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS = 30;

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const tryQty = (v: unknown): number | undefined => {
  if (typeof v !== 'string' && typeof v !== 'number') return undefined;
  try {
    return quantityValue(v);
  } catch {
    return undefined;
  }
};

/** Set enabled: true on a present feature whose `enabled` is unset (upstream SetDefaults_FeatureState). */
function enableIfPresent(o: Obj | undefined, key: string) {
  const f = o?.[key];
  if (isObj(f) && f['enabled'] === undefined) f['enabled'] = true;
}

/**
 * Apply upstream's admission defaults to a VMI spec in place. `name` is the VMI's (or VM's) name,
 * used for the stable firmware UUID.
 */
export function applyVmiSpecDefaults(spec: VirtualMachineInstanceSpec, name: string | undefined, opts: DefaultsOptions = {}): void {
  const arch = opts.arch ?? spec.architecture ?? 'amd64';
  if (!spec.architecture) spec.architecture = arch;
  const domain = (spec.domain ??= {});

  // machine type
  domain.machine ??= {};
  if (!domain.machine.type) domain.machine.type = DEFAULT_MACHINE_TYPE[arch] ?? 'q35';

  // resources and memory
  domain.resources ??= {};
  const requests = (domain.resources.requests ??= {});
  const limits = domain.resources.limits ?? {};
  if (requests['memory'] === undefined) {
    if (domain.memory?.guest !== undefined) requests['memory'] = domain.memory.guest;
    else if (limits['memory'] !== undefined) requests['memory'] = limits['memory'];
  }
  if (domain.memory?.guest === undefined && requests['memory'] !== undefined) {
    domain.memory ??= {};
    domain.memory.guest = requests['memory'];
  }

  // CPU topology: unset topology takes the CPU limit (else request) as sockets; missing parts become 1.
  const cpu = (domain.cpu ??= {});
  if (!cpu.sockets && !cpu.cores && !cpu.threads) {
    const fromRes = tryQty(limits['cpu']) ?? tryQty(requests['cpu']);
    cpu.sockets = fromRes && fromRes > 0 ? fromRes : 1;
    cpu.cores = 1;
    cpu.threads = 1;
  } else {
    if (!cpu.sockets) cpu.sockets = 1;
    if (!cpu.cores) cpu.cores = 1;
    if (!cpu.threads) cpu.threads = 1;
  }
  if (!cpu.model) cpu.model = 'host-model';
  for (const f of cpu.features ?? []) f.policy ??= 'require';

  // firmware
  domain.firmware ??= {};
  if (!domain.firmware.uuid && name) domain.firmware.uuid = firmwareUUID(name);
  const efi = domain.firmware.bootloader?.efi;
  if (efi && efi.secureBoot === undefined) efi.secureBoot = true;

  // clock timers: a timer that is given is present unless it says otherwise
  const timer = domain.clock?.timer;
  if (timer) for (const t of Object.values(timer)) if (isObj(t) && t['present'] === undefined) t['present'] = true;

  // features: a feature that is given is enabled unless it says otherwise
  const features = domain.features as Obj | undefined;
  if (features) {
    for (const k of ['acpi', 'apic', 'smm', 'pvspinlock']) enableIfPresent(features, k);
    const hv = features['hyperv'] as Obj | undefined;
    if (isObj(hv)) {
      for (const k of Object.keys(hv)) enableIfPresent(hv, k);
      const sl = hv['spinlocks'];
      if (isObj(sl) && sl['spinlocks'] === undefined) sl['spinlocks'] = 4096;
      const st = hv['synictimer'];
      if (isObj(st)) enableIfPresent(st, 'direct');
    }
  }

  // devices
  const devices = (domain.devices ??= {});
  const disks: Disk[] = (devices.disks ??= []);
  // every volume without a disk gets a plain disk (upstream SetDefaultVolumeDisk)
  const diskNames = new Set(disks.map((d) => d.name));
  for (const v of spec.volumes ?? []) {
    if (v.name && !diskNames.has(v.name)) {
      disks.push({ name: v.name, disk: {} });
      diskNames.add(v.name);
    }
  }
  for (const d of disks) {
    if (!d.disk && !d.cdrom && !d.lun) d.disk = {};
    if (d.disk && !d.disk.bus) d.disk.bus = 'virtio';
    if (d.cdrom) {
      if (!d.cdrom.bus) d.cdrom.bus = 'sata';
      if (d.cdrom.readonly === undefined) d.cdrom.readonly = true;
      if (!d.cdrom.tray) d.cdrom.tray = 'closed';
    }
    if (d.lun && !d.lun.bus) d.lun.bus = 'scsi';
  }
  if (devices.disks.length === 0) delete devices.disks;

  // pod network: when no interfaces and no networks are given, one masquerade interface on the pod network
  const interfaces: Interface[] = devices.interfaces ?? [];
  if (devices.autoattachPodInterface !== false && interfaces.length === 0 && (spec.networks ?? []).length === 0) {
    devices.interfaces = [{ name: 'default', masquerade: {} }];
    spec.networks = [{ name: 'default', pod: {} }];
  }
  for (const i of devices.interfaces ?? []) {
    if (!i.model && !i.sriov) i.model = 'virtio';
    for (const p of i.ports ?? []) p.protocol ??= 'TCP';
  }
  if (devices.watchdog && !devices.watchdog.i6300esb) devices.watchdog.i6300esb = {};
  if (devices.watchdog?.i6300esb && !devices.watchdog.i6300esb.action) devices.watchdog.i6300esb.action = 'reset';
  for (const inp of devices.inputs ?? []) inp.bus ??= 'usb';

  if (spec.terminationGracePeriodSeconds === undefined) spec.terminationGracePeriodSeconds = DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS;
}

/** A defaulted deep copy of a VMI, as the cluster stores it after admission. */
export function setVirtualMachineInstanceDefaults(vmi: VirtualMachineInstance, opts: DefaultsOptions = {}): VirtualMachineInstance {
  const out = dropNulls(structuredClone(vmi));
  out.apiVersion ??= 'kubevirt.io/v1';
  out.kind ??= 'VirtualMachineInstance';
  out.metadata ??= {};
  out.spec ??= { domain: {} };
  applyVmiSpecDefaults(out.spec, out.metadata.name, opts);
  return out;
}

/** The run strategy a VM follows: runStrategy, else running (true: Always, false: Halted), else Halted. */
export function vmRunStrategy(vm: Pick<VirtualMachine, 'spec'>): RunStrategy {
  const spec = vm.spec;
  if (spec?.runStrategy) return spec.runStrategy;
  if (spec?.running !== undefined) return spec.running ? 'Always' : 'Halted';
  return 'Halted';
}

/**
 * A defaulted deep copy of a VM: the template spec gets the VMI defaults, with the firmware UUID
 * derived from the VM's name as upstream's VM controller does. `running`/`runStrategy` are kept as
 * given (use vmRunStrategy() to read the effective strategy).
 */
export function setVirtualMachineDefaults(vm: VirtualMachine, opts: DefaultsOptions = {}): VirtualMachine {
  const out = dropNulls(structuredClone(vm));
  out.apiVersion ??= 'kubevirt.io/v1';
  out.kind ??= 'VirtualMachine';
  out.metadata ??= {};
  out.spec ??= { template: { spec: { domain: {} } } };
  out.spec.template ??= { spec: { domain: {} } };
  out.spec.template.spec ??= { domain: {} };
  applyVmiSpecDefaults(out.spec.template.spec, out.metadata.name, opts);
  return out;
}
