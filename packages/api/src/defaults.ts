// Defaults as a cluster applies them on admission (upstream virt-api mutating webhook,
// SetObjectDefaults_VirtualMachineInstance, and the VM controller's stable firmware UUID).
// Every default here is listed in the package README.
import { hash } from 'node:crypto';
import { quantityValue } from './quantity.js';
import type {
  RunStrategy,
  VirtualMachine,
  VirtualMachineInstance,
  VirtualMachineInstanceSpec,
} from './schemas.js';
import { HYPERV_REQUIRES, dropNulls } from './validate.js';

/** Cluster-wide settings that decide some defaults (upstream's KubeVirt CR configuration). Every
 * field is optional. */
export interface DefaultsOptions {
  /** Node architecture (amd64, arm64, s390x, ppc64le). Default: spec.architecture, else amd64. */
  arch?: string;
  /** The cluster's default CPU model (upstream KubeVirt CR `cpuModel`). Default: `host-model` (arm64: host-passthrough). */
  cpuModel?: string;
  /** Memory overcommit in percent (upstream `developerConfiguration.memoryOvercommit`): the derived request is guest*100/overcommit. Default 100. */
  memoryOvercommit?: number;
  /** The cluster's eviction strategy (upstream `evictionStrategy`), given to VMIs that set none. Default: none. */
  evictionStrategy?: 'None' | 'LiveMigrate' | 'LiveMigrateIfPossible' | 'External';
  /**
   * The binding of the pod network interface a VMI without interfaces and networks gets (upstream
   * `network.defaultNetworkInterface`). Default here `masquerade`, what kubevirt-ts's installed KubeVirt CR sets;
   * a cluster whose CR leaves it unset passes upstream's default, `bridge`. `slirp` fails as upstream's does.
   */
  defaultNetworkInterface?: 'bridge' | 'masquerade' | 'slirp';
  /** Whether the pod network may use the bridge binding (upstream `network.permitBridgeInterfaceOnPodNetwork`, default true). */
  permitBridgeInterfaceOnPodNetwork?: boolean;
}

/**
 * A default the cluster's configuration cannot give (e.g. the bridge binding as the default interface while the
 * configuration does not permit it on the pod network): admission refuses the object with this message.
 */
export class DefaultsError extends Error {
  override name = 'DefaultsError';
}

/** Upstream's namespace UUID for firmware UUIDs ("magicUUID" in pkg/virt-controller/watch/vm.go). */
export const FIRMWARE_UUID_NAMESPACE = '6a1a24a1-4061-4607-8bf4-a3963d0c5895';

const nsBytesCache = new Map<string, Buffer>();

/** RFC 4122 UUID version 5 (SHA-1) of `name` in namespace `ns` (both as upstream's uuid.NewSHA1). */
export function uuidV5(ns: string, name: string): string {
  let nsBytes = nsBytesCache.get(ns);
  if (!nsBytes) {
    nsBytes = Buffer.from(ns.replace(/-/g, ''), 'hex');
    if (nsBytes.length !== 16) throw new Error(`uuidV5: namespace ${JSON.stringify(ns)} is not a UUID`);
    if (nsBytesCache.size < 16) nsBytesCache.set(ns, nsBytes);
  }
  const b = hash('sha1', Buffer.concat([nsBytes, Buffer.from(name, 'utf8')]), 'buffer');
  b[6] = (b[6]! & 0x0f) | 0x50;
  b[8] = (b[8]! & 0x3f) | 0x80;
  const x = b.toString('hex', 0, 16);
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}

/** The firmware UUID upstream derives for a VM/VMI named `name` (CalculateLegacyUUID: UUID v5 of the name). */
export function firmwareUUID(name: string): string {
  return uuidV5(FIRMWARE_UUID_NAMESPACE, name);
}

/** The default QEMU machine type (`spec.domain.machine.type`) by architecture (q35 on amd64). */
export const DEFAULT_MACHINE_TYPE: Record<string, string> = {
  amd64: 'q35',
  arm64: 'virt',
  ppc64le: 'pseries',
  s390x: 's390-ccw-virtio',
};

/** Default `spec.terminationGracePeriodSeconds` of a VMI: 30 seconds from the ACPI shutdown request
 * until the guest is destroyed. */
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

const featureEnabled = (f: unknown) => isObj(f) && f['enabled'] === true;

/**
 * Upstream SetHypervFeatureDependencies: an enabled hyperv feature turns on the feature it needs when the user
 * left that one unset (an explicitly disabled requirement is left for validation to report); enabled evmcs
 * adds the CPU feature `vmx` with policy `require`.
 */
