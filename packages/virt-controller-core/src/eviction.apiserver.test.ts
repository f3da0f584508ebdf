// Node drain against a real kube-apiserver + etcd (tools/testenv): the webhooks as deploy/50-webhooks.yaml registers
// them (the pods/eviction one included, served by this process) and a VirtController. No scheduler, kubelet or
// virt-handler: the test plays them (binding and running the launcher Pods, reporting Running and LiveMigratable,
// writing the migration's progress as the handlers do). Evictions are POSTed (policy/v1) as kubectl drain does.
import { KubeApiError, KubeClient, PODS, type KubeObject } from '@kubevirt-ts/controller-runtime';
import type { TestEnv } from '@kubevirt-ts/testenv';
import { VMIMS, VMIS, nowTimestamp, type Vmi } from './common.js';
import type { Pod } from './context.js';
import type { EvictionStrategy } from './eviction.js';
import { EVACUATION_MIGRATION_ANNOTATION } from './evacuation.js';
import type { VirtController } from './manager.js';
import { LABEL_MIGRATION_JOB_UID, type Vmim } from './migration.js';
import {
  TEST_RENDERER,
  kubeletRuns,
  podsOf,
  poller,
  startController,
  startTestWebhooks,
  stopController,
  type TestWebhooks,
} from './test-apiserver.js';

const NS = 'drain-test';
const NODES = { group: '', version: 'v1', plural: 'nodes', namespaced: false };
const HOOK = 'virt-launcher-eviction-interceptor.kubevirt-ts.kubevirt.io';

let env: TestEnv;
let api: KubeClient;
let controller: VirtController | undefined;
let hooks: TestWebhooks | undefined;
const { until, finish } = poller();

beforeAll(async () => {
  ({ env, api, controller } = await startController(NS, 'drain-test'));
  // the controller runs as the test's admin: that user sets the VMI labels reserved to the components
  hooks = await startTestWebhooks(api, { componentUsers: new Set(['kubevirt-ts-admin']) });
  for (const name of ['n1', 'n2'])
    await api.create(NODES, undefined, { apiVersion: 'v1', kind: 'Node', metadata: { name } } as KubeObject);
}, 180000);

afterAll(async () => {
  finish();
  await controller?.stop(); // before the webhooks it writes through
  await hooks?.close();
  await stopController({ env, api }, finish);
});

const getVmi = (name: string) => api.getOrUndefined<Vmi>(VMIS, NS, name);
const run = (pod: Pod, node: string) => kubeletRuns(api, pod, node, TEST_RENDERER.launcherImage);

/** a VMI with `strategy` whose launcher Pod runs on `node`, Running, LiveMigratable `migratable` (the handler's) */
async function runningVmi(
  name: string,
  node: string,
  strategy: EvictionStrategy | undefined,
  migratable: boolean,
): Promise<{ vmi: Vmi; pod: Pod }> {
  const created = await api.create<Vmi>(VMIS, NS, {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name, namespace: NS },
    spec: {
      domain: { devices: {}, resources: { requests: { memory: '64Mi' } } },
      terminationGracePeriodSeconds: 0,
      ...(strategy ? { evictionStrategy: strategy } : {}),
    },
  } as Vmi);
  const pod = await until('launcher pod', async () => (await podsOf(api, created))[0]);
  await run(pod, node);
  await until(`${name} Scheduled`, async () => (await getVmi(name))?.status?.phase === 'Scheduled');
  const cur = (await getVmi(name))!;
  const conditions = [
    ...(cur.status?.conditions ?? []).filter((c) => c.type !== 'LiveMigratable'),
    migratable
      ? { type: 'LiveMigratable', status: 'True' }
      : {
          type: 'LiveMigratable',
          status: 'False',
          reason: 'DisksNotLiveMigratable',
          message:
            'cannot migrate VMI: PVC x is not shared, live migration requires that all PVCs must be shared',
        },
  ];
  await api.patch(VMIS, NS, name, { status: { phase: 'Running', nodeName: node, conditions } }, 'merge');
  const vmi = await until(`${name} Running`, async () => {
    const v = await getVmi(name);
    return v?.status?.phase === 'Running' ? v : undefined;
  });
  return { vmi, pod: (await api.get<Pod>(PODS, NS, pod.metadata!.name!))! };
}

