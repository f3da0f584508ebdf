// The VMI controller: one launcher Pod per VirtualMachineInstance, rendered by @kubevirt-ts/renderer,
// and the VMI's phase from that Pod: "" -> Pending (Pod being created) -> Scheduling (Pod exists) ->
// Scheduled (Pod running: handed to virt-handler on pod.spec.nodeName). Pod failures (unschedulable,
// image pull errors, eviction, deletion by someone else) show in the VMI's conditions and phase.
// Level-triggered: everything is computed from the cached VMI and Pod, whatever event woke the key.
import { isAlreadyExists, isNotFound, updateIfChanged, PODS } from '@kubevirt-ts/controller-runtime';
import {
  renderLaunchPod,
  renderProvisioningPod,
  provisioningPodName,
  RenderError,
  COMPUTE_CONTAINER,
  type RendererConfig,
} from '@kubevirt-ts/renderer';
import type { Condition } from '@kubevirt-ts/api';
import {
  LABEL_NODE_NAME,
  SyncError,
  getCondition,
  VMIS,
  VMI_FINALIZER,
  VM_CONTROLLER_FINALIZER,
  controllerRef,
  errorMessage,
  vmiRef,
  isFinal,
  isUnprocessed,
  nowTimestamp,
  removeCondition,
  updateCondition,
  type Phase,
  type Vmi,
} from './common.js';
import type { ControllerContext, Pod } from './context.js';
import { LABEL_MIGRATION_JOB_UID } from './migration.js';
import {
  REASON_PVC_NOT_FOUND,
  REASON_PVC_VOLUME_MODE,
  checkClaims,
  claimVolumes,
  desiredVolumeStatus,
  type ClaimWait,
} from './claims.js';

export const REASON_FAILED_CREATE_POD = 'FailedCreate';
export const REASON_FAILED_DELETE_POD = 'FailedDelete';
export const REASON_ERR_IMAGE_PULL = 'ErrImagePull';
export const REASON_IMAGE_PULL_BACKOFF = 'ImagePullBackOff';
export const REASON_POD_NOT_EXISTS = 'PodNotExists';
export const REASON_POD_TERMINATING = 'PodTerminating';
/** reasons of virt-handler's Ready False while the domain runs: QEMU still starting, or the domain paused */
const HANDLER_DOMAIN_REASONS: readonly string[] = ['StartingUp', 'Paused'];
export const REASON_GUEST_NOT_RUNNING = 'GuestNotRunning';
export const REASON_POD_CONDITION_MISSING = 'PodConditionMissing';

/**
 * The launcher Pod waits for a claim (upstream's informalSyncError): the VMI stays Pending with the Synchronized
 * condition saying why, and is not requeued with backoff: a claim event wakes it, or `recheckMs` when what it waits
 * for is not watched.
 */
export class ClaimWaitError extends SyncError {
  readonly recheckMs: number | undefined;
  constructor(w: ClaimWait) {
    super(w.reason, w.message);
    this.recheckMs = w.recheckMs;
  }
}

const isFinalPhase = (p: string) => p === 'Succeeded' || p === 'Failed';
const isPodDown = (p: Pod) => p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed';
const computeStatus = (p: Pod) => p.status?.containerStatuses?.find((c) => c.name === COMPUTE_CONTAINER);
const isComputeDown = (p: Pod) => !!computeStatus(p)?.state?.terminated;
export const isPodDownOrGoingDown = (p: Pod): boolean =>
  isPodDown(p) || isComputeDown(p) || !!p.metadata?.deletionTimestamp;

/** Running, compute container started and every other container ready (upstream's hand-over test). */
export function isPodReady(p: Pod): boolean {
  if (isPodDownOrGoingDown(p)) return false;
  for (const c of p.status?.containerStatuses ?? []) {
    if (c.name === COMPUTE_CONTAINER) {
      if (!c.state?.running) return false;
    } else if (!c.ready) return false;
  }
  return p.status?.phase === 'Running';
}

