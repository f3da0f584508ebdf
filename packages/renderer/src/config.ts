// Cluster-wide settings the renderer needs: the KubeVirt CR's spec.configuration (deploy/30-kubevirt.yaml) on top of
// what virt-controller's flags set.
import { FEATURE_GATES_ACTED_ON, parseQuantity, type KubeVirtConfiguration } from '@kubevirt-ts/api';

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
   * Percent by which the free space of a filesystem claim may fall short of the disk.img the launcher creates on it
   * (upstream's `developerConfiguration.lessPVCSpaceToleration`, 0..100, default 10); the launcher's
   * `--less-pvc-space-toleration`.
   */
  lessPVCSpaceToleration?: number;
  /**
   * Bytes of a filesystem claim the launcher keeps free when it sizes a disk.img (upstream's
   * `developerConfiguration.minimumReservePVCBytes`, default 131072); the launcher's `--minimum-reserve-pvc-bytes`.
   */
  minimumReservePVCBytes?: number;
  /**
   * Feature gates turned on in the cluster (upstream's `developerConfiguration.featureGates`). Off by default.
   * Acted on: `HostDisk` (hostDisk volumes: files on the node's filesystem). Any other name is kept and has no
   * effect here, as upstream keeps a gate it does not know (a CR written for upstream turns on gates such as
   * `CPUManager` or `Sidecar`; refusing them would refuse the whole configuration).
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

/**
 * upstream's defaults of `lessPVCSpaceToleration` and `minimumReservePVCBytes` (pkg/virt-config), which are the
 * launcher's (@kubevirt-ts/disks) when the flags are left out: the renderer passes only other values.
 */
export const CLAIM_IMAGE_DEFAULTS = { lessPVCSpaceToleration: 10, minimumReservePVCBytes: 131072 } as const;

/** Feature gates this renderer acts on (others are kept; virt-operator reports them in NotImplemented). */
export const FEATURE_GATES = FEATURE_GATES_ACTED_ON;
export type FeatureGate = (typeof FEATURE_GATES)[number];

export type ResolvedConfig = Required<Omit<RendererConfig, 'imagePullSecrets'>> &
  Pick<RendererConfig, 'imagePullSecrets'>;

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
    featureGates: c.featureGates ?? [],
    lessPVCSpaceToleration: c.lessPVCSpaceToleration ?? CLAIM_IMAGE_DEFAULTS.lessPVCSpaceToleration,
    minimumReservePVCBytes: c.minimumReservePVCBytes ?? CLAIM_IMAGE_DEFAULTS.minimumReservePVCBytes,
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
  const tol = r.lessPVCSpaceToleration;
  if (!Number.isInteger(tol) || tol < 0 || tol > 100)
    throw new RenderError(
      'config.lessPVCSpaceToleration',
      `must be an integer percentage from 0 to 100, got ${JSON.stringify(tol)}`,
    );
  const reserve = r.minimumReservePVCBytes;
  if (!Number.isSafeInteger(reserve) || reserve < 0)
    throw new RenderError(
      'config.minimumReservePVCBytes',
      `must be a non-negative integer (bytes), got ${JSON.stringify(reserve)}`,
    );
  if (r.launcherCommand.length === 0) throw new RenderError('config.launcherCommand', 'must not be empty');
  if (!Array.isArray(r.featureGates))
    throw new RenderError(
      'config.featureGates',
      `must be a list of names, got ${JSON.stringify(r.featureGates)}`,
    );
  // a gate this renderer does not act on is not an error: upstream keeps any name (gates it does not know too)
  r.featureGates.forEach((g, i) => {
    if (typeof g !== 'string' || g === '')
      throw new RenderError(
        `config.featureGates[${i}]`,
        `must be a feature gate's name, got ${JSON.stringify(g)}`,
      );
  });
  return r;
}

/** Where each RendererConfig field comes from in the KubeVirt CR (what an error names). */
const CR_PATHS: Partial<Record<keyof RendererConfig, string>> = {
  useEmulation: 'spec.configuration.developerConfiguration.useEmulation',
  featureGates: 'spec.configuration.developerConfiguration.featureGates',
  cpuAllocationRatio: 'spec.configuration.developerConfiguration.cpuAllocationRatio',
  memoryOvercommit: 'spec.configuration.developerConfiguration.memoryOvercommit',
  lessPVCSpaceToleration: 'spec.configuration.developerConfiguration.lessPVCSpaceToleration',
  minimumReservePVCBytes: 'spec.configuration.developerConfiguration.minimumReservePVCBytes',
  imagePullPolicy: 'spec.configuration.imagePullPolicy',
  additionalOverheadRatio: 'spec.configuration.additionalGuestMemoryOverheadRatio',
  launcherSeccompProfile:
    'spec.configuration.seccompConfiguration.virtualMachineInstanceProfile.customProfile',
  ...Object.fromEntries(
    Object.keys(MIGRATION_DEFAULTS).map((k) => [k, `spec.configuration.migrations.${k}`]),
  ),
};

