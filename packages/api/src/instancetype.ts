// instancetype.kubevirt.io/v1beta1: instance types (CPU, memory and devices a VM gets) and preferences (defaults
// for what a VM leaves unset), namespaced and cluster-wide, and how they are applied to a VMI spec, as upstream
// v1.9.0 applies them (pkg/instancetype/apply, preference/apply, preference/requirements). Pure functions: the
// admission webhook and the VM controller look the objects up and call these.
import { Type, type Static } from '@sinclair/typebox';
import { quantityValue } from './quantity.js';
import { Arr, Bool, Enum, Line, Opt, Quantity, StringMap, Strict, UInt } from './schema-helpers.js';
import {
  ClockSchema,
  CPUFeatureSchema,
  CPUSchema,
  DevicesSchema,
  DiskSchema,
  DomainSpecSchema,
  EFISchema,
  FeaturesSchema,
  HugepagesSchema,
  HypervSchema,
  ObjectMetaSchema,
  type ObjectMeta,
  type VirtualMachineInstanceSpec,
  type VirtualMachineStatus,
} from './schemas.js';

/** The API group of instance types and preferences. */
export const INSTANCETYPE_GROUP = 'instancetype.kubevirt.io';
/** The apiVersion of instance types and preferences this package models. */
export const INSTANCETYPE_API_VERSION = 'instancetype.kubevirt.io/v1beta1';

/** The kinds a VM's `spec.instancetype.kind` names (no kind: the cluster-wide one, as upstream). */
export const INSTANCETYPE_KINDS = [
  'VirtualMachineInstancetype',
  'VirtualMachineClusterInstancetype',
] as const;
/** The kinds a VM's `spec.preference.kind` names (no kind: the cluster-wide one, as upstream). */
export const PREFERENCE_KINDS = ['VirtualMachinePreference', 'VirtualMachineClusterPreference'] as const;
/** VirtualMachineInstancetype or VirtualMachineClusterInstancetype. */
export type InstancetypeKind = (typeof INSTANCETYPE_KINDS)[number];
/** VirtualMachinePreference or VirtualMachineClusterPreference. */
export type PreferenceKind = (typeof PREFERENCE_KINDS)[number];

// ---------------------------------------------------------------- schemas

const cpuProps = CPUSchema.properties;
const devProps = DevicesSchema.properties;
const featProps = FeaturesSchema.properties;

/** `spec.cpu` of an instance type (upstream `CPUInstancetype`): `guest` vCPUs are required. */
export const CPUInstancetypeSchema = Strict({
  guest: UInt('vCPUs of the guest, laid out as the preference prefers (default: sockets)'),
  model: Opt(Line()),
  dedicatedCPUPlacement: Opt(Bool()),
  numa: cpuProps.numa,
  isolateEmulatorThread: Opt(Bool()),
  realtime: cpuProps.realtime,
  maxSockets: Opt(UInt()),
});

/** `spec.memory` of an instance type (upstream `MemoryInstancetype`): `guest` is required. */
export const MemoryInstancetypeSchema = Strict({
  guest: Quantity('memory of the guest'),
  hugepages: Opt(HugepagesSchema),
  overcommitPercent: Opt(
    Type.Integer({ minimum: 0, maximum: 100, description: 'request this percentage less than guest' }),
  ),
  maxGuest: Opt(Quantity()),
});

/** TypeBox schema of an instance type's `spec` (upstream `VirtualMachineInstancetypeSpec`). */
export const VirtualMachineInstancetypeSpecSchema = Strict({
  nodeSelector: Opt(StringMap()),
  schedulerName: Opt(Line()),
  cpu: CPUInstancetypeSchema,
  memory: MemoryInstancetypeSchema,
  gpus: devProps.gpus,
  hostDevices: devProps.hostDevices,
  ioThreadsPolicy: DomainSpecSchema.properties.ioThreadsPolicy,
  launchSecurity: DomainSpecSchema.properties.launchSecurity,
  annotations: Opt(StringMap('added to the VMI; a VM annotation with another value conflicts')),
});
/** The `spec` of an instance type: CPU, memory, devices and scheduling its VMs get. */
export type VirtualMachineInstancetypeSpec = Static<typeof VirtualMachineInstancetypeSpecSchema>;

/** The CPU topologies a preference can prefer (upstream's, with the deprecated `prefer*` spellings). */
export const PREFERRED_CPU_TOPOLOGIES = [
  'sockets',
  'cores',
  'threads',
  'spread',
  'any',
  'preferSockets',
  'preferCores',
  'preferThreads',
  'preferSpread',
  'preferAny',
] as const;
/** A topology of {@link PREFERRED_CPU_TOPOLOGIES}. */
export type PreferredCPUTopology = (typeof PREFERRED_CPU_TOPOLOGIES)[number];

