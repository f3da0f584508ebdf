// Cluster-wide settings the renderer needs (from the kubevirt-ts config object in deploy/).
import { parseQuantity } from '@kubevirt-ts/api';

export interface RendererConfig {
  /** the virt-launcher image, e.g. "registry.example.com/kubevirt-ts/virt-launcher:0.1.0" (required) */
  launcherImage: string;
  imagePullPolicy?: 'Always' | 'IfNotPresent' | 'Never';
  /** names of Secrets used to pull the launcher image */
  imagePullSecrets?: string[];
  /** no /dev/kvm: QEMU emulates (TCG); the Pod asks for no kvm/vhost-net device (default false) */
  useEmulation?: boolean;
  /** vCPUs per requested host CPU when the VMI requests no CPU (default 10: 1 vCPU -> "100m") */
  cpuAllocationRatio?: number;
  /** memory overcommit in percent: guest memory / (overcommit/100) is requested (default 100) */
  memoryOvercommit?: number;
  /** node architecture, for the arm64 pflash overhead (default "amd64") */
  arch?: string;
  /** multiplies the computed memory overhead (default 1.0) */
  additionalOverheadRatio?: number;
  /** virt-launcher's --qemu-timeout in seconds (default 240) */
  qemuTimeoutSeconds?: number;
  /** seconds added to the VMI's grace period for the Pod, so the launcher can destroy QEMU after the guest's time is up (default 15) */
  gracePeriodBufferSeconds?: number;
  /**
   * The launcher Pod's seccomp profile (upstream's `seccompConfiguration.virtualMachineInstanceProfile.customProfile`):
   * `"RuntimeDefault"` (the container runtime's default profile; the default here) or the name of a Localhost profile
   * under kubelet's seccomp dir, like `"kubevirt-ts/kubevirt.json"`, the profile virt-handler installs on each node
   * (deploy/ selects it: passt needs it, RuntimeDefault refuses the user namespace passt sandboxes itself in).
   */
  launcherSeccompProfile?: string;
  /**
   * the launcher wrapper inside the image: apps/virt-launcher's `virt-launcher monitor`, which becomes its native
   * monitor (upstream: virt-launcher-monitor; reaps as a subreaper, gives QEMU its grace period), under tini as the
   * container's PID 1 (default), the combination the cluster e2e runs: tini reaps whatever is left to PID 1.
   */
  launcherCommand?: string[];
  /** keep the compute container running after a failure, for debugging (--keep-after-failure) */
  keepAfterFailure?: boolean;
  /**
   * volumeMode of each PersistentVolumeClaim the VMI uses (claim name -> mode), as the controller sees it;
   * "Block" claims become volumeDevices, anything else a filesystem mount (default Filesystem).
   */
  pvcVolumeModes?: Record<string, 'Block' | 'Filesystem' | undefined>;
  /**
   * Feature gates turned on in the cluster (upstream's `developerConfiguration.featureGates`). Off by default.
   * Known: `HostDisk` (hostDisk volumes: files on the node's filesystem).
   */
  featureGates?: string[];
  /**
   * Live migrations with a target Pod at once in the cluster (upstream's
   * `migrations.parallelMigrationsPerCluster`, default 5); read by the migration controller.
   */
  parallelMigrationsPerCluster?: number;
  /** outgoing live migrations at once per source node (upstream's `parallelOutboundMigrationsPerNode`, default 2) */
  parallelOutboundMigrationsPerNode?: number;
  /**
   * Bandwidth cap of one live migration, a quantity per second (upstream's `migrations.bandwidthPerMigration`,
   * default "0Mi": unlimited); libvirt takes it in MiB/s.
   */
  bandwidthPerMigration?: string;
  /** seconds per GiB of guest memory before a migration is aborted (upstream's `completionTimeoutPerGiB`, default 150) */
  completionTimeoutPerGiB?: number;
  /** seconds without progress before a migration is aborted (upstream's `progressTimeout`, default 150) */
  progressTimeout?: number;
  /** let QEMU throttle the guest's vCPUs so a migration converges (upstream's `allowAutoConverge`, default false) */
  allowAutoConverge?: boolean;
  /** switch a migration that does not converge to post-copy (upstream's `allowPostCopy`, default false) */
  allowPostCopy?: boolean;
  /** migrate even what libvirt calls unsafe, e.g. disks with caches (upstream's `unsafeMigrationOverride`, default false) */
  unsafeMigrationOverride?: boolean;
}

/** The migration options of the cluster config (upstream's `spec.configuration.migrations`), with upstream's defaults. */
export interface MigrationConfiguration {
  bandwidthPerMigration: string;
  completionTimeoutPerGiB: number;
  progressTimeout: number;
  allowAutoConverge: boolean;
  allowPostCopy: boolean;
  unsafeMigrationOverride: boolean;
  parallelMigrationsPerCluster: number;
  parallelOutboundMigrationsPerNode: number;
}

/**
 * The cluster config's migration options (defaults filled in), what virt-controller writes into a migrating VMI's
 * `status.migrationState.migrationConfiguration` (upstream's hand-off) and virt-handler turns into MigrationOptions.
 */
