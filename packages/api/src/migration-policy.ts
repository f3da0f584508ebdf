// migrations.kubevirt.io/v1alpha1 MigrationPolicy: cluster-scoped migration options for the VMIs (and namespaces)
// whose labels a policy selects, over the cluster's own (spec.configuration.migrations of the KubeVirt CR). Which
// policy a VMI gets and how it is laid over the cluster's options follow upstream v1.9.0's migration controller:
// the matching policy with the most matching labels wins (VMI labels break a tie, then the lowest name).
import { Type, type Static } from '@sinclair/typebox';
import { Bool, Opaque, Opt, Quantity, StringMap, Strict } from './schema-helpers.js';
import { ObjectMetaSchema } from './schemas.js';

/** The API group of MigrationPolicy. */
export const MIGRATIONS_GROUP = 'migrations.kubevirt.io';
/** The apiVersion of MigrationPolicy. */
export const MIGRATION_POLICY_API_VERSION = 'migrations.kubevirt.io/v1alpha1';

/** The fields of a policy's spec upstream has behind its MigrationStallDetection feature gate, which kubevirt-ts
 * does not implement (refused by name, as upstream refuses them while the gate is off). */
export const MIGRATION_POLICY_FIELDS_NOT_IMPLEMENTED = ['maxDowntimeMs', 'experimental'] as const;

/** TypeBox schema of a MigrationPolicy's `spec` (upstream `MigrationPolicySpec`). */
export const MigrationPolicySpecSchema = Strict({
  selectors: Strict({
    namespaceSelector: Opt(StringMap('labels the namespace of the VMI must have (all of them)')),
    virtualMachineInstanceSelector: Opt(StringMap('labels the VMI must have (all of them)')),
  }),
  allowAutoConverge: Opt(Bool('let QEMU throttle the guest CPUs until the migration converges')),
  bandwidthPerMigration: Opt(Quantity('bandwidth cap per migration, per second (0: unlimited)')),
  completionTimeoutPerGiB: Opt(
    Type.Integer({
      minimum: 0,
      description: 'seconds per GiB of guest memory before the migration is given up',
    }),
  ),
  allowPostCopy: Opt(Bool('switch to post-copy when pre-copy does not converge in time')),
  allowWorkloadDisruption: Opt(Bool('upstream: may the guest be paused to finish (default: allowPostCopy)')),
  maxDowntimeMs: Opt(Type.Integer({ minimum: 1, maximum: 2000000 })),
  experimental: Opt(Opaque('upstream: ExperimentalMigrationOptions (stall detector, compression)')),
});
/** The `spec` of a MigrationPolicy: its selectors and the migration options it sets. */
export type MigrationPolicySpec = Static<typeof MigrationPolicySpecSchema>;

/** TypeBox schema of a MigrationPolicy (cluster-scoped). */
export const MigrationPolicySchema = Type.Object(
  {
    apiVersion: Type.Literal(MIGRATION_POLICY_API_VERSION),
    kind: Type.Literal('MigrationPolicy'),
    metadata: ObjectMetaSchema,
    spec: MigrationPolicySpecSchema,
    status: Opt(Opaque()),
  },
  {
    description:
      'MigrationPolicy: migration options for the VMIs and namespaces its selectors match, over the cluster defaults',
  },
);
/** A migrations.kubevirt.io/v1alpha1 MigrationPolicy. */
export type MigrationPolicy = Static<typeof MigrationPolicySchema>;

/** How well a policy matches: the number of its VMI and namespace labels found (undefined: it does not match). */
function matchScore(
  p: MigrationPolicy,
  vmiLabels: Record<string, string> | undefined,
  nsLabels: Record<string, string> | undefined,
): { vmi: number; ns: number } | undefined {
  const s = p.spec?.selectors;
  if (!s) return undefined;
  const count = (want: Record<string, string> | undefined, have: Record<string, string> | undefined) => {
    let n = 0;
    for (const [k, v] of Object.entries(want ?? {})) {
      if (have?.[k] !== v) return -1;
      n++;
    }
    return n;
  };
  const vmi = count(s.virtualMachineInstanceSelector, vmiLabels ?? {});
  const ns = count(s.namespaceSelector, nsLabels ?? {});
  return vmi < 0 || ns < 0 ? undefined : { vmi, ns };
}

/**
 * The policy a VMI with `vmiLabels` in a namespace with `nsLabels` gets, undefined when none matches. A policy
 * matches when the VMI has every label of its `virtualMachineInstanceSelector` and the namespace every label of
 * its `namespaceSelector` (an empty selector matches everything); the one with the most matched labels wins, the
 * VMI's labels counting before the namespace's on a tie, then the lowest name.
 */
export function matchMigrationPolicy(
  policies: readonly MigrationPolicy[],
  vmiLabels: Record<string, string> | undefined,
  nsLabels: Record<string, string> | undefined,
): MigrationPolicy | undefined {
  let best: { p: MigrationPolicy; vmi: number; total: number } | undefined;
  for (const p of policies) {
    const s = matchScore(p, vmiLabels, nsLabels);
    if (!s) continue;
    const total = s.vmi + s.ns;
    const better =
      !best ||
      total > best.total ||
      (total === best.total && s.vmi > best.vmi) ||
      (total === best.total &&
        s.vmi === best.vmi &&
        (p.metadata?.name ?? '') < (best.p.metadata?.name ?? ''));
    if (better) best = { p, vmi: s.vmi, total };
  }
  return best?.p;
}

/** The migration options a policy can set (a subset of the cluster's migration configuration). */
export interface PolicyMigrationOptions {
  allowAutoConverge?: boolean;
  bandwidthPerMigration?: string | number;
  completionTimeoutPerGiB?: number;
  allowPostCopy?: boolean;
  allowWorkloadDisruption?: boolean;
}

/**
 * `base` (the cluster's options) with every option the policy sets laid over it; a new object, `base` is not
 * changed. As upstream, a policy that sets allowPostCopy but not allowWorkloadDisruption sets both.
 */
export function applyMigrationPolicy<T extends PolicyMigrationOptions>(
  base: T,
  spec: MigrationPolicySpec,
): T {
  const out = { ...base };
  if (spec.allowWorkloadDisruption === undefined && spec.allowPostCopy !== undefined)
    out.allowWorkloadDisruption = spec.allowPostCopy;
  if (spec.allowAutoConverge !== undefined) out.allowAutoConverge = spec.allowAutoConverge;
  if (spec.bandwidthPerMigration !== undefined) out.bandwidthPerMigration = spec.bandwidthPerMigration;
  if (spec.completionTimeoutPerGiB !== undefined) out.completionTimeoutPerGiB = spec.completionTimeoutPerGiB;
  if (spec.allowPostCopy !== undefined) out.allowPostCopy = spec.allowPostCopy;
  if (spec.allowWorkloadDisruption !== undefined) out.allowWorkloadDisruption = spec.allowWorkloadDisruption;
  return out;
}