/** TypeBox schema of a preference's `spec` (upstream `VirtualMachinePreferenceSpec`). */
export const VirtualMachinePreferenceSpecSchema = Strict({
  clock: Opt(
    Strict({
      preferredClockOffset: Opt(
        Strict({ utc: ClockSchema.properties.utc, timezone: ClockSchema.properties.timezone }),
      ),
      preferredTimer: ClockSchema.properties.timer,
    }),
  ),
  cpu: Opt(
    Strict({
      preferredCPUTopology: Opt(Enum([...PREFERRED_CPU_TOPOLOGIES], 'default sockets')),
      spreadOptions: Opt(
        Strict({
          across: Opt(Enum(['SocketsCoresThreads', 'SocketsCores', 'CoresThreads'], 'default SocketsCores')),
          ratio: Opt(UInt('default 2')),
        }),
      ),
      preferredCPUFeatures: Opt(Arr(CPUFeatureSchema)),
    }),
  ),
  devices: Opt(
    Strict({
      preferredAutoattachGraphicsDevice: Opt(Bool()),
      preferredAutoattachMemBalloon: Opt(Bool()),
      preferredAutoattachPodInterface: Opt(Bool()),
      preferredAutoattachSerialConsole: Opt(Bool()),
      preferredAutoattachInputDevice: Opt(Bool()),
      preferredDisableHotplug: Opt(Bool()),
      preferredSoundModel: Opt(Line()),
      preferredUseVirtioTransitional: Opt(Bool()),
      preferredInputBus: Opt(Line()),
      preferredInputType: Opt(Line()),
      preferredDiskBus: Opt(Line()),
      preferredLunBus: Opt(Line()),
      preferredCdromBus: Opt(Line()),
      preferredDiskDedicatedIoThread: Opt(Bool()),
      preferredDiskCache: DiskSchema.properties.cache,
      preferredDiskIO: DiskSchema.properties.io,
      preferredDiskBlockSize: DiskSchema.properties.blockSize,
      preferredInterfaceModel: Opt(Line()),
      preferredRng: devProps.rng,
      preferredBlockMultiQueue: Opt(Bool()),
      preferredNetworkInterfaceMultiQueue: Opt(Bool()),
      preferredTPM: devProps.tpm,
      preferredVideoType: devProps.video.properties.type,
      preferredInterfaceMasquerade: Opt(Strict({})),
    }),
  ),
  features: Opt(
    Strict({
      preferredAcpi: featProps.acpi,
      preferredApic: featProps.apic,
      preferredHyperv: Opt(HypervSchema),
      preferredKvm: featProps.kvm,
      preferredPvspinlock: featProps.pvspinlock,
      preferredSmm: featProps.smm,
    }),
  ),
  firmware: Opt(
    Strict({
      preferredUseBios: Opt(Bool()),
      preferredUseBiosSerial: Opt(Bool()),
      preferredUseEfi: Opt(Bool('deprecated: preferredEfi')),
      preferredUseSecureBoot: Opt(Bool('deprecated: preferredEfi')),
      preferredEfi: Opt(EFISchema),
    }),
  ),
  machine: Opt(Strict({ preferredMachineType: Opt(Line()) })),
  volumes: Opt(Strict({ preferredStorageClassName: Opt(Line()) })),
  preferredSubdomain: Opt(Line()),
  preferredTerminationGracePeriodSeconds: Opt(UInt()),
  requirements: Opt(
    Strict({
      cpu: Opt(Strict({ guest: UInt('at least this many vCPUs') })),
      memory: Opt(Strict({ guest: Quantity('at least this much guest memory') })),
      architecture: Opt(Line()),
    }),
  ),
  annotations: Opt(StringMap('added to the VMI where it has no such annotation')),
  preferSpreadSocketToCoreRatio: Opt(UInt('deprecated: cpu.spreadOptions.ratio')),
  preferredArchitecture: Opt(Line()),
  preferredLaunchSecurity: DomainSpecSchema.properties.launchSecurity,
});
/** The `spec` of a preference: defaults for what a VM leaves unset, and requirements. */
export type VirtualMachinePreferenceSpec = Static<typeof VirtualMachinePreferenceSpecSchema>;

const objectSchema = <
  K extends string,
  S extends typeof VirtualMachineInstancetypeSpecSchema | typeof VirtualMachinePreferenceSpecSchema,