export function migrationConfiguration(c: RendererConfig | undefined): MigrationConfiguration {
  const r = resolveMigration(c ?? {});
  return {
    bandwidthPerMigration: r.bandwidthPerMigration,
    completionTimeoutPerGiB: r.completionTimeoutPerGiB,
    progressTimeout: r.progressTimeout,
    allowAutoConverge: r.allowAutoConverge,
    allowPostCopy: r.allowPostCopy,
    unsafeMigrationOverride: r.unsafeMigrationOverride,
    parallelMigrationsPerCluster: r.parallelMigrationsPerCluster,
    parallelOutboundMigrationsPerNode: r.parallelOutboundMigrationsPerNode,
  };
}

/** upstream's defaults (pkg/virt-config) */
export const MIGRATION_DEFAULTS: MigrationConfiguration = {
  bandwidthPerMigration: '0Mi',
  completionTimeoutPerGiB: 150,
  progressTimeout: 150,
  allowAutoConverge: false,
  allowPostCopy: false,
  unsafeMigrationOverride: false,
  parallelMigrationsPerCluster: 5,
  parallelOutboundMigrationsPerNode: 2,
};

function resolveMigration(c: Partial<RendererConfig>): MigrationConfiguration {
  const r: MigrationConfiguration = {
    bandwidthPerMigration: c.bandwidthPerMigration ?? MIGRATION_DEFAULTS.bandwidthPerMigration,
    completionTimeoutPerGiB: c.completionTimeoutPerGiB ?? MIGRATION_DEFAULTS.completionTimeoutPerGiB,
    progressTimeout: c.progressTimeout ?? MIGRATION_DEFAULTS.progressTimeout,
    allowAutoConverge: c.allowAutoConverge ?? MIGRATION_DEFAULTS.allowAutoConverge,
    allowPostCopy: c.allowPostCopy ?? MIGRATION_DEFAULTS.allowPostCopy,
    unsafeMigrationOverride: c.unsafeMigrationOverride ?? MIGRATION_DEFAULTS.unsafeMigrationOverride,
    parallelMigrationsPerCluster:
      c.parallelMigrationsPerCluster ?? MIGRATION_DEFAULTS.parallelMigrationsPerCluster,
    parallelOutboundMigrationsPerNode:
      c.parallelOutboundMigrationsPerNode ?? MIGRATION_DEFAULTS.parallelOutboundMigrationsPerNode,
  };
  for (const k of [
    'parallelMigrationsPerCluster',
    'parallelOutboundMigrationsPerNode',
    'completionTimeoutPerGiB',
    'progressTimeout',
  ] as const) {
    if (!Number.isInteger(r[k]) || r[k] < 1)
      throw new RenderError(`config.${k}`, `must be a positive integer, got ${JSON.stringify(r[k])}`);
  }
  for (const k of ['allowAutoConverge', 'allowPostCopy', 'unsafeMigrationOverride'] as const) {
    if (typeof r[k] !== 'boolean')
      throw new RenderError(`config.${k}`, `must be true or false, got ${JSON.stringify(r[k])}`);
  }
  let bytes = NaN;
  try {
    bytes = typeof r.bandwidthPerMigration === 'string' ? parseQuantity(r.bandwidthPerMigration) : NaN;
  } catch {
    /* reported below */
  }
  if (!Number.isFinite(bytes) || bytes < 0)
    throw new RenderError(
      'config.bandwidthPerMigration',
      `must be a non-negative quantity like "64Mi" (per second; "0Mi": unlimited), got ${JSON.stringify(r.bandwidthPerMigration)}`,
    );
  return r;
}

/** Feature gates this renderer knows. */
export const FEATURE_GATES = ['HostDisk'] as const;
export type FeatureGate = (typeof FEATURE_GATES)[number];

export type ResolvedConfig = Required<Omit<RendererConfig, 'imagePullSecrets' | 'pvcVolumeModes'>> &
  Pick<RendererConfig, 'imagePullSecrets' | 'pvcVolumeModes'>;

/** Whether `gate` is on in the (resolved) config. */
export const gateEnabled = (c: Pick<RendererConfig, 'featureGates'>, gate: FeatureGate): boolean =>
  (c.featureGates ?? []).includes(gate);

/** Bad input: `path` names the field, like the API's FieldError. */
export class RenderError extends Error {
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {
    super(`${path}: ${reason}`);
    this.name = 'RenderError';
  }
}