/**
 * RendererConfig from the KubeVirt CR's `spec.configuration` (upstream's shapes and names; see
 * {@link KubeVirtConfiguration}) on top of `base`, what only the controller's flags set (the launcher image, above
 * all). Fields the CR leaves out keep their defaults. A bad value throws RenderError naming its path in the CR, e.g.
 * `spec.configuration.migrations.bandwidthPerMigration`. Fields kubevirt-ts does not implement are not read here:
 * `kubeVirtNotImplemented()` of @kubevirt-ts/api lists them (virt-operator reports them in a condition).
 */
export function rendererConfigFromKubeVirt(
  configuration: KubeVirtConfiguration | undefined,
  base: RendererConfig,
): RendererConfig {
  const c = configuration ?? {};
  const dev = c.developerConfiguration ?? {};
  const m = c.migrations ?? {};
  const out: RendererConfig = { ...base };
  const set = <K extends keyof RendererConfig>(k: K, v: RendererConfig[K] | undefined) => {
    if (v !== undefined) out[k] = v;
  };
  set('useEmulation', dev.useEmulation);
  set('featureGates', dev.featureGates);
  set('cpuAllocationRatio', dev.cpuAllocationRatio);
  set('memoryOvercommit', dev.memoryOvercommit);
  set('lessPVCSpaceToleration', dev.lessPVCSpaceToleration);
  set('minimumReservePVCBytes', dev.minimumReservePVCBytes);
  set('imagePullPolicy', c.imagePullPolicy);
  const ratio = c.additionalGuestMemoryOverheadRatio;
  if (ratio !== undefined) {
    const n = typeof ratio === 'string' && ratio.trim() !== '' ? Number(ratio) : NaN;
    if (!(n >= 1))
      throw new RenderError(
        CR_PATHS.additionalOverheadRatio!,
        `must be a number of at least 1.0, like "1.5", got ${JSON.stringify(ratio)}`,
      );
    out.additionalOverheadRatio = n;
  }
  const profile = c.seccompConfiguration?.virtualMachineInstanceProfile?.customProfile;
  if (profile?.localhostProfile !== undefined && profile.runtimeDefaultProfile)
    throw new RenderError(
      CR_PATHS.launcherSeccompProfile!,
      'localhostProfile and runtimeDefaultProfile: give one',
    );
  if (profile?.localhostProfile !== undefined) out.launcherSeccompProfile = profile.localhostProfile;
  else if (profile?.runtimeDefaultProfile) out.launcherSeccompProfile = 'RuntimeDefault';
  for (const k of Object.keys(MIGRATION_DEFAULTS) as (keyof MigrationConfiguration)[])
    set(k, m[k] as RendererConfig[typeof k]);
  if (typeof m.bandwidthPerMigration === 'number')
    out.bandwidthPerMigration = String(m.bandwidthPerMigration);
  try {
    resolveConfig(out); // validates
  } catch (e) {
    // name the CR's field, not the renderer's
    if (!(e instanceof RenderError)) throw e;
    const [, key, rest] = /^config\.(\w+)(.*)$/.exec(e.path) ?? [];
    const crPath = key && CR_PATHS[key as keyof RendererConfig];
    throw crPath ? new RenderError(`${crPath}${rest}`, e.reason) : e;
  }
  return out;
}

/**
 * What is wrong with a KubeVirt CR's `spec.configuration` (a message naming the field, e.g.
 * `spec.configuration.migrations.progressTimeout: must be a positive integer, got 0`), or undefined when the
 * renderer takes it. virt-operator reports it in the CR's Degraded condition; virt-controller keeps its previous
 * configuration meanwhile.
 */
export function kubeVirtConfigurationError(
  configuration: KubeVirtConfiguration | undefined,
): string | undefined {
  try {
    rendererConfigFromKubeVirt(configuration, { launcherImage: 'any' }); // the image is the controller's flag
    return undefined;
  } catch (e) {
    if (e instanceof RenderError) return e.message;
    throw e;
  }
}