>(
  kind: K,
  spec: S,
  description: string,
) =>
  Type.Object(
    {
      apiVersion: Type.Literal(INSTANCETYPE_API_VERSION),
      kind: Type.Literal(kind),
      metadata: ObjectMetaSchema,
      spec,
    },
    { description },
  );

/** TypeBox schema of a VirtualMachineInstancetype (namespaced). */
export const VirtualMachineInstancetypeSchema = objectSchema(
  'VirtualMachineInstancetype',
  VirtualMachineInstancetypeSpecSchema,
  'VirtualMachineInstancetype: the CPU, memory and devices of the VMs that name it (namespaced)',
);
/** TypeBox schema of a VirtualMachineClusterInstancetype (cluster-scoped). */
export const VirtualMachineClusterInstancetypeSchema = objectSchema(
  'VirtualMachineClusterInstancetype',
  VirtualMachineInstancetypeSpecSchema,
  'VirtualMachineClusterInstancetype: a cluster-wide VirtualMachineInstancetype',
);
/** TypeBox schema of a VirtualMachinePreference (namespaced). */
export const VirtualMachinePreferenceSchema = objectSchema(
  'VirtualMachinePreference',
  VirtualMachinePreferenceSpecSchema,
  'VirtualMachinePreference: defaults for what the VMs that name it leave unset (namespaced)',
);
/** TypeBox schema of a VirtualMachineClusterPreference (cluster-scoped). */
export const VirtualMachineClusterPreferenceSchema = objectSchema(
  'VirtualMachineClusterPreference',
  VirtualMachinePreferenceSpecSchema,
  'VirtualMachineClusterPreference: a cluster-wide VirtualMachinePreference',
);
/** An instance type object of either kind. */
export interface Instancetype {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  spec: VirtualMachineInstancetypeSpec;
}
/** A preference object of either kind. */
export interface Preference {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  spec: VirtualMachinePreferenceSpec;
}

/** `status.instancetypeRef` / `status.preferenceRef` of a VM: what it uses and the ControllerRevision holding it. */
export type InstancetypeStatusRef = NonNullable<VirtualMachineStatus['instancetypeRef']>;

/** The kind an instance type matcher names: its `kind`, else the cluster-wide kind (as upstream). */
export const instancetypeKindOf = (m: { kind?: string }): InstancetypeKind =>
  matcherKind(m.kind, INSTANCETYPE_KINDS) ?? 'VirtualMachineClusterInstancetype';
/** The kind a preference matcher names: its `kind`, else the cluster-wide kind (as upstream). */
export const preferenceKindOf = (m: { kind?: string }): PreferenceKind =>
  matcherKind(m.kind, PREFERENCE_KINDS) ?? 'VirtualMachineClusterPreference';

/**
 * The kind of `kinds` a matcher's `kind` names, in any case, singular or plural, as upstream reads it
 * (`VirtualMachineInstancetype`, `virtualmachineinstancetypes`); undefined when it names none (no kind: the caller's
 * cluster-wide default).
 */
export function matcherKind<K extends string>(kind: string | undefined, kinds: readonly K[]): K | undefined {
  if (!kind) return undefined;
  const k = kind.toLowerCase();
  return kinds.find((x) => k === x.toLowerCase() || k === `${x.toLowerCase()}s`);
}

// ---------------------------------------------------------------- ControllerRevisions

/** Labels upstream puts on the ControllerRevision holding an instance type or preference. */
export const REVISION_LABELS = {
  generation: 'instancetype.kubevirt.io/object-generation',
  kind: 'instancetype.kubevirt.io/object-kind',
  name: 'instancetype.kubevirt.io/object-name',
  uid: 'instancetype.kubevirt.io/object-uid',
  version: 'instancetype.kubevirt.io/object-version',
} as const;

/**
 * The apps/v1 ControllerRevision (without owner) a VM stores an instance type or preference in, as upstream's
 * revision.CreateControllerRevision: named `<vm>-<object>-v1beta1-<uid>-<generation>`, the whole object (its
 * metadata without labels, annotations, finalizers, owners and managed fields) in `data`.
 */
