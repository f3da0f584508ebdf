// The migration options of one VMI: the cluster's (spec.configuration.migrations of the KubeVirt CR, defaults filled
// in) with the MigrationPolicy that matches the VMI and its namespace laid over them, as upstream's migration
// controller hands them to virt-handler. Policies and the namespace are read when a migration is handed off (once
// per migration: no informer).
import { applyMigrationPolicy, matchMigrationPolicy, type MigrationPolicy } from '@kubevirt-ts/api';
import { isNotFound, type KubeClient, type KubeObject, type Resource } from '@kubevirt-ts/controller-runtime';
import type { MigrationConfiguration } from '@kubevirt-ts/renderer';
import type { Vmi } from './common.js';

/** migrations.kubevirt.io/v1alpha1 MigrationPolicies (cluster-scoped) */
export const MIGRATION_POLICIES: Resource = {
  group: 'migrations.kubevirt.io',
  version: 'v1alpha1',
  plural: 'migrationpolicies',
  namespaced: false,
};
const NAMESPACES: Resource = { group: '', version: 'v1', plural: 'namespaces', namespaced: false };

/** What a migration is handed off with: its options, and the name of the policy they came from (if any). */
export interface MigrationOptions {
  /** upstream's `migrationConfiguration`; `allowWorkloadDisruption` only when a policy set it (not acted on) */
  configuration: MigrationConfiguration & { allowWorkloadDisruption?: boolean };
  /** the matching MigrationPolicy (upstream's `migrationState.migrationPolicyName`) */
  policyName?: string;
}

/**
 * The options `vmi` migrates with: `cluster` (the cluster's configuration) with the matching policy's fields over
 * it. No policy CRD installed (404) is no policy; another error is thrown (the caller retries).
 */
export async function migrationOptionsFor(
  client: KubeClient,
  vmi: Vmi,
  cluster: MigrationConfiguration,
): Promise<MigrationOptions> {
  let policies: MigrationPolicy[];
  try {
    policies = (await client.list<KubeObject>(MIGRATION_POLICIES, undefined))
      .items as unknown as MigrationPolicy[];
  } catch (e) {
    if (isNotFound(e)) return { configuration: cluster };
    throw e;
  }
  if (policies.length === 0) return { configuration: cluster };
  const ns = await client.get<KubeObject>(NAMESPACES, undefined, vmi.metadata.namespace!);
  const policy = matchMigrationPolicy(policies, vmi.metadata.labels, ns.metadata?.labels);
  if (!policy?.spec) return { configuration: cluster };
  return { configuration: applyMigrationPolicy(cluster, policy.spec), policyName: policy.metadata?.name };
}
