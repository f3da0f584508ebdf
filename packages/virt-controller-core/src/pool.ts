// The pool controller: a VirtualMachinePool (pool.kubevirt.io/v1beta1) keeps `spec.replicas` VirtualMachines of its
// template (upstream v1.9.0's pkg/virt-controller/watch/pool), named `<pool>-<index>` with the lowest free indexes and
// owned by it (controller reference); VMs matching its selector that nobody controls are adopted. Each VM's spec is
// its template with the index applied (upstream's indexVMSpec): dataVolumeTemplates become `<name>-<index>` (and the
// volumes naming them), and with `spec.nameGeneration` configMap and secret references too. Scaling down deletes VMs
// with a normal delete (the VM controller stops each guest gracefully, its termination grace period applies): those
// not ready first, then the highest indexes. `spec.paused` stops creating and deleting. The status counts the VMs not
// being deleted and the ready ones (VM `status.ready`), and gives the selector as a string for the scale subresource.
// A template change applies to the VMs created after it (upstream's update strategies are refused at admission).
import {
  ControllerExpectations,
  Informer,
  WorkQueue,
  isNotFound,
  updateIfChanged,
  type Resource,
} from '@kubevirt-ts/controller-runtime';
import {
  POOL_API_VERSION,
  labelSelectorError,
  labelSelectorMatches,
  labelSelectorString,
  type VirtualMachinePool,
  type VirtualMachinePoolStatus,
  type VirtualMachineSpec,
} from '@kubevirt-ts/api';
import { SyncError, VMS, errorMessage, type Vm } from './common.js';
import type { ControllerContext } from './context.js';
import {
  BURST_REPLICAS,
  claimChildren,
  replicaConditions,
  wireOwnedChildren,
  type ControllerOwnerRef,
} from './replicaset.js';

export type Pool = VirtualMachinePool;
const KIND = 'VirtualMachinePool';

/** pool.kubevirt.io/v1beta1 VirtualMachinePools */
export const POOLS: Resource = {
  group: 'pool.kubevirt.io',
  version: 'v1beta1',
  plural: 'virtualmachinepools',
  namespaced: true,
};

export const poolOwnerReference = (pool: Pool): ControllerOwnerRef => ({
  apiVersion: POOL_API_VERSION,
  kind: KIND,
  name: pool.metadata.name!,
  uid: pool.metadata.uid!,
  controller: true,
  blockOwnerDeletion: true,
});
const poolRef = (pool: Pool) => ({ apiVersion: POOL_API_VERSION, kind: KIND, metadata: pool.metadata });

/** `<pool>-<index>`: the name of a pool's VM */
export const poolVmName = (pool: string, index: number): string => `${pool}-${index}`;

/** The index of a pool's VM from its name (`<pool>-<index>`), undefined for another name. */
export function poolVmIndex(pool: string, vmName: string): number | undefined {
  if (!vmName.startsWith(`${pool}-`)) return undefined;
  const rest = vmName.slice(pool.length + 1);
  return /^(0|[1-9]\d*)$/.test(rest) ? Number(rest) : undefined;
}

/**
 * The spec of the pool's VM number `index`: the template's, with `<name>-<index>` for its dataVolumeTemplates (and
 * the volumes naming them) and, as `nameGeneration` asks, for its configMap and secret references.
 */
