import {
  type DefaultsOptions,
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

const d = (v: Any, opts?: DefaultsOptions): Any =>
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

// One test per default upstream's admission applies (v1.1.0 virt-api SetDefaultVirtualMachineInstance),
// named after upstream's function.

test('setDefaultCPUArch (arm64): EFI without secure boot, host-passthrough, virtio disks, scsi cdroms', () => {
  const v = baseVmi();
  v.spec.domain.devices.disks[1] = { name: 'cloudinit', cdrom: {} };
  const out = d(v, { arch: 'arm64' });
  expect(out.spec.architecture).toBe('arm64');
  expect(out.spec.domain.firmware.bootloader).toEqual({ efi: { secureBoot: false } });
  expect(out.spec.domain.cpu.model).toBe('host-passthrough');
  expect(out.spec.domain.devices.disks[0].disk.bus).toBe('virtio');
  // upstream gives the cdrom virtio and then refuses it in validation; ours gets scsi
  expect(out.spec.domain.devices.disks[1].cdrom.bus).toBe('scsi');
  expect(validateObject(out)).toEqual([]);
  // amd64 gets none of that
  const a = d(v);
  expect(a.spec.domain.firmware.bootloader).toBeUndefined();
  expect(a.spec.domain.devices.disks[1].cdrom.bus).toBe('sata');
});

test('setDefaultCPUArch (amd64): a disk, cdrom or lun without a bus gets sata; given buses kept', () => {
  const v = baseVmi();
  v.spec.domain.devices.disks = [
    { name: 'root', disk: {} },
    { name: 'cd', cdrom: {} },
    { name: 'l', lun: {} },
    { name: 'v', disk: { bus: 'virtio' } },
  ];
  v.spec.volumes.push(
    { name: 'cd', containerDisk: { image: 'x:1' } },
    { name: 'l', persistentVolumeClaim: { claimName: 'p' } },
    { name: 'v', emptyDisk: { capacity: '1Gi' } },
  );
  const disks = d(v).spec.domain.devices.disks;
  expect(disks.map((x: Any) => (x.disk ?? x.cdrom ?? x.lun).bus)).toEqual([
    'sata',
    'sata',
    'sata',
    'virtio',
    'sata', // the cloudinit volume's default disk
  ]);
  // a lun on sata cannot pass SCSI commands: refused once defaulted, naming the field
  expect(validateObject(d(v)).map((e) => e.path)).toEqual(['spec.domain.devices.disks[2].lun.bus']);
  // s390x/ppc64le take upstream's non-arm64 branch too
  expect(d(v, { arch: 's390x' }).spec.domain.devices.disks[0].disk.bus).toBe('sata');
});

test('setDefaultCPUModel: host-model, else the cluster CPU model; a given model is kept', () => {
  expect(d(baseVmi()).spec.domain.cpu.model).toBe('host-model');
  expect(d(baseVmi(), { cpuModel: 'Haswell' }).spec.domain.cpu.model).toBe('Haswell');
  const v = baseVmi();
  v.spec.domain.cpu = { model: 'host-passthrough' };
  expect(d(v, { cpuModel: 'Haswell' }).spec.domain.cpu.model).toBe('host-passthrough');
});

test('SetDefaults_DiskDevice, SetDefaults_CDRomTarget, blockSize.matchVolume', () => {
  const v = baseVmi();
  v.spec.domain.devices.disks = [
    { name: 'root' },
    { name: 'cd', cdrom: { bus: 'sata' } },
    { name: 'bs', disk: { bus: 'virtio' }, blockSize: { matchVolume: {} } },
  ];
  v.spec.volumes = [
    { name: 'root', containerDisk: { image: 'x:1' } },
    { name: 'cd', containerDisk: { image: 'y:1' } },
    { name: 'bs', emptyDisk: { capacity: '1Gi' } },
  ];
  expect(d(v).spec.domain.devices.disks).toEqual([
    { name: 'root', disk: { bus: 'sata' } },
    { name: 'cd', cdrom: { bus: 'sata', readonly: true, tray: 'closed' } },
    { name: 'bs', disk: { bus: 'virtio' }, blockSize: { matchVolume: { enabled: true } } },
  ]);
});

test('SetDefaultVolumeDisk: a volume that is neither a disk nor a filesystem gets a disk', () => {
  const v = baseVmi();
  v.spec.domain.devices.disks = [{ name: 'root', disk: { bus: 'virtio' } }];
  v.spec.domain.devices.filesystems = [{ name: 'fs', virtiofs: {} }];
  v.spec.volumes.push({ name: 'fs', persistentVolumeClaim: { claimName: 'c' } });
  const disks = d(v).spec.domain.devices.disks;
  expect(disks).toEqual([
    { name: 'root', disk: { bus: 'virtio' } },
    { name: 'cloudinit', disk: { bus: 'sata' } },
  ]);
});

test('SetVMISpecDefaultNetworkInterface: one masquerade interface unless autoattachPodInterface is false or networks are given', () => {
  const v = baseVmi();
  delete v.spec.networks;
  delete v.spec.domain.devices.interfaces;
  const out = d(v);
  expect(out.spec.domain.devices.interfaces).toEqual([{ name: 'default', masquerade: {} }]);
  expect(out.spec.networks).toEqual([{ name: 'default', pod: {} }]);
  expect(validateObject(out)).toEqual([]);

  v.spec.domain.devices.autoattachPodInterface = false;
  const off = d(v);
  expect(off.spec.domain.devices.interfaces).toBeUndefined();
  expect(off.spec.networks).toBeUndefined();

  // given interfaces are not touched (model and port protocol stay unset: the converter's defaults)
  const given = baseVmi();
  given.spec.domain.devices.interfaces = [{ name: 'default', bridge: {}, ports: [{ port: 80 }] }];
  const g = d(given);
  expect(g.spec.domain.devices.interfaces).toEqual([{ name: 'default', bridge: {}, ports: [{ port: 80 }] }]);
  expect(g.spec.networks).toEqual([{ name: 'default', pod: {} }]);
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
  // upstream leaves the others unset when any is given (the converter counts them as 1)
  [
    'only cores given',
    { cores: 4 },
    { requests: { cpu: '8' } },
    { sockets: undefined, cores: 4, threads: undefined },
  ],
  ['only threads given', { threads: 2 }, undefined, { sockets: undefined, cores: undefined, threads: 2 }],
])('SetDefaultGuestCPUTopology: %s', (_n, cpu, resources, want) => {
  const v = baseVmi();
  if (cpu) v.spec.domain.cpu = cpu;
  if (resources)
    v.spec.domain.resources = { ...resources, requests: { memory: '128Mi', ...(resources as Any).requests } };
  const out = d(v).spec.domain.cpu;
  expect({ sockets: out.sockets, cores: out.cores, threads: out.threads }).toEqual(want);
});

test('setDefaultResourceRequests: limits become requests; memory.guest (else hugepage size) becomes the memory request', () => {
  // baseVmi has requests.memory and no memory.guest: nothing is derived the other way
  expect(d(baseVmi()).spec.domain.memory).toBeUndefined();
  const g = baseVmi();
  g.spec.domain.resources = {};
  g.spec.domain.memory = { guest: '1Gi' };
  expect(d(g).spec.domain.resources.requests).toEqual({ memory: '1Gi' });
  expect(d(g, { memoryOvercommit: 150 }).spec.domain.resources.requests.memory).toBe(
    String(Math.floor((1024 ** 3 * 100) / 150)),
  );
  const l = baseVmi();
  l.spec.domain.resources = { limits: { memory: '2Gi', cpu: '2' } };
  l.spec.domain.memory = { guest: '1Gi' };
  // the limit wins over memory.guest, as upstream (limits are copied first)
  expect(d(l).spec.domain.resources.requests).toEqual({ memory: '2Gi', cpu: '2' });
  const h = baseVmi();
  h.spec.domain.resources = {};
  h.spec.domain.memory = { hugepages: { pageSize: '2Mi' } };
  expect(d(h).spec.domain.resources.requests.memory).toBe('2Mi');
});

test("upstream's examples/vmi-fedora-isolated.yaml (memory.guest, dedicatedCpuPlacement, no request) is accepted once defaulted", () => {
  const v: Any = {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: 'vmi-fedora' },
    spec: {
      domain: {
        cpu: { cores: 1, sockets: 1, threads: 1, dedicatedCpuPlacement: true, isolateEmulatorThread: true },
        devices: {
          disks: [
            { name: 'containerdisk', disk: { bus: 'virtio' } },
            { name: 'cloudinitdisk', disk: { bus: 'virtio' } },
          ],
          rng: {},
        },
        memory: { guest: '1024M' },
        resources: {},
      },
      terminationGracePeriodSeconds: 0,
      volumes: [
        {
          name: 'containerdisk',
          containerDisk: { image: 'quay.io/kubevirt/fedora-container-disk-demo:devel' },
        },
        { name: 'cloudinitdisk', cloudInitNoCloud: { userData: '#cloud-config\npassword: fedora\n' } },
      ],
    },
  };
  expect(validateObject(v)).toEqual([]); // as given (kv-validate) ...
  const out = d(v);
  expect(out.spec.domain.resources.requests.memory).toBe('1024M');
  expect(validateObject(out)).toEqual([]); // ... and as admission stores it
});

