// The PersistentVolumeClaims behind a VMI's volumes, as the VMI controller reads them from the API server (informers
// on claims and DataVolumes; StorageClasses read on demand): whether the launcher Pod can be created yet,
// the volumeMode the renderer needs, and `status.volumeStatus[].persistentVolumeClaimInfo` (upstream v1.9.0:
// pkg/virt-controller/watch/vmi's areDataVolumesReady / processPVCInfo and pkg/storage/types/pvc.go).
import type { KubeObject, Resource } from '@kubevirt-ts/controller-runtime';
import type { ClaimInfo } from '@kubevirt-ts/renderer';
import type { PersistentVolumeClaimInfo } from '@kubevirt-ts/api';
import type { Vmi } from './common.js';

export const PVCS: Resource = {
  group: '',
  version: 'v1',
  plural: 'persistentvolumeclaims',
  namespaced: true,
};
export const STORAGE_CLASSES: Resource = {
  group: 'storage.k8s.io',
  version: 'v1',
  plural: 'storageclasses',
  namespaced: false,
};
export const DATA_VOLUMES: Resource = {
  group: 'cdi.kubevirt.io',
  version: 'v1beta1',
  plural: 'datavolumes',
  namespaced: true,
};
export const DATA_SOURCES: Resource = { ...DATA_VOLUMES, plural: 'datasources' };

/** upstream's reasons (pkg/controller): a claim that does not exist / exists but cannot be used yet */
export const REASON_PVC_NOT_FOUND = 'FailedPvcNotFound';
export const REASON_PVC_NOT_READY = 'PVCNotReady';
/** a claim whose volumeMode the VMI's disks cannot use (a `lun` on a Filesystem claim) */
export const REASON_PVC_VOLUME_MODE = 'PVCVolumeModeMismatch';

/** upstream's filesystem overhead when it reads no CDIConfig (pkg/storage/types: DefaultFSOverhead) */
export const DEFAULT_FILESYSTEM_OVERHEAD = '0.055';

/** A PersistentVolumeClaim as the controller's cache keeps it (see {@link trimPvc}). */
export interface Pvc extends KubeObject {
  spec?: {
    accessModes?: string[];
    volumeMode?: string;
    storageClassName?: string;
    volumeName?: string;
    resources?: { requests?: Record<string, string> };
  };
  status?: { phase?: string; capacity?: Record<string, string> };
}

export interface StorageClass extends KubeObject {
  volumeBindingMode?: string;
}
/** the namespace and name of what a clone copies (a claim or a VolumeSnapshot) */
export interface CloneFrom {
  namespace?: string;
  name?: string;
}
/** A CDI DataVolume: the fields kubevirt-ts reads or sets (the rest of its spec is CDI's). */
export interface DataVolume extends KubeObject {
  spec?: {
    source?: { pvc?: CloneFrom; snapshot?: CloneFrom; [k: string]: unknown };
    sourceRef?: { kind?: string; namespace?: string; name?: string };
    priorityClassName?: string;
    [k: string]: unknown;
  };
  status?: {
    phase?: string;
    progress?: string;
    restartCount?: number;
    conditions?: { type: string; status: string; reason?: string; message?: string }[];
  };
}
/** A CDI DataSource: a name for a claim or snapshot that DataVolumes clone. */
export interface DataSource extends KubeObject {
  spec?: { source?: { pvc?: CloneFrom; snapshot?: CloneFrom } };
}

/** The fields the VMI controller reads of a claim: the rest (managedFields, most annotations) is not cached. */
export function trimPvc(p: Pvc): Pvc {
  const m = p.metadata ?? {};
  const annotations = Object.fromEntries(
    Object.entries(m.annotations ?? {}).filter(([k]) => isPreallocationAnnotation(k)),
  );
  const requests = p.spec?.resources?.requests;
  return {
    apiVersion: p.apiVersion,
    kind: p.kind,
    metadata: {
      name: m.name,
      namespace: m.namespace,
      uid: m.uid,
      resourceVersion: m.resourceVersion,
      ...(m.deletionTimestamp ? { deletionTimestamp: m.deletionTimestamp } : {}),
      ...(Object.keys(annotations).length ? { annotations } : {}),
      ...(m.ownerReferences ? { ownerReferences: m.ownerReferences } : {}),
    },
    spec: {
      ...(p.spec?.accessModes ? { accessModes: p.spec.accessModes } : {}),
      ...(p.spec?.volumeMode ? { volumeMode: p.spec.volumeMode } : {}),
      ...(p.spec?.storageClassName !== undefined ? { storageClassName: p.spec.storageClassName } : {}),
      ...(p.spec?.volumeName ? { volumeName: p.spec.volumeName } : {}),
      ...(requests ? { resources: { requests } } : {}),
    },
    status: {
      ...(p.status?.phase ? { phase: p.status.phase } : {}),
      ...(p.status?.capacity ? { capacity: p.status.capacity } : {}),
    },
  };
}

