// Names, resources and small helpers shared by the VM and VMI controllers.
import type { Condition, VirtualMachine, VirtualMachineInstance } from '@kubevirt-ts/api';

/** the kubevirt.io resources (controller-runtime's) */
export { VMS, VMIS, VMIMS } from '@kubevirt-ts/controller-runtime';

/** on VMs and on the VMIs they own: the VM controller sees the VMI before it goes */
export const VM_CONTROLLER_FINALIZER = 'kubevirt.io/virtualMachineControllerFinalize';
/** on VMIs: the launcher Pod is gone before the VMI is */
export const VMI_FINALIZER = 'kubevirt.io/foregroundDeleteVirtualMachine';
export const LABEL_NODE_NAME = 'kubevirt.io/nodeName';
export const ANNOTATION_VM_GENERATION = 'kubevirt.io/vm-generation';
/**
 * On a VMI a VM started: a hash of what it was started from (the VM's template spec, instance type and
 * preference), so the VM controller sees a later change that needs a restart (upstream keeps the VM's spec in a
 * ControllerRevision named in the VMI's status; a hash answers the same question without an extra write)
 */
export const ANNOTATION_VM_TEMPLATE_HASH = 'kubevirt-ts.io/vm-template-hash';

export type Phase = NonNullable<NonNullable<VirtualMachineInstance['status']>['phase']>;
export type Vm = VirtualMachine;
export type Vmi = VirtualMachineInstance;

/** a Kubernetes timestamp (RFC 3339, seconds) */
export const nowTimestamp = (): string => new Date().toISOString().replace(/\.\d+Z$/, 'Z');

export const isFinal = (vmi: Vmi): boolean =>
  vmi.status?.phase === 'Succeeded' || vmi.status?.phase === 'Failed';
export const isUnprocessed = (vmi: Vmi): boolean => !vmi.status?.phase || vmi.status.phase === 'Pending';

export function getCondition(conds: Condition[] | undefined, type: string): Condition | undefined {
  return conds?.find((c) => c.type === type);
}
export function hasCondition(conds: Condition[] | undefined, type: string, status: string, reason?: string) {
  const c = getCondition(conds, type);
  return !!c && c.status === status && (reason === undefined || c.reason === reason);
}

/**
 * Set a condition in `holder.conditions`; an existing one of the type is replaced only when its status,
 * reason or message differ (so its timestamps do not churn and the status is not rewritten needlessly).
 */
export function updateCondition(holder: { conditions?: Condition[] }, cond: Condition): void {
  const conds = (holder.conditions ??= []);
  const i = conds.findIndex((c) => c.type === cond.type);
  if (i < 0) conds.push(cond);
  else {
    const c = conds[i]!;
    if (
      c.status !== cond.status ||
      (c.reason ?? '') !== (cond.reason ?? '') ||
      (c.message ?? '') !== (cond.message ?? '')
    )
      conds[i] = cond;
  }
}
export function removeCondition(holder: { conditions?: Condition[] }, type: string): void {
  if (!holder.conditions) return;
  holder.conditions = holder.conditions.filter((c) => c.type !== type);
  if (holder.conditions.length === 0) delete holder.conditions;
}

export const hasFinalizer = (o: { metadata?: { finalizers?: string[] } }, f: string): boolean =>
  !!o.metadata?.finalizers?.includes(f);

/** the owner of kind `kind` that controls `o` */
export function controllerRef(
  o: { metadata?: { ownerReferences?: { kind: string; name: string; uid: string; controller?: boolean }[] } },
  kind: string,
) {
  return o.metadata?.ownerReferences?.find((r) => r.controller && r.kind === kind);
}

/** A reconcile error recorded on the object (Failure / Synchronized condition) with its reason. */
export class SyncError extends Error {
  constructor(
    readonly reason: string,
    message: string,
    /** false: retrying cannot help (e.g. a Pod the renderer cannot build) */
    readonly retry = true,
  ) {
    super(message);
    this.name = 'SyncError';
  }
}

/** what an event names: kind and apiVersion are not in listed items, so they are set here */
/** the owner reference of what a VM controls (its VMI, its ControllerRevisions) */
export const vmOwnerReference = (vm: Vm) => ({
  apiVersion: 'kubevirt.io/v1',
  kind: 'VirtualMachine',
  name: vm.metadata.name!,
  uid: vm.metadata.uid!,
  controller: true,
  blockOwnerDeletion: true,
});
export const vmRef = (vm: Vm) => ({
  apiVersion: 'kubevirt.io/v1',
  kind: 'VirtualMachine',
  metadata: vm.metadata,
});
export const vmiRef = (vmi: Vmi) => ({
  apiVersion: 'kubevirt.io/v1',
  kind: 'VirtualMachineInstance',
  metadata: vmi.metadata,
});

export const errorMessage = (e: unknown): string => (e instanceof Error ? e.message : String(e));
