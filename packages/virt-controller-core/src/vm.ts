// The VM controller: a VirtualMachine's run strategy decides whether its VirtualMachineInstance
// exists (upstream v1.1.0's startStop), and the VM's status mirrors the VMI (printableStatus, ready,
// created, conditions, start-failure backoff). Level-triggered, one key at a time; expectations keep a
// lagging cache from creating a second VMI or deleting one twice.
import { createHash } from 'node:crypto';
import { isNotFound, updateIfChanged } from '@kubevirt-ts/controller-runtime';
import {
  applyToVmiSpec,
  applyVmiSpecDefaults,
  conflictsMessage,
  DefaultsError,
  setVirtualMachineDefaults,
  vmRunStrategy,
  type Condition,
  type VirtualMachineStatus,
} from '@kubevirt-ts/api';
import {
  ANNOTATION_VM_GENERATION,
  ANNOTATION_VM_TEMPLATE_HASH,
  SyncError,
  VMIS,
  VMI_FINALIZER,
  VMS,
  VM_CONTROLLER_FINALIZER,
  controllerRef,
  errorMessage,
  vmOwnerReference,
  vmRef,
  getCondition,
  hasCondition,
  isFinal,
  nowTimestamp,
  removeCondition,
  updateCondition,
  type Vm,
  type Vmi,
} from './common.js';
import type { ControllerContext } from './context.js';
import { findVmSpecs, instancetypeAnnotations, storeVmRevisions, type VmSpecs } from './instancetype.js';
import { REASON_ERR_IMAGE_PULL, REASON_IMAGE_PULL_BACKOFF } from './vmi.js';
import { claimVolumes } from './claims.js';
import { dataVolumeError, dataVolumeProvisioning, syncDataVolumes, templatesOf } from './datavolumes.js';

/** the finalizer kube-apiserver puts on an object deleted with propagationPolicy Orphan */
const ORPHAN_FINALIZER = 'orphan';

/** upstream's defaultMaxCrashLoopBackoffDelaySeconds */
export const MAX_CRASHLOOP_BACKOFF_SECONDS = 300;