const isPreallocationAnnotation = (k: string) =>
  k.includes('/storage.preallocation') || k.includes('/storage.thick-provisioned');

/** A VMI volume backed by a claim. */
export interface ClaimVolume {
  /** the volume's name (spec.volumes[i].name) */
  volume: string;
  /** the claim's name (a DataVolume's claim has the DataVolume's name, as upstream assumes) */
  claimName: string;
  /** the field naming the claim, e.g. `spec.volumes[2].dataVolume.name` */
  field: string;
  source: 'persistentVolumeClaim' | 'ephemeral' | 'dataVolume';
  /** hotplugged volumes are not in the launcher Pod (and do not hold its creation) */
  hotpluggable: boolean;
}

/** The `persistentVolumeClaim`, `ephemeral.persistentVolumeClaim` and `dataVolume` volumes of a VMI. */
export function claimVolumes(vmi: Pick<Vmi, 'spec'>): ClaimVolume[] {
  const out: ClaimVolume[] = [];
  (vmi.spec?.volumes ?? []).forEach((v, i) => {
    const at = `spec.volumes[${i}]`;
    if (v.persistentVolumeClaim)
      out.push({
        volume: v.name,
        claimName: v.persistentVolumeClaim.claimName,
        field: `${at}.persistentVolumeClaim.claimName`,
        source: 'persistentVolumeClaim',
        hotpluggable: v.persistentVolumeClaim.hotpluggable === true,
      });
    else if (v.ephemeral?.persistentVolumeClaim)
      out.push({
        volume: v.name,
        claimName: v.ephemeral.persistentVolumeClaim.claimName,
        field: `${at}.ephemeral.persistentVolumeClaim.claimName`,
        source: 'ephemeral',
        hotpluggable: false,
      });
    else if (v.dataVolume)
      out.push({
        volume: v.name,
        claimName: v.dataVolume.name,
        field: `${at}.dataVolume.name`,
        source: 'dataVolume',
        hotpluggable: v.dataVolume.hotpluggable === true,
      });
  });
  return out;
}

/** Whether the VMI uses claim `name` (a claim event wakes the VMIs that use it). */
export const usesClaim = (vmi: Pick<Vmi, 'spec'>, name: string): boolean =>
  claimVolumes(vmi).some((c) => c.claimName === name);

/** What the check reads: the cached claims and DataVolumes, StorageClasses (read on demand, not watched). */
export interface ClaimLookup {
  pvc(namespace: string, name: string): Pvc | undefined;
  storageClass(name: string): Promise<StorageClass | undefined>;
  /** undefined also when CDI is not installed (no DataVolume resource) */
  dataVolume(namespace: string, name: string): Promise<DataVolume | undefined>;
}

/** Why the launcher Pod cannot be created yet. */
export interface ClaimWait {
  reason: string;
  message: string;
  /**
   * When to look again without an event: what it waits for is read on demand, not watched (a StorageClass).
   * Undefined: a claim or DataVolume event (add, bind, phase) wakes the VMI.
   */
  recheckMs?: number;
  /**
   * A DataVolume waits for its claim's first consumer (CDI's HonorWaitForFirstConsumer): the VMI controller creates
   * the temporary provisioning Pod (renderer's renderProvisioningPod), as upstream does.
   */
  firstConsumer?: boolean;
}

export type ClaimCheck =
  | { ready: true; claims: Record<string, ClaimInfo>; waitingForFirstConsumer: string[] }
  | ({ ready: false } & ClaimWait);

const CLASS_RECHECK_MS = 30_000;

/** upstream's DataVolume phases in which its claim can be given to the VMI (CDI's IsSucceededOrPendingPopulation) */
const DV_USABLE = ['Succeeded', 'PendingPopulation'];

/**
 * Whether every claim the launcher Pod mounts can be used now, and their volume modes. Hotplugged volumes are left
 * out (as upstream). In order, for each claim:
 *
 * - missing: wait (`FailedPvcNotFound`); for a `dataVolume` volume the message says whether the DataVolume exists;
 * - owned by a DataVolume (CDI): wait until the DataVolume is `Succeeded` or `PendingPopulation` (upstream); a
 *   DataVolume in `WaitForFirstConsumer` also waits (`PVCNotReady`, `firstConsumer`): the VMI controller starts a
 *   temporary Pod so the claims bind and CDI populates them before the VM runs, as upstream does;
 * - Bound: ready;
 * - Pending and its StorageClass binds on the first consumer (`volumeBindingMode: WaitForFirstConsumer`, e.g.
 *   local-path): ready, the launcher Pod is that consumer (the scheduler picks the node, the claim binds there);
 * - otherwise (Pending with an Immediate class or none, Lost): wait (`PVCNotReady`) until it binds. Upstream v1.9.0
 *   creates the Pod for an existing claim in any phase and lets the scheduler hold it; see README.
 *
 * Then a `lun` disk must sit on a Block claim (the converter refuses a lun on a file; upstream fails later, at
 * domain start).
 */