export function controllerRevisionFor(vmName: string, kind: string, o: Instancetype | Preference) {
  const m = o.metadata;
  const version = 'v1beta1';
  const gen = m.generation ?? 0;
  const meta: ObjectMeta = structuredClone(m);
  for (const k of ['labels', 'annotations', 'finalizers', 'ownerReferences', 'managedFields'] as const)
    delete (meta as Record<string, unknown>)[k];
  return {
    apiVersion: 'apps/v1',
    kind: 'ControllerRevision',
    metadata: {
      name: `${vmName}-${m.name}-${version}-${m.uid}-${gen}`,
      labels: {
        [REVISION_LABELS.generation]: String(gen),
        [REVISION_LABELS.kind]: kind,
        [REVISION_LABELS.name]: m.name ?? '',
        [REVISION_LABELS.uid]: m.uid ?? '',
        [REVISION_LABELS.version]: version,
      },
    },
    data: { apiVersion: INSTANCETYPE_API_VERSION, kind, metadata: meta, spec: structuredClone(o.spec) },
    revision: 0,
  };
}

// ---------------------------------------------------------------- apply

/** A field of the VM (or VMI) the instance type would set and the VM sets too: its path, and the message. */
export interface Conflict {
  path: string;
  message: string;
}
const conflictMessage = (paths: string[]) =>
  `VM field(s) ${paths.join(', ')} conflicts with selected instance type`;
const conflict = (path: string): Conflict => ({ path, message: conflictMessage([path]) });
/** Upstream's message for a list of conflicts: `VM field(s) a, b conflicts with selected instance type`. */
export const conflictsMessage = (cs: Conflict[]): string => conflictMessage(cs.map((c) => c.path));

type Spec = VirtualMachineInstanceSpec;
type CpuSpec = NonNullable<Spec['domain']['cpu']>;

/** The topology a preference prefers (sockets when it names none, as upstream v1beta1). */
export function preferredTopology(p: VirtualMachinePreferenceSpec | undefined): PreferredCPUTopology {
  return p?.cpu?.preferredCPUTopology ?? 'sockets';
}
function spreadOptions(p: VirtualMachinePreferenceSpec | undefined): { ratio: number; across: string } {
  return {
    ratio: p?.cpu?.spreadOptions?.ratio ?? (p?.preferSpreadSocketToCoreRatio || 2),
    across: p?.cpu?.spreadOptions?.across ?? 'SocketsCores',
  };
}

/** `vCPUs` laid out as sockets x cores x threads by the preferred topology (upstream applyGuestCPUTopology). */
export function guestCpuTopology(
  vCPUs: number,
  p: VirtualMachinePreferenceSpec | undefined,
): { sockets: number; cores: number; threads: number } {
  const t = { sockets: 1, cores: 1, threads: 1 };
  if (vCPUs === 1) return t;
  switch (preferredTopology(p)) {
    case 'cores':
    case 'preferCores':
      t.cores = vCPUs;
      break;
    case 'threads':
    case 'preferThreads':
      t.threads = vCPUs;
      break;
    case 'spread':
    case 'preferSpread': {
      const { ratio, across } = spreadOptions(p);
      if (across === 'SocketsCores') {
        t.cores = ratio;
        t.sockets = Math.floor(vCPUs / ratio);
      } else if (across === 'CoresThreads') {
        t.threads = ratio;
        t.cores = Math.floor(vCPUs / ratio);
      } else {
        t.threads = 2;
        t.cores = ratio;
        t.sockets = Math.floor(vCPUs / 2 / ratio);
      }
      break;
    }
    default: // sockets, any
      t.sockets = vCPUs;
  }
  return t;
}

/**
 * A spread topology the instance type's vCPUs do not divide into (upstream CheckSpreadCPUTopology), as a conflict
 * on `instancetype.spec.cpu.guest`; undefined when fine.
 */
export function checkSpreadCpuTopology(
  it: VirtualMachineInstancetypeSpec | undefined,
  p: VirtualMachinePreferenceSpec | undefined,
): Conflict | undefined {
  const topo = preferredTopology(p);
  if (!it || (topo !== 'spread' && topo !== 'preferSpread')) return undefined;
  const { ratio, across } = spreadOptions(p);
  const g = it.cpu.guest;
  const path = 'instancetype.spec.cpu.guest';
  if (across === 'SocketsCoresThreads') {
    if (g % 2 > 0 || (g / 2) % ratio > 0)
      return {
        path,
        message: `${g} vCPUs provided by the instance type are not divisible by the number of threads per core 2 and Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of ${ratio}`,
      };
  } else if (g % ratio > 0)
    return {
      path,
      message:
        across === 'CoresThreads'
          ? `${g} vCPUs provided by the instance type are not divisible by the number of threads per core ${ratio}`
          : `${g} vCPUs provided by the instance type are not divisible by the Spec.PreferSpreadSocketToCoreRatio or Spec.CPU.PreferSpreadOptions.Ratio of ${ratio} provided by the preference`,
    };
  return undefined;
}

