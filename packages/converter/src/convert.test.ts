// Mapping rules of toDomain, each as upstream's converter applies them, and the errors it gives.
import { describe, expect, test } from '@jest/globals';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { setVirtualMachineInstanceDefaults } from '@kubevirt-ts/api';
import { passtNics, toDomain } from './convert.js';
import { parseDomainXml, toDomainXml } from './xml.js';
import { createPodLayout } from './layout.js';
import { formatDeviceName } from './storage.js';
import { tcgTranslationCacheBytes } from './compute.js';
import { ConversionError } from './errors.js';
import { CASES } from './test-cases.js';

type Spec = VirtualMachineInstance['spec'];
const vmi = (
  domain: Partial<Spec['domain']>,
  rest: Partial<Spec> = {},
  name = 'vm',
): VirtualMachineInstance => ({
  apiVersion: 'kubevirt.io/v1',
  kind: 'VirtualMachineInstance',
  metadata: { name, namespace: 'ns', uid: 'u-1' },
  spec: { domain: { resources: { requests: { memory: '128Mi' } }, ...domain }, ...rest },
});
const conv = (v: VirtualMachineInstance, ctx = {}) => toDomain(v, ctx);
const err = (f: () => unknown): ConversionError => {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(ConversionError);
    return e as ConversionError;
  }
  throw new Error('expected a ConversionError');
};

describe('identity, memory, CPU', () => {
  test('domain name is <namespace>_<name>; uuid and sysinfo from firmware', () => {
    const d = conv(vmi({ firmware: { uuid: '11111111-2222-4333-8444-555555555555', serial: 'SN1' } }));
    expect(d.name).toBe('ns_vm');
    expect(d.uuid).toBe('11111111-2222-4333-8444-555555555555');
    expect(d.sysinfo?.system).toEqual([
      { name: 'uuid', value: '11111111-2222-4333-8444-555555555555' },
      { name: 'serial', value: 'SN1' },
    ]);
  });
  test('SMBIOS entries from the context; empty ones left out', () => {
    const d = conv(vmi({}), { smbios: { manufacturer: 'KubeVirt', product: '', family: 'F' } });
    expect(d.sysinfo?.system).toEqual([
      { name: 'manufacturer', value: 'KubeVirt' },
      { name: 'family', value: 'F' },
    ]);
    expect(conv(vmi({})).sysinfo?.system).toBeUndefined();
  });
  test('memory: guest, else requests, else limits', () => {
    expect(conv(vmi({ memory: { guest: '1Gi' }, resources: { requests: { memory: '2Gi' } } })).memory).toBe(
      2 ** 30,
    );
    expect(conv(vmi({ resources: { requests: { memory: '100M' } } })).memory).toBe(100e6);
    expect(conv(vmi({ resources: { limits: { memory: '3Gi' } } })).memory).toBe(3 * 2 ** 30);
    expect(err(() => conv(vmi({ resources: {} }))).path).toBe('spec.domain.memory.guest');
    expect(err(() => conv(vmi({ resources: { requests: { memory: '12Qi' } } }))).path).toBe(
      'spec.domain.resources.requests.memory',
    );
  });
  test('topology: explicit values, else sockets from CPU limit, else request (rounded up)', () => {
    expect(conv(vmi({ cpu: { cores: 3 } })).cpu?.topology).toEqual({ sockets: 1, cores: 3, threads: 1 });
    expect(conv(vmi({ cpu: { cores: 3 } })).vcpu).toEqual({ placement: 'static', count: 3 });
    expect(conv(vmi({ resources: { requests: { memory: '1Gi', cpu: '1500m' } } })).cpu?.topology).toEqual({
      sockets: 2,
      cores: 1,
      threads: 1,
    });
    expect(
      conv(vmi({ resources: { requests: { memory: '1Gi', cpu: '2' }, limits: { cpu: '3' } } })).vcpu.count,
    ).toBe(3);
  });
  test('CPU model: host-model default, host-passthrough, named model is custom; features keep policy', () => {
    expect(conv(vmi({})).cpu?.mode).toBe('host-model');
    expect(conv(vmi({ cpu: { model: 'host-passthrough' } })).cpu).toMatchObject({ mode: 'host-passthrough' });
    const d = conv(
      vmi({
        cpu: { model: 'Skylake-Client', features: [{ name: 'pcid' }, { name: 'vmx', policy: 'disable' }] },
      }),
    );
    expect(d.cpu).toMatchObject({
      mode: 'custom',
      model: 'Skylake-Client',
      features: [
        { name: 'pcid', policy: 'require' },
        { name: 'vmx', policy: 'disable' },
      ],
    });
    expect(err(() => conv(vmi({ cpu: { features: [{ name: 'a b' }] } }))).path).toBe(
      'spec.domain.cpu.features[0].name',
    );
  });
  test('dedicated CPUs: vCPUs pinned to the Pod cpuset, emulator and IO threads on the extra CPU', () => {
    const v = vmi(
      {
        cpu: { cores: 2, dedicatedCpuPlacement: true, isolateEmulatorThread: true },
        devices: { disks: [{ name: 'a', disk: { bus: 'virtio' } }] },
      },
      { volumes: [{ name: 'a', emptyDisk: { capacity: '1Gi' } }] },
    );
    expect(conv(v, { cpuSet: [4, 5, 6] }).cputune).toEqual({
      vcpupin: [
        { vcpu: 0, cpuset: '4' },
        { vcpu: 1, cpuset: '5' },
      ],
      emulatorpin: { cpuset: '6' },
      iothreadpin: [{ iothread: 1, cpuset: '6' }],
    });
    const shared = vmi({ cpu: { cores: 2, dedicatedCpuPlacement: true } });
    expect(conv(shared, { cpuSet: [1, 3] }).cputune).toEqual({
      vcpupin: [
        { vcpu: 0, cpuset: '1' },
        { vcpu: 1, cpuset: '3' },
      ],
      emulatorpin: { cpuset: '1,3' },
    });
    expect(err(() => conv(v, { cpuSet: [4, 5] })).message).toMatch(
      /^spec\.domain\.cpu\.dedicatedCpuPlacement: needs 3 dedicated host CPUs/,
    );
    expect(conv(vmi({ cpu: { cores: 2 } })).cputune).toBeUndefined();
    const numa = vmi({ cpu: { dedicatedCpuPlacement: true, numa: { guestMappingPassthrough: {} } } });
    expect(err(() => conv(numa, { cpuSet: [1] })).message).toBe(
      'spec.domain.cpu.numa.guestMappingPassthrough: guest NUMA topology passthrough is not implemented by kubevirt-ts',
    );
  });
  test('hugepages: memoryBacking hugepages + memfd and one NUMA cell', () => {
    const d = conv(
      vmi({
        cpu: { cores: 2 },
        memory: { hugepages: { pageSize: '2Mi' } },
        resources: { requests: { memory: '1Gi' } },
      }),
    );
    expect(d.memoryBacking).toEqual({ hugepages: {}, source: { type: 'memfd' } });
    expect(d.cpu?.numa).toEqual({ cells: [{ id: 0, cpus: '0-1', memory: 1048576, unit: 'KiB' }] });
    const noMemfd = vmi({ memory: { hugepages: {} } });
    noMemfd.metadata!.annotations = { 'kubevirt.io/memfd': 'false' };
    expect(conv(noMemfd).memoryBacking).toEqual({ hugepages: {} });
  });
});

