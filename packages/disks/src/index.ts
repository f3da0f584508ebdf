// Disk preparation before the domain is defined: qcow2 overlays over container disks, empty disks,
// disk.img on filesystem claims (claim-image.ts), hostDisk DiskOrCreate, cloud-init NoCloud / ConfigDrive
// ISOs, configMap / secret / serviceAccount / downwardAPI ISOs from mounted dirs, kernel boot files.
// Self-contained (no launcher state): it only needs a VMI, the converter's Pod layout (its paths and their
// name checks) and qemu-img + genisoimage/xorriso.
import { chown, copyFile, mkdir, open, readFile, readdir, rm, stat, symlink } from 'node:fs/promises';
import path from 'node:path';
import { parseQuantity, yaml, type VirtualMachineInstance } from '@kubevirt-ts/api';
import { run, which } from './exec.js';
import { makeIsoFromDir, makeIsoFromFiles } from './iso.js';
import { isBlockDevice } from './block.js';
import {
  ClaimImageError,
  bytesAvailable,
  claimImageSize,
  fitClaimImage,
  resolveClaimImageOptions,
  type ClaimImageOptions,
} from './claim-image.js';
import type { ConfigSourceKind, PodLayout } from '@kubevirt-ts/converter';

export { makeIsoFromDir, makeIsoFromFiles } from './iso.js';
export { blockVolumesInPod, isBlockDevice, type BlockVolumes } from './block.js';
export { run, which } from './exec.js';
export {
  ClaimImageError,
  DEFAULT_LESS_PVC_SPACE_TOLERATION,
  DEFAULT_MINIMUM_RESERVE_PVC_BYTES,
  bytesAvailable,
  claimImageSize,
  fitClaimImage,
  resolveClaimImageOptions,
  type ClaimImageOptions,
  type ClaimSizeInfo,
} from './claim-image.js';

export interface PrepareOptions {
  /** chown created files and dirs to this uid:gid (the user libvirtd/QEMU runs as) */
  owner?: { uid: number; gid: number };
  /** called once per prepared item */
  onStep?: (msg: string, fields: Record<string, unknown>) => void;
  /**
   * how disk.img on a filesystem claim is sized when the volume has less room than the claim says (the KubeVirt
   * CR's developerConfiguration fields; upstream's defaults: 10 %, 131072 bytes)
   */
  claimImage?: ClaimImageOptions;
}

export interface PreparedVolume {
  volume: string;
  kind: string;
  path: string;
  action: 'created' | 'exists';
  /** a created claim disk.img: its size in bytes */
  size?: number;
  /** a created claim disk.img is smaller than the claim, within lessPVCSpaceToleration */
  tolerated?: boolean;
  /** containerDisk: what qemu-img found in the image (its format reaches the converter as disksInfo) */
  image?: ImageInfo;
}

/** What `qemu-img info` says about an image file. */
export interface ImageInfo {
  format: string;
  /** virtual size in bytes */
  virtualSize: number;
  /** the image's backing file, when it has one (a qcow2 chain) */
  backingFile?: string;
}

/** Thrown with the field path of the volume that could not be prepared. */
export class PrepareError extends Error {
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {
    super(`${path}: ${reason}`);
    this.name = 'PrepareError';
  }
}

async function exists(p: string): Promise<boolean> {
  try {
    await stat(p);
    return true;
  } catch {
    return false;
  }
}

/** A disk capacity (k8s quantity) in whole bytes; errors name the field. */
export function quantityToBytes(q: unknown, field: string): number {
  try {
    return Math.ceil(parseQuantity(q as string | number));
  } catch (e) {
    throw new PrepareError(field, `invalid quantity ${JSON.stringify(q)}: ${(e as Error).message}`);
  }
}

function qemuImg(): string {
  const p = which('qemu-img');
  if (!p) throw new Error('qemu-img is not installed (Debian package qemu-utils)');
  return p;
}

