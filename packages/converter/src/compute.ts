// Compute: memory, vCPUs and topology, CPU model, OS/firmware, SMBIOS, hypervisor features, clock.
import type {
  Clock,
  CPU,
  Domain,
  DomainOS,
  Features,
  Hyperv,
  SysInfo,
  SysInfoEntry,
  Timer,
} from './model.js';
import type { ResolvedContext } from './context.js';
import { HYPERV_KEYS } from './model.js';
import type { VmiDomainSpec, ConvertedVmi, Quantity } from './vmi.js';
import { ConversionError, notImplemented } from './errors.js';
import { quantity, quantityValue } from './quantity.js';

const D = 'spec.domain';

const MiB = 1024 * 1024;

/**
 * The size of QEMU's TCG translation cache (libvirt `<features><tcg><tb-cache>`) when the domain is emulated
 * (type `qemu`): an eighth of the guest's memory, rounded up to a whole MiB, at least 16 MiB and at most 1 GiB
 * (QEMU 7.2's own default is a 1 GiB reservation). The launcher Pod's memory overhead (`@kubevirt-ts/renderer`)
 * budgets exactly this; see its README ("TCG translation cache") for the measurements behind the rule.
 */
export function tcgTranslationCacheBytes(guestMemory: number): number {
  return Math.min(1024 * MiB, Math.max(16 * MiB, Math.ceil(guestMemory / 8 / MiB) * MiB));
}

/** Guest memory in bytes: spec.domain.memory.guest, else requests.memory, else limits.memory. */
export function guestMemoryBytes(vmi: ConvertedVmi): number {
  const d = vmi.spec.domain;
  let q: Quantity | undefined;
  let path = '';
  if (d.memory?.guest !== undefined) [q, path] = [d.memory.guest, `${D}.memory.guest`];
  else if (d.resources?.requests?.memory !== undefined)
    [q, path] = [d.resources.requests.memory, `${D}.resources.requests.memory`];
  else if (d.resources?.limits?.memory !== undefined)
    [q, path] = [d.resources.limits.memory, `${D}.resources.limits.memory`];
  if (q === undefined)
    throw new ConversionError(
      `${D}.memory.guest`,
      'no guest memory: set it or spec.domain.resources.requests.memory',
    );
  const bytes = Math.ceil(quantity(q, path));
  if (bytes <= 0) throw new ConversionError(path, 'guest memory must be positive');
  return bytes;
}

/** vCPU topology as upstream's GetCPUTopology: explicit sockets/cores/threads (missing ones 1);
 * none given: sockets = CPU limit, else CPU request (rounded up), else 1. */
export function cpuTopology(vmi: ConvertedVmi): { sockets: number; cores: number; threads: number } {
  const cpu = vmi.spec.domain.cpu;
  let sockets = cpu?.sockets || 1;
  const cores = cpu?.cores || 1;
  const threads = cpu?.threads || 1;
  if (!cpu || (!cpu.cores && !cpu.sockets && !cpu.threads)) {
    const res = vmi.spec.domain.resources;
    if (res?.limits?.cpu !== undefined) sockets = quantityValue(res.limits.cpu, `${D}.resources.limits.cpu`);
    else if (res?.requests?.cpu !== undefined)
      sockets = quantityValue(res.requests.cpu, `${D}.resources.requests.cpu`);
    if (sockets < 1) sockets = 1;
  }
  return { sockets, cores, threads };
}

export function convertCPU(vmi: ConvertedVmi, topology: CPU['topology']): CPU {
  const spec = vmi.spec.domain.cpu;
  if (spec?.numa?.guestMappingPassthrough)
    notImplemented(`${D}.cpu.numa.guestMappingPassthrough`, 'guest NUMA topology passthrough');
  if (spec?.realtime) notImplemented(`${D}.cpu.realtime`, 'realtime vCPU scheduling');
  const cpu: CPU = { mode: 'host-model' };
  const model = spec?.model ?? '';
  if (model === 'host-model' || model === 'host-passthrough') cpu.mode = model;
  else if (model !== '') {
    cpu.mode = 'custom';
    cpu.model = model;
  }
  cpu.topology = topology;
  if (spec?.features?.length)
    cpu.features = spec.features.map((f, i) => {
      if (!/^[a-zA-Z0-9\-_.]+$/.test(f.name))
        throw new ConversionError(
          `${D}.cpu.features[${i}].name`,
          `not a CPU feature name: ${JSON.stringify(f.name)}`,
        );
      return { name: f.name, policy: f.policy ?? 'require' };
    });
  return cpu;
}

