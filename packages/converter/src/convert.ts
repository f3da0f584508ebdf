// toDomain: a VirtualMachineInstance (API defaults applied) + a ConverterContext -> the domain model.
import type { Domain } from './model.js';
import type { ConverterContext, ResolvedContext } from './context.js';
import { DEFAULT_EFI } from './context.js';
import { podLayout } from './layout.js';
import type { ConvertedVmi } from './vmi.js';
import { ConversionError } from './errors.js';
import { assertXmlSafe } from './xml.js';
import {
  convertClock,
  convertCPU,
  convertCPUTune,
  convertFeatures,
  convertMemoryBacking,
  convertOS,
  convertSysInfo,
  cpuTopology,
  guestMemoryBytes,
  tcgTranslationCacheBytes,
  ioThreadPlan,
} from './compute.js';
import { assignIOThreads, convertDisks } from './storage.js';
import { convertInterfaces, passtQemuArgs, type PasstNic } from './network.js';
import { convertDevices } from './devices.js';

/**
 * Fills in the defaults of a {@link ConverterContext} for one VMI (amd64, KVM available, the
 * standard Pod layout, the OVMF files under /usr/share/OVMF, ...). Throws ConversionError when the
 * architecture (`spec.architecture`, else `context.architecture`) is not amd64, or when KVM is not
 * available and emulation is not allowed (upstream's useEmulation).
 */
export function resolveContext(vmi: ConvertedVmi, c: ConverterContext = {}): ResolvedContext {
  const arch = vmi.spec.architecture || c.architecture || 'amd64';
  if (arch !== 'amd64')
    throw new ConversionError(
      vmi.spec.architecture ? 'spec.architecture' : 'context.architecture',
      `architecture ${JSON.stringify(arch)} is not implemented by kubevirt-ts (only amd64)`,
    );
  const kvm = c.kvmAvailable ?? true;
  if (!kvm && !c.allowEmulation)
    throw new ConversionError(
      'context.kvmAvailable',
      'hardware virtualization (/dev/kvm) is not available and emulation is not allowed',
    );
  return {
    arch: 'amd64',
    domainType: kvm ? 'kvm' : 'qemu',
    smbios: c.smbios ?? {},
    efi: c.efi ?? DEFAULT_EFI,
    layout: c.layout ?? podLayout,
    disksInfo: c.disksInfo ?? {},
    isBlockPVC: c.isBlockPVC ?? {},
    isBlockDV: c.isBlockDV ?? {},
    hotplugVolumes: c.hotplugVolumes ?? {},
    cpuSet: c.cpuSet ?? [],
    volumesDiscardIgnore: new Set(c.volumesDiscardIgnore ?? []),
    memBalloonStatsPeriod: c.memBalloonStatsPeriod ?? 0,
    freePageReporting: c.freePageReporting ?? false,
    serialConsoleLog: c.serialConsoleLog ?? false,
    ...(c.podNetworkBinding ? { podNetworkBinding: c.podNetworkBinding } : {}),
  };
}

/** The libvirt domain name of a VMI: `<namespace>_<name>`. */
export function domainName(namespace: string, name: string): string {
  return `${namespace}_${name}`;
}

/** Strings the user wrote that end up in the XML: each must be representable in XML. */
function checkUserStrings(vmi: ConvertedVmi): void {
  const d = vmi.spec.domain;
  const check = (path: string, v: unknown) => {
    if (typeof v === 'string') assertXmlSafe(path, v);
  };
  check('metadata.name', vmi.metadata?.name);
  check('metadata.namespace', vmi.metadata?.namespace);
  check('metadata.uid', vmi.metadata?.uid);
  check('spec.domain.firmware.uuid', d.firmware?.uuid);
  check('spec.domain.firmware.serial', d.firmware?.serial);
  check('spec.domain.firmware.kernelBoot.kernelArgs', d.firmware?.kernelBoot?.kernelArgs);
  check('spec.domain.cpu.model', d.cpu?.model);
  check('spec.domain.machine.type', d.machine?.type);
  check('spec.domain.features.hyperv.vendorid.vendorid', d.features?.hyperv?.vendorid?.vendorid);
  for (const [k, v] of Object.entries(d.chassis ?? {})) check(`spec.domain.chassis.${k}`, v);
  (d.cpu?.features ?? []).forEach((f, i) => check(`spec.domain.cpu.features[${i}].name`, f.name));
  (d.devices?.disks ?? []).forEach((x, i) => {
    check(`spec.domain.devices.disks[${i}].name`, x.name);
    check(`spec.domain.devices.disks[${i}].serial`, x.serial);
  });
  (d.devices?.interfaces ?? []).forEach((x, i) => check(`spec.domain.devices.interfaces[${i}].name`, x.name));
  (d.devices?.inputs ?? []).forEach((x, i) => check(`spec.domain.devices.inputs[${i}].name`, x.name));
  check('spec.domain.devices.watchdog.name', d.devices?.watchdog?.name);
  check('spec.domain.devices.sound.name', d.devices?.sound?.name);
}