export async function checkClaims(vmi: Vmi, lookup: ClaimLookup): Promise<ClaimCheck> {
  const ns = vmi.metadata.namespace ?? 'default';
  const claims: Record<string, ClaimInfo> = {};
  const wffc: string[] = [];
  for (const c of claimVolumes(vmi)) {
    if (c.hotpluggable) continue;
    const pvc = lookup.pvc(ns, c.claimName);
    if (!pvc) {
      if (c.source !== 'dataVolume')
        return {
          ready: false,
          reason: REASON_PVC_NOT_FOUND,
          message: `${c.field}: PersistentVolumeClaim ${ns}/${c.claimName} does not exist; waiting for it to be created`,
        };
      const dv = await lookup.dataVolume(ns, c.claimName);
      return {
        ready: false,
        reason: REASON_PVC_NOT_FOUND,
        message: dv
          ? `${c.field}: the PersistentVolumeClaim of DataVolume ${ns}/${c.claimName} does not exist yet (DataVolume phase ${dv.status?.phase || 'unknown'}); waiting for it`
          : `${c.field}: neither DataVolume ${ns}/${c.claimName} nor a PersistentVolumeClaim of that name exists; waiting for one of them to be created`,
      };
    }
    const owner = pvc.metadata?.ownerReferences?.find((r) => r.controller && r.kind === 'DataVolume');
    if (owner) {
      const dv = await lookup.dataVolume(ns, owner.name);
      const phase = dv?.status?.phase ?? '';
      // a DataVolume gone (garbage-collected after its import) leaves a claim that is what it is
      if (dv && !DV_USABLE.includes(phase))
        return {
          ready: false,
          reason: REASON_PVC_NOT_READY,
          message:
            phase === 'WaitForFirstConsumer'
              ? `${c.field}: DataVolume ${ns}/${owner.name} waits for its first consumer: a temporary Pod binds the VMI's claims on one node, CDI populates them there, then the launcher Pod starts`
              : `${c.field}: DataVolume ${ns}/${owner.name} is in phase ${phase || 'unknown'}; waiting until it is Succeeded`,
          ...(phase === 'WaitForFirstConsumer' ? { firstConsumer: true } : {}),
        };
    }
    const phase = pvc.status?.phase ?? '';
    if (phase !== 'Bound') {
      const className = pvc.spec?.storageClassName;
      let wait: ClaimWait;
      if (phase === 'Lost')
        wait = {
          reason: REASON_PVC_NOT_READY,
          message: `${c.field}: PersistentVolumeClaim ${ns}/${c.claimName} is Lost (its PersistentVolume ${pvc.spec?.volumeName ?? ''} is gone)`,
        };
      else if (className) {
        const sc = await lookup.storageClass(className);
        if (sc?.volumeBindingMode === 'WaitForFirstConsumer') {
          wffc.push(c.claimName);
          claims[c.claimName] = { volumeMode: pvc.spec?.volumeMode };
          continue;
        }
        wait = sc
          ? {
              reason: REASON_PVC_NOT_READY,
              message: `${c.field}: PersistentVolumeClaim ${ns}/${c.claimName} is ${phase || 'Pending'}, not Bound; its StorageClass ${className} binds at once (volumeBindingMode ${sc.volumeBindingMode || 'Immediate'}): waiting for a PersistentVolume`,
            }
          : {
              reason: REASON_PVC_NOT_READY,
              message: `${c.field}: PersistentVolumeClaim ${ns}/${c.claimName} is ${phase || 'Pending'}, not Bound, and its StorageClass ${className} does not exist`,
              recheckMs: CLASS_RECHECK_MS,
            };
      } else
        wait = {
          reason: REASON_PVC_NOT_READY,
          message: `${c.field}: PersistentVolumeClaim ${ns}/${c.claimName} is ${phase || 'Pending'}, not Bound (no StorageClass: waiting for a matching PersistentVolume)`,
        };
      return { ready: false, ...wait };
    }
    claims[c.claimName] = { volumeMode: pvc.spec?.volumeMode };
  }
  const byVolume = new Map(claimVolumes(vmi).map((c) => [c.volume, c]));
  const disks = vmi.spec.domain.devices?.disks ?? [];
  for (let i = 0; i < disks.length; i++) {
    const d = disks[i]!;
    const c = byVolume.get(d.name);
    if (d.lun === undefined || !c || c.hotpluggable) continue;
    if (claims[c.claimName]?.volumeMode !== 'Block')
      return {
        ready: false,
        reason: REASON_PVC_VOLUME_MODE,
        message: `spec.domain.devices.disks[${i}].lun: a lun passes a block device through, but PersistentVolumeClaim ${ns}/${c.claimName} (${c.field}) has volumeMode ${claims[c.claimName]?.volumeMode ?? 'Filesystem'}; use a Block claim or a disk`,
      };
  }
  return { ready: true, claims, waitingForFirstConsumer: wffc };
}

