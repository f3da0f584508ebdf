import { Value } from '@sinclair/typebox/value';
import { crdFor, generateCrdFiles } from './crd.js';
import {
  INSTANCETYPE_KINDS,
  instancetypeKindOf,
  matcherKind,
  preferenceKindOf,
  applyToVmiSpec,
  checkPreferenceRequirements,
  checkSpreadCpuTopology,
  conflictsMessage,
  controllerRevisionFor,
  guestCpuTopology,
  VirtualMachineClusterInstancetypeSchema,
  VirtualMachinePreferenceSchema,
  type VirtualMachineInstancetypeSpec,
  type VirtualMachinePreferenceSpec,
} from './instancetype.js';
import type { ObjectMeta, VirtualMachineInstanceSpec } from './schemas.js';
import { baseVm, type Any } from './test-fixtures.js';
import { validateObject, validateVirtualMachine } from './validate.js';
import { setVirtualMachineDefaults } from './defaults.js';

const BASE = 'spec.template.spec';
const u1: VirtualMachineInstancetypeSpec = { cpu: { guest: 2 }, memory: { guest: '256Mi' } };
const template = (): VirtualMachineInstanceSpec => ({
  domain: {
    devices: {
      disks: [{ name: 'root' }, { name: 'cd', cdrom: {} }, { name: 'pinned', disk: { bus: 'sata' } }],
      interfaces: [{ name: 'default' }],
    },
  },
  networks: [{ name: 'default', pod: {} }],
});
const apply = (
  it: VirtualMachineInstancetypeSpec | undefined,
  p: VirtualMachinePreferenceSpec | undefined,
  spec = template(),
  meta: ObjectMeta = {},
) => ({ conflicts: applyToVmiSpec(BASE, it, p, spec, meta), spec, meta });

