// The VM and VMI controllers against a real kube-apiserver + etcd (tools/testenv) with the CRDs from
// deploy/crds. There is no scheduler, kubelet or virt-handler: the test plays them, binding and
// running launcher Pods (kubelet), and moving VMIs to Running / Succeeded / Failed (virt-handler).
import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import { KubeClient, PODS, isNotFound } from '@kubevirt-ts/controller-runtime';
import { createLogger } from '@kubevirt-ts/log';
import { LABEL_CREATED_BY } from '@kubevirt-ts/renderer';
import type { TestEnv } from '@kubevirt-ts/testenv';
import {
  VMIS,
  VMS,
  VMI_FINALIZER,
  VM_CONTROLLER_FINALIZER,
  nowTimestamp,
  type Vm,
  type Vmi,
} from './common.js';
import type { Pod } from './context.js';
import { VirtController } from './manager.js';
import {
  TEST_RENDERER,
  kubeletRuns,
  podsOf as podsOfVmi,
  poller,
  startController,
  stopController,
} from './test-apiserver.js';

const NS = 'ctrl-test';

let env: TestEnv;
let kc: KubeConfig;
let api: KubeClient;
let controller: VirtController | undefined;
const log = createLogger({ component: 'virt-controller', level: process.env.KVTS_LOG_LEVEL ?? 'warn' });

const { until, finish } = poller();

const getVm = (name: string) => api.getOrUndefined<Vm>(VMS, NS, name);
const getVmi = (name: string) => api.getOrUndefined<Vmi>(VMIS, NS, name);
const podsOf = (vmi: Vmi) => podsOfVmi(api, vmi);

function vmiSpec(extra: Record<string, unknown> = {}) {
  return {
    domain: { devices: {}, resources: { requests: { memory: '64Mi' } } },
    terminationGracePeriodSeconds: 0,
    ...extra,
  };
}
function vmObject(name: string, spec: { running?: boolean; runStrategy?: string }, tspec = vmiSpec()): Vm {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachine',
    metadata: { name, namespace: NS },
    spec: { ...spec, template: { metadata: { labels: { 'kubevirt.io/vm': name } }, spec: tspec } },
  } as Vm;
}
const createVm = (
  name: string,
  spec: { running?: boolean; runStrategy?: string },
  tspec?: Record<string, unknown>,
) => api.create<Vm>(VMS, NS, vmObject(name, spec, tspec as never));

/** what the start/stop/restart subresources write: state change requests in the VM's status */
const queueRequests = (name: string, stateChangeRequests: { action: string; uid?: string }[]) =>
  api.patch(VMS, NS, name, { status: { stateChangeRequests } }, 'merge', 'status');

/** kubelet: bind the VMI's Pod to a node and run its compute container */
async function runPod(vmi: Vmi, node = 'node01'): Promise<Pod> {
  const pod = await until('pod', async () => (await podsOf(vmi))[0]);
  return kubeletRuns(api, pod, node, TEST_RENDERER.launcherImage);
}
async function setPodStatus(name: string, status: Record<string, unknown>): Promise<Pod> {
  return api.patch<Pod>(PODS, NS, name, { status }, 'merge', 'status');
}

/** virt-handler: move the VMI to `phase` */
async function handlerSetsPhase(
  name: string,
  phase: 'Running' | 'Succeeded' | 'Failed',
  ready = phase === 'Running',
) {
  const vmi = (await getVmi(name))!;
  const ts = [
    ...(vmi.status?.phaseTransitionTimestamps ?? []),
    { phase, phaseTransitionTimestamp: nowTimestamp() },
  ];
  const conditions = (vmi.status?.conditions ?? []).filter((c) => c.type !== 'Ready');
  conditions.push({
    type: 'Ready',
    status: ready ? 'True' : 'False',
    reason: ready ? undefined : 'GuestNotRunning',
  } as never);
  await api.patch(VMIS, NS, name, { status: { phase, phaseTransitionTimestamps: ts, conditions } }, 'merge');
}

