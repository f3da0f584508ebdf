// Node drain, admission side (as upstream's pod-eviction admitter, virt-api): an Eviction (policy/v1) of a
// virt-launcher Pod whose VMI is to be live-migrated (or handled by someone else: `External`) is refused with 429,
// and the VMI is marked for evacuation (`status.evacuationNodeName`); the evacuation controller (evacuation.ts)
// then creates its migration. `kubectl drain` retries the eviction until the Pod is gone (deleted by
// virt-controller once the migration completed). Every decision is taken from the API server's objects: the Pod
// named by the request, then its VMI; nothing of the Eviction's body but its dry-run option is trusted.
import type { DefaultsOptions } from '@kubevirt-ts/api';
import { PODS, VMIS as VMI_RESOURCE, isNotFound, type KubeClient } from '@kubevirt-ts/controller-runtime';
import { ANNOTATION_DOMAIN, LABEL_APP, LABEL_CREATED_BY } from '@kubevirt-ts/renderer';
import type { AdmissionRequest, AdmissionResponse } from './admission.js';
import { controllerRef, errorMessage, hasCondition, type Vmi } from './common.js';
import type { Pod } from './context.js';

/** where the webhook server answers the pods/eviction webhook (upstream's virt-api path) */
export const POD_EVICTION_PATH = '/pod-eviction-validate';

/** upstream's eviction strategies: None, LiveMigrate, LiveMigrateIfPossible, External */
export type EvictionStrategy = NonNullable<DefaultsOptions['evictionStrategy']>;

/** A VMI's eviction strategy: its own, else the cluster's (the KubeVirt CR's `spec.configuration`); none: undefined. */
export function evictionStrategyOf(
  vmi: Vmi,
  clusterStrategy?: EvictionStrategy,
): EvictionStrategy | undefined {
  return (vmi.spec?.evictionStrategy as EvictionStrategy | undefined) ?? clusterStrategy;
}

/** virt-handler found the VMI live-migratable (its `LiveMigratable` condition is True). */
export const isLiveMigratable = (vmi: Vmi): boolean =>
  hasCondition(vmi.status?.conditions, 'LiveMigratable', 'True');

/** The VMI is to be live-migrated when its node is drained: LiveMigrate, or LiveMigrateIfPossible and migratable. */
export function migratableOnEviction(vmi: Vmi, clusterStrategy?: EvictionStrategy): boolean {
  const s = evictionStrategyOf(vmi, clusterStrategy);
  return s === 'LiveMigrate' || (s === 'LiveMigrateIfPossible' && isLiveMigratable(vmi));
}

/** What {@link strategyDecision} answers: allow the eviction, refuse it with a message, or mark the VMI. */
export type StrategyDecision = { action: 'allow' } | { action: 'deny'; message: string } | { action: 'mark' };

/**
 * What an eviction of a VMI's launcher Pod does, by the VMI's eviction strategy and whether it is migratable:
 * `allow` (the Pod goes; None, no strategy, or LiveMigrateIfPossible when not migratable), `deny` with a message
 * (LiveMigrate when not migratable), or `mark` (LiveMigrate when migratable, LiveMigrateIfPossible when
 * migratable, External: the VMI is marked for evacuation and the eviction refused).
 */
export function strategyDecision(vmi: Vmi, clusterStrategy?: EvictionStrategy): StrategyDecision {
  const migratable = isLiveMigratable(vmi);
  switch (evictionStrategyOf(vmi, clusterStrategy)) {
    case 'LiveMigrate':
      return migratable
        ? { action: 'mark' }
        : {
            action: 'deny',
            message: `VMI ${vmi.metadata.name} is configured with an eviction strategy but is not live-migratable`,
          };
    case 'LiveMigrateIfPossible':
      return migratable ? { action: 'mark' } : { action: 'allow' };
    case 'External':
      return { action: 'mark' };
    default:
      return { action: 'allow' };
  }
}

/** The message of a refused eviction that marked the VMI (the descheduler matches on it, as upstream's). */
export const evacuationMessage = (vmi: Vmi): string =>
  `Eviction triggered evacuation of VMI "${vmi.metadata.namespace}/${vmi.metadata.name}"`;

/** An AdmissionRequest of a subresource: the API server names the Pod here (the Eviction's body is the client's). */
type EvictionRequest = AdmissionRequest & { name?: string; namespace?: string; subResource?: string };