function yesNo(v: boolean | undefined, dflt: boolean): 'yes' | 'no' {
  return (v ?? dflt) ? 'yes' : 'no';
}

function onOff(v: boolean | undefined, dflt: boolean): 'on' | 'off' {
  return (v ?? dflt) ? 'on' : 'off';
}

export function convertOS(vmi: ConvertedVmi, ctx: ResolvedContext, domainName: string): DomainOS {
  const d = vmi.spec.domain;
  const machine = d.machine?.type || 'q35';
  if (!/^[a-zA-Z0-9_.-]+$/.test(machine))
    throw new ConversionError(`${D}.machine.type`, `not a machine type: ${JSON.stringify(machine)}`);
  const os: DomainOS = {
    type: { arch: 'x86_64', machine, value: 'hvm' },
    smbios: { mode: 'sysinfo' },
  };
  const bl = d.firmware?.bootloader;
  if (bl?.efi && d.features?.acpi?.enabled === false)
    throw new ConversionError(`${D}.features.acpi.enabled`, 'EFI firmware requires ACPI on x86_64');
  if (bl?.bios?.useSerial && d.devices?.autoattachSerialConsole === false)
    throw new ConversionError(
      `${D}.firmware.bootloader.bios.useSerial`,
      'BIOS serial output needs the serial console (devices.autoattachSerialConsole is false)',
    );
  if (bl?.efi) {
    const secure = bl.efi.secureBoot ?? true;
    os.loader = {
      path: secure ? ctx.efi.secureCode : ctx.efi.code,
      readonly: 'yes',
      secure: secure ? 'yes' : 'no',
      type: 'pflash',
    };
    // upstream names the variable store after the VMI name
    os.nvram = {
      path: ctx.layout.nvramFile(vmi.metadata?.name ?? domainName),
      template: secure ? ctx.efi.secureVars : ctx.efi.vars,
    };
  } else if (bl?.bios?.useSerial) {
    os.bios = { useserial: 'yes' };
  }
  const kb = d.firmware?.kernelBoot;
  if (kb?.container) {
    const c = kb.container;
    if (c.kernelPath) os.kernel = ctx.layout.kernelBootFile(c.kernelPath);
    if (c.initrdPath) os.initrd = ctx.layout.kernelBootFile(c.initrdPath);
    if (kb.kernelArgs !== undefined && kb.kernelArgs !== '') os.cmdline = kb.kernelArgs;
  }
  return os;
}

function entries(pairs: [string, string | undefined][]): SysInfoEntry[] | undefined {
  // empty SMBIOS entries are left out (libvirt's schema rejects them; the guest sees no difference)
  const out = pairs
    .filter((p): p is [string, string] => p[1] !== undefined && p[1] !== '')
    .map(([name, value]) => ({ name, value }));
  return out.length ? out : undefined;
}

export function convertSysInfo(vmi: ConvertedVmi, ctx: ResolvedContext): SysInfo {
  const fw = vmi.spec.domain.firmware;
  const s: SysInfo = { type: 'smbios' };
  const system = entries([
    ['uuid', fw?.uuid],
    ['serial', fw?.serial],
    ['manufacturer', ctx.smbios.manufacturer],
    ['family', ctx.smbios.family],
    ['product', ctx.smbios.product],
    ['sku', ctx.smbios.sku],
    ['version', ctx.smbios.version],
  ]);
  if (system) s.system = system;
  const ch = vmi.spec.domain.chassis;
  const chassis = ch
    ? entries([
        ['manufacturer', ch.manufacturer],
        ['version', ch.version],
        ['serial', ch.serial],
        ['asset', ch.asset],
        ['sku', ch.sku],
      ])
    : undefined;
  if (chassis) s.chassis = chassis;
  return s;
}

const HV: [keyof NonNullable<NonNullable<VmiDomainSpec['features']>['hyperv']>, keyof Hyperv][] = [
  ['relaxed', 'relaxed'],
  ['vapic', 'vapic'],
  ['vpindex', 'vpindex'],
  ['runtime', 'runtime'],
  ['synic', 'synic'],
  ['reset', 'reset'],
  ['frequencies', 'frequencies'],
  ['reenlightenment', 'reenlightenment'],
  ['tlbflush', 'tlbflush'],
  ['ipi', 'ipi'],
  ['evmcs', 'evmcs'],
];