/**
 * kubelet ends a graceful deletion of the Pod: once it is terminating, its containers stop (phase `phase`) and the
 * kubelet deletes it for good (grace 0); the Pod is then gone.
 */
async function kubeletTerminates(name: string, phase: 'Succeeded' | 'Failed' = 'Succeeded'): Promise<void> {
  const pod = await until(`${name} terminating`, async () => {
    const p = await api.getOrUndefined<Pod>(PODS, NS, name);
    return !p || p.metadata?.deletionTimestamp ? (p ?? true) : undefined;
  });
  if (pod !== true) {
    await api.patch(PODS, NS, name, { status: { phase } }, 'merge', 'status');
    await api.delete(PODS, NS, name, { gracePeriodSeconds: 0, preconditionUid: pod.metadata?.uid });
  }
  await until(`${name} gone`, async () => !(await api.getOrUndefined(PODS, NS, name)));
}

/** POST pods/<name>/eviction (policy/v1), as kubectl drain: the API error, or undefined once allowed */
async function evict(pod: string, dryRun = false): Promise<KubeApiError | undefined> {
  try {
    await api.request('POST', `/api/v1/namespaces/${NS}/pods/${pod}/eviction`, {
      apiVersion: 'policy/v1',
      kind: 'Eviction',
      metadata: { name: pod, namespace: NS },
      ...(dryRun ? { deleteOptions: { dryRun: ['All'] } } : {}),
    });
    return undefined;
  } catch (e) {
    if (e instanceof KubeApiError) return e;
    throw e;
  }
}

const evacuationsOf = async (vmi: string) =>
  (await api.list<Vmim>(VMIMS, NS)).items.filter(
    (m) => m.spec.vmiName === vmi && m.metadata.annotations?.[EVACUATION_MIGRATION_ANNOTATION] !== undefined,
  );

