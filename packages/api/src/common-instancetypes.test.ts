// The common instance types add-on: its objects against figures read from upstream's kubevirt/common-instancetypes
// v1.7.0 release bundles (names, vCPUs, memory, settings, requirements), our validator, the instance type and
// preference application, and the committed files under deploy/addons/common-instancetypes/ (not stale).
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  COMMON_INSTANCETYPES_VERSION,
  commonClusterInstancetypes,
  commonClusterPreferences,
  commonInstancetypeSizes,
  commonInstancetypesFiles,
} from './common-instancetypes.js';
import {
  applyToVmiSpec,
  checkPreferenceRequirements,
  type Instancetype,
  type Preference,
} from './instancetype.js';
import { parseManifests } from './manifests.js';
import type { VirtualMachineInstanceSpec } from './schemas.js';
import { validateObject } from './validate.js';

const ADDON = fileURLToPath(new URL('../../../deploy/addons/common-instancetypes/', import.meta.url));
const GEN = fileURLToPath(new URL('../../../tools/gen-common-instancetypes.mjs', import.meta.url));

const its = new Map(commonClusterInstancetypes().map((o) => [o.metadata.name!, o]));
const prefs = new Map(commonClusterPreferences().map((o) => [o.metadata.name!, o]));
const itype = (name: string): Instancetype => {
  const o = its.get(name);
  if (!o) throw new Error(`no instance type ${name}`);
  return o;
};
const pref = (name: string): Preference => {
  const o = prefs.get(name);
  if (!o) throw new Error(`no preference ${name}`);
  return o;
};

