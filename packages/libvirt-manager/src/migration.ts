// Migration options (MigrationRequest.options) and the state of an outgoing migration.

import { parseQuantity } from '@kubevirt-ts/api';

/**
 * What migrateVMI accepts. Upstream's MigrationOptions fields (Go names, as virt-handler sends
 * them) plus where to migrate to, which upstream derives from its migration proxies:
 * - targetURI (required): libvirt URI of the target's libvirtd; the source libvirtd connects to
 *   it itself (peer-to-peer), e.g. `qemu+unix:///session?socket=/path/libvirt-sock` or `qemu+tcp://host/session`.
 * - migrationURI: where the target QEMU listens for the migration stream, e.g. `tcp://127.0.0.1:49152`
 *   (default: chosen by the target libvirtd).
 * - listenAddress: address the target QEMU binds.
 * - destinationXML: the domain XML to use on the target (default: the source's migratable XML);
 *   in-process callers may pass a function of the source's migratable XML.
 */
export interface MigrationOptions {
  targetURI: string;
  migrationURI?: string;
  listenAddress?: string;
  destinationXML?: string | ((sourceXml: string) => string);
  /** MiB/s (upstream Bandwidth is a quantity; a number is MiB/s) */
  bandwidthMiB?: number;
  /** abort when the migration takes longer than this (from CompletionTimeoutPerGiB x guest memory, or given) */
  completionTimeoutMs?: number;
  /** abort when the remaining data has not shrunk for this long (upstream ProgressTimeout, seconds) */
  progressTimeoutMs?: number;
  unsafe?: boolean;
  allowAutoConverge?: boolean;
  allowPostCopy?: boolean;
  parallelMigrationThreads?: number;
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
  mode: 'PreCopy' | 'PostCopy';
}

function fail(path: string, reason: string): never {
  throw new Error(`${path}: ${reason}`);
}

function optString(o: Record<string, unknown>, key: string): string | undefined {
  const v = o[key];
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string') fail(`options.${key}`, 'must be a string');
  return v;
}

function optNumber(o: Record<string, unknown>, key: string): number | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0)
    fail(`options.${key}`, 'must be a non-negative number');
  return v;
}

function optBool(o: Record<string, unknown>, key: string): boolean | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') fail(`options.${key}`, 'must be a boolean');
  return v;
}

/** Validates MigrationRequest.options; errors name the field (`options.targetURI: required`). */
export function parseMigrationOptions(raw: unknown): MigrationOptions {
  if (raw === undefined || raw === null) fail('options', 'required (at least options.targetURI)');
  if (typeof raw !== 'object' || Array.isArray(raw)) fail('options', 'must be an object');
  const o = raw as Record<string, unknown>;
  const targetURI =
    optString(o, 'targetURI') ?? fail('options.targetURI', 'required: libvirt URI of the target libvirtd');
  const migrationURI = optString(o, 'migrationURI');
  if (migrationURI !== undefined && !/^[a-z][a-z0-9+.-]*:\/\//i.test(migrationURI)) {
    fail('options.migrationURI', `"${migrationURI}" is not a URI like tcp://host:port`);
  }
  let destinationXML: MigrationOptions['destinationXML'];
  if (typeof o.destinationXML === 'function') destinationXML = o.destinationXML as (x: string) => string;
  else destinationXML = optString(o, 'destinationXML');
  const bw = o.Bandwidth ?? o.bandwidthMiB;
  let bandwidthMiB: number | undefined;
  if (bw !== undefined && bw !== null) {
    if (typeof bw === 'number') bandwidthMiB = optNumber({ Bandwidth: bw }, 'Bandwidth');
    else if (typeof bw === 'string') bandwidthMiB = bandwidthFromQuantity(bw);
    else fail('options.Bandwidth', 'must be a number (MiB/s) or a quantity like 64Mi');
  }
  const perGiB = optNumber(o, 'CompletionTimeoutPerGiB');
  const memoryBytes = optNumber(o, 'memoryBytes');
  let completionTimeoutMs = optNumber(o, 'completionTimeoutSeconds');
  if (completionTimeoutMs !== undefined) completionTimeoutMs *= 1000;
  else if (perGiB !== undefined && perGiB > 0) {
    completionTimeoutMs = perGiB * 1000 * Math.max(1, (memoryBytes ?? 1024 ** 3) / 1024 ** 3);
  }
  const progress = optNumber(o, 'ProgressTimeout');
  const parallel = optNumber(o, 'ParallelMigrationThreads');
  return {
    targetURI,
    migrationURI,
    listenAddress: optString(o, 'listenAddress'),
    destinationXML,
    bandwidthMiB: bandwidthMiB || undefined,
    completionTimeoutMs: completionTimeoutMs || undefined,
    progressTimeoutMs: progress ? progress * 1000 : undefined,
    unsafe: optBool(o, 'UnsafeMigration'),
    allowAutoConverge: optBool(o, 'AllowAutoConverge'),
    allowPostCopy: optBool(o, 'AllowPostCopy'),
    parallelMigrationThreads: parallel ? Math.floor(parallel) : undefined,
  };
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