test('setGuestMemoryStatus: a VMI with memory.guest gets status.memory', () => {
  const g = baseVmi();
  g.spec.domain.memory = { guest: '1Gi' };
  expect(d(g).status.memory).toEqual({ guestAtBoot: '1Gi', guestCurrent: '1Gi', guestRequested: '1Gi' });
  expect(d(baseVmi()).status).toBeUndefined();
});

test('setDefaultPullPoliciesOnContainerDisks: :latest or untagged -> Always, else IfNotPresent', () => {
  const v = baseVmi();
  v.spec.volumes = [
    { name: 'a', containerDisk: { image: 'reg/img:latest' } },
    { name: 'b', containerDisk: { image: 'reg/img' } },
    { name: 'c', containerDisk: { image: 'reg/img:1.0' } },
    { name: 'e', containerDisk: { image: 'reg/img@sha256:abc' } },
    { name: 'f', containerDisk: { image: 'reg/img', imagePullPolicy: 'Never' } },
  ];
  v.spec.domain.devices.disks = [];
  expect(d(v).spec.volumes.map((x: Any) => x.containerDisk.imagePullPolicy)).toEqual([
    'Always',
    'Always',
    'IfNotPresent',
    'IfNotPresent',
    'Never',
  ]);
});

test('setDefaultEvictionStrategy: the cluster eviction strategy when the VMI sets none', () => {
  expect(d(baseVmi()).spec.evictionStrategy).toBeUndefined();
  expect(d(baseVmi(), { evictionStrategy: 'LiveMigrate' }).spec.evictionStrategy).toBe('LiveMigrate');
  const v = baseVmi();
  v.spec.evictionStrategy = 'None';
  expect(d(v, { evictionStrategy: 'LiveMigrate' }).spec.evictionStrategy).toBe('None');
});

