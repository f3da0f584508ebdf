// Validation of disks and volumes: buses, names, boot order, each volume source.
import { sub } from './paths.js';
import {
  DISK_BUSES,
  type Devices,
  VOLUME_SOURCES,
  type VirtualMachineInstanceSpec,
  type Volume,
} from './schemas.js';
import {
  Errs,
  PCI_RE,
  SERIAL_RE,
  checkAbsolutePath,
  checkDns1123Label,
  qty,
  uniqueNames,
} from './validate-common.js';
import { type Checked, describe } from './validate-schema.js';

export interface BootOrderUse {
  path: string;
  order: number;
}

export function validateDisks(
  devices: Checked<Devices>,
  dpath: string,
  volumes: Map<string, number> | undefined,
  volList: readonly Checked<Volume>[],
  boot: BootOrderUse[],
  e: Errs,
) {
  const disks = devices.disks ?? [];
  const base = sub(dpath, 'disks');
  uniqueNames(disks, base, e, 'disk');
  disks.forEach((d, i) => {
    const p = sub(base, i);
    const name = d.name;
    if (name) {
      const bad = checkDns1123Label(name);
      if (bad) e.add(sub(p, 'name'), `${bad} (disk names become container names)`);
    }
    if (name && volumes) {
      const vi = volumes.get(name);
      if (vi === undefined) e.add(sub(p, 'name'), `no volume named "${name}" in spec.volumes`);
      else if (d.lun !== undefined) {
        const vol = volList[vi];
        if (vol?.persistentVolumeClaim === undefined && vol?.dataVolume === undefined) {
          e.add(sub(p, 'lun'), 'a lun can only use a persistentVolumeClaim or dataVolume volume');
        }
      }
    }
    const targets = (['disk', 'cdrom', 'lun'] as const).filter((t) => d[t] !== undefined);
    if (targets.length > 1)
      e.add(p, `a disk can be only one of disk, cdrom or lun; got ${targets.join(' and ')}`);
    for (const t of targets) {
      const bus = d[t]?.bus;
      if (bus === undefined) continue;
      const bPath = sub(sub(p, t), 'bus');
      if (bus === 'ide') e.add(bPath, 'IDE bus is not supported');
      else if (!(DISK_BUSES as readonly string[]).includes(bus))
        e.add(bPath, `unknown bus "${bus}": must be one of ${DISK_BUSES.join(', ')}`);
      else if (t === 'cdrom' && bus === 'virtio')
        e.add(bPath, 'bus virtio is not valid for a cdrom: use sata or scsi');
      else if (t === 'lun' && bus !== 'scsi')
        // upstream's amd64 defaults give a busless lun sata too; libvirt passes SCSI commands through scsi only
        e.add(
          bPath,
          `a lun needs bus scsi, got ${bus} (a lun without a bus gets sata from the defaults: set scsi)`,
        );
      else if (t === 'disk' && bus === 'sata' && d.disk?.readonly === true)
        e.add(bPath, 'sata hard disks do not support readonly');
    }
    const bo = d.bootOrder;
    if (bo !== undefined) {
      if (bo < 1) e.add(sub(p, 'bootOrder'), `must be 1 or more, got ${bo}`);
      else boot.push({ path: sub(p, 'bootOrder'), order: bo });
    }
    const serial = d.serial;
    if (serial !== undefined) {
      if (!SERIAL_RE.test(serial))
        e.add(sub(p, 'serial'), `"${serial}" must be made of the characters [A-Za-z0-9_.+-]`);
      else if (serial.length > 256) e.add(sub(p, 'serial'), 'must be at most 256 characters');
    }
    if (d.dedicatedIOThread === true) {
      const t = targets[0];
      const bus = t ? d[t]?.bus : undefined;
      if (bus !== undefined && bus !== 'virtio') {
        e.add(sub(p, 'dedicatedIOThread'), `IOThreads are only supported for virtio disks, not bus ${bus}`);
      }
    }
    const custom = d.blockSize?.custom;
    if (custom !== undefined) {
      const bsPath = sub(p, 'blockSize');
      const mv = d.blockSize?.matchVolume;
      if (mv !== undefined && mv.enabled !== false)
        e.add(bsPath, 'custom block sizes and matchVolume are mutually exclusive');
      else {
        const { logical, physical } = custom;
        if (logical !== undefined && physical !== undefined && logical > physical) {
          e.add(
            sub(sub(bsPath, 'custom'), 'logical'),
            `logical size ${logical} must not exceed the physical size ${physical}`,
          );
        } else {
          for (const [k, v] of [
            ['logical', logical],
            ['physical', physical],
          ] as const) {
            if (v === undefined) continue;
            if (v < 512 || v > 2097152 || (v & (v - 1)) !== 0)
              e.add(sub(sub(bsPath, 'custom'), k), `must be a power of 2 from 512 to 2097152, got ${v}`);
          }
        }
      }
    }
    const pci = d.disk?.pciAddress;
    if (pci !== undefined && !PCI_RE.test(pci))
      e.add(sub(sub(p, 'disk'), 'pciAddress'), `"${pci}" is not a PCI address (expected dddd:bb:ss.f)`);
    if (pci !== undefined && d.disk?.bus !== undefined && d.disk.bus !== 'virtio') {
      e.add(sub(sub(p, 'disk'), 'pciAddress'), 'pciAddress is only supported on the virtio bus');
    }
  });
}