describe('domain type (emulation), as upstream', () => {
  test('kvm when KVM is available, whatever allowEmulation says', () => {
    expect(conv(vmi({})).type).toBe('kvm');
    expect(conv(vmi({}), { allowEmulation: true }).type).toBe('kvm');
  });
  test('qemu when KVM is unavailable and emulation allowed; error when not allowed', () => {
    expect(conv(vmi({}), { allowEmulation: true, kvmAvailable: false }).type).toBe('qemu');
    expect(err(() => conv(vmi({}), { kvmAvailable: false })).path).toBe('context.kvmAvailable');
  });
  test('emulated: the TCG translation cache is capped (an eighth of the guest memory, 16 MiB to 1 GiB); kvm: not', () => {
    const Mi = 1024 * 1024;
    expect(conv(vmi({})).features?.tcg).toBeUndefined();
    const tcg = conv(vmi({}), { allowEmulation: true, kvmAvailable: false });
    expect(tcg.features?.tcg).toEqual({ tbCache: tcgTranslationCacheBytes(tcg.memory) });
    expect(tcg.features?.acpi).toBe(true); // the other features stay
    expect(toDomainXml(tcg)).toContain(`<tcg>`);
    expect(parseDomainXml(toDomainXml(tcg)).features?.tcg).toEqual(tcg.features?.tcg);
    expect(tcgTranslationCacheBytes(64 * Mi)).toBe(16 * Mi);
    expect(tcgTranslationCacheBytes(128 * Mi)).toBe(16 * Mi);
    expect(tcgTranslationCacheBytes(256 * Mi)).toBe(32 * Mi);
    expect(tcgTranslationCacheBytes(8192 * Mi)).toBe(1024 * Mi);
    expect(tcgTranslationCacheBytes(16384 * Mi)).toBe(1024 * Mi);
    expect(tcgTranslationCacheBytes(1000 * Mi + 1)).toBe(126 * Mi);
  });
  test('only amd64 is implemented', () => {
    expect(err(() => conv(vmi({}), { architecture: 'arm64' })).message).toMatch(/not implemented/);
    expect(err(() => conv(vmi({}, { architecture: 's390x' }))).path).toBe('spec.architecture');
  });
});