function imageError(p: Pod): SyncError | undefined {
  for (const c of [...(p.status?.initContainerStatuses ?? []), ...(p.status?.containerStatuses ?? [])]) {
    const r = c.state?.waiting?.reason;
    if (r === REASON_ERR_IMAGE_PULL || r === REASON_IMAGE_PULL_BACKOFF)
      return new SyncError(r, c.state?.waiting?.message ?? r);
  }
  return undefined;
}

export class VmiController {
  constructor(private readonly ctx: ControllerContext) {}

  /**
   * The VMI's current launcher Pod: the newest one on `status.nodeName` once the VMI has a node (a
   * migration target Pod on another node is not it until the migration moves the VMI there), else the newest.
   */
  currentPod(vmi: Vmi): Pod | undefined {
    const all = this.ctx.podsOfVmi(vmi.metadata.uid ?? '');
    const node = vmi.status?.nodeName;
    const pods = node ? all.filter((p) => p.spec?.nodeName === node) : all;
    let best: Pod | undefined;
    for (const p of pods)
      if (!best || (p.metadata?.creationTimestamp ?? '') > (best.metadata?.creationTimestamp ?? '')) best = p;
    return best;
  }

  /**
   * The Pods a finished migration leaves: after a completed one the source Pod, after a failed or cancelled one its
   * target Pod (label kubevirt.io/migrationJobUID). Their launchers exited with (or without) the domain, but their
   * container-disk containers would keep the Pods NotReady forever, and with them the anti-affinity that keeps the
   * next migration's target off their nodes. Never a Pod on the VMI's node, nor one of another migration.
   */
  private async deleteFinishedMigrationPods(vmi: Vmi): Promise<void> {
    const { ctx } = this;
    const ms = vmi.status?.migrationState;
    if (!ms?.completed || !ms.migrationUid) return;
    const node = vmi.status?.nodeName;
    const done = ctx.podsOfVmi(vmi.metadata.uid ?? '').filter((p) => {
      if (p.metadata?.deletionTimestamp || !p.spec?.nodeName || p.spec.nodeName === node) return false;
      if (ms.failed) return p.metadata?.labels?.[LABEL_MIGRATION_JOB_UID] === ms.migrationUid;
      return p.metadata?.name === ms.sourcePod && ms.targetNode === node;
    });
    for (const p of done) {
      try {
        await ctx.client.delete(PODS, vmi.metadata.namespace, p.metadata!.name!, {
          preconditionUid: p.metadata?.uid,
        });
      } catch (e) {
        if (isNotFound(e)) continue;
        throw e;
      }
      const what = ms.failed ? 'the target pod of a failed migration' : 'the migrated-from pod';
      ctx.recorder.event(vmiRef(vmi), 'Normal', 'SuccessfulDelete', `Deleted ${what} ${p.metadata!.name}`);
      ctx.log.info(`deleted ${what}`, {
        kind: 'VirtualMachineInstance',
        namespace: vmi.metadata.namespace,
        name: vmi.metadata.name,
        pod: p.metadata!.name,
      });
    }
  }

  async reconcile(key: string): Promise<void> {
    const { ctx } = this;
    const vmi = ctx.vmis.getByKey(key);
    if (!vmi) {
      ctx.podExpectations.deleteExpectations(key);
      ctx.vmiExpectations.deleteExpectations(key);
      return;
    }
    // until the cache shows our own Pod creations and VMI writes, acting could duplicate them
    if (!ctx.podExpectations.satisfiedExpectations(key) || !ctx.vmiExpectations.satisfiedExpectations(key))
      return;
    const pod = this.currentPod(vmi);
    const r = await this.sync(key, vmi, pod);
    // a Pod was just created: the status is written once the cache shows it (its add event queues this key
    // again, and the expectations hold the key until then), then "" -> Pending -> Scheduling in one write;
    // meanwhile the workers go on creating the other VMIs' Pods
    if (r && !(r instanceof SyncError)) return;
    const syncErr = r instanceof SyncError ? r : undefined;
    await this.updateStatus(key, vmi, pod, syncErr);
    if (syncErr instanceof ClaimWaitError) {
      if (syncErr.recheckMs !== undefined) ctx.vmiQueue.addAfter(key, syncErr.recheckMs);
      return;
    }
    if (syncErr && syncErr.retry && !isFinal(vmi)) throw syncErr;
  }

