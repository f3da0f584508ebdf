import {
  firmwareUUID,
  setVirtualMachineDefaults,
  setVirtualMachineInstanceDefaults,
  uuidV5,
  vmRunStrategy,
} from './defaults.js';
import { parseManifests } from './manifests.js';
import type { VirtualMachineInstance } from './schemas.js';
import { baseVm, baseVmi, referenceYamls, type Any } from './test-fixtures.js';
import { validateObject } from './validate.js';

const d = (v: Any, opts?: { arch?: string }): Any =>
  setVirtualMachineInstanceDefaults(v as VirtualMachineInstance, opts);

test('uuidV5 matches RFC 4122 / Python uuid.uuid5', () => {
  expect(uuidV5('6ba7b810-9dad-11d1-80b4-00c04fd430c8', 'www.example.com')).toBe(
    '2ed6657d-e927-568b-95e1-2665a8aea6a2',
  );
});

test('firmware UUID is upstream CalculateLegacyUUID(name): UUID v5 of the name', () => {
  // the value upstream's VM controller test expects for a VM named "testvm"
  expect(firmwareUUID('testvm')).toBe('5a9fc181-957e-5c32-9e5a-2de5e9673531');
  const out = d(baseVmi());
  expect(out.spec.domain.firmware.uuid).toBe(firmwareUUID('testvmi'));
  const given = baseVmi();
  given.spec.domain.firmware = { uuid: '11111111-1111-4111-8111-111111111111' };
  expect(d(given).spec.domain.firmware.uuid).toBe('11111111-1111-4111-8111-111111111111');
});

test('returns a deep copy and leaves the input alone', () => {
  const v = baseVmi();
  const before = JSON.stringify(v);
  const out = d(v);
  expect(JSON.stringify(v)).toBe(before);
  expect(out).not.toBe(v);
  expect(out.spec.domain).not.toBe(v.spec.domain);
});

test('is idempotent', () => {
  for (const r of referenceYamls()) {
    const once = d(parseManifests(r.text)[0]);
    expect(d(once)).toEqual(once);
  }
});

test('machine type by architecture', () => {
  expect(d(baseVmi()).spec.domain.machine.type).toBe('q35');
  expect(d(baseVmi()).spec.architecture).toBe('amd64');
  expect(d(baseVmi(), { arch: 'arm64' }).spec.domain.machine.type).toBe('virt');
  expect(d(baseVmi(), { arch: 's390x' }).spec.domain.machine.type).toBe('s390-ccw-virtio');
  const v = baseVmi();
  v.spec.domain.machine = { type: 'pc-q35-7.2' };
  expect(d(v).spec.domain.machine.type).toBe('pc-q35-7.2');
});

test('arm64: EFI without secure boot, host-passthrough, cdroms on scsi', () => {
  const v = baseVmi();
  v.spec.domain.devices.disks[1] = { name: 'cloudinit', cdrom: {} };
  const out = d(v, { arch: 'arm64' });
  expect(out.spec.architecture).toBe('arm64');
  expect(out.spec.domain.firmware.bootloader).toEqual({ efi: { secureBoot: false } });
  expect(out.spec.domain.cpu.model).toBe('host-passthrough');
  expect(out.spec.domain.devices.disks[1].cdrom.bus).toBe('scsi');
  expect(validateObject(out)).toEqual([]);
  // amd64 gets none of that
  const a = d(v);
  expect(a.spec.domain.firmware.bootloader).toBeUndefined();
  expect(a.spec.domain.devices.disks[1].cdrom.bus).toBe('sata');
});

test('disks: type, bus, cdrom readonly and tray, lun bus, a disk for every volume', () => {
  const v = baseVmi();
  v.spec.domain.devices.disks = [
    { name: 'root' },
    { name: 'cd', cdrom: {} },
    { name: 'l', lun: {} },
    { name: 'sata', disk: { bus: 'sata' } },
  ];
  v.spec.volumes.push(
    { name: 'cd', containerDisk: { image: 'x' } },
    { name: 'l', persistentVolumeClaim: { claimName: 'p' } },
    { name: 'sata', emptyDisk: { capacity: '1Gi' } },
  );
  const disks = d(v).spec.domain.devices.disks;
  expect(disks).toEqual([
    { name: 'root', disk: { bus: 'virtio' } },
    { name: 'cd', cdrom: { bus: 'sata', readonly: true, tray: 'closed' } },
    { name: 'l', lun: { bus: 'scsi' } },
    { name: 'sata', disk: { bus: 'sata' } },
    { name: 'cloudinit', disk: { bus: 'virtio' } }, // volume without a disk gets one
  ]);
});

test('pod network: one masquerade interface unless autoattachPodInterface is false or networks are given', () => {
  const v = baseVmi();
  delete v.spec.networks;
  delete v.spec.domain.devices.interfaces;
  const out = d(v);
  expect(out.spec.domain.devices.interfaces).toEqual([{ name: 'default', masquerade: {}, model: 'virtio' }]);
  expect(out.spec.networks).toEqual([{ name: 'default', pod: {} }]);
  expect(validateObject(out)).toEqual([]);

  v.spec.domain.devices.autoattachPodInterface = false;
  const off = d(v);
  expect(off.spec.domain.devices.interfaces).toBeUndefined();
  expect(off.spec.networks).toBeUndefined();

  const given = baseVmi();
  given.spec.domain.devices.interfaces = [
    { name: 'default', bridge: {}, model: 'e1000', ports: [{ port: 80 }] },
  ];
  const g = d(given);
  expect(g.spec.domain.devices.interfaces).toEqual([
    { name: 'default', bridge: {}, model: 'e1000', ports: [{ port: 80, protocol: 'TCP' }] },
  ]);
  expect(g.spec.networks).toEqual([{ name: 'default', pod: {} }]);
});