describe('node drain: the pods/eviction webhook and the evacuation controller', () => {
  it('LiveMigrate: the eviction is refused (429), the VMI marked, a kubevirt-evacuation migration created; once migrated and its source Pod gone, the drain is done', async () => {
    const { pod } = await runningVmi('lm', 'n1', 'LiveMigrate', true);
    const podName = pod.metadata!.name!;
    // a dry run refuses without marking
    const dry = await evict(podName, true);
    expect(dry?.status).toBe(429);
    expect((await getVmi('lm'))?.status?.evacuationNodeName).toBeUndefined();

    const e = await evict(podName);
    expect(e?.status).toBe(429);
    expect(e?.message).toContain(
      `admission webhook "${HOOK}" denied the request: Eviction triggered evacuation of VMI "${NS}/lm"`,
    );
    expect((await getVmi('lm'))?.status?.evacuationNodeName).toBe('n1');
    const [m] = await until('evacuation migration', async () => {
      const l = await evacuationsOf('lm');
      return l.length ? l : undefined;
    });
    expect(m!.metadata.name).toMatch(/^kubevirt-evacuation-[a-z0-9]{5}$/);
    expect(m!.metadata.annotations?.[EVACUATION_MIGRATION_ANNOTATION]).toBe('n1');
    // kubectl drain retries: still refused while the evacuation goes on; the Pod stays
    const again = await evict(podName);
    expect(again?.status).toBe(429);
    expect(again?.message).toContain(
      `Evacuation in progress: Eviction triggered evacuation of VMI "${NS}/lm"`,
    );
    expect(await api.getOrUndefined(PODS, NS, podName)).toBeDefined();

    // the migration controller makes the target Pod; the scheduler and kubelet run it on n2 (n1 is cordoned)
    const target = await until('target pod', async () => {
      const l = await api.list<Pod>(PODS, NS, {
        labelSelector: `${LABEL_MIGRATION_JOB_UID}=${m!.metadata.uid}`,
      });
      return l.items[0];
    });
    await run(target, 'n2');
    // an eviction of the target Pod (e.g. n2 drained too) is refused: it does not run the VMI
    const t = await evict(target.metadata!.name!);
    expect(t?.status).toBe(429);
    expect(t?.message).toMatch(/Evacuation in progress|Eviction request for target Pod/);
    // the handlers: target ready, source started, completed; the target handler moves the VMI and clears the mark
    const handler = async (fields: Record<string, unknown>, more: Record<string, unknown> = {}) => {
      const v = (await getVmi('lm'))!;
      await api.patch(
        VMIS,
        NS,
        'lm',
        { status: { ...more, migrationState: { ...v.status!.migrationState, ...fields } } },
        'merge',
      );
    };
    await until('hand-off', async () => (await getVmi('lm'))?.status?.migrationState?.targetNode === 'n2');
    await handler({ targetNodeAddress: '10.0.0.2', targetDirectMigrationNodePorts: { '40001': 0 } });
    await until(
      'TargetReady',
      async () => (await api.get<Vmim>(VMIMS, NS, m!.metadata.name!)).status?.phase === 'TargetReady',
    );
    await handler({ startTimestamp: nowTimestamp() });
    await until(
      'Running',
      async () => (await api.get<Vmim>(VMIMS, NS, m!.metadata.name!)).status?.phase === 'Running',
    );
    await handler(
      { endTimestamp: nowTimestamp(), completed: true, failed: false },
      { nodeName: 'n2', evacuationNodeName: null },
    );
    // virt-controller deletes the source Pod; its kubelet ends it; the drain's next eviction finds no Pod
    await kubeletTerminates(podName);
    expect((await evict(podName))?.status).toBe(404);
    expect((await getVmi('lm'))?.status?.phase).toBe('Running');
    expect(await evacuationsOf('lm')).toHaveLength(1);
  });

  it('External: refused and marked, no migration', async () => {
    const { pod } = await runningVmi('ext', 'n1', 'External', false);
    const e = await evict(pod.metadata!.name!);
    expect(e?.status).toBe(429);
    expect(e?.message).toContain(`Eviction triggered evacuation of VMI "${NS}/ext"`);
    expect((await getVmi('ext'))?.status?.evacuationNodeName).toBe('n1');
    // the controller has seen the marked VMI (its node was reconciled) and made nothing
    await new Promise((r) => setTimeout(r, 1500));
    expect(await evacuationsOf('ext')).toHaveLength(0);
  });

  it('LiveMigrate but not migratable: refused with the reason, not marked', async () => {
    const { pod } = await runningVmi('pinned', 'n1', 'LiveMigrate', false);
    const e = await evict(pod.metadata!.name!);
    expect(e?.status).toBe(429);
    expect(e?.message).toContain(
      'VMI pinned is configured with an eviction strategy but is not live-migratable',
    );
    expect((await getVmi('pinned'))?.status?.evacuationNodeName).toBeUndefined();
  });

  it('None and LiveMigrateIfPossible when not migratable: the eviction is allowed, the Pod goes (graceful shutdown), the VMI ends', async () => {
    for (const [name, strategy] of [
      ['none', 'None'],
      ['ifpossible', 'LiveMigrateIfPossible'],
    ] as const) {
      const { pod } = await runningVmi(name, 'n1', strategy, false);
      expect(await evict(pod.metadata!.name!)).toBeUndefined();
      // kubelet stops the Pod: the launcher shuts the guest down (graceful shutdown), virt-handler reports the VMI
      // Succeeded, the launcher exits
      await until(
        `${name} pod terminating`,
        async () =>
          (await api.getOrUndefined<Pod>(PODS, NS, pod.metadata!.name!))?.metadata?.deletionTimestamp,
      );
      await api.patch(VMIS, NS, name, { status: { phase: 'Succeeded' } }, 'merge');
      await kubeletTerminates(pod.metadata!.name!);
      // virt-controller lets the final VMI go: its Pod is gone, so is its finalizer
      await until(`${name} without its finalizer`, async () => {
        const v = await getVmi(name);
        return v?.status?.phase === 'Succeeded' && !v.metadata.finalizers?.length;
      });
      expect((await getVmi(name))?.status?.evacuationNodeName).toBeUndefined();
    }
    expect(await evacuationsOf('none')).toHaveLength(0);
  });

  it('a Pod that is not a virt-launcher (even named like one) is evicted as usual', async () => {
    for (const name of ['web', 'virt-launcher-imposter']) {
      await api.create(PODS, NS, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, namespace: NS },
        spec: { terminationGracePeriodSeconds: 0, containers: [{ name: 'c', image: 'x' }], nodeName: 'n1' },
      } as KubeObject);
      expect(await evict(name)).toBeUndefined();
      await until(`${name} gone`, async () => !(await api.getOrUndefined(PODS, NS, name)));
    }
  });
});