test("SetDefaultNetworkInterface: the cluster's default binding on the pod network; slirp and a bridge not permitted are refused", async () => {
  const { DefaultsError } = await import('./defaults.js');
  const bare = () => {
    const v = baseVmi();
    delete v.spec.domain.devices.interfaces;
    delete v.spec.networks;
    return v;
  };
  expect(d(bare()).spec.domain.devices.interfaces).toEqual([{ name: 'default', masquerade: {} }]);
  expect(d(bare(), { defaultNetworkInterface: 'bridge' }).spec.domain.devices.interfaces).toEqual([
    { name: 'default', bridge: {} },
  ]);
  expect(d(bare(), { defaultNetworkInterface: 'bridge' }).spec.networks).toEqual([
    { name: 'default', pod: {} },
  ]);
  expect(() => d(bare(), { defaultNetworkInterface: 'slirp' })).toThrow(
    new DefaultsError('slirp interface is deprecated as of v1.3'),
  );
  expect(() =>
    d(bare(), { defaultNetworkInterface: 'bridge', permitBridgeInterfaceOnPodNetwork: false }),
  ).toThrow(new DefaultsError('bridge interface is not enabled in kubevirt-config'));
  // a VMI with interfaces of its own is left as it is, whatever the cluster permits
  const own = baseVmi();
  expect(d(own, { defaultNetworkInterface: 'slirp' }).spec.domain.devices.interfaces).toEqual(
    own.spec.domain.devices.interfaces,
  );
});

test('SetDefaults_Firmware / SetDefaults_VirtualMachineInstance: firmware and features always present, ACPI on', () => {
  const out = d(baseVmi());
  expect(out.spec.domain.firmware).toEqual({ uuid: firmwareUUID('testvmi') });
  expect(out.spec.domain.features).toEqual({ acpi: { enabled: true } });
  const off = baseVmi();
  off.spec.domain.features = { acpi: { enabled: false } };
  expect(d(off).spec.domain.features.acpi).toEqual({ enabled: false });
  // efi.secureBoot stays unset (nil means on upstream; the converter reads it so)
  const efi = baseVmi();
  efi.spec.domain.firmware = { bootloader: { efi: {} } };
  expect(d(efi).spec.domain.firmware.bootloader).toEqual({ efi: {} });
});