/**
 * What qemu-img sees in an image file: format, virtual size, backing file. Only this file is opened
 * (`--backing-chain` is not used), so a backing file named inside it is never read.
 */
export async function imageInfo(file: string): Promise<ImageInfo> {
  const { stdout } = await run(qemuImg(), ['info', '--output=json', file]);
  const j = JSON.parse(stdout) as {
    format?: string;
    'virtual-size'?: number;
    'backing-filename'?: string;
    'full-backing-filename'?: string;
  };
  if (!j.format) throw new Error(`qemu-img info ${file}: no format`);
  const backingFile = j['full-backing-filename'] ?? j['backing-filename'];
  return { format: j.format, virtualSize: j['virtual-size'] ?? 0, ...(backingFile ? { backingFile } : {}) };
}

/** The format of an image file as qemu-img sees it (raw, qcow2, ...). */
export async function imageFormat(file: string): Promise<string> {
  return (await imageInfo(file)).format;
}

/**
 * Checks a containerDisk image the way upstream does before using it: raw or qcow2, and no backing
 * file (a qcow2 chain would let the image name any file QEMU can read). Returns the facts found.
 */
export async function checkContainerDiskImage(file: string, field: string): Promise<ImageInfo> {
  const info = await imageInfo(file).catch((e: Error) => {
    throw new PrepareError(field, e.message);
  });
  if (info.format !== 'raw' && info.format !== 'qcow2')
    throw new PrepareError(field, `image format ${info.format} is not supported (raw or qcow2 only)`);
  if (info.backingFile !== undefined)
    throw new PrepareError(
      field,
      `image has a backing file (${JSON.stringify(info.backingFile)}): container disk images with a backing file are refused; flatten it with qemu-img convert`,
    );
  return info;
}

/** The converter's disksInfo (format, virtual size by volume name) from what preparation found. */
export function disksInfoOf(
  prepared: PreparedVolume[],
): Record<string, { format: 'raw' | 'qcow2'; virtualSize?: number }> {
  const out: Record<string, { format: 'raw' | 'qcow2'; virtualSize?: number }> = {};
  for (const p of prepared) {
    const f = p.image?.format;
    if (f !== 'raw' && f !== 'qcow2') continue;
    out[p.volume] = { format: f, ...(p.image!.virtualSize > 0 ? { virtualSize: p.image!.virtualSize } : {}) };
  }
  return out;
}

async function chownTree(p: string, stopAt: string, owner: PrepareOptions['owner']): Promise<void> {
  if (!owner || process.getuid?.() !== 0) return;
  // the file and each dir between it and stopAt
  let cur = p;
  while (cur.startsWith(stopAt) && cur !== stopAt && cur !== path.dirname(cur)) {
    await chown(cur, owner.uid, owner.gid).catch(() => undefined);
    cur = path.dirname(cur);
  }
}

/** Reads the files of a mounted dir (cloud-init secretRef): first of the names that exists. */
async function readFirst(dir: string, names: string[]): Promise<string | undefined> {
  for (const n of names) {
    try {
      return await readFile(path.join(dir, n), 'utf8');
    } catch {
      /* next */
    }
  }
  return undefined;
}

interface CloudInitSource {
  userData?: string;
  userDataBase64?: string;
  userDataSecretRef?: { name?: string };
  networkData?: string;
  networkDataBase64?: string;
  networkDataSecretRef?: { name?: string };
}

