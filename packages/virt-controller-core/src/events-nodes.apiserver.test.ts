// Events, status.activePods and the node-heartbeat timeout against a real kube-apiserver (tools/testenv).
// The test plays kubelet (binds and runs Pods), virt-handler (VMI Running, the node's heartbeat) and
// makes the Node objects (no kubelet registers them here).
import { setTimeout as sleep } from 'node:timers/promises';
import { EVENTS, KubeClient, PODS, type KubeObject } from '@kubevirt-ts/controller-runtime';
import type { TestEnv } from '@kubevirt-ts/testenv';
import { VMIS, VMS, nowTimestamp, type Vm, type Vmi } from './common.js';
import type { Pod } from './context.js';
import type { VirtController } from './manager.js';
import { HEARTBEAT_ANNOTATION, NODES, REASON_NODE_UNRESPONSIVE, SCHEDULABLE_LABEL } from './node.js';
import {
  bindPod,
  kubeletRuns,
  podsOf as podsOfVmi,
  poller,
  TEST_RENDERER,
  runningPodStatus,
  startController,
  stopController,
} from './test-apiserver.js';

const NS = 'events-test';
const HEARTBEAT_TIMEOUT_MS = 3000;

interface Event extends KubeObject {
  involvedObject: { kind: string; name: string; uid: string };
  type: string;
  reason: string;
  message: string;
  count: number;
  source: { component: string };
}

let env: TestEnv;
let api: KubeClient;
let controller: VirtController;
const { until, finish } = poller(100);
const getVmi = (name: string) => api.getOrUndefined<Vmi>(VMIS, NS, name);
const podsOf = (vmi: Vmi) => podsOfVmi(api, vmi);
const vmiSpec = (extra: Record<string, unknown> = {}) => ({
  domain: { devices: {}, resources: { requests: { memory: '64Mi' } } },
  terminationGracePeriodSeconds: 0,
  ...extra,
});
const createVmi = (name: string, spec = vmiSpec()) =>
  api.create<Vmi>(VMIS, NS, {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name, namespace: NS },
    spec,
  } as Vmi);
async function vmiPhase(name: string, phase: string): Promise<Vmi> {
  return until(`${name} ${phase}`, async () => {
    const v = await getVmi(name);
    return v?.status?.phase === phase ? v : undefined;
  });
}
/** events about an object (by uid), found by field selector as `kubectl describe` does */
async function eventsOf(uid: string | undefined): Promise<Event[]> {
  return (await api.list<Event>(EVENTS, undefined, { fieldSelector: `involvedObject.uid=${uid}` })).items;
}
async function eventWith(uid: string | undefined, reason: string, message: RegExp | string): Promise<Event> {
  return until(`event ${reason}`, async () =>
    (await eventsOf(uid)).find(
      (e) =>
        e.reason === reason &&
        (typeof message === 'string' ? e.message === message : message.test(e.message)),
    ),
  );
}
const bind = (pod: Pod, node: string) => bindPod(api, pod, node);
const setPodStatus = (pod: Pod, status: Record<string, unknown>) =>
  api.patch<Pod>(PODS, NS, pod.metadata!.name!, { status }, 'merge', 'status');
