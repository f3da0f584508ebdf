// The replica set controller: a VirtualMachineInstanceReplicaSet (VMIRS) keeps `spec.replicas` VMIs of its
// template (upstream v1.9.0's pkg/virt-controller/watch/replicaset). VMIs it creates are named after it
// (generateName) and owned by it (controller reference); VMIs matching its selector that nobody controls are
// adopted. Surplus VMIs are deleted (a normal delete: their grace period applies), finished ones (Failed,
// Succeeded) are deleted and replaced. `spec.paused` stops creating and deleting. The status counts the active
// VMIs (not final, not being deleted), the Ready ones, and gives the selector as a string for the scale
// subresource. Level-triggered, one key at a time; expectations keep a lagging cache from acting twice.
import {
  ControllerExpectations,
  Informer,
  WorkQueue,
  isNotFound,
  keyOf,
  updateIfChanged,
  type KubeObject,
  type Resource,
} from '@kubevirt-ts/controller-runtime';
import {
  labelSelectorError,
  labelSelectorMatches,
  labelSelectorString,
  setVirtualMachineInstanceDefaults,
  type VirtualMachineInstanceReplicaSet,
  type VirtualMachineInstanceReplicaSetStatus,
  type Condition,
  type LabelSelector,
} from '@kubevirt-ts/api';
import {
  SyncError,
  VMIS,
  VMI_FINALIZER,
  controllerRef,
  errorMessage,
  hasCondition,
  isFinal,
  nowTimestamp,
  removeCondition,
  updateCondition,
  type Vm,
  type Vmi,
} from './common.js';
import type { ControllerContext } from './context.js';

export type Vmirs = VirtualMachineInstanceReplicaSet;
const KIND = 'VirtualMachineInstanceReplicaSet';

/** kubevirt.io/v1 VirtualMachineInstanceReplicaSets */
export const VMIRSS: Resource = {
  group: 'kubevirt.io',
  version: 'v1',
  plural: 'virtualmachineinstancereplicasets',
  namespaced: true,
};

/** upstream's default burst: at most this many creations or deletions per sync */
export const BURST_REPLICAS = 250;

export const rsOwnerReference = (rs: Vmirs): ControllerOwnerRef => ({
  apiVersion: 'kubevirt.io/v1',
  kind: KIND,
  name: rs.metadata.name!,
  uid: rs.metadata.uid!,
  controller: true,
  blockOwnerDeletion: true,
});
const rsRef = (rs: Vmirs) => ({ apiVersion: 'kubevirt.io/v1', kind: KIND, metadata: rs.metadata });

/** what counts toward `replicas`: not final, not being deleted */
const isActive = (vmi: Vmi): boolean => !isFinal(vmi) && !vmi.metadata.deletionTimestamp;
const isReady = (vmi: Vmi): boolean => hasCondition(vmi.status?.conditions, 'Ready', 'True');

/**
 * The order surplus VMIs go in: those not running yet first, then the newest. (Upstream deletes the first
 * ones its cache lists, in no particular order; this order keeps the longest-running VMIs.)
 */
export function deletionOrder(vmis: Vmi[]): Vmi[] {
  const running = (v: Vmi) => (v.status?.phase === 'Running' ? 1 : 0);
  const created = (v: Vmi) => Date.parse(v.metadata.creationTimestamp ?? '') || 0;
  return [...vmis].sort((a, b) => running(a) - running(b) || created(b) - created(a));
}

/** A controller reference (owner reference with `controller: true`) as a replica set or pool writes it. */
export interface ControllerOwnerRef {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller: true;
  blockOwnerDeletion: true;
}

/**
 * Adds (adopt) or removes (release) `ref` as the controller reference of `child` (a VMI of a replica set, a VM of a
 * pool); adopting never takes a child another controller owns. Returns the child as written, undefined when it is gone
 * or was not adopted.
 */