describe('instance types (figures from upstream v1.7.0)', () => {
  it('every size of every series upstream has, no more', () => {
    const bySeries = new Map<string, string[]>();
    for (const z of commonInstancetypeSizes()) {
      const [series, size] = z.name.split('.') as [string, string];
      bySeries.set(series, [...(bySeries.get(series) ?? []), size]);
    }
    expect(Object.fromEntries(bySeries)).toEqual({
      u1: [
        'nano',
        'micro',
        'small',
        'medium',
        '2xmedium',
        'large',
        'xlarge',
        '2xlarge',
        '4xlarge',
        '8xlarge',
      ],
      o1: ['nano', 'micro', 'small', 'medium', 'large', 'xlarge', '2xlarge', '4xlarge', '8xlarge'],
      cx1: [
        ...['medium', 'large', 'xlarge', '2xlarge', '4xlarge', '8xlarge'],
        ...['medium1gi', 'large1gi', 'xlarge1gi', '2xlarge1gi', '4xlarge1gi', '8xlarge1gi'],
      ],
      m1: [
        ...['large', 'xlarge', '2xlarge', '4xlarge', '8xlarge'],
        ...['large1gi', 'xlarge1gi', '2xlarge1gi', '4xlarge1gi', '8xlarge1gi'],
      ],
      d1: [
        'nano',
        'micro',
        'small',
        'medium',
        '2xmedium',
        'large',
        'xlarge',
        '2xlarge',
        '4xlarge',
        '8xlarge',
      ],
      n1: ['medium', 'large', 'xlarge', '2xlarge', '4xlarge', '8xlarge'],
      rt1: ['micro', 'small', 'medium', 'large', 'xlarge', '2xlarge', '4xlarge', '8xlarge'],
    });
    expect(its.size).toBe(65);
  });

  // name, spec as upstream's bundle has it
  it.each([
    ['u1.nano', { cpu: { guest: 1 }, memory: { guest: '512Mi' } }],
    ['u1.medium', { cpu: { guest: 1 }, memory: { guest: '4Gi' } }],
    ['u1.2xmedium', { cpu: { guest: 2 }, memory: { guest: '4Gi' } }],
    ['u1.large', { cpu: { guest: 2 }, memory: { guest: '8Gi' } }],
    ['u1.8xlarge', { cpu: { guest: 32 }, memory: { guest: '128Gi' } }],
    ['o1.small', { cpu: { guest: 1 }, memory: { guest: '2Gi', overcommitPercent: 50 } }],
    ['o1.4xlarge', { cpu: { guest: 16 }, memory: { guest: '64Gi', overcommitPercent: 50 } }],
    [
      'cx1.medium',
      {
        cpu: {
          guest: 1,
          dedicatedCPUPlacement: true,
          isolateEmulatorThread: true,
          maxSockets: 1,
          numa: { guestMappingPassthrough: {} },
        },
        ioThreadsPolicy: 'auto',
        memory: { guest: '2Gi', hugepages: { pageSize: '2Mi' } },
      },
    ],
    [
      'cx1.8xlarge1gi',
      {
        cpu: {
          guest: 32,
          dedicatedCPUPlacement: true,
          isolateEmulatorThread: true,
          maxSockets: 32,
          numa: { guestMappingPassthrough: {} },
        },
        ioThreadsPolicy: 'auto',
        memory: { guest: '64Gi', hugepages: { pageSize: '1Gi' } },
      },
    ],
    ['m1.large', { cpu: { guest: 2 }, memory: { guest: '16Gi', hugepages: { pageSize: '2Mi' } } }],
    ['m1.4xlarge1gi', { cpu: { guest: 16 }, memory: { guest: '128Gi', hugepages: { pageSize: '1Gi' } } }],
    [
      'd1.2xmedium',
      {
        cpu: { guest: 2, dedicatedCPUPlacement: true, isolateEmulatorThread: true },
        ioThreadsPolicy: 'auto',
        memory: { guest: '4Gi' },
      },
    ],
    [
      'n1.medium',
      {
        annotations: {
          'cpu-load-balancing.crio.io': 'disable',
          'cpu-quota.crio.io': 'disable',
          'irq-load-balancing.crio.io': 'disable',
        },
        cpu: { guest: 4, dedicatedCPUPlacement: true, isolateEmulatorThread: true },
        memory: { guest: '4Gi', hugepages: { pageSize: '1Gi' } },
      },
    ],
    [
      'rt1.micro',
      {
        annotations: {
          'cpu-load-balancing.crio.io': 'disable',
          'cpu-quota.crio.io': 'disable',
          'irq-load-balancing.crio.io': 'disable',
        },
        cpu: {
          guest: 1,
          dedicatedCPUPlacement: true,
          isolateEmulatorThread: true,
          numa: { guestMappingPassthrough: {} },
          realtime: {},
        },
        memory: { guest: '1Gi', hugepages: { pageSize: '1Gi' } },
      },
    ],
  ])('%s', (name, spec) => {
    expect(itype(name).spec).toEqual(spec);
  });

  it('labels describe the spec, as upstream (kubectl get -l instancetype.kubevirt.io/cpu=4 finds by vCPUs)', () => {
    expect(itype('cx1.2xlarge1gi').metadata.labels).toEqual({
      'instancetype.kubevirt.io/class': 'compute.exclusive',
      'instancetype.kubevirt.io/common-instancetypes-version': COMMON_INSTANCETYPES_VERSION,
      'instancetype.kubevirt.io/cpu': '8',
      'instancetype.kubevirt.io/dedicatedCPUPlacement': 'true',
      'instancetype.kubevirt.io/hugepages': '1Gi',
      'instancetype.kubevirt.io/icon-pf': 'pficon-registry',
      'instancetype.kubevirt.io/isolateEmulatorThread': 'true',
      'instancetype.kubevirt.io/memory': '16Gi',
      'instancetype.kubevirt.io/numa': 'true',
      'instancetype.kubevirt.io/size': '2xlarge1gi',
      'instancetype.kubevirt.io/vendor': 'kubevirt.io',
      'instancetype.kubevirt.io/version': '1',
    });
    expect(itype('u1.medium').metadata.annotations?.['instancetype.kubevirt.io/displayName']).toBe(
      'General Purpose',
    );
    const fourCpus = [...its.values()]
      .filter((o) => o.metadata.labels?.['instancetype.kubevirt.io/cpu'] === '4')
      .map((o) => o.metadata.name);
    for (const o of its.values())
      expect(o.metadata.labels?.['instancetype.kubevirt.io/cpu']).toBe(String(o.spec.cpu.guest));
    expect(fourCpus).toEqual(
      expect.arrayContaining(['u1.xlarge', 'o1.xlarge', 'cx1.xlarge', 'm1.xlarge', 'n1.medium', 'n1.large']),
    );
  });
});