async function cloudInitData(
  src: CloudInitSource,
  field: string,
  secretDir: string,
): Promise<{ userData: string; networkData?: string }> {
  let userData: string | undefined;
  if (src.userData !== undefined) userData = src.userData;
  else if (src.userDataBase64 !== undefined)
    userData = Buffer.from(src.userDataBase64, 'base64').toString('utf8');
  else if (src.userDataSecretRef) {
    userData = await readFirst(secretDir, ['userdata', 'userData']);
    if (userData === undefined)
      throw new PrepareError(
        `${field}.userDataSecretRef`,
        `secret not mounted at ${secretDir} (expected a userdata or userData file)`,
      );
  }
  let networkData: string | undefined;
  if (src.networkData !== undefined) networkData = src.networkData;
  else if (src.networkDataBase64 !== undefined)
    networkData = Buffer.from(src.networkDataBase64, 'base64').toString('utf8');
  else if (src.networkDataSecretRef) {
    networkData = await readFirst(secretDir, ['networkdata', 'networkData']);
    if (networkData === undefined)
      throw new PrepareError(
        `${field}.networkDataSecretRef`,
        `secret not mounted at ${secretDir} (expected a networkdata or networkData file)`,
      );
  }
  return { userData: userData ?? '', networkData };
}

/**
 * Refuses, naming the field, a name the layout cannot use as a file name ('', '.', '..', '/' or NUL
 * in it): checked before anything is created, so nothing is half-done and no path leaves its dir.
 */
function checkNames(
  paths: PodLayout,
  volumes: readonly { name: string }[],
  cloudInit?: { name: string; namespace: string },
): void {
  const check = (field: string, f: () => unknown) => {
    try {
      f();
    } catch (e) {
      throw new PrepareError(field, (e as Error).message);
    }
  };
  volumes.forEach((v, i) => check(`spec.volumes[${i}].name`, () => paths.emptyDiskImage(v.name)));
  if (cloudInit) {
    check('metadata.namespace', () => paths.cloudInitIso('noCloud', cloudInit.namespace, 'x'));
    check('metadata.name', () => paths.cloudInitIso('noCloud', 'x', cloudInit.name));
  }
}

/**
 * Prepares every volume of the VMI that needs a file before the domain starts. Idempotent: existing overlays,
 * empty disks and host disks are kept (a restarted launcher keeps the guest's writes); ISOs are rebuilt.
 */
