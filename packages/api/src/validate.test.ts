import { parseManifests } from './manifests.js';
import { baseVm, baseVmi, baseVmim, referenceYamls, type Any } from './test-fixtures.js';
import {
  validateObject,
  validateVirtualMachine,
  validateVirtualMachineInstance,
  validateVirtualMachineInstanceMigration,
} from './validate.js';

const paths = (errs: { path: string }[]) => errs.map((e) => e.path).sort();

describe('valid manifests', () => {
  test('the base fixtures are valid', () => {
    expect(validateObject(baseVmi())).toEqual([]);
    expect(validateObject(baseVm())).toEqual([]);
    expect(validateObject(baseVmim())).toEqual([]);
  });

  test.each(referenceYamls().map((r) => [r.file, r.text]))('reference %s validates', (file, text) => {
    const docs = parseManifests(text);
    expect(docs.length).toBe(1);
    const errs = validateObject(docs[0]);
    if (file === '15-xml-metachars.yaml') {
      // This vector exercises the converter's XML escaping with a firmware serial and a disk serial
      // that upstream's admission webhook rejects (serials are limited to [A-Za-z0-9_.+-]); we keep
      // upstream's rule, so exactly these two errors.
      expect(errs).toEqual([
        { path: 'spec.domain.firmware.serial', reason: expect.stringMatching(/A-Za-z0-9_\.\+-/) },
        { path: 'spec.domain.devices.disks[0].serial', reason: expect.stringMatching(/A-Za-z0-9_\.\+-/) },
      ]);
    } else {
      expect(errs).toEqual([]);
    }
  });

  test('nulls are treated as absent, as the API server does', () => {
    const v = baseVmi();
    v.spec.nodeSelector = null;
    v.spec.domain.cpu = null;
    v.status = null;
    expect(validateObject(v)).toEqual([]);
  });

  test('quantities may be numbers; cpu may be fractional', () => {
    const v = baseVmi();
    v.spec.domain.resources = { requests: { memory: 134217728, cpu: '500m' }, limits: { cpu: 1 } };
    expect(validateObject(v)).toEqual([]);
  });

  test('a VM written with upstream conventions (running, status, dataVolumeTemplates) is valid', () => {
    const vm = baseVm();
    delete vm.spec.runStrategy;
    vm.spec.running = false;
    vm.spec.dataVolumeTemplates = [
      { metadata: { name: 'dv' }, spec: { pvc: { accessModes: ['ReadWriteOnce'] } } },
    ];
    vm.spec.template.spec.volumes[0] = { name: 'root', dataVolume: { name: 'dv' } };
    vm.metadata.labels = { 'app.kubernetes.io/name': 'test', 'kubevirt.io/vm': 'testvm', empty: '' };
    vm.status = { printableStatus: 'Stopped', ready: false, created: false, someNewField: 1 };
    expect(validateObject(vm)).toEqual([]);
  });

  test('a VMI with status from a cluster is valid (status is tolerant of fields we do not model)', () => {
    const v = baseVmi();
    v.status = {
      phase: 'Running',
      nodeName: 'node01',
      interfaces: [{ name: 'default', ipAddress: '10.244.0.5', mac: '02:00:00:aa:bb:cc' }],
      conditions: [{ type: 'Ready', status: 'True', lastProbeTime: null }],
      guestOSInfo: { name: 'Fedora Linux' },
      futureField: { x: 1 },
    };
    expect(validateObject(v)).toEqual([]);
  });
});

type Case = [string, (v: Any) => void, string[]];