/**
 * The volume modes of the claims a running VMI's launcher Pod mounts, from the cache (a migration's target Pod must
 * mount them as the source Pod does); `missing` names a claim the cache does not have.
 */
export function cachedClaims(
  vmi: Vmi,
  pvc: (namespace: string, name: string) => Pvc | undefined,
): { claims: Record<string, ClaimInfo>; missing?: ClaimVolume } {
  const ns = vmi.metadata.namespace ?? 'default';
  const claims: Record<string, ClaimInfo> = {};
  for (const c of claimVolumes(vmi)) {
    if (c.hotpluggable) continue;
    const p = pvc(ns, c.claimName);
    if (!p) return { claims, missing: c };
    claims[c.claimName] = { volumeMode: p.spec?.volumeMode };
  }
  return { claims };
}

/** upstream's processPVCInfo: what the VMI's status says about a claim. */
export function persistentVolumeClaimInfo(pvc: Pvc): PersistentVolumeClaimInfo & { preallocated?: boolean } {
  const mode = pvc.spec?.volumeMode;
  const preallocated = Object.entries(pvc.metadata?.annotations ?? {}).some(
    ([k, v]) => isPreallocationAnnotation(k) && v === 'true',
  );
  return {
    claimName: pvc.metadata!.name!,
    ...(pvc.spec?.accessModes?.length ? { accessModes: [...pvc.spec.accessModes] } : {}),
    ...(mode ? { volumeMode: mode } : {}),
    ...(pvc.status?.capacity ? { capacity: { ...pvc.status.capacity } } : {}),
    ...(pvc.spec?.resources?.requests ? { requests: { ...pvc.spec.resources.requests } } : {}),
    ...(preallocated ? { preallocated } : {}),
    // a block device has no filesystem to reserve room on (upstream with CDI says "0" too); without CDI's config
    // upstream takes 5.5% for a filesystem claim
    filesystemOverhead: mode === 'Block' ? '0' : DEFAULT_FILESYSTEM_OVERHEAD,
  };
}

type VolumeStatus = NonNullable<NonNullable<Vmi['status']>['volumeStatus']>[number];

/**
 * `status.volumeStatus` with an entry for every spec volume (upstream's updateVolumeStatus), sorted by name; a
 * persistentVolumeClaim or dataVolume volume's `persistentVolumeClaimInfo` from its claim (kept as it was while the claim is not in the
 * cache). Every other field of an entry (target, phase, hotplug state: virt-handler's) and entries of volumes no
 * longer in the spec (hotplug, the handler's) are kept as they are.
 */
export function desiredVolumeStatus(
  vmi: Vmi,
  pvc: (namespace: string, name: string) => Pvc | undefined,
): VolumeStatus[] | undefined {
  const volumes = vmi.spec.volumes ?? [];
  const old = vmi.status?.volumeStatus;
  if (volumes.length === 0 && !old) return undefined;
  const ns = vmi.metadata.namespace ?? 'default';
  const byName = new Map((old ?? []).map((s) => [s.name, s]));
  // upstream reports the claims of persistentVolumeClaim and dataVolume volumes, not ephemeral ones (an overlay on
  // the node is what the VM writes to)
  const claims = new Map(
    claimVolumes(vmi)
      .filter((c) => c.source !== 'ephemeral')
      .map((c) => [c.volume, c.claimName]),
  );
  const out: VolumeStatus[] = [];
  for (const v of volumes) {
    const s: VolumeStatus = { ...(byName.get(v.name) ?? { name: v.name }) };
    byName.delete(v.name);
    const claimName = claims.get(v.name);
    const p = claimName !== undefined ? pvc(ns, claimName) : undefined;
    if (p) s.persistentVolumeClaimInfo = persistentVolumeClaimInfo(p);
    out.push(s);
  }
  out.push(...byName.values());
  return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