const present = (v: unknown): boolean => v !== undefined && v !== null;
const hasKey = (m: Record<string, unknown> | undefined, k: string) => !!m && present(m[k]);

function applyCpu(
  base: string,
  it: VirtualMachineInstancetypeSpec,
  p: VirtualMachinePreferenceSpec | undefined,
  spec: Spec,
): Conflict[] {
  const d = spec.domain;
  const cpu: CpuSpec = (d.cpu ??= {});
  const out: Conflict[] = [];
  const res = d.resources;
  if (hasKey(res?.requests, 'cpu')) out.push(conflict(`${base}.domain.resources.requests.cpu`));
  if (hasKey(res?.limits, 'cpu')) out.push(conflict(`${base}.domain.resources.limits.cpu`));
  for (const k of ['sockets', 'cores', 'threads'] as const)
    if (cpu[k]) out.push(conflict(`${base}.domain.cpu.${k}`));
  const c = it.cpu;
  if (cpu.model && present(c.model)) out.push(conflict(`${base}.domain.cpu.model`));
  if (cpu.dedicatedCpuPlacement && present(c.dedicatedCPUPlacement))
    out.push(conflict(`${base}.domain.cpu.dedicatedCPUPlacement`));
  if (cpu.isolateEmulatorThread && present(c.isolateEmulatorThread))
    out.push(conflict(`${base}.domain.cpu.isolateEmulatorThread`));
  if (present(cpu.numa) && present(c.numa)) out.push(conflict(`${base}.domain.cpu.numa`));
  if (present(cpu.realtime) && present(c.realtime)) out.push(conflict(`${base}.domain.cpu.realtime`));
  if (out.length) return out;
  if (present(c.model)) cpu.model = c.model;
  if (present(c.dedicatedCPUPlacement)) cpu.dedicatedCpuPlacement = c.dedicatedCPUPlacement;
  if (present(c.isolateEmulatorThread)) cpu.isolateEmulatorThread = c.isolateEmulatorThread;
  if (present(c.numa)) cpu.numa = structuredClone(c.numa);
  if (present(c.realtime)) cpu.realtime = structuredClone(c.realtime);
  if (present(c.maxSockets)) cpu.maxSockets = c.maxSockets;
  Object.assign(cpu, guestCpuTopology(c.guest, p));
  return [];
}

function applyMemory(base: string, it: VirtualMachineInstancetypeSpec, spec: Spec): Conflict[] {
  const d = spec.domain;
  const mem = (d.memory ??= {});
  const m = it.memory;
  // upstream reports only the first memory conflict
  if (present(mem.guest)) return [conflict(`${base}.domain.memory.guest`)];
  if (present(mem.hugepages) && present(m.hugepages)) return [conflict(`${base}.domain.memory.hugepages`)];
  if (present(mem.maxGuest) && present(m.maxGuest)) return [conflict(`${base}.domain.memory.maxGuest`)];
  if (hasKey(d.resources?.requests, 'memory')) return [conflict(`${base}.domain.resources.requests.memory`)];
  if (hasKey(d.resources?.limits, 'memory')) return [conflict(`${base}.domain.resources.limits.memory`)];
  mem.guest = m.guest;
  if (m.overcommitPercent && m.overcommitPercent > 0) {
    const res = (d.resources ??= {});
    // upstream computes in float32 and truncates; the request is a plain byte count here
    const bytes = Math.trunc(quantityValue(m.guest) * (1 - m.overcommitPercent / 100));
    res.requests = { ...(res.requests ?? {}), memory: String(bytes) };
  }
  if (present(m.hugepages)) mem.hugepages = structuredClone(m.hugepages);
  if (present(m.maxGuest)) mem.maxGuest = m.maxGuest;
  return [];
}

/** Sets `spec[key]` from the instance type unless the VMI has it (then a conflict at `path`). */
function applyWhole<T>(
  path: string,
  mine: T | undefined,
  theirs: T | undefined,
  set: (v: T) => void,
  isSet: (v: unknown) => boolean = present,
): Conflict[] {
  if (!isSet(theirs)) return [];
  if (isSet(mine)) return [conflict(path)];
  set(structuredClone(theirs as T));
  return [];
}
const nonEmpty = (v: unknown) => (Array.isArray(v) ? v.length > 0 : present(v) && v !== '');