// Each case breaks one thing in a valid VMI and names every path that must be reported.
const vmiCases: Case[] = [
  [
    'disk with no volume',
    (v) => v.spec.domain.devices.disks.push({ name: 'data', disk: {} }),
    ['spec.domain.devices.disks[2].name'],
  ],
  [
    'duplicate disk names',
    (v) => v.spec.domain.devices.disks.push({ name: 'root', cdrom: {} }),
    ['spec.domain.devices.disks[2].name'],
  ],
  [
    'duplicate volume names',
    (v) => v.spec.volumes.push({ name: 'root', emptyDisk: { capacity: '1Gi' } }),
    ['spec.volumes[2].name'],
  ],
  [
    'unknown disk bus',
    (v) => (v.spec.domain.devices.disks[0].disk.bus = 'floppy'),
    ['spec.domain.devices.disks[0].disk.bus'],
  ],
  [
    'ide bus',
    (v) => (v.spec.domain.devices.disks[1].disk.bus = 'ide'),
    ['spec.domain.devices.disks[1].disk.bus'],
  ],
  [
    'cdrom on virtio',
    (v) => (v.spec.domain.devices.disks[1] = { name: 'cloudinit', cdrom: { bus: 'virtio' } }),
    ['spec.domain.devices.disks[1].cdrom.bus'],
  ],
  [
    'disk with two targets',
    (v) => (v.spec.domain.devices.disks[1].cdrom = {}),
    ['spec.domain.devices.disks[1]'],
  ],
  [
    'duplicate boot orders on disks',
    (v) => {
      v.spec.domain.devices.disks[0].bootOrder = 1;
      v.spec.domain.devices.disks[1].bootOrder = 1;
    },
    ['spec.domain.devices.disks[1].bootOrder'],
  ],
  [
    'duplicate boot order between an interface and a disk',
    (v) => {
      v.spec.domain.devices.interfaces[0].bootOrder = 2;
      v.spec.domain.devices.disks[1].bootOrder = 2;
    },
    ['spec.domain.devices.disks[1].bootOrder'],
  ],
  [
    'boot order zero',
    (v) => (v.spec.domain.devices.disks[0].bootOrder = 0),
    ['spec.domain.devices.disks[0].bootOrder'],
  ],
  [
    'interface with no network',
    (v) => (v.spec.domain.devices.interfaces[0].name = 'other'),
    ['spec.domain.devices.interfaces[0].name', 'spec.networks[0].name'],
  ],
  [
    'interface with two bindings',
    (v) => (v.spec.domain.devices.interfaces[0].bridge = {}),
    ['spec.domain.devices.interfaces[0]'],
  ],
  [
    'interface with no binding',
    (v) => delete v.spec.domain.devices.interfaces[0].masquerade,
    ['spec.domain.devices.interfaces[0]'],
  ],
  [
    'bad MAC',
    (v) => (v.spec.domain.devices.interfaces[0].macAddress = '02:00:00:zz:bb:cc'),
    ['spec.domain.devices.interfaces[0].macAddress'],
  ],
  [
    'short MAC',
    (v) => (v.spec.domain.devices.interfaces[0].macAddress = '02:00:00:aa:bb'),
    ['spec.domain.devices.interfaces[0].macAddress'],
  ],
  [
    'multicast MAC',
    (v) => (v.spec.domain.devices.interfaces[0].macAddress = '01:00:5e:aa:bb:cc'),
    ['spec.domain.devices.interfaces[0].macAddress'],
  ],
  [
    'unknown interface model',
    (v) => (v.spec.domain.devices.interfaces[0].model = 'virtio-net'),
    ['spec.domain.devices.interfaces[0].model'],
  ],
  [
    'masquerade on a multus network',
    (v) => (v.spec.networks[0] = { name: 'default', multus: { networkName: 'br1' } }),
    ['spec.domain.devices.interfaces[0].masquerade'],
  ],
  [
    'port out of range',
    (v) => (v.spec.domain.devices.interfaces[0].ports = [{ port: 70000 }]),
    ['spec.domain.devices.interfaces[0].ports[0].port'],
  ],
  [
    'port 0',
    (v) => (v.spec.domain.devices.interfaces[0].ports = [{ port: 80 }, { port: 0 }]),
    ['spec.domain.devices.interfaces[0].ports[1].port'],
  ],
  [
    'duplicate port (TCP is the default protocol)',
    (v) =>
      (v.spec.domain.devices.interfaces[0].ports = [
        { port: 80 },
        { port: 53, protocol: 'UDP' },
        { port: 80, protocol: 'TCP' },
      ]),
    ['spec.domain.devices.interfaces[0].ports[2].port'],
  ],
  [
    'two pod networks',
    (v) => {
      v.spec.networks.push({ name: 'second', pod: {} });
      v.spec.domain.devices.interfaces.push({ name: 'second', bridge: {} });
    },
    ['spec.networks[1].pod'],
  ],
  [
    'bad memory quantity',
    (v) => (v.spec.domain.resources.requests.memory = '12xx'),
    ['spec.domain.resources.requests.memory'],
  ],
  [
    'bad cpu quantity in limits',
    (v) => (v.spec.domain.resources.limits = { cpu: 'two' }),
    ['spec.domain.resources.limits.cpu'],
  ],
  [
    'negative memory',
    (v) => (v.spec.domain.resources.requests.memory = '-128Mi'),
    ['spec.domain.resources.requests.memory'],
  ],
  [
    'missing memory',
    (v) => delete v.spec.domain.resources.requests.memory,
    ['spec.domain.resources.requests.memory'],
  ],
  [
    'memory below 1M',
    (v) => (v.spec.domain.resources.requests.memory = '900k'),
    ['spec.domain.resources.requests.memory'],
  ],
  [
    'memory request above limit',
    (v) => (v.spec.domain.resources.limits = { memory: '64Mi' }),
    ['spec.domain.resources.requests.memory'],
  ],
  ['negative cores', (v) => (v.spec.domain.cpu = { cores: -1 }), ['spec.domain.cpu.cores']],
  ['non-integer sockets', (v) => (v.spec.domain.cpu = { sockets: 1.5 }), ['spec.domain.cpu.sockets']],
  [
    'sockets above maxSockets',
    (v) => (v.spec.domain.cpu = { sockets: 4, maxSockets: 2 }),
    ['spec.domain.cpu.sockets'],
  ],
  [
    'dedicated CPUs not matching the topology',
    (v) => {
      v.spec.domain.cpu = { sockets: 1, cores: 4, dedicatedCpuPlacement: true };
      v.spec.domain.resources.requests.cpu = '2';
    },
    ['spec.domain.cpu.dedicatedCpuPlacement'],
  ],
  [
    'dedicated CPUs with unequal request and limit',
    (v) => {
      v.spec.domain.cpu = { dedicatedCpuPlacement: true };
      v.spec.domain.resources = {
        requests: { cpu: '2', memory: '1Gi' },
        limits: { cpu: '4', memory: '1Gi' },
      };
    },
    ['spec.domain.cpu.dedicatedCpuPlacement'],
  ],
  [
    'dedicated CPUs with a fractional request',
    (v) => {
      v.spec.domain.cpu = { dedicatedCpuPlacement: true };
      v.spec.domain.resources.requests.cpu = '1500m';
    },
    ['spec.domain.resources.requests.cpu'],
  ],
  [
    'dedicated CPUs with nothing to size them',
    (v) => (v.spec.domain.cpu = { dedicatedCpuPlacement: true }),
    ['spec.domain.cpu.dedicatedCpuPlacement'],
  ],
  [
    'isolateEmulatorThread without dedicated CPUs',
    (v) => (v.spec.domain.cpu = { isolateEmulatorThread: true }),
    ['spec.domain.cpu.isolateEmulatorThread'],
  ],
  [
    'NUMA passthrough without dedicated CPUs and hugepages',
    (v) => (v.spec.domain.cpu = { numa: { guestMappingPassthrough: {} } }),
    ['spec.domain.cpu.numa.guestMappingPassthrough', 'spec.domain.cpu.numa.guestMappingPassthrough'],
  ],
  [
    'guest memory above the limit',
    (v) => {
      v.spec.domain.memory = { guest: '2Gi' };
      v.spec.domain.resources = { limits: { memory: '1Gi' } };
    },
    ['spec.domain.memory.guest'],
  ],
  [
    'hugepages larger than memory',
    (v) => (v.spec.domain.memory = { hugepages: { pageSize: '1Gi' } }),
    ['spec.domain.resources.requests.memory'],
  ],
  [
    'hugepages larger than the guest memory',
    (v) => {
      v.spec.domain.memory = { guest: '512Mi', hugepages: { pageSize: '1Gi' } };
      v.spec.domain.resources = {};
    },
    ['spec.domain.memory.guest'],
  ],
  [
    'invalid hugepage size',
    (v) => (v.spec.domain.memory = { hugepages: { pageSize: 'huge' } }),
    ['spec.domain.memory.hugepages.pageSize'],
  ],
  [
    'memory not a multiple of the hugepage size',
    (v) => {
      v.spec.domain.memory = { hugepages: { pageSize: '2Mi' } };
      v.spec.domain.resources.requests.memory = '129Mi';
    },
    ['spec.domain.resources.requests.memory'],
  ],
  [
    'volume with two sources',
    (v) => (v.spec.volumes[0].emptyDisk = { capacity: '1Gi' }),
    ['spec.volumes[0]'],
  ],
  ['volume with no source', (v) => delete v.spec.volumes[0].containerDisk, ['spec.volumes[0]']],
  [
    'volume name not a DNS label',
    (v) => v.spec.volumes.push({ name: 'Data_1', emptyDisk: { capacity: '1Gi' } }),
    ['spec.volumes[2].name'],
  ],
  [
    'hostDisk with a relative path',
    (v) => v.spec.volumes.push({ name: 'h', hostDisk: { path: 'disk.img', type: 'Disk' } }),
    ['spec.volumes[2].hostDisk.path'],
  ],
  [
    'hostDisk with a .. component',
    (v) => v.spec.volumes.push({ name: 'h', hostDisk: { path: '/var/lib/../../etc/shadow', type: 'Disk' } }),
    ['spec.volumes[2].hostDisk.path'],
  ],
  [
    'hostDisk at the root directory',
    (v) => v.spec.volumes.push({ name: 'h', hostDisk: { path: '/', type: 'Disk' } }),
    ['spec.volumes[2].hostDisk.path'],
  ],
  [
    'hostDisk DiskOrCreate without capacity',
    (v) => v.spec.volumes.push({ name: 'h', hostDisk: { path: '/d.img', type: 'DiskOrCreate' } }),
    ['spec.volumes[2].hostDisk.capacity'],
  ],
  [
    'hostDisk unknown type',
    (v) => v.spec.volumes.push({ name: 'h', hostDisk: { path: '/d.img', type: 'File' } }),
    ['spec.volumes[2].hostDisk.type'],
  ],
  [
    'cloud-init with two user data sources',
    (v) => (v.spec.volumes[1].cloudInitNoCloud.userDataBase64 = 'I2Nsb3VkLWNvbmZpZwo='),
    ['spec.volumes[1].cloudInitNoCloud'],
  ],
  [
    'firmware serial with bad characters',
    (v) => (v.spec.domain.firmware = { serial: 'SN 42' }),
    ['spec.domain.firmware.serial'],
  ],
  [
    'disk name not a DNS label',
    (v) => {
      v.spec.domain.devices.disks[0].name = 'Root';
      v.spec.volumes[0].name = 'Root';
    },
    ['spec.domain.devices.disks[0].name', 'spec.volumes[0].name'],
  ],
  [
    'readonly sata disk',
    (v) => (v.spec.domain.devices.disks[0].disk = { bus: 'sata', readonly: true }),
    ['spec.domain.devices.disks[0].disk.bus'],
  ],
  [
    'lun on a container disk',
    (v) => (v.spec.domain.devices.disks[0] = { name: 'root', lun: {} }),
    ['spec.domain.devices.disks[0].lun'],
  ],
  [
    'custom block size not a power of 2',
    (v) => (v.spec.domain.devices.disks[0].blockSize = { custom: { logical: 512, physical: 3000 } }),
    ['spec.domain.devices.disks[0].blockSize.custom.physical'],
  ],
  [
    'logical block size above physical',
    (v) => (v.spec.domain.devices.disks[0].blockSize = { custom: { logical: 4096, physical: 512 } }),
    ['spec.domain.devices.disks[0].blockSize.custom.logical'],
  ],
  [
    'container disk path with ..',
    (v) => (v.spec.volumes[0].containerDisk.path = '/disk/../etc/passwd'),
    ['spec.volumes[0].containerDisk.path'],
  ],
  [
    'secret volume without a secret name',
    (v) => v.spec.volumes.push({ name: 's', secret: {} }),
    ['spec.volumes[2].secret.secretName'],
  ],
  [
    'two service account volumes',
    (v) =>
      v.spec.volumes.push(
        { name: 'sa1', serviceAccount: { serviceAccountName: 'a' } },
        { name: 'sa2', serviceAccount: { serviceAccountName: 'b' } },
      ),
    ['spec.volumes'],
  ],
  [
    'cloud-init user data above 2048 bytes',
    (v) => (v.spec.volumes[1].cloudInitNoCloud.userData = '#cloud-config\n' + 'x'.repeat(2100)),
    ['spec.volumes[1].cloudInitNoCloud'],
  ],
  [
    'cloud-init bad base64',
    (v) => (v.spec.volumes[1].cloudInitNoCloud = { userDataBase64: 'not base64!' }),
    ['spec.volumes[1].cloudInitNoCloud.userDataBase64'],
  ],
  [
    'cloud-init with nothing',
    (v) => (v.spec.volumes[1].cloudInitNoCloud = {}),
    ['spec.volumes[1].cloudInitNoCloud'],
  ],
  [
    'kernel path with relative parts',
    (v) =>
      (v.spec.domain.firmware = { kernelBoot: { container: { image: 'k', kernelPath: 'boot/vmlinuz' } } }),
    ['spec.domain.firmware.kernelBoot.container.kernelPath'],
  ],
  [
    'probe with two handlers',
    (v) => (v.spec.readinessProbe = { tcpSocket: { port: 22 }, guestAgentPing: {} }),
    ['spec.readinessProbe'],
  ],
  ['probe with no handler', (v) => (v.spec.livenessProbe = { periodSeconds: 5 }), ['spec.livenessProbe']],
  [
    'http probe without the pod network',
    (v) => {
      v.spec.networks = [{ name: 'default', multus: { networkName: 'br1' } }];
      v.spec.domain.devices.interfaces = [{ name: 'default', bridge: {} }];
      v.spec.readinessProbe = { httpGet: { port: 80 } };
    },
    ['spec.readinessProbe.httpGet'],
  ],
  [
    'paused start with a liveness probe',
    (v) => {
      v.spec.startStrategy = 'Paused';
      v.spec.livenessProbe = { guestAgentPing: {} };
    },
    ['spec.startStrategy'],
  ],
  ['dnsPolicy None without dnsConfig', (v) => (v.spec.dnsPolicy = 'None'), ['spec.dnsConfig']],
  [
    'dnsConfig nameserver not an IP',
    (v) => (v.spec.dnsConfig = { nameservers: ['dns.example.com'] }),
    ['spec.dnsConfig.nameservers[0]'],
  ],
  ['unknown dnsPolicy', (v) => (v.spec.dnsPolicy = 'Google'), ['spec.dnsPolicy']],
  ['subdomain not a DNS subdomain', (v) => (v.spec.subdomain = 'my_sub'), ['spec.subdomain']],
  [
    'two default multus networks',
    (v) => {
      v.spec.networks = [
        { name: 'a', multus: { networkName: 'n1', default: true } },
        { name: 'b', multus: { networkName: 'n2', default: true } },
      ];
      v.spec.domain.devices.interfaces = [
        { name: 'a', bridge: {} },
        { name: 'b', bridge: {} },
      ];
    },
    ['spec.networks[1].multus.default'],
  ],
  [
    'default multus network next to the pod network',
    (v) => {
      v.spec.networks.push({ name: 'b', multus: { networkName: 'n2', default: true } });
      v.spec.domain.devices.interfaces.push({ name: 'b', bridge: {} });
    },
    ['spec.networks[1].multus.default'],
  ],
  [
    'access credential without the cloud-init volume it needs',
    (v) => {
      v.spec.volumes.pop();
      v.spec.domain.devices.disks.pop();
      v.spec.accessCredentials = [
        { sshPublicKey: { source: { secret: { secretName: 'keys' } }, propagationMethod: { noCloud: {} } } },
      ];
    },
    ['spec.accessCredentials[0].sshPublicKey.propagationMethod'],
  ],
  [
    'disk serial with bad characters',
    (v) => (v.spec.domain.devices.disks[0].serial = 'disk 1/2'),
    ['spec.domain.devices.disks[0].serial'],
  ],
  [
    'unknown cache mode',
    (v) => (v.spec.domain.devices.disks[0].cache = 'fast'),
    ['spec.domain.devices.disks[0].cache'],
  ],
  [
    'dedicated IO thread on sata',
    (v) => Object.assign(v.spec.domain.devices.disks[0], { disk: { bus: 'sata' }, dedicatedIOThread: true }),
    ['spec.domain.devices.disks[0].dedicatedIOThread'],
  ],
  [
    'bad PCI address',
    (v) => (v.spec.domain.devices.disks[0].disk.pciAddress = '0000:81:01'),
    ['spec.domain.devices.disks[0].disk.pciAddress'],
  ],
  [
    'EFI secure boot without SMM',
    (v) => (v.spec.domain.firmware = { bootloader: { efi: {} } }),
    ['spec.domain.firmware.bootloader.efi.secureBoot'],
  ],
  [
    'EFI secure boot with SMM disabled',
    (v) => {
      v.spec.domain.firmware = { bootloader: { efi: { secureBoot: true } } };
      v.spec.domain.features = { smm: { enabled: false } };
    },
    ['spec.domain.firmware.bootloader.efi.secureBoot'],
  ],
  [
    'bios and efi together',
    (v) => (v.spec.domain.firmware = { bootloader: { bios: {}, efi: { secureBoot: false } } }),
    ['spec.domain.firmware.bootloader'],
  ],
  [
    'bad firmware uuid',
    (v) => (v.spec.domain.firmware = { uuid: 'not-a-uuid' }),
    ['spec.domain.firmware.uuid'],
  ],
  [
    'kernel args without a kernel',
    (v) => (v.spec.domain.firmware = { kernelBoot: { kernelArgs: 'console=ttyS0' } }),
    ['spec.domain.firmware.kernelBoot.kernelArgs'],
  ],
  [
    'utc and timezone together',
    (v) => (v.spec.domain.clock = { utc: {}, timezone: 'UTC' }),
    ['spec.domain.clock'],
  ],
  [
    'unknown time zone',
    (v) => (v.spec.domain.clock = { timezone: 'Mars/Olympus_Mons' }),
    ['spec.domain.clock.timezone'],
  ],
  [
    'unknown tick policy',
    (v) => (v.spec.domain.clock = { timer: { rtc: { tickPolicy: 'sometimes' } } }),
    ['spec.domain.clock.timer.rtc.tickPolicy'],
  ],
  [
    'too few hyperv spinlocks',
    (v) => (v.spec.domain.features = { hyperv: { spinlocks: { spinlocks: 100 } } }),
    ['spec.domain.features.hyperv.spinlocks.spinlocks'],
  ],
  ['invalid name', (v) => (v.metadata.name = 'Test_VMI'), ['metadata.name']],
  ['missing name', (v) => delete v.metadata.name, ['metadata.name']],
  ['invalid namespace', (v) => (v.metadata.namespace = 'Default'), ['metadata.namespace']],
  ['invalid label value', (v) => (v.metadata.labels = { app: 'my app' }), ['metadata.labels.app']],
  [
    'invalid label key',
    (v) => (v.metadata.labels = { 'Example.com/x': 'y' }),
    ['metadata.labels["Example.com/x"]'],
  ],
  [
    'invalid annotation key',
    (v) => (v.metadata.annotations = { 'a b': 'c' }),
    ['metadata.annotations["a b"]'],
  ],
  ['invalid hostname', (v) => (v.spec.hostname = 'my_host'), ['spec.hostname']],
  [
    'unknown field under spec.domain',
    (v) => (v.spec.domain.devices.disks[0].foo = 1),
    ['spec.domain.devices.disks[0].foo'],
  ],
  ['unknown field at spec', (v) => (v.spec.runStrategy = 'Always'), ['spec.runStrategy']],
  [
    'wrong type for a boolean',
    (v) => (v.spec.domain.devices.autoattachPodInterface = 'no'),
    ['spec.domain.devices.autoattachPodInterface'],
  ],
  ['wrong type for a list', (v) => (v.spec.volumes = { name: 'root' }), ['spec.volumes']],
  [
    'negative grace period',
    (v) => (v.spec.terminationGracePeriodSeconds = -1),
    ['spec.terminationGracePeriodSeconds'],
  ],
  ['unknown eviction strategy', (v) => (v.spec.evictionStrategy = 'Sometimes'), ['spec.evictionStrategy']],
  ['missing domain', (v) => delete v.spec.domain, ['spec.domain']],
  ['missing spec', (v) => delete v.spec, ['spec']],
  [
    'unknown input type',
    (v) => (v.spec.domain.devices.inputs = [{ name: 'kbd', type: 'keyboard' }]),
    ['spec.domain.devices.inputs[0].type'],
  ],
  [
    'video type unknown, and video without the graphics device',
    (v) => {
      v.spec.domain.devices.video = { type: 'hologram' };
      v.spec.domain.devices.autoattachGraphicsDevice = false;
    },
    ['spec.domain.devices.video', 'spec.domain.devices.video.type'],
  ],
  [
    'watchdog action unknown',
    (v) => (v.spec.domain.devices.watchdog = { name: 'w', i6300esb: { action: 'explode' } }),
    ['spec.domain.devices.watchdog.i6300esb.action'],
  ],
  [
    'toleration with Exists and a value',
    (v) => (v.spec.tolerations = [{ key: 'k', operator: 'Exists', value: 'v' }]),
    ['spec.tolerations[0].value'],
  ],
  ['wrong apiVersion', (v) => (v.apiVersion = 'kubevirt.io/v1alpha3'), ['apiVersion']],
];

