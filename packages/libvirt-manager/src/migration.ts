// Migration options (MigrationRequest.options), where a migration goes, and the state of an
// outgoing migration.

import { parseQuantity } from '@kubevirt-ts/api';

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
 * - destinationXML: the domain XML to use on the target (default: the source's migratable XML),
 *   or a function of the source's migratable XML.
 */
export interface MigrationTarget {
  targetURI: string;
  migrationURI?: string;
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