function setHypervDependencies(domain: Obj) {
  const hv = objOf(objOf(domain['features'])?.['hyperv']);
  if (!hv) return;
  for (const [feat, req] of HYPERV_REQUIRES) {
    if (!featureEnabled(hv[feat])) continue;
    const r = hv[req];
    if (r === undefined) hv[req] = { enabled: true };
    else if (isObj(r) && r['enabled'] === undefined) r['enabled'] = true;
    else if (!featureEnabled(r)) return; // upstream stops at the first conflict
  }
  const evmcs = objOf(hv['evmcs']);
  if (evmcs && evmcs['enabled'] !== false) {
    const cpu = ensureObj(domain, 'cpu');
    if (!cpu) return;
    if (!Array.isArray(cpu['features'])) cpu['features'] = [];
    const features = cpu['features'] as unknown[];
    const vmx = listOf(features).find((f) => f['name'] === 'vmx');
    if (vmx) vmx['policy'] = 'require';
    else features.push({ name: 'vmx', policy: 'require' });
  }
}

/** Probe defaults (upstream SetDefaults_Probe). */
function setProbeDefaults(probe: Obj | undefined) {
  if (!probe) return;
  const atLeast = (k: string, min: number, v: number) => {
    if (typeof probe[k] !== 'number' || (probe[k] as number) < min) probe[k] = v;
  };
  atLeast('timeoutSeconds', 1, 1);
  atLeast('periodSeconds', 1, 10);
  atLeast('successThreshold', 1, 1);
  atLeast('failureThreshold', 1, 3);
}

/** A quantity holding a positive value (upstream `!q.IsZero()`). */
const nonZero = (v: unknown) => (tryQty(v) ?? 0) !== 0;

/**
 * Apply upstream's admission defaults to a VMI spec in place, in upstream's order (v1.1.0 virt-api
 * `SetDefaultVirtualMachineInstance`: spec defaults, `SetObjectDefaults_VirtualMachineInstance`, hyperv
 * dependencies, architecture defaults). `name` is the VMI's (or VM's) name, used for the stable firmware
 * UUID. Parts that hold the wrong type are left alone (validation reports them). Every default is listed,
 * with its upstream source, in the package README.
 */