describe('invalid VMIs: each error at its path', () => {
  test('there are at least 25 invalid manifests', () => expect(vmiCases.length).toBeGreaterThanOrEqual(25));

  test.each(vmiCases)('%s', (_name, mutate, want) => {
    const v = baseVmi();
    mutate(v);
    const errs = validateObject(v);
    expect(paths(errs)).toEqual([...want].sort());
    for (const e of errs) expect(e.reason.length).toBeGreaterThan(5);
  });

  test('validateVirtualMachineInstance reports the same as validateObject (minus apiVersion)', () => {
    const v = baseVmi();
    v.spec.domain.devices.disks.push({ name: 'data', disk: {} });
    expect(validateVirtualMachineInstance(v)).toEqual(validateObject(v));
  });

  test('all errors are returned at once', () => {
    const v = baseVmi();
    for (const [, mutate] of vmiCases.filter(([n]) =>
      [
        'disk with no volume',
        'bad MAC',
        'invalid name',
        'volume with two sources',
        'unknown cache mode',
        'negative cores',
      ].includes(n),
    )) {
      mutate(v);
    }
    expect(paths(validateObject(v))).toEqual(
      [
        'spec.domain.devices.disks[2].name',
        'spec.domain.devices.interfaces[0].macAddress',
        'metadata.name',
        'spec.volumes[0]',
        'spec.domain.devices.disks[0].cache',
        'spec.domain.cpu.cores',
      ].sort(),
    );
  });

  test('reasons are plain and name the problem', () => {
    const v = baseVmi();
    v.spec.domain.devices.disks[0].disk.bus = 'floppy';
    v.spec.domain.devices.disks.push({ name: 'data', disk: {} });
    v.spec.domain.resources.requests.memory = '12xx';
    v.spec.evictionStrategy = 'Sometimes';
    const byPath = Object.fromEntries(validateObject(v).map((e) => [e.path, e.reason]));
    expect(byPath['spec.domain.devices.disks[0].disk.bus']).toMatch(
      /unknown bus "floppy": must be one of virtio, sata, scsi, usb/,
    );
    expect(byPath['spec.domain.devices.disks[2].name']).toMatch(/no volume named "data"/);
    expect(byPath['spec.domain.resources.requests.memory']).toMatch(/invalid quantity "12xx"/);
    expect(byPath['spec.evictionStrategy']).toMatch(
      /must be one of None, LiveMigrate, LiveMigrateIfPossible, External/,
    );
  });
});