/**
 * The pods/eviction webhook. The Pod is read from the API server by the request's name; a Pod that is not a
 * virt-launcher, has completed, or names no VMI is allowed. Its VMI (the Pod's controller owner reference, else its
 * `kubevirt.io/domain` annotation) decides with {@link strategyDecision}; to mark it, the VMI must not be marked
 * already (`Evacuation in progress: ...`) and must run on the Pod's node (else the Pod is a migration target:
 * `Eviction request for target Pod`). Refusals are 429 TooManyRequests, as upstream's: clients retry them.
 * A dry run (the request's, or the Eviction's `deleteOptions.dryRun: [All]`) marks with a dry-run patch.
 */
export async function admitPodEviction(
  req: AdmissionRequest,
  client: KubeClient,
  clusterStrategy?: EvictionStrategy,
): Promise<AdmissionResponse> {
  const r = req as EvictionRequest;
  const allow: AdmissionResponse = { uid: req.uid, allowed: true };
  const deny = (message: string): AdmissionResponse => ({
    uid: req.uid,
    allowed: false,
    status: { code: 429, reason: 'TooManyRequests', message },
  });
  if (r.subResource !== undefined && r.subResource !== 'eviction') return allow;
  if (r.operation !== 'CREATE' || !r.namespace || !r.name) return allow;
  let pod: Pod | undefined;
  try {
    pod = await client.getOrUndefined<Pod>(PODS, r.namespace, r.name);
  } catch {
    pod = undefined; // as upstream: a Pod that cannot be read is not protected
  }
  if (!pod || pod.metadata?.labels?.[LABEL_APP] !== 'virt-launcher') return allow;
  if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') return allow;
  const vmiName =
    controllerRef(pod, 'VirtualMachineInstance')?.name ?? pod.metadata?.annotations?.[ANNOTATION_DOMAIN];
  if (!vmiName) return allow;
  let vmi: Vmi;
  try {
    vmi = await client.get<Vmi>(VMI_RESOURCE, r.namespace, vmiName);
  } catch (e) {
    // upstream refuses while the VMI cannot be read (a missing one too: the garbage collector removes its Pod)
    return deny(
      `kubevirt failed getting the vmi: ${isNotFound(e) ? `"${vmiName}" not found` : errorMessage(e)}`,
    );
  }
  // a Pod of an earlier VMI of that name: nothing of the current VMI runs in it
  const createdBy = pod.metadata?.labels?.[LABEL_CREATED_BY];
  if (createdBy && vmi.metadata.uid && createdBy !== vmi.metadata.uid) return allow;
  const d = strategyDecision(vmi, clusterStrategy);
  if (d.action === 'allow') return allow;
  if (d.action === 'deny') return deny(d.message);
  if (vmi.status?.evacuationNodeName) return deny(`Evacuation in progress: ${evacuationMessage(vmi)}`);
  if (vmi.status?.nodeName !== pod.spec?.nodeName) return deny('Eviction request for target Pod');
  const eviction = req.object as { deleteOptions?: { dryRun?: unknown } } | undefined;
  const evDryRun = eviction?.deleteOptions?.dryRun;
  const dryRun = req.dryRun === true || (Array.isArray(evDryRun) && evDryRun[0] === 'All');
  try {
    await markForEvacuation(client, vmi, pod.spec!.nodeName!, dryRun);
  } catch (e) {
    return deny(`kubevirt failed marking the vmi for eviction: ${errorMessage(e)}`);
  }
  return deny(evacuationMessage(vmi));
}

/** Sets `status.evacuationNodeName` of the VMI (this VMI: its uid is tested); `dryRun`: the API server only checks. */
export async function markForEvacuation(
  client: KubeClient,
  vmi: Vmi,
  nodeName: string,
  dryRun = false,
): Promise<void> {
  const ops = [
    { op: 'test', path: '/metadata/uid', value: vmi.metadata.uid },
    vmi.status
      ? { op: 'add', path: '/status/evacuationNodeName', value: nodeName }
      : { op: 'add', path: '/status', value: { evacuationNodeName: nodeName } },
  ];
  const path =
    `/apis/kubevirt.io/v1/namespaces/${encodeURIComponent(vmi.metadata.namespace!)}/virtualmachineinstances/` +
    `${encodeURIComponent(vmi.metadata.name!)}${dryRun ? '?dryRun=All' : ''}`;
  await client.request('PATCH', path, ops, 'application/json-patch+json');
}
