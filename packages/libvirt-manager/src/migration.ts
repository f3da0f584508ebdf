// Migration options (MigrationRequest.options), where a migration goes, the state of an outgoing
// migration, the libvirt call that starts it and the monitor that aborts it when it stalls.

import { readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { parseQuantity, type VirtualMachineInstance } from '@kubevirt-ts/api';
import { parseDomainXml, type Disk } from '@kubevirt-ts/converter';
import { Vir, type LibvirtDomain, type MigrateParams } from './libvirt.js';

/** The keys of upstream's MigrationOptions JSON (UpstreamMigrationOptions in @kubevirt-ts/cmd-protocol). */
export const UPSTREAM_MIGRATION_OPTION_FIELDS = [
  'Bandwidth',
  'ProgressTimeout',
  'CompletionTimeoutPerGiB',
  'UnsafeMigration',
  'AllowAutoConverge',
  'AllowPostCopy',
  'ParallelMigrationThreads',
] as const;

/**
 * Where a migration goes. Upstream has no such field in MigrationOptions: the launcher derives it
 * from its share dir and the VMI's uid (the handler's migration proxy sockets, see
 * upstreamMigrationTarget); DomainManagerOptions.migrationTarget does that here. In-process callers
 * (tests, tools) may pass one to migrateVMI directly.
 * - targetURI: libvirt URI of the target's libvirtd; the source libvirtd connects to it itself
 *   (peer-to-peer), e.g. `qemu+unix:///session?socket=/path/sock` or `qemu+tcp://host/session`.
 * - migrationURI: where the source QEMU sends the migration stream, e.g. `unix:///path/sock` or
 *   `tcp://127.0.0.1:49152` (default: chosen by the target libvirtd).
 * - listenAddress: address the target QEMU binds (tcp only).
 * - disksURI: block migration only: where the source QEMU copies the disks (libvirt's disks_uri; the target
 *   QEMU's NBD server listens there), e.g. `unix:///path/sock` (the same path on both sides) or
 *   `tcp://host:port` (default: the target libvirtd's choice).
 * - destinationXML: the domain XML to use on the target (default: the source's migratable XML),
 *   or a function of the source's migratable XML.
 */
export interface MigrationTarget {
  targetURI: string;
  migrationURI?: string;
  disksURI?: string;
  listenAddress?: string;
  destinationXML?: string | ((sourceXml: string) => string);
}

/** Parsed options and target: what migrateVMI works with. */
export interface MigrationOptions extends MigrationTarget {
  /** MiB/s (from Bandwidth) */
  bandwidthMiB?: number;
  /** seconds per GiB of guest memory (CompletionTimeoutPerGiB) */
  completionTimeoutPerGiB?: number;
  /** abort when the remaining data has not shrunk for this long (ProgressTimeout) */
  progressTimeoutMs?: number;
  unsafe?: boolean;
  allowAutoConverge?: boolean;
  allowPostCopy?: boolean;
  parallelMigrationThreads?: number;
  /**
   * copy the node-local disks (VIR_MIGRATE_NON_SHARED_INC): the VMI's status.migrationMethod is BlockMigration
   * (upstream's IsBlockMigration, see isBlockMigration); set by migrateVMI from the VMI, not from MigrationOptions
   */
  blockMigration?: boolean;
}

export interface MigrationState {
  uid?: string;
  targetURI: string;
  migrationURI?: string;
  startTimestamp: string;
  endTimestamp?: string;
  completed: boolean;
  failed: boolean;
  failureReason?: string;
  abortStatus?: 'Aborting' | 'Succeeded' | 'Failed';
  /** upstream's MigrationMode: `Paused` when the guest is paused for the whole migration (see pauseForMigration) */
  mode: 'PreCopy' | 'PostCopy' | 'Paused';
}

function fail(path: string, reason: string): never {
  throw new Error(`${path}: ${reason}`);
}

function optInteger(o: Record<string, unknown>, key: string): number | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0)
    fail(`options.${key}`, 'must be a non-negative integer');
  return v;
}

function optBool(o: Record<string, unknown>, key: string): boolean | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') fail(`options.${key}`, 'must be a boolean');
  return v;
}

/**
 * Validates MigrationRequest.options: upstream's MigrationOptions JSON (UpstreamMigrationOptions).
 * Missing fields take Go's zero values; a field upstream does not have is refused by name (our old
 * `targetURI` included: the target comes from the launcher, as upstream). Errors name the field
 * (`options.Bandwidth: ...`).
 */