describe('instancetype.kubevirt.io/v1beta1 schemas', () => {
  test('an instance type needs spec.cpu.guest and spec.memory.guest', () => {
    const ok = {
      apiVersion: 'instancetype.kubevirt.io/v1beta1',
      kind: 'VirtualMachineClusterInstancetype',
      metadata: { name: 'u1.small' },
      spec: u1,
    };
    expect(Value.Check(VirtualMachineClusterInstancetypeSchema, ok)).toBe(true);
    const noCpu = structuredClone(ok) as Any;
    delete noCpu.spec.cpu.guest;
    const noMem = structuredClone(ok) as Any;
    delete noMem.spec.memory;
    for (const bad of [noCpu, noMem])
      expect(Value.Check(VirtualMachineClusterInstancetypeSchema, bad)).toBe(false);
    const crd = crdFor('VirtualMachineClusterInstancetype') as Any;
    const spec = crd.spec.versions[0].schema.openAPIV3Schema.properties.spec;
    expect(spec.required).toEqual(['cpu', 'memory']);
    expect(spec.properties.cpu.required).toEqual(['guest']);
    expect(spec.properties.memory.required).toEqual(['guest']);
    expect(spec.properties.memory.properties.overcommitPercent).toMatchObject({ minimum: 0, maximum: 100 });
  });

  test('preference fields are typed: an unknown topology or a string where a bool goes is refused', () => {
    const p = (spec: unknown) => ({
      apiVersion: 'instancetype.kubevirt.io/v1beta1',
      kind: 'VirtualMachinePreference',
      metadata: { name: 'fedora' },
      spec,
    });
    expect(Value.Check(VirtualMachinePreferenceSchema, p({ cpu: { preferredCPUTopology: 'cores' } }))).toBe(
      true,
    );
    expect(Value.Check(VirtualMachinePreferenceSchema, p({ cpu: { preferredCPUTopology: 'dies' } }))).toBe(
      false,
    );
    expect(
      Value.Check(VirtualMachinePreferenceSchema, p({ devices: { preferredBlockMultiQueue: 'yes' } })),
    ).toBe(false);
  });

  test("CRDs: upstream's group, names, short names and scope", () => {
    const names = (kind: string) => {
      const c = crdFor(kind) as Any;
      return [c.metadata.name, c.spec.group, c.spec.scope, c.spec.names.shortNames, c.spec.versions[0].name];
    };
    expect(names('VirtualMachineInstancetype')).toEqual([
      'virtualmachineinstancetypes.instancetype.kubevirt.io',
      'instancetype.kubevirt.io',
      'Namespaced',
      ['vminstancetype', 'vminstancetypes', 'vmf', 'vmfs'],
      'v1beta1',
    ]);
    expect(names('VirtualMachineClusterInstancetype').slice(2, 4)).toEqual([
      'Cluster',
      ['vmclusterinstancetype', 'vmclusterinstancetypes', 'vmcf', 'vmcfs'],
    ]);
    expect(names('VirtualMachinePreference').slice(2, 4)).toEqual([
      'Namespaced',
      ['vmpref', 'vmprefs', 'vmp', 'vmps'],
    ]);
    expect(names('VirtualMachineClusterPreference').slice(2, 4)).toEqual(['Cluster', ['vmcp', 'vmcps']]);
    expect([...generateCrdFiles().keys()]).toContain(
      'instancetype.kubevirt.io_virtualmachineclusterpreferences.yaml',
    );
  });

  test('a VM names an instance type and a preference; a matcher without a name is refused', () => {
    const vm = baseVm();
    vm.spec.instancetype = { name: 'u1.small' };
    vm.spec.preference = { name: 'fedora', kind: 'VirtualMachinePreference' };
    delete vm.spec.template.spec.domain.resources; // the instance type gives the memory
    expect(validateVirtualMachine(vm)).toEqual([]);
    vm.spec.instancetype = { kind: 'VirtualMachineInstancetype' };
    vm.spec.preference = { kind: 'Nope' };
    expect(
      validateVirtualMachine(vm)
        .map((e) => e.path)
        .sort(),
    ).toEqual(['spec.instancetype', 'spec.preference', 'spec.preference.kind']);
  });

  test('a VM with an instance type keeps its template undefaulted (the VMI gets the defaults)', () => {
    const vm = baseVm();
    vm.spec.instancetype = { name: 'u1.small' };
    expect(setVirtualMachineDefaults(vm).spec.template.spec).toEqual(vm.spec.template.spec);
  });
});

