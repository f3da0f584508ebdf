// The node controller, as upstream's: virt-handler stamps its node with a heartbeat annotation; a node whose
// heartbeat is older than the timeout (or that is gone) is unresponsive. Then the node is labeled
// kubevirt.io/schedulable=false (no new VMIs land there) and every active VMI on it whose launcher Pod is no
// longer alive goes Failed with reason NodeUnresponsive. A VMI whose Pod is still alive is left alone: its
// handler may just be restarting, and the guest may be running; once Kubernetes reports the Pod down
// (node lifecycle, eviction, deletion) the VMI fails.
// Beyond upstream (node loss): a node is *lost* when, besides the stale heartbeat, its kubelet has been
// unreachable (Ready condition Unknown: the node lifecycle controller heard nothing from it) for the same
// timeout. Then nothing on that node reports any more, so its VMIs fail even
// though their Pods still look alive, and their launcher Pods there are force-deleted (what Kubernetes'
// out-of-service taint does), so that the VMI can go and its VM start a replacement elsewhere.
import {
  PODS,
  isNotFound,
  updateIfChanged,
  type KubeObject,
  type Resource,
} from '@kubevirt-ts/controller-runtime';
import { VMIS, errorMessage, isFinal, nowTimestamp, vmiRef, type Vmi } from './common.js';
import type { ControllerContext, Pod } from './context.js';

export const NODES: Resource = { group: '', version: 'v1', plural: 'nodes', namespaced: false };
export const HEARTBEAT_ANNOTATION = 'kubevirt.io/heartbeat';
export const SCHEDULABLE_LABEL = 'kubevirt.io/schedulable';
export const REASON_NODE_UNRESPONSIVE = 'NodeUnresponsive';
/** upstream's values */
export const DEFAULT_HEARTBEAT_TIMEOUT_MS = 5 * 60_000;
export const DEFAULT_NODE_RECHECK_MS = 60_000;

/** the part of a Node's status this controller reads */
export interface NodeCondition {
  type: string;
  status: string;
  reason?: string;
  lastTransitionTime?: string;
}
export type Node = KubeObject & { status?: { conditions?: NodeCondition[] } };

export interface NodeControllerOptions {
  /** a heartbeat older than this makes the node unresponsive (5 min) */
  heartbeatTimeoutMs?: number;
  /** how often a node is checked again without any event (1 min) */
  recheckMs?: number;
  now?: () => number;
}

/** a Pod that still counts as running the VMI: not finished, and not every container terminated */
export function isPodAlive(p: Pod): boolean {
  if (p.status?.phase === 'Succeeded' || p.status?.phase === 'Failed') return false;
  const cs = p.status?.containerStatuses ?? [];
  return !(cs.length > 0 && cs.every((c) => !!c.state?.terminated));
}

export class NodeController {
  private readonly timeout: number;
  private readonly recheck: number;
  private readonly now: () => number;

  constructor(
    private readonly ctx: ControllerContext & {
      nodes: { get(ns: undefined, name: string): Node | undefined };
    },
    o: NodeControllerOptions = {},
  ) {
    this.timeout = o.heartbeatTimeoutMs ?? DEFAULT_HEARTBEAT_TIMEOUT_MS;
    this.recheck = o.recheckMs ?? DEFAULT_NODE_RECHECK_MS;
    this.now = o.now ?? Date.now;
  }

  /**
   * ms until the node's heartbeat expires; <= 0: unresponsive. A node without the annotation (no
   * virt-handler ever ran there) is never unresponsive; a node that is gone always is.
   */
  heartbeatLeft(node: Node | undefined): number {
    if (!node) return 0;
    const hb = node.metadata?.annotations?.[HEARTBEAT_ANNOTATION];
    if (!hb) return Infinity;
    const t = Date.parse(hb);
    if (!Number.isFinite(t)) return Infinity; // unreadable: like upstream, do not act on it
    return t + this.timeout - this.now();
  }

  /**
   * ms until the node counts as lost (<= 0: lost), Infinity while its kubelet is not known to be unreachable.
   * Lost: its Ready condition has been Unknown (the kubelet stopped posting, the node lifecycle controller's
   * "unreachable") for the heartbeat timeout, from its lastTransitionTime. A node without a Node object is not
   * lost (nothing tells that its Pods stopped: a VMI there fails only once its Pod is down, as upstream). A
   * Ready False is a kubelet that still reports (e.g. its network plugin is not ready): its Pods' statuses
   * are current, so it is not lost. A node without a Ready condition is never lost (nothing to tell).
   */
  lostLeft(node: Node | undefined): number {
    if (!node) return Infinity;
    const ready = node.status?.conditions?.find((c) => c.type === 'Ready');
    if (ready?.status !== 'Unknown') return Infinity;
    const t = Date.parse(ready.lastTransitionTime ?? '');
    if (!Number.isFinite(t)) return Infinity;
    return t + this.timeout - this.now();
  }

