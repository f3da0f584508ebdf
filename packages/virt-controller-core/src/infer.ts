// inferFromVolume: a VM's instance type and preference named by labels on the volume it boots from, as upstream's VM
// mutator infers them at admission (pkg/instancetype/infer in v1.9.0). The volume's PersistentVolumeClaim, or its
// DataVolume (a dataVolumeTemplate of the VM, else the DataVolume object, else a PVC of that name once CDI has
// garbage-collected it), the PVC, DataSource or VolumeSnapshot a DataVolume copies from, carry
// `instancetype.kubevirt.io/default-instancetype` (`-kind`) and `instancetype.kubevirt.io/default-preference`
// (`-kind`). The matcher then names what was found and `inferFromVolume` is gone, as upstream stores it.
import { isNotFound, type KubeClient, type KubeObject, type Resource } from '@kubevirt-ts/controller-runtime';
import type { VirtualMachine } from '@kubevirt-ts/api';
import { DATA_SOURCES, DATA_VOLUMES, PVCS } from './claims.js';

/** the labels upstream reads (instancetype.kubevirt.io's `DefaultInstancetypeLabel` and friends) */
export const INFER_LABELS = {
  instancetype: {
    name: 'instancetype.kubevirt.io/default-instancetype',
    kind: 'instancetype.kubevirt.io/default-instancetype-kind',
  },
  preference: {
    name: 'instancetype.kubevirt.io/default-preference',
    kind: 'instancetype.kubevirt.io/default-preference-kind',
  },
} as const;

const VOLUME_SNAPSHOTS: Resource = {
  group: 'snapshot.storage.k8s.io',
  version: 'v1',
  plural: 'volumesnapshots',
  namespaced: true,
};

/** An inference failure that `inferFromVolumeFailurePolicy: Ignore` turns into "no matcher" (upstream's kinds). */
export class IgnorableInferenceError extends Error {
  override name = 'IgnorableInferenceError';
}

type Labels = Record<string, string> | undefined;
type Found = { name: string; kind?: string };
type LabelPair = (typeof INFER_LABELS)[keyof typeof INFER_LABELS];

interface DvSpec {
  source?: { pvc?: { name?: string; namespace?: string }; snapshot?: { name?: string; namespace?: string } };
  sourceRef?: { kind?: string; name?: string; namespace?: string };
}

function fromLabels(labels: Labels, l: LabelPair): Found {
  const name = labels?.[l.name];
  if (name === undefined)
    throw new IgnorableInferenceError(`unable to find required ${l.name} label on the volume`);
  const kind = labels?.[l.kind];
  return kind ? { name, kind } : { name };
}

/** labels first, then `next` when they do not name it (a DataVolume or DataSource before what it copies) */
async function labelsOr(labels: Labels, l: LabelPair, next: () => Promise<Found>): Promise<Found> {
  try {
    return fromLabels(labels, l);
  } catch (e) {
    if (!(e instanceof IgnorableInferenceError)) throw e;
    return next();
  }
}

async function labelsOf(
  client: KubeClient,
  r: Resource,
  ns: string,
  name: string | undefined,
): Promise<Labels> {
  const o = await client.get<KubeObject>(r, ns, name ?? '');
  return o.metadata?.labels;
}

