// Storage: spec.domain.devices.disks + spec.volumes -> <disk> elements.
import type { Disk } from './model.js';
import type { ResolvedContext } from './context.js';
import type { VmiDisk, ConvertedVmi, VmiVolume } from './vmi.js';
import { ConversionError, notImplemented } from './errors.js';

const DISKS = 'spec.domain.devices.disks';

type Bus = Disk['target']['bus'];

/** Bus used when a disk names none (upstream's API defaults: virtio for disk, sata for cdrom, scsi for lun). */
export function defaultBus(kind: 'disk' | 'cdrom' | 'lun'): Bus {
  return kind === 'disk' ? 'virtio' : kind === 'cdrom' ? 'sata' : 'scsi';
}

function prefixOf(bus: Bus): string {
  return bus === 'virtio' ? 'vd' : 'sd';
}

/** Upstream's FormatDeviceName (the Linux sd naming): 0 -> a, 25 -> z, 26 -> aa, ... */
export function formatDeviceName(prefix: string, index: number): string {
  let name = '';
  let i = index;
  while (i >= 0) {
    name = String.fromCharCode(97 + (i % 26)) + name;
    i = Math.floor(i / 26) - 1;
  }
  return prefix + name;
}

export function virtioModel(vmi: ConvertedVmi): 'virtio-transitional' | 'virtio-non-transitional' {
  return vmi.spec.domain.devices?.useVirtioTransitional ? 'virtio-transitional' : 'virtio-non-transitional';
}

function diskKind(d: VmiDisk, path: string): 'disk' | 'cdrom' | 'lun' {
  const kinds = (['disk', 'cdrom', 'lun'] as const).filter((k) => d[k] !== undefined);
  if (kinds.length > 1)
    throw new ConversionError(path, `only one of disk, cdrom, lun may be set (got ${kinds.join(', ')})`);
  return kinds[0] ?? 'disk';
}

function busOf(value: string | undefined, kind: 'disk' | 'cdrom' | 'lun', path: string): Bus {
  if (value === undefined || value === '') return defaultBus(kind);
  const allowed: Record<string, Bus[]> = {
    disk: ['virtio', 'sata', 'scsi', 'usb'],
    cdrom: ['sata', 'scsi'],
    lun: ['scsi'],
  };
  if (!allowed[kind]!.includes(value as Bus))
    throw new ConversionError(
      path,
      `bus ${JSON.stringify(value)} is not supported for a ${kind} (use ${allowed[kind]!.join(', ')})`,
    );
  return value as Bus;
}