  /** reconcile the node `name`; returns when to look again (ms), or undefined for a node that is gone */
  async reconcile(name: string): Promise<number | undefined> {
    const { ctx } = this;
    const node = ctx.nodes.get(undefined, name);
    const left = this.heartbeatLeft(node);
    // the node is lost only once its handler is unresponsive too
    const lostLeft = left <= 0 ? this.lostLeft(node) : Infinity;
    const lost = lostLeft <= 0;
    if (left <= 0) {
      if (node && node.metadata?.labels?.[SCHEDULABLE_LABEL] === 'true') {
        ctx.recorder.event(
          { apiVersion: 'v1', kind: 'Node', metadata: node.metadata },
          'Normal',
          REASON_NODE_UNRESPONSIVE,
          'virt-handler is not responsive, marking node as unresponsive',
        );
        await ctx.client.patch(NODES, undefined, name, {
          metadata: { labels: { [SCHEDULABLE_LABEL]: 'false' } },
        });
        ctx.log.warn('virt-handler is not responsive: node marked unschedulable', { node: name });
      }
      const errs: string[] = [];
      const failed = new Set<string>();
      // one VMI at a time: no update storm when something is already wrong
      for (const vmi of this.stuckVmis(name, lost)) {
        try {
          await this.fail(vmi, name, lost);
          failed.add(vmi.metadata.uid ?? '');
        } catch (e) {
          errs.push(
            `failed to move vmi ${vmi.metadata.namespace}/${vmi.metadata.name} to Failed: ${errorMessage(e)}`,
          );
        }
      }
      if (lost) {
        for (const pod of this.podsOnLostNode(name, failed)) {
          try {
            await this.forceDelete(pod, name);
          } catch (e) {
            errs.push(
              `failed to force-delete pod ${pod.metadata?.namespace}/${pod.metadata?.name}: ${errorMessage(e)}`,
            );
          }
        }
      }
      if (errs.length) throw new Error(errs.join('; '));
    }
    if (!node) return undefined;
    // look again when the heartbeat would expire (or the node would count as lost), at least every recheck
    const expires = left > 0 ? left : lostLeft > 0 ? lostLeft : Infinity;
    return Math.max(100, Math.min(this.recheck, expires + 100));
  }

  /**
   * Active VMIs on the node whose launcher Pod there is not alive; on a lost node (`lost`) every active VMI
   * on it, whatever its Pods look like (nobody there reports any more).
   */
  stuckVmis(nodeName: string, lost = false): Vmi[] {
    return this.ctx.vmis
      .list()
      .filter(
        (v) =>
          v.status?.nodeName === nodeName &&
          !isFinal(v) &&
          (lost ||
            !this.ctx
              .podsOfVmi(v.metadata.uid ?? '')
              .some((p) => p.spec?.nodeName === nodeName && isPodAlive(p))),
      );
  }

  /**
   * The launcher Pods on a lost node of VMIs that are final (or being deleted): the kubelet that would confirm
   * their end is gone, so they would stay (Terminating) forever and with them the VMI's finalizer. `failed`:
   * uids of VMIs just failed (the cache may not show it yet).
   */
  podsOnLostNode(nodeName: string, failed: ReadonlySet<string> = new Set()): Pod[] {
    const out: Pod[] = [];
    for (const v of this.ctx.vmis.list()) {
      if (!isFinal(v) && !v.metadata.deletionTimestamp && !failed.has(v.metadata.uid ?? '')) continue;
      for (const p of this.ctx.podsOfVmi(v.metadata.uid ?? ''))
        if (p.spec?.nodeName === nodeName) out.push(p);
    }
    return out;
  }

  /** DELETE with grace period 0: the Pod object goes now (its node's kubelet kills leftovers if it returns) */
  private async forceDelete(pod: Pod, nodeName: string): Promise<void> {
    const { ctx } = this;
    try {
      await ctx.client.delete(PODS, pod.metadata?.namespace, pod.metadata!.name!, {
        preconditionUid: pod.metadata?.uid,
        gracePeriodSeconds: 0,
      });
    } catch (e) {
      if (isNotFound(e)) return;
      throw e;
    }
    ctx.log.warn('launcher Pod on a lost node force-deleted', {
      kind: 'Pod',
      namespace: pod.metadata?.namespace,
      name: pod.metadata?.name,
      node: nodeName,
    });
  }

  private async fail(vmi: Vmi, nodeName: string, lost: boolean): Promise<void> {
    const { ctx } = this;
    const r = await updateIfChanged<Vmi>({
      client: ctx.client,
      resource: VMIS,
      current: vmi,
      mutate: (latest) => {
        const v = structuredClone(latest);
        if (isFinal(v) || v.status?.nodeName !== nodeName) return v;
        const status = (v.status ??= {});
        status.phase = 'Failed';
        status.reason = REASON_NODE_UNRESPONSIVE;
        (status.phaseTransitionTimestamps ??= []).push({
          phase: 'Failed',
          phaseTransitionTimestamp: nowTimestamp(),
        });
        return v;
      },
    });
    if (r.written) {
      ctx.recorder.event(
        vmiRef(vmi),
        'Normal',
        REASON_NODE_UNRESPONSIVE,
        lost
          ? `virt-handler on node ${nodeName} is not responsive and the node is unreachable, marking VMI as failed`
          : `virt-handler on node ${nodeName} is not responsive, marking VMI as failed`,
      );
      ctx.log.warn('VMI on an unresponsive node marked Failed', {
        kind: 'VirtualMachineInstance',
        namespace: vmi.metadata.namespace,
        name: vmi.metadata.name,
        node: nodeName,
        lost,
      });
    }
  }
}
