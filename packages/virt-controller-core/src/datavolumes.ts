// A VM's dataVolumeTemplates: the DataVolumes (CDI) the VM controller creates for them, owned by the VM so that the
// garbage collector removes them with it; whether they are ready for the VM's VMI; what the VM's printableStatus
// says while they provision or after they failed (upstream v1.1.0: vm.go handleDataVolumes, pkg/storage/types/dv.go).
import {
  isAlreadyExists,
  type KubeClient,
  type KubeObject,
  type Resource,
} from '@kubevirt-ts/controller-runtime';
import type { Volume } from '@kubevirt-ts/api';
import { LABEL_CREATED_BY } from '@kubevirt-ts/renderer';
import { SyncError, controllerRef, errorMessage, vmOwnerReference, type Vm } from './common.js';
import { DATA_SOURCES, DATA_VOLUMES, type DataSource, type DataVolume } from './claims.js';

const SUBJECT_ACCESS_REVIEWS: Resource = {
  group: 'authorization.k8s.io',
  version: 'v1',
  plural: 'subjectaccessreviews',
  namespaced: false,
};

interface SubjectAccessReview extends KubeObject {
  spec?: Record<string, unknown>;
  status?: { allowed?: boolean; reason?: string };
}

/** the DataVolume phases in which the VM may start its VMI (upstream's handleDataVolumes) */
const READY_PHASES = ['Succeeded', 'WaitForFirstConsumer', 'PendingPopulation'];