/** JSON with the keys of every object sorted: the same value always gives the same text */
function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonicalJson).join(',')}]`;
  if (v && typeof v === 'object')
    return `{${Object.keys(v)
      .sort()
      .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  return JSON.stringify(v) ?? 'null';
}

/**
 * What a running VMI was started from, as a hash: the VM's template spec and the instance type and preference it
 * names. A VM whose hash differs from its VMI's (ANNOTATION_VM_TEMPLATE_HASH) has changes that wait for a restart.
 */
export function vmTemplateHash(vm: Vm): string {
  const { template, instancetype, preference } = vm.spec;
  return createHash('sha256')
    .update(canonicalJson({ spec: template?.spec, instancetype, preference }))
    .digest('hex')
    .slice(0, 32);
}

/** upstream's RestartRequired message for a template change (kubevirt-ts has no live updates: every change) */
export const RESTART_REQUIRED_MESSAGE = 'a non-live-updatable field was changed in the template spec';

/** Seconds before the next start after `failCount` consecutive early failures (10 s * n², +0..50 %, max 300 s). */
export function startBackoffSeconds(
  failCount: number,
  maxDelay = MAX_CRASHLOOP_BACKOFF_SECONDS,
  rand = Math.random,
) {
  const n = Math.max(1, failCount);
  const interval = Math.max(10, Math.floor(maxDelay / 30));
  let delay = interval * n * n;
  delay += Math.floor(rand() * (Math.floor(delay / 2) + 1));
  return Math.min(delay, maxDelay);
}

type StateChange = NonNullable<VirtualMachineStatus['stateChangeRequests']>[number];
const firstRequest = (vm: Vm): StateChange | undefined => vm.status?.stateChangeRequests?.[0];
export const hasStartRequest = (vm: Vm): boolean => firstRequest(vm)?.action === 'Start';
export const hasStartPausedRequest = (vm: Vm): boolean =>
  hasStartRequest(vm) && firstRequest(vm)?.data?.['paused'] === 'true';
export const hasStopRequestForVmi = (vm: Vm, vmi: Vmi): boolean => {
  const r = firstRequest(vm);
  return r?.action === 'Stop' && !!r.uid && r.uid === vmi.metadata.uid;
};

const wasRunning = (vmi: Vmi | undefined): boolean =>
  !!vmi &&
  (vmi.status?.phase === 'Running' ||
    !!vmi.status?.phaseTransitionTimestamps?.some((t) => t.phase === 'Running'));
const failedEarly = (vmi: Vmi | undefined): boolean => !!vmi && isFinal(vmi) && !wasRunning(vmi);
const isMigrating = (vmi: Vmi): boolean => {
  const m = vmi.status?.migrationState;
  return !!m && !!m.startTimestamp && !m.endTimestamp && !m.completed && !m.failed;
};

/** upstream's isSetToStart: whether the run strategy wants a VMI running */
function isSetToStart(vm: Vm, vmi: Vmi | undefined): boolean {
  switch (vmRunStrategy(vm)) {
    case 'Always':
      return true;
    case 'Manual':
      return vmi ? !hasStopRequestForVmi(vm, vmi) : hasStartRequest(vm);
    case 'RerunOnFailure':
      return vmi ? vmi.status?.phase !== 'Succeeded' : true;
    case 'Once':
      return !vmi;
    default:
      return false;
  }
}

export class VmController {
  constructor(private readonly ctx: ControllerContext) {}

  private startExpected = (key: string) => this.ctx.vmExpectations.pendingAdds(key) > 0;
  private stopExpected = (key: string) => this.ctx.vmExpectations.pendingDeletes(key) > 0;

  async reconcile(key: string): Promise<void> {
    const { ctx } = this;
    let vm = ctx.vms.getByKey(key);
    if (!vm) {
      ctx.vmExpectations.deleteExpectations(key);
      return;
    }
    let vmi = ctx.vmis.getByKey(key);
    let syncErr: SyncError | undefined;
    const deleting = !!vm.metadata.deletionTimestamp;
    if (vmi && controllerRef(vmi, 'VirtualMachine')?.uid !== vm.metadata.uid) {
      // a VMI of the same name that this VM does not own (or no longer owns, once orphaned): neither
      // adopted nor touched, and no reason to keep a VM that is being deleted
      if (!deleting)
        syncErr = new SyncError(
          'FailedCreate',
          `VirtualMachineInstance ${key} exists and is not owned by this VirtualMachine`,
        );
      vmi = undefined;
    }
    if (!syncErr && ctx.vmExpectations.satisfiedExpectations(key)) {
      try {
        if (deleting) {
          // deleted with propagationPolicy Orphan: the VMI is let go and keeps running
          if (vmi && vm.metadata.finalizers?.includes(ORPHAN_FINALIZER)) vmi = await this.orphanVmi(vm, vmi);
          if (!vmi) vm = (await this.setVmFinalizer(vm, false)) ?? vm;
          else await this.stopVmi(key, vm, vmi);
          if (!vm.metadata.deletionTimestamp) return;
        } else {
          vm = (await this.setVmFinalizer(vm, true)) ?? vm;
          vm = await this.syncInstancetype(vm);
          // the VMI waits for the DataVolumes of the VM's templates (a halted VM is stopped all the same)
          if ((await this.syncDataVolumes(vm)) || vmRunStrategy(vm) === 'Halted')
            syncErr = await this.startStop(key, vm, vmi);
        }
      } catch (e) {
        if (!(e instanceof SyncError)) throw e;
        syncErr = e;
      }
    }
    await this.updateStatus(key, vm, vmi, syncErr);
    if (syncErr) throw syncErr;
  }

  private async setVmFinalizer(vm: Vm, present: boolean): Promise<Vm | undefined> {
    const has = !!vm.metadata.finalizers?.includes(VM_CONTROLLER_FINALIZER);
    if (has === present) return vm;
    try {
      const r = await updateIfChanged<Vm>({
        client: this.ctx.client,
        resource: VMS,
        current: vm,
        mutate: (latest) => {
          const f = (latest.metadata.finalizers ?? []).filter((x) => x !== VM_CONTROLLER_FINALIZER);
          if (present) f.push(VM_CONTROLLER_FINALIZER);
          latest.metadata.finalizers = f;
          if (f.length === 0) delete latest.metadata.finalizers;
          return latest;
        },
      });
      return r.object;
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw e;
    }
  }

  /**
   * Removes this VM's owner reference from the VMI, as upstream does for an orphaning delete (the garbage
   * collector then drops the VM's `orphan` finalizer). The VMI keeps its finalizers: the VMI controller
   * releases the VM controller's once the VMI is final and its VM is gone.
   */
  private async orphanVmi(vm: Vm, vmi: Vmi): Promise<undefined> {
    try {
      await updateIfChanged<Vmi>({
        client: this.ctx.client,
        resource: VMIS,
        current: vmi,
        mutate: (latest) => {
          const refs = (latest.metadata.ownerReferences ?? []).filter((r) => r.uid !== vm.metadata.uid);
          latest.metadata.ownerReferences = refs;
          if (refs.length === 0) delete latest.metadata.ownerReferences;
          return latest;
        },
      });
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
    this.ctx.log.info('orphaned the VMI of a VM deleted with propagationPolicy Orphan', {
      kind: 'VirtualMachine',
      namespace: vm.metadata.namespace,
      name: vm.metadata.name,
      vmi: vmi.metadata.uid,
    });
    return undefined;
  }

  /**
   * Upstream's handleDataVolumes: creates the DataVolumes of the VM's dataVolumeTemplates (owned by the VM) and says
   * whether they are all ready for the VMI (Succeeded, WaitForFirstConsumer, PendingPopulation).
   */
  private async syncDataVolumes(vm: Vm): Promise<boolean> {
    if (templatesOf(vm).length === 0) return true;
    const { ctx } = this;
    let r;
    try {
      r = await syncDataVolumes(
        ctx.client,
        vm,
        (ns, name) => ctx.dataVolumes.get(ns, name),
        (ns, name) => !!ctx.pvcs.get(ns, name),
      );
    } catch (e) {
      if (!(e instanceof SyncError)) throw e;
      ctx.recorder.event(vmRef(vm), 'Warning', e.reason, e.message);
      throw new SyncError('FailedCreate', `Error encountered while creating DataVolumes: ${e.message}`);
    }
    for (const name of r.created)
      ctx.recorder.event(vmRef(vm), 'Normal', 'SuccessfulDataVolumeCreate', `Created DataVolume ${name}`);
    for (const name of r.failed)
      ctx.recorder.event(
        vmRef(vm),
        'Warning',
        'FailedDataVolumeImport',
        `DataVolume ${name} failed to import disk image`,
      );
    return r.ready;
  }

  /** Queues a start request (RerunOnFailure restarting a failed VMI), unless one is queued already. */
  private async addStartRequest(vm: Vm): Promise<void> {
    try {
      await updateIfChanged<Vm>({
        client: this.ctx.client,
        resource: VMS,
        current: vm,
        subresource: 'status',
        mutate: (latest) => {
          const reqs = latest.status?.stateChangeRequests ?? [];
          if (reqs.some((r) => r.action === 'Start')) return latest;
          latest.status = { ...latest.status, stateChangeRequests: [...reqs, { action: 'Start' }] };
          return latest;
        },
      });
    } catch (e) {
      throw new SyncError(
        'FailedDelete',
        `failed to queue the restart of the failed VMI: ${errorMessage(e)}`,
      );
    }
  }

  /** upstream's startStop: what the run strategy wants done about the VMI */
  private async startStop(key: string, vm: Vm, vmi: Vmi | undefined): Promise<SyncError | undefined> {
    const strategy = vmRunStrategy(vm);
    switch (strategy) {
      case 'Always':
        if (vmi) {
          if (hasStopRequestForVmi(vm, vmi) || isFinal(vmi)) await this.stopVmi(key, vm, vmi);
          return undefined;
        }
        return this.startUnlessBackingOff(key, vm);
      case 'RerunOnFailure':
        if (vmi) {
          const stopRequested = hasStopRequestForVmi(vm, vmi);
          const failed = vmi.status?.phase === 'Failed';
          if ((stopRequested || failed) && !vmi.metadata.deletionTimestamp) {
            await this.stopVmi(key, vm, vmi);
            // a failure is rerun: the start request outlives the VMI, which the status cannot tell
            if (failed && !stopRequested) await this.addStartRequest(vm);
          }
          return undefined;
        }
        // stopped (the stop subresource): it stays so until a start request, or until the VM comes
        // to RerunOnFailure from another run strategy (the one last acted on is status.runStrategy)
        if (!hasStartRequest(vm) && vm.status?.runStrategy === 'RerunOnFailure') return undefined;
        return this.startUnlessBackingOff(key, vm);
      case 'Manual':
        if (vmi) {
          if (hasStopRequestForVmi(vm, vmi)) await this.stopVmi(key, vm, vmi);
        } else if (hasStartRequest(vm)) await this.startVmi(key, vm);
        return undefined;
      case 'Halted':
        if (!vmi) {
          // a start request on a halted VM (virtctl start) switches it to Always / running: true
          if (hasStartRequest(vm)) {
            try {
              await updateIfChanged<Vm>({
                client: this.ctx.client,
                resource: VMS,
                current: vm,
                mutate: (latest) => {
                  if (latest.spec.runStrategy !== undefined) latest.spec.runStrategy = 'Always';
                  else latest.spec.running = true;
                  return latest;
                },
              });
            } catch (e) {
              return new SyncError('FailedCreate', `failure while starting VMI: ${errorMessage(e)}`);
            }
          }
          return undefined;
        }
        await this.stopVmi(key, vm, vmi);
        return undefined;
      case 'Once':
        if (!vmi) await this.startVmi(key, vm);
        return undefined;
      default:
        return new SyncError('FailedCreate', `unknown runstrategy: ${String(strategy)}`);
    }
  }

  private async startUnlessBackingOff(key: string, vm: Vm): Promise<undefined> {
    const left = this.backoffLeftSeconds(vm);
    if (left > 0) {
      this.ctx.log.info('delaying the start of the VM: start failure backoff', {
        kind: 'VirtualMachine',
        namespace: vm.metadata.namespace,
        name: vm.metadata.name,
        seconds: left,
      });
      this.ctx.vmQueue.addAfter(key, left * 1000);
      return undefined;
    }
    await this.startVmi(key, vm);
    return undefined;
  }

  private backoffLeftSeconds(vm: Vm): number {
    const at = vm.status?.startFailure?.retryAfterTimestamp;
    if (!at) return 0;
    const diff = Math.ceil((Date.parse(at) - Date.now()) / 1000);
    return diff > 0 ? diff : 0;
  }

  /**
   * Upstream's instancetype controller Sync: the instance type and preference the VM names can be read (else a
   * FailedFindInstancetype / FailedFindPreference sync error: the VM does not start), and they are stored in
   * ControllerRevisions recorded in the VM's status. Returns the VM as written.
   */
  private async syncInstancetype(vm: Vm): Promise<Vm> {
    if (!vm.spec.instancetype && !vm.spec.preference) return vm;
    const { client } = this.ctx;
    // reads the objects only while a revision is not recorded yet (a missing one: FailedFind*); once recorded, a
    // reconcile reads nothing here (the VMI's creation reads the revisions)
    const refs = await storeVmRevisions(client, vm, (it) => {
      // the instance type may have changed since the VM was admitted: upstream checks once more
      const conflicts = applyToVmiSpec(
        'spec.template.spec',
        it,
        undefined,
        structuredClone(vm.spec.template.spec),
        structuredClone(vm.spec.template.metadata ?? {}),
      );
      if (conflicts.length) throw new SyncError('FailedCreate', conflictsMessage(conflicts));
    });
    if (!refs) return vm;
    try {
      const r = await updateIfChanged<Vm>({
        client,
        resource: VMS,
        current: vm,
        subresource: 'status',
        mutate: (latest) => {
          latest.status = { ...latest.status, ...refs };
          return latest;
        },
      });
      return r.object ?? vm;
    } catch (e) {
      throw new SyncError(
        'FailedCreate',
        `failed to record the instancetype and preference ControllerRevisions: ${errorMessage(e)}`,
      );
    }
  }

  /**
   * The VMI this VM starts: its template, name, owner reference, labels, firmware UUID, finalizers; with the
   * instance type and preference of `specs` applied (and the annotations naming them), then the defaults.
   */
  vmiFromVm(vm: Vm, specs: VmSpecs = {}): Vmi {
    try {
      return this.vmiFromVmWithDefaults(vm, specs);
    } catch (e) {
      // a default the cluster's configuration cannot give (e.g. bridge not permitted on the pod network)
      if (e instanceof DefaultsError) throw new SyncError('FailedCreate', e.message);
      throw e;
    }
  }

  private vmiFromVmWithDefaults(vm: Vm, specs: VmSpecs): Vmi {
    const defaults = this.ctx.clusterDefaults();
    const d = setVirtualMachineDefaults(vm, defaults);
    const tmeta = structuredClone(vm.spec.template.metadata ?? {}) as Vmi['metadata'];
    delete tmeta.generateName;
    const spec = structuredClone(d.spec.template.spec);
    if (vm.spec.instancetype || vm.spec.preference) {
      tmeta.annotations = { ...(tmeta.annotations ?? {}), ...instancetypeAnnotations(vm) };
      const conflicts = applyToVmiSpec('spec', specs.instancetype, specs.preference, spec, tmeta);
      if (conflicts.length)
        throw new SyncError(
          'FailedCreate',
          `VMI conflicts with instancetype spec in fields: [${conflicts.map((c) => c.path).join(', ')}]`,
        );
      applyVmiSpecDefaults(spec, vm.metadata.name, defaults);
    }
    if (hasStartPausedRequest(vm)) spec.startStrategy = 'Paused';
    return {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstance',
      metadata: {
        ...tmeta,
        name: vm.metadata.name,
        namespace: vm.metadata.namespace,
        labels: vm.spec.template.metadata?.labels,
        annotations: {
          ...(tmeta.annotations ?? {}),
          [ANNOTATION_VM_GENERATION]: String(vm.metadata.generation ?? 0),
          [ANNOTATION_VM_TEMPLATE_HASH]: vmTemplateHash(vm),
        },
        ownerReferences: [vmOwnerReference(vm)],
        finalizers: [VMI_FINALIZER, VM_CONTROLLER_FINALIZER],
      },
      spec,
    } as Vmi;
  }

  private async startVmi(key: string, vm: Vm): Promise<void> {
    const { ctx } = this;
    const vmi = this.vmiFromVm(vm, await findVmSpecs(ctx.client, vm));
    ctx.vmExpectations.expectCreations(key, 1);
    try {
      await ctx.client.create<Vmi>(VMIS, vm.metadata.namespace, vmi);
    } catch (e) {
      ctx.vmExpectations.creationObserved(key);
      ctx.recorder.event(
        vmRef(vm),
        'Warning',
        'FailedCreate',
        `Error creating virtual machine instance: ${errorMessage(e)}`,
      );
      throw new SyncError('FailedCreate', `failure while starting VMI: ${errorMessage(e)}`);
    }
    ctx.recorder.event(
      vmRef(vm),
      'Normal',
      'SuccessfulCreate',
      `Started the virtual machine by creating the new virtual machine instance ${vmi.metadata.name}`,
    );
    ctx.log.info('started the VM by creating its VMI', {
      kind: 'VirtualMachine',
      namespace: vm.metadata.namespace,
      name: vm.metadata.name,
      uid: vm.metadata.uid,
    });
  }

  private async stopVmi(key: string, vm: Vm, vmi: Vmi): Promise<void> {
    const { ctx } = this;
    if (vmi.metadata.deletionTimestamp) return;
    ctx.vmExpectations.expectDeletions(key, 1);
    try {
      // the VMI's own terminationGracePeriodSeconds applies (virt-handler shuts the guest down)
      await ctx.client.delete(VMIS, vmi.metadata.namespace, vmi.metadata.name!, {
        preconditionUid: vmi.metadata.uid,
      });
    } catch (e) {
      ctx.vmExpectations.deletionObserved(key);
      if (isNotFound(e)) return;
      ctx.recorder.event(
        vmRef(vm),
        'Warning',
        'FailedDelete',
        `Error deleting virtual machine instance ${vmi.metadata.name}: ${errorMessage(e)}`,
      );
      throw new SyncError('FailedDelete', `failure while deleting VMI: ${errorMessage(e)}`);
    }
    ctx.recorder.event(
      vmRef(vm),
      'Normal',
      'SuccessfulDelete',
      `Stopped the virtual machine by deleting the virtual machine instance ${vmi.metadata.uid}`,
    );
    ctx.log.info('stopped the VM by deleting its VMI', {
      kind: 'VirtualMachine',
      namespace: vm.metadata.namespace,
      name: vm.metadata.name,
      vmi: vmi.metadata.uid,
      phase: vmi.status?.phase,
    });
  }

  /** The status the VM should have (upstream's updateStatus without hotplug). */
  desiredStatus(key: string, vm: Vm, vmi: Vmi | undefined, syncErr: SyncError | undefined, vmiGone: boolean) {
    const status: VirtualMachineStatus = structuredClone(vm.status ?? {});
    status.created = !!vmi;
    status.ready = !!vmi && hasCondition(vmi.status?.conditions, 'Ready', 'True');
    if (!status.ready) delete status.ready;
    if (!status.created) delete status.created;

    // the first state change request is done once its effect is visible
    const req = status.stateChangeRequests?.[0];
    if (req) {
      let trim = false;
      if (req.action === 'Stop') trim = vmi ? !req.uid || req.uid !== vmi.metadata.uid : vmiGone;
      // a VMI on its way out (a failure being rerun) does not answer a start request
      else if (req.action === 'Start') trim = !!vmi && !vmi.metadata.deletionTimestamp && !isFinal(vmi);
      if (trim) {
        status.stateChangeRequests = status.stateChangeRequests!.slice(1);
        if (status.stateChangeRequests.length === 0) delete status.stateChangeRequests;
      }
    }

    // start failures: cleared once a VMI ran, or under a strategy that does not restart on its own
    const strategy = vmRunStrategy(vm);
    const restarts = strategy === 'Always' || strategy === 'RerunOnFailure' || strategy === 'Once';
    if (wasRunning(vmi) || !restarts) delete status.startFailure;
    else if (vmi && failedEarly(vmi) && status.startFailure?.lastFailedVMIUID !== vmi.metadata.uid) {
      const count = (status.startFailure?.consecutiveFailCount ?? 0) + 1;
      const delay = startBackoffSeconds(count);
      status.startFailure = {
        consecutiveFailCount: count,
        lastFailedVMIUID: vmi.metadata.uid,
        retryAfterTimestamp: new Date(Date.now() + delay * 1000).toISOString().replace(/\.\d+Z$/, 'Z'),
      };
    }

    // conditions: Ready from the VMI, Failure from the sync error, the VMI's others mirrored
    const now = nowTimestamp();
    const vmiReady = getCondition(vmi?.status?.conditions, 'Ready');
    if (!vmi)
      updateCondition(status, {
        type: 'Ready',
        status: 'False',
        reason: 'VMINotExists',
        message: 'VMI does not exist',
        lastProbeTime: null,
        lastTransitionTime: now,
      });
    else if (!vmiReady)
      updateCondition(status, {
        type: 'Ready',
        status: 'False',
        reason: 'VMIConditionMissing',
        message: 'VMI is missing the Ready condition',
        lastProbeTime: null,
        lastTransitionTime: now,
      });
    else updateCondition(status, { ...vmiReady });
    if (syncErr)
      updateCondition(status, {
        type: 'Failure',
        status: 'True',
        reason: syncErr.reason,
        message: syncErr.message,
        lastProbeTime: null,
        lastTransitionTime: now,
      });
    else removeCondition(status, 'Failure');
    if (vmi) {
      const mirrored = new Set<string>();
      for (const c of vmi.status?.conditions ?? []) {
        if (c.type === 'Ready' || c.type === 'Failure') continue;
        mirrored.add(c.type);
        updateCondition(status, { ...c } as Condition);
      }
      for (const c of [...(status.conditions ?? [])])
        if (
          c.type !== 'Ready' &&
          c.type !== 'Failure' &&
          c.type !== 'RestartRequired' &&
          c.type !== 'DataVolumesReady' &&
          !mirrored.has(c.type)
        )
          removeCondition(status, c.type);
    }
    // RestartRequired: the template, instance type or preference changed since the running VMI was started from
    // it (any change: kubevirt-ts updates nothing live); gone once the VM stops or restarts with the change
    const startedFrom = vmi?.metadata.annotations?.[ANNOTATION_VM_TEMPLATE_HASH];
    if (vmi && !isFinal(vmi) && startedFrom && startedFrom !== vmTemplateHash(vm)) {
      if (!hasCondition(status.conditions, 'RestartRequired', 'True'))
        updateCondition(status, {
          type: 'RestartRequired',
          status: 'True',
          message: RESTART_REQUIRED_MESSAGE,
          lastProbeTime: null,
          lastTransitionTime: now,
        });
    } else removeCondition(status, 'RestartRequired');

    // DataVolumesReady (kubevirt-ts; upstream v1.9 puts it on the VMI, which does not exist yet here): False with
    // the failed DataVolume's reason while one of the VM's DataVolumes failed or its importer stopped on an error
    const dvError = dataVolumeError(
      vm.metadata.namespace ?? 'default',
      vm.spec.template?.spec?.volumes,
      (ns, n) => this.ctx.dataVolumes.get(ns, n),
    );
    if (dvError) {
      const cur = getCondition(status.conditions, 'DataVolumesReady');
      if (cur?.status !== 'False' || cur.reason !== dvError.reason || cur.message !== dvError.message)
        updateCondition(status, {
          type: 'DataVolumesReady',
          status: 'False',
          reason: dvError.reason,
          message: dvError.message,
          lastProbeTime: null,
          lastTransitionTime: now,
        });
    } else removeCondition(status, 'DataVolumesReady');

    status.printableStatus = this.printableStatus(key, vm, vmi, status);
    return status;
  }

  /**
   * A claim the VM's template uses exists and is not Bound yet (upstream's HasUnboundPVC; a missing one does not
   * count, nor an ephemeral one).
   */
  private hasUnboundClaim(vm: Vm): boolean {
    const ns = vm.metadata.namespace ?? 'default';
    return claimVolumes({ spec: vm.spec.template.spec } as Pick<Vmi, 'spec'>).some((c) => {
      if (c.source === 'ephemeral') return false;
      const pvc = this.ctx.pvcs.get(ns, c.claimName);
      return !!pvc && pvc.status?.phase !== 'Bound';
    });
  }

  /** First match wins, in upstream's order. */
  printableStatus(key: string, vm: Vm, vmi: Vmi | undefined, status: VirtualMachineStatus): string {
    const conds = vmi?.status?.conditions;
    const paused = hasCondition(conds, 'Paused', 'True');
    const sync = getCondition(conds, 'Synchronized');
    const running = vmi?.status?.phase === 'Running';
    if (vm.metadata.deletionTimestamp) return 'Terminating';
    if (vmi && !isFinal(vmi) && (vmi.metadata.deletionTimestamp || this.stopExpected(key))) return 'Stopping';
    if (vmi && isMigrating(vmi)) return 'Migrating';
    if (vmi && running && paused) return 'Paused';
    if (vmi && running) return 'Running';
    if (sync?.status === 'False' && sync.reason === 'FailedPvcNotFound') return 'ErrorPvcNotFound';
    const ns = vm.metadata.namespace ?? 'default';
    const dv = (n: string, name: string) => this.ctx.dataVolumes.get(n, name);
    if (dataVolumeError(ns, vm.spec.template?.spec?.volumes, dv)) return 'DataVolumeError';
    if (hasCondition(conds, 'PodScheduled', 'False', 'Unschedulable')) return 'ErrorUnschedulable';
    if (dataVolumeProvisioning(ns, vm.spec.template?.spec?.volumes, dv)) return 'Provisioning';
    if (isSetToStart(vm, vmi) && this.hasUnboundClaim(vm)) return 'WaitingForVolumeBinding';
    if (sync?.status === 'False' && sync.reason === REASON_ERR_IMAGE_PULL) return 'ErrImagePull';
    if (sync?.status === 'False' && sync.reason === REASON_IMAGE_PULL_BACKOFF) return 'ImagePullBackOff';
    if (
      vmi
        ? ['', 'Pending', 'Scheduling', 'Scheduled'].includes(vmi.status?.phase ?? '')
        : this.startExpected(key)
    )
      return 'Starting';
    const strategy = vmRunStrategy(vm);
    if (
      (!vmi || isFinal(vmi)) &&
      !this.startExpected(key) &&
      (status.startFailure?.consecutiveFailCount ?? 0) > 0 &&
      (strategy === 'Always' || strategy === 'RerunOnFailure' || strategy === 'Once')
    )
      return 'CrashLoopBackOff';
    if (vmi ? isFinal(vmi) : !this.startExpected(key)) return 'Stopped';
    return 'Unknown';
  }

  private async updateStatus(key: string, vm: Vm, vmi: Vmi | undefined, syncErr: SyncError | undefined) {
    const { ctx } = this;
    // a Stop request with no VMI in the cache is confirmed against the server before it is dropped
    let vmiGone = false;
    if (!vmi && firstRequest(vm)?.action === 'Stop')
      vmiGone = !(await ctx.client.getOrUndefined<Vmi>(VMIS, vm.metadata.namespace, vm.metadata.name!));
    try {
      await updateIfChanged<Vm>({
        client: ctx.client,
        resource: VMS,
        current: vm,
        subresource: 'status',
        mutate: (latest) => ({
          ...latest,
          // status.runStrategy: the run strategy this sync acted on (RerunOnFailure tells a stop from a switch)
          status: {
            ...this.desiredStatus(key, latest, vmi, syncErr, vmiGone),
            runStrategy: vmRunStrategy(vm),
          },
        }),
      });
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
    // the VM has recorded what it needed from a finished VMI: let it go
    if (vmi && isFinal(vmi) && vmi.metadata.finalizers?.includes(VM_CONTROLLER_FINALIZER)) {
      try {
        await updateIfChanged<Vmi>({
          client: ctx.client,
          resource: VMIS,
          current: vmi,
          mutate: (latest) => {
            latest.metadata.finalizers = latest.metadata.finalizers?.filter(
              (f) => f !== VM_CONTROLLER_FINALIZER,
            );
            if (latest.metadata.finalizers?.length === 0) delete latest.metadata.finalizers;
            return latest;
          },
        });
      } catch (e) {
        if (!isNotFound(e)) throw e;
      }
    }
  }
}