test('SetDefaults_*Timer, FeatureState, FeatureSpinlocks, SyNICTimer: given features and timers are enabled', () => {
  const v = baseVmi();
  v.spec.domain.clock = { utc: {}, timer: { hpet: { present: false }, pit: { tickPolicy: 'delay' } } };
  v.spec.domain.features = {
    smm: {},
    apic: { enabled: false },
    hyperv: { relaxed: {}, spinlocks: {}, synictimer: { direct: {} }, vendorid: { vendorid: 'x' } },
  };
  const out = d(v);
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
      // synictimer needs synic, synic needs vpindex (setDefaultHypervFeatureDependencies)
      synictimer: { enabled: true, direct: { enabled: true } },
      synic: { enabled: true },
      vpindex: { enabled: true },
      vendorid: { enabled: true, vendorid: 'x' },
    },
  });
  // a disabled spinlocks feature gets no retry count
  const sl = baseVmi();
  sl.spec.domain.features = { hyperv: { spinlocks: { enabled: false } } };
  expect(d(sl).spec.domain.features.hyperv.spinlocks).toEqual({ enabled: false });
  expect(validateObject(out)).toEqual([]);
});

test('setDefaultHypervFeatureDependencies: requirements turned on, explicit "off" left for validation; evmcs adds vmx', () => {
  const v = baseVmi();
  v.spec.domain.features = { hyperv: { ipi: {}, tlbflush: {}, evmcs: {} } };
  v.spec.domain.cpu = { features: [{ name: 'vmx', policy: 'optional' }, { name: 'pcid' }] };
  const out = d(v);
  expect(out.spec.domain.features.hyperv).toEqual({
    ipi: { enabled: true },
    tlbflush: { enabled: true },
    evmcs: { enabled: true },
    vpindex: { enabled: true },
    vapic: { enabled: true },
  });
  // policy of vmx forced to require; other features keep an unset policy (the converter's default: require)
  expect(out.spec.domain.cpu.features).toEqual([{ name: 'vmx', policy: 'require' }, { name: 'pcid' }]);
  const off = baseVmi();
  off.spec.domain.features = { hyperv: { synic: {}, vpindex: { enabled: false } } };
  expect(d(off).spec.domain.features.hyperv).toEqual({
    synic: { enabled: true },
    vpindex: { enabled: false },
  });
});

test('SetDefaults_Watchdog/I6300ESBWatchdog, input bus and type, probes', () => {
  const v = baseVmi();
  v.spec.domain.devices.watchdog = { name: 'w' };
  v.spec.domain.devices.inputs = [{ name: 't' }, { name: 'k', type: 'keyboard', bus: 'virtio' }];
  v.spec.readinessProbe = { tcpSocket: { port: 22 } };
  v.spec.livenessProbe = { guestAgentPing: {}, periodSeconds: 5, failureThreshold: 0 };
  const out = d(v);
  expect(out.spec.domain.devices.watchdog).toEqual({ name: 'w', i6300esb: { action: 'reset' } });
  expect(out.spec.domain.devices.inputs).toEqual([
    { name: 't', type: 'tablet', bus: 'usb' },
    { name: 'k', type: 'keyboard', bus: 'virtio' },
  ]);
  expect(out.spec.readinessProbe).toEqual({
    tcpSocket: { port: 22 },
    timeoutSeconds: 1,
    periodSeconds: 10,
    successThreshold: 1,
    failureThreshold: 3,
  });
  expect(out.spec.livenessProbe).toEqual({
    guestAgentPing: {},
    timeoutSeconds: 1,
    periodSeconds: 5,
    successThreshold: 1,
    failureThreshold: 3,
  });
  // upstream sets no grace period on admission (30 s is what the launcher and renderer use when unset)
  expect(out.spec.terminationGracePeriodSeconds).toBeUndefined();
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

test('hyperv dependencies: an explicitly disabled requirement is refused with both paths; evmcs needs vmx require', () => {
  const v = baseVmi();
  v.spec.domain.features = { hyperv: { synic: {}, vpindex: { enabled: false }, evmcs: {} } };
  v.spec.domain.cpu = { features: [{ name: 'vmx', policy: 'optional' }] };
  expect(validateObject(v)).toEqual([
    {
      path: 'spec.domain.features.hyperv.synic',
      reason: 'requires spec.domain.features.hyperv.vpindex, which is disabled',
    },
    {
      path: 'spec.domain.cpu.features[0].policy',
      reason: 'the vmx CPU feature must have policy require when hyperv evmcs is enabled',
    },
  ]);
  // upstream's defaults stop at the first conflicting requirement, so both errors stay after defaults
  expect(validateObject(d(v)).map((x) => x.path)).toEqual([
    'spec.domain.features.hyperv.synic',
    'spec.domain.cpu.features[0].policy',
  ]);
  // without the conflict the defaults fix the vmx policy
  v.spec.domain.features.hyperv.vpindex = {};
  expect(validateObject(d(v))).toEqual([]);
});