describe('applying an instance type', () => {
  test('guest vCPUs as sockets by default, memory.guest, and nothing else of the template changes', () => {
    const { conflicts, spec } = apply(u1, undefined);
    expect(conflicts).toEqual([]);
    expect(spec.domain.cpu).toEqual({ sockets: 2, cores: 1, threads: 1 });
    expect(spec.domain.memory).toEqual({ guest: '256Mi' });
    expect(spec.domain.resources).toBeUndefined();
    expect(spec.domain.devices?.disks?.[0]).toEqual({ name: 'root' });
  });

  test.each([
    ['cores', { sockets: 1, cores: 4, threads: 1 }],
    ['preferThreads', { sockets: 1, cores: 1, threads: 4 }],
    ['any', { sockets: 4, cores: 1, threads: 1 }],
    ['spread', { sockets: 2, cores: 2, threads: 1 }],
  ] as const)('preferredCPUTopology %s', (topo, want) => {
    expect(guestCpuTopology(4, { cpu: { preferredCPUTopology: topo } })).toEqual(want);
  });

  test('spread across SocketsCoresThreads and CoresThreads with a ratio; 1 vCPU is always 1/1/1', () => {
    expect(
      guestCpuTopology(8, {
        cpu: { preferredCPUTopology: 'spread', spreadOptions: { across: 'SocketsCoresThreads' } },
      }),
    ).toEqual({ sockets: 2, cores: 2, threads: 2 });
    expect(
      guestCpuTopology(6, {
        cpu: { preferredCPUTopology: 'spread', spreadOptions: { across: 'CoresThreads', ratio: 3 } },
      }),
    ).toEqual({ sockets: 1, cores: 2, threads: 3 });
    expect(guestCpuTopology(1, { cpu: { preferredCPUTopology: 'cores' } })).toEqual({
      sockets: 1,
      cores: 1,
      threads: 1,
    });
    expect(
      checkSpreadCpuTopology({ ...u1, cpu: { guest: 3 } }, { cpu: { preferredCPUTopology: 'spread' } }),
    ).toEqual({
      path: 'instancetype.spec.cpu.guest',
      message: expect.stringMatching(/^3 vCPUs provided by the instance type are not divisible/),
    });
    expect(checkSpreadCpuTopology(u1, { cpu: { preferredCPUTopology: 'spread' } })).toBeUndefined();
  });

  test('model, dedicated placement, maxSockets, hugepages, maxGuest, overcommit, devices, scheduling, annotations', () => {
    const it: VirtualMachineInstancetypeSpec = {
      cpu: { guest: 2, model: 'Haswell', dedicatedCPUPlacement: true, maxSockets: 8 },
      memory: { guest: '1Gi', hugepages: { pageSize: '2Mi' }, maxGuest: '4Gi', overcommitPercent: 25 },
      gpus: [{ name: 'gpu1', deviceName: 'nvidia.com/GP102GL' }],
      hostDevices: [{ name: 'hd1', deviceName: 'vendor.com/dev' }],
      ioThreadsPolicy: 'auto',
      nodeSelector: { gpu: 'yes' },
      schedulerName: 'custom',
      annotations: { 'team/a': '1' },
    };
    const { conflicts, spec, meta } = apply(it, undefined);
    expect(conflicts).toEqual([]);
    expect(spec.domain.cpu).toEqual({
      model: 'Haswell',
      dedicatedCpuPlacement: true,
      maxSockets: 8,
      sockets: 2,
      cores: 1,
      threads: 1,
    });
    expect(spec.domain.memory).toEqual({ guest: '1Gi', hugepages: { pageSize: '2Mi' }, maxGuest: '4Gi' });
    expect(spec.domain.resources?.requests?.['memory']).toBe(String(768 * 1024 * 1024));
    expect(spec.domain.devices?.gpus).toEqual(it.gpus);
    expect(spec.domain.devices?.hostDevices).toEqual(it.hostDevices);
    expect(spec.domain.ioThreadsPolicy).toBe('auto');
    expect(spec.nodeSelector).toEqual({ gpu: 'yes' });
    expect(spec.schedulerName).toBe('custom');
    expect(meta.annotations).toEqual({ 'team/a': '1' });
  });

  test("conflicts are the template's fields the instance type sets, with upstream's paths and message", () => {
    const spec = template();
    spec.domain.cpu = { sockets: 2, cores: 1, model: 'host-model' };
    spec.domain.resources = { requests: { cpu: '1' } };
    spec.nodeSelector = { a: 'b' };
    const { conflicts } = apply(
      { ...u1, cpu: { guest: 2, model: 'Haswell' }, nodeSelector: { c: 'd' } },
      { devices: { preferredDiskBus: 'virtio' } },
      spec,
      { annotations: { x: 'mine' } },
    );
    expect(conflicts.map((c) => c.path)).toEqual([
      'spec.template.spec.nodeSelector',
      'spec.template.spec.domain.resources.requests.cpu',
      'spec.template.spec.domain.cpu.sockets',
      'spec.template.spec.domain.cpu.cores',
      'spec.template.spec.domain.cpu.model',
    ]);
    expect(conflicts[2]!.message).toBe(
      'VM field(s) spec.template.spec.domain.cpu.sockets conflicts with selected instance type',
    );
    expect(conflictsMessage(conflicts.slice(2, 4))).toBe(
      'VM field(s) spec.template.spec.domain.cpu.sockets, spec.template.spec.domain.cpu.cores conflicts with selected instance type',
    );
    // with conflicts the preference is not applied
    expect(spec.domain.devices?.disks?.[0]).toEqual({ name: 'root' });
  });

  test('memory conflicts: the first only, as upstream; an annotation of another value', () => {
    const spec = template();
    spec.domain.memory = { guest: '1Gi' };
    spec.domain.resources = { requests: { memory: '1Gi' } };
    const { conflicts } = apply({ ...u1, annotations: { x: 'it' } }, undefined, spec, {
      annotations: { x: 'vm' },
    });
    expect(conflicts.map((c) => c.path)).toEqual(['spec.template.spec.domain.memory.guest', 'annotations.x']);
  });
});

