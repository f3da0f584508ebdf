// The replica set controller against a real kube-apiserver + etcd (tools/testenv) with deploy/crds. No
// kubelet or virt-handler: the test plays virt-handler where it must (a VMI's phase and Ready condition).
import { KubeClient, resourcePath } from '@kubevirt-ts/controller-runtime';
import { VMIS, isFinal, type Vmi } from './common.js';
import { VMIRSS, type Vmirs } from './replicaset.js';
import {
  TEST_RENDERER,
  kubeletRuns,
  podsOf,
  poller,
  startController,
  stopController,
  type ControllerSuite,
} from './test-apiserver.js';

const NS = 'vmirs-test';
let s: ControllerSuite | undefined;
let api: KubeClient;
const { until, finish } = poller();

function rsObject(name: string, replicas: number, paused = false): Vmirs {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstanceReplicaSet',
    metadata: { name, namespace: NS },
    spec: {
      replicas,
      paused,
      selector: { matchLabels: { rs: name } },
      template: {
        metadata: { labels: { rs: name } },
        spec: {
          domain: { devices: {}, resources: { requests: { memory: '64Mi' } } },
          terminationGracePeriodSeconds: 0,
        },
      },
    },
  } as Vmirs;
}

const getRs = (name: string) => api.get<Vmirs>(VMIRSS, NS, name);
/** the replica set's VMIs that are neither final nor being deleted */
async function activeVmis(rs: Vmirs): Promise<Vmi[]> {
  const all = (await api.list<Vmi>(VMIS, NS, { labelSelector: `rs=${rs.metadata.name}` })).items;
  return all.filter(
    (v) =>
      !isFinal(v) &&
      !v.metadata.deletionTimestamp &&
      v.metadata.ownerReferences?.some((r) => r.controller && r.uid === rs.metadata.uid),
  );
}
const countIs = (rs: Vmirs, n: number) =>
  until(`${n} VMIs of ${rs.metadata.name}`, async () => {
    const v = await activeVmis(rs);
    return v.length === n && v;
  });
const statusIs = (name: string, want: Partial<NonNullable<Vmirs['status']>>) =>
  until(`status of ${name}: ${JSON.stringify(want)}`, async () => {
    const st = (await getRs(name)).status ?? {};
    return (
      Object.entries(want).every(
        ([k, v]) => JSON.stringify(st[k as keyof typeof st]) === JSON.stringify(v),
      ) && st
    );
  });
type Scale = Vmirs & { spec: { replicas: number }; status: { replicas: number; selector: string } };
const getScale = (name: string) => api.request<Scale>('GET', resourcePath(VMIRSS, NS, name, 'scale'));
const scaleTo = (name: string, replicas: number) =>
  api.patch(VMIRSS, NS, name, { spec: { replicas } }, 'merge', 'scale');

beforeAll(async () => {
  s = await startController(NS, 'vmirs-test');
  api = s.api;
}, 120_000);
afterAll(() => stopController(s ?? {}, finish), 60_000);

test('creates VMIs owned by the replica set, follows the scale subresource, reports status', async () => {
  const rs = await api.create<Vmirs>(VMIRSS, NS, rsObject('web', 2));
  const vmis = await countIs(rs, 2);
  for (const v of vmis) {
    expect(v.metadata.name).toMatch(/^web/);
    expect(v.metadata.labels).toEqual({ rs: 'web' });
    expect(v.metadata.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'VirtualMachineInstanceReplicaSet', name: 'web', controller: true }),
    ]);
  }
  await statusIs('web', { replicas: 2, readyReplicas: 0, labelSelector: 'rs=web' });

  // kubelet runs the first VMI's Pod; virt-handler: the VMI runs and is Ready
  const pod = await until('pod', async () => (await podsOf(api, vmis[0]!))[0]);
  await kubeletRuns(api, pod, 'node01', TEST_RENDERER.launcherImage);
  await until(
    'scheduled',
    async () => (await api.get<Vmi>(VMIS, NS, vmis[0]!.metadata.name!)).status?.phase === 'Scheduled',
  );
  await api.patch(
    VMIS,
    NS,
    vmis[0]!.metadata.name!,
    { status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] } },
    'merge',
  );
  await statusIs('web', { replicas: 2, readyReplicas: 1 });

  // the scale subresource, as kubectl scale: read it, then PATCH and PUT it
  const scale = await getScale('web');
  expect(scale.spec.replicas).toBe(2);
  expect(scale.status).toEqual({ replicas: 2, selector: 'rs=web' });
  await scaleTo('web', 3);
  await countIs(rs, 3);
  await statusIs('web', { replicas: 3 });
  const cur = await getScale('web');
  await api.update(VMIRSS, { ...cur, spec: { replicas: 1 } } as never, 'scale');
  const left = await countIs(rs, 1);
  // the Running VMI is kept: the ones not running yet go first
  expect(left[0]!.metadata.uid).toBe(vmis[0]!.metadata.uid);
  await statusIs('web', { replicas: 1, readyReplicas: 1 });
}, 60_000);

test('a VMI that fails is deleted and replaced', async () => {
  const rs = await api.create<Vmirs>(VMIRSS, NS, rsObject('batch', 2));
  const [first] = await countIs(rs, 2);
  await api.patch(VMIS, NS, first!.metadata.name!, { status: { phase: 'Failed' } }, 'merge');
  const after = await until('a replacement', async () => {
    const v = await activeVmis(rs);
    return v.length === 2 && !v.some((x) => x.metadata.uid === first!.metadata.uid) && v;
  });
  expect(after).toHaveLength(2);
  // the failed one is deleted
  await until('the failed VMI gone or going', async () => {
    const v = await api.getOrUndefined<Vmi>(VMIS, NS, first!.metadata.name!);
    return !v || v.metadata.uid !== first!.metadata.uid || !!v.metadata.deletionTimestamp;
  });
}, 60_000);

test('paused: neither creates nor deletes; resumed: catches up', async () => {
  const rs = await api.create<Vmirs>(VMIRSS, NS, rsObject('held', 1));
  await countIs(rs, 1);
  await api.patch(VMIRSS, NS, 'held', { spec: { paused: true } }, 'merge');
  await until('ReplicaPaused', async () =>
    (await getRs('held')).status?.conditions?.some((c) => c.type === 'ReplicaPaused' && c.status === 'True'),
  );
  await scaleTo('held', 3);
  await new Promise((r) => setTimeout(r, 1500));
  expect(await activeVmis(rs)).toHaveLength(1);
  await api.patch(VMIRSS, NS, 'held', { spec: { paused: false } }, 'merge');
  await countIs(rs, 3);
  await until('ReplicaPaused removed', async () => {
    const st = (await getRs('held')).status;
    return st?.replicas === 3 && !st.conditions?.some((c) => c.type === 'ReplicaPaused');
  });
}, 60_000);

test('adopts an orphaned VMI matching the selector', async () => {
  const orphan = await api.create<Vmi>(VMIS, NS, {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: 'stray', namespace: NS, labels: { rs: 'adopter' } },
    spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } } },
  } as Vmi);
  const rs = await api.create<Vmirs>(VMIRSS, NS, rsObject('adopter', 1));
  const [only] = await countIs(rs, 1);
  expect(only!.metadata.uid).toBe(orphan.metadata.uid);
}, 60_000);