export async function prepareVolumes(
  vmi: Pick<VirtualMachineInstance, 'metadata' | 'spec'> & { status?: VirtualMachineInstance['status'] },
  paths: PodLayout,
  opts: PrepareOptions = {},
): Promise<PreparedVolume[]> {
  const claimOpts = resolveClaimImageOptions(opts.claimImage);
  const name = vmi.metadata?.name ?? '';
  const namespace = vmi.metadata?.namespace ?? 'default';
  const uid = vmi.metadata?.uid ?? '';
  const volumes = vmi.spec.volumes ?? [];
  checkNames(
    paths,
    volumes,
    vmi.spec.volumes?.some((v) => v.cloudInitNoCloud || v.cloudInitConfigDrive)
      ? { name, namespace }
      : undefined,
  );
  const out: PreparedVolume[] = [];
  const done = async (r: PreparedVolume, root?: string) => {
    out.push(r);
    await chownTree(r.path, root ?? path.dirname(path.dirname(r.path)), opts.owner);
    const detail =
      r.size === undefined
        ? ''
        : ` (${r.size} bytes${r.tolerated ? `: the volume has less room than the claim, within lessPVCSpaceToleration ${claimOpts.lessPVCSpaceToleration}%` : ''})`;
    opts.onStep?.(`volume ${r.volume}: ${r.kind} ${r.action}${detail}`, {
      volume: r.volume,
      kind: r.kind,
      path: r.path,
      ...(r.size !== undefined ? { size: r.size } : {}),
      ...(r.tolerated ? { reason: 'ToleratedSmallPV' } : {}),
    });
  };
  for (let i = 0; i < volumes.length; i++) {
    const vol = volumes[i]!;
    const field = `spec.volumes[${i}]`;
    if (vol.containerDisk) {
      const base = paths.containerDiskImage(i);
      if (!(await exists(base))) {
        throw new PrepareError(
          `${field}.containerDisk`,
          `container disk image for volume ${JSON.stringify(vol.name)} not found at ${base}`,
        );
      }
      // checked on every start, also when the overlay exists (a restarted launcher)
      const image = await checkContainerDiskImage(base, `${field}.containerDisk`);
      const overlay = paths.ephemeralOverlay(vol.name);
      if (await exists(overlay)) {
        await done({
          volume: vol.name,
          kind: 'containerDisk overlay',
          path: overlay,
          action: 'exists',
          image,
        });
        continue;
      }
      await mkdir(path.dirname(overlay), { recursive: true });
      await run(qemuImg(), ['create', '-f', 'qcow2', '-b', base, '-F', image.format, overlay]).catch(
        (e: Error) => {
          throw new PrepareError(`${field}.containerDisk`, e.message);
        },
      );
      await done({
        volume: vol.name,
        kind: 'containerDisk overlay',
        path: overlay,
        action: 'created',
        image,
      });
    } else if (vol.emptyDisk) {
      const cap = quantityToBytes(vol.emptyDisk.capacity, `${field}.emptyDisk.capacity`);
      const file = paths.emptyDiskImage(vol.name);
      if (await exists(file)) {
        await done({ volume: vol.name, kind: 'emptyDisk', path: file, action: 'exists' });
        continue;
      }
      await mkdir(path.dirname(file), { recursive: true });
      await run(qemuImg(), ['create', '-f', 'qcow2', file, String(cap)]).catch((e: Error) => {
        throw new PrepareError(`${field}.emptyDisk`, e.message);
      });
      await done({ volume: vol.name, kind: 'emptyDisk', path: file, action: 'created' });
    } else if (vol.hostDisk) {
      const hd = vol.hostDisk;
      if (!hd.path || !path.isAbsolute(hd.path))
        throw new PrepareError(`${field}.hostDisk.path`, 'must be an absolute path');
      // the host dir is mounted into the Pod; the image is seen under the private dir
      const file = paths.hostDiskImage(vol.name, hd.path);
      if (await exists(file)) {
        await done({ volume: vol.name, kind: 'hostDisk', path: file, action: 'exists' }, file);
        continue;
      }
      if (hd.type !== 'DiskOrCreate') {
        throw new PrepareError(
          `${field}.hostDisk.path`,
          `${hd.path} does not exist (type ${hd.type ?? 'Disk'} does not create it)`,
        );
      }
      const cap = quantityToBytes(hd.capacity, `${field}.hostDisk.capacity`);
      await mkdir(path.dirname(file), { recursive: true });
      // sparse raw file, like upstream's hostdisk creation
      const fh = await open(file, 'wx');
      try {
        await fh.truncate(cap);
      } finally {
        await fh.close();
      }
      await done({ volume: vol.name, kind: 'hostDisk', path: file, action: 'created' }, file);
    } else if (vol.cloudInitNoCloud) {
      const data = await cloudInitData(
        vol.cloudInitNoCloud,
        `${field}.cloudInitNoCloud`,
        paths.configSourceDir('secret', vol.name),
      );
      const iso = paths.cloudInitIso('noCloud', namespace, name);
      const files: Record<string, string> = {
        'user-data': data.userData,
        // yaml (about 45 modules) is loaded on first use (api's yaml()): the launcher loads this package on its
        // start path and most VMIs have no NoCloud disk
        'meta-data': yaml().stringify({
          'instance-id': `${name}.${namespace}`,
          'local-hostname': name,
        }),
      };
      if (data.networkData !== undefined) files['network-config'] = data.networkData;
      await makeIsoFromFiles(iso, 'cidata', files).catch((e: Error) => {
        throw new PrepareError(`${field}.cloudInitNoCloud`, e.message);
      });
      await done({ volume: vol.name, kind: 'cloudInitNoCloud ISO', path: iso, action: 'created' });
    } else if (vol.cloudInitConfigDrive) {
      const data = await cloudInitData(
        vol.cloudInitConfigDrive,
        `${field}.cloudInitConfigDrive`,
        paths.configSourceDir('secret', vol.name),
      );
      const iso = paths.cloudInitIso('configDrive', namespace, name);
      const meta = {
        instance_type: '',
        uuid: uid || `${name}.${namespace}`,
        hostname: name,
        devices: [] as unknown[],
        public_keys: {},
      };
      const files: Record<string, string> = {
        'openstack/latest/meta_data.json': JSON.stringify(meta),
        'openstack/latest/user_data': data.userData,
      };
      if (data.networkData !== undefined) files['openstack/latest/network_data.json'] = data.networkData;
      await makeIsoFromFiles(iso, 'config-2', files).catch((e: Error) => {
        throw new PrepareError(`${field}.cloudInitConfigDrive`, e.message);
      });
      await done({ volume: vol.name, kind: 'cloudInitConfigDrive ISO', path: iso, action: 'created' });
    } else if (vol.configMap || vol.secret || vol.serviceAccount || vol.downwardAPI) {
      const kind: Exclude<ConfigSourceKind, 'sysprep'> = vol.configMap
        ? 'configMap'
        : vol.secret
          ? 'secret'
          : vol.serviceAccount
            ? 'serviceAccount'
            : 'downwardAPI';
      const src = paths.configSourceDir(kind, vol.name);
      const iso = paths.configIso(kind, vol.name);
      try {
        await readdir(src);
      } catch {
        throw new PrepareError(
          `${field}.${kind}`,
          `${kind} volume ${JSON.stringify(vol.name)} is not mounted at ${src}`,
        );
      }
      // upstream labels these config disks "cfgdata"
      await makeIsoFromDir(iso, 'cfgdata', src).catch((e: Error) => {
        throw new PrepareError(`${field}.${kind}`, e.message);
      });
      await done({ volume: vol.name, kind: `${kind} ISO`, path: iso, action: 'created' });
    } else if (vol.persistentVolumeClaim || vol.dataVolume) {
      const r = await prepareClaimImage(vmi, i, paths, claimOpts);
      // a created image is chowned (the file only: the claim's dir is the volume's), an existing one is left as it is
      if (r) await done(r, r.action === 'created' ? path.dirname(r.path) : r.path);
    }
    // ephemeral: the claim's disk.img is the backing file of an overlay (libvirt's): used as it is, never created
  }
  const kb = vmi.spec.domain.firmware?.kernelBoot?.container;
  if (kb) {
    const field = 'spec.domain.firmware.kernelBoot.container';
    for (const key of ['kernelPath', 'initrdPath'] as const) {
      const p = kb[key];
      if (!p) continue;
      const file = paths.kernelBootFile(p);
      if (!(await exists(file)))
        throw new PrepareError(`${field}.${key}`, `kernel boot file ${p} not found at ${file}`);
      await done({ volume: 'kernel-boot', kind: key, path: file, action: 'exists' });
    }
  }
  return out;
}

