// The KubeVirt custom resource (kubevirt.io/v1 KubeVirt): the cluster's configuration, in upstream's shape.
// `spec.configuration` holds what kubevirt-ts implements, typed as upstream types it (so the CRD refuses a wrong
// type with the field's path); every other field upstream's CR may carry is kept as given (a manifest written for
// upstream applies unchanged) and listed by kubeVirtNotImplemented(), which virt-operator reports in the CR's
// `NotImplemented` condition: nothing is silently ignored.
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { Arr, Bool, Enum, Loose, Opt, Quantity, Str } from './schema-helpers.js';
import type { DefaultsOptions } from './defaults.js';
import { API_VERSION, ConditionSchema, ObjectMetaSchema } from './schemas.js';

const PullPolicy = () => Enum(['Always', 'IfNotPresent', 'Never']);
const PosInt = (description?: string) =>
  Type.Integer({ minimum: 1, ...(description ? { description } : {}) });

/** `spec.configuration.developerConfiguration`: the parts kubevirt-ts implements. */
export const DeveloperConfigurationSchema = Loose({
  useEmulation: Opt(Bool('no /dev/kvm: QEMU emulates the CPU (TCG); launcher Pods ask for no kvm device')),
  featureGates: Opt(
    Arr(
      Str(),
      'feature gates turned on: any name is kept (as upstream); acted on: HostDisk, the others are reported NotImplemented',
    ),
  ),
  cpuAllocationRatio: Opt(PosInt('vCPUs per requested host CPU when a VMI requests no CPU (default 10)')),
  memoryOvercommit: Opt(PosInt('guest memory / (memoryOvercommit/100) is requested (percent, default 100)')),
  lessPVCSpaceToleration: Opt(
    Type.Integer({
      minimum: 0,
      maximum: 100,
      description:
        'percent by which the free space of a filesystem claim may fall short of the disk.img the launcher ' +
        'creates on it; then the image takes the free space (0..100, default 10)',
    }),
  ),
  minimumReservePVCBytes: Opt(
    Type.Integer({
      minimum: 0,
      description:
        'bytes of a filesystem claim kept free when the launcher sizes the disk.img it creates on it (default 131072)',
    }),
  ),
});

/** `spec.configuration.migrations` (upstream's MigrationConfiguration): the parts kubevirt-ts implements. */
export const MigrationConfigurationSchema = Loose({
  parallelMigrationsPerCluster: Opt(
    PosInt('migrations with a target Pod at once in the cluster (default 5)'),
  ),
  parallelOutboundMigrationsPerNode: Opt(PosInt('outgoing migrations at once per source node (default 2)')),
  bandwidthPerMigration: Opt(Quantity('bandwidth cap per migration, per second (default 0Mi: unlimited)')),
  completionTimeoutPerGiB: Opt(PosInt('seconds per GiB of guest memory before a migration is aborted (150)')),
  progressTimeout: Opt(PosInt('seconds without progress before a migration is aborted (default 150)')),
  allowAutoConverge: Opt(Bool()),
  allowPostCopy: Opt(Bool()),
  unsafeMigrationOverride: Opt(Bool()),
});

/** `spec.configuration.seccompConfiguration`: the launcher Pods' seccomp profile. */
export const SeccompConfigurationSchema = Loose({
  virtualMachineInstanceProfile: Opt(
    Loose({
      customProfile: Opt(
        Loose({
          localhostProfile: Opt(
            Str('a profile under kubelet\'s seccomp dir, e.g. "kubevirt-ts/kubevirt.json"'),
          ),
          runtimeDefaultProfile: Opt(Bool("the container runtime's default profile")),
        }),
      ),
    }),
  ),
});

/** `spec.configuration.network` (upstream's NetworkConfiguration): the parts kubevirt-ts implements. */
export const NetworkConfigurationSchema = Loose({
  defaultNetworkInterface: Opt(
    Enum(
      ['bridge', 'masquerade', 'slirp'],
      'binding of the pod network interface a VMI without interfaces gets (unset: bridge, as upstream; ' +
        "kubevirt-ts's installed CR sets masquerade); slirp is deprecated: such VMIs are refused",
    ),
  ),
  permitBridgeInterfaceOnPodNetwork: Opt(
    Bool('whether the bridge binding may be used on the pod network (default true)'),
  ),
});

