// Instance types and preferences of VMs (instancetype.kubevirt.io/v1beta1), as upstream v1.9.0's
// pkg/instancetype find/ and revision/: a VM uses the instance type and preference stored in ControllerRevisions it
// owns (recorded in status.instancetypeRef / preferenceRef), so a later change of the instance type does not change
// the VM; the live objects are read only to make those revisions (and at admission).
import {
  INSTANCETYPE_GROUP,
  REVISION_LABELS,
  controllerRevisionFor,
  instancetypeKindOf,
  preferenceKindOf,
  type Instancetype,
  type InstancetypeStatusRef,
  type Preference,
  type VirtualMachineInstancetypeSpec,
  type VirtualMachinePreferenceSpec,
} from '@kubevirt-ts/api';
import {
  deepEqual,
  isAlreadyExists,
  type KubeClient,
  type KubeObject,
  type Resource,
} from '@kubevirt-ts/controller-runtime';
import { SyncError, errorMessage, vmOwnerReference, type Vm } from './common.js';

const res = (plural: string, namespaced: boolean): Resource => ({
  group: INSTANCETYPE_GROUP,
  version: 'v1beta1',
  plural,
  namespaced,
});
/** instancetype.kubevirt.io/v1beta1 VirtualMachineInstancetypes (namespaced) */
export const INSTANCETYPES = res('virtualmachineinstancetypes', true);
/** instancetype.kubevirt.io/v1beta1 VirtualMachineClusterInstancetypes (cluster-scoped) */
export const CLUSTER_INSTANCETYPES = res('virtualmachineclusterinstancetypes', false);
/** instancetype.kubevirt.io/v1beta1 VirtualMachinePreferences (namespaced) */
export const PREFERENCES = res('virtualmachinepreferences', true);
/** instancetype.kubevirt.io/v1beta1 VirtualMachineClusterPreferences (cluster-scoped) */
export const CLUSTER_PREFERENCES = res('virtualmachineclusterpreferences', false);
/** apps/v1 ControllerRevisions: where a VM keeps the instance type and preference it uses */
export const CONTROLLER_REVISIONS: Resource = {
  group: 'apps',
  version: 'v1',
  plural: 'controllerrevisions',
  namespaced: true,
};

/** upstream's VMI annotations naming the instance type and preference a VM's VMI got */
export const ANNOTATIONS = {
  VirtualMachineInstancetype: 'kubevirt.io/instancetype-name',
  VirtualMachineClusterInstancetype: 'kubevirt.io/cluster-instancetype-name',
  VirtualMachinePreference: 'kubevirt.io/preference-name',
  VirtualMachineClusterPreference: 'kubevirt.io/cluster-preference-name',
} as const;

/** The instance type and preference specs a VM uses (either absent when the VM names none). */
export interface VmSpecs {
  instancetype?: VirtualMachineInstancetypeSpec;
  preference?: VirtualMachinePreferenceSpec;
}

interface Which {
  field: 'instancetype' | 'preference';
  statusField: 'instancetypeRef' | 'preferenceRef';
  kind: string;
  resource: Resource;
  /** upstream's sync error reason when it is not found */
  reason: string;
}
function which(vm: Vm, field: 'instancetype' | 'preference'): Which | undefined {
  const m = vm.spec[field];
  if (!m) return undefined;
  const it = field === 'instancetype';
  const kind = it ? instancetypeKindOf(m) : preferenceKindOf(m);
  const resource = {
    VirtualMachineInstancetype: INSTANCETYPES,
    VirtualMachineClusterInstancetype: CLUSTER_INSTANCETYPES,
    VirtualMachinePreference: PREFERENCES,
    VirtualMachineClusterPreference: CLUSTER_PREFERENCES,
  }[kind];
  const statusField = it ? 'instancetypeRef' : 'preferenceRef';
  return {
    field,
    statusField,
    kind,
    resource,
    reason: it ? 'FailedFindInstancetype' : 'FailedFindPreference',
  };
}

type Revision = KubeObject & { data?: { spec?: unknown } };

/** The live instance type or preference a VM names (its namespace for the namespaced kinds). */
async function getObject(client: KubeClient, vm: Vm, w: Which): Promise<Instancetype | Preference> {
  const name = vm.spec[w.field]?.name ?? '';
  try {
    return await client.get<Instancetype & KubeObject>(
      w.resource,
      w.resource.namespaced ? vm.metadata.namespace : undefined,
      name,
    );
  } catch (e) {
    throw new SyncError(w.reason, errorMessage(e));
  }
}

/**
 * The spec of what a VM names (upstream's spec finders): the ControllerRevision of `spec.<field>.revisionName`,
 * else the one of `status.<ref>.controllerRevisionRef` when it holds the object the VM names, else the live object.
 * Throws a SyncError (reason FailedFindInstancetype / FailedFindPreference) when it cannot be read.
 */
