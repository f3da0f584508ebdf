// fast-check generator of valid VirtualMachineInstances (valid for @kubevirt-ts/api's validation),
// spanning the fields the converter maps. User strings that the API lets through unrestricted
// (chassis, kernel arguments) carry XML metacharacters.
import fc from 'fast-check';
import { HYPERV_REQUIRES, type VirtualMachineInstance } from '@kubevirt-ts/api';
import type { ConverterContext } from './context.js';

const META_CHARS = [
  '<',
  '>',
  '&',
  "'",
  '"',
  ']]>',
  '<!--',
  '&amp;',
  '&#60;',
  '</entry>',
  '<qemu:commandline/>',
  ' ',
  '\n',
  '\t',
  'é',
  '☃',
  '\u{1F600}',
];
/** A string made of letters and XML metacharacters. */
export const metaString = (maxLength = 24): fc.Arbitrary<string> =>
  fc
    .array(
      fc.oneof(
        fc.constantFrom(...META_CHARS),
        fc.string({ minLength: 1, maxLength: 3, unit: 'grapheme-ascii' }),
      ),
      {
        minLength: 1,
        maxLength: Math.max(1, Math.floor(maxLength / 3)),
      },
    )
    .map((parts) => parts.join(''))
    // XML cannot carry \r (normalized to \n by parsers); the API value space used here avoids it
    .map((s) => s.replace(/\r/g, ' '));

/** metaString without control characters: what the API takes in a field that ends up on a command line or in XML
 * attributes and text (kernel arguments, SMBIOS strings) */
const lineString = (maxLength = 24): fc.Arbitrary<string> =>
  metaString(maxLength).map((s) => s.replace(/\p{Cc}/gu, ' '));

const label = fc.stringMatching(/^[a-z]([a-z0-9-]{0,14}[a-z0-9])?$/);
const safeSerial = fc.stringMatching(/^[A-Za-z0-9_.+-]{1,20}$/);
const mac = fc
  .array(fc.integer({ min: 0, max: 255 }), { minLength: 5, maxLength: 5 })
  .map((b) => ['02', ...b.map((x) => x.toString(16).padStart(2, '0'))].join(':'));
const opt = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined });

type Vmi = VirtualMachineInstance;
type Spec = Vmi['spec'];
type DiskT = NonNullable<NonNullable<Spec['domain']['devices']>['disks']>[number];
type VolumeT = NonNullable<Spec['volumes']>[number];

const volumeSource = (kind: 'disk' | 'cdrom' | 'lun'): fc.Arbitrary<Omit<VolumeT, 'name'>> => {
  if (kind === 'lun') return fc.constant({ persistentVolumeClaim: { claimName: 'lun-claim' } });
  const common: fc.Arbitrary<Omit<VolumeT, 'name'>>[] = [
    fc.constant({ containerDisk: { image: 'quay.io/containerdisks/fedora:latest' } }),
    fc.constant({ persistentVolumeClaim: { claimName: 'claim' } }),
    fc.constant({ dataVolume: { name: 'dv' } }),
    fc.constant({ configMap: { name: 'cm' } }),
    fc.constant({ secret: { secretName: 'sec' } }),
    fc.constant({ serviceAccount: { serviceAccountName: 'default' } }),
    fc.constant({ ephemeral: { persistentVolumeClaim: { claimName: 'golden' } } }),
  ];
  if (kind === 'cdrom') return fc.oneof(...common);
  return fc.oneof(
    ...common,
    fc.integer({ min: 1, max: 64 }).map((n) => ({ emptyDisk: { capacity: `${n}Gi` } })),
    fc.constant({ hostDisk: { path: '/data/host.img', type: 'DiskOrCreate' as const, capacity: '1Gi' } }),
  );
};