export function parseMigrationOptions(raw: unknown): Omit<MigrationOptions, keyof MigrationTarget> {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== 'object' || Array.isArray(raw))
    fail('options', 'must be an object (upstream MigrationOptions)');
  const o = raw as Record<string, unknown>;
  const known: readonly string[] = UPSTREAM_MIGRATION_OPTION_FIELDS;
  for (const key of Object.keys(o)) {
    if (!known.includes(key)) {
      fail(`options.${key}`, `not a field of upstream's MigrationOptions (${known.join(', ')})`);
    }
  }
  const bw = o.Bandwidth;
  let bandwidthMiB: number | undefined;
  if (bw !== undefined && bw !== null) {
    if (typeof bw !== 'string')
      fail('options.Bandwidth', 'must be a quantity string like "64Mi" (resource.Quantity)');
    bandwidthMiB = bandwidthFromQuantity(bw);
  }
  const perGiB = optInteger(o, 'CompletionTimeoutPerGiB');
  const progress = optInteger(o, 'ProgressTimeout');
  const parallel = optInteger(o, 'ParallelMigrationThreads');
  return {
    bandwidthMiB: bandwidthMiB || undefined,
    completionTimeoutPerGiB: perGiB || undefined,
    progressTimeoutMs: progress ? progress * 1000 : undefined,
    unsafe: optBool(o, 'UnsafeMigration'),
    allowAutoConverge: optBool(o, 'AllowAutoConverge'),
    allowPostCopy: optBool(o, 'AllowPostCopy'),
    parallelMigrationThreads: parallel || undefined,
  };
}

/** Checks a migration target (from the launcher or an in-process caller). */
export function checkMigrationTarget(t: MigrationTarget | undefined): MigrationTarget {
  if (!t || typeof t.targetURI !== 'string' || t.targetURI === '') {
    fail(
      'target.targetURI',
      'required: libvirt URI of the target libvirtd (DomainManagerOptions.migrationTarget)',
    );
  }
  if (t.migrationURI !== undefined && !/^[a-z][a-z0-9+.-]*:\/\//i.test(t.migrationURI)) {
    fail('target.migrationURI', `"${t.migrationURI}" is not a URI like unix:///path or tcp://host:port`);
  }
  if (t.disksURI !== undefined && !/^(unix:\/\/\/|tcp:\/\/)./i.test(t.disksURI)) {
    fail('target.disksURI', `"${t.disksURI}" is not a URI like unix:///path or tcp://host:port`);
  }
  return t;
}

function bandwidthFromQuantity(q: string): number {
  let bytes: number;
  try {
    bytes = parseQuantity(q);
  } catch (err) {
    fail('options.Bandwidth', `"${q}" is not a quantity like 64Mi (${(err as Error).message})`);
  }
  // bytes per second -> MiB/s, at least 1 when non-zero
  return bytes === 0 ? 0 : Math.max(1, Math.round(bytes / 1024 ** 2));
}

/**
 * What upstream's getVMIMigrationDataSize counts: the guest memory (spec.domain.memory.guest, else
 * resources.requests.memory) plus, for a block migration, `localDisksBytes` (what ephemeralDisksBytes found in
 * the ephemeral disks dir), in GB (10^9 bytes), rounded up. Volume migrations (status.migratedVolumes) are not
 * modelled here.
 */
export function migrationDataGB(vmi: VirtualMachineInstance, localDisksBytes = 0): number {
  const domain = vmi.spec.domain;
  const q = domain.memory?.guest ?? domain.resources?.requests?.memory;
  let bytes = 0;
  if (q) {
    try {
      bytes = parseQuantity(String(q));
    } catch {
      bytes = 0;
    }
  }
  if (isBlockMigration(vmi)) bytes += localDisksBytes;
  return Math.ceil(bytes / 1e9);
}

/** The sizes of the files under `dir` (upstream's getVMIEphemeralDisksTotalSize: apparent sizes; 0 when the dir is missing). */
export async function ephemeralDisksBytes(dir: string): Promise<number> {
  let total = 0;
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true, recursive: true });
  } catch {
    return 0;
  }
  for (const e of entries) {
    if (!e.isFile()) continue;
    try {
      total += (await stat(path.join(e.parentPath, e.name))).size;
    } catch {
      /* gone meanwhile */
    }
  }
  return total;
}

/** The VMI migrates with its node-local disks copied: status.migrationMethod BlockMigration or migrated volumes (upstream's IsBlockMigration). */
export function isBlockMigration(vmi: VirtualMachineInstance): boolean {
  const st = vmi.status as { migrationMethod?: string; migratedVolumes?: unknown[] } | undefined;
  return st?.migrationMethod === 'BlockMigration' || (st?.migratedVolumes?.length ?? 0) > 0;
}