/** `spec.configuration.commonInstancetypesDeployment`: whether virt-operator installs the common instance types. */
export const CommonInstancetypesDeploymentSchema = Loose({
  enabled: Opt(
    Bool(
      'virt-operator installs the common VirtualMachineClusterInstancetypes and VirtualMachineClusterPreferences ' +
        '(default true); false: it deletes the ones it manages',
    ),
  ),
});

/** `spec.configuration` (upstream's KubeVirtConfiguration): the fields kubevirt-ts implements. */
export const KubeVirtConfigurationSchema = Loose({
  developerConfiguration: Opt(DeveloperConfigurationSchema),
  network: Opt(NetworkConfigurationSchema),
  evictionStrategy: Opt(
    Enum(
      ['None', 'LiveMigrate', 'LiveMigrateIfPossible', 'External'],
      'eviction strategy of VMIs that set none (default: none)',
    ),
  ),
  vmRolloutStrategy: Opt(
    Enum(
      ['Stage', 'LiveUpdate'],
      'how a change to a running VM is rolled out: Stage (kept for the next start, RestartRequired condition); ' +
        'LiveUpdate is not implemented by kubevirt-ts (changes are staged)',
    ),
  ),
  imagePullPolicy: Opt(PullPolicy()),
  migrations: Opt(MigrationConfigurationSchema),
  seccompConfiguration: Opt(SeccompConfigurationSchema),
  additionalGuestMemoryOverheadRatio: Opt(
    Str('multiplies the computed memory overhead of a launcher Pod, e.g. "1.5" (default "1.0")'),
  ),
  commonInstancetypesDeployment: Opt(CommonInstancetypesDeploymentSchema),
});
/** `spec.configuration` of the KubeVirt CR: the fields kubevirt-ts implements (others are kept, not typed). */
export type KubeVirtConfiguration = Static<typeof KubeVirtConfigurationSchema>;

/** TypeBox schema of the KubeVirt CR's `spec`: `configuration`; upstream's other fields are kept as given. */
export const KubeVirtSpecSchema = Loose({
  configuration: Opt(KubeVirtConfigurationSchema),
});

/** TypeBox schema of the KubeVirt CR's `status`, as upstream's virt-operator reports it (virt-operator writes it). */
export const KubeVirtStatusSchema = Loose({
  phase: Opt(Str('Deploying, Deployed, Deleting or Deleted')),
  conditions: Opt(Arr(ConditionSchema)),
  observedGeneration: Opt(Type.Integer()),
  operatorVersion: Opt(Str()),
  observedKubeVirtVersion: Opt(Str()),
  targetKubeVirtVersion: Opt(Str()),
  observedKubeVirtRegistry: Opt(Str()),
  defaultArchitecture: Opt(Str('the architecture VMIs that name none get (amd64, arm64, ...)')),
  targetKubeVirtRegistry: Opt(Str()),
});
/** The KubeVirt CR's `status`: phase, conditions, observedGeneration and versions. */
export type KubeVirtStatus = Static<typeof KubeVirtStatusSchema>;

/** TypeBox schema of the KubeVirt custom resource (kubevirt.io/v1 KubeVirt). */
export const KubeVirtSchema = Type.Object(
  {
    apiVersion: Type.Literal(API_VERSION),
    kind: Type.Literal('KubeVirt'),
    metadata: ObjectMetaSchema,
    spec: KubeVirtSpecSchema,
    status: Opt(KubeVirtStatusSchema),
  },
  { description: "KubeVirt: the cluster's virtualization configuration and the installation's status" },
);
/** The KubeVirt custom resource: the cluster's configuration and the installation's status. */
export type KubeVirt = Static<typeof KubeVirtSchema>;

/** The KubeVirt CR's name in upstream's docs and in deploy/ (`kubectl get kubevirt kubevirt -n <namespace>`). */
export const KUBEVIRT_CR_NAME = 'kubevirt';

/** spec fields upstream's own CR manifest sets to these values, which are what kubevirt-ts does anyway */
const MATCHES_WHAT_WE_DO: Record<string, unknown> = { 'spec.imagePullPolicy': 'IfNotPresent' };
/** typed fields with a value kubevirt-ts accepts (upstream's manifests carry it) but does not implement */
const VALUES_NOT_IMPLEMENTED: Record<string, unknown[]> = {
  'spec.configuration.vmRolloutStrategy': ['LiveUpdate'],
};

