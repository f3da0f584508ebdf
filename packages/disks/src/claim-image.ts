// disk.img on a filesystem-mode PersistentVolumeClaim (a persistentVolumeClaim or dataVolume volume): created as a
// sparse raw file when the claim holds none, sized from the claim as virt-controller reported it in
// status.volumeStatus[].persistentVolumeClaimInfo; an existing one is used as it is. The rule follows upstream's
// host-disk package (the claim's request when smaller than its capacity, else its capacity, aligned down to 1 MiB;
// the free space of the volume, less a reserve, may fall short by lessPVCSpaceToleration percent): see README.
import { statfs } from 'node:fs/promises';
import { parseQuantity } from '@kubevirt-ts/api';

/** upstream's default `developerConfiguration.lessPVCSpaceToleration` (percent) */
export const DEFAULT_LESS_PVC_SPACE_TOLERATION = 10;
/** upstream's default `developerConfiguration.minimumReservePVCBytes` (bytes left free on the volume) */
export const DEFAULT_MINIMUM_RESERVE_PVC_BYTES = 131072;

const MIB = 1024 * 1024;

/** What the claim image rule reads of `status.volumeStatus[].persistentVolumeClaimInfo`. */
export interface ClaimSizeInfo {
  capacity?: Record<string, string | number>;
  requests?: Record<string, string | number>;
}

/** The size rule's options (the KubeVirt CR's `developerConfiguration` fields of the same names). */
export interface ClaimImageOptions {
  /** percent by which the volume's free space may fall short of the image size (0..100, default 10) */
  lessPVCSpaceToleration?: number;
  /** bytes of the volume left free (default 131072) */
  minimumReservePVCBytes?: number;
}

/** A bad claim or a volume too small: `field` names where (e.g. `status.volumeStatus[1].persistentVolumeClaimInfo`). */
export class ClaimImageError extends Error {
  constructor(
    readonly field: string,
    readonly reason: string,
  ) {
    super(`${field}: ${reason}`);
    this.name = 'ClaimImageError';
  }
}

function bytesOf(q: string | number, field: string): number {
  let n: number;
  try {
    n = parseQuantity(q);
  } catch (e) {
    throw new ClaimImageError(field, `invalid quantity ${JSON.stringify(q)}: ${(e as Error).message}`);
  }
  if (!Number.isFinite(n) || n < 0)
    throw new ClaimImageError(field, `invalid quantity ${JSON.stringify(q)}: not a size`);
  return Math.floor(n);
}

/**
 * The size disk.img is created with on claim `volume`: the claim's storage request when it is smaller than its
 * capacity (or the capacity is not known yet: a claim bound on first use), else its capacity; aligned down to 1 MiB.
 * `field` is the claim info's path. Throws when neither is given or the size is under 1 MiB.
 */
export function claimImageSize(volume: string, info: ClaimSizeInfo | undefined, field: string): number {
  const capacity = info?.capacity?.storage;
  const requests = info?.requests?.storage;
  if (capacity === undefined && requests === undefined)
    throw new ClaimImageError(
      field,
      `volume ${JSON.stringify(volume)}: the claim gives neither a storage capacity nor a storage request: the size of its disk.img is unknown`,
    );
  const cap = capacity !== undefined ? bytesOf(capacity, `${field}.capacity.storage`) : undefined;
  const req = requests !== undefined ? bytesOf(requests, `${field}.requests.storage`) : undefined;
  const size = req !== undefined && (cap === undefined || cap > req) ? req : cap!;
  const aligned = size - (size % MIB);
  if (aligned === 0)
    throw new ClaimImageError(
      field,
      `volume ${JSON.stringify(volume)}: the claim's size (${size} bytes) is under 1 MiB, too small for a disk`,
    );
  return aligned;
}

/**
 * Fits `size` into the `available` bytes of the volume: `size` when it fits; when it does not but
 * size * (100 - toleration) / 100 does, the available space aligned down to 1 MiB (`tolerated`); else throws.
 */
export function fitClaimImage(
  volume: string,
  size: number,
  available: number,
  toleration: number,
  field: string,
): { size: number; tolerated: boolean } {
  if (size <= available) return { size, tolerated: false };
  const tolerated = Math.floor((size * (100 - toleration)) / 100);
  const usable = available - (available % MIB);
  if (tolerated > available || usable === 0)
    throw new ClaimImageError(
      field,
      `volume ${JSON.stringify(volume)}: not enough space for disk.img: ${size} bytes needed, ${available} bytes available on the volume, also with lessPVCSpaceToleration ${toleration}%`,
    );
  return { size: usable, tolerated: true };
}

/** Free bytes of the filesystem holding `dir` for an unprivileged user, less `reserve` (0 at least). */
export async function bytesAvailable(dir: string, reserve: number): Promise<number> {
  const s = await statfs(dir, { bigint: true });
  const free = s.bavail * s.bsize - BigInt(reserve);
  return free > 0n ? Number(free) : 0;
}

/** Checks the rule's options: integers, toleration 0..100. */
export function resolveClaimImageOptions(o: ClaimImageOptions = {}): Required<ClaimImageOptions> {
  const toleration = o.lessPVCSpaceToleration ?? DEFAULT_LESS_PVC_SPACE_TOLERATION;
  const reserve = o.minimumReservePVCBytes ?? DEFAULT_MINIMUM_RESERVE_PVC_BYTES;
  if (!Number.isInteger(toleration) || toleration < 0 || toleration > 100)
    throw new ClaimImageError(
      'lessPVCSpaceToleration',
      `must be an integer percentage from 0 to 100, got ${JSON.stringify(toleration)}`,
    );
  if (!Number.isInteger(reserve) || reserve < 0)
    throw new ClaimImageError(
      'minimumReservePVCBytes',
      `must be a non-negative integer, got ${JSON.stringify(reserve)}`,
    );
  return { lessPVCSpaceToleration: toleration, minimumReservePVCBytes: reserve };
}
