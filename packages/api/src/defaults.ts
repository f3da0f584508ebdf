// Defaults as a cluster applies them on admission (upstream virt-api mutating webhook,
// SetObjectDefaults_VirtualMachineInstance, and the VM controller's stable firmware UUID).
// Every default here is listed in the package README.
import { createHash } from 'node:crypto';
import { quantityValue } from './quantity.js';
import type {
  RunStrategy,
  VirtualMachine,
  VirtualMachineInstance,
  VirtualMachineInstanceSpec,
} from './schemas.js';
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

/** o[k] as an object, created when absent; undefined when it holds something else (left alone). */
function ensureObj(o: Obj, k: string): Obj | undefined {
  if (o[k] === undefined) o[k] = {};
  return isObj(o[k]) ? (o[k] as Obj) : undefined;
}
const nameOf = (meta: Obj | undefined): string | undefined =>
  typeof meta?.['name'] === 'string' ? meta['name'] : undefined;
const objOf = (v: unknown): Obj | undefined => (isObj(v) ? v : undefined);
const listOf = (v: unknown): Obj[] => (Array.isArray(v) ? v.filter(isObj) : []);
const setIfUnset = (o: Obj | undefined, k: string, v: unknown) => {
  if (o && (o[k] === undefined || o[k] === '')) o[k] = v;
};

/**
 * Apply upstream's admission defaults to a VMI spec in place. `name` is the VMI's (or VM's) name,
 * used for the stable firmware UUID. Parts that hold the wrong type are left alone (validation
 * reports them).
 */
export function applyVmiSpecDefaults(
  spec0: VirtualMachineInstanceSpec,
  name: string | undefined,
  opts: DefaultsOptions = {},
): void {
  const spec = spec0 as unknown as Obj;
  if (!isObj(spec)) return;
  const arch =
    opts.arch ??
    (typeof spec['architecture'] === 'string' && spec['architecture'] ? spec['architecture'] : 'amd64');
  setIfUnset(spec, 'architecture', arch);
  const domain = ensureObj(spec, 'domain');
  if (!domain) return;

  // machine type
  setIfUnset(ensureObj(domain, 'machine'), 'type', DEFAULT_MACHINE_TYPE[arch] ?? 'q35');

  // resources and memory: requests.memory from guest (else limits), guest from requests
  const resources = ensureObj(domain, 'resources');
  const requests = resources ? ensureObj(resources, 'requests') : undefined;
  const limits = objOf(resources?.['limits']) ?? {};
  const memory0 = domain['memory'];
  if (requests && requests['memory'] === undefined) {
    const guest = objOf(memory0)?.['guest'];
    if (guest !== undefined) requests['memory'] = guest;
    else if (limits['memory'] !== undefined) requests['memory'] = limits['memory'];
  }
  if (requests?.['memory'] !== undefined && (memory0 === undefined || isObj(memory0))) {
    setIfUnset(ensureObj(domain, 'memory'), 'guest', requests['memory']);
  }

  // CPU topology: unset topology takes the CPU limit (else request) as sockets; missing parts become 1.
  const cpu = ensureObj(domain, 'cpu');
  if (cpu) {
    const given = ['sockets', 'cores', 'threads'].some((k) => typeof cpu[k] === 'number' && cpu[k] !== 0);
    if (!given) {
      const fromRes = tryQty(limits['cpu']) ?? tryQty(requests?.['cpu']);
      cpu['sockets'] = fromRes && fromRes > 0 ? fromRes : 1;
      cpu['cores'] = 1;
      cpu['threads'] = 1;
    } else {
      for (const k of ['sockets', 'cores', 'threads']) if (cpu[k] === undefined || cpu[k] === 0) cpu[k] = 1;
    }
    // arm64 has no host-model: upstream's arm64 defaults use host-passthrough
    setIfUnset(cpu, 'model', arch === 'arm64' ? 'host-passthrough' : 'host-model');
    for (const f of listOf(cpu['features'])) setIfUnset(f, 'policy', 'require');
  }

  // firmware
  const firmware = ensureObj(domain, 'firmware');
  if (name) setIfUnset(firmware, 'uuid', firmwareUUID(name));
  // arm64 boots UEFI only: upstream's arm64 defaults give it EFI without secure boot
  if (arch === 'arm64' && firmware && firmware['bootloader'] === undefined)
    firmware['bootloader'] = { efi: { secureBoot: false } };
  const efi = objOf(objOf(firmware?.['bootloader'])?.['efi']);
  if (efi && efi['secureBoot'] === undefined) efi['secureBoot'] = true;

  // clock timers: a timer that is given is present unless it says otherwise
  const timer = objOf(objOf(domain['clock'])?.['timer']);
  if (timer)
    for (const t of Object.values(timer)) if (isObj(t) && t['present'] === undefined) t['present'] = true;

  // features: a feature that is given is enabled unless it says otherwise
  const features = objOf(domain['features']);
  if (features) {
    for (const k of ['acpi', 'apic', 'smm', 'pvspinlock']) enableIfPresent(features, k);
    const hv = objOf(features['hyperv']);
    if (hv) {
      for (const k of Object.keys(hv)) enableIfPresent(hv, k);
      const sl = objOf(hv['spinlocks']);
      if (sl && sl['spinlocks'] === undefined) sl['spinlocks'] = 4096;
      const st = objOf(hv['synictimer']);
      if (st) enableIfPresent(st, 'direct');
    }
  }

  // devices
  const devices = ensureObj(domain, 'devices');
  if (!devices) return;
  if (devices['disks'] === undefined) devices['disks'] = [];
  if (Array.isArray(devices['disks'])) {
    const disks = devices['disks'] as unknown[];
    // every volume without a disk gets a plain disk (upstream SetDefaultVolumeDisk)
    const diskNames = new Set(listOf(disks).map((d) => d['name']));
    for (const v of listOf(spec['volumes'])) {
      if (typeof v['name'] === 'string' && v['name'] && !diskNames.has(v['name'])) {
        disks.push({ name: v['name'], disk: {} });
        diskNames.add(v['name']);
      }
    }
    for (const d of listOf(disks)) {
      if (d['disk'] === undefined && d['cdrom'] === undefined && d['lun'] === undefined) d['disk'] = {};
      setIfUnset(objOf(d['disk']), 'bus', 'virtio');
      const cdrom = objOf(d['cdrom']);
      setIfUnset(cdrom, 'bus', arch === 'amd64' ? 'sata' : 'scsi'); // no SATA controller off amd64
      if (cdrom && cdrom['readonly'] === undefined) cdrom['readonly'] = true;
      setIfUnset(cdrom, 'tray', 'closed');
      setIfUnset(objOf(d['lun']), 'bus', 'scsi');
    }
    if (disks.length === 0) delete devices['disks'];
  }

  // pod network: when no interfaces and no networks are given, one masquerade interface on the pod network
  const noIfaces =
    devices['interfaces'] === undefined ||
    (Array.isArray(devices['interfaces']) && devices['interfaces'].length === 0);
  const noNets =
    spec['networks'] === undefined || (Array.isArray(spec['networks']) && spec['networks'].length === 0);
  if (devices['autoattachPodInterface'] !== false && noIfaces && noNets) {
    devices['interfaces'] = [{ name: 'default', masquerade: {} }];
    spec['networks'] = [{ name: 'default', pod: {} }];
  }
  for (const i of listOf(devices['interfaces'])) {
    if (i['sriov'] === undefined) setIfUnset(i, 'model', 'virtio');
    for (const p of listOf(i['ports'])) setIfUnset(p, 'protocol', 'TCP');
  }
  const wd = objOf(devices['watchdog']);
  if (wd) setIfUnset(ensureObj(wd, 'i6300esb'), 'action', 'reset');
  for (const inp of listOf(devices['inputs'])) setIfUnset(inp, 'bus', 'usb');

  if (spec['terminationGracePeriodSeconds'] === undefined)
    spec['terminationGracePeriodSeconds'] = DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS;
}