async function findSpec(client: KubeClient, vm: Vm, w: Which): Promise<unknown> {
  const m = vm.spec[w.field]!;
  const ns = vm.metadata.namespace;
  const read = async (name: string) => {
    try {
      return await client.get<Revision>(CONTROLLER_REVISIONS, ns, name);
    } catch (e) {
      throw new SyncError(w.reason, errorMessage(e));
    }
  };
  if (m.revisionName) return (await read(m.revisionName)).data?.spec;
  const ref = vm.status?.[w.statusField]?.controllerRevisionRef?.name;
  if (ref) {
    const cr = await read(ref);
    if (cr.metadata?.labels?.[REVISION_LABELS.name] === m.name) return cr.data?.spec;
  }
  return (await getObject(client, vm, w)).spec;
}

/**
 * The instance type and preference specs a VM uses (see findSpec); {} when it names neither. `ignoreMissing`:
 * what cannot be read is left out (admission, as upstream's, lets such a VM in: its controller reports it).
 */
export async function findVmSpecs(
  client: KubeClient,
  vm: Vm,
  o: { ignoreMissing?: boolean } = {},
): Promise<VmSpecs> {
  const out: VmSpecs = {};
  const find = async (w: Which | undefined) => {
    if (!w) return undefined;
    try {
      return await findSpec(client, vm, w);
    } catch (e) {
      if (o.ignoreMissing && e instanceof SyncError) return undefined;
      throw e;
    }
  };
  const it = await find(which(vm, 'instancetype'));
  if (it) out.instancetype = it as VirtualMachineInstancetypeSpec;
  const pref = await find(which(vm, 'preference'));
  if (pref) out.preference = pref as VirtualMachinePreferenceSpec;
  return out;
}

/** Stores the object in a ControllerRevision owned by the VM (an equal one already there is reused). */
async function storeRevision(
  client: KubeClient,
  vm: Vm,
  w: Which,
  o: Instancetype | Preference,
): Promise<string> {
  const cr = controllerRevisionFor(vm.metadata.name!, w.kind, o) as Revision &
    ReturnType<typeof controllerRevisionFor>;
  const ns = vm.metadata.namespace;
  const body = {
    ...cr,
    metadata: {
      ...cr.metadata,
      namespace: ns,
      ownerReferences: [vmOwnerReference(vm)],
    },
  };
  try {
    await client.create<KubeObject>(CONTROLLER_REVISIONS, ns, body);
  } catch (e) {
    if (!isAlreadyExists(e))
      throw new SyncError('FailedCreate', `failed to create ControllerRevision: ${errorMessage(e)}`);
    const existing = await client.get<Revision>(CONTROLLER_REVISIONS, ns, cr.metadata.name);
    if (!deepEqual(existing.data?.spec, cr.data.spec))
      throw new SyncError(
        'FailedCreate',
        `found existing ControllerRevision with unexpected data: ${cr.metadata.name}`,
      );
  }
  return cr.metadata.name;
}

/**
 * The status refs a VM should have (upstream's revision Store and syncStatusWithMatcher): the name and kind it
 * names, and the ControllerRevision holding what it names: `revisionName` when given, the one already recorded
 * while the name and kind stay the same, else a new one made now from the live object. `check` may refuse the
 * live instance type before it is stored (upstream checks conflicts once more). Returns undefined when the status
 * already says so.
 */
export async function storeVmRevisions(
  client: KubeClient,
  vm: Vm,
  check?: (instancetype: VirtualMachineInstancetypeSpec) => void,
): Promise<Pick<NonNullable<Vm['status']>, 'instancetypeRef' | 'preferenceRef'> | undefined> {
  const out: { instancetypeRef?: InstancetypeStatusRef; preferenceRef?: InstancetypeStatusRef } = {};
  let changed = false;
  for (const field of ['instancetype', 'preference'] as const) {
    const w = which(vm, field);
    if (!w) continue;
    const m = vm.spec[field]!;
    const cur = vm.status?.[w.statusField] ?? {};
    const ref: InstancetypeStatusRef = structuredClone(cur);
    let clear = false;
    if (m.name && m.name !== ref.name) {
      ref.name = m.name;
      clear = true;
    }
    if (m.kind && m.kind !== ref.kind) {
      ref.kind = m.kind;
      clear = true;
    }
    if (clear) delete ref.controllerRevisionRef;
    if (m.revisionName && ref.controllerRevisionRef?.name !== m.revisionName)
      ref.controllerRevisionRef = { name: m.revisionName };
    if (!ref.controllerRevisionRef?.name) {
      const o = await getObject(client, vm, w);
      if (field === 'instancetype' && check) check(o.spec as VirtualMachineInstancetypeSpec);
      ref.controllerRevisionRef = { name: await storeRevision(client, vm, w, o) };
    }
    out[w.statusField] = ref;
    if (!deepEqual(ref, cur)) changed = true;
  }
  return changed ? out : undefined;
}

/** upstream's VMI annotations: which instance type and preference (by kind) the VM names */
export function instancetypeAnnotations(vm: Vm): Record<string, string> {
  const out: Record<string, string> = {};
  for (const field of ['instancetype', 'preference'] as const) {
    const w = which(vm, field);
    if (w) out[ANNOTATIONS[w.kind as keyof typeof ANNOTATIONS]] = vm.spec[field]?.name ?? '';
  }
  return out;
}