const diskArb = fc
  .record({
    kind: fc.constantFrom('disk', 'disk', 'disk', 'cdrom', 'lun') as fc.Arbitrary<'disk' | 'cdrom' | 'lun'>,
    diskBus: opt(fc.constantFrom('virtio', 'sata', 'scsi', 'usb')),
    cdromBus: opt(fc.constantFrom('sata', 'scsi')),
    readonly: opt(fc.boolean()),
    serial: opt(safeSerial),
    cache: opt(
      fc.constantFrom('none', 'writethrough', 'writeback') as fc.Arbitrary<
        'none' | 'writethrough' | 'writeback'
      >,
    ),
    io: opt(fc.constantFrom('native', 'threads') as fc.Arbitrary<'native' | 'threads'>),
    errorPolicy: opt(fc.constantFrom('stop', 'ignore', 'report', 'enospace') as fc.Arbitrary<'stop'>),
    dedicatedIOThread: opt(fc.boolean()),
    boot: fc.boolean(),
    tray: opt(fc.constantFrom('open', 'closed') as fc.Arbitrary<'open' | 'closed'>),
    blockSize: opt(fc.constantFrom([512, 512], [512, 4096], [4096, 4096])),
  })
  .chain((d) => volumeSource(d.kind).map((src) => ({ d, src })));

const ifaceArb = fc.record({
  model: opt(fc.constantFrom('virtio', 'e1000', 'e1000e', 'rtl8139')),
  mac: opt(mac),
  boot: fc.boolean(),
  acpiIndex: opt(fc.integer({ min: 1, max: 16383 })),
});