async function fromDvSpec(
  client: KubeClient,
  spec: DvSpec | undefined,
  ns: string,
  l: LabelPair,
): Promise<Found> {
  const pvc = spec?.source?.pvc;
  if (pvc) return fromLabels(await labelsOf(client, PVCS, pvc.namespace ?? ns, pvc.name), l);
  const snap = spec?.source?.snapshot;
  if (snap) return fromLabels(await labelsOf(client, VOLUME_SNAPSHOTS, snap.namespace ?? ns, snap.name), l);
  const ref = spec?.sourceRef;
  if (ref) {
    if (ref.kind !== 'DataSource')
      throw new IgnorableInferenceError(
        `unable to infer defaults from DataVolumeSourceRef as Kind ${ref.kind ?? ''} is not supported`,
      );
    const dsNs = ref.namespace ?? ns;
    const ds = await client.get<KubeObject & { spec?: DvSpec }>(DATA_SOURCES, dsNs, ref.name ?? '');
    return labelsOr(ds.metadata?.labels, l, async () => {
      const src = ds.spec?.source;
      if (!src?.pvc && !src?.snapshot)
        throw new IgnorableInferenceError(
          "unable to infer defaults from DataSource that doesn't provide DataVolumeSourcePVC or DataVolumeSourceSnapshot",
        );
      return fromDvSpec(client, { source: src }, dsNs, l);
    });
  }
  throw new IgnorableInferenceError(
    'unable to infer defaults from DataVolumeSpec as DataVolumeSource is not supported',
  );
}

async function fromVolume(
  client: KubeClient,
  vm: VirtualMachine,
  volumeName: string,
  l: LabelPair,
): Promise<Found> {
  const ns = vm.metadata.namespace ?? 'default';
  const volume = (vm.spec.template?.spec?.volumes ?? []).find((v) => v.name === volumeName);
  if (!volume) throw new Error(`unable to find volume ${volumeName} to infer defaults`);
  if (volume.persistentVolumeClaim)
    return fromLabels(await labelsOf(client, PVCS, ns, volume.persistentVolumeClaim.claimName), l);
  const dvName = volume.dataVolume?.name;
  if (dvName === undefined)
    throw new IgnorableInferenceError(
      `unable to infer defaults from volume ${volumeName} as type is not supported`,
    );
  const template = (vm.spec.dataVolumeTemplates ?? []).find(
    (t) => (t as { metadata?: { name?: string } }).metadata?.name === dvName,
  ) as { spec?: DvSpec } | undefined;
  if (template) return fromDvSpec(client, template.spec, ns, l);
  let dv: (KubeObject & { spec?: DvSpec }) | undefined;
  try {
    dv = await client.get<KubeObject & { spec?: DvSpec }>(DATA_VOLUMES, ns, dvName);
  } catch (e) {
    // a DataVolume CDI garbage-collected (or no CDI at all): its PVC has the same name
    if (!isNotFound(e)) throw e;
    return fromLabels(await labelsOf(client, PVCS, ns, dvName), l);
  }
  return labelsOr(dv.metadata?.labels, l, () => fromDvSpec(client, dv.spec, ns, l));
}

/**
 * A copy of `vm` with `spec.instancetype` / `spec.preference` inferred from the volume their `inferFromVolume`
 * names, as upstream's VM mutator does; `undefined` when neither asks for it (or a matcher also names an object:
 * validation refuses that, naming the field). With `inferFromVolumeFailurePolicy: Ignore`, an ignorable failure
 * (a volume type or DataVolume source that cannot carry the labels, or no label) removes the matcher, and an
 * inferred instance type clears the template's `domain.memory` (the instance type gives it). Any other failure
 * (the volume or the claim does not exist, the API server refuses the read) throws with upstream's message.
 */
export async function inferFromVolumes(
  client: KubeClient,
  vm: VirtualMachine,
): Promise<VirtualMachine | undefined> {
  const wants = (['instancetype', 'preference'] as const).filter((f) => {
    const m = vm.spec?.[f];
    return m?.inferFromVolume && !m.name && !m.kind;
  });
  if (wants.length === 0) return undefined;
  const out = structuredClone(vm);
  for (const field of wants) {
    const m = out.spec[field]!;
    const ignore = m.inferFromVolumeFailurePolicy === 'Ignore';
    let found: Found;
    try {
      found = await fromVolume(client, out, m.inferFromVolume!, INFER_LABELS[field]);
    } catch (e) {
      if (e instanceof IgnorableInferenceError && ignore) {
        delete out.spec[field];
        continue;
      }
      throw e;
    }
    if (field === 'instancetype' && ignore) delete out.spec.template.spec.domain.memory;
    out.spec[field] = found;
  }
  return out;
}
