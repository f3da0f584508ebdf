// Node loss (a power cut: kubelet, virt-handler, launchers and QEMU all gone at once) against a real kube-apiserver
// (tools/testenv). The test plays the kubelet (binds and runs Pods, posts the Node's Ready condition), virt-handler
// (VMI Running, the node's heartbeat) and the node lifecycle controller (Ready -> Unknown when the kubelet goes
// silent); the real virt-controller (VM, VMI and node controllers) does the rest.
import { setTimeout as sleep } from 'node:timers/promises';
import { EVENTS, KubeClient, PODS, type KubeObject } from '@kubevirt-ts/controller-runtime';
import type { TestEnv } from '@kubevirt-ts/testenv';
import { VMIS, VMS, nowTimestamp, type Vm, type Vmi } from './common.js';
import type { Pod } from './context.js';
import type { VirtController } from './manager.js';
import { HEARTBEAT_ANNOTATION, NODES, REASON_NODE_UNRESPONSIVE, SCHEDULABLE_LABEL } from './node.js';
import {
  kubeletRuns,
  podsOf as podsOfVmi,
  poller,
  TEST_RENDERER,
  startController,
  stopController,
} from './test-apiserver.js';

const NS = 'node-loss-test';
const TIMEOUT_MS = 3000;

interface Event extends KubeObject {
  involvedObject: { uid: string };
  reason: string;
  message: string;
  firstTimestamp: string;
}

let env: TestEnv;
let api: KubeClient;
let controller: VirtController;
const { until, finish } = poller(100);
const getVmi = (name: string) => api.getOrUndefined<Vmi>(VMIS, NS, name);
const podsOf = (vmi: Vmi) => podsOfVmi(api, vmi);
const getNode = (name: string) => api.get<KubeObject>(NODES, undefined, name);
const ts = (agoMs = 0) => new Date(Date.now() - agoMs).toISOString().replace(/\.\d+Z$/, 'Z');

/** a Node as kubelet registers it and virt-handler stamps it; `heartbeatAgoMs` the last handler heartbeat */
async function makeNode(name: string, heartbeatAgoMs: number): Promise<void> {
  await api.create(NODES, undefined, {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name,
      labels: { [SCHEDULABLE_LABEL]: 'true' },
      annotations: { [HEARTBEAT_ANNOTATION]: ts(heartbeatAgoMs) },
    },
  } as KubeObject);
  await setReady(name, 'True', 0);
}
/** the Node's Ready condition, as the kubelet (True) or the node lifecycle controller (Unknown) writes it */
const setReady = (name: string, status: string, sinceAgoMs: number) =>
  api.patch(
    NODES,
    undefined,
    name,
    {
      status: {
        conditions: [
          {
            type: 'Ready',
            status,
            reason: status === 'Unknown' ? 'NodeStatusUnknown' : 'KubeletReady',
            message:
              status === 'Unknown'
                ? 'Kubelet stopped posting node status.'
                : 'kubelet is posting ready status',
            lastHeartbeatTime: ts(sinceAgoMs),
            lastTransitionTime: ts(sinceAgoMs),
          },
        ],
      },
    },
    'strategic',
    'status',
  );
const heartbeat = (node: string) =>
  api.patch(NODES, undefined, node, { metadata: { annotations: { [HEARTBEAT_ANNOTATION]: ts() } } });

/** a VM with RunStrategy Always whose VMI runs on `node` (kubelet runs its Pod, the handler reports Running) */
async function vmRunningOn(name: string, node: string): Promise<{ vm: Vm; vmi: Vmi; pod: Pod }> {
  const vm = await api.create<Vm>(VMS, NS, {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachine',
    metadata: { name, namespace: NS },
    spec: {
      runStrategy: 'Always',
      template: {
        spec: {
          domain: { devices: {}, resources: { requests: { memory: '64Mi' } } },
          terminationGracePeriodSeconds: 0,
        },
      },
    },
  } as Vm);
  const first = await until(`${name} vmi`, () => getVmi(name));
  const pod = await until('pod', async () => (await podsOf(first))[0]);
  await kubeletRuns(api, pod, node, TEST_RENDERER.launcherImage);
  const sched = await until(`${name} Scheduled`, async () => {
    const v = await getVmi(name);
    return v?.status?.phase === 'Scheduled' && v.metadata.labels?.['kubevirt.io/nodeName'] === node
      ? v
      : undefined;
  });
  const vmi = await api.patch<Vmi>(
    VMIS,
    NS,
    name,
    {
      status: {
        phase: 'Running',
        phaseTransitionTimestamps: [
          ...(sched.status?.phaseTransitionTimestamps ?? []),
          { phase: 'Running', phaseTransitionTimestamp: nowTimestamp() },
        ],
      },
    },
    'merge',
  );
  return { vm, vmi, pod };
}
const podExists = async (pod: Pod) => !!(await api.getOrUndefined<Pod>(PODS, NS, pod.metadata!.name!));