/**
 * Applies an instance type and a preference to a VMI spec (and its metadata's annotations) in place, as
 * upstream's ApplyToVMI: the instance type's CPU (guest vCPUs as the preferred topology), memory, GPUs, host
 * devices, IO threads policy, launch security, node selector, scheduler and annotations; a field the VMI sets too
 * is a conflict at `base` + its path (e.g. `spec.template.spec.domain.cpu.sockets`; annotations conflict at
 * `annotations.<key>`). With conflicts nothing of the preference is applied. Then the preference fills what the
 * VMI leaves unset.
 */
export function applyToVmiSpec(
  base: string,
  it: VirtualMachineInstancetypeSpec | undefined,
  pref: VirtualMachinePreferenceSpec | undefined,
  spec: Spec,
  meta: ObjectMeta,
): Conflict[] {
  if (it) {
    const d = spec.domain;
    const devices = (d.devices ??= {});
    const out: Conflict[] = [
      ...applyWhole(
        `${base}.nodeSelector`,
        spec.nodeSelector,
        it.nodeSelector,
        (v) => (spec.nodeSelector = v),
      ),
      ...applyWhole(
        `${base}.schedulerName`,
        spec.schedulerName,
        it.schedulerName,
        (v) => (spec.schedulerName = v),
        nonEmpty,
      ),
      ...applyCpu(base, it, pref, spec),
      ...applyMemory(base, it, spec),
      ...applyWhole(
        `${base}.domain.ioThreadsPolicy`,
        d.ioThreadsPolicy,
        it.ioThreadsPolicy,
        (v) => (d.ioThreadsPolicy = v),
      ),
      ...applyWhole(
        `${base}.domain.launchSecurity`,
        d.launchSecurity,
        it.launchSecurity,
        (v) => (d.launchSecurity = v),
      ),
      ...applyWhole(
        `${base}.domain.devices.gpus`,
        devices.gpus,
        it.gpus,
        (v) => (devices.gpus = v),
        nonEmpty,
      ),
      ...applyWhole(
        `${base}.domain.devices.hostDevices`,
        devices.hostDevices,
        it.hostDevices,
        (v) => (devices.hostDevices = v),
        nonEmpty,
      ),
    ];
    const ann = (meta.annotations ??= {});
    for (const [k, v] of Object.entries(it.annotations ?? {})) {
      if (ann[k] === undefined) ann[k] = v;
      else if (ann[k] !== v) out.push(conflict(`annotations.${k}`));
    }
    if (out.length) return out;
  }
  if (pref) applyPreferenceToVmiSpec(pref, spec, meta);
  return [];
}

const unset = (v: unknown) => v === undefined || v === null || v === '';

/**
 * Fills what a VMI spec leaves unset from a preference, in place (upstream's preference apply): CPU features,
 * devices (autoattach switches, virtio-transitional, multiqueue, hotplug, sound model, rng, TPM, disk / cdrom /
 * lun bus, disk cache, IO, block size and dedicated IO thread, interface model and masquerade, input bus and
 * type), features, firmware (BIOS, EFI, secure boot), machine type, clock, subdomain, termination grace period,
 * architecture, launch security and annotations.
 */