export function resolveConfig(c: RendererConfig): ResolvedConfig {
  if (!c || typeof c.launcherImage !== 'string' || c.launcherImage === '') {
    throw new RenderError('config.launcherImage', 'the virt-launcher image is required');
  }
  const r: ResolvedConfig = {
    launcherImage: c.launcherImage,
    imagePullPolicy: c.imagePullPolicy ?? 'IfNotPresent',
    imagePullSecrets: c.imagePullSecrets,
    useEmulation: c.useEmulation ?? false,
    cpuAllocationRatio: c.cpuAllocationRatio ?? 10,
    memoryOvercommit: c.memoryOvercommit ?? 100,
    arch: c.arch ?? 'amd64',
    additionalOverheadRatio: c.additionalOverheadRatio ?? 1,
    qemuTimeoutSeconds: c.qemuTimeoutSeconds ?? 240,
    gracePeriodBufferSeconds: c.gracePeriodBufferSeconds ?? 15,
    launcherSeccompProfile: c.launcherSeccompProfile ?? 'RuntimeDefault',
    launcherCommand: c.launcherCommand ?? ['/usr/bin/tini', '-g', '--', '/usr/bin/virt-launcher', 'monitor'],
    keepAfterFailure: c.keepAfterFailure ?? false,
    pvcVolumeModes: c.pvcVolumeModes,
    featureGates: c.featureGates ?? [],
    ...resolveMigration(c),
  };
  const positive = (
    k: 'cpuAllocationRatio' | 'memoryOvercommit' | 'additionalOverheadRatio' | 'qemuTimeoutSeconds',
  ) => {
    if (typeof r[k] !== 'number' || !(r[k] > 0))
      throw new RenderError(`config.${k}`, `must be a positive number, got ${JSON.stringify(r[k])}`);
  };
  positive('cpuAllocationRatio');
  positive('memoryOvercommit');
  positive('additionalOverheadRatio');
  positive('qemuTimeoutSeconds');
  if (!Number.isInteger(r.gracePeriodBufferSeconds) || r.gracePeriodBufferSeconds < 0) {
    throw new RenderError('config.gracePeriodBufferSeconds', 'must be a non-negative integer');
  }
  // a relative path: no empty segment (so not absolute, not empty), no '.' or '..'
  const sp = r.launcherSeccompProfile;
  if (
    typeof sp !== 'string' ||
    (sp !== 'RuntimeDefault' && sp.split('/').some((seg) => ['', '.', '..'].includes(seg)))
  )
    throw new RenderError(
      'config.launcherSeccompProfile',
      `must be "RuntimeDefault" or a profile path relative to kubelet's seccomp dir (like "kubevirt-ts/kubevirt.json"), got ${JSON.stringify(sp)}`,
    );
  if (r.launcherCommand.length === 0) throw new RenderError('config.launcherCommand', 'must not be empty');
  r.featureGates.forEach((g, i) => {
    if (!(FEATURE_GATES as readonly string[]).includes(g))
      throw new RenderError(
        `config.featureGates[${i}]`,
        `unknown feature gate ${JSON.stringify(g)} (known: ${FEATURE_GATES.join(', ')})`,
      );
  });
  return r;
}

const BOOL_KEYS = [
  'useEmulation',
  'keepAfterFailure',
  'allowAutoConverge',
  'allowPostCopy',
  'unsafeMigrationOverride',
] as const;
const NUM_KEYS = [
  'cpuAllocationRatio',
  'memoryOvercommit',
  'additionalOverheadRatio',
  'qemuTimeoutSeconds',
  'gracePeriodBufferSeconds',
  'parallelMigrationsPerCluster',
  'parallelOutboundMigrationsPerNode',
  'completionTimeoutPerGiB',
  'progressTimeout',
] as const;
const STR_KEYS = [
  'launcherImage',
  'imagePullPolicy',
  'arch',
  'bandwidthPerMigration',
  'launcherSeccompProfile',
] as const;

/**
 * RendererConfig from the data of the kubevirt-ts config object (ConfigMap kubevirt-ts-config in deploy/30-config.yaml):
 * one string key per field; `launcherCommand`, `imagePullSecrets` and `featureGates` as JSON arrays. Unknown keys and bad values
 * throw RenderError naming `data.<key>`.
 */
export function rendererConfigFromData(data: Record<string, string> | undefined): RendererConfig {
  const d = data ?? {};
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(d)) {
    if ((STR_KEYS as readonly string[]).includes(k)) out[k] = v;
    else if ((BOOL_KEYS as readonly string[]).includes(k)) {
      if (v !== 'true' && v !== 'false')
        throw new RenderError(`data.${k}`, `must be "true" or "false", got ${JSON.stringify(v)}`);
      out[k] = v === 'true';
    } else if ((NUM_KEYS as readonly string[]).includes(k)) {
      const n = Number(v);
      if (v.trim() === '' || !Number.isFinite(n))
        throw new RenderError(`data.${k}`, `must be a number, got ${JSON.stringify(v)}`);
      out[k] = n;
    } else if (k === 'launcherCommand' || k === 'imagePullSecrets' || k === 'featureGates') {
      let arr: unknown;
      try {
        arr = JSON.parse(v);
      } catch {
        arr = undefined;
      }
      if (!Array.isArray(arr) || !arr.every((x) => typeof x === 'string'))
        throw new RenderError(`data.${k}`, 'must be a JSON array of strings');
      out[k] = arr;
    } else {
      throw new RenderError(
        `data.${k}`,
        `unknown key (known: ${[...STR_KEYS, ...BOOL_KEYS, ...NUM_KEYS, 'launcherCommand', 'imagePullSecrets', 'featureGates'].join(', ')})`,
      );
    }
  }
  const config = out as unknown as RendererConfig;
  resolveConfig(config); // validates (launcherImage required, positive numbers)
  return config;
}