/** How a block migration treats each volume (upstream's classifyVolumesForMigration), by volume name. */
export interface VolumeClasses {
  /** on storage both nodes reach (PVC/DataVolume, a shared hostDisk): never copied */
  shared: Set<string>;
  /** files the launcher makes (cloud-init, configMap, secret, downwardAPI, serviceAccount ISOs, containerDisk overlays): copied even when read-only */
  generated: Set<string>;
}

/** Upstream's classifyVolumesForMigration (status.migratedVolumes, a volume migration, is not modelled: nothing is migrated that way here). */
export function classifyVolumesForMigration(vmi: VirtualMachineInstance): VolumeClasses {
  const shared = new Set<string>();
  const generated = new Set<string>();
  const migrated = new Set(
    (
      (vmi.status as { migratedVolumes?: Array<{ volumeName?: string }> } | undefined)?.migratedVolumes ?? []
    ).map((v) => v.volumeName),
  );
  for (const v of vmi.spec.volumes ?? []) {
    const vol = v as Record<string, unknown> & { name: string; hostDisk?: { shared?: boolean } };
    if (vol.persistentVolumeClaim || vol.dataVolume) {
      if (!migrated.has(vol.name)) shared.add(vol.name);
    } else if (vol.hostDisk) {
      if (!migrated.has(vol.name) && vol.hostDisk.shared === true) shared.add(vol.name);
    } else if (
      [
        'configMap',
        'secret',
        'downwardAPI',
        'serviceAccount',
        'cloudInitNoCloud',
        'cloudInitConfigDrive',
        'containerDisk',
      ].some((k) => vol[k] !== undefined)
    ) {
      generated.add(vol.name);
    }
  }
  return { shared, generated };
}

/** The volume name behind a domain disk (its alias is `ua-<volume>`). */
function diskVolumeName(d: Disk): string {
  const a = d.alias ?? '';
  return a.startsWith('ua-') ? a.slice(3) : a;
}

/**
 * The target devs of the disks a block migration copies (upstream's getDiskTargetsForMigration): every disk
 * of the domain except cdroms, read-only ones that the launcher did not generate, disks that are neither file
 * nor block, and those on shared volumes.
 */
export function diskTargetsForMigration(vmi: VirtualMachineInstance, disks: readonly Disk[]): string[] {
  const classes = classifyVolumesForMigration(vmi);
  const out: string[] = [];
  for (const d of disks) {
    const name = diskVolumeName(d);
    if (d.device === 'cdrom') continue;
    if (d.readonly && !classes.generated.has(name)) continue;
    if ((d.type !== 'file' && d.type !== 'block') || classes.shared.has(name)) continue;
    out.push(d.target.dev);
  }
  return out;
}

/**
 * The volumes both nodes reach as the same files, by what Kubernetes promises rather than by the filesystem under
 * them: PVCs and DataVolumes whose access modes (status.volumeStatus[].persistentVolumeClaimInfo, which
 * virt-controller fills from the claims) include ReadWriteMany, and hostDisks marked `shared: true`; a volume of
 * status.migratedVolumes is copied instead. Upstream hands the mount paths of the ReadWriteMany filesystem claims to
 * the launcher (SHARED_FILESYSTEM_PATHS) for libvirt's shared_filesystems.
 */
export function sharedStorageVolumes(vmi: VirtualMachineInstance): Set<string> {
  const st = vmi.status as
    | {
        volumeStatus?: Array<{ name: string; persistentVolumeClaimInfo?: { accessModes?: string[] } }>;
        migratedVolumes?: Array<{ volumeName?: string }>;
      }
    | undefined;
  const rwx = new Set(
    (st?.volumeStatus ?? [])
      .filter((s) => s.persistentVolumeClaimInfo?.accessModes?.includes('ReadWriteMany'))
      .map((s) => s.name),
  );
  const migrated = new Set((st?.migratedVolumes ?? []).map((v) => v.volumeName));
  const out = new Set<string>();
  for (const v of vmi.spec.volumes ?? []) {
    const vol = v as Record<string, unknown> & { name: string; hostDisk?: { shared?: boolean } };
    if (migrated.has(vol.name)) continue;
    // a hostDisk with a claim's status is a claim's disk.img handed over as a hostDisk: shared as the claim is
    if ((vol.persistentVolumeClaim || vol.dataVolume || vol.hostDisk) && rwx.has(vol.name)) out.add(vol.name);
    else if (vol.hostDisk?.shared === true) out.add(vol.name);
  }
  return out;
}