export function applyPreferenceToVmiSpec(
  p: VirtualMachinePreferenceSpec,
  spec: Spec,
  meta: ObjectMeta,
): void {
  const d = spec.domain;
  // cpu features the VMI does not name
  const feats = p.cpu?.preferredCPUFeatures ?? [];
  if (feats.length) {
    const cpu = (d.cpu ??= {});
    const have = new Set((cpu.features ?? []).map((f) => f.name));
    for (const f of feats) if (!have.has(f.name)) (cpu.features ??= []).push(structuredClone(f));
  }
  const dp = p.devices;
  if (dp) {
    const dev = (d.devices ??= {});
    const fill = <K extends keyof typeof dev>(k: K, v: (typeof dev)[K] | undefined) => {
      if (v !== undefined && unset(dev[k])) dev[k] = structuredClone(v);
    };
    fill('useVirtioTransitional', dp.preferredUseVirtioTransitional);
    fill('blockMultiQueue', dp.preferredBlockMultiQueue);
    fill('networkInterfaceMultiqueue', dp.preferredNetworkInterfaceMultiQueue);
    // upstream overrides: disableHotplug is not a pointer there
    if (dp.preferredDisableHotplug !== undefined) dev.disableHotplug = dp.preferredDisableHotplug;
    if (dp.preferredSoundModel && dev.sound && !dev.sound.model)
      dev.sound.model = dp.preferredSoundModel as 'ich9' | 'ac97';
    fill('rng', dp.preferredRng);
    fill('tpm', dp.preferredTPM);
    if (dp.preferredVideoType && unset(dev.video?.type))
      dev.video = { ...(dev.video ?? {}), type: dp.preferredVideoType };
    fill('autoattachGraphicsDevice', dp.preferredAutoattachGraphicsDevice);
    fill('autoattachMemBalloon', dp.preferredAutoattachMemBalloon);
    fill('autoattachPodInterface', dp.preferredAutoattachPodInterface);
    fill('autoattachSerialConsole', dp.preferredAutoattachSerialConsole);
    fill('autoattachInputDevice', dp.preferredAutoattachInputDevice);
    for (const disk of dev.disks ?? []) {
      if (!disk.disk && !disk.cdrom && !disk.lun) disk.disk = {};
      if (disk.disk) {
        if (dp.preferredDiskBus && unset(disk.disk.bus)) disk.disk.bus = dp.preferredDiskBus;
        if (dp.preferredDiskBlockSize && unset(disk.blockSize))
          disk.blockSize = structuredClone(dp.preferredDiskBlockSize);
        if (dp.preferredDiskCache && unset(disk.cache)) disk.cache = dp.preferredDiskCache;
        if (dp.preferredDiskIO && unset(disk.io)) disk.io = dp.preferredDiskIO;
        if (
          dp.preferredDiskDedicatedIoThread !== undefined &&
          unset(disk.dedicatedIOThread) &&
          disk.disk.bus === 'virtio'
        )
          disk.dedicatedIOThread = dp.preferredDiskDedicatedIoThread;
      } else if (disk.cdrom) {
        if (dp.preferredCdromBus && unset(disk.cdrom.bus)) disk.cdrom.bus = dp.preferredCdromBus;
      } else if (disk.lun) {
        if (dp.preferredLunBus && unset(disk.lun.bus)) disk.lun.bus = dp.preferredLunBus;
      }
    }
    const podNetworks = new Set(
      (spec.networks ?? []).filter((n) => present((n as { pod?: unknown }).pod)).map((n) => n.name),
    );
    for (const i of dev.interfaces ?? []) {
      if (dp.preferredInterfaceModel && unset(i.model)) i.model = dp.preferredInterfaceModel;
      const bound = ['bridge', 'masquerade', 'sriov', 'slirp', 'macvtap', 'passt', 'binding'].some((b) =>
        present((i as Record<string, unknown>)[b]),
      );
      if (dp.preferredInterfaceMasquerade && !bound && podNetworks.has(i.name))
        i.masquerade = structuredClone(dp.preferredInterfaceMasquerade);
    }
    for (const input of dev.inputs ?? []) {
      if (dp.preferredInputBus && unset(input.bus)) input.bus = dp.preferredInputBus;
      if (dp.preferredInputType && unset(input.type)) input.type = dp.preferredInputType;
    }
  }
  const fp = p.features;
  if (fp) {
    const f = (d.features ??= {});
    // upstream overrides: ACPI is not a pointer there
    if (fp.preferredAcpi) f.acpi = structuredClone(fp.preferredAcpi);
    if (fp.preferredApic && !f.apic) f.apic = structuredClone(fp.preferredApic);
    if (fp.preferredKvm && !f.kvm) f.kvm = structuredClone(fp.preferredKvm);
    if (fp.preferredPvspinlock && !f.pvspinlock) f.pvspinlock = structuredClone(fp.preferredPvspinlock);
    if (fp.preferredSmm && !f.smm) f.smm = structuredClone(fp.preferredSmm);
    if (fp.preferredHyperv) {
      const hv = (f.hyperv ??= {}) as Record<string, unknown>;
      for (const [k, v] of Object.entries(fp.preferredHyperv))
        if (!present(hv[k])) hv[k] = structuredClone(v);
    }
  }
  const fw = p.firmware;
  if (fw) {
    const bl = ((d.firmware ??= {}).bootloader ??= {});
    if (fw.preferredUseBios && !bl.bios && !bl.efi) bl.bios = {};
    if (fw.preferredUseBiosSerial !== undefined && bl.bios && bl.bios.useSerial === undefined)
      bl.bios.useSerial = fw.preferredUseBiosSerial;
    if (!bl.efi && !bl.bios && fw.preferredEfi) bl.efi = structuredClone(fw.preferredEfi);
    else {
      if (fw.preferredUseEfi && !bl.efi && !bl.bios) bl.efi = {};
      if (fw.preferredUseSecureBoot !== undefined && bl.efi && bl.efi.secureBoot === undefined)
        bl.efi.secureBoot = fw.preferredUseSecureBoot;
    }
  }
  if (p.machine?.preferredMachineType) {
    const machine = (d.machine ??= {});
    if (unset(machine.type)) machine.type = p.machine.preferredMachineType;
  }
  if (p.clock) {
    const clock = (d.clock ??= {});
    // the offset only as a whole: not when the VMI has either
    if (p.clock.preferredClockOffset && !clock.utc && !clock.timezone)
      Object.assign(clock, structuredClone(p.clock.preferredClockOffset));
    if (p.clock.preferredTimer && !clock.timer) clock.timer = structuredClone(p.clock.preferredTimer);
  }
  if (p.preferredSubdomain !== undefined && unset(spec.subdomain)) spec.subdomain = p.preferredSubdomain;
  if (
    p.preferredTerminationGracePeriodSeconds !== undefined &&
    spec.terminationGracePeriodSeconds === undefined
  )
    spec.terminationGracePeriodSeconds = p.preferredTerminationGracePeriodSeconds;
  if (p.preferredArchitecture && unset(spec.architecture)) spec.architecture = p.preferredArchitecture;
  const ann = (meta.annotations ??= {});
  for (const [k, v] of Object.entries(p.annotations ?? {})) if (ann[k] === undefined) ann[k] = v;
  if (p.preferredLaunchSecurity && !d.launchSecurity)
    d.launchSecurity = structuredClone(p.preferredLaunchSecurity);
}