export function applyVmiSpecDefaults(
  spec0: VirtualMachineInstanceSpec,
  name: string | undefined,
  opts: DefaultsOptions = {},
): void {
  const spec = spec0 as unknown as Obj;
  if (!isObj(spec)) return;
  // setDefaultArchitecture
  const arch =
    opts.arch ??
    (typeof spec['architecture'] === 'string' && spec['architecture'] ? spec['architecture'] : 'amd64');
  setIfUnset(spec, 'architecture', arch);
  const domain = ensureObj(spec, 'domain');
  if (!domain) return;

  // setDefaultMachineType
  setIfUnset(ensureObj(domain, 'machine'), 'type', DEFAULT_MACHINE_TYPE[arch] ?? 'q35');

  // setDefaultResourceRequests: a limit without a request becomes the request; no memory request:
  // memory.guest, else the hugepage size, scaled by the overcommit
  const resources = ensureObj(domain, 'resources');
  if (resources) {
    const limits = objOf(resources['limits']) ?? {};
    const requests0 = objOf(resources['requests']);
    const req = () => ensureObj(resources, 'requests');
    for (const k of ['cpu', 'memory'])
      if (nonZero(limits[k]) && !nonZero(requests0?.[k])) {
        const r = req();
        if (r) r[k] = limits[k];
      }
    if (objOf(resources['requests'])?.['memory'] === undefined) {
      const memory = objOf(domain['memory']);
      let from: unknown = memory?.['guest'];
      if (from === undefined) from = objOf(memory?.['hugepages'])?.['pageSize'];
      const bytes = tryQty(from);
      if (bytes !== undefined && bytes > 0) {
        const overcommit = opts.memoryOvercommit ?? 100;
        const r = req();
        if (r) r['memory'] = overcommit === 100 ? from : String(Math.floor((bytes * 100) / overcommit));
      }
    }
  }

  // SetDefaultGuestCPUTopology: no topology at all -> sockets from the CPU limit, else request (rounded up)
  const cpu0 = domain['cpu'];
  if (cpu0 === undefined || isObj(cpu0)) {
    const c = objOf(cpu0);
    const given = ['sockets', 'cores', 'threads'].some((k) => typeof c?.[k] === 'number' && c[k] !== 0);
    if (!given) {
      const cpu = ensureObj(domain, 'cpu')!;
      const limits = objOf(objOf(domain['resources'])?.['limits']);
      const requests = objOf(objOf(domain['resources'])?.['requests']);
      const q = limits?.['cpu'] !== undefined ? tryQty(limits['cpu']) : tryQty(requests?.['cpu']);
      cpu['sockets'] = q !== undefined && q > 0 ? Math.ceil(q) : 1;
      cpu['cores'] = 1;
      cpu['threads'] = 1;
    }
  }

  // setDefaultPullPoliciesOnContainerDisks: ":latest" or no tag/digest -> Always, else IfNotPresent
  for (const v of listOf(spec['volumes'])) {
    const cd = objOf(v['containerDisk']);
    if (!cd || (cd['imagePullPolicy'] !== undefined && cd['imagePullPolicy'] !== '')) continue;
    const image = typeof cd['image'] === 'string' ? cd['image'] : '';
    cd['imagePullPolicy'] = image.endsWith(':latest') || !/[:@]/.test(image) ? 'Always' : 'IfNotPresent';
  }

  // setDefaultEvictionStrategy
  if (opts.evictionStrategy) setIfUnset(spec, 'evictionStrategy', opts.evictionStrategy);

  // SetDefaultNetworkInterface: no interfaces and no networks -> the cluster's default binding on the pod network
  const devices = ensureObj(domain, 'devices');
  if (devices) {
    const empty = (x: unknown) => x === undefined || (Array.isArray(x) && x.length === 0);
    if (
      devices['autoattachPodInterface'] !== false &&
      empty(devices['interfaces']) &&
      empty(spec['networks'])
    ) {
      const binding = opts.defaultNetworkInterface ?? 'masquerade';
      // upstream's messages (SetDefaultNetworkInterface)
      if (binding === 'slirp') throw new DefaultsError('slirp interface is deprecated as of v1.3');
      if (binding === 'bridge' && opts.permitBridgeInterfaceOnPodNetwork === false)
        throw new DefaultsError('bridge interface is not enabled in kubevirt-config');
      devices['interfaces'] = [{ name: 'default', [binding]: {} }];
      spec['networks'] = [{ name: 'default', pod: {} }];
    }
  }

  // SetDefaultVolumeDisk: a volume that is neither a disk nor a filesystem gets a disk
  if (devices && (devices['disks'] === undefined || Array.isArray(devices['disks']))) {
    const disks = (devices['disks'] ?? []) as unknown[];
    const taken = new Set([...listOf(disks), ...listOf(devices['filesystems'])].map((d) => d['name']));
    for (const v of listOf(spec['volumes']))
      if (typeof v['name'] === 'string' && v['name'] && !taken.has(v['name'])) {
        disks.push({ name: v['name'] });
        taken.add(v['name']);
      }
    if (disks.length > 0) devices['disks'] = disks;
  }

  // ---- SetObjectDefaults_VirtualMachineInstance
  const firmware = ensureObj(domain, 'firmware');
  // upstream gives a VMI a random UUID and a VM's VMIs the UUID of the VM's name; both stable here
  if (name) setIfUnset(firmware, 'uuid', firmwareUUID(name));
  const features = ensureObj(domain, 'features');
  if (features) {
    // ACPI is a value, not a pointer, upstream: always present and enabled unless disabled
    if (features['acpi'] === undefined) features['acpi'] = {};
    for (const k of ['acpi', 'apic', 'smm', 'pvspinlock']) enableIfPresent(features, k);
    const hv = objOf(features['hyperv']);
    if (hv) {
      for (const k of Object.keys(hv)) enableIfPresent(hv, k);
      const sl = objOf(hv['spinlocks']);
      if (sl && sl['enabled'] === true && sl['spinlocks'] === undefined) sl['spinlocks'] = 4096;
      const st = objOf(hv['synictimer']);
      if (st) enableIfPresent(st, 'direct');
    }
  }
  const timer = objOf(objOf(domain['clock'])?.['timer']);
  if (timer)
    for (const t of Object.values(timer)) if (isObj(t) && t['present'] === undefined) t['present'] = true;
  if (devices) {
    for (const d of listOf(devices['disks'])) {
      if (d['disk'] === undefined && d['cdrom'] === undefined && d['lun'] === undefined) d['disk'] = {};
      const cdrom = objOf(d['cdrom']);
      if (cdrom && cdrom['readonly'] === undefined) cdrom['readonly'] = true;
      setIfUnset(cdrom, 'tray', 'closed');
      enableIfPresent(objOf(d['blockSize']), 'matchVolume');
    }
    const wd = objOf(devices['watchdog']);
    if (wd) setIfUnset(ensureObj(wd, 'i6300esb'), 'action', 'reset');
    for (const g of listOf(devices['gpus']))
      enableIfPresent(objOf(objOf(g['virtualGPUOptions'])?.['display']), 'ramFB');
    for (const inp of listOf(devices['inputs'])) {
      setIfUnset(inp, 'bus', 'usb');
      setIfUnset(inp, 'type', 'tablet');
    }
  }
  setProbeDefaults(objOf(spec['livenessProbe']));
  setProbeDefaults(objOf(spec['readinessProbe']));

  // setDefaultHypervFeatureDependencies
  setHypervDependencies(domain);

  // setDefaultCPUArch: arm64 -> host-passthrough, UEFI without secure boot, virtio disks;
  // everything else (upstream's amd64 defaults) -> SATA disks and the cluster's CPU model, else host-model
  // (arm64 deviation: upstream gives a cdrom virtio, which its own validation then refuses; cdroms get scsi)
  const bus = arch === 'arm64' ? 'virtio' : 'sata';
  for (const d of listOf(devices?.['disks']))
    for (const k of ['disk', 'cdrom', 'lun'])
      setIfUnset(objOf(d[k]), 'bus', k === 'cdrom' && arch === 'arm64' ? 'scsi' : bus);
  const cpu = ensureObj(domain, 'cpu');
  setIfUnset(cpu, 'model', arch === 'arm64' ? 'host-passthrough' : (opts.cpuModel ?? 'host-model'));
  if (arch === 'arm64' && firmware && firmware['bootloader'] === undefined)
    firmware['bootloader'] = { efi: { secureBoot: false } };
}