  /** a SyncError, or the Pod it created */
  private async sync(key: string, vmi: Vmi, pod: Pod | undefined): Promise<SyncError | Pod | undefined> {
    const { ctx } = this;
    if (vmi.metadata.deletionTimestamp) {
      try {
        await this.deleteAllPods(vmi);
      } catch (e) {
        return new SyncError(REASON_FAILED_DELETE_POD, `failed to delete pod: ${errorMessage(e)}`);
      }
      return undefined;
    }
    await this.deleteFinishedMigrationPods(vmi);
    if (isFinal(vmi) || pod) return undefined;
    // a Pod is created once, while the VMI is unprocessed; a lost Pod later is a failure, not a re-create
    if (!isUnprocessed(vmi)) return undefined;
    const config = ctx.rendererConfig();
    if (!config)
      return new SyncError(
        REASON_FAILED_CREATE_POD,
        'the kubevirt-ts config object is missing (launcher image unknown)',
      );
    // every claim the Pod mounts exists and can be used (bound, or bound by this Pod: WaitForFirstConsumer)
    let check;
    try {
      check = await checkClaims(vmi, ctx.claimLookup);
    } catch (e) {
      return new SyncError(REASON_FAILED_CREATE_POD, `cannot read the VMI's claims: ${errorMessage(e)}`);
    }
    if (!check.ready) {
      const sync = vmi.status?.conditions?.find((c) => c.type === 'Synchronized');
      // one event per new reason or message, not one per reconcile
      if (sync?.reason !== check.reason || sync?.message !== check.message) {
        ctx.recorder.event(
          vmiRef(vmi),
          check.reason === REASON_PVC_VOLUME_MODE ? 'Warning' : 'Normal',
          check.reason,
          check.message,
        );
        ctx.log.info('launcher pod waits for a claim', {
          kind: 'VirtualMachineInstance',
          namespace: vmi.metadata.namespace,
          name: vmi.metadata.name,
          reason: check.reason,
          message: check.message,
        });
      }
      if (check.firstConsumer) {
        const err = await this.ensureProvisioningPod(vmi, config);
        if (err) return err;
      }
      return new ClaimWaitError(check);
    }
    // the temporary Pod that bound claims of DataVolumes is not needed any more (its claims are populated)
    const dvClaims = claimVolumes(vmi).some((c) =>
      ctx.pvcs
        .get(vmi.metadata.namespace ?? 'default', c.claimName)
        ?.metadata?.ownerReferences?.some((r) => r.kind === 'DataVolume'),
    );
    if (dvClaims) {
      try {
        await ctx.client.delete(PODS, vmi.metadata.namespace, provisioningPodName(vmi));
        ctx.log.info('deleted the temporary provisioning pod', {
          kind: 'VirtualMachineInstance',
          namespace: vmi.metadata.namespace,
          name: vmi.metadata.name,
        });
      } catch (e) {
        if (!isNotFound(e))
          return new SyncError(
            REASON_FAILED_DELETE_POD,
            `failed to delete the temporary provisioning pod: ${errorMessage(e)}`,
          );
      }
    }
    let podSpec;
    try {
      podSpec = renderLaunchPod(vmi, config, check.claims);
    } catch (e) {
      const msg = `failed to render launch manifest: ${errorMessage(e)}`;
      ctx.recorder.event(vmiRef(vmi), 'Warning', REASON_FAILED_CREATE_POD, msg);
      // the VMI's spec is immutable: rendering will fail the same way every time
      return new SyncError(REASON_FAILED_CREATE_POD, msg, !(e instanceof RenderError));
    }
    ctx.podExpectations.expectCreations(key, 1);
    try {
      const created = await ctx.client.create<Pod>(PODS, vmi.metadata.namespace, podSpec as Pod);
      ctx.recorder.event(
        vmiRef(vmi),
        'Normal',
        'SuccessfulCreate',
        `Created virtual machine pod ${created.metadata?.name}`,
      );
      ctx.log.info('created launcher pod', {
        kind: 'VirtualMachineInstance',
        namespace: vmi.metadata.namespace,
        name: vmi.metadata.name,
        uid: vmi.metadata.uid,
        pod: created.metadata?.name,
      });
      return created;
    } catch (e) {
      ctx.podExpectations.creationObserved(key);
      const msg = errorMessage(e);
      ctx.recorder.event(vmiRef(vmi), 'Warning', REASON_FAILED_CREATE_POD, `Error creating pod: ${msg}`);
      if (msg.includes('violates PodSecurity'))
        return new SyncError(
          REASON_FAILED_CREATE_POD,
          `failed to create pod for vmi ${key}, it needs a privileged namespace to run: ${msg}`,
        );
      return new SyncError(REASON_FAILED_CREATE_POD, `failed to create virtual machine pod: ${msg}`);
    }
    return undefined;
  }