export async function setControllerOwner<T extends Vmi | Vm>(
  ctx: ControllerContext,
  resource: Resource,
  child: T,
  ref: ControllerOwnerRef,
  own: boolean,
  owner: { kind: string; metadata: { namespace?: string; name?: string } },
): Promise<T | undefined> {
  try {
    const r = await updateIfChanged<T>({
      client: ctx.client,
      resource,
      current: child,
      mutate: (latest) => {
        const refs = (latest.metadata.ownerReferences ?? []).filter((x) => x.uid !== ref.uid);
        if (own) {
          // another controller got there first
          if (refs.some((x) => x.controller)) return undefined;
          refs.push(ref);
        }
        latest.metadata.ownerReferences = refs;
        if (refs.length === 0) delete latest.metadata.ownerReferences;
        return latest;
      },
    });
    ctx.log.info(
      own ? `adopted an orphaned ${child.kind}` : `released a ${child.kind} its selector no longer matches`,
      {
        kind: owner.kind,
        namespace: owner.metadata.namespace,
        name: owner.metadata.name,
        child: child.metadata.name,
      },
    );
    return r.object;
  } catch (e) {
    if (isNotFound(e)) return undefined;
    throw e;
  }
}

/** What a replica set or a pool is to the helpers below: an owner with a label selector. */
interface SelectorOwner {
  kind?: string;
  metadata: { name?: string; namespace?: string; uid?: string; deletionTimestamp?: string | null };
  spec: { selector: LabelSelector };
}

/**
 * Wakes an owner's key (a replica set's, a pool's) on events of its children (VMIs, VMs): the owner named by a child's
 * controller reference (raising or lowering its expectations on add and delete), or for an orphan every owner of its
 * namespace whose selector matches it (adoption); and on the owner's own events.
 */
export function wireOwnedChildren<O extends SelectorOwner & KubeObject, C extends Vmi | Vm>(o: {
  kind: string;
  owners: Informer<O>;
  children: Informer<C>;
  queue: WorkQueue<string>;
  expectations: ControllerExpectations;
}): void {
  const { kind, owners, children, queue, expectations } = o;
  owners.onChange((x) => queue.add(keyOf(x)));
  const ownerKey = (c: C): string | undefined => {
    const ref = controllerRef(c, kind);
    if (!ref) return undefined;
    const key = `${c.metadata.namespace}/${ref.name}`;
    return owners.getByKey(key)?.metadata?.uid === ref.uid ? key : undefined;
  };
  const orphanOf = (c: C) => {
    if (c.metadata.ownerReferences?.some((r) => r.controller)) return;
    for (const x of owners.list(c.metadata.namespace))
      if (x.spec.selector && labelSelectorMatches(x.spec.selector, c.metadata.labels)) queue.add(keyOf(x));
  };
  children.onAdd((c) => {
    const key = ownerKey(c);
    if (key) {
      expectations.creationObserved(key);
      queue.add(key);
    } else orphanOf(c);
  });
  children.onUpdate((c) => {
    const key = ownerKey(c);
    if (key) queue.add(key);
    else orphanOf(c);
  });
  children.onDelete((c) => {
    const key = ownerKey(c);
    if (!key) return;
    expectations.deletionObserved(key);
    queue.add(key);
  });
}

/**
 * An owner's children: those it controls, and orphans matching its selector, which it adopts (unless it is being
 * deleted). A child it controls whose labels no longer match is released.
 */
export async function claimChildren<C extends Vmi | Vm>(
  ctx: ControllerContext,
  resource: Resource,
  children: Informer<C>,
  owner: SelectorOwner,
  ref: ControllerOwnerRef,
  ownerObj: { kind: string; metadata: { namespace?: string; name?: string } },
): Promise<C[]> {
  const out: C[] = [];
  for (const c of children.list(owner.metadata.namespace)) {
    const cur = c.metadata.ownerReferences?.find((r) => r.controller);
    const matches = labelSelectorMatches(owner.spec.selector, c.metadata.labels);
    if (cur?.uid === owner.metadata.uid) {
      if (matches) out.push(c);
      else if (!c.metadata.deletionTimestamp)
        await setControllerOwner(ctx, resource, c, ref, false, ownerObj);
    } else if (!cur && matches && !c.metadata.deletionTimestamp && !owner.metadata.deletionTimestamp) {
      const adopted = await setControllerOwner(ctx, resource, c, ref, true, ownerObj);
      if (adopted) out.push(adopted);
    }
  }
  return out;
}

