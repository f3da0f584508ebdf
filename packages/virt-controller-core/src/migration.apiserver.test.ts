// The migration controller against a real kube-apiserver + etcd (tools/testenv) with the CRDs from
// deploy/crds. No scheduler, kubelet or virt-handler: the test plays them (binding and running Pods,
// writing what the handlers write into the VMI's status.migrationState). One test per transition.
import { setTimeout as sleep } from 'node:timers/promises';
import type { MigrationState } from '@kubevirt-ts/api';
import { KubeClient, PODS } from '@kubevirt-ts/controller-runtime';
import { LABEL_CREATED_BY } from '@kubevirt-ts/renderer';
import type { TestEnv } from '@kubevirt-ts/testenv';
import { VMIMS, VMIS, nowTimestamp, type Vmi } from './common.js';
import type { Pod } from './context.js';
import type { VirtController } from './manager.js';
import {
  ANNOTATION_MIGRATION_JOB_NAME,
  CONDITION_ABORT_REQUESTED,
  LABEL_MIGRATION_JOB_UID,
  LABEL_MIGRATION_TARGET_NODE,
  MIGRATION_FINALIZER,
  type Vmim,
} from './migration.js';
import {
  TEST_RENDERER,
  kubeletRuns,
  podsOf as podsOfVmi,
  poller,
  startController,
  stopController,
} from './test-apiserver.js';

const NS = 'migr-test';
// small limits so the limit tests need few VMIs: 2 migrations in the cluster, 1 outbound per node
const RENDERER = {
  ...TEST_RENDERER,
  parallelMigrationsPerCluster: 2,
  parallelOutboundMigrationsPerNode: 1,
  bandwidthPerMigration: '32Mi',
  allowAutoConverge: true,
};

let env: TestEnv;
let api: KubeClient;
let controller: VirtController | undefined;

const { until, finish } = poller();

const getVmi = (name: string) => api.getOrUndefined<Vmi>(VMIS, NS, name);
const getVmim = (name: string) => api.getOrUndefined<Vmim>(VMIMS, NS, name);
const podsOf = (vmi: Vmi) => podsOfVmi(api, vmi);
async function targetPodOf(m: Vmim): Promise<Pod | undefined> {
  const l = await api.list<Pod>(PODS, NS, { labelSelector: `${LABEL_MIGRATION_JOB_UID}=${m.metadata.uid}` });
  return l.items[0];
}

/** kubelet: bind a Pod to a node and run its compute container */
const runPod = (pod: Pod, node: string) => kubeletRuns(api, pod, node, RENDERER.launcherImage);

/** a VMI the controller scheduled, the kubelet runs on `node` and the handler reports Running */
async function runningVmi(name: string, node: string): Promise<Vmi> {
  const created = await api.create<Vmi>(VMIS, NS, {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name, namespace: NS },
    spec: {
      domain: { devices: {}, resources: { requests: { memory: '64Mi' } } },
      terminationGracePeriodSeconds: 0,
    },
  } as Vmi);
  const pod = await until('launcher pod', async () => (await podsOf(created))[0]);
  await runPod(pod, node);
  await until(`${name} Scheduled`, async () => (await getVmi(name))?.status?.phase === 'Scheduled');
  await api.patch(VMIS, NS, name, { status: { phase: 'Running' } }, 'merge');
  return until(`${name} Running`, async () => {
    const v = await getVmi(name);
    return v?.status?.phase === 'Running' ? v : undefined;
  });
}

const createVmim = (name: string, vmiName: string) =>
  api.create<Vmim>(VMIMS, NS, {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstanceMigration',
    metadata: { name, namespace: NS },
    spec: { vmiName },
  } as Vmim);

async function vmimPhase(name: string, phase: string): Promise<Vmim> {
  return until(`${name} ${phase}`, async () => {
    const m = await getVmim(name);
    return m?.status?.phase === phase ? m : undefined;
  });
}

/** virt-handler: merge fields into the VMI's status.migrationState */
async function handlerWrites(vmiName: string, fields: Partial<MigrationState> & Record<string, unknown>) {
  const vmi = (await getVmi(vmiName))!;
  await api.patch(
    VMIS,
    NS,
    vmiName,
    { status: { migrationState: { ...vmi.status!.migrationState, ...fields } } },
    'merge',
  );
}