describe('preferences (figures from upstream v1.7.0)', () => {
  it('every preference upstream ships', () => {
    expect([...prefs.keys()]).toEqual([
      'alpine',
      'centos.stream10',
      'centos.stream10.desktop',
      'centos.stream9',
      'centos.stream9.desktop',
      'centos.stream9.dpdk',
      'cirros',
      'debian',
      'fedora',
      'fedora.arm64',
      'fedora.s390x',
      'legacy',
      'linux',
      'linux.efi',
      'linux.virtiotransitional',
      'opensuse.leap',
      'opensuse.tumbleweed',
      'oraclelinux',
      'rhel.10',
      'rhel.10.arm64',
      'rhel.10.s390x',
      'rhel.7',
      'rhel.7.desktop',
      'rhel.8',
      'rhel.8.desktop',
      'rhel.8.dpdk',
      'rhel.9',
      'rhel.9.arm64',
      'rhel.9.desktop',
      'rhel.9.dpdk',
      'rhel.9.realtime',
      'rhel.9.s390x',
      'sles',
      'ubuntu',
      'windows.10',
      'windows.10.virtio',
      'windows.11',
      'windows.11.virtio',
      'windows.2k12',
      'windows.2k12.virtio',
      'windows.2k16',
      'windows.2k16.virtio',
      'windows.2k19',
      'windows.2k19.virtio',
      'windows.2k22',
      'windows.2k22.virtio',
      'windows.2k25',
      'windows.2k25.virtio',
      'windows.2k3',
      'windows.2k8',
      'windows.2k8.virtio',
      'windows.7',
      'windows.7.virtio',
      'windows.xp',
    ]);
  });

  const hyperv = {
    frequencies: {},
    ipi: {},
    reenlightenment: {},
    relaxed: {},
    reset: {},
    runtime: {},
    spinlocks: { spinlocks: 8191 },
    synic: {},
    synictimer: { direct: {} },
    tlbflush: {},
    vapic: {},
    vpindex: {},
  };
  const windowsClock = {
    preferredClockOffset: { utc: {} },
    preferredTimer: {
      hpet: { present: false },
      hyperv: {},
      pit: { tickPolicy: 'delay' },
      rtc: { tickPolicy: 'catchup' },
    },
  };
  it.each([
    [
      'fedora',
      {
        annotations: { 'vm.kubevirt.io/os': 'linux' },
        devices: { preferredDiskBus: 'virtio', preferredInterfaceModel: 'virtio', preferredRng: {} },
        features: { preferredSmm: {} },
        firmware: { preferredEfi: { secureBoot: true } },
        preferredArchitecture: 'amd64',
        requirements: { architecture: 'amd64', cpu: { guest: 1 }, memory: { guest: '2Gi' } },
      },
    ],
    [
      'ubuntu',
      {
        annotations: { 'vm.kubevirt.io/os': 'linux' },
        devices: { preferredDiskBus: 'virtio', preferredInterfaceModel: 'virtio', preferredRng: {} },
        requirements: { cpu: { guest: 1 }, memory: { guest: '2Gi' } },
      },
    ],
    [
      'centos.stream9.dpdk',
      {
        annotations: { 'vm.kubevirt.io/os': 'linux' },
        cpu: { preferredCPUTopology: 'spread', spreadOptions: { across: 'SocketsCoresThreads', ratio: 4 } },
        devices: {
          preferredDiskBus: 'virtio',
          preferredDiskDedicatedIoThread: true,
          preferredInterfaceModel: 'virtio',
          preferredNetworkInterfaceMultiQueue: true,
          preferredRng: {},
        },
        requirements: { cpu: { guest: 8 }, memory: { guest: '1.5Gi' } },
      },
    ],
    [
      'legacy',
      {
        annotations: { 'vm.kubevirt.io/os': 'legacy' },
        devices: { preferredDiskBus: 'sata', preferredInterfaceModel: 'e1000' },
      },
    ],
    [
      'windows.10',
      {
        annotations: { 'vm.kubevirt.io/os': 'windows' },
        clock: windowsClock,
        cpu: { preferredCPUTopology: 'sockets' },
        devices: {
          preferredAutoattachInputDevice: true,
          preferredDiskBus: 'sata',
          preferredInterfaceModel: 'e1000e',
        },
        features: { preferredAcpi: {}, preferredApic: {}, preferredHyperv: hyperv, preferredSmm: {} },
        firmware: { preferredEfi: { secureBoot: true } },
        preferredTerminationGracePeriodSeconds: 3600,
        requirements: { cpu: { guest: 1 }, memory: { guest: '2Gi' } },
      },
    ],
    [
      'windows.11.virtio',
      {
        annotations: { 'vm.kubevirt.io/os': 'windows' },
        clock: windowsClock,
        cpu: { preferredCPUTopology: 'sockets' },
        devices: {
          preferredAutoattachInputDevice: true,
          preferredDiskBus: 'virtio',
          preferredInputBus: 'virtio',
          preferredInputType: 'tablet',
          preferredInterfaceModel: 'virtio',
          preferredTPM: { persistent: true },
          preferredVideoType: 'virtio',
        },
        features: { preferredAcpi: {}, preferredApic: {}, preferredHyperv: hyperv, preferredSmm: {} },
        firmware: { preferredEfi: { persistent: true, secureBoot: true } },
        preferredTerminationGracePeriodSeconds: 3600,
        requirements: { cpu: { guest: 2 }, memory: { guest: '4Gi' } },
      },
    ],
    [
      'windows.2k3',
      {
        annotations: { 'kubevirt.io/disablePCIHole64': 'true', 'vm.kubevirt.io/os': 'windows' },
        clock: windowsClock,
        cpu: { preferredCPUTopology: 'sockets' },
        devices: {
          preferredAutoattachInputDevice: true,
          preferredDiskBus: 'sata',
          preferredInterfaceModel: 'rtl8139',
        },
        features: { preferredAcpi: {}, preferredApic: {}, preferredHyperv: hyperv },
        preferredTerminationGracePeriodSeconds: 3600,
        requirements: { cpu: { guest: 1 }, memory: { guest: '256Mi' } },
      },
    ],
  ])('%s', (name, spec) => {
    expect(pref(name).spec).toEqual(spec);
  });

  it('labels: OS type, requirements and architecture, as upstream', () => {
    expect(pref('rhel.9.arm64').metadata.labels).toEqual({
      'instancetype.kubevirt.io/arch': 'arm64',
      'instancetype.kubevirt.io/common-instancetypes-version': COMMON_INSTANCETYPES_VERSION,
      'instancetype.kubevirt.io/os-type': 'linux',
      'instancetype.kubevirt.io/preferred-architecture': 'arm64',
      'instancetype.kubevirt.io/required-architecture': 'arm64',
      'instancetype.kubevirt.io/required-cpu': '1',
      'instancetype.kubevirt.io/required-memory': '1.5Gi',
      'instancetype.kubevirt.io/vendor': 'kubevirt.io',
    });
    expect(pref('windows.2k8').metadata.annotations).toMatchObject({
      'openshift.io/display-name': 'Microsoft Windows Server 2008/2008 R2',
      iconClass: 'icon-windows',
      tags: 'hidden,kubevirt,windows',
    });
  });
});