/**
 * Whether the migration has to tell libvirt that the disks it leaves in place are on shared storage
 * (VIR_MIGRATE_UNSAFE). libvirt (qemuMigrationSrcIsSafe) checks every writable disk it does not copy: an image
 * file must be on a filesystem it knows to be shared (NFS, Ceph, GlusterFS, ... by the statfs type, or, from
 * libvirt 10, a path listed in qemu.conf's shared_filesystems), else it refuses the migration ("Migration without
 * shared storage is unsafe"). A ReadWriteMany filesystem claim is shared whatever its filesystem: the storage
 * add-on's local-path-shared is a directory both nodes see on the node's own ext4, and libvirt 9.0 (the launcher
 * image's) has no shared_filesystems to be told so. True when such a file disk (sharedStorageVolumes) is left in
 * place and so is every other writable file disk that is left in place; a node-local one keeps libvirt's refusal.
 * The flag also skips libvirt's cache-mode check of those disks, which this QEMU passes anyway: it drops an image's
 * page cache when the target takes the disk over (libvirt's migration drop-cache capability, which it counts as safe
 * with any cache mode).
 */
export function sharedStorageNeedsUnsafe(
  vmi: VirtualMachineInstance,
  disks: readonly Disk[],
  copied: readonly string[],
): boolean {
  const shared = sharedStorageVolumes(vmi);
  const kept = disks.filter(
    (d) => d.type === 'file' && d.source?.file && !d.readonly && !copied.includes(d.target.dev),
  );
  return kept.some((d) => shared.has(diskVolumeName(d))) && kept.every((d) => shared.has(diskVolumeName(d)));
}

/** libvirt takes migrate_disks_detect_zeroes from 10.9.0 on (virConnectGetLibVersion's number: major*1e6+minor*1e3+micro). */
export const DETECT_ZEROES_MIN_LIBVIRT = 10_009_000;

/**
 * The first QEMU release (libvirt's hypervisor version number, major*1e6+minor*1e3+micro) whose software emulation
 * (TCG) keeps the migration dirty bitmap coherent with its TLB: QEMU 9.0.0, "physmem: Fix migration dirty bitmap
 * coherency with TCG memory access", merged for 9.0.0. Before it the bitmap sync's fast path (a RAM block whose
 * offset and size are multiples of 256 KiB: the guest RAM of every domain here) cleared the dirty bits without
 * re-arming the vCPUs' TLB entries, so the guest's stores through an entry that was already writable went
 * unrecorded: the target got a stale copy of those pages (issue 31: Debian 12's QEMU 7.2, 8-10 stale 4 KiB pages
 * of kernel data per 2 MiB/s migration of the test guest, its timer wheel among them, and a panic in
 * __run_timers on the target in 2 of 5 e2e migrations).
 */
export const TCG_COHERENT_DIRTY_BITMAP_QEMU = 9_000_000;

/**
 * Whether the guest has to be paused for the whole migration (libvirt's non-live migration: no
 * VIR_MIGRATE_LIVE): a software-emulated domain (`<domain type='qemu'>`, the converter's choice without
 * /dev/kvm) on a QEMU older than TCG_COHERENT_DIRTY_BITMAP_QEMU (0: unknown, taken as older) loses guest
 * writes made while it runs during the migration. A paused guest writes nothing, so every page arrives as it is;
 * the price is downtime for the whole transfer. Under KVM the kernel tracks dirty pages: never paused.
 */
export function pauseForMigration(domainType: string | undefined, qemuVersion: number): boolean {
  return domainType === 'qemu' && qemuVersion < TCG_COHERENT_DIRTY_BITMAP_QEMU;
}

/** `<domain type='...'>` of a domain XML (undefined when absent). */
export function domainTypeOf(xml: string): string | undefined {
  return /<domain\b[^>]*?\stype=['"]([^'"]+)['"]/.exec(xml)?.[1];
}

/**
 * virDomainMigrateToURI3's typed parameters and flags for these options (live, peer-to-peer, persistent;
 * upstream's generateMigrationFlags and generateMigrationParams). With `pauseGuest` (pauseForMigration) the
 * migration is not live: no VIR_MIGRATE_LIVE (libvirt pauses the guest before the transfer and resumes it on the
 * target, or on the source when the migration fails), and no post-copy or auto-converge (both only make sense
 * for a running guest; libvirt refuses post-copy without LIVE). A block migration adds
 * VIR_MIGRATE_NON_SHARED_INC (only the top image of a chain is copied: the target has the same backing files,
 * e.g. its containerDisk overlay over the same image) and, when the VMI is given and it has disks to copy,
 * `migrate_disks` (diskTargetsForMigration over the source's XML), `disks_uri` (mo.disksURI) and, when
 * `libvirtVersion` is at least 10.9.0, `migrate_disks_detect_zeroes` for the same disks.
 */