/** The ReplicaPaused and ReplicaFailure conditions of a replica set's or pool's status (upstream's). */
export function replicaConditions(
  status: { conditions?: Condition[] },
  paused: boolean,
  syncErr: SyncError | undefined,
): void {
  const now = nowTimestamp();
  if (paused)
    updateCondition(status, {
      type: 'ReplicaPaused',
      status: 'True',
      reason: 'Paused',
      message: 'Controller got paused',
      lastProbeTime: null,
      lastTransitionTime: now,
    });
  else removeCondition(status, 'ReplicaPaused');
  if (syncErr)
    updateCondition(status, {
      type: 'ReplicaFailure',
      status: 'True',
      reason: syncErr.reason,
      message: syncErr.message,
      lastProbeTime: null,
      lastTransitionTime: now,
    });
  else removeCondition(status, 'ReplicaFailure');
}

export class ReplicaSetController {
  readonly queue = new WorkQueue<string>();
  /** VMIRS key -> VMI creations/deletions */
  readonly expectations = new ControllerExpectations();

  constructor(
    private readonly ctx: ControllerContext,
    readonly rss: Informer<Vmirs>,
  ) {}

  /** Wakes VMIRS keys on VMIRS and VMI events (the owner's, or every matching one for an orphan). */
  wire(): void {
    wireOwnedChildren({
      kind: KIND,
      owners: this.rss,
      children: this.ctx.vmis,
      queue: this.queue,
      expectations: this.expectations,
    });
  }

  async reconcile(key: string): Promise<void> {
    const rs = this.rss.getByKey(key);
    if (!rs) {
      this.expectations.deleteExpectations(key);
      return;
    }
    const selector = rs.spec.selector;
    const labels = rs.spec.template?.metadata?.labels;
    // admission refuses these; a replica set stored before then is left alone, as upstream does
    if (
      !selector ||
      !labels ||
      Object.keys(labels).length === 0 ||
      labelSelectorError(selector) ||
      !labelSelectorMatches(selector, labels)
    ) {
      this.ctx.log.error('invalid replica set spec (selector, template labels): not reconciled', {
        kind: KIND,
        namespace: rs.metadata.namespace,
        name: rs.metadata.name,
      });
      return;
    }
    const needsSync = this.expectations.satisfiedExpectations(key);
    const vmis = await this.claim(rs);
    const active = vmis.filter(isActive);
    const finished = vmis.filter((v) => isFinal(v) && !v.metadata.deletionTimestamp);
    let syncErr: SyncError | undefined;
    if (needsSync && !rs.spec.paused && !rs.metadata.deletionTimestamp) {
      try {
        await this.scale(key, rs, active);
        if (finished.length) await this.deleteVmis(key, rs, finished.slice(0, BURST_REPLICAS), true);
      } catch (e) {
        if (!(e instanceof SyncError)) throw e;
        syncErr = e;
      }
    }
    await this.updateStatus(rs, active, syncErr);
    if (syncErr) throw syncErr;
  }

  /** The VMIs of the replica set (`claimChildren`: its own, and adopted orphans matching its selector). */
  private claim(rs: Vmirs): Promise<Vmi[]> {
    return claimChildren(this.ctx, VMIS, this.ctx.vmis, rs, rsOwnerReference(rs), rsRef(rs));
  }

  private async scale(key: string, rs: Vmirs, active: Vmi[]): Promise<void> {
    const diff = active.length - (rs.spec.replicas ?? 1);
    if (diff > 0)
      await this.deleteVmis(key, rs, deletionOrder(active).slice(0, Math.min(diff, BURST_REPLICAS)));
    else if (diff < 0) await this.createVmis(key, rs, Math.min(-diff, BURST_REPLICAS));
  }

  /** The VMI the replica set creates: its template, named after it, owned by it. */
  vmiFromReplicaSet(rs: Vmirs): Vmi {
    const tmeta = structuredClone(rs.spec.template.metadata ?? {}) as Vmi['metadata'];
    delete tmeta.name;
    const vmi = {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstance',
      metadata: {
        ...tmeta,
        generateName: rs.metadata.name,
        namespace: rs.metadata.namespace,
        labels: rs.spec.template.metadata?.labels,
        ownerReferences: [rsOwnerReference(rs)],
        finalizers: [VMI_FINALIZER],
      },
      spec: structuredClone(rs.spec.template.spec),
    } as Vmi;
    // the spec as admission would default it (the mutating webhook does so again: it changes nothing)
    vmi.spec = setVirtualMachineInstanceDefaults(vmi).spec;
    return vmi;
  }