describe('firmware and OS', () => {
  test('machine type default q35', () => {
    expect(conv(vmi({})).os.type).toEqual({ arch: 'x86_64', machine: 'q35', value: 'hvm' });
    expect(conv(vmi({ machine: { type: 'pc-q35-7.2' } })).os.type.machine).toBe('pc-q35-7.2');
  });
  test('EFI secure boot (default): secure loader, nvram from template, SMM on', () => {
    const d = conv(vmi({ firmware: { bootloader: { efi: {} } } }, {}, 'efi-vm'));
    expect(d.os.loader).toEqual({
      path: '/usr/share/OVMF/OVMF_CODE.secboot.fd',
      readonly: 'yes',
      secure: 'yes',
      type: 'pflash',
    });
    expect(d.os.nvram).toEqual({
      path: '/var/lib/libvirt/qemu/nvram/efi-vm_VARS.fd',
      template: '/usr/share/OVMF/OVMF_VARS.ms.fd',
    });
    expect(d.features?.smm).toBe(true);
  });
  test('EFI without secure boot; firmware paths and layout from the context', () => {
    const efi = { code: '/fw/CODE.fd', vars: '/fw/VARS.fd', secureCode: '/fw/S.fd', secureVars: '/fw/SV.fd' };
    const d = conv(vmi({ firmware: { bootloader: { efi: { secureBoot: false } } } }), {
      efi,
      layout: createPodLayout('/tmp/pod'),
    });
    expect(d.os.loader).toEqual({ path: '/fw/CODE.fd', readonly: 'yes', secure: 'no', type: 'pflash' });
    expect(d.os.nvram).toEqual({
      path: '/tmp/pod/var/lib/libvirt/qemu/nvram/vm_VARS.fd',
      template: '/fw/VARS.fd',
    });
    expect(d.features?.smm).toBeUndefined();
  });
  test('BIOS useSerial; kernel boot paths, initrd, cmdline', () => {
    expect(conv(vmi({ firmware: { bootloader: { bios: { useSerial: true } } } })).os.bios).toEqual({
      useserial: 'yes',
    });
    const d = conv(
      vmi({
        firmware: {
          kernelBoot: {
            kernelArgs: 'console=ttyS0',
            container: { image: 'i', kernelPath: '/boot/vmlinuz-6', initrdPath: '/x/initrd.img' },
          },
        },
      }),
    );
    expect([d.os.kernel, d.os.initrd, d.os.cmdline]).toEqual([
      '/var/run/kubevirt/container-disks/kernel-boot/vmlinuz-6',
      '/var/run/kubevirt/container-disks/kernel-boot/initrd.img',
      'console=ttyS0',
    ]);
  });
  test('combinations libvirt refuses are errors naming the field', () => {
    expect(
      err(() => conv(vmi({ firmware: { bootloader: { efi: {} } }, features: { acpi: { enabled: false } } })))
        .path,
    ).toBe('spec.domain.features.acpi.enabled');
    expect(
      err(() =>
        conv(
          vmi({
            firmware: { bootloader: { bios: { useSerial: true } } },
            devices: { autoattachSerialConsole: false },
          }),
        ),
      ).path,
    ).toBe('spec.domain.firmware.bootloader.bios.useSerial');
  });
});

describe('clock and features', () => {
  test('utc with offset, timezone, timers in libvirt names', () => {
    expect(conv(vmi({ clock: { utc: { offsetSeconds: -60 } } })).clock).toEqual({
      offset: 'utc',
      adjustment: '-60',
    });
    expect(conv(vmi({ clock: { utc: {} } })).clock).toEqual({ offset: 'utc', adjustment: 'reset' });
    // fact "clock" (deliberate difference): upstream writes no offset for a clock with only timers
    expect(conv(vmi({ clock: { timer: { hpet: { present: false } } } })).clock).toEqual({
      offset: 'utc',
      timers: [{ name: 'hpet', present: 'no' }],
    });
    const d = conv(
      vmi({
        clock: {
          timezone: 'Europe/Berlin',
          timer: { kvm: { present: false }, hyperv: {}, rtc: { track: 'wall' } },
        },
      }),
    );
    expect(d.clock).toEqual({
      offset: 'timezone',
      timezone: 'Europe/Berlin',
      timers: [
        { name: 'rtc', present: 'yes', track: 'wall' },
        { name: 'kvmclock', present: 'no' },
        { name: 'hypervclock', present: 'yes' },
      ],
    });
    expect(err(() => conv(vmi({ clock: { timezone: '../etc' } }))).path).toBe('spec.domain.clock.timezone');
  });
  test('acpi default on; apic (no eoi, as upstream); hyperv sub-features with states, spinlocks, vendor id, stimer direct', () => {
    expect(conv(vmi({})).features).toEqual({ acpi: true });
    expect(conv(vmi({ features: { acpi: { enabled: false } } })).features).toEqual({});
    const d = conv(setVirtualMachineInstanceDefaults(CASES['hyperv-clock-features']!));
    expect(d.features).toEqual({
      acpi: true,
      apic: {},
      kvm: { hidden: { state: 'on' } },
      pvspinlock: { state: 'off' },
      hyperv: {
        relaxed: { state: 'on' },
        vapic: { state: 'on' },
        spinlocks: { state: 'on', retries: 8191 },
        vpindex: { state: 'on' },
        runtime: { state: 'on' },
        synic: { state: 'on' },
        stimer: { state: 'on', direct: { state: 'on' } },
        reset: { state: 'off' },
        vendor_id: { state: 'on', value: 'KubeVirt<&>' },
        frequencies: { state: 'on' },
        reenlightenment: { state: 'on' },
        tlbflush: { state: 'on' },
        ipi: { state: 'on' },
        evmcs: { state: 'off' },
      },
    });
  });
});