test('interface model virtio, except sriov', () => {
  const v = baseVmi();
  v.spec.networks.push({ name: 'sr', multus: { networkName: 'sriov-net' } });
  v.spec.domain.devices.interfaces.push({ name: 'sr', sriov: {} });
  const ifs = d(v).spec.domain.devices.interfaces;
  expect(ifs[0].model).toBe('virtio');
  expect(ifs[1].model).toBeUndefined();
});

test.each([
  ['nothing given', undefined, undefined, { sockets: 1, cores: 1, threads: 1 }],
  ['cpu limit 3', undefined, { limits: { cpu: '3' } }, { sockets: 3, cores: 1, threads: 1 }],
  [
    'cpu request 1500m (rounded up)',
    undefined,
    { requests: { cpu: '1500m' } },
    { sockets: 2, cores: 1, threads: 1 },
  ],
  [
    'limit wins over request',
    undefined,
    { requests: { cpu: '1' }, limits: { cpu: '4' } },
    { sockets: 4, cores: 1, threads: 1 },
  ],
  ['only cores given', { cores: 4 }, { requests: { cpu: '8' } }, { sockets: 1, cores: 4, threads: 1 }],
  ['only threads given', { threads: 2 }, undefined, { sockets: 1, cores: 1, threads: 2 }],
])('cpu topology: %s', (_n, cpu, resources, want) => {
  const v = baseVmi();
  if (cpu) v.spec.domain.cpu = cpu;
  if (resources)
    v.spec.domain.resources = { ...resources, requests: { memory: '128Mi', ...(resources as Any).requests } };
  const out = d(v).spec.domain.cpu;
  expect({ sockets: out.sockets, cores: out.cores, threads: out.threads }).toEqual(want);
  expect(out.model).toBe(cpu && (cpu as Any).model ? (cpu as Any).model : 'host-model');
});

test('memory: guest from requests, requests from guest (or limits)', () => {
  expect(d(baseVmi()).spec.domain.memory.guest).toBe('128Mi');
  const g = baseVmi();
  g.spec.domain.resources = {};
  g.spec.domain.memory = { guest: '1Gi' };
  expect(d(g).spec.domain.resources.requests.memory).toBe('1Gi');
  const l = baseVmi();
  l.spec.domain.resources = { limits: { memory: '2Gi' } };
  const lo = d(l);
  expect(lo.spec.domain.resources.requests.memory).toBe('2Gi');
  expect(lo.spec.domain.memory.guest).toBe('2Gi');
});

test('firmware, clock, features, watchdog, inputs, grace period', () => {
  const v = baseVmi();
  v.spec.domain.firmware = { bootloader: { efi: {} } };
  v.spec.domain.clock = { utc: {}, timer: { hpet: { present: false }, pit: { tickPolicy: 'delay' } } };
  v.spec.domain.features = {
    acpi: {},
    smm: {},
    apic: { enabled: false },
    hyperv: { relaxed: {}, spinlocks: {}, synictimer: { direct: {} } },
  };
  v.spec.domain.devices.watchdog = { name: 'w' };
  v.spec.domain.devices.inputs = [{ name: 't', type: 'tablet' }];
  v.spec.domain.cpu = { features: [{ name: 'pcid' }] };
  const out = d(v);
  expect(out.spec.domain.firmware.bootloader.efi.secureBoot).toBe(true);
  expect(out.spec.domain.clock.timer).toEqual({
    hpet: { present: false },
    pit: { tickPolicy: 'delay', present: true },
  });
  expect(out.spec.domain.features).toEqual({
    acpi: { enabled: true },
    smm: { enabled: true },
    apic: { enabled: false },
    hyperv: {
      relaxed: { enabled: true },
      spinlocks: { enabled: true, spinlocks: 4096 },
      synictimer: { enabled: true, direct: { enabled: true } },
    },
  });
  expect(out.spec.domain.devices.watchdog).toEqual({ name: 'w', i6300esb: { action: 'reset' } });
  expect(out.spec.domain.devices.inputs).toEqual([{ name: 't', type: 'tablet', bus: 'usb' }]);
  expect(out.spec.domain.cpu.features).toEqual([{ name: 'pcid', policy: 'require' }]);
  expect(out.spec.terminationGracePeriodSeconds).toBe(30);
  expect(validateObject(out)).toEqual([]);
});

test('defaulted reference VMIs still validate', () => {
  for (const r of referenceYamls()) {
    const out = d(parseManifests(r.text)[0]);
    const errs = validateObject(out).filter((e) => !(r.file.startsWith('15-') && e.path.endsWith('.serial')));
    expect({ file: r.file, errs }).toEqual({ file: r.file, errs: [] });
  }
});

test('VM defaults: template defaulted, firmware UUID from the VM name, run strategy kept as given', () => {
  const vm = baseVm();
  const out: Any = setVirtualMachineDefaults(vm);
  expect(out.spec.template.spec.domain.firmware.uuid).toBe(firmwareUUID('testvm'));
  expect(out.spec.template.spec.domain.machine.type).toBe('q35');
  expect(out.spec.runStrategy).toBe('Always');
  expect(vm.spec.template.spec.domain.machine).toBeUndefined();
  expect(validateObject(out)).toEqual([]);
});

test('vmRunStrategy', () => {
  expect(vmRunStrategy({ spec: { runStrategy: 'Manual' } } as Any)).toBe('Manual');
  expect(vmRunStrategy({ spec: { running: true } } as Any)).toBe('Always');
  expect(vmRunStrategy({ spec: { running: false } } as Any)).toBe('Halted');
  expect(vmRunStrategy({ spec: {} } as Any)).toBe('Halted');
});