/** kubelet: Pods of deleted VMIs go away (graceful deletion of a bound Pod needs the kubelet) */
async function kubeletReapsPods(vmi: Vmi) {
  for (const p of await podsOf(vmi))
    await api.delete(PODS, NS, p.metadata!.name!, { gracePeriodSeconds: 0 }).catch((e) => {
      if (!isNotFound(e)) throw e;
    });
}

async function vmStatus(name: string, printable: string) {
  return until(`${name} ${printable}`, async () => {
    const vm = await getVm(name);
    return vm?.status?.printableStatus === printable ? vm : undefined;
  });
}
async function vmiPhase(name: string, phase: string, notUid?: string) {
  return until(`${name} ${phase}`, async () => {
    const vmi = await getVmi(name);
    return vmi && vmi.status?.phase === phase && vmi.metadata.uid !== notUid ? vmi : undefined;
  });
}
/** a running VM: VMI created, Pod run by the kubelet, VMI Running by the handler */
async function bringUp(name: string): Promise<Vmi> {
  const vmi = await vmiPhase(name, 'Scheduling');
  await runPod(vmi);
  await vmiPhase(name, 'Scheduled');
  await handlerSetsPhase(name, 'Running');
  await vmStatus(name, 'Running');
  return (await getVmi(name))!;
}
/** the VMI is deleted and gone (handler and kubelet doing their part) */
async function vmiGoesAway(vmi: Vmi) {
  const name = vmi.metadata.name!;
  await until('deletion requested', async () => {
    const cur = await getVmi(name);
    return !cur || cur.metadata.uid !== vmi.metadata.uid || !!cur.metadata.deletionTimestamp;
  });
  const cur = await getVmi(name);
  if (
    cur &&
    cur.metadata.uid === vmi.metadata.uid &&
    !['Succeeded', 'Failed'].includes(cur.status?.phase ?? '')
  )
    await handlerSetsPhase(name, 'Succeeded');
  await kubeletReapsPods(vmi);
  await until('vmi gone', async () => (await getVmi(name))?.metadata.uid !== vmi.metadata.uid);
}

beforeAll(async () => {
  ({ env, kc, api, controller } = await startController(NS, 'controller-test'));
}, 180000);

afterAll(() => stopController({ env, api, controller }, finish));