/** A dataVolumeTemplates entry (kept opaque by the API schema: what CDI validates is CDI's). */
export interface DataVolumeTemplate {
  metadata?: { name?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: DataVolume['spec'];
}

/** the VM's dataVolumeTemplates */
export const templatesOf = (vm: Vm): DataVolumeTemplate[] =>
  (vm.spec.dataVolumeTemplates ?? []) as DataVolumeTemplate[];

/** The DataVolume the VM controller creates for a template: the template's spec, labels and annotations, owned by the VM. */
export function dataVolumeFromTemplate(t: DataVolumeTemplate, vm: Vm): DataVolume {
  const spec = structuredClone(t.spec ?? {});
  const priorityClassName = vm.spec.template?.spec?.priorityClassName;
  if (!spec.priorityClassName && priorityClassName) spec.priorityClassName = priorityClassName;
  return {
    apiVersion: 'cdi.kubevirt.io/v1beta1',
    kind: 'DataVolume',
    metadata: {
      name: t.metadata?.name,
      namespace: vm.metadata.namespace,
      labels: { ...(t.metadata?.labels ?? {}), [LABEL_CREATED_BY]: vm.metadata.uid! },
      annotations: { ...(t.metadata?.annotations ?? {}) },
      ownerReferences: [vmOwnerReference(vm)],
    },
    spec,
  };
}

/** What a clone template copies: a claim or a VolumeSnapshot; undefined when it is no clone. */
async function cloneSource(
  client: KubeClient,
  ns: string,
  dv: DataVolume,
): Promise<{ kind: 'pvc' | 'snapshot'; namespace: string; name: string } | undefined> {
  let src = dv.spec?.source;
  let srcNs = ns;
  const ref = dv.spec?.sourceRef;
  if (!src?.pvc && !src?.snapshot && ref) {
    if (ref.kind !== 'DataSource')
      throw new SyncError(
        'FailedCreate',
        `DataVolume ${dv.metadata?.name}: sourceRef kind ${ref.kind} is not supported`,
      );
    srcNs = ref.namespace || ns;
    // a DataSource that is not there yet: CDI waits for it; nothing to authorize against yet (upstream the same)
    src = (await client.getOrUndefined<DataSource>(DATA_SOURCES, srcNs, ref.name ?? ''))?.spec?.source;
  }
  if (src?.pvc) return { kind: 'pvc', namespace: src.pvc.namespace || srcNs, name: src.pvc.name ?? '' };
  if (src?.snapshot)
    return { kind: 'snapshot', namespace: src.snapshot.namespace || srcNs, name: src.snapshot.name ?? '' };
  return undefined;
}

/**
 * Upstream's clone authorization, with CDI's rules for a service account: the VM's (its serviceAccount volume, else
 * `default`) may clone from its own namespace; from another one only if SubjectAccessReviews say it may `create`
 * `datavolumes/source` there, or else (a claim) `create` pods there, or (a snapshot) both `create` pods and
 * `create` pvcs there. Without it anyone allowed to create VMs could copy any claim of any namespace through
 * virt-controller.
 */
async function authorizeClone(client: KubeClient, vm: Vm, dv: DataVolume): Promise<void> {
  const ns = vm.metadata.namespace ?? 'default';
  const source = await cloneSource(client, ns, dv);
  if (!source || source.namespace === ns) return;
  const sa =
    (vm.spec.template?.spec?.volumes ?? []).find((v) => v.serviceAccount)?.serviceAccount
      ?.serviceAccountName || 'default';
  const may = async (group: string, resource: string, subresource?: string): Promise<boolean> => {
    const review = await client.create<SubjectAccessReview>(SUBJECT_ACCESS_REVIEWS, undefined, {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      metadata: {},
      spec: {
        user: `system:serviceaccount:${ns}:${sa}`,
        groups: ['system:serviceaccounts', `system:serviceaccounts:${ns}`, 'system:authenticated'],
        resourceAttributes: {
          namespace: source.namespace,
          verb: 'create',
          group,
          resource,
          ...(subresource ? { subresource } : {}),
          name: source.name,
        },
      },
    });
    return review.status?.allowed === true;
  };
  if (await may('cdi.kubevirt.io', 'datavolumes', 'source')) return;
  if (source.kind === 'pvc' ? await may('', 'pods') : (await may('', 'pods')) && (await may('', 'pvcs')))
    return;
  throw new SyncError(
    'UnauthorizedDataVolumeCreate',
    `Not authorized to create DataVolume ${dv.metadata?.name}: service account ${ns}/${sa} may not clone ${source.namespace}/${source.name} (it needs create on datavolumes/source in namespace ${source.namespace})`,
  );
}

export interface DataVolumeSync {
  /** every template's DataVolume (or a claim of its name) can be used by the VMI */
  ready: boolean;
  /** DataVolumes this sync created */
  created: string[];
  /** templates whose DataVolume failed */
  failed: string[];
}

/**
 * Creates the DataVolume of each template that has neither a DataVolume nor a claim of its name (a claim of that
 * name is used as it is, as upstream does), and says whether all are ready for the VMI: Succeeded,
 * WaitForFirstConsumer or PendingPopulation. A DataVolume of that name controlled by another object is an error.
 */
export async function syncDataVolumes(
  client: KubeClient,
  vm: Vm,
  cached: (ns: string, name: string) => DataVolume | undefined,
  claimExists: (ns: string, name: string) => boolean,
): Promise<DataVolumeSync> {
  const ns = vm.metadata.namespace ?? 'default';
  const out: DataVolumeSync = { ready: true, created: [], failed: [] };
  for (const t of templatesOf(vm)) {
    const name = t.metadata?.name ?? '';
    const dv = cached(ns, name);
    if (!dv) {
      if (claimExists(ns, name)) continue;
      out.ready = false;
      const want = dataVolumeFromTemplate(t, vm);
      await authorizeClone(client, vm, want);
      try {
        await client.create<DataVolume>(DATA_VOLUMES, ns, want);
        out.created.push(name);
      } catch (e) {
        // the cache lags behind a create of an earlier sync
        if (isAlreadyExists(e)) continue;
        throw new SyncError(
          'FailedDataVolumeCreate',
          `Error creating DataVolume ${name}: ${errorMessage(e)}`,
        );
      }
      continue;
    }
    const owner =
      controllerRef(dv, 'VirtualMachine') ?? dv.metadata?.ownerReferences?.find((r) => r.controller);
    if (owner && owner.uid !== vm.metadata.uid)
      throw new SyncError(
        'FailedDataVolumeCreate',
        `spec.dataVolumeTemplates: DataVolume ${ns}/${name} exists and is controlled by ${owner.kind} ${owner.name}, not by this VirtualMachine`,
      );
    const phase = dv.status?.phase ?? '';
    if (!READY_PHASES.includes(phase)) {
      out.ready = false;
      if (phase === 'Failed') out.failed.push(name);
    }
  }
  return out;
}

const dataVolumeNames = (volumes: Volume[] | undefined): string[] =>
  (volumes ?? []).map((v) => v.dataVolume?.name).filter((n): n is string => !!n);

/**
 * upstream's HasDataVolumeErrors: why a DataVolume the VM's disks use failed or its importer stopped on an error
 * (`message`, upstream's), with the reason of CDI's Running condition (else `Failed`); undefined when none did.
 */
export function dataVolumeError(
  ns: string,
  volumes: Volume[] | undefined,
  get: (ns: string, name: string) => DataVolume | undefined,
): { reason: string; message: string } | undefined {
  for (const name of dataVolumeNames(volumes)) {
    const dv = get(ns, name);
    if (!dv) continue;
    const running = dv.status?.conditions?.find((c) => c.type === 'Running');
    if (dv.status?.phase === 'Failed')
      return { reason: running?.reason || 'Failed', message: `DataVolume ${name} is in Failed phase` };
    if (running?.status === 'False' && running.reason === 'Error')
      return {
        reason: running.reason,
        message: `DataVolume ${name} importer has stopped running due to an error: ${running.message ?? ''}`,
      };
  }
  return undefined;
}

/** upstream's HasDataVolumeProvisioning: a DataVolume the VM's disks use is being populated (not waiting for a consumer) */
export function dataVolumeProvisioning(
  ns: string,
  volumes: Volume[] | undefined,
  get: (ns: string, name: string) => DataVolume | undefined,
): boolean {
  return dataVolumeNames(volumes).some((name) => {
    const dv = get(ns, name);
    const phase = dv?.status?.phase;
    if (!dv || phase === 'Succeeded' || phase === 'PendingPopulation') return false;
    const bound = dv.status?.conditions?.some((c) => c.type === 'Bound' && c.status === 'True');
    return bound || phase !== 'WaitForFirstConsumer';
  });
}