export function indexVmSpec(pool: Pool, index: number): VirtualMachineSpec {
  const spec = structuredClone(pool.spec.virtualMachineTemplate.spec);
  const suffix = `-${index}`;
  const dvNames = new Map<string, string>();
  for (const t of (spec.dataVolumeTemplates ?? []) as { metadata?: { name?: string } }[]) {
    const name = t.metadata?.name;
    if (!name) continue;
    dvNames.set(name, name + suffix);
    t.metadata!.name = name + suffix;
  }
  const gen = pool.spec.nameGeneration ?? {};
  for (const v of spec.template.spec.volumes ?? []) {
    const claim = v.persistentVolumeClaim?.claimName;
    if (v.persistentVolumeClaim && claim && dvNames.has(claim))
      v.persistentVolumeClaim.claimName = dvNames.get(claim)!;
    else if (v.dataVolume && dvNames.has(v.dataVolume.name))
      v.dataVolume.name = dvNames.get(v.dataVolume.name)!;
    else if (v.configMap?.name && gen.appendIndexToConfigMapRefs) v.configMap.name += suffix;
    else if (v.secret?.secretName && gen.appendIndexToSecretRefs) v.secret.secretName += suffix;
    else if (gen.appendIndexToSecretRefs)
      for (const ci of [v.cloudInitNoCloud, v.cloudInitConfigDrive])
        for (const ref of [ci?.secretRef, ci?.networkDataSecretRef]) if (ref?.name) ref.name += suffix;
  }
  return spec;
}

const isReady = (vm: Vm): boolean => vm.status?.ready === true;

/** The order surplus VMs go in: those not ready first, then the highest indexes (the newest names). */
export function poolDeletionOrder(pool: string, vms: Vm[]): Vm[] {
  const index = (v: Vm) => poolVmIndex(pool, v.metadata.name ?? '') ?? Number.MAX_SAFE_INTEGER;
  return [...vms].sort((a, b) => Number(isReady(a)) - Number(isReady(b)) || index(b) - index(a));
}

export class PoolController {
  readonly queue = new WorkQueue<string>();
  /** pool key -> VM creations/deletions */
  readonly expectations = new ControllerExpectations();

  constructor(
    private readonly ctx: ControllerContext,
    readonly pools: Informer<Pool>,
  ) {}

  /** Wakes pool keys on pool and VM events (the owner's, or every matching one for an orphan). */
  wire(): void {
    wireOwnedChildren({
      kind: KIND,
      owners: this.pools,
      children: this.ctx.vms,
      queue: this.queue,
      expectations: this.expectations,
    });
  }

  async reconcile(key: string): Promise<void> {
    const pool = this.pools.getByKey(key);
    if (!pool) {
      this.expectations.deleteExpectations(key);
      return;
    }
    const selector = pool.spec.selector;
    const labels = pool.spec.virtualMachineTemplate?.metadata?.labels;
    // admission refuses these; a pool stored before then is left alone, as upstream does
    if (!selector || !labels || labelSelectorError(selector) || !labelSelectorMatches(selector, labels)) {
      this.ctx.log.error('invalid pool spec (selector, template labels): not reconciled', {
        kind: KIND,
        namespace: pool.metadata.namespace,
        name: pool.metadata.name,
      });
      return;
    }
    const needsSync = this.expectations.satisfiedExpectations(key);
    const vms = await this.claim(pool);
    const active = vms.filter((v) => !v.metadata.deletionTimestamp);
    let syncErr: SyncError | undefined;
    if (needsSync && !pool.spec.paused && !pool.metadata.deletionTimestamp) {
      try {
        const diff = active.length - (pool.spec.replicas ?? 1);
        if (diff > 0)
          await this.deleteVms(
            key,
            pool,
            poolDeletionOrder(pool.metadata.name!, active).slice(0, Math.min(diff, BURST_REPLICAS)),
          );
        else if (diff < 0) await this.createVms(key, pool, Math.min(-diff, BURST_REPLICAS));
      } catch (e) {
        if (!(e instanceof SyncError)) throw e;
        syncErr = e;
      }
    }
    await this.updateStatus(pool, active, syncErr);
    if (syncErr) throw syncErr;
  }

  /** The pool's VMs (`claimChildren`: its own, and adopted orphans matching its selector). */
  private claim(pool: Pool): Promise<Vm[]> {
    return claimChildren(this.ctx, VMS, this.ctx.vms, pool, poolOwnerReference(pool), poolRef(pool));
  }