  /**
   * Creates the temporary Pod that binds the VMI's claims when a DataVolume waits for its first consumer (once: a
   * second create answers AlreadyExists). The garbage collector deletes it with the VMI; the VMI controller once
   * its claims are ready.
   */
  private async ensureProvisioningPod(vmi: Vmi, config: RendererConfig): Promise<SyncError | undefined> {
    const { ctx } = this;
    let pod;
    try {
      pod = renderProvisioningPod(vmi, config);
    } catch (e) {
      return new SyncError(
        REASON_FAILED_CREATE_POD,
        `failed to render the provisioning pod: ${errorMessage(e)}`,
      );
    }
    try {
      await ctx.client.create<Pod>(PODS, vmi.metadata.namespace, pod as Pod);
    } catch (e) {
      if (isAlreadyExists(e)) return undefined;
      const msg = `failed to create the temporary provisioning pod: ${errorMessage(e)}`;
      ctx.recorder.event(vmiRef(vmi), 'Warning', REASON_FAILED_CREATE_POD, msg);
      return new SyncError(REASON_FAILED_CREATE_POD, msg);
    }
    ctx.recorder.event(
      vmiRef(vmi),
      'Normal',
      'SuccessfulCreate',
      `Created temporary pod ${pod.metadata?.name} to bind the claims of DataVolumes waiting for their first consumer`,
    );
    return undefined;
  }

  private async deleteAllPods(vmi: Vmi): Promise<void> {
    for (const p of this.ctx.podsOfVmi(vmi.metadata.uid ?? '')) {
      if (p.metadata?.deletionTimestamp) continue;
      try {
        await this.ctx.client.delete(PODS, p.metadata?.namespace, p.metadata!.name!, {
          preconditionUid: p.metadata?.uid,
        });
        this.ctx.recorder.event(
          vmiRef(vmi),
          'Normal',
          'SuccessfulDelete',
          `Deleted virtual machine pod ${p.metadata?.name}`,
        );
      } catch (e) {
        if (isNotFound(e)) continue;
        this.ctx.recorder.event(
          vmiRef(vmi),
          'Warning',
          REASON_FAILED_DELETE_POD,
          `Error deleting pod ${p.metadata?.name}: ${errorMessage(e)}`,
        );
        throw e;
      }
    }
  }