/** A defaulted deep copy of a VMI, as the cluster stores it after admission. */
export function setVirtualMachineInstanceDefaults(
  vmi: VirtualMachineInstance,
  opts: DefaultsOptions = {},
): VirtualMachineInstance {
  if (!isObj(vmi))
    throw new Error('setVirtualMachineInstanceDefaults: a VirtualMachineInstance must be an object');
  const out = dropNulls(structuredClone(vmi)) as unknown as Obj;
  out['apiVersion'] ??= 'kubevirt.io/v1';
  out['kind'] ??= 'VirtualMachineInstance';
  const meta = ensureObj(out, 'metadata');
  const spec = ensureObj(out, 'spec');
  if (spec) applyVmiSpecDefaults(spec as unknown as VirtualMachineInstanceSpec, nameOf(meta), opts);
  return out as unknown as VirtualMachineInstance;
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
  if (!isObj(vm)) throw new Error('setVirtualMachineDefaults: a VirtualMachine must be an object');
  const out = dropNulls(structuredClone(vm)) as unknown as Obj;
  out['apiVersion'] ??= 'kubevirt.io/v1';
  out['kind'] ??= 'VirtualMachine';
  const meta = ensureObj(out, 'metadata');
  const spec = ensureObj(out, 'spec');
  const template = spec ? ensureObj(spec, 'template') : undefined;
  const tspec = template ? ensureObj(template, 'spec') : undefined;
  if (tspec) applyVmiSpecDefaults(tspec as unknown as VirtualMachineInstanceSpec, nameOf(meta), opts);
  return out as unknown as VirtualMachine;
}