  /** The pool's VM number `index`: its template, indexed, named `<pool>-<index>`, owned by the pool. */
  vmFromPool(pool: Pool, index: number): Vm {
    const tmeta = structuredClone(pool.spec.virtualMachineTemplate.metadata ?? {}) as Vm['metadata'];
    delete tmeta.name;
    delete tmeta.generateName;
    return {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachine',
      metadata: {
        ...tmeta,
        name: poolVmName(pool.metadata.name!, index),
        namespace: pool.metadata.namespace,
        ownerReferences: [poolOwnerReference(pool)],
      },
      spec: indexVmSpec(pool, index),
    } as Vm;
  }

  /** Creates `n` VMs with the lowest indexes whose name no VM of the namespace has. */
  private async createVms(key: string, pool: Pool, n: number): Promise<void> {
    const { ctx } = this;
    const taken = new Set(ctx.vms.list(pool.metadata.namespace).map((v) => v.metadata.name));
    const indexes: number[] = [];
    for (let i = 0; indexes.length < n; i++)
      if (!taken.has(poolVmName(pool.metadata.name!, i))) indexes.push(i);
    this.expectations.expectCreations(key, n);
    const results = await Promise.allSettled(
      indexes.map((i) => ctx.client.create<Vm>(VMS, pool.metadata.namespace, this.vmFromPool(pool, i))),
    );
    let failure: unknown;
    results.forEach((r, j) => {
      const name = poolVmName(pool.metadata.name!, indexes[j]!);
      if (r.status === 'fulfilled') {
        ctx.recorder.event(
          poolRef(pool),
          'Normal',
          'SuccessfulCreate',
          `Created VM ${pool.metadata.namespace}/${name}`,
        );
        return;
      }
      this.expectations.creationObserved(key);
      failure = r.reason;
      ctx.recorder.event(
        poolRef(pool),
        'Warning',
        'FailedCreate',
        `Error creating VM ${name}: ${errorMessage(r.reason)}`,
      );
    });
    if (failure !== undefined) throw new SyncError('FailedCreate', errorMessage(failure));
  }

  /** Deletes the VMs (a normal delete: the VM controller stops each guest gracefully). */
  private async deleteVms(key: string, pool: Pool, vms: Vm[]): Promise<void> {
    const { ctx } = this;
    this.expectations.expectDeletions(key, vms.length);
    const results = await Promise.allSettled(
      vms.map((v) =>
        ctx.client.delete(VMS, v.metadata.namespace, v.metadata.name!, { preconditionUid: v.metadata.uid }),
      ),
    );
    let failure: unknown;
    results.forEach((r, i) => {
      const vm = vms[i]!;
      if (r.status === 'fulfilled') {
        ctx.recorder.event(
          poolRef(pool),
          'Normal',
          'SuccessfulDelete',
          `Deleted VM ${vm.metadata.namespace}/${vm.metadata.name} with uid ${vm.metadata.uid} from pool`,
        );
        return;
      }
      this.expectations.deletionObserved(key);
      if (isNotFound(r.reason)) return;
      failure = r.reason;
      ctx.recorder.event(
        poolRef(pool),
        'Warning',
        'FailedDelete',
        `Error deleting VM ${vm.metadata.name}: ${errorMessage(r.reason)}`,
      );
    });
    if (failure !== undefined) throw new SyncError('FailedDelete', errorMessage(failure));
  }

  /** The status the pool should have, from its VMs not being deleted and the sync error. */
  desiredStatus(pool: Pool, active: Vm[], syncErr: SyncError | undefined): VirtualMachinePoolStatus {
    const status: VirtualMachinePoolStatus = structuredClone(pool.status ?? {});
    status.replicas = active.length;
    status.readyReplicas = active.filter(isReady).length;
    status.labelSelector = labelSelectorString(pool.spec.selector);
    replicaConditions(status, !!pool.spec.paused, syncErr);
    return status;
  }

  private async updateStatus(pool: Pool, active: Vm[], syncErr: SyncError | undefined): Promise<void> {
    try {
      await updateIfChanged<Pool>({
        client: this.ctx.client,
        resource: POOLS,
        current: pool,
        subresource: 'status',
        mutate: (latest) => ({ ...latest, status: this.desiredStatus(latest, active, syncErr) }),
      });
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
  }
}