/** a migration brought to Scheduled: target Pod created and run on `targetNode` by the kubelet */
async function toScheduled(mName: string, vmiName: string, targetNode: string) {
  const m = await createVmim(mName, vmiName);
  await vmimPhase(mName, 'Scheduling');
  const target = await until('target pod', () => targetPodOf(m));
  await runPod(target, targetNode);
  return { m, target };
}

/** brought to Running by the handlers */
async function toRunning(mName: string, vmiName: string, targetNode: string) {
  const r = await toScheduled(mName, vmiName, targetNode);
  await vmimPhase(mName, 'PreparingTarget');
  await handlerWrites(vmiName, {
    targetNodeAddress: '10.0.0.2',
    targetDirectMigrationNodePorts: { '40001': 0 },
  });
  await vmimPhase(mName, 'TargetReady');
  await handlerWrites(vmiName, { startTimestamp: nowTimestamp() });
  await vmimPhase(mName, 'Running');
  return r;
}

async function goneVmim(name: string) {
  await until(`${name} gone`, async () => !(await getVmim(name)));
}

beforeAll(async () => {
  ({ env, api, controller } = await startController(NS, 'migration-test', { rendererConfig: RENDERER }));
}, 180000);

afterAll(() => stopController({ env, api, controller }, finish));