const vmCases: Case[] = [
  ['running and runStrategy together', (vm) => (vm.spec.running = true), ['spec.running']],
  ['unknown runStrategy', (vm) => (vm.spec.runStrategy = 'Sometimes'), ['spec.runStrategy']],
  ['missing template', (vm) => delete vm.spec.template, ['spec.template']],
  [
    'disk with no volume in the template',
    (vm) => vm.spec.template.spec.domain.devices.disks.push({ name: 'data', disk: {} }),
    ['spec.template.spec.domain.devices.disks[2].name'],
  ],
  [
    'bad quantity in the template',
    (vm) => (vm.spec.template.spec.domain.resources.requests.memory = '1 Gi'),
    ['spec.template.spec.domain.resources.requests.memory'],
  ],
  [
    'unknown field in the template',
    (vm) => (vm.spec.template.spec.domain.cpu = { cores: 1, coress: 2 }),
    ['spec.template.spec.domain.cpu.coress'],
  ],
  [
    'invalid template label value type',
    (vm) => (vm.spec.template.metadata.labels = { app: 1 }),
    ['spec.template.metadata.labels.app'],
  ],
  ['invalid VM name', (vm) => (vm.metadata.name = 'vm.'), ['metadata.name']],
  [
    'invalid template label',
    (vm) => (vm.spec.template.metadata.labels = { 'kubevirt.io/': 'x' }),
    ['spec.template.metadata.labels["kubevirt.io/"]'],
  ],
  [
    'data volume template not used by a volume',
    (vm) => (vm.spec.dataVolumeTemplates = [{ metadata: { name: 'rootdv' }, spec: { storage: {} } }]),
    ['spec.dataVolumeTemplates[0]'],
  ],
  [
    'instancetype and preference without a name',
    (vm) => {
      vm.spec.instancetype = { kind: 'VirtualMachineInstancetype' };
      vm.spec.preference = {};
    },
    ['spec.instancetype', 'spec.preference'],
  ],
  [
    'inferFromVolume with a name and kind, of a volume the template lacks, with an unknown failure policy',
    (vm) => {
      vm.spec.instancetype = {
        name: 'u1.small',
        kind: 'VirtualMachineInstancetype',
        inferFromVolume: vm.spec.template.spec.volumes[0].name,
      };
      vm.spec.preference = { inferFromVolume: 'data', inferFromVolumeFailurePolicy: 'Maybe' };
    },
    [
      'spec.instancetype.name',
      'spec.instancetype.kind',
      'spec.preference.inferFromVolume',
      'spec.preference.inferFromVolumeFailurePolicy',
    ],
  ],
];