export function migrateCall(
  mo: MigrationOptions,
  sourceXml: string,
  block: { vmi?: VirtualMachineInstance; libvirtVersion?: number; pauseGuest?: boolean } = {},
): { params: MigrateParams; flags: number } {
  const destXml =
    typeof mo.destinationXML === 'function' ? mo.destinationXML(sourceXml) : (mo.destinationXML ?? sourceXml);
  const params: MigrateParams = { destXml, persistXml: destXml };
  if (mo.migrationURI) params.uri = mo.migrationURI;
  if (mo.listenAddress) params.listenAddress = mo.listenAddress;
  if (mo.bandwidthMiB) params.bandwidth = mo.bandwidthMiB;
  if (mo.parallelMigrationThreads) params.parallelConnections = mo.parallelMigrationThreads;
  let flags = Vir.MIGRATE_PEER2PEER | Vir.MIGRATE_PERSIST_DEST;
  if (!block.pauseGuest) flags |= Vir.MIGRATE_LIVE;
  const domainDisks = block.vmi ? (parseDomainXml(sourceXml).devices.disks ?? []) : [];
  let copied: string[] = [];
  if (mo.blockMigration) {
    flags |= Vir.MIGRATE_NON_SHARED_INC;
    // libvirt refuses migrate_disks without a NON_SHARED flag: the disks are named only for a block migration
    copied = block.vmi ? diskTargetsForMigration(block.vmi, domainDisks) : [];
    if (copied.length > 0) {
      params.migrateDisks = copied;
      if (mo.disksURI) params.disksUri = mo.disksURI;
      if ((block.libvirtVersion ?? 0) >= DETECT_ZEROES_MIN_LIBVIRT) params.migrateDisksDetectZeroes = copied;
    }
  }
  if (mo.unsafe || (block.vmi && sharedStorageNeedsUnsafe(block.vmi, domainDisks, copied)))
    flags |= Vir.MIGRATE_UNSAFE;
  if (mo.allowAutoConverge && !block.pauseGuest) flags |= Vir.MIGRATE_AUTO_CONVERGE;
  if (mo.allowPostCopy && !block.pauseGuest) flags |= Vir.MIGRATE_POSTCOPY;
  if (mo.parallelMigrationThreads) flags |= Vir.MIGRATE_PARALLEL;
  return { params, flags };
}

/**
 * Upstream's migration monitor, simplified: aborts when the migration takes longer than the
 * completion timeout, or when the data still to send has not shrunk for the progress timeout.
 * `onAbort(reason, why)` is called once the abort is decided (state.abortStatus and failureReason set).
 */
export function monitorMigration(
  dom: LibvirtDomain,
  state: MigrationState,
  mo: MigrationOptions,
  started: number,
  dataGB: number,
  onAbort: (reason: string, why: string) => void,
): { stop(): void } {
  const { progressTimeoutMs } = mo;
  // upstream: CompletionTimeoutPerGiB x the guest memory in GB, rounded up (resource.Giga)
  const completionTimeoutMs = mo.completionTimeoutPerGiB ? mo.completionTimeoutPerGiB * dataGB * 1000 : 0;
  if (!completionTimeoutMs && !progressTimeoutMs) return { stop: () => undefined };
  let lowest = Infinity;
  let lastProgress = started;
  let polling = false;
  const abort = (reason: string, why: string) => {
    state.abortStatus = 'Aborting';
    state.failureReason = why;
    onAbort(reason, why);
    void dom.abortJob().catch(() => undefined);
  };
  const t = setInterval(() => {
    if (state.completed || state.abortStatus || polling) return;
    const now = Date.now();
    if (completionTimeoutMs && now - started > completionTimeoutMs) {
      abort('MigrationTimeout', `migration did not complete within ${completionTimeoutMs / 1000} s`);
      return;
    }
    if (!progressTimeoutMs) return;
    polling = true;
    dom
      .getJobInfo()
      .then((info) => {
        const remaining = Number((info as { params?: Record<string, unknown> })?.params?.data_remaining);
        if (Number.isFinite(remaining) && remaining < lowest) {
          lowest = remaining;
          lastProgress = Date.now();
        } else if (Date.now() - lastProgress > progressTimeoutMs && !state.completed && !state.abortStatus) {
          abort('MigrationProgressTimeout', `migration made no progress for ${progressTimeoutMs / 1000} s`);
        }
      })
      .catch(() => undefined)
      .finally(() => {
        polling = false;
      });
  }, 500);
  t.unref();
  return { stop: () => clearInterval(t) };
}