describe('the add-on with kubevirt-ts', () => {
  it('every object passes validateObject', () => {
    for (const o of [...its.values(), ...prefs.values()])
      expect({ name: o.metadata.name, errors: validateObject(o) }).toEqual({
        name: o.metadata.name,
        errors: [],
      });
  });

  const template = (): VirtualMachineInstanceSpec => ({
    domain: {
      devices: { disks: [{ name: 'root' }], interfaces: [{ name: 'default' }] },
    },
    networks: [{ name: 'default', pod: {} }],
  });

  it('u1.medium + fedora: the VMI spec upstream gives', () => {
    const spec = template();
    const meta = {};
    expect(
      applyToVmiSpec('spec.template.spec', itype('u1.medium').spec, pref('fedora').spec, spec, meta),
    ).toEqual([]);
    expect(spec.domain.cpu).toMatchObject({ sockets: 1, cores: 1, threads: 1 });
    expect(spec.domain.memory).toEqual({ guest: '4Gi' });
    expect(spec.domain.devices?.disks).toEqual([{ name: 'root', disk: { bus: 'virtio' } }]);
    expect(spec.domain.devices?.interfaces).toEqual([{ name: 'default', model: 'virtio' }]);
    expect(spec.domain.devices?.rng).toEqual({});
    expect(spec.domain.firmware?.bootloader).toEqual({ efi: { secureBoot: true } });
    expect(spec.domain.features?.smm).toEqual({});
    expect(spec.architecture).toBe('amd64');
    expect(meta).toEqual({ annotations: { 'vm.kubevirt.io/os': 'linux' } });
    expect(checkPreferenceRequirements(itype('u1.medium').spec, pref('fedora').spec, spec)).toBeUndefined();
  });

  it('o1 requests half the guest memory; cx1 lays 4 vCPUs out as sockets with huge pages', () => {
    const o1 = template();
    applyToVmiSpec('spec.template.spec', itype('o1.medium').spec, undefined, o1, {});
    expect(o1.domain.resources?.requests?.memory).toBe(String(2 * 1024 ** 3));
    const cx1 = template();
    applyToVmiSpec('spec.template.spec', itype('cx1.xlarge').spec, pref('rhel.9').spec, cx1, {});
    expect(cx1.domain.cpu).toMatchObject({
      sockets: 4,
      cores: 1,
      threads: 1,
      maxSockets: 4,
      dedicatedCpuPlacement: true,
      isolateEmulatorThread: true,
      numa: { guestMappingPassthrough: {} },
    });
    expect(cx1.domain.memory).toEqual({ guest: '8Gi', hugepages: { pageSize: '2Mi' } });
    expect(cx1.domain.ioThreadsPolicy).toBe('auto');
    expect(cx1.domain.devices?.disks).toEqual([
      { name: 'root', disk: { bus: 'virtio' }, dedicatedIOThread: true },
    ]);
  });

  // [preference, instance type, the requirement it misses or undefined]
  it.each([
    [
      'windows.11',
      'u1.medium',
      'insufficient CPU resources of 1 vCPU provided by instance type, preference requires 2 vCPU',
    ],
    ['windows.11', 'u1.large', undefined],
    ['windows.10', 'u1.small', undefined],
    [
      'windows.10',
      'u1.micro',
      'insufficient Memory resources of 1Gi provided by instance type, preference requires 2Gi',
    ],
    ['rhel.9.dpdk', 'cx1.2xlarge', undefined],
    [
      'rhel.9.dpdk',
      'cx1.xlarge',
      'insufficient CPU resources of 4 vCPU provided by instance type, preference requires 8 vCPU',
    ],
    ['fedora.arm64', 'u1.medium', undefined],
  ])('%s with %s: %s', (p, i, message) => {
    const spec = template();
    applyToVmiSpec('spec.template.spec', itype(i).spec, pref(p).spec, spec, {});
    expect(checkPreferenceRequirements(itype(i).spec, pref(p).spec, spec)?.message).toBe(message);
  });
});