describe('applying a preference', () => {
  const pref: VirtualMachinePreferenceSpec = {
    cpu: { preferredCPUTopology: 'cores', preferredCPUFeatures: [{ name: 'pcid' }, { name: 'ssbd' }] },
    devices: {
      preferredDiskBus: 'virtio',
      preferredCdromBus: 'scsi',
      preferredDiskCache: 'none',
      preferredDiskDedicatedIoThread: true,
      preferredInterfaceModel: 'e1000e',
      preferredAutoattachSerialConsole: false,
      preferredRng: {},
      preferredVideoType: 'virtio',
    },
    features: { preferredSmm: {}, preferredHyperv: { relaxed: {} } },
    firmware: { preferredEfi: { secureBoot: false } },
    machine: { preferredMachineType: 'pc-q35-8.2' },
    clock: { preferredClockOffset: { utc: {} }, preferredTimer: { hpet: { present: false } } },
    preferredTerminationGracePeriodSeconds: 15,
    preferredSubdomain: 'sub',
    annotations: { a: 'pref', keep: 'pref' },
  };

  test('fills what the template leaves unset, keeps what it sets', () => {
    const spec = template();
    spec.domain.cpu = { features: [{ name: 'ssbd', policy: 'disable' }] };
    spec.terminationGracePeriodSeconds = 30;
    const { conflicts, meta } = apply(u1, pref, spec, { annotations: { keep: 'mine' } });
    expect(conflicts).toEqual([]);
    const d = spec.domain;
    expect(d.cpu).toMatchObject({ sockets: 1, cores: 2, threads: 1 });
    expect(d.cpu?.features).toEqual([{ name: 'ssbd', policy: 'disable' }, { name: 'pcid' }]);
    expect(d.devices?.disks).toEqual([
      { name: 'root', disk: { bus: 'virtio' }, cache: 'none', dedicatedIOThread: true },
      { name: 'cd', cdrom: { bus: 'scsi' } },
      { name: 'pinned', disk: { bus: 'sata' }, cache: 'none' },
    ]);
    expect(d.devices?.interfaces).toEqual([{ name: 'default', model: 'e1000e' }]);
    expect(d.devices?.autoattachSerialConsole).toBe(false);
    expect(d.devices?.rng).toEqual({});
    expect(d.devices?.video).toEqual({ type: 'virtio' });
    expect(d.features).toEqual({ smm: {}, hyperv: { relaxed: {} } });
    expect(d.firmware).toEqual({ bootloader: { efi: { secureBoot: false } } });
    expect(d.machine).toEqual({ type: 'pc-q35-8.2' });
    expect(d.clock).toEqual({ utc: {}, timer: { hpet: { present: false } } });
    expect(spec.terminationGracePeriodSeconds).toBe(30);
    expect(spec.subdomain).toBe('sub');
    expect(meta.annotations).toEqual({ keep: 'mine', a: 'pref' });
  });

  test('preferredVideoType: the type of a video device the template gives without one, not over its own', () => {
    const spec = template();
    spec.domain.devices = { ...spec.domain.devices, video: {} };
    apply(undefined, { devices: { preferredVideoType: 'bochs' } }, spec);
    expect(spec.domain.devices?.video).toEqual({ type: 'bochs' });
    const own = template();
    own.domain.devices = { ...own.domain.devices, video: { type: 'vga' } };
    apply(undefined, { devices: { preferredVideoType: 'bochs' } }, own);
    expect(own.domain.devices?.video).toEqual({ type: 'vga' });
  });

  test('without an instance type the preference alone applies (no topology from it)', () => {
    const { spec } = apply(undefined, pref);
    expect(spec.domain.cpu?.sockets).toBeUndefined();
    expect(spec.domain.devices?.disks?.[0]?.disk?.bus).toBe('virtio');
  });

  test('requirements: vCPUs and memory of the instance type, else of the template', () => {
    const req: VirtualMachinePreferenceSpec = {
      requirements: { cpu: { guest: 4 }, memory: { guest: '1Gi' } },
    };
    expect(checkPreferenceRequirements(u1, req, template())).toEqual({
      paths: ['spec.instancetype'],
      message: 'insufficient CPU resources of 2 vCPU provided by instance type, preference requires 4 vCPU',
    });
    expect(checkPreferenceRequirements({ ...u1, cpu: { guest: 4 } }, req, template())).toEqual({
      paths: ['spec.instancetype'],
      message: 'insufficient Memory resources of 256Mi provided by instance type, preference requires 1Gi',
    });
    const spec = template();
    spec.domain.cpu = { sockets: 2, cores: 1, threads: 1 };
    expect(checkPreferenceRequirements(undefined, req, spec)?.paths).toEqual([
      'spec.template.spec.domain.cpu.sockets',
    ]);
    spec.domain.cpu.sockets = 4;
    spec.domain.memory = { guest: '2Gi' };
    expect(checkPreferenceRequirements(undefined, req, spec)).toBeUndefined();
  });
});