export function validateVolumes(
  spec: Checked<VirtualMachineInstanceSpec>,
  base: string,
  e: Errs,
): Map<string, number> {
  const vols = spec.volumes ?? [];
  const vpath = sub(base, 'volumes');
  const names = uniqueNames(vols, vpath, e, 'volume');
  vols.forEach((v, i) => {
    const p = sub(vpath, i);
    const sources = VOLUME_SOURCES.filter((s) => v[s] !== undefined);
    if (sources.length === 0) e.add(p, `volume has no source: set one of ${VOLUME_SOURCES.join(', ')}`);
    else if (sources.length > 1)
      e.add(p, `volume has ${sources.length} sources (${sources.join(', ')}); exactly one is allowed`);
    const name = v.name;
    if (name) {
      const bad = checkDns1123Label(name);
      if (bad) e.add(sub(p, 'name'), bad);
    }
    if (v.emptyDisk !== undefined) {
      const c = qty(v.emptyDisk.capacity);
      if (c !== undefined && c <= 0)
        e.add(
          sub(sub(p, 'emptyDisk'), 'capacity'),
          `must be positive, got ${describe(v.emptyDisk.capacity)}`,
        );
    }
    const hd = v.hostDisk;
    if (hd !== undefined) {
      const hp = sub(p, 'hostDisk');
      const badPath = checkAbsolutePath(hd.path);
      if (badPath) e.add(sub(hp, 'path'), badPath);
      if (hd.type === 'DiskOrCreate' && hd.capacity === undefined)
        e.add(sub(hp, 'capacity'), 'required when type is DiskOrCreate');
      if (hd.type === 'Disk' && hd.capacity !== undefined)
        e.add(sub(hp, 'capacity'), 'only allowed when type is DiskOrCreate');
    }
    const cd = v.containerDisk;
    if (cd !== undefined) {
      if (cd.image === '') e.add(sub(sub(p, 'containerDisk'), 'image'), 'must not be empty');
      const bad = checkAbsolutePath(cd.path);
      if (bad) e.add(sub(sub(p, 'containerDisk'), 'path'), bad);
    }
    for (const [src, field, value] of [
      ['configMap', 'name', v.configMap?.name],
      ['secret', 'secretName', v.secret?.secretName],
      ['serviceAccount', 'serviceAccountName', v.serviceAccount?.serviceAccountName],
      ['dataVolume', 'name', v.dataVolume?.name],
      ['persistentVolumeClaim', 'claimName', v.persistentVolumeClaim?.claimName],
    ] as const) {
      if (v[src] !== undefined && !value) e.add(sub(sub(p, src), field), 'required: must not be empty');
    }
    for (const ci of ['cloudInitNoCloud', 'cloudInitConfigDrive'] as const) {
      const c = v[ci];
      if (c === undefined) continue;
      const cp = sub(p, ci);
      // upstream's JSON name of the user-data secret is `secretRef`
      const userSources = (['userData', 'userDataBase64', 'secretRef'] as const).filter(
        (k) => c[k] !== '' && e.given(c[k], sub(cp, k)),
      );
      const netSources = (['networkData', 'networkDataBase64', 'networkDataSecretRef'] as const).filter(
        (k) => c[k] !== '' && e.given(c[k], sub(cp, k)),
      );
      if (userSources.length === 0 && netSources.length === 0) {
        e.add(
          cp,
          'needs user data or network data: set userData, userDataBase64, secretRef, networkData, networkDataBase64 or networkDataSecretRef',
        );
      }
      if (userSources.length > 1)
        e.add(cp, `only one user data source allowed, got ${userSources.join(', ')}`);
      if (netSources.length > 1)
        e.add(cp, `only one network data source allowed, got ${netSources.join(', ')}`);
      for (const [plain, b64, what] of [
        ['userData', 'userDataBase64', 'user data'],
        ['networkData', 'networkDataBase64', 'network data'],
      ] as const) {
        const enc = c[b64];
        let len = Buffer.byteLength(c[plain] ?? '');
        if (enc !== undefined) {
          if (
            !/^[A-Za-z0-9+/]*={0,2}$/.test(enc.replace(/\s/g, '')) ||
            enc.replace(/\s/g, '').length % 4 !== 0
          )
            e.add(sub(cp, b64), 'is not valid base64');
          else len = Math.max(len, Buffer.from(enc, 'base64').length);
        }
        if (len > 2048)
          e.add(
            cp,
            `${what} is ${len} bytes, more than the 2048-byte limit: use ${plain}SecretRef for larger data`,
          );
      }
    }
  });
  for (const src of ['serviceAccount', 'downwardMetrics', 'memoryDump'] as const) {
    const n = vols.filter((v) => v[src] !== undefined).length;
    if (n > 1) e.add(vpath, `at most one ${src} volume is allowed, got ${n}`);
  }
  return names;
}