/** PCI address "0000:81:01.1" -> libvirt's address element. */
export function pciAddress(s: string, path: string): NonNullable<Disk['address']> {
  const m = /^([0-9a-fA-F]{4}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$/.exec(s);
  if (!m) throw new ConversionError(path, `not a PCI address (expected dddd:bb:ss.f): ${JSON.stringify(s)}`);
  return { type: 'pci', domain: `0x${m[1]}`, bus: `0x${m[2]}`, slot: `0x${m[3]}`, function: `0x${m[4]}` };
}

/** Converts every disk; `vcpus` sizes blockMultiQueue; iothreads are assigned by `assignIOThreads`. */
export function convertDisks(vmi: ConvertedVmi, ctx: ResolvedContext, vcpus: number): Disk[] {
  const disks = vmi.spec.domain.devices?.disks ?? [];
  const volumes = new Map<string, { v: VmiVolume; index: number }>();
  (vmi.spec.volumes ?? []).forEach((v, index) => volumes.set(v.name, { v, index }));
  const counters = new Map<string, number>();
  const seen = new Set<string>();
  const model = virtioModel(vmi);
  const multiQueue = vmi.spec.domain.devices?.blockMultiQueue === true;
  const out: Disk[] = [];

  disks.forEach((d, i) => {
    const p = `${DISKS}[${i}]`;
    if (seen.has(d.name))
      throw new ConversionError(`${p}.name`, `duplicate disk name ${JSON.stringify(d.name)}`);
    seen.add(d.name);
    const kind = diskKind(d, p);
    const target = kind === 'disk' ? d.disk : kind === 'cdrom' ? d.cdrom : d.lun;
    const bus = busOf(target?.bus, kind, `${p}.${kind}.bus`);
    const prefix = prefixOf(bus);
    const unit = counters.get(prefix) ?? 0;
    counters.set(prefix, unit + 1);

    const disk: Disk = {
      type: 'file',
      device: kind,
      target: { dev: formatDeviceName(prefix, unit), bus },
      driver: { name: 'qemu', type: 'raw' },
    };
    if (bus === 'virtio' && kind === 'disk') disk.model = model;
    if (bus === 'scsi') disk.address = { type: 'drive', controller: 0, bus: 0, unit };
    if (kind === 'disk' && d.disk?.pciAddress) {
      if (bus !== 'virtio')
        throw new ConversionError(`${p}.disk.pciAddress`, 'a PCI address needs bus virtio');
      disk.address = pciAddress(d.disk.pciAddress, `${p}.disk.pciAddress`);
    }
    if (kind === 'cdrom') {
      if (d.cdrom?.tray) disk.target.tray = d.cdrom.tray;
      else disk.target.tray = 'closed';
      if (d.cdrom?.readonly ?? true) disk.readonly = true;
    } else if (target?.readonly) {
      if (bus === 'sata')
        throw new ConversionError(
          `${p}.${kind}.readonly`,
          'a read-only disk is not supported on bus sata (libvirt/QEMU); use virtio or scsi, or a cdrom',
        );
      disk.readonly = true;
    }
    if (kind === 'lun' && d.lun?.reservation)
      notImplemented(`${p}.lun.reservation`, 'SCSI persistent reservation');
    if (d.serial !== undefined && d.serial !== '') {
      if (kind === 'lun')
        throw new ConversionError(`${p}.serial`, 'a lun passes the device through and cannot have a serial');
      // libvirt's schema (diskSerial) and QEMU accept only these characters; so does API validation
      if (!/^[A-Za-z0-9_.+\- ]+$/.test(d.serial))
        throw new ConversionError(
          `${p}.serial`,
          `${JSON.stringify(d.serial)} must be made of the characters [A-Za-z0-9_.+-] and space`,
        );
      disk.serial = d.serial;
    }
    if (d.shareable) {
      if ((d.cache ?? 'none') !== 'none')
        throw new ConversionError(`${p}.cache`, 'a shareable disk requires cache none');
      disk.shareable = true;
      disk.driver.cache = 'none';
    }
    if (d.cache) disk.driver.cache = d.cache;
    if (d.io && d.io !== 'default') disk.driver.io = d.io;
    if ((kind === 'disk' || kind === 'lun') && !ctx.volumesDiscardIgnore.has(d.name))
      disk.driver.discard = 'unmap';
    if (multiQueue && bus === 'virtio') disk.driver.queues = vcpus;
    if (d.blockSize?.custom) {
      const { logical, physical } = d.blockSize.custom;
      const pow2 = (x: number) => Number.isInteger(x) && x >= 512 && (x & (x - 1)) === 0;
      if (!pow2(logical) || !pow2(physical) || physical < logical)
        throw new ConversionError(
          `${p}.blockSize.custom`,
          'logical and physical must be powers of two >= 512, physical >= logical',
        );
      disk.blockio = { logical_block_size: logical, physical_block_size: physical };
    } else if (d.blockSize?.matchVolume && d.blockSize.matchVolume.enabled !== false) {
      notImplemented(`${p}.blockSize.matchVolume`, 'block size detection from the volume');
    }
    disk.alias = `ua-${d.name}`;
    if (d.bootOrder !== undefined) {
      if (!Number.isInteger(d.bootOrder) || d.bootOrder < 1)
        throw new ConversionError(`${p}.bootOrder`, 'must be a positive integer');
      disk.boot = { order: d.bootOrder };
    }

    const vol = volumes.get(d.name);
    const hotplug = vol ? ctx.hotplugVolumes[d.name] : undefined;
    if (hotplug && hotplug.ready === false) return; // not in the Pod yet: attached when it is
    if (hotplug) {
      const v = vol!.v;
      if (!v.persistentVolumeClaim && !v.dataVolume)
        throw new ConversionError(
          `spec.volumes[${vol!.index}]`,
          'only persistentVolumeClaim and dataVolume volumes can be hotplugged',
        );
      disk.driver.type = 'raw';
      if (hotplug.isBlock) {
        disk.type = 'block';
        disk.source = { dev: ctx.layout.hotplugBlockDevice(d.name) };
      } else {
        disk.source = { file: ctx.layout.hotplugImage(d.name) };
      }
      if (!ctx.volumesDiscardIgnore.has(d.name)) disk.driver.discard = 'unmap';
    } else if (!vol) {
      if (kind !== 'cdrom')
        throw new ConversionError(`${p}.name`, `no volume named ${JSON.stringify(d.name)} in spec.volumes`);
      // an empty cdrom drive
      disk.type = 'block';
      disk.driver.type = 'raw';
      disk.driver.discard = 'unmap';
    } else {
      try {
        convertVolume(vol.v, vol.index, disk, ctx, vmi);
      } catch (e) {
        if (e instanceof ConversionError) throw e;
        // the layout refuses names that are not one path component
        throw new ConversionError(`spec.volumes[${vol.index}].name`, (e as Error).message);
      }
    }
    disk.driver.error_policy = d.errorPolicy ?? 'stop';
    // keep the driver's attribute order stable (name, type, cache, io, discard, error_policy, iothread, queues)
    out.push(disk);
  });
  return out;
}

function convertVolume(
  v: VmiVolume,
  index: number,
  disk: Disk,
  ctx: ResolvedContext,
  vmi: ConvertedVmi,
): void {
  const L = ctx.layout;
  const vp = `spec.volumes[${index}]`;
  const discardAlways = () => {
    if (!ctx.volumesDiscardIgnore.has(v.name)) disk.driver.discard = 'unmap';
  };
  const fileOrBlock = (isBlock: boolean) => {
    disk.driver.type = 'raw';
    if (isBlock) {
      disk.type = 'block';
      disk.source = { dev: L.blockVolumeDevice(v.name) };
    } else {
      disk.type = 'file';
      disk.source = { file: L.filesystemVolumeImage(v.name) };
    }
    discardAlways();
  };
  if (v.containerDisk) {
    disk.driver.type = 'qcow2';
    disk.source = { file: L.ephemeralOverlay(v.name) };
    disk.backingStore = {
      type: 'file',
      format: ctx.disksInfo[v.name]?.format ?? 'qcow2',
      source: { file: L.containerDiskImage(index) },
      // the container image is used as it is: its own backing file (refused by the launcher) is never read
      terminated: true,
    };
    disk.driver.discard = 'unmap';
  } else if (v.ephemeral) {
    if (!v.ephemeral.persistentVolumeClaim)
      throw new ConversionError(`${vp}.ephemeral.persistentVolumeClaim`, 'required');
    const isBlock = ctx.isBlockPVC[v.name] === true;
    disk.driver.type = 'qcow2';
    disk.source = { file: L.ephemeralOverlay(v.name) };
    disk.backingStore = isBlock
      ? { type: 'block', format: 'raw', source: { dev: L.blockVolumeDevice(v.name) } }
      : { type: 'file', format: 'raw', source: { file: L.filesystemVolumeImage(v.name) } };
    disk.driver.discard = 'unmap';
  } else if (v.persistentVolumeClaim) {
    fileOrBlock(ctx.isBlockPVC[v.name] === true);
  } else if (v.dataVolume) {
    fileOrBlock(ctx.isBlockDV[v.name] === true);
  } else if (v.emptyDisk) {
    disk.driver.type = 'qcow2';
    disk.source = { file: L.emptyDiskImage(v.name) };
    disk.driver.discard = 'unmap';
  } else if (v.hostDisk) {
    disk.driver.type = 'raw';
    disk.source = { file: L.hostDiskImage(v.name, v.hostDisk.path) };
  } else if (v.cloudInitNoCloud || v.cloudInitConfigDrive) {
    if (disk.device === 'lun')
      throw new ConversionError(vp, 'a cloud-init volume cannot be attached as a lun');
    const ns = vmi.metadata?.namespace || 'default';
    const name = vmi.metadata?.name ?? '';
    disk.driver.type = 'raw';
    disk.source = { file: L.cloudInitIso(v.cloudInitNoCloud ? 'noCloud' : 'configDrive', ns, name) };
  } else if (v.configMap || v.secret || v.downwardAPI || v.serviceAccount) {
    const kind = v.configMap
      ? 'configMap'
      : v.secret
        ? 'secret'
        : v.downwardAPI
          ? 'downwardAPI'
          : 'serviceAccount';
    disk.driver.type = 'raw';
    disk.source = { file: L.configIso(kind, v.name) };
  } else if (v.downwardMetrics) {
    notImplemented(`${vp}.downwardMetrics`, 'the downwardMetrics volume');
  } else if (v.sysprep) {
    notImplemented(`${vp}.sysprep`, 'the sysprep volume');
  } else if (v.memoryDump) {
    throw new ConversionError(`${vp}.memoryDump`, 'a memoryDump volume cannot be attached as a disk');
  } else {
    throw new ConversionError(vp, 'volume has no supported source');
  }
  if (disk.device === 'lun' && disk.type === 'file')
    throw new ConversionError(
      vp,
      `disk ${JSON.stringify(v.name)} is of type lun, which needs a block volume`,
    );
}

/** Applies upstream's iothread assignment to converted disks (virtio disks only). */
export function assignIOThreads(
  vmi: ConvertedVmi,
  disks: Disk[],
  plan: { auto: number; use: boolean },
): number {
  let currentAuto = 1;
  if (!plan.use) return currentAuto;
  let currentDedicated = plan.auto + 1;
  // by name: disks not yet in the Pod (hotplug) are not in `disks`
  const dedicated = new Set(
    (vmi.spec.domain.devices?.disks ?? []).filter((d) => d.dedicatedIOThread).map((d) => `ua-${d.name}`),
  );
  disks.forEach((disk) => {
    if (disk.target.bus !== 'virtio') return;
    if (dedicated.has(disk.alias ?? '')) {
      disk.driver.iothread = currentDedicated++;
    } else {
      disk.driver.iothread = currentAuto;
      currentAuto = (currentAuto % plan.auto) + 1;
    }
  });
  return currentAuto;
}