beforeAll(async () => {
  ({ env, api, controller } = await startController(NS, 'node-loss-test', {
    heartbeatTimeoutMs: TIMEOUT_MS,
    nodeRecheckMs: 500,
  }));
}, 180000);

afterAll(() => stopController({ env, api, controller }, finish));

describe('node loss (heartbeat stale and kubelet unreachable)', () => {
  it('the VMI goes Failed (NodeUnresponsive, event naming the node), its Pod is force-deleted, the VM (Always) starts a new VMI; a node whose handler heartbeats, or whose kubelet is Ready, is left alone', async () => {
    await makeNode('lost', 0);
    await makeNode('fresh', 0);
    await makeNode('handler-down', 0);
    // the three handlers heartbeat while the VMs start
    const beating = new Set(['lost', 'fresh', 'handler-down']);
    const hb = setInterval(() => {
      for (const n of beating) void heartbeat(n).catch(() => undefined);
    }, 500);
    try {
      const lost = await vmRunningOn('on-lost', 'lost');
      const fresh = await vmRunningOn('on-fresh', 'fresh');
      const down = await vmRunningOn('on-handler-down', 'handler-down');

      // the power cut of 'lost': its last heartbeat is now; the node lifecycle controller marks it Unknown now.
      // 'fresh': its kubelet has been unreachable for long (a partition of the kubelet only), its handler heartbeats.
      // 'handler-down': its handler stopped long ago, its kubelet is Ready (the Pods it reports are current).
      beating.delete('lost');
      beating.delete('handler-down');
      await heartbeat('lost');
      await setReady('lost', 'Unknown', 0);
      await setReady('fresh', 'Unknown', 3600_000);
      await api.patch(NODES, undefined, 'handler-down', {
        metadata: { annotations: { [HEARTBEAT_ANNOTATION]: ts(3600_000) } },
      });
      const cut = Date.now();

      // before the timeout nothing happens to the VMI on 'lost' (its Pod still looks alive)
      await sleep(TIMEOUT_MS / 2);
      expect((await getVmi('on-lost'))?.status?.phase).toBe('Running');
      expect(await podExists(lost.pod)).toBe(true);

      // Failed (or, if the VM controller was quicker than this poll, already replaced by a new VMI)
      const seen = await until('on-lost Failed', async () => {
        const v = await getVmi('on-lost');
        if (!v || v.metadata.uid !== lost.vmi.metadata.uid) return 'replaced';
        return v.status?.phase === 'Failed' ? v : undefined;
      });
      if (seen !== 'replaced') expect(seen.status?.reason).toBe(REASON_NODE_UNRESPONSIVE);
      const ev = await until('VMI event', async () =>
        (
          await api.list<Event>(EVENTS, NS, { fieldSelector: `involvedObject.uid=${lost.vmi.metadata.uid}` })
        ).items.find((e) => e.reason === REASON_NODE_UNRESPONSIVE),
      );
      expect(ev.message).toBe(
        'virt-handler on node lost is not responsive and the node is unreachable, marking VMI as failed',
      );
      // not before the timeout: the event's time and the node condition's lastTransitionTime (which the timeout
      // counts from) both have a resolution of one second, so up to 2 s earlier than `cut` + timeout in ms
      expect(Date.parse(ev.firstTimestamp)).toBeGreaterThanOrEqual(cut + TIMEOUT_MS - 2000);
      // the launcher Pod object is gone (force-deleted: no kubelet would ever confirm a graceful delete)
      await until('lost pod gone', async () => !(await podExists(lost.pod)));
      const node = await getNode('lost');
      expect(node.metadata?.labels?.[SCHEDULABLE_LABEL]).toBe('false');
      // the VM starts a new VMI (a new uid), with a new launcher Pod waiting for a node
      const next = await until('new VMI', async () => {
        const v = await getVmi('on-lost');
        return v && v.metadata.uid !== lost.vmi.metadata.uid ? v : undefined;
      });
      expect(next.status?.phase === 'Failed').toBe(false);
      const newPod = await until('new pod', async () => (await podsOf(next))[0]);
      expect(newPod.spec?.nodeName).toBeUndefined();
      expect(newPod.metadata?.uid).not.toBe(lost.pod.metadata?.uid);

      // the others, two timeouts later: untouched
      await sleep(2 * TIMEOUT_MS);
      const f = (await getVmi('on-fresh'))!;
      expect(f.metadata.uid).toBe(fresh.vmi.metadata.uid);
      expect(f.status?.phase).toBe('Running');
      expect(await podExists(fresh.pod)).toBe(true);
      expect((await getNode('fresh')).metadata?.labels?.[SCHEDULABLE_LABEL]).toBe('true');
      const d = (await getVmi('on-handler-down'))!;
      expect(d.metadata.uid).toBe(down.vmi.metadata.uid);
      expect(d.status?.phase).toBe('Running');
      expect(await podExists(down.pod)).toBe(true);
      // the handler is unresponsive there: no new VMIs on that node
      expect((await getNode('handler-down')).metadata?.labels?.[SCHEDULABLE_LABEL]).toBe('false');
    } finally {
      clearInterval(hb);
    }
  }, 120000);
});