/** the VMI Scheduled on `node`, then Running (as virt-handler writes it) */
async function runOn(name: string, node: string): Promise<{ vmi: Vmi; pod: Pod }> {
  const vmi = await createVmi(name);
  const pod = await until('pod', async () => (await podsOf(vmi))[0]);
  await kubeletRuns(api, pod, node, TEST_RENDERER.launcherImage);
  const sched = await until('node label', async () => {
    const v = await vmiPhase(name, 'Scheduled');
    return v.metadata.labels?.['kubevirt.io/nodeName'] ? v : undefined;
  });
  await api.patch(
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
  return { vmi: sched, pod };
}
const heartbeat = (node: string) =>
  api.patch(NODES, undefined, node, {
    metadata: {
      annotations: { [HEARTBEAT_ANNOTATION]: nowTimestamp() },
      labels: { [SCHEDULABLE_LABEL]: 'true' },
    },
  });

beforeAll(async () => {
  ({ env, api, controller } = await startController(NS, 'events-test', {
    heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS,
    nodeRecheckMs: 500,
    identity: 'events-test-controller',
  }));
}, 180000);

afterAll(() => stopController({ env, api, controller }, finish));

describe('Kubernetes events, as upstream names them', () => {
  it('a VM start and stop: SuccessfulCreate on the VM and the VMI, SuccessfulDelete on the VM and the VMI', async () => {
    const vm = await api.create<Vm>(VMS, NS, {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachine',
      metadata: { name: 'ev-vm', namespace: NS },
      spec: { running: true, template: { spec: vmiSpec() } },
    } as Vm);
    const e1 = await eventWith(
      vm.metadata.uid,
      'SuccessfulCreate',
      'Started the virtual machine by creating the new virtual machine instance ev-vm',
    );
    expect(e1).toMatchObject({
      type: 'Normal',
      count: 1,
      involvedObject: { kind: 'VirtualMachine', name: 'ev-vm' },
      source: { component: 'virt-controller' },
      reportingInstance: 'events-test-controller',
    });
    const vmi = await vmiPhase('ev-vm', 'Scheduling');
    const pod = (await podsOf(vmi))[0]!;
    const e2 = await eventWith(
      vmi.metadata.uid,
      'SuccessfulCreate',
      `Created virtual machine pod ${pod.metadata!.name}`,
    );
    expect(e2).toMatchObject({
      type: 'Normal',
      involvedObject: { kind: 'VirtualMachineInstance', name: 'ev-vm' },
    });
    // stop: the VM deletes its VMI, the VMI controller deletes the Pod
    await api.patch(VMS, NS, 'ev-vm', { spec: { running: false } });
    await eventWith(
      vm.metadata.uid,
      'SuccessfulDelete',
      `Stopped the virtual machine by deleting the virtual machine instance ${vmi.metadata.uid}`,
    );
    await eventWith(
      vmi.metadata.uid,
      'SuccessfulDelete',
      `Deleted virtual machine pod ${pod.metadata!.name}`,
    );
  });

  it('a Pod the renderer refuses: Warning FailedCreate on the VMI naming the field', async () => {
    const vmi = await createVmi(
      'ev-hostdisk',
      vmiSpec({
        domain: {
          devices: { disks: [{ name: 'hd', disk: {} }] },
          resources: { requests: { memory: '64Mi' } },
        },
        volumes: [{ name: 'hd', hostDisk: { path: '/data/disk.img', type: 'Disk' } }],
      }),
    );
    const e = await eventWith(
      vmi.metadata.uid,
      'FailedCreate',
      /failed to render launch manifest: .*spec\.volumes\[0\]\.hostDisk/,
    );
    expect(e.type).toBe('Warning');
  });

  it('the same event again on the same object is counted, not duplicated', async () => {
    const vmi = (await getVmi('ev-hostdisk'))!;
    const ref = { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachineInstance', metadata: vmi.metadata };
    controller.recorder.event(ref, 'Warning', 'TestRepeat', 'same thing');
    controller.recorder.event(ref, 'Warning', 'TestRepeat', 'same thing');
    controller.recorder.event(ref, 'Warning', 'TestRepeat', 'same thing');
    await controller.recorder.flush();
    const evs = (await eventsOf(vmi.metadata.uid)).filter((e) => e.reason === 'TestRepeat');
    expect(evs).toHaveLength(1);
    expect(evs[0]!.count).toBe(3);
  });
});

describe('status.activePods', () => {
  it('lists the launcher Pod by uid, its node from Scheduled on ("" before: a binding alone is no write)', async () => {
    const vmi = await createVmi('active');
    const pod = await until('pod', async () => (await podsOf(vmi))[0]);
    const uid = pod.metadata!.uid!;
    const before = await until('activePods unscheduled', async () => {
      const v = await getVmi('active');
      return v?.status?.activePods?.[uid] === '' ? v : undefined;
    });
    await bind(pod, 'node-ap');
    await sleep(1000); // the controller has seen the binding (it is not written)
    const bound = (await getVmi('active'))!;
    expect(bound.status?.phase).toBe('Scheduling');
    expect(bound.status?.activePods).toEqual({ [uid]: '' });
    expect(bound.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    await setPodStatus(pod, runningPodStatus(TEST_RENDERER.launcherImage));
    const v = await until('activePods with the node', async () => {
      const cur = await getVmi('active');
      return cur?.status?.activePods?.[uid] === 'node-ap' ? cur : undefined;
    });
    expect(v.status?.phase).toBe('Scheduled');
    expect(Object.keys(v.status!.activePods!)).toEqual([uid]);
  });
});

describe('node heartbeat timeout (upstream node controller)', () => {
  it('VMIs whose launcher Pod is gone on a node whose virt-handler stopped heartbeating go Failed (NodeUnresponsive); the node becomes unschedulable', async () => {
    const node = 'hb-node';
    await api.create(NODES, undefined, {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name: node,
        labels: { [SCHEDULABLE_LABEL]: 'true' },
        annotations: { [HEARTBEAT_ANNOTATION]: nowTimestamp() },
      },
    } as KubeObject);
    const a = await runOn('hb-dead-pod', node);
    const b = await runOn('hb-live-pod', node);
    // the launcher Pod of A is reported down (its node is gone), B's still runs
    await setPodStatus(a.pod, { phase: 'Failed' });
    // while the handler heartbeats, nothing happens to A for 2 timeouts (the handler owns Running VMIs)
    for (let i = 0; i < (2 * HEARTBEAT_TIMEOUT_MS) / 500; i++) {
      await heartbeat(node);
      await sleep(500);
    }
    expect((await getVmi('hb-dead-pod'))?.status?.phase).toBe('Running');
    // the handler stops: after the timeout A fails, B (Pod alive: the guest may still run) stays
    const failed = await vmiPhase('hb-dead-pod', 'Failed');
    expect(failed.status?.reason).toBe(REASON_NODE_UNRESPONSIVE);
    expect(failed.status?.phaseTransitionTimestamps?.map((t) => t.phase)).toContain('Failed');
    await eventWith(
      a.vmi.metadata.uid,
      REASON_NODE_UNRESPONSIVE,
      `virt-handler on node ${node} is not responsive, marking VMI as failed`,
    );
    const n = await until('node unschedulable', async () => {
      const cur = await api.get<KubeObject>(NODES, undefined, node);
      return cur.metadata?.labels?.[SCHEDULABLE_LABEL] === 'false' ? cur : undefined;
    });
    await eventWith(
      n.metadata?.uid,
      REASON_NODE_UNRESPONSIVE,
      'virt-handler is not responsive, marking node as unresponsive',
    );
    expect((await getVmi('hb-live-pod'))?.status?.phase).toBe('Running');
    // once Kubernetes reports B's Pod down too, B fails the same way
    await setPodStatus(b.pod, { phase: 'Failed' });
    expect((await vmiPhase('hb-live-pod', 'Failed')).status?.reason).toBe(REASON_NODE_UNRESPONSIVE);
  }, 120000);
});