  /** The status (and finalizers, labels) the VMI should have, from the cached VMI and Pod. */
  desired(latest: Vmi, pod: Pod | undefined, syncErrIn: SyncError | undefined): Vmi {
    const vmi = latest;
    const status = (vmi.status ??= {});
    let syncErr = syncErrIn;
    const oldPhase = status.phase ?? '';
    const podExists = !!pod;
    // the cached Pods, and the one this reconcile created (not in the cache yet)
    const pods = this.ctx.podsOfVmi(vmi.metadata.uid ?? '');
    if (pod && !pods.some((p) => p.metadata?.uid === pod.metadata?.uid)) pods.push(pod);
    const podsLeft = pods.length;

    const passed: Phase[] = [];
    const setPhase = (p: Phase) => {
      if (p !== (status.phase ?? '')) passed.push(p);
      status.phase = p;
    };

    this.syncReadyCondition(vmi, pod);
    if (!isFinal(vmi) && !vmi.metadata.deletionTimestamp && !vmi.metadata.finalizers?.includes(VMI_FINALIZER))
      (vmi.metadata.finalizers ??= []).push(VMI_FINALIZER);

    if (isUnprocessed(vmi)) {
      // with a Pod the VMI is Scheduling, and the Scheduling rules below apply at once (one write, not two)
      if (podExists) {
        if (!status.phase) setPhase('Pending'); // passed through, in the same write: its timestamp is kept
        setPhase('Scheduling');
      } else if (vmi.metadata.deletionTimestamp) setPhase('Failed');
      else if (syncErr && !syncErr.retry) setPhase('Failed');
      else {
        setPhase('Pending');
        // upstream: a missing claim also shows as an unschedulable Pod (the VM's ErrorPvcNotFound comes first)
        if (syncErr?.reason === REASON_PVC_NOT_FOUND)
          updateCondition(status, {
            type: 'PodScheduled',
            status: 'False',
            reason: 'Unschedulable',
            message: syncErr.message,
            lastProbeTime: null,
            lastTransitionTime: nowTimestamp(),
          });
        else removeCondition(status, 'PodScheduled');
      }
    }
    if (status.phase === 'Scheduling') {
      if (pod) {
        if (pod.status?.qosClass) status.qosClass = pod.status.qosClass;
        else delete status.qosClass;
        const sched = pod.status?.conditions?.find((c) => c.type === 'PodScheduled');
        if (sched && sched.status === 'False') updateCondition(status, { ...sched } as Condition);
        else removeCondition(status, 'PodScheduled');
        syncErr = imageError(pod) ?? syncErr;
        if (isPodReady(pod) && !vmi.metadata.deletionTimestamp) {
          setPhase('Scheduled');
          const node = pod.spec?.nodeName ?? '';
          (vmi.metadata.labels ??= {})[LABEL_NODE_NAME] = node;
          status.nodeName = node;
        } else if (isPodDownOrGoingDown(pod)) setPhase('Failed');
      } else setPhase('Failed'); // someone else deleted the Pod
    } else if (status.phase === 'Scheduled' && !podExists) {
      // upstream: a Scheduled VMI whose Pod is gone fails here; its handler never started it (or was down while
      // the Pod went), so nobody else would make it final, and a deleted one would keep its finalizer forever
      setPhase('Failed');
    } else if (isFinal(vmi) && isFinalPhase(oldPhase)) {
      if (podsLeft === 0 && vmi.metadata.finalizers) {
        vmi.metadata.finalizers = vmi.metadata.finalizers.filter((f) => f !== VMI_FINALIZER);
      }
      const owner = controllerRef(vmi, 'VirtualMachine');
      if (!owner || !this.ctx.vms.get(vmi.metadata.namespace, owner.name)) {
        if (vmi.metadata.finalizers)
          vmi.metadata.finalizers = vmi.metadata.finalizers.filter((f) => f !== VM_CONTROLLER_FINALIZER);
      }
      if (vmi.metadata.finalizers?.length === 0) delete vmi.metadata.finalizers;
    }
    // upstream's status.activePods: every Pod of the VMI, uid -> node; virt-handler finds a Pod's dirs (launcher
    // socket, container disks) under kubelet's pod dir by that uid. Kept (possibly {}) once set. Before the VMI is
    // Scheduled, nodes show as "" (the handler acts from Scheduled on): a Pod's binding alone is no write.
    const early = status.phase === 'Pending' || status.phase === 'Scheduling';
    if (pods.length || status.activePods)
      status.activePods = Object.fromEntries(
        pods.map((p) => [p.metadata!.uid!, early ? '' : (p.spec?.nodeName ?? '')]),
      );
    // upstream: the controller tells virt-handler about the claims (persistentVolumeClaimInfo: access modes, volume
    // mode, size) from the Pod's creation on, and keeps it current while the VMI runs (a resized claim); the
    // handler keeps what is written here
    if (pods.length > 0 && !isFinal(vmi) && !vmi.metadata.deletionTimestamp) {
      const vs = desiredVolumeStatus(vmi, (ns, n) => this.ctx.pvcs.get(ns, n));
      if (vs) status.volumeStatus = vs;
    }
    // Scheduled and Running belong to virt-handler: only the Ready condition above is kept current
    if (status.nodeName) (vmi.metadata.labels ??= {})[LABEL_NODE_NAME] = status.nodeName;

    // a final VMI keeps the Synchronized condition that explains why it failed
    if (!['Scheduled', 'Running', 'Succeeded', 'Failed'].includes(oldPhase)) {
      if (syncErr)
        updateCondition(status, {
          type: 'Synchronized',
          status: 'False',
          reason: syncErr.reason,
          message: syncErr.message,
          lastProbeTime: null,
          lastTransitionTime: nowTimestamp(),
        });
      else removeCondition(status, 'Synchronized');
    }
    // every phase passed gets its timestamp, also when one reconcile passes two (Pending -> Scheduling -> Scheduled)
    for (const p of passed)
      (status.phaseTransitionTimestamps ??= []).push({ phase: p, phaseTransitionTimestamp: nowTimestamp() });
    return vmi;
  }