test('inferFromVolume naming a volume of the template is valid (the webhook infers the matcher)', () => {
  const vm = baseVm();
  const volume = vm.spec.template.spec.volumes[0].name;
  vm.spec.instancetype = { inferFromVolume: volume, inferFromVolumeFailurePolicy: 'Ignore' };
  vm.spec.preference = { inferFromVolume: volume };
  expect(validateObject(vm)).toEqual([]);
});

describe('invalid VMs', () => {
  test.each(vmCases)('%s', (_name, mutate, want) => {
    const vm = baseVm();
    mutate(vm);
    expect(paths(validateObject(vm))).toEqual([...want].sort());
    expect(paths(validateVirtualMachine(vm))).toEqual([...want].sort());
  });
});

test('a template without memory names the template paths, unless an instance type gives the memory', () => {
  const vm = baseVm();
  delete vm.spec.template.spec.domain.resources;
  expect(validateVirtualMachine(vm)).toEqual([
    {
      path: 'spec.template.spec.domain.resources.requests.memory',
      reason:
        'no memory requested: set spec.template.spec.domain.resources.requests.memory, spec.template.spec.domain.resources.limits.memory or spec.template.spec.domain.memory.guest',
    },
  ]);
  vm.spec.instancetype = { name: 'u1.medium' };
  expect(validateVirtualMachine(vm)).toEqual([]);
});

describe('invalid migrations and documents', () => {
  test('missing vmiName', () => {
    const m = baseVmim();
    delete m.spec.vmiName;
    expect(paths(validateVirtualMachineInstanceMigration(m))).toEqual(['spec.vmiName']);
  });
  test('empty vmiName', () => {
    const m = baseVmim();
    m.spec.vmiName = '';
    expect(paths(validateObject(m))).toEqual(['spec.vmiName']);
  });
  test('unknown kind', () => {
    expect(validateObject({ apiVersion: 'kubevirt.io/v1', kind: 'Pod' })).toEqual([
      { path: 'kind', reason: expect.stringMatching(/unsupported kind "Pod"/) },
    ]);
  });
  test('not an object', () => {
    expect(validateObject('hello')).toEqual([
      { path: '', reason: expect.stringMatching(/must be an object/) },
    ]);
    expect(validateObject([1])).toEqual([{ path: '', reason: expect.stringMatching(/must be an object/) }]);
  });
});