/**
 * Converts a VirtualMachineInstance (with API defaults applied) to the libvirt domain model, mapping
 * each field as upstream KubeVirt v1.1.0's converter does (see README for the deliberate
 * differences). Throws ConversionError naming the field for input it cannot convert, including
 * features kubevirt-ts does not implement.
 */
export function toDomain(vmi: ConvertedVmi, context: ConverterContext = {}): Domain {
  if (!vmi || typeof vmi !== 'object' || !vmi.spec || typeof vmi.spec !== 'object')
    throw new ConversionError('spec', 'required');
  if (!vmi.spec.domain || typeof vmi.spec.domain !== 'object')
    throw new ConversionError('spec.domain', 'required');
  const name = vmi.metadata?.name;
  if (!name) throw new ConversionError('metadata.name', 'required');
  const namespace = vmi.metadata?.namespace || 'default';
  // both name file paths in the Pod (nvram, cloud-init ISOs): one path component each
  for (const [path, v] of [
    ['metadata.name', name],
    ['metadata.namespace', namespace],
  ] as const)
    if (v.includes('/') || v === '.' || v === '..' || v.includes('\0'))
      throw new ConversionError(path, `${JSON.stringify(v)} cannot be used as a file name`);
  checkUserStrings(vmi);
  const ctx = resolveContext(vmi, context);

  const topology = cpuTopology(vmi);
  const vcpus = topology.sockets * topology.cores * topology.threads;
  const d: Domain = {
    type: ctx.domainType,
    name: domainName(namespace, name),
    metadata: { uid: vmi.metadata?.uid ?? '' },
    memory: guestMemoryBytes(vmi),
    vcpu: { placement: 'static', count: vcpus },
    os: convertOS(vmi, ctx, name),
    sysinfo: convertSysInfo(vmi, ctx),
    features: convertFeatures(vmi),
    cpu: convertCPU(vmi, topology),
    devices: {},
  };
  const uuid = vmi.spec.domain.firmware?.uuid;
  if (uuid) {
    if (!/^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$/.test(uuid))
      throw new ConversionError('spec.domain.firmware.uuid', `not a UUID: ${JSON.stringify(uuid)}`);
    d.uuid = uuid;
  }
  // emulated: cap QEMU's translation cache (it reserves 1 GiB otherwise) at what the Pod's overhead budgets
  if (d.type === 'qemu') d.features = { ...d.features, tcg: { tbCache: tcgTranslationCacheBytes(d.memory) } };
  // as upstream: the grace period is always recorded, 30 s when the VMI sets none
  if (d.metadata) d.metadata.gracePeriodSeconds = vmi.spec.terminationGracePeriodSeconds ?? 30;
  const clock = convertClock(vmi);
  if (clock) d.clock = clock;
  convertMemoryBacking(vmi, d);

  const disks = convertDisks(vmi, ctx, vcpus);
  const plan = ioThreadPlan(vmi);
  if (plan.count > 0 && disks.length > 0) d.iothreads = plan.count;
  const nextAuto = assignIOThreads(vmi, disks, plan);
  if (disks.length) d.devices.disks = disks;
  const ifaces = convertInterfaces(vmi, ctx, vcpus);
  if (ifaces.interfaces.length) d.devices.interfaces = ifaces.interfaces;
  if (ifaces.passt.length) d.qemuArgs = passtQemuArgs(ifaces.passt);
  convertCPUTune(vmi, ctx, d);
  convertDevices(vmi, ctx, d.devices, vcpus, plan.use && d.iothreads !== undefined ? nextAuto : undefined);
  checkBootOrder(vmi);
  return d;
}

function checkBootOrder(vmi: ConvertedVmi): void {
  const seen = new Map<number, string>();
  const note = (order: number | undefined, path: string) => {
    if (order === undefined) return;
    const prev = seen.get(order);
    if (prev) throw new ConversionError(path, `boot order ${order} is already used by ${prev}`);
    seen.set(order, path);
  };
  (vmi.spec.domain.devices?.disks ?? []).forEach((d, i) =>
    note(d.bootOrder, `spec.domain.devices.disks[${i}].bootOrder`),
  );
  (vmi.spec.domain.devices?.interfaces ?? []).forEach((x, i) => {
    if (x.state !== 'absent') note(x.bootOrder, `spec.domain.devices.interfaces[${i}].bootOrder`);
  });
}

/**
 * The NICs of a VMI that go through a passt the launcher runs: its passt-binding interfaces (in a Pod as
 * standalone), and standalone with context `podNetworkBinding: 'passt'` every pod network interface.
 * Socket, MAC, MTU and forwarded ports of each, exactly as {@link toDomain} attaches them. Empty when
 * there is none (and always with `podNetworkBinding: 'slirp'`). Throws ConversionError as toDomain does
 * for the interfaces.
 */
export function passtNics(vmi: ConvertedVmi, context: ConverterContext = {}): PasstNic[] {
  return convertInterfaces(vmi, resolveContext(vmi, context), 1).passt;
}