  private syncReadyCondition(vmi: Vmi, pod: Pod | undefined): void {
    const status = vmi.status!;
    const now = nowTimestamp();
    const set = (s: string, reason: string, message: string) =>
      updateCondition(status, {
        type: 'Ready',
        status: s,
        reason,
        message,
        lastProbeTime: null,
        lastTransitionTime: now,
      });
    if (!pod) set('False', REASON_POD_NOT_EXISTS, 'virt-launcher pod has not yet been scheduled');
    else if (isPodDownOrGoingDown(pod))
      set('False', REASON_POD_TERMINATING, 'virt-launcher pod is terminating');
    else if (status.phase !== 'Running')
      set('False', REASON_GUEST_NOT_RUNNING, 'Guest VM is not reported as running');
    else {
      const r = pod.status?.conditions?.find((c) => c.type === 'Ready');
      const current = getCondition(status.conditions, 'Ready');
      // the Pod is ready but virt-handler says the domain is still starting or paused: the handler knows, keep its
      // False (overwriting it with True made the two rewrite the status in turn while the domain stayed paused)
      if (
        r?.status === 'True' &&
        current?.status === 'False' &&
        HANDLER_DOMAIN_REASONS.includes(current.reason ?? '')
      ) {
        /* keep the handler's */
      } else if (r)
        updateCondition(status, {
          type: 'Ready',
          status: r.status,
          reason: r.reason,
          message: r.message,
          lastProbeTime: r.lastProbeTime ?? null,
          lastTransitionTime: r.lastTransitionTime ?? now,
        });
      else set('False', REASON_POD_CONDITION_MISSING, 'virt-launcher pod is missing the Ready condition');
    }
    if (status.conditions) for (const c of status.conditions) if (c.reason === undefined) delete c.reason;
  }

  /**
   * One write of the whole VMI (status, finalizers, labels: its CRD has no status subresource, as upstream's),
   * only when it changed: Scheduled and the `kubevirt.io/nodeName` label land together.
   */
  private async updateStatus(key: string, vmi: Vmi, pod: Pod | undefined, syncErr: SyncError | undefined) {
    const { ctx } = this;
    ctx.vmiExpectations.raiseExpectations(key, 1, 0);
    try {
      const r = await updateIfChanged<Vmi>({
        client: ctx.client,
        resource: VMIS,
        current: vmi,
        mutate: (latest) => this.desired(latest, pod, syncErr),
      });
      if (!r.written) ctx.vmiExpectations.lowerExpectations(key, 1, 0);
    } catch (e) {
      ctx.vmiExpectations.lowerExpectations(key, 1, 0);
      if (isNotFound(e)) return;
      throw e;
    }
  }
}