describe('VMI controller', () => {
  it('creates one launcher Pod and moves Pending -> Scheduling -> Scheduled from the Pod, with a finalizer', async () => {
    const created = await api.create<Vmi>(VMIS, NS, {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstance',
      metadata: {
        name: 'plain',
        namespace: NS,
        annotations: {
          'kubevirt.io/test': 'x',
          'kubernetes.io/test': 'x',
          'kubectl.kubernetes.io/last-applied-configuration': '{}',
        },
      },
      spec: vmiSpec(),
    } as Vmi);
    const sched = await vmiPhase('plain', 'Scheduling');
    expect(sched.metadata.finalizers).toContain(VMI_FINALIZER);
    expect(sched.status?.phaseTransitionTimestamps?.map((t) => t.phase)).toEqual(['Pending', 'Scheduling']);
    const pods = await podsOf(created);
    expect(pods).toHaveLength(1);
    // the VMI's annotations are carried to the launcher Pod, kubectl's aside (upstream's rule)
    const podAnnotations = pods[0]!.metadata?.annotations ?? {};
    expect(podAnnotations).toMatchObject({ 'kubevirt.io/test': 'x', 'kubernetes.io/test': 'x' });
    expect(podAnnotations['kubectl.kubernetes.io/last-applied-configuration']).toBeUndefined();
    expect(pods[0]!.metadata?.ownerReferences?.[0]).toMatchObject({
      kind: 'VirtualMachineInstance',
      uid: created.metadata.uid,
    });
    await runPod(created, 'node07');
    await vmiPhase('plain', 'Scheduled');
    // status (subresource) first, then the node label (metadata): two writes
    const scheduled = await until('node label', async () => {
      const v = await getVmi('plain');
      return v?.metadata.labels?.['kubevirt.io/nodeName'] ? v : undefined;
    });
    expect(scheduled.status?.nodeName).toBe('node07');
    expect(scheduled.metadata.labels?.['kubevirt.io/nodeName']).toBe('node07');
    // the handler finds the Pod's dirs by its uid
    expect(scheduled.status?.activePods).toEqual({ [pods[0]!.metadata!.uid!]: 'node07' });
    expect((await podsOf(created)).length).toBe(1);
    // deletion: the Pod is deleted, the handler finishes the VMI, the finalizer goes, the VMI is gone
    await api.delete(VMIS, NS, 'plain');
    await vmiGoesAway(created);
  });

  it("Ready: the handler's Paused stays while the Pod is ready (no rewriting in turn); the Pod terminating wins", async () => {
    const created = await api.create<Vmi>(VMIS, NS, {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstance',
      metadata: { name: 'ready-owner', namespace: NS },
      spec: vmiSpec(),
    } as Vmi);
    await vmiPhase('ready-owner', 'Scheduling');
    await runPod(created);
    await vmiPhase('ready-owner', 'Scheduled');
    await handlerSetsPhase('ready-owner', 'Running');
    const ready = (c: Vmi | undefined) => c?.status?.conditions?.find((x) => x.type === 'Ready');
    await until('Ready True from the Pod', async () => {
      const v = await getVmi('ready-owner');
      return ready(v)?.status === 'True' ? v : undefined;
    });
    // virt-handler: the domain is paused
    const v = (await getVmi('ready-owner'))!;
    const conditions = v.status!.conditions!.map((c) =>
      c.type === 'Ready' ? { ...c, status: 'False', reason: 'Paused', message: 'the domain is paused' } : c,
    );
    await api.patch(VMIS, NS, 'ready-owner', { status: { conditions } }, 'merge');
    const rv = (await getVmi('ready-owner'))!.metadata.resourceVersion;
    // an absence check: the controller has had its reconcile of that update and wrote nothing back
    await new Promise((r) => setTimeout(r, 1500));
    const after = (await getVmi('ready-owner'))!;
    expect(ready(after)).toMatchObject({ status: 'False', reason: 'Paused' });
    expect(after.metadata.resourceVersion).toBe(rv);
    // deletion: the Pod goes down, the controller's PodTerminating replaces the handler's Paused
    await api.delete(VMIS, NS, 'ready-owner');
    await until('PodTerminating', async () => {
      const x = await getVmi('ready-owner');
      return ready(x)?.reason === 'PodTerminating' ? x : undefined;
    });
    await vmiGoesAway(created);
  });

  it('an unschedulable Pod shows as PodScheduled=False on the VMI; deleting the Pod while Scheduling fails the VMI', async () => {
    const vmi = await api.create<Vmi>(VMIS, NS, {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstance',
      metadata: { name: 'unsched', namespace: NS },
      spec: vmiSpec(),
    } as Vmi);
    await vmiPhase('unsched', 'Scheduling');
    const pod = (await podsOf(vmi))[0]!;
    await setPodStatus(pod.metadata!.name!, {
      phase: 'Pending',
      conditions: [
        {
          type: 'PodScheduled',
          status: 'False',
          reason: 'Unschedulable',
          message: '0/3 nodes are available',
        },
      ],
    });
    const u = await until('unschedulable', async () => {
      const v = await getVmi('unsched');
      return v?.status?.conditions?.find((c) => c.type === 'PodScheduled' && c.reason === 'Unschedulable')
        ? v
        : undefined;
    });
    expect(u.status?.phase).toBe('Scheduling');
    await api.delete(PODS, NS, pod.metadata!.name!, { gracePeriodSeconds: 0 });
    await vmiPhase('unsched', 'Failed');
    // final and no Pod left: the finalizer goes (a second write)
    const failed = await until('finalizer removed', async () => {
      const v = await getVmi('unsched');
      return v && !(v.metadata.finalizers ?? []).includes(VMI_FINALIZER) ? v : undefined;
    });
    expect(await podsOf(failed)).toHaveLength(0); // never re-created
    expect(failed.status?.phase).toBe('Failed');
  });

  it('a Scheduled VMI whose Pod is gone (its handler never took it over) fails, and its finalizer goes (upstream)', async () => {
    const vmi = await api.create<Vmi>(VMIS, NS, {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstance',
      metadata: { name: 'orphaned', namespace: NS },
      spec: vmiSpec(),
    } as Vmi);
    await vmiPhase('orphaned', 'Scheduling');
    await runPod(vmi, 'node07');
    await vmiPhase('orphaned', 'Scheduled');
    const pod = (await podsOf(vmi))[0]!;
    await api.delete(PODS, NS, pod.metadata!.name!, { gracePeriodSeconds: 0 });
    await vmiPhase('orphaned', 'Failed');
    const failed = await until('finalizer removed', async () => {
      const v = await getVmi('orphaned');
      return v && !(v.metadata.finalizers ?? []).includes(VMI_FINALIZER) ? v : undefined;
    });
    expect(await podsOf(failed)).toHaveLength(0);
    await api.delete(VMIS, NS, 'orphaned');
    await until('vmi gone', async () => !(await getVmi('orphaned')));
  });

  it('a Pod the renderer cannot build fails the VMI with a condition naming the field (no retry loop)', async () => {
    await api.create<Vmi>(VMIS, NS, {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstance',
      metadata: { name: 'hostdisk', namespace: NS },
      spec: vmiSpec({
        domain: {
          devices: { disks: [{ name: 'host', disk: {} }] },
          resources: { requests: { memory: '64Mi' } },
        },
        volumes: [{ name: 'host', hostDisk: { path: '/data/disk.img', type: 'Disk' } }],
      }),
    } as Vmi);
    await vmiPhase('hostdisk', 'Failed');
    // final and without Pods: the VMI finalizer is removed, then nothing more happens
    const failed = await until('finalizer removed', async () => {
      const v = await getVmi('hostdisk');
      return v && !(v.metadata.finalizers ?? []).includes(VMI_FINALIZER) ? v : undefined;
    });
    const sync = failed.status?.conditions?.find((c) => c.type === 'Synchronized');
    expect(sync).toMatchObject({ status: 'False', reason: 'FailedCreate' });
    expect(sync?.message).toMatch(/spec\.volumes\[0\]\.hostDisk/);
    expect(await podsOf(failed)).toHaveLength(0);
    const writes = controller!.client.writes;
    await sleep(1500);
    expect((await getVmi('hostdisk'))?.metadata.resourceVersion).toBe(failed.metadata.resourceVersion);
    expect(controller!.client.writes).toBe(writes);
  });

  it('ErrImagePull of the compute container shows as Synchronized=False and the VM as ErrImagePull', async () => {
    await createVm('pullerr', { running: true });
    const vmi = await vmiPhase('pullerr', 'Scheduling');
    const pod = (await podsOf(vmi))[0]!;
    await setPodStatus(pod.metadata!.name!, {
      phase: 'Pending',
      containerStatuses: [
        {
          name: 'compute',
          ready: false,
          restartCount: 0,
          image: TEST_RENDERER.launcherImage,
          imageID: '',
          state: { waiting: { reason: 'ErrImagePull', message: 'pull access denied' } },
        },
      ],
    });
    await vmStatus('pullerr', 'ErrImagePull');
    await api.patch(VMS, NS, 'pullerr', { spec: { running: false } });
    await vmiGoesAway(vmi);
    await vmStatus('pullerr', 'Stopped');
  });
});