/** The feature gates kubevirt-ts acts on; any other name is kept (upstream's e2e configuration turns on many) and
 * reported as not implemented. `HostDisk`: hostDisk volumes (files on the node's filesystem). */
export const FEATURE_GATES_ACTED_ON = ['HostDisk'] as const;

/** What the KubeVirt CR's configuration sets for new VMs and VMIs: defaults and the rollout of changes. */
export interface ClusterDefaults extends DefaultsOptions {
  /** Stage: a change to a running VM's template waits for its next start (RestartRequired) */
  vmRolloutStrategy: 'Stage' | 'LiveUpdate';
}

/**
 * The defaults a KubeVirt CR's `spec.configuration` gives new VMIs, as upstream's defaults read the cluster
 * configuration: the pod network's default binding (unset: `bridge`, upstream's default), whether the bridge
 * binding may be used on the pod network, the eviction strategy; and the VM rollout strategy (unset: upstream's
 * `LiveUpdate`, which kubevirt-ts carries out as `Stage`). The CRD's schema checks the values.
 */
export function clusterDefaultsFromKubeVirt(
  configuration: KubeVirtConfiguration | undefined,
): ClusterDefaults {
  const c = configuration ?? {};
  const out: ClusterDefaults = {
    defaultNetworkInterface: c.network?.defaultNetworkInterface ?? 'bridge',
    permitBridgeInterfaceOnPodNetwork: c.network?.permitBridgeInterfaceOnPodNetwork ?? true,
    vmRolloutStrategy: c.vmRolloutStrategy ?? 'LiveUpdate',
  };
  if (c.evictionStrategy) out.evictionStrategy = c.evictionStrategy;
  return out;
}

/**
 * Whether virt-operator installs the common instance types and preferences: `spec.configuration.
 * commonInstancetypesDeployment.enabled`, true when unset (as upstream).
 */
export function commonInstancetypesDeploymentEnabled(
  configuration: KubeVirtConfiguration | undefined,
): boolean {
  return configuration?.commonInstancetypesDeployment?.enabled ?? true;
}

const isEmpty = (v: unknown) =>
  v === null ||
  v === undefined ||
  (Array.isArray(v) && v.length === 0) ||
  (typeof v === 'object' && !Array.isArray(v) && Object.keys(v as object).length === 0);

/**
 * The paths of the fields of a KubeVirt CR's `spec` that kubevirt-ts does not implement (set, non-empty, and not in
 * {@link KubeVirtSchema}), e.g. `spec.configuration.network.defaultNetworkInterface`, `spec.infra`. Empty objects
 * and lists (upstream's own CR has `certificateRotateStrategy: {}`) mean nothing and are not listed.
 */
export function kubeVirtNotImplemented(kv: { spec?: unknown }): string[] {
  const out: string[] = [];
  const walk = (value: unknown, schema: TSchema | undefined, path: string) => {
    if (isEmpty(value)) return;
    if (!schema) {
      if (!(path in MATCHES_WHAT_WE_DO && MATCHES_WHAT_WE_DO[path] === value)) out.push(path);
      return;
    }
    if (VALUES_NOT_IMPLEMENTED[path]?.includes(value)) {
      out.push(`${path}=${String(value)}`);
      return;
    }
    const props = (schema as { properties?: Record<string, TSchema> }).properties;
    if (!props || typeof value !== 'object' || Array.isArray(value)) return; // a typed leaf: the CRD checks it
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) walk(v, props[k], `${path}.${k}`);
  };
  walk(kv.spec, KubeVirtSpecSchema, 'spec');
  const gates = (kv.spec as KubeVirt['spec'] | undefined)?.configuration?.developerConfiguration
    ?.featureGates;
  (Array.isArray(gates) ? gates : []).forEach((g, i) => {
    if (!(FEATURE_GATES_ACTED_ON as readonly unknown[]).includes(g))
      out.push(`spec.configuration.developerConfiguration.featureGates[${i}]=${String(g)}`);
  });
  return out;
}