describe('storage', () => {
  test('device names per prefix (Linux sd naming), scsi drive address = unit', () => {
    expect([0, 25, 26, 27, 701, 702].map((i) => formatDeviceName('sd', i))).toEqual([
      'sda',
      'sdz',
      'sdaa',
      'sdab',
      'sdzz',
      'sdaaa',
    ]);
    const d = conv(setVirtualMachineInstanceDefaults(CASES['storage-all-kinds']!), {
      isBlockPVC: { pvcblock: true, lunblock: true },
    });
    const t = Object.fromEntries(d.devices.disks!.map((x) => [x.alias, `${x.target.bus}:${x.target.dev}`]));
    expect(t).toEqual({
      'ua-root': 'virtio:vda',
      'ua-pvcfile': 'virtio:vdb',
      'ua-pvcblock': 'scsi:sda',
      'ua-dv': 'sata:sdb',
      'ua-eph': 'virtio:vdc',
      'ua-host': 'usb:sdc',
      'ua-lunblock': 'scsi:sdd',
      'ua-iso': 'scsi:sde',
      'ua-cfg': 'virtio:vdd',
      'ua-sec': 'sata:sdf',
      'ua-sa': 'virtio:vde',
      'ua-dapi': 'virtio:vdf',
      'ua-configdrive': 'virtio:vdg',
      'ua-cd': 'virtio:vdh',
    });
    expect(d.devices.disks!.find((x) => x.alias === 'ua-lunblock')).toMatchObject({
      type: 'block',
      device: 'lun',
      address: { type: 'drive', controller: 0, bus: 0, unit: 3 },
      source: { dev: '/dev/lunblock' },
    });
  });
  test('volume kinds: sources, formats, backing stores (standard layout)', () => {
    const d = conv(setVirtualMachineInstanceDefaults(CASES['storage-all-kinds']!), {
      isBlockPVC: { pvcblock: true, lunblock: true },
      disksInfo: { iso: { format: 'raw' } },
    });
    const by = Object.fromEntries(d.devices.disks!.map((x) => [x.alias!.slice(3), x]));
    expect(by.root).toMatchObject({
      source: { file: '/var/run/kubevirt-ephemeral-disks/disk-data/root/disk.qcow2' },
      driver: { type: 'qcow2', discard: 'unmap' },
      backingStore: {
        type: 'file',
        format: 'qcow2',
        source: { file: '/var/run/kubevirt/container-disks/disk_0.img' },
      },
    });
    // format from disksInfo (what the launcher found); the chain ends there (no probing of the image)
    expect(by.iso!.backingStore).toEqual({
      type: 'file',
      format: 'raw',
      source: { file: '/var/run/kubevirt/container-disks/disk_7.img' },
      terminated: true,
    });
    expect(by.root!.backingStore!.terminated).toBe(true);
    expect(by.eph!.backingStore!.terminated).toBeUndefined();
    expect(by.pvcfile).toMatchObject({
      type: 'file',
      source: { file: '/var/run/kubevirt-private/vmi-disks/pvcfile/disk.img' },
      driver: { type: 'raw', error_policy: 'report' },
      serial: 'PVC-1',
      blockio: { logical_block_size: 512, physical_block_size: 4096 },
    });
    expect(by.pvcblock).toMatchObject({
      type: 'block',
      source: { dev: '/dev/pvcblock' },
      driver: { cache: 'writethrough' },
    });
    expect(by.dv).toMatchObject({ shareable: true, driver: { cache: 'none' } });
    expect(by.eph).toMatchObject({
      readonly: true,
      driver: { type: 'qcow2' },
      backingStore: {
        type: 'file',
        format: 'raw',
        source: { file: '/var/run/kubevirt-private/vmi-disks/eph/disk.img' },
      },
    });
    expect(by.host!.source).toEqual({ file: '/var/run/kubevirt-private/vmi-disks/host/host.img' });
    expect(by.cfg!.source).toEqual({ file: '/var/run/kubevirt-private/config-map-disks/cfg.iso' });
    expect(by.sec).toMatchObject({
      device: 'cdrom',
      readonly: true,
      target: { tray: 'closed' },
      source: { file: '/var/run/kubevirt-private/secret-disks/sec.iso' },
    });
    expect(by.sec!.driver.discard).toBeUndefined();
    expect(by.sa!.source).toEqual({
      file: '/var/run/kubevirt-private/service-account-disk/service-account.iso',
    });
    expect(by.dapi!.source).toEqual({ file: '/var/run/kubevirt-private/downwardapi-disks/dapi.iso' });
    expect(by.configdrive!.source).toEqual({
      file: '/var/run/libvirt/cloud-init-dir/tests/storage/configdrive.iso',
    });
    expect(by.cd).toMatchObject({
      source: { file: '/var/run/libvirt/empty-disks/cd.qcow2' },
      address: { type: 'pci', domain: '0x0000', bus: '0x00', slot: '0x0a', function: '0x0' },
    });
    expect(by.root!.boot).toEqual({ order: 1 });
  });
  test('iothreads: pool size and assignment (auto policy, dedicated threads); multiqueue queues = vCPUs', () => {
    const d = conv(setVirtualMachineInstanceDefaults(CASES['storage-all-kinds']!), {
      isBlockPVC: { pvcblock: true, lunblock: true },
    });
    // auto: pool 2 x 2 CPUs = 4; 1 dedicated + 3 shared
    expect(d.iothreads).toBe(4);
    const io = Object.fromEntries(
      d.devices.disks!.filter((x) => x.target.bus === 'virtio').map((x) => [x.alias, x.driver.iothread]),
    );
    expect(io).toEqual({
      'ua-root': 4,
      'ua-pvcfile': 1,
      'ua-eph': 2,
      'ua-cfg': 3,
      'ua-sa': 1,
      'ua-dapi': 2,
      'ua-configdrive': 3,
      'ua-cd': 1,
    });
    expect(
      d.devices.disks!.filter((x) => x.target.bus === 'virtio').every((x) => x.driver.queues === 2),
    ).toBe(true);
    expect(
      d.devices
        .disks!.filter((x) => x.target.bus !== 'virtio')
        .every((x) => x.driver.queues === undefined && x.driver.iothread === undefined),
    ).toBe(true);
  });
  test('no policy and no dedicated thread: a pool of one, disks without iothread', () => {
    const d = conv(
      vmi(
        {
          devices: {
            disks: [
              { name: 'a', disk: { bus: 'virtio' } },
              { name: 'b', disk: { bus: 'virtio' } },
            ],
          },
        },
        {
          volumes: [
            { name: 'a', emptyDisk: { capacity: '1Gi' } },
            { name: 'b', emptyDisk: { capacity: '1Gi' } },
          ],
        },
      ),
    );
    expect(d.iothreads).toBe(1);
    expect(d.devices.disks!.map((x) => x.driver.iothread)).toEqual([undefined, undefined]);
    expect(d.devices.controllers!.find((c) => c.type === 'scsi')!.driver).toBeUndefined();
  });
  test('empty cdrom, missing volume, lun on a file, unsafe serial, duplicate boot order: errors name the field', () => {
    const d = conv(vmi({ devices: { disks: [{ name: 'empty', cdrom: { bus: 'sata' } }] } }));
    expect(d.devices.disks![0]).toMatchObject({ type: 'block', device: 'cdrom', driver: { type: 'raw' } });
    expect(d.devices.disks![0]!.source).toBeUndefined();
    expect(err(() => conv(vmi({ devices: { disks: [{ name: 'x', disk: {} }] } }))).path).toBe(
      'spec.domain.devices.disks[0].name',
    );
    expect(
      err(() =>
        conv(
          vmi(
            { devices: { disks: [{ name: 'x', lun: {} }] } },
            { volumes: [{ name: 'x', persistentVolumeClaim: { claimName: 'c' } }] },
          ),
        ),
      ).path,
    ).toBe('spec.volumes[0]');
    expect(
      err(() =>
        conv(
          vmi(
            { devices: { disks: [{ name: 'x', disk: {}, serial: 'a<b' }] } },
            { volumes: [{ name: 'x', emptyDisk: { capacity: '1Gi' } }] },
          ),
        ),
      ).path,
    ).toBe('spec.domain.devices.disks[0].serial');
    expect(
      err(() =>
        conv(
          vmi(
            { devices: { disks: [{ name: 'x', disk: { bus: 'ide' } }] } },
            { volumes: [{ name: 'x', emptyDisk: { capacity: '1Gi' } }] },
          ),
        ),
      ).path,
    ).toBe('spec.domain.devices.disks[0].disk.bus');
    const dup = vmi(
      {
        devices: {
          disks: [{ name: 'x', disk: {}, bootOrder: 1 }],
          interfaces: [{ name: 'default', masquerade: {}, bootOrder: 1 }],
        },
      },
      { volumes: [{ name: 'x', emptyDisk: { capacity: '1Gi' } }], networks: [{ name: 'default', pod: {} }] },
    );
    expect(err(() => conv(dup)).path).toBe('spec.domain.devices.interfaces[0].bootOrder');
  });
  test('a volume name that is not one path component is refused with its field path', () => {
    const v = vmi(
      { devices: { disks: [{ name: '../x', disk: { bus: 'virtio' } }] } },
      { volumes: [{ name: '../x', emptyDisk: { capacity: '1Gi' } }] },
    );
    expect(err(() => conv(v)).path).toBe('spec.volumes[0].name');
  });
  test('hotplugged volumes: hotplug paths, block or file, left out until ready', () => {
    const d = conv(setVirtualMachineInstanceDefaults(CASES['storage-all-kinds']!), {
      isBlockPVC: { pvcblock: true, lunblock: true },
      hotplugVolumes: { pvcfile: {}, dv: { isBlock: true }, pvcblock: { ready: false } },
    });
    const by = Object.fromEntries(d.devices.disks!.map((x) => [x.alias!.slice(3), x]));
    expect(by.pvcfile).toMatchObject({
      type: 'file',
      source: { file: '/var/run/kubevirt/hotplug-disks/pvcfile.img' },
      driver: { type: 'raw', discard: 'unmap' },
    });
    expect(by.dv).toMatchObject({ type: 'block', source: { dev: '/var/run/kubevirt/hotplug-disks/dv' } });
    expect(by.pvcblock).toBeUndefined();
    // names stay where they were: the next scsi disk is still sdd
    expect(by.lunblock!.target.dev).toBe('sdd');
    // dedicated iothreads follow the disk by name, not by position
    expect(by.root!.driver.iothread).toBe(4);
    const e = err(() =>
      conv(setVirtualMachineInstanceDefaults(CASES['storage-all-kinds']!), { hotplugVolumes: { root: {} } }),
    );
    expect(e.path).toBe('spec.volumes[0]');
  });
  test('volumes not implemented say so', () => {
    const e = err(() =>
      conv(
        vmi(
          { devices: { disks: [{ name: 'm', disk: { bus: 'virtio' } }] } },
          { volumes: [{ name: 'm', downwardMetrics: {} }] },
        ),
      ),
    );
    expect(e.message).toBe(
      'spec.volumes[0].downwardMetrics: the downwardMetrics volume is not implemented by kubevirt-ts',
    );
  });
});