describe('VM controller: run strategies', () => {
  it('running: true / Always: VMI from the template (owner, labels, firmware UUID); restarted after a guest shutdown, a failure and a user delete', async () => {
    const vm = await createVm('always', { running: true });
    const vmi = await until('vmi', () => getVmi('always'));
    expect(vmi.metadata.ownerReferences).toEqual([
      {
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachine',
        name: 'always',
        uid: vm.metadata.uid,
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    expect(vmi.metadata.labels).toEqual({ 'kubevirt.io/vm': 'always' });
    expect(vmi.metadata.finalizers).toEqual(expect.arrayContaining([VMI_FINALIZER, VM_CONTROLLER_FINALIZER]));
    expect(vmi.spec.domain.firmware?.uuid).toMatch(/^[0-9a-f-]{36}$/);
    // the VM's status is written after the VMI is created: wait for it, then it says Starting (or Running)
    const starting = await until('VM status', async () => {
      const v = await getVm('always');
      return v?.status?.printableStatus ? v : undefined;
    });
    expect(['Starting', 'Running']).toContain(starting.status?.printableStatus);
    const v1 = await bringUp('always');
    const running = (await getVm('always'))!;
    expect(running.status).toMatchObject({ created: true, ready: true, printableStatus: 'Running' });
    expect(running.metadata.finalizers).toContain(VM_CONTROLLER_FINALIZER);

    // guest shutdown -> Succeeded -> deleted and started again
    await handlerSetsPhase('always', 'Succeeded');
    await kubeletReapsPods(v1);
    const v2 = await vmiPhase('always', 'Scheduling', v1.metadata.uid);
    expect(v2.spec.domain.firmware?.uuid).toBe(vmi.spec.domain.firmware?.uuid); // stable across restarts
    await runPod(v2);
    await vmiPhase('always', 'Scheduled');
    await handlerSetsPhase('always', 'Running');
    // failure -> restarted
    await handlerSetsPhase('always', 'Failed');
    await kubeletReapsPods(v2);
    const v3 = await vmiPhase('always', 'Scheduling', v2.metadata.uid);
    // deleted by the user -> started again
    await api.delete(VMIS, NS, 'always');
    await vmiGoesAway(v3);
    const v4 = await until('v4', async () => {
      const v = await getVmi('always');
      return v && v.metadata.uid !== v3.metadata.uid ? v : undefined;
    });
    expect(v4.metadata.uid).not.toBe(v1.metadata.uid);
    // running: false -> stopped
    await api.patch(VMS, NS, 'always', { spec: { running: false } });
    await vmiGoesAway(v4);
    // level-triggered: the status settles once the cache has seen the VMI go (it may pass through a
    // write where only printableStatus changed)
    const stopped = await until('always stopped, no VMI', async () => {
      const vm = await getVm('always');
      return vm?.status?.printableStatus === 'Stopped' && vm.status.created === undefined ? vm : undefined;
    });
    expect(stopped.status?.created).toBeUndefined();
    expect(stopped.status?.conditions?.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'VMINotExists',
    });
  });

  it('RerunOnFailure: a failed VMI is restarted, a guest shutdown (Succeeded) is not', async () => {
    await createVm('rerun', { runStrategy: 'RerunOnFailure' });
    const v1 = await bringUp('rerun');
    await handlerSetsPhase('rerun', 'Failed');
    await kubeletReapsPods(v1);
    await vmiPhase('rerun', 'Scheduling', v1.metadata.uid);
    const v2 = await bringUp('rerun');
    await handlerSetsPhase('rerun', 'Succeeded');
    await kubeletReapsPods(v2);
    await vmStatus('rerun', 'Stopped');
    await sleep(500);
    const still = (await getVmi('rerun'))!;
    expect(still.metadata.uid).toBe(v2.metadata.uid);
    expect(still.metadata.finalizers ?? []).not.toContain(VM_CONTROLLER_FINALIZER); // VM recorded it and let go
  });

  it('RerunOnFailure: a stop request stops the VMI for good (the VM keeps its run strategy); a start request starts it', async () => {
    await createVm('rerun-stop', { runStrategy: 'RerunOnFailure' });
    const v1 = await bringUp('rerun-stop');
    expect((await getVm('rerun-stop'))?.status?.runStrategy).toBe('RerunOnFailure');
    await queueRequests('rerun-stop', [{ action: 'Stop', uid: v1.metadata.uid }]);
    await vmiGoesAway(v1);
    await until('request cleared', async () => !(await getVm('rerun-stop'))?.status?.stateChangeRequests);
    await vmStatus('rerun-stop', 'Stopped');
    await sleep(500);
    expect(await getVmi('rerun-stop')).toBeUndefined(); // not rerun
    expect((await getVm('rerun-stop'))?.spec.runStrategy).toBe('RerunOnFailure');
    await queueRequests('rerun-stop', [{ action: 'Start' }]);
    const v2 = await bringUp('rerun-stop');
    expect(v2.metadata.uid).not.toBe(v1.metadata.uid);
    expect((await getVm('rerun-stop'))?.status?.stateChangeRequests).toBeUndefined();
    // and a failure of that one is still rerun
    await handlerSetsPhase('rerun-stop', 'Failed');
    await kubeletReapsPods(v2);
    await vmiPhase('rerun-stop', 'Scheduling', v2.metadata.uid);
    await until('start request done', async () => !(await getVm('rerun-stop'))?.status?.stateChangeRequests);
    await api.patch(VMS, NS, 'rerun-stop', { spec: { runStrategy: 'Halted' } });
    await vmiGoesAway((await getVmi('rerun-stop'))!);
  });

  it('Once: runs one VMI and does not restart it after a failure', async () => {
    await createVm('once', { runStrategy: 'Once' });
    const v1 = await bringUp('once');
    await handlerSetsPhase('once', 'Failed');
    await kubeletReapsPods(v1);
    const stopped = await vmStatus('once', 'Stopped');
    expect(stopped.status?.startFailure).toBeUndefined(); // it ran: not a start failure
    await sleep(500);
    expect((await getVmi('once'))?.metadata.uid).toBe(v1.metadata.uid);
    expect((await getVm('once'))?.status?.printableStatus).toBe('Stopped');
  });

  it('Halted: no VMI; a start request switches the VM to running and starts it', async () => {
    await createVm('halted', { running: false });
    const s = await vmStatus('halted', 'Stopped');
    expect(await getVmi('halted')).toBeUndefined();
    expect(s.status?.created).toBeUndefined();
    await queueRequests('halted', [{ action: 'Start' }]);
    const vm = await until('running: true', async () => {
      const v = await getVm('halted');
      return v?.spec.running === true ? v : undefined;
    });
    expect(vm.spec.runStrategy).toBeUndefined();
    await bringUp('halted');
    const after = (await getVm('halted'))!;
    expect(after.status?.stateChangeRequests).toBeUndefined(); // the start request is done
  });

  it('Halted with runStrategy: a running VMI is stopped', async () => {
    await createVm('halt2', { runStrategy: 'Always' });
    const v1 = await bringUp('halt2');
    await api.patch(VMS, NS, 'halt2', { spec: { runStrategy: 'Halted' } });
    await vmiGoesAway(v1);
    await vmStatus('halt2', 'Stopped');
  });

  it('Manual: starts only on a start request, stops only on a stop request for that VMI', async () => {
    await createVm('manual', { runStrategy: 'Manual' });
    await vmStatus('manual', 'Stopped');
    expect(await getVmi('manual')).toBeUndefined();
    await queueRequests('manual', [{ action: 'Start' }]);
    const v1 = await bringUp('manual');
    expect((await getVm('manual'))?.status?.stateChangeRequests).toBeUndefined();
    // a guest shutdown is not restarted
    await handlerSetsPhase('manual', 'Succeeded');
    await kubeletReapsPods(v1);
    await vmStatus('manual', 'Stopped');
    expect((await getVmi('manual'))?.metadata.uid).toBe(v1.metadata.uid);
    // stop request for that VMI: it is deleted, the request cleared
    await queueRequests('manual', [{ action: 'Stop', uid: v1.metadata.uid }]);
    await until('gone', async () => !(await getVmi('manual')));
    await until('request cleared', async () => !(await getVm('manual'))?.status?.stateChangeRequests);
    await vmStatus('manual', 'Stopped');
  });

  it('Always with a stop request: the VMI is restarted (what virtctl restart writes)', async () => {
    await createVm('restart', { runStrategy: 'Always' });
    const v1 = await bringUp('restart');
    await queueRequests('restart', [{ action: 'Stop', uid: v1.metadata.uid }, { action: 'Start' }]);
    await vmiGoesAway(v1);
    await vmiPhase('restart', 'Scheduling', v1.metadata.uid);
    await until('requests cleared', async () => !(await getVm('restart'))?.status?.stateChangeRequests);
  });

  it('a VMI that fails before running puts an Always VM in CrashLoopBackOff with a start-failure backoff', async () => {
    await createVm(
      'crash',
      { running: true },
      {
        ...vmiSpec(),
        domain: {
          devices: { disks: [{ name: 'host', disk: {} }] },
          resources: { requests: { memory: '64Mi' } },
        },
        volumes: [{ name: 'host', hostDisk: { path: '/data/disk.img', type: 'Disk' } }],
      },
    );
    const vm = await until('startFailure', async () => {
      const v = await getVm('crash');
      return v?.status?.startFailure && v.status.printableStatus === 'CrashLoopBackOff' ? v : undefined;
    });
    expect(vm.status?.startFailure?.consecutiveFailCount).toBe(1);
    const retry = Date.parse(vm.status!.startFailure!.retryAfterTimestamp!);
    expect(retry - Date.now()).toBeGreaterThan(0);
    await api.patch(VMS, NS, 'crash', { spec: { running: false } });
    await until('no vmi', async () => !(await getVmi('crash')));
    await vmStatus('crash', 'Stopped');
    expect((await getVm('crash'))?.status?.startFailure).toBeUndefined();
  });

  it('deleting a VM deletes its VMI, then the VM finalizer goes', async () => {
    await createVm('del', { running: true });
    const v1 = await bringUp('del');
    await api.delete(VMS, NS, 'del');
    await vmiGoesAway(v1);
    await until('vm gone', async () => !(await getVm('del')));
  });

  it('deleting a VM with propagationPolicy Orphan lets the VM go and leaves its VMI running, without the owner', async () => {
    await createVm('orphan', { running: true });
    const v1 = await bringUp('orphan');
    await api.delete(VMS, NS, 'orphan', { propagationPolicy: 'Orphan' });
    // the VM controller drops the VMI's owner reference and its own finalizer on the VM
    await until('owner reference removed', async () => {
      const v = await getVmi('orphan');
      return v && !v.metadata.ownerReferences?.length ? v : undefined;
    });
    const deleting = await until('VM finalizer removed', async () => {
      const v = await getVm('orphan');
      return v && !v.metadata.finalizers?.includes(VM_CONTROLLER_FINALIZER) ? v : undefined;
    });
    // kube-controller-manager's garbage collector (not running in testenv) finishes an orphaning delete by
    // removing the orphan finalizer once no dependent names the VM: done here in its place
    expect(deleting.metadata.finalizers).toEqual(['orphan']);
    await api.patch(VMS, NS, 'orphan', { metadata: { finalizers: null } }, 'merge');
    await until('vm gone', async () => !(await getVm('orphan')));
    await sleep(500);
    const after = (await getVmi('orphan'))!;
    expect(after.metadata.uid).toBe(v1.metadata.uid);
    expect(after.metadata.deletionTimestamp).toBeUndefined();
    expect(after.status?.phase).toBe('Running');
    expect(after.metadata.ownerReferences).toBeUndefined();
    // the VMI's launcher Pod is untouched; deleting the VMI later works without the VM (its finalizer is released)
    expect(await podsOf(after)).toHaveLength(1);
    await api.delete(VMIS, NS, 'orphan');
    await vmiGoesAway(after);
  });

  it('an unschedulable launcher Pod: VMI condition PodScheduled=False/Unschedulable, VM ErrorUnschedulable', async () => {
    // what kube-scheduler would write for a Pod no node can take (testenv runs no scheduler)
    await createVm(
      'unsched-vm',
      { running: true },
      vmiSpec({ nodeSelector: { 'example.com/no-such': 'node' } }),
    );
    const vmi = await vmiPhase('unsched-vm', 'Scheduling');
    const pod = (await podsOf(vmi))[0]!;
    const message = "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector.";
    await setPodStatus(pod.metadata!.name!, {
      phase: 'Pending',
      conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message }],
    });
    const vm = await vmStatus('unsched-vm', 'ErrorUnschedulable');
    const cond = { type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message };
    expect((await getVmi('unsched-vm'))?.status?.conditions).toEqual(
      expect.arrayContaining([expect.objectContaining(cond)]),
    );
    expect(vm.status?.conditions).toEqual(expect.arrayContaining([expect.objectContaining(cond)]));
    expect((await getVmi('unsched-vm'))?.status?.phase).toBe('Scheduling');
    // scheduled after all (a node got the label): the condition goes, the VM is Running once the VMI is
    await runPod(vmi);
    await vmiPhase('unsched-vm', 'Scheduled');
    await handlerSetsPhase('unsched-vm', 'Running');
    const running = await vmStatus('unsched-vm', 'Running');
    expect(running.status?.conditions?.find((c) => c.type === 'PodScheduled')).toBeUndefined();
    await api.patch(VMS, NS, 'unsched-vm', { spec: { running: false } });
    await vmiGoesAway(vmi);
  });
});