describe('deploy/addons/common-instancetypes/ is generated', () => {
  const files = commonInstancetypesFiles();

  it('the committed files are what tools/gen-common-instancetypes.mjs writes (run it after a change)', () => {
    for (const [f, content] of Object.entries(files))
      expect({ f, content: readFileSync(join(ADDON, f), 'utf8') }).toEqual({ f, content });
    const parsed = Object.values(files).flatMap((t) => parseManifests(t));
    expect(parsed).toEqual([...its.values(), ...prefs.values()]);
  });

  it('the CLI: --check passes; a bad flag exits 2 naming it', () => {
    const ok = spawnSync(process.execPath, [GEN, '--check'], { encoding: 'utf8' });
    expect({ status: ok.status, stderr: ok.stderr.trim() }).toEqual({
      status: 0,
      stderr: 'deploy/addons/common-instancetypes/ is current',
    });
    const bad = spawnSync(process.execPath, [GEN, '--bogus'], { encoding: 'utf8' });
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain("gen-common-instancetypes: Unknown option '--bogus'");
  });

  it('a changed file, a missing one and a generated one no longer written are all named', async () => {
    const { checkCommonInstancetypes } = (await import(GEN)) as {
      checkCommonInstancetypes: (dir: string, files: Record<string, string>) => string[];
    };
    const dir = mkdtempSync(join(tmpdir(), 'kvts-cit-'));
    try {
      cpSync(ADDON, dir, { recursive: true });
      expect(checkCommonInstancetypes(dir, files)).toEqual([]);
      writeFileSync(
        join(dir, 'instancetypes.yaml'),
        files['instancetypes.yaml']!.replace('guest: 1\n', 'guest: 2\n'),
      );
      rmSync(join(dir, 'preferences.yaml'));
      writeFileSync(join(dir, 'old.yaml'), files['preferences.yaml']!);
      writeFileSync(join(dir, 'mine.yaml'), 'kind: ConfigMap\n');
      expect(checkCommonInstancetypes(dir, files)).toEqual([
        'instancetypes.yaml',
        'preferences.yaml',
        'old.yaml',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