export const vmiArb: fc.Arbitrary<Vmi> = fc
  .record({
    name: label,
    namespace: label,
    uid: fc.uuid(),
    memMi: fc.integer({ min: 32, max: 4096 }).map((n) => n * 2),
    guestMi: opt(fc.integer({ min: 32, max: 4096 }).map((n) => n * 2)),
    cpuReq: opt(fc.constantFrom('1', '2', '500m', '1500m', '4')),
    topo: opt(
      fc.record({
        sockets: opt(fc.integer({ min: 1, max: 4 })),
        cores: opt(fc.integer({ min: 1, max: 4 })),
        threads: opt(fc.integer({ min: 1, max: 2 })),
      }),
    ),
    cpuModel: opt(
      fc.constantFrom('host-model', 'host-passthrough', 'qemu64', 'Haswell-noTSX', 'Skylake-Client'),
    ),
    cpuFeatures: opt(
      fc
        .uniqueArray(fc.constantFrom('pcid', 'x2apic', 'ssse3', 'vmx', 'avx2'), { maxLength: 3 })
        .chain((ns) =>
          fc.tuple(
            ...ns.map((n) =>
              fc
                .constantFrom('require', 'disable', 'optional', 'force', 'forbid')
                .map((p) => ({ name: n, policy: p as 'require' })),
            ),
          ),
        ),
    ),
    machine: opt(fc.constantFrom('q35', 'pc-q35-7.2', 'pc-q35-7.1')),
    uuid: opt(fc.uuid()),
    fwSerial: opt(safeSerial),
    boot: fc.constantFrom('none', 'bios', 'bios-serial', 'efi', 'efi-insecure'),
    kernelArgs: opt(lineString(40)),
    kernel: fc.boolean(),
    clock: opt(
      fc.record({
        tz: fc.oneof(fc.constant(undefined), fc.constantFrom('Europe/Berlin', 'America/New_York', 'UTC')),
        offset: opt(fc.integer({ min: -86400, max: 86400 })),
        rtc: opt(
          fc.record({
            tickPolicy: opt(fc.constantFrom('delay', 'catchup')),
            present: opt(fc.boolean()),
            track: opt(fc.constantFrom('guest', 'wall') as fc.Arbitrary<'guest' | 'wall'>),
          }),
        ),
        pit: opt(
          fc.record({
            tickPolicy: opt(fc.constantFrom('delay', 'catchup', 'discard')),
            present: opt(fc.boolean()),
          }),
        ),
        hpet: opt(fc.record({ present: opt(fc.boolean()) })),
        kvm: opt(fc.record({ present: opt(fc.boolean()) })),
        hyperv: opt(fc.record({ present: opt(fc.boolean()) })),
      }),
    ),
    acpi: opt(fc.boolean()),
    apic: opt(fc.record({ enabled: opt(fc.boolean()), endOfInterrupt: opt(fc.boolean()) })),
    smm: opt(fc.boolean()),
    kvmHidden: opt(fc.boolean()),
    pvspinlock: opt(fc.boolean()),
    hyperv: opt(
      fc.record({
        relaxed: opt(fc.record({ enabled: opt(fc.boolean()) })),
        vapic: opt(fc.record({ enabled: opt(fc.boolean()) })),
        vpindex: opt(fc.record({ enabled: opt(fc.boolean()) })),
        synic: opt(fc.record({ enabled: opt(fc.boolean()) })),
        synictimer: opt(fc.record({ enabled: opt(fc.boolean()) })),
        spinlocks: opt(fc.record({ spinlocks: opt(fc.integer({ min: 4096, max: 100000 })) })),
        vendorid: opt(fc.record({ vendorid: fc.stringMatching(/^[A-Za-z0-9<>&'" ]{1,12}$/) })),
        frequencies: opt(fc.record({ enabled: opt(fc.boolean()) })),
        tlbflush: opt(fc.record({ enabled: opt(fc.boolean()) })),
      }),
    ),
    hugepages: fc.boolean(),
    chassis: opt(
      fc.record({
        manufacturer: opt(lineString()),
        version: opt(lineString()),
        serial: opt(lineString()),
        asset: opt(lineString()),
        sku: opt(lineString()),
      }),
    ),
    disks: fc.array(diskArb, { maxLength: 8 }),
    ifaces: fc.array(ifaceArb, { maxLength: 4 }),
    firstBinding: fc.constantFrom('masquerade', 'bridge', 'slirp'),
    autoPod: opt(fc.boolean()),
    autoGraphics: opt(fc.boolean()),
    autoSerial: opt(fc.boolean()),
    autoBalloon: opt(fc.boolean()),
    netMQ: opt(fc.boolean()),
    blockMQ: opt(fc.boolean()),
    transitional: opt(fc.boolean()),
    ioPolicy: opt(fc.constantFrom('shared', 'auto') as fc.Arbitrary<'shared' | 'auto'>),
    rng: fc.boolean(),
    tpm: opt(fc.boolean()),
    sound: opt(fc.constantFrom('ich9', 'ac97') as fc.Arbitrary<'ich9' | 'ac97'>),
    watchdog: opt(fc.constantFrom('poweroff', 'reset', 'shutdown') as fc.Arbitrary<'poweroff'>),
    inputs: fc.uniqueArray(fc.constantFrom('usb', 'virtio'), { maxLength: 2 }),
    grace: opt(fc.integer({ min: 0, max: 600 })),
  })
  .map((r) => {
    const domain: Spec['domain'] = { resources: { requests: { memory: `${r.memMi}Mi` } } };
    if (r.cpuReq) domain.resources!.requests!.cpu = r.cpuReq;
    if (r.guestMi) domain.memory = { guest: `${Math.min(r.guestMi, r.memMi)}Mi` };
    if (r.hugepages) domain.memory = { ...(domain.memory ?? {}), hugepages: { pageSize: '2Mi' } };
    if (r.topo || r.cpuModel || r.cpuFeatures) {
      domain.cpu = {};
      if (r.topo?.sockets) domain.cpu.sockets = r.topo.sockets;
      if (r.topo?.cores) domain.cpu.cores = r.topo.cores;
      if (r.topo?.threads) domain.cpu.threads = r.topo.threads;
      if (r.cpuModel) domain.cpu.model = r.cpuModel;
      if (r.cpuFeatures && r.cpuFeatures.length) domain.cpu.features = r.cpuFeatures;
    }
    if (r.machine) domain.machine = { type: r.machine };
    const fw: NonNullable<Spec['domain']['firmware']> = {};
    if (r.uuid) fw.uuid = r.uuid;
    if (r.fwSerial) fw.serial = r.fwSerial;
    if (r.boot === 'bios-serial') fw.bootloader = { bios: { useSerial: true } };
    if (r.boot === 'bios') fw.bootloader = { bios: {} };
    if (r.boot === 'efi') fw.bootloader = { efi: { secureBoot: true } };
    if (r.boot === 'efi-insecure') fw.bootloader = { efi: { secureBoot: false } };
    if (r.kernel)
      fw.kernelBoot = {
        container: { image: 'example.com/k:1', kernelPath: '/boot/vmlinuz', initrdPath: '/boot/initrd' },
        ...(r.kernelArgs ? { kernelArgs: r.kernelArgs } : {}),
      };
    if (Object.keys(fw).length) domain.firmware = fw;
    if (r.clock) {
      const c: NonNullable<Spec['domain']['clock']> = {};
      if (r.clock.tz) c.timezone = r.clock.tz;
      else c.utc = r.clock.offset !== undefined ? { offsetSeconds: r.clock.offset } : {};
      const timer: NonNullable<typeof c.timer> = {};
      if (r.clock.rtc) timer.rtc = r.clock.rtc as never;
      if (r.clock.pit) timer.pit = r.clock.pit as never;
      if (r.clock.hpet) timer.hpet = r.clock.hpet;
      if (r.clock.kvm) timer.kvm = r.clock.kvm;
      if (r.clock.hyperv) timer.hyperv = r.clock.hyperv;
      if (Object.keys(timer).length) c.timer = timer;
      domain.clock = c;
    }
    const features: NonNullable<Spec['domain']['features']> = {};
    if (r.acpi !== undefined) features.acpi = { enabled: r.acpi || r.boot.startsWith('efi') };
    if (r.apic) features.apic = r.apic;
    const secure = r.boot === 'efi';
    if (r.smm !== undefined || secure) features.smm = { enabled: secure ? true : r.smm! };
    if (r.kvmHidden !== undefined) features.kvm = { hidden: r.kvmHidden };
    if (r.pvspinlock !== undefined) features.pvspinlock = { enabled: r.pvspinlock };
    if (r.hyperv) {
      const hv = Object.fromEntries(Object.entries(r.hyperv).filter(([, v]) => v !== undefined)) as Record<
        string,
        { enabled?: boolean }
      >;
      // a requirement of an enabled feature is never disabled (upstream's validation refuses it)
      for (const [feat, req] of HYPERV_REQUIRES)
        if (hv[feat] && hv[feat].enabled !== false) {
          if (!hv[req])
            hv[req] = {}; // what the defaults add; its own requirement is checked next
          else if (hv[req].enabled === false) delete hv[req].enabled;
        }
      if (Object.keys(hv).length) features.hyperv = hv as never;
    }
    if (Object.keys(features).length) domain.features = features;
    if (r.chassis) {
      const ch = Object.fromEntries(Object.entries(r.chassis).filter(([, v]) => v !== undefined));
      if (Object.keys(ch).length) domain.chassis = ch;
    }
    if (r.ioPolicy) domain.ioThreadsPolicy = r.ioPolicy;

    const devices: NonNullable<Spec['domain']['devices']> = {};
    const volumes: VolumeT[] = [];
    const disks: DiskT[] = [];
    let bootOrder = 1;
    let serviceAccounts = 0;
    r.disks.forEach(({ d, src: src0 }, i) => {
      // API validation: at most one serviceAccount volume
      const src = src0.serviceAccount && serviceAccounts++ > 0 ? { configMap: { name: 'cm' } } : src0;
      const name = `disk${i}`;
      const disk: DiskT = { name };
      if (d.kind === 'disk')
        disk.disk = {
          ...(d.diskBus ? { bus: d.diskBus } : {}),
          // sata hard disks cannot be read-only, and a disk without a bus gets sata on amd64
          ...(d.readonly !== undefined && d.diskBus && d.diskBus !== 'sata' ? { readonly: d.readonly } : {}),
        };
      if (d.kind === 'cdrom')
        disk.cdrom = { ...(d.cdromBus ? { bus: d.cdromBus } : {}), ...(d.tray ? { tray: d.tray } : {}) };
      if (d.kind === 'lun') disk.lun = { bus: 'scsi' };
      if (d.serial && d.kind === 'disk') disk.serial = d.serial;
      if (d.cache) disk.cache = d.cache;
      if (d.io && d.cache === 'none') disk.io = d.io;
      if (d.errorPolicy) disk.errorPolicy = d.errorPolicy;
      if (d.dedicatedIOThread && d.kind === 'disk' && d.diskBus === 'virtio') disk.dedicatedIOThread = true;
      if (d.boot) disk.bootOrder = bootOrder++;
      if (d.blockSize && d.kind === 'disk')
        disk.blockSize = { custom: { logical: d.blockSize[0]!, physical: d.blockSize[1]! } };
      disks.push(disk);
      volumes.push({ name, ...src } as VolumeT);
    });
    if (disks.length) devices.disks = disks;
    const interfaces: NonNullable<typeof devices.interfaces> = [];
    const networks: NonNullable<Spec['networks']> = [];
    const macs = new Set<string>();
    const acpiIndexes = new Set<number>();
    r.ifaces.forEach((x, i) => {
      const name = i === 0 ? 'default' : `net${i}`;
      const iface: (typeof interfaces)[number] = { name };
      if (i === 0) (iface as Record<string, unknown>)[r.firstBinding] = {};
      else iface.bridge = {};
      if (x.model) iface.model = x.model;
      if (x.mac && !macs.has(x.mac)) {
        macs.add(x.mac);
        iface.macAddress = x.mac;
      }
      if (x.boot) iface.bootOrder = bootOrder++;
      if (x.acpiIndex !== undefined && !acpiIndexes.has(x.acpiIndex)) {
        acpiIndexes.add(x.acpiIndex);
        iface.acpiIndex = x.acpiIndex;
      }
      interfaces.push(iface);
      networks.push(i === 0 ? { name, pod: {} } : { name, multus: { networkName: `net-${i}` } });
    });
    if (interfaces.length) devices.interfaces = interfaces;
    if (r.autoPod !== undefined) devices.autoattachPodInterface = r.autoPod;
    if (r.autoGraphics !== undefined) devices.autoattachGraphicsDevice = r.autoGraphics;
    if (r.autoSerial !== undefined)
      devices.autoattachSerialConsole = r.autoSerial || r.boot === 'bios-serial';
    if (r.autoBalloon !== undefined) devices.autoattachMemBalloon = r.autoBalloon;
    if (r.netMQ !== undefined) devices.networkInterfaceMultiqueue = r.netMQ;
    if (r.blockMQ !== undefined) devices.blockMultiQueue = r.blockMQ;
    if (r.transitional !== undefined) devices.useVirtioTransitional = r.transitional;
    if (r.rng) devices.rng = {};
    if (r.tpm !== undefined) devices.tpm = { persistent: r.tpm };
    if (r.sound) devices.sound = { name: 'snd', model: r.sound };
    if (r.watchdog) devices.watchdog = { name: 'wd', i6300esb: { action: r.watchdog } };
    if (r.inputs.length) devices.inputs = r.inputs.map((bus, i) => ({ name: `in${i}`, type: 'tablet', bus }));
    if (Object.keys(devices).length) domain.devices = devices;

    const spec: Spec = { domain };
    if (volumes.length) spec.volumes = volumes;
    if (networks.length) spec.networks = networks;
    if (r.grace !== undefined) spec.terminationGracePeriodSeconds = r.grace;
    return {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstance',
      metadata: { name: r.name, namespace: r.namespace, uid: r.uid },
      spec,
    } as Vmi;
  });

/** The context a launcher would pass for a generated VMI: lun volumes are block PVCs; for about half of
 * the VMIs whose pod interface passt can take (no PCI address, TCP/UDP ports), the standalone passt NIC. */
export function contextFor(vmi: Vmi, base: ConverterContext = {}): ConverterContext {
  const isBlockPVC: Record<string, boolean> = {};
  for (const d of vmi.spec.domain.devices?.disks ?? []) if (d.lun) isBlockPVC[d.name] = true;
  const pod = new Set((vmi.spec.networks ?? []).filter((n) => n.pod).map((n) => n.name));
  const passtOk = (vmi.spec.domain.devices?.interfaces ?? [])
    .filter((i) => pod.has(i.name))
    .every((i) => !i.pciAddress && (i.ports ?? []).every((p) => /^(TCP|UDP)?$/i.test(p.protocol ?? '')));
  const standalone = passtOk && (vmi.metadata?.name?.length ?? 0) % 2 === 0;
  return { ...base, isBlockPVC, ...(standalone ? { podNetworkBinding: 'passt' as const } : {}) };
}