describe('metrics', () => {
  it('counts reconciles, their latency, VMIs per phase and creation-to-running in the Prometheus text format', () => {
    const text = controller!.metrics.render();
    expect(text).toMatch(
      /^kubevirt_ts_controller_reconcile_total\{controller="vm",result="success"\} [1-9]\d*$/m,
    );
    expect(text).toMatch(
      /^kubevirt_ts_controller_reconcile_total\{controller="vmi",result="success"\} [1-9]\d*$/m,
    );
    expect(text).toMatch(
      /^kubevirt_ts_controller_reconcile_duration_seconds_count\{controller="vmi"\} [1-9]\d*$/m,
    );
    expect(text).toMatch(/^kubevirt_ts_controller_queue_depth\{controller="vm"\} \d+$/m);
    expect(text).toMatch(/^kubevirt_ts_vmi_phase_count\{phase="Failed"\} [1-9]\d*$/m);
    expect(text).toMatch(/^kubevirt_ts_vmi_creation_to_running_seconds_count [1-9]\d*$/m);
  });
});

describe('restart of the controller', () => {
  it('in the middle of 50 VMIs: no duplicate Pod, no lost status', async () => {
    const N = 50;
    for (let i = 0; i < N; i++)
      await api.create<Vmi>(VMIS, NS, {
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachineInstance',
        metadata: { name: `bulk-${i}`, namespace: NS, labels: { bulk: 'yes' } },
        spec: vmiSpec(),
      } as Vmi);
    // stop the controller while it is working on them
    await until('some pods', async () => {
      const l = await api.list<Pod>(PODS, NS, { labelSelector: 'bulk=yes' });
      return l.items.length >= 5;
    });
    await controller!.stop();
    controller = new VirtController({ kubeConfig: kc, log, rendererConfig: TEST_RENDERER });
    await controller.start();
    const all = await until('all Scheduling', async () => {
      const l = await api.list<Vmi>(VMIS, NS, { labelSelector: 'bulk=yes' });
      return l.items.length === N && l.items.every((v) => v.status?.phase === 'Scheduling')
        ? l.items
        : undefined;
    });
    const pods = (await api.list<Pod>(PODS, NS, { labelSelector: 'bulk=yes' })).items;
    expect(pods).toHaveLength(N);
    const perVmi = new Map<string, number>();
    for (const p of pods) {
      const uid = p.metadata!.labels![LABEL_CREATED_BY]!;
      perVmi.set(uid, (perVmi.get(uid) ?? 0) + 1);
    }
    expect([...perVmi.values()].every((n) => n === 1)).toBe(true);
    expect(new Set(all.map((v) => v.metadata.uid))).toEqual(new Set(perVmi.keys()));
    // restart again, then the kubelet runs every Pod: every VMI reaches Scheduled on its node
    await controller.stop();
    for (const v of all.slice(0, 25)) await runPod(v, 'node02');
    controller = new VirtController({ kubeConfig: kc, log, rendererConfig: TEST_RENDERER });
    await controller.start();
    for (const v of all.slice(25)) await runPod(v, 'node02');
    const done = await until('all Scheduled', async () => {
      const l = await api.list<Vmi>(VMIS, NS, { labelSelector: 'bulk=yes' });
      return l.items.every((v) => v.status?.phase === 'Scheduled') ? l.items : undefined;
    });
    expect(done.every((v) => v.status?.nodeName === 'node02')).toBe(true);
    expect(
      done.every(
        (v) =>
          v.status?.phaseTransitionTimestamps?.map((t) => t.phase).join() === 'Pending,Scheduling,Scheduled',
      ),
    ).toBe(true);
    expect((await api.list<Pod>(PODS, NS, { labelSelector: 'bulk=yes' })).items).toHaveLength(N);
  }, 300000);
});