describe('network', () => {
  test('bindings, models, MAC, multiqueue, boot order vs ROM, tap devices from the layout', () => {
    const d = conv(setVirtualMachineInstanceDefaults(CASES['networks-all-bindings']!));
    expect(d.devices.interfaces).toEqual([
      {
        type: 'ethernet',
        mac: '02:00:00:00:00:01',
        target: { dev: 'tap0', managed: 'no' },
        model: 'virtio-non-transitional',
        driver: { name: 'vhost', queues: 2 },
        boot: { order: 1 },
        alias: 'ua-default',
      },
      {
        type: 'ethernet',
        mac: '02:00:00:00:00:02',
        target: { dev: 'tap1', managed: 'no' },
        model: 'e1000e',
        rom: { enabled: 'no' },
        acpi: { index: 3 },
        alias: 'ua-blue',
      },
      {
        type: 'ethernet',
        target: { dev: 'tap2', managed: 'no' },
        model: 'rtl8139',
        rom: { enabled: 'no' },
        alias: 'ua-red',
        address: { type: 'pci', domain: '0x0000', bus: '0x00', slot: '0x0b', function: '0x0' },
      },
    ]);
    expect(conv(setVirtualMachineInstanceDefaults(CASES['slirp-pod-network']!)).devices.interfaces).toEqual([
      { type: 'user', model: 'e1000', rom: { enabled: 'no' }, alias: 'ua-default' },
    ]);
  });
  /**
   * What every passt NIC converts to: no <interface>, one NIC on the launcher's passt socket (its ports), QEMU's
   * -netdev stream / -device pair in JSON syntax, and a domain XML that parses back to the same domain.
   */
  const expectPasstDomain = (
    v: VirtualMachineInstance,
    ctx: Parameters<typeof toDomain>[1],
    sock: string,
    tcpPorts: number[],
    udpPorts: number[],
  ) => {
    const d = toDomain(v, ctx);
    expect(d.devices.interfaces).toBeUndefined();
    const nics = passtNics(v, ctx);
    expect(nics).toEqual([
      {
        index: 0,
        name: 'default',
        socket: sock,
        mac: expect.stringMatching(/^52:54:00(:[0-9a-f]{2}){3}$/),
        device: 'virtio-net-pci-non-transitional',
        mtu: 65520,
        tcpPorts,
        udpPorts,
      },
    ]);
    expect(d.qemuArgs).toEqual([
      '-netdev',
      `{"type":"stream","id":"kvts-passt0","server":false,"addr":{"type":"unix","path":"${sock}"}}`,
      '-device',
      `{"driver":"virtio-net-pci-non-transitional","netdev":"kvts-passt0","id":"kvts-net0","mac":"${nics[0]!.mac}","romfile":""}`,
    ]);
    const xml = toDomainXml(d);
    expect(xml).not.toContain('<interface');
    expect(parseDomainXml(xml)).toEqual(d);
    return { d, nics, xml };
  };
  test("passt in a Pod (no context binding): no <interface>, no libvirt passt backend, -netdev stream to the launcher's passt; ports forwarded (none without ports:); masquerade keeps its tap; the standalone context slirp turns the pod network to slirp", () => {
    const base = (ifaces: object[], networks: object[] = [{ name: 'default', pod: {} }]) =>
      vmi({ devices: { interfaces: ifaces as never } }, { networks: networks as never });
    const layout = createPodLayout('/r');
    const v = base([
      {
        name: 'default',
        passt: {},
        ports: [{ port: 8080 }, { port: 53, protocol: 'UDP' }, { port: 22, protocol: 'TCP' }],
      },
    ]);
    v.metadata!.uid = 'u9';
    const { xml } = expectPasstDomain(
      v,
      { layout },
      '/r/var/run/kubevirt-private/u9/passt0.sock',
      [8080, 22],
      [53],
    );
    expect(xml).not.toContain('passt"');
    expect(xml).not.toContain('portForward');
    expect(xml).toContain('<qemu:commandline>');
    // binding {name: passt} alike; no ports: none forwarded (passt 2023-03's `all` needs a socket per port)
    expect(passtNics(base([{ name: 'default', binding: { name: 'passt' } }]))).toMatchObject([
      { index: 0, tcpPorts: [], udpPorts: [] },
    ]);
    // only one kind of ports listed: the other protocol forwards none
    expect(passtNics(base([{ name: 'default', passt: {}, ports: [{ port: 80 }] }]))).toMatchObject([
      { tcpPorts: [80], udpPorts: [] },
    ]);
    // masquerade / bridge in a Pod: the tap from phase 1, no passt
    const masq = base([{ name: 'default', masquerade: {} }]);
    expect(toDomain(masq).devices.interfaces![0]!.target).toEqual({ dev: 'tap0', managed: 'no' });
    expect(passtNics(masq)).toEqual([]);
    expect(toDomain(masq).qemuArgs).toBeUndefined();
    // standalone slirp: every binding of the pod network, passt too, is slirp (no passt run)
    for (const b of [{ bridge: {} }, { passt: {} }]) {
      const slirpV = base([{ name: 'default', ...b }]);
      const slirp = toDomain(slirpV, { podNetworkBinding: 'slirp' });
      expect(slirp.devices.interfaces![0]!).toMatchObject({ type: 'user' });
      expect(slirp.devices.interfaces![0]!.target).toBeUndefined();
      expect(slirp.qemuArgs).toBeUndefined();
      expect(passtNics(slirpV, { podNetworkBinding: 'slirp' })).toEqual([]);
    }
    // passt on a non-pod network: refused with the field
    expect(
      err(() =>
        conv(base([{ name: 'default', passt: {} }], [{ name: 'default', multus: { networkName: 'x' } }])),
      ).path,
    ).toBe('spec.domain.devices.interfaces[0].passt');
  });
  test("standalone passt (context podNetworkBinding 'passt'): no <interface>, QEMU passthrough args to the launcher's passt socket", () => {
    const base = (iface: object, extra: object = {}) =>
      vmi(
        { devices: { interfaces: [iface as never] } },
        { networks: [{ name: 'default', pod: {} }], ...extra },
      );
    const layout = createPodLayout('/tmp/w,x');
    const ctx = { podNetworkBinding: 'passt' as const, layout };
    const v = base({
      name: 'default',
      masquerade: {},
      ports: [{ port: 8080 }, { port: 53, protocol: 'UDP' }],
    });
    v.metadata!.uid = 'u1';
    // QEMU's JSON syntax: the path is a JSON string (no option-string escaping)
    const sock = '/tmp/w,x/var/run/kubevirt-private/u1/passt0.sock';
    const { nics, xml } = expectPasstDomain(v, ctx, sock, [8080], [53]);
    // the MAC is stable for one VMI and interface, different for another uid
    expect(passtNics(v, ctx)[0]!.mac).toBe(nics[0]!.mac);
    expect(passtNics({ ...v, metadata: { ...v.metadata, uid: 'u2' } }, ctx)[0]!.mac).not.toBe(nics[0]!.mac);
    expect(xml).toMatch(/^<domain type="kvm" xmlns:qemu="http:\/\/libvirt.org\/schemas\/domain\/qemu\/1.0">/);
    expect(xml).toContain(
      '<qemu:commandline>\n    <qemu:arg value="-netdev"/>\n    <qemu:arg value="{&quot;type&quot;:&quot;stream&quot;,',
    );
    // the passt binding, a given MAC (normalized), boot order, ACPI index, an emulated model, transitional virtio
    const d2 = toDomain(
      base(
        {
          name: 'default',
          passt: {},
          macAddress: '02-AA-bb-00-00-01',
          bootOrder: 2,
          acpiIndex: 4,
          model: 'e1000',
        },
        {},
      ),
      ctx,
    );
    expect(JSON.parse(d2.qemuArgs![3]!)).toEqual({
      driver: 'e1000',
      netdev: 'kvts-passt0',
      id: 'kvts-net0',
      mac: '02:aa:bb:00:00:01',
      bootindex: 2,
      'acpi-index': 4,
    });
    expect(passtNics(base({ name: 'default', bridge: {}, model: 'e1000' }), ctx)[0]!.mtu).toBe(1500);
    const tv = base({ name: 'default', masquerade: {} });
    tv.spec.domain.devices!.useVirtioTransitional = true;
    expect(JSON.parse(toDomain(tv, ctx).qemuArgs![3]!).driver).toBe('virtio-net-pci-transitional');
    // user strings never reach the QEMU arguments except the validated MAC: ids are the interface index
    const evil = base({ name: 'default', masquerade: {} });
    evil.metadata!.name = 'x,id=evil';
    expect(toDomain(evil, ctx).qemuArgs!.join(' ')).not.toContain('evil');
    // a path with JSON metacharacters stays one string value
    const odd = toDomain(v, { ...ctx, layout: createPodLayout('/tmp/a"b,c') }).qemuArgs![1]!;
    expect(JSON.parse(odd).addr.path).toBe('/tmp/a"b,c/var/run/kubevirt-private/u1/passt0.sock');
    // refused with the field: a PCI address (QEMU places the NIC), SCTP ports, a bad MAC
    expect(
      err(() => toDomain(base({ name: 'default', masquerade: {}, pciAddress: '0000:00:0a.0' }), ctx)).message,
    ).toBe(
      "spec.domain.devices.interfaces[0].pciAddress: not supported on an interface attached to the launcher's passt (QEMU places the NIC)",
    );
    expect(
      err(() =>
        toDomain(base({ name: 'default', masquerade: {}, ports: [{ port: 9, protocol: 'SCTP' }] }), ctx),
      ).path,
    ).toBe('spec.domain.devices.interfaces[0].ports[0].protocol');
    expect(err(() => toDomain(base({ name: 'default', masquerade: {}, macAddress: 'zz' }), ctx)).path).toBe(
      'spec.domain.devices.interfaces[0].macAddress',
    );
    // without the context (in a Pod) the masquerade interface has its tap: none
    expect(passtNics(v)).toEqual([]);
    expect(toDomain(v).qemuArgs).toBeUndefined();
  });
  test('absent interfaces are skipped; unknown network and unimplemented bindings are errors', () => {
    const base = (iface: object) =>
      vmi({ devices: { interfaces: [iface as never] } }, { networks: [{ name: 'default', pod: {} }] });
    expect(conv(base({ name: 'default', bridge: {}, state: 'absent' })).devices.interfaces).toBeUndefined();
    expect(err(() => conv(base({ name: 'other', bridge: {} }))).path).toBe(
      'spec.domain.devices.interfaces[0].name',
    );
    expect(err(() => conv(base({ name: 'default', sriov: {} }))).message).toMatch(
      /sriov interface binding is not implemented/,
    );
    expect(err(() => conv(base({ name: 'default', bridge: {}, macAddress: 'zz' }))).path).toBe(
      'spec.domain.devices.interfaces[0].macAddress',
    );
  });
});