export function convertFeatures(vmi: ConvertedVmi): Features {
  const f = vmi.spec.domain.features;
  const out: Features = {};
  if (f?.acpi?.enabled ?? true) out.acpi = true;
  // as upstream: endOfInterrupt is not written (upstream's converter does not map it)
  if (f?.apic && (f.apic.enabled ?? true)) out.apic = {};
  const hv = f?.hyperv;
  if (hv) {
    const h: Hyperv = {};
    for (const [src, dst] of HV) {
      const x = hv[src] as { enabled?: boolean } | undefined;
      if (x) (h as Record<string, unknown>)[dst] = { state: onOff(x.enabled, true) };
    }
    // as upstream: retries and vendor id value are written whenever given, whatever the state
    if (hv.spinlocks) {
      h.spinlocks = { state: onOff(hv.spinlocks.enabled, true) };
      const retries = hv.spinlocks.spinlocks;
      if (retries !== undefined) {
        if (retries < 4095)
          throw new ConversionError(`${D}.features.hyperv.spinlocks.spinlocks`, 'must be at least 4095');
        h.spinlocks.retries = retries;
      }
    }
    if (hv.synictimer) {
      h.stimer = { state: onOff(hv.synictimer.enabled, true) };
      if (hv.synictimer.direct) h.stimer.direct = { state: onOff(hv.synictimer.direct.enabled, true) };
    }
    if (hv.vendorid) {
      h.vendor_id = { state: onOff(hv.vendorid.enabled, true) };
      const v = hv.vendorid.vendorid;
      if (v !== undefined || h.vendor_id.state === 'on') {
        if (v === undefined || v.length < 1 || v.length > 12 || v.includes(','))
          throw new ConversionError(
            `${D}.features.hyperv.vendorid.vendorid`,
            'must be 1 to 12 characters, no comma',
          );
        h.vendor_id.value = v;
      }
    }
    // keep libvirt's element order (the HV table order above + spinlocks/stimer/vendor_id)
    const ordered: Hyperv = {};
    for (const k of HYPERV_KEYS) {
      if (h[k]) (ordered as Record<string, unknown>)[k] = h[k];
    }
    out.hyperv = ordered;
  }
  if (f?.kvm) out.kvm = { hidden: { state: f.kvm.hidden ? 'on' : 'off' } };
  if (f?.pvspinlock) out.pvspinlock = { state: onOff(f.pvspinlock.enabled, true) };
  const secureBoot = vmi.spec.domain.firmware?.bootloader?.efi
    ? (vmi.spec.domain.firmware.bootloader.efi.secureBoot ?? true)
    : false;
  if ((f?.smm && (f.smm.enabled ?? true)) || secureBoot) out.smm = true;
  return out;
}

export function convertClock(vmi: ConvertedVmi): Clock | undefined {
  const c = vmi.spec.domain.clock;
  if (!c) return undefined;
  const P = `${D}.clock`;
  let clock: Clock;
  if (c.utc) {
    // as upstream: without an offset the guest clock is reset to UTC at boot
    clock = {
      offset: 'utc',
      adjustment: c.utc.offsetSeconds !== undefined ? String(c.utc.offsetSeconds) : 'reset',
    };
  } else if (c.timezone !== undefined) {
    if (!/^[A-Za-z0-9_.+\-/]+$/.test(c.timezone) || c.timezone.split('/').includes('..'))
      throw new ConversionError(`${P}.timezone`, `not a time zone name: ${JSON.stringify(c.timezone)}`);
    clock = { offset: 'timezone', timezone: c.timezone };
  } else {
    // upstream writes no offset here; libvirt's schema requires one and utc is libvirt's default,
    // so the guest sees the same clock (README: deliberate differences, fact "clock")
    clock = { offset: 'utc' };
  }
  const t = c.timer;
  if (t) {
    const timers: Timer[] = [];
    const tick = (v: string | undefined, path: string): Timer['tickpolicy'] => {
      if (v === undefined || v === '') return undefined;
      if (!['delay', 'catchup', 'merge', 'discard'].includes(v))
        throw new ConversionError(path, `unknown tick policy ${JSON.stringify(v)}`);
      return v as Timer['tickpolicy'];
    };
    const add = (timer: Timer) => {
      for (const k of Object.keys(timer) as (keyof Timer)[]) if (timer[k] === undefined) delete timer[k];
      timers.push(timer);
    };
    if (t.rtc)
      add({
        name: 'rtc',
        tickpolicy: tick(t.rtc.tickPolicy, `${P}.timer.rtc.tickPolicy`),
        present: yesNo(t.rtc.present, true),
        track: t.rtc.track,
      });
    if (t.pit)
      add({
        name: 'pit',
        tickpolicy: tick(t.pit.tickPolicy, `${P}.timer.pit.tickPolicy`),
        present: yesNo(t.pit.present, true),
      });
    if (t.kvm) add({ name: 'kvmclock', present: yesNo(t.kvm.present, true) });
    if (t.hpet)
      add({
        name: 'hpet',
        tickpolicy: tick(t.hpet.tickPolicy, `${P}.timer.hpet.tickPolicy`),
        present: yesNo(t.hpet.present, true),
      });
    if (t.hyperv) add({ name: 'hypervclock', present: yesNo(t.hyperv.present, true) });
    if (timers.length) clock.timers = timers;
  }
  return clock;
}