/** Upstream setGuestMemoryStatus: a VMI with memory.guest starts with that much at boot, current and requested. */
function setGuestMemoryStatus(vmi: Obj) {
  const guest = objOf(objOf(objOf(vmi['spec'])?.['domain'])?.['memory'])?.['guest'];
  if (guest === undefined) return;
  const status = ensureObj(vmi, 'status');
  if (status) status['memory'] = { guestAtBoot: guest, guestCurrent: guest, guestRequested: guest };
}

/** A defaulted deep copy of a VMI, as the cluster stores it after admission. */
export function setVirtualMachineInstanceDefaults(
  vmi: VirtualMachineInstance,
  opts: DefaultsOptions = {},
): VirtualMachineInstance {
  if (!isObj(vmi))
    throw new Error('setVirtualMachineInstanceDefaults: a VirtualMachineInstance must be an object');
  const out = dropNulls(vmi) as unknown as Obj; // dropNulls is the deep copy
  out['apiVersion'] ??= 'kubevirt.io/v1';
  out['kind'] ??= 'VirtualMachineInstance';
  const meta = ensureObj(out, 'metadata');
  const spec = ensureObj(out, 'spec');
  if (spec) applyVmiSpecDefaults(spec as unknown as VirtualMachineInstanceSpec, nameOf(meta), opts);
  setGuestMemoryStatus(out);
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
 * derived from the VM's name as upstream's VM controller does (not when the VM names an instance type or a
 * preference: its VMIs get the defaults after those are applied). `running`/`runStrategy` are kept as
 * given (use vmRunStrategy() to read the effective strategy).
 */
export function setVirtualMachineDefaults(vm: VirtualMachine, opts: DefaultsOptions = {}): VirtualMachine {
  if (!isObj(vm)) throw new Error('setVirtualMachineDefaults: a VirtualMachine must be an object');
  const out = dropNulls(vm) as unknown as Obj; // dropNulls is the deep copy
  out['apiVersion'] ??= 'kubevirt.io/v1';
  out['kind'] ??= 'VirtualMachine';
  const meta = ensureObj(out, 'metadata');
  const spec = ensureObj(out, 'spec');
  const template = spec ? ensureObj(spec, 'template') : undefined;
  const tspec = template ? ensureObj(template, 'spec') : undefined;
  // with an instance type or preference the template is defaulted only once they are applied (the VM controller,
  // on the VMI): defaults here would conflict with the instance type and hide what the preference prefers
  if (tspec && spec?.['instancetype'] === undefined && spec?.['preference'] === undefined)
    applyVmiSpecDefaults(tspec as unknown as VirtualMachineInstanceSpec, nameOf(meta), opts);
  return out as unknown as VirtualMachine;
}