describe('migration controller', () => {
  it('"" -> Pending -> Scheduling: a target Pod with anti-affinity to the VMI, the job label and the finalizer', async () => {
    const vmi = await runningVmi('a', 'node01');
    const m = await createVmim('mig-a', 'a');
    const sched = await vmimPhase('mig-a', 'Scheduling');
    expect(sched.status?.phaseTransitionTimestamps?.map((t) => t.phase)).toEqual(['Pending', 'Scheduling']);
    expect(sched.metadata.finalizers).toContain(MIGRATION_FINALIZER);
    const target = (await targetPodOf(m))!;
    expect(target.metadata?.labels?.[LABEL_CREATED_BY]).toBe(vmi.metadata.uid);
    expect(target.metadata?.annotations?.[ANNOTATION_MIGRATION_JOB_NAME]).toBe('mig-a');
    expect(target.metadata?.ownerReferences?.[0]).toMatchObject({
      kind: 'VirtualMachineInstance',
      uid: vmi.metadata.uid,
    });
    const spec = target.spec as { affinity?: { podAntiAffinity?: Record<string, unknown> } };
    expect(spec.affinity?.podAntiAffinity?.['requiredDuringSchedulingIgnoredDuringExecution']).toEqual([
      {
        labelSelector: { matchLabels: { [LABEL_CREATED_BY]: vmi.metadata.uid } },
        topologyKey: 'kubernetes.io/hostname',
      },
    ]);
    // the VMI keeps its own Pod as current: the target is on no node yet, and two Pods exist
    expect((await podsOf(vmi)).length).toBe(2);
  });

  it('Scheduling -> Scheduled -> PreparingTarget: the running target Pod is handed off through the VMI', async () => {
    const m = (await getVmim('mig-a'))!;
    const target = (await targetPodOf(m))!;
    await runPod(target, 'node02');
    const prep = await vmimPhase('mig-a', 'PreparingTarget');
    expect(prep.status?.phaseTransitionTimestamps?.map((t) => t.phase)).toEqual([
      'Pending',
      'Scheduling',
      'Scheduled',
      'PreparingTarget',
    ]);
    const vmi = await until('target label', async () => {
      const v = await getVmi('a');
      return v?.metadata.labels?.[LABEL_MIGRATION_TARGET_NODE] ? v : undefined;
    });
    expect(vmi.metadata.labels?.[LABEL_MIGRATION_TARGET_NODE]).toBe('node02');
    expect(vmi.status?.migrationState).toMatchObject({
      migrationUid: m.metadata.uid,
      sourceNode: 'node01',
      targetNode: 'node02',
      targetPod: target.metadata?.name,
    });
    // the cluster config's migration options go with the hand-off (upstream's migrationConfiguration)
    expect(
      (vmi.status?.migrationState as { migrationConfiguration?: unknown }).migrationConfiguration,
    ).toEqual({
      bandwidthPerMigration: '32Mi',
      completionTimeoutPerGiB: 150,
      progressTimeout: 150,
      allowAutoConverge: true,
      allowPostCopy: false,
      unsafeMigrationOverride: false,
      parallelMigrationsPerCluster: 2,
      parallelOutboundMigrationsPerNode: 1,
    });
    expect(vmi.status?.migrationState?.sourcePod).toMatch(/^virt-launcher-a-/);
    // the VMI controller keeps the source Pod as the VMI's (Ready from it, node unchanged)
    expect(vmi.status?.nodeName).toBe('node01');
  });

  it('PreparingTarget -> TargetReady when the target handler reports its address', async () => {
    await handlerWrites('a', {
      targetNodeAddress: '10.0.0.2',
      targetDirectMigrationNodePorts: { '40001': 0, '40002': 49152 },
    });
    await vmimPhase('mig-a', 'TargetReady');
  });

  it('TargetReady -> Running when the source handler started the migration', async () => {
    await handlerWrites('a', { startTimestamp: nowTimestamp() });
    await vmimPhase('mig-a', 'Running');
  });

  it('Running -> Succeeded when the source reports completion; the VMIM keeps the state, its finalizer goes', async () => {
    await handlerWrites('a', { endTimestamp: nowTimestamp(), completed: true, failed: false });
    const done = await vmimPhase('mig-a', 'Succeeded');
    const final = await until('finalizer removed', async () => {
      const cur = await getVmim('mig-a');
      return cur && !cur.metadata.finalizers?.includes(MIGRATION_FINALIZER) ? cur : undefined;
    });
    expect(final.status?.migrationState).toMatchObject({
      completed: true,
      failed: false,
      targetNode: 'node02',
    });
    expect(done.status?.phaseTransitionTimestamps?.map((t) => t.phase)).toEqual([
      'Pending',
      'Scheduling',
      'Scheduled',
      'PreparingTarget',
      'TargetReady',
      'Running',
      'Succeeded',
    ]);
  });

  it('Running -> Failed when the source reports failure', async () => {
    await runningVmi('b', 'node03');
    await toRunning('mig-b', 'b', 'node04');
    await handlerWrites('b', { endTimestamp: nowTimestamp(), completed: true, failed: true });
    const failed = await vmimPhase('mig-b', 'Failed');
    expect(failed.status?.conditions?.find((c) => c.type === 'Failed')?.reason).toBe('SourceReportedFailure');
  });

  it('Running -> Failed when the target Pod goes down', async () => {
    await runningVmi('c', 'node05');
    const { target } = await toRunning('mig-c', 'c', 'node06');
    await api.patch(PODS, NS, target.metadata!.name!, { status: { phase: 'Failed' } }, 'merge', 'status');
    const failed = await vmimPhase('mig-c', 'Failed');
    expect(failed.status?.conditions?.find((c) => c.type === 'Failed')?.reason).toBe('TargetPodDown');
  });

  it('PreparingTarget -> Failed when the target Pod is lost before the source started; the VMI records the failure', async () => {
    await runningVmi('d', 'node07');
    const { m, target } = await toScheduled('mig-d', 'd', 'node08');
    await vmimPhase('mig-d', 'PreparingTarget');
    await api.delete(PODS, NS, target.metadata!.name!, { gracePeriodSeconds: 0 });
    const failed = await vmimPhase('mig-d', 'Failed');
    expect(failed.status?.conditions?.find((c) => c.type === 'Failed')?.reason).toMatch(
      /TargetPod(Down|Missing)/,
    );
    const vmi = await until('failure on the VMI', async () => {
      const v = await getVmi('d');
      return v?.status?.migrationState?.failed ? v : undefined;
    });
    expect(vmi.status?.migrationState).toMatchObject({
      migrationUid: m.metadata.uid,
      completed: true,
      failed: true,
    });
    expect(vmi.status?.phase).toBe('Running');
  });

  it('one active migration per VMI: a second VMIM while one is handed off fails', async () => {
    await runningVmi('e', 'node09');
    await toScheduled('mig-e1', 'e', 'node10');
    await vmimPhase('mig-e1', 'PreparingTarget');
    await createVmim('mig-e2', 'e');
    const second = await vmimPhase('mig-e2', 'Failed');
    expect(second.status?.conditions?.find((c) => c.type === 'Failed')?.reason).toBe('MigrationInProgress');
    expect((await getVmim('mig-e1'))?.status?.phase).toBe('PreparingTarget');
    // only the first one's target Pod exists
    expect((await podsOf((await getVmi('e'))!)).length).toBe(2);
  });

  it('cancel before the hand-off: deleting the VMIM deletes its target Pod; the VMIM fails and goes', async () => {
    await runningVmi('f', 'node11');
    const m = await createVmim('mig-f', 'f');
    await vmimPhase('mig-f', 'Scheduling');
    const target = await until('target pod', () => targetPodOf(m));
    await api.delete(VMIMS, NS, 'mig-f');
    await goneVmim('mig-f');
    await until('target pod deleted', async () => {
      const p = await api.getOrUndefined<Pod>(PODS, NS, target.metadata!.name!);
      return !p || !!p.metadata?.deletionTimestamp;
    });
    expect((await getVmi('f'))?.status?.migrationState).toBeUndefined();
  });

  it('cancel while Running: the VMI asks the source to abort; the aborted migration fails and the VMIM goes', async () => {
    await runningVmi('g', 'node13');
    await toRunning('mig-g', 'g', 'node14');
    await api.delete(VMIMS, NS, 'mig-g');
    const vmi = await until('abortRequested', async () => {
      const v = await getVmi('g');
      return v?.status?.migrationState?.abortRequested ? v : undefined;
    });
    expect(vmi.status?.migrationState?.abortRequested).toBe(true);
    // the VMIM's condition is a write of its own (after the VMI's): waited for, not read at one instant
    const m = await until('the VMIM marked AbortRequested', async () => {
      const x = await getVmim('mig-g');
      return x?.status?.conditions?.find((c) => c.type === CONDITION_ABORT_REQUESTED)?.status === 'True'
        ? x
        : undefined;
    });
    expect(m.status?.phase).toBe('Running');
    // the source handler aborts
    await handlerWrites('g', {
      endTimestamp: nowTimestamp(),
      completed: true,
      failed: true,
      abortStatus: 'Succeeded',
    });
    await goneVmim('mig-g');
  });

  it('a VMIM for a VMI that does not exist fails', async () => {
    await createVmim('mig-none', 'nothere');
    const failed = await vmimPhase('mig-none', 'Failed');
    expect(failed.status?.conditions?.find((c) => c.type === 'Failed')?.reason).toBe('VMINotFound');
    expect(failed.metadata.finalizers ?? []).not.toContain(MIGRATION_FINALIZER);
  });

  it('limits: 1 outbound migration per node and 2 in the cluster (from the config); the held ones start when a slot frees', async () => {
    // earlier tests left mig-e1 holding a target Pod: end it so the counts start at 0
    await handlerWrites('e', { endTimestamp: nowTimestamp(), completed: true, failed: true });
    await vmimPhase('mig-e1', 'Failed');
    await runningVmi('h1', 'node21');
    await runningVmi('h2', 'node21');
    await runningVmi('h3', 'node22');
    await runningVmi('h4', 'node23');
    const m1 = await createVmim('mig-h1', 'h1');
    await vmimPhase('mig-h1', 'Scheduling');
    const m2 = await createVmim('mig-h2', 'h2'); // same source node as h1: held by the per-node limit
    await vmimPhase('mig-h2', 'Pending');
    const m3 = await createVmim('mig-h3', 'h3'); // other node: second in the cluster
    await vmimPhase('mig-h3', 'Scheduling');
    const m4 = await createVmim('mig-h4', 'h4'); // held by the cluster limit
    await vmimPhase('mig-h4', 'Pending');
    await sleep(6000); // past the controller's 5 s retry: still held
    expect((await getVmim('mig-h2'))?.status?.phase).toBe('Pending');
    expect((await getVmim('mig-h4'))?.status?.phase).toBe('Pending');
    expect(await targetPodOf(m2)).toBeUndefined();
    expect(await targetPodOf(m4)).toBeUndefined();
    // h1's migration ends: node21 and a cluster slot are free; one of h2/h4 takes the slot
    const t1 = (await targetPodOf(m1))!;
    await api.delete(PODS, NS, t1.metadata!.name!, { gracePeriodSeconds: 0 });
    await vmimPhase('mig-h1', 'Failed');
    const next = await until('a held migration starts', async () => {
      const [p2, p4] = await Promise.all([targetPodOf(m2), targetPodOf(m4)]);
      return p2 || p4 ? { p2, p4 } : undefined;
    });
    expect(!!next.p2 !== !!next.p4).toBe(true); // exactly one: still 2 in the cluster with mig-h3
    expect(await targetPodOf(m3)).toBeDefined();
  });
});