/**
 * disk.img on the filesystem claim of `spec.volumes[i]` (persistentVolumeClaim or dataVolume): kept when it exists;
 * else created as a sparse raw file sized by the claim info virt-controller put in status.volumeStatus (see
 * claim-image.ts). Skipped (undefined): hotplugged volumes (in the hotplug dir, not here), virtiofs filesystems (the
 * guest sees the directory) and Block claims (a device, no file).
 */
async function prepareClaimImage(
  vmi: Pick<VirtualMachineInstance, 'spec'> & { status?: VirtualMachineInstance['status'] },
  i: number,
  paths: PodLayout,
  o: Required<ClaimImageOptions>,
): Promise<PreparedVolume | undefined> {
  const vol = vmi.spec.volumes![i]!;
  const src = vol.persistentVolumeClaim ? 'persistentVolumeClaim' : 'dataVolume';
  const field = `spec.volumes[${i}].${src}`;
  const claimName = vol.persistentVolumeClaim?.claimName ?? vol.dataVolume!.name;
  if (vol.persistentVolumeClaim?.hotpluggable || vol.dataVolume?.hotpluggable) return undefined;
  if ((vmi.spec.domain.devices?.filesystems ?? []).some((f) => f.name === vol.name)) return undefined;
  const statuses = vmi.status?.volumeStatus ?? [];
  const si = statuses.findIndex((s) => s.name === vol.name);
  const info = si >= 0 ? statuses[si]!.persistentVolumeClaimInfo : undefined;
  // a Block claim is a device in the Pod, not a directory (also when virt-controller has not reported it yet)
  if (info?.volumeMode === 'Block' || isBlockDevice(paths.blockVolumeDevice(vol.name))) return undefined;
  const kind = `${src} disk.img`;
  const file = paths.filesystemVolumeImage(vol.name);
  const dir = path.dirname(file);
  try {
    if ((await stat(file)).isFile()) return { volume: vol.name, kind, path: file, action: 'exists' };
    throw new PrepareError(field, `${file} on claim ${claimName} is not a regular file`);
  } catch (e) {
    if (e instanceof PrepareError) throw e;
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT')
      throw new PrepareError(field, `${file}: ${(e as Error).message}`);
  }
  try {
    if (!(await stat(dir)).isDirectory()) throw new Error('not a directory');
  } catch {
    throw new PrepareError(
      field,
      `claim ${claimName} of volume ${JSON.stringify(vol.name)} is not mounted at ${dir}`,
    );
  }
  if (vol.persistentVolumeClaim?.readOnly)
    throw new PrepareError(
      `${field}.readOnly`,
      `claim ${claimName} is mounted read-only and holds no disk.img: a read-only claim must already hold the image`,
    );
  const infoField = si >= 0 ? `status.volumeStatus[${si}].persistentVolumeClaimInfo` : 'status.volumeStatus';
  let size: number;
  let tolerated: boolean;
  try {
    if (!info)
      throw new ClaimImageError(
        infoField,
        `volume ${JSON.stringify(vol.name)}: no persistentVolumeClaimInfo for it (virt-controller reports the claim there): the size of its disk.img is unknown`,
      );
    const wanted = claimImageSize(vol.name, info, infoField);
    const available = await bytesAvailable(dir, o.minimumReservePVCBytes);
    ({ size, tolerated } = fitClaimImage(vol.name, wanted, available, o.lessPVCSpaceToleration, field));
  } catch (e) {
    if (e instanceof ClaimImageError) throw new PrepareError(e.field, e.reason);
    throw new PrepareError(field, (e as Error).message);
  }
  // sparse raw file, created only when absent ('wx')
  try {
    const fh = await open(file, 'wx', 0o660);
    try {
      await fh.truncate(size);
    } finally {
      await fh.close();
    }
  } catch (e) {
    throw new PrepareError(field, `creating ${file}: ${(e as Error).message}`);
  }
  return { volume: vol.name, kind, path: file, action: 'created', size, ...(tolerated ? { tolerated } : {}) };
}