/** Dedicated CPUs: each vCPU pinned to one host CPU of the Pod's cpuset (context.cpuSet), the emulator
 * and IO threads on an extra CPU with isolateEmulatorThread, else on all of them. A simplified form of
 * upstream's pinning: no host-topology-aware thread sibling placement, no guest NUMA passthrough. */
export function convertCPUTune(vmi: ConvertedVmi, ctx: ResolvedContext, domain: Domain): void {
  const cpu = vmi.spec.domain.cpu;
  if (!cpu?.dedicatedCpuPlacement) return;
  const vcpus = domain.vcpu.count;
  const need = vcpus + (cpu.isolateEmulatorThread ? 1 : 0);
  if (ctx.cpuSet.length < need)
    throw new ConversionError(
      `${D}.cpu.dedicatedCpuPlacement`,
      `needs ${need} dedicated host CPUs, the Pod's cpuset (context.cpuSet) has ${ctx.cpuSet.length}`,
    );
  const tune: NonNullable<Domain['cputune']> = {
    vcpupin: Array.from({ length: vcpus }, (_, i) => ({ vcpu: i, cpuset: String(ctx.cpuSet[i]) })),
  };
  const emulator = cpu.isolateEmulatorThread
    ? String(ctx.cpuSet[vcpus])
    : ctx.cpuSet.slice(0, vcpus).join(',');
  tune.emulatorpin = { cpuset: emulator };
  if (domain.iothreads)
    tune.iothreadpin = Array.from({ length: domain.iothreads }, (_, i) => ({
      iothread: i + 1,
      cpuset: emulator,
    }));
  domain.cputune = tune;
}

/** memoryBacking and the NUMA cell memfd needs (upstream: hugepages imply a memfd backend). */
export function convertMemoryBacking(vmi: ConvertedVmi, domain: Domain): void {
  const hp = vmi.spec.domain.memory?.hugepages;
  if (!hp) return;
  domain.memoryBacking = { hugepages: {} };
  if (vmi.metadata?.annotations?.['kubevirt.io/memfd'] !== 'false') {
    domain.memoryBacking.source = { type: 'memfd' };
    if (domain.cpu && !domain.cpu.numa)
      domain.cpu.numa = {
        cells: [
          {
            id: 0,
            cpus: `0-${domain.vcpu.count - 1}`,
            memory: Math.floor(domain.memory / 1024),
            unit: 'KiB',
          },
        ],
      };
  }
}

/** iothreads as upstream v1.1.0: a pool whenever there are disks; disks get explicit threads
 * only with an ioThreadsPolicy or a dedicatedIOThread disk. */
export function ioThreadPlan(vmi: ConvertedVmi): { count: number; auto: number; use: boolean } {
  const d = vmi.spec.domain;
  const disks = d.devices?.disks ?? [];
  let limit = 1;
  if (d.ioThreadsPolicy === 'auto') {
    let n = 1;
    if (d.resources?.requests?.cpu !== undefined)
      n = quantityValue(d.resources.requests.cpu, `${D}.resources.requests.cpu`);
    else if (d.resources?.limits?.cpu !== undefined)
      n = quantityValue(d.resources.limits.cpu, `${D}.resources.limits.cpu`);
    limit = Math.max(1, n) * 2;
  }
  let dedicated = 0;
  let auto = 0;
  for (const disk of disks) {
    if (disk.dedicatedIOThread) dedicated++;
    else auto++;
  }
  if (auto + dedicated > limit) auto = Math.max(1, limit - dedicated);
  return { count: auto + dedicated, auto, use: d.ioThreadsPolicy !== undefined || dedicated > 0 };
}