describe('devices', () => {
  test('defaults: usb off, scsi + virtio-serial, agent channel, serial console, vnc, vga, balloon', () => {
    const d = conv(vmi({}));
    expect(d.devices.controllers).toEqual([
      { type: 'usb', index: 0, model: 'none' },
      { type: 'scsi', index: 0, model: 'virtio-non-transitional' },
      { type: 'virtio-serial', index: 0, model: 'virtio-non-transitional' },
    ]);
    expect(d.devices.channels).toEqual([
      { type: 'unix', target: { type: 'virtio', name: 'org.qemu.guest_agent.0' } },
    ]);
    expect(d.devices.serials).toEqual([
      {
        type: 'unix',
        source: { mode: 'bind', path: '/var/run/kubevirt-private/u-1/virt-serial0' },
        target: { port: 0 },
      },
    ]);
    expect(d.devices.consoles).toEqual([{ type: 'pty', target: { type: 'serial', port: 0 } }]);
    expect(d.devices.graphics).toEqual([
      { type: 'vnc', listen: { type: 'socket', socket: '/var/run/kubevirt-private/u-1/virt-vnc' } },
    ]);
    expect(d.devices.video).toEqual([{ model: { type: 'vga', heads: 1, vram: 16384 } }]);
    expect(d.devices.memballoon).toEqual({ model: 'virtio-non-transitional', freePageReporting: 'off' });
  });
  test('context: balloon stats and free page reporting, serial console log', () => {
    const d = conv(vmi({}), { memBalloonStatsPeriod: 10, freePageReporting: true, serialConsoleLog: true });
    expect(d.devices.memballoon).toEqual({
      model: 'virtio-non-transitional',
      freePageReporting: 'on',
      stats: { period: 10 },
    });
    expect(d.devices.serials![0]!.log).toEqual({
      file: '/var/run/kubevirt-private/u-1/virt-serial0-log',
      append: 'on',
    });
  });
  test('misc devices and transitional virtio; usb controller when a device needs it', () => {
    const d = conv(setVirtualMachineInstanceDefaults(CASES['devices-misc']!));
    expect(d.devices.controllers![0]).toEqual({ type: 'usb', index: 0, model: 'qemu-xhci' });
    expect(d.devices.rng).toEqual([
      { model: 'virtio-transitional', backend: { model: 'random', path: '/dev/urandom' } },
    ]);
    expect(d.devices.tpm).toEqual([
      { model: 'tpm-crb', backend: { type: 'emulator', version: '2.0', persistent_state: 'yes' } },
    ]);
    expect(d.devices.video).toEqual([{ model: { type: 'virtio', heads: 1, vram: 16384 } }]);
    expect(d.devices.sound).toEqual([{ model: 'ac97', alias: 'ua-audio' }]);
    expect(d.devices.watchdog).toEqual([{ model: 'i6300esb', action: 'shutdown', alias: 'ua-wd' }]);
    expect(d.devices.inputs).toEqual([
      { type: 'tablet', bus: 'virtio', model: 'virtio', alias: 'ua-tab' },
      { type: 'tablet', bus: 'usb', alias: 'ua-tab2' },
    ]);
    expect(d.devices.disks![0]!.model).toBe('virtio-transitional');
  });
  test('autoattach off: no graphics, balloon none; disableHotplug drops the scsi controller', () => {
    const d = conv(setVirtualMachineInstanceDefaults(CASES['kernel-boot-headless']!));
    expect(d.devices.graphics).toBeUndefined();
    expect(d.devices.video).toBeUndefined();
    expect(d.devices.memballoon).toEqual({ model: 'none' });
    expect(d.devices.controllers).toEqual([
      { type: 'usb', index: 0, model: 'none' },
      { type: 'virtio-serial', index: 0, model: 'virtio-non-transitional' },
    ]);
  });
  test('autoattachSerialConsole false: no serial, console, virtio-serial controller; the agent channel stays', () => {
    const d = conv(vmi({ devices: { autoattachSerialConsole: false } }));
    expect(d.devices.serials).toBeUndefined();
    expect(d.devices.consoles).toBeUndefined();
    expect(d.devices.controllers!.map((c) => c.type)).toEqual(['usb', 'scsi']);
    expect(d.devices.channels).toHaveLength(1);
  });
  test('device kinds not implemented say so', () => {
    expect(
      err(() => conv(vmi({ devices: { gpus: [{ name: 'g', deviceName: 'nvidia.com/x' }] } }))).message,
    ).toBe('spec.domain.devices.gpus: GPU passthrough is not implemented by kubevirt-ts');
  });
});

describe('input checks', () => {
  test('strings XML cannot carry are rejected with their field path', () => {
    expect(err(() => conv(vmi({ chassis: { manufacturer: 'a\u0001b' } }))).path).toBe(
      'spec.domain.chassis.manufacturer',
    );
    expect(
      err(() =>
        conv(
          vmi({
            firmware: { kernelBoot: { kernelArgs: 'a\rb', container: { image: 'i', kernelPath: '/k' } } },
          }),
        ),
      ).path,
    ).toBe('spec.domain.firmware.kernelBoot.kernelArgs');
  });
  test('metadata.name is required and must be one path component', () => {
    const v = vmi({});
    delete v.metadata!.name;
    expect(err(() => conv(v)).path).toBe('metadata.name');
    expect(err(() => conv(vmi({}, {}, '..'))).path).toBe('metadata.name');
  });
});