/** An image reference mapped to a local file or folder (standalone mode's --image REF=PATH). */
export type ImageMap = Map<string, string>;

/** Finds the disk image inside a container-disk folder the way upstream does: /disk/* (first file), else the file itself. */
async function containerDiskFile(local: string): Promise<string> {
  const st = await stat(local);
  if (st.isFile()) return local;
  for (const dir of [path.join(local, 'disk'), local]) {
    try {
      const files = (await readdir(dir, { withFileTypes: true }))
        .filter((e) => e.isFile())
        .map((e) => e.name)
        .sort();
      if (files.length > 0) return path.join(dir, files[0]!);
    } catch {
      /* next */
    }
  }
  throw new Error(`no disk image file in ${local} (expected a file, or a folder with disk/<image>)`);
}

/**
 * Standalone mode: does what kubelet and the container-disk containers do in a Pod. Each containerDisk and
 * kernelBoot image reference must be mapped with --image REF=PATH; container disks are linked as
 * disk_N.img (QEMU only reads them through the overlay), kernel boot files are copied so that an
 * unprivileged libvirtd can read them.
 */
export async function stageLocalImages(
  vmi: Pick<VirtualMachineInstance, 'metadata' | 'spec'>,
  images: ImageMap,
  paths: PodLayout,
  opts: PrepareOptions = {},
): Promise<Record<string, ImageInfo>> {
  const found: Record<string, ImageInfo> = {};
  const volumes = vmi.spec.volumes ?? [];
  checkNames(paths, volumes);
  const missing: string[] = [];
  const lookup = (ref: string | undefined, field: string): string | undefined => {
    if (!ref) {
      missing.push(`${field}: no image reference`);
      return undefined;
    }
    const local = images.get(ref);
    if (!local)
      missing.push(`${field}: image ${JSON.stringify(ref)} is not mapped (add --image ${ref}=PATH)`);
    return local;
  };
  for (let i = 0; i < volumes.length; i++) {
    const vol = volumes[i]!;
    if (vol.hostDisk) {
      // kubelet would mount the host dir into the Pod; link it instead
      const hd = vol.hostDisk;
      if (!hd.path || !path.isAbsolute(hd.path))
        throw new PrepareError(`spec.volumes[${i}].hostDisk.path`, 'must be an absolute path');
      const podDir = path.dirname(paths.hostDiskImage(vol.name, hd.path));
      if (hd.type === 'DiskOrCreate') await mkdir(path.dirname(hd.path), { recursive: true });
      await mkdir(path.dirname(podDir), { recursive: true });
      await rm(podDir, { force: true, recursive: false }).catch(() => undefined);
      await symlink(path.dirname(hd.path), podDir);
      continue;
    }
    if (!vol.containerDisk) continue;
    const field = `spec.volumes[${i}].containerDisk.image`;
    const local = lookup(vol.containerDisk.image, field);
    if (!local) continue;
    let file: string;
    try {
      file = await containerDiskFile(local);
    } catch (e) {
      throw new PrepareError(field, (e as Error).message);
    }
    // what virt-handler checks before it starts a Pod: refused here before any daemon starts
    found[vol.name] = await checkContainerDiskImage(file, field);
    const base = paths.containerDiskImage(i);
    await mkdir(path.dirname(base), { recursive: true });
    await rm(base, { force: true });
    await symlink(file, base);
    opts.onStep?.(`image ${field} -> ${file}`, { volume: vol.name, path: file });
  }
  const kb = vmi.spec.domain.firmware?.kernelBoot?.container;
  if (kb) {
    const field = 'spec.domain.firmware.kernelBoot.container';
    const local = lookup(kb.image, `${field}.image`);
    if (local) {
      const dir = path.dirname(paths.kernelBootFile('x'));
      await mkdir(dir, { recursive: true });
      for (const key of ['kernelPath', 'initrdPath'] as const) {
        const p = kb[key];
        if (!p) continue;
        const src = path.join(local, p);
        const dst = paths.kernelBootFile(p);
        try {
          await copyFile(src, dst);
        } catch (e) {
          throw new PrepareError(
            `${field}.${key}`,
            `cannot read ${p} from image ${kb.image} (${src}): ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
          );
        }
        await chownTree(dst, path.dirname(dir), opts.owner);
        opts.onStep?.(`image ${field}.${key} -> ${src}`, { path: src });
      }
    }
  }
  if (missing.length > 0)
    throw new PrepareError(
      missing[0]!.split(':')[0]!,
      missing.map((m) => m.slice(m.indexOf(':') + 2)).join('; '),
    );
  return found;
}