test("a ControllerRevision as upstream's: name, labels, the object without its labels in data", () => {
  const cr = controllerRevisionFor('vm1', 'VirtualMachineClusterInstancetype', {
    metadata: { name: 'u1.small', uid: 'abc', generation: 3, labels: { x: 'y' }, resourceVersion: '7' },
    spec: u1,
  });
  expect(cr.metadata).toEqual({
    name: 'vm1-u1.small-v1beta1-abc-3',
    labels: {
      'instancetype.kubevirt.io/object-generation': '3',
      'instancetype.kubevirt.io/object-kind': 'VirtualMachineClusterInstancetype',
      'instancetype.kubevirt.io/object-name': 'u1.small',
      'instancetype.kubevirt.io/object-uid': 'abc',
      'instancetype.kubevirt.io/object-version': 'v1beta1',
    },
  });
  expect(cr.data).toEqual({
    apiVersion: 'instancetype.kubevirt.io/v1beta1',
    kind: 'VirtualMachineClusterInstancetype',
    metadata: { name: 'u1.small', uid: 'abc', generation: 3, resourceVersion: '7' },
    spec: u1,
  });
});

describe('the kind of a VM matcher', () => {
  it('is read in any case, singular or plural, as upstream; no kind is the cluster-wide one', () => {
    expect(instancetypeKindOf({ kind: 'virtualmachineinstancetype' })).toBe('VirtualMachineInstancetype');
    expect(instancetypeKindOf({ kind: 'VirtualMachineInstancetypes' })).toBe('VirtualMachineInstancetype');
    expect(instancetypeKindOf({ kind: 'virtualmachineclusterinstancetype' })).toBe(
      'VirtualMachineClusterInstancetype',
    );
    expect(instancetypeKindOf({})).toBe('VirtualMachineClusterInstancetype');
    expect(preferenceKindOf({ kind: 'virtualmachinepreferences' })).toBe('VirtualMachinePreference');
    expect(matcherKind('virtualmachinepool', INSTANCETYPE_KINDS)).toBeUndefined();
  });

  it('is refused with its path when it names no instance type or preference kind', () => {
    const vm = {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachine',
      metadata: { name: 'vm', namespace: 'default' },
      spec: {
        instancetype: { name: 'u1', kind: 'virtualmachineinstancetype' },
        preference: { name: 'p', kind: 'VirtualMachinePool' },
        template: { spec: { domain: { devices: {} } } },
      },
    };
    expect(validateObject(vm).map((e) => e.path)).toEqual(['spec.preference.kind']);
  });
});