/**
 * A preference's requirements the VM does not meet (upstream's requirements checker): the instance type's (else
 * the template's) vCPUs and guest memory, and the architecture. Returns the conflicting paths and the message, or
 * undefined. `spec` is the template spec with the instance type applied.
 */
export function checkPreferenceRequirements(
  it: VirtualMachineInstancetypeSpec | undefined,
  p: VirtualMachinePreferenceSpec | undefined,
  spec: Spec,
): { paths: string[]; message: string } | undefined {
  const req = p?.requirements;
  if (!req) return undefined;
  const base = 'spec.template.spec.domain.cpu';
  if (req.cpu) {
    const need = req.cpu.guest;
    if (it) {
      if (it.cpu.guest < need)
        return {
          paths: ['spec.instancetype'],
          message: `insufficient CPU resources of ${it.cpu.guest} vCPU provided by instance type, preference requires ${need} vCPU`,
        };
    } else {
      const cpu = spec.domain.cpu;
      if (!cpu)
        return {
          paths: [base],
          message: `no CPU resources provided by VirtualMachine, preference requires ${need} vCPU`,
        };
      const n = (k: 'sockets' | 'cores' | 'threads') => cpu[k] ?? 0;
      const check = (ks: ('sockets' | 'cores' | 'threads')[], as: string) => {
        const got = ks.reduce((a, k) => a * n(k), 1);
        return got < need
          ? {
              paths: ks.map((k) => `${base}.${k}`),
              message: `insufficient CPU resources of ${got} vCPU provided by VirtualMachine, preference requires ${need} vCPU provided as ${as}`,
            }
          : undefined;
      };
      const topo = preferredTopology(p);
      let r: { paths: string[]; message: string } | undefined;
      if (topo === 'threads' || topo === 'preferThreads') r = check(['threads'], 'threads');
      else if (topo === 'cores' || topo === 'preferCores') r = check(['cores'], 'cores');
      else if (topo === 'sockets' || topo === 'preferSockets') r = check(['sockets'], 'sockets');
      else if (topo === 'any' || topo === 'preferAny')
        r = check(['cores', 'sockets', 'threads'], 'cores, sockets and threads');
      else {
        const { across } = spreadOptions(p);
        r =
          across === 'SocketsCores'
            ? check(['sockets', 'cores'], across)
            : across === 'CoresThreads'
              ? check(['cores', 'threads'], across)
              : check(['sockets', 'cores', 'threads'], across);
      }
      if (r) return r;
    }
  }
  if (req.memory) {
    const provided = spec.domain.memory?.guest ?? it?.memory.guest ?? '0Mi';
    if (quantityValue(provided) < quantityValue(req.memory.guest))
      return {
        paths: [it ? 'spec.instancetype' : 'spec.template.spec.domain.memory'],
        message: `insufficient Memory resources of ${String(provided)} provided by ${it ? 'instance type' : 'VirtualMachine'}, preference requires ${String(req.memory.guest)}`,
      };
  }
  if (req.architecture && spec.architecture !== req.architecture)
    return {
      paths: ['spec.template.spec.architecture'],
      message: `preference requires architecture ${req.architecture} but ${spec.architecture ?? ''} is being requested`,
    };
  return undefined;
}