  private async createVmis(key: string, rs: Vmirs, n: number): Promise<void> {
    const { ctx } = this;
    this.expectations.expectCreations(key, n);
    const results = await Promise.allSettled(
      Array.from({ length: n }, () =>
        ctx.client.create<Vmi>(VMIS, rs.metadata.namespace, this.vmiFromReplicaSet(rs)),
      ),
    );
    let failure: unknown;
    for (const r of results) {
      if (r.status === 'fulfilled') {
        ctx.recorder.event(
          rsRef(rs),
          'Normal',
          'SuccessfulCreate',
          `Started the virtual machine by creating the new virtual machine instance ${r.value.metadata.name}`,
        );
        continue;
      }
      this.expectations.creationObserved(key);
      failure = r.reason;
      ctx.recorder.event(
        rsRef(rs),
        'Warning',
        'FailedCreate',
        `Error creating virtual machine instance: ${errorMessage(r.reason)}`,
      );
    }
    if (failure !== undefined) throw new SyncError('FailedCreate', errorMessage(failure));
  }

  /** Deletes the VMIs with a normal delete: each VMI's own termination grace period applies. */
  private async deleteVmis(key: string, rs: Vmirs, vmis: Vmi[], finished = false): Promise<void> {
    const { ctx } = this;
    this.expectations.expectDeletions(key, vmis.length);
    const results = await Promise.allSettled(
      vmis.map((v) =>
        ctx.client.delete(VMIS, v.metadata.namespace, v.metadata.name!, { preconditionUid: v.metadata.uid }),
      ),
    );
    let failure: unknown;
    results.forEach((r, i) => {
      const vmi = vmis[i]!;
      if (r.status === 'fulfilled') {
        ctx.recorder.event(
          rsRef(rs),
          'Normal',
          'SuccessfulDelete',
          finished
            ? `Deleted finished virtual machine: ${vmi.metadata.uid}`
            : `Stopped the virtual machine by deleting the virtual machine instance ${vmi.metadata.uid}`,
        );
        return;
      }
      this.expectations.deletionObserved(key);
      if (isNotFound(r.reason)) return;
      failure = r.reason;
      ctx.recorder.event(
        rsRef(rs),
        'Warning',
        'FailedDelete',
        `Error deleting virtual machine instance ${vmi.metadata.name}: ${errorMessage(r.reason)}`,
      );
    });
    if (failure !== undefined) throw new SyncError('FailedDelete', errorMessage(failure));
  }

  /** The status the replica set should have, from its active VMIs and the sync error (upstream's updateStatus). */
  desiredStatus(
    rs: Vmirs,
    active: Vmi[],
    syncErr: SyncError | undefined,
  ): VirtualMachineInstanceReplicaSetStatus {
    const status: VirtualMachineInstanceReplicaSetStatus = structuredClone(rs.status ?? {});
    status.replicas = active.length;
    status.readyReplicas = active.filter(isReady).length;
    status.labelSelector = labelSelectorString(rs.spec.selector);
    replicaConditions(status, !!rs.spec.paused, syncErr);
    return status;
  }

  private async updateStatus(rs: Vmirs, active: Vmi[], syncErr: SyncError | undefined): Promise<void> {
    const wasPaused = hasCondition(rs.status?.conditions, 'ReplicaPaused', 'True');
    try {
      const r = await updateIfChanged<Vmirs>({
        client: this.ctx.client,
        resource: VMIRSS,
        current: rs,
        subresource: 'status',
        mutate: (latest) => ({ ...latest, status: this.desiredStatus(latest, active, syncErr) }),
      });
      if (r.written && wasPaused !== !!rs.spec.paused)
        this.ctx.recorder.event(
          rsRef(rs),
          'Normal',
          rs.spec.paused ? 'SuccessfulPaused' : 'SuccessfulResumed',
          rs.spec.paused ? 'Paused' : 'Resumed',
        );
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
  }
}
