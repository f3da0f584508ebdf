// The pool controller against a real kube-apiserver + etcd (tools/testenv) with deploy/crds and the VM controller
// running beside it (a pool's VMs are ordinary VMs). No kubelet or virt-handler: the test plays the VM's status.ready.
import { KubeClient, resourcePath } from '@kubevirt-ts/controller-runtime';
import { validateObject } from '@kubevirt-ts/api';
import { VMS, type Vm } from './common.js';
import { POOLS, indexVmSpec, poolDeletionOrder, poolVmIndex, type Pool } from './pool.js';
import { poller, startController, stopController, type ControllerSuite } from './test-apiserver.js';

const NS = 'pool-test';
let s: ControllerSuite | undefined;
let api: KubeClient;
const { until, finish } = poller();

function poolObject(name: string, replicas: number, extra: Partial<Pool['spec']> = {}): Pool {
  return {
    apiVersion: 'pool.kubevirt.io/v1beta1',
    kind: 'VirtualMachinePool',
    metadata: { name, namespace: NS },
    spec: {
      replicas,
      selector: { matchLabels: { pool: name } },
      virtualMachineTemplate: {
        metadata: { labels: { pool: name }, annotations: { note: 'from the pool' } },
        spec: {
          runStrategy: 'Halted',
          template: {
            metadata: { labels: { pool: name } },
            spec: {
              domain: {
                devices: { disks: [{ name: 'cfg', disk: {} }] },
                resources: { requests: { memory: '64Mi' } },
              },
              volumes: [{ name: 'cfg', configMap: { name: 'settings' } }],
            },
          },
        },
      },
      ...extra,
    },
  } as Pool;
}

const vmsOf = async (pool: Pool): Promise<Vm[]> =>
  (await api.list<Vm>(VMS, NS, { labelSelector: `pool=${pool.metadata.name}` })).items.filter(
    (v) => !v.metadata.deletionTimestamp,
  );
const namesAre = (pool: Pool, names: string[]) =>
  until(`VMs ${names.join(', ')}`, async () => {
    const vms = await vmsOf(pool);
    const got = vms.map((v) => v.metadata.name).sort();
    return JSON.stringify(got) === JSON.stringify([...names].sort()) && vms;
  });
type Scale = { spec: { replicas: number }; status: { replicas: number; selector: string } };
const getScale = (name: string) => api.request<Scale>('GET', resourcePath(POOLS, NS, name, 'scale'));
const scaleTo = (name: string, replicas: number) =>
  api.patch(POOLS, NS, name, { spec: { replicas } }, 'merge', 'scale');

beforeAll(async () => {
  s = await startController(NS, 'pool-test');
  api = s.api;
}, 120_000);
afterAll(() => stopController(s ?? {}, finish), 60_000);

test('creates <pool>-<index> VMs owned by the pool, follows the scale subresource, reports status', async () => {
  const pool = await api.create<Pool>(POOLS, NS, poolObject('db', 2));
  const vms = await namesAre(pool, ['db-0', 'db-1']);
  for (const vm of vms) {
    expect(vm.metadata.ownerReferences).toEqual([
      {
        apiVersion: 'pool.kubevirt.io/v1beta1',
        kind: 'VirtualMachinePool',
        name: 'db',
        uid: pool.metadata.uid,
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
    expect(vm.metadata.annotations?.['note']).toBe('from the pool');
    // without nameGeneration the references stay as the template has them
    expect(vm.spec.template.spec.volumes?.[0]?.configMap?.name).toBe('settings');
  }
  await until('status 2/0 with the selector', async () => {
    const st = (await api.get<Pool>(POOLS, NS, 'db')).status;
    return st?.replicas === 2 && st.readyReplicas === 0 && st.labelSelector === 'pool=db' && st;
  });
  // kubectl scale: up fills the lowest free indexes, down removes the highest
  await scaleTo('db', 4);
  await namesAre(pool, ['db-0', 'db-1', 'db-2', 'db-3']);
  const scale = await until('scale status 4', async () => {
    const sc = await getScale('db');
    return sc.status.replicas === 4 && sc;
  });
  expect(scale.status.selector).toBe('pool=db');
  await scaleTo('db', 2);
  await namesAre(pool, ['db-0', 'db-1']);
  // a VM deleted by hand is replaced, under the lowest index no VM has (db-0 while its deletion finishes, else db-2)
  const first = vms.find((v) => v.metadata.name === 'db-0')!;
  await api.delete(VMS, NS, 'db-0');
  await until('a replacement', async () => {
    const now = await vmsOf(pool);
    return now.length === 2 && now.every((v) => v.metadata.uid !== first.metadata.uid) && now;
  });
}, 120_000);

test('paused: nothing created or deleted, ReplicaPaused reported; resumed: created', async () => {
  const pool = await api.create<Pool>(POOLS, NS, poolObject('web', 1, { paused: true }));
  await until('ReplicaPaused', async () => {
    const st = (await api.get<Pool>(POOLS, NS, 'web')).status;
    return st?.conditions?.some((c) => c.type === 'ReplicaPaused' && c.status === 'True');
  });
  expect(await vmsOf(pool)).toEqual([]);
  await api.patch(POOLS, NS, 'web', { spec: { paused: false } }, 'merge');
  await namesAre(pool, ['web-0']);
  // (deleting the pool deletes its VMs through their owner reference: Kubernetes' garbage collector, which this API
  // server alone does not run; the cluster e2e shows it)
}, 120_000);

test('nameGeneration and dataVolumeTemplates: each VM gets its own <name>-<index>', async () => {
  const p = poolObject('idx', 1, {
    nameGeneration: { appendIndexToConfigMapRefs: true, appendIndexToSecretRefs: true },
  });
  const spec = p.spec.virtualMachineTemplate.spec;
  spec.template.spec.volumes!.push(
    { name: 'sec', secret: { secretName: 'creds' } },
    { name: 'ci', cloudInitNoCloud: { secretRef: { name: 'ud' }, networkDataSecretRef: { name: 'nd' } } },
    { name: 'dv', dataVolume: { name: 'root' } },
  );
  spec.template.spec.domain.devices!.disks!.push(
    { name: 'sec', disk: {} },
    { name: 'ci', disk: {} },
    { name: 'dv', disk: {} },
  );
  spec.dataVolumeTemplates = [{ metadata: { name: 'root' }, spec: { source: { blank: {} } } }];
  expect(validateObject(p)).toEqual([]);
  const s3 = indexVmSpec(p, 3);
  expect(s3.template.spec.volumes).toEqual([
    { name: 'cfg', configMap: { name: 'settings-3' } },
    { name: 'sec', secret: { secretName: 'creds-3' } },
    { name: 'ci', cloudInitNoCloud: { secretRef: { name: 'ud-3' }, networkDataSecretRef: { name: 'nd-3' } } },
    { name: 'dv', dataVolume: { name: 'root-3' } },
  ]);
  expect((s3.dataVolumeTemplates as { metadata: { name: string } }[])[0]!.metadata.name).toBe('root-3');
  // the template itself is untouched
  expect(p.spec.virtualMachineTemplate.spec.template.spec.volumes![0]).toEqual({
    name: 'cfg',
    configMap: { name: 'settings' },
  });
  const pool = await api.create<Pool>(POOLS, NS, p);
  const [vm] = await namesAre(pool, ['idx-0']);
  expect(
    vm!.spec.template.spec.volumes?.map(
      (v) => v.configMap?.name ?? v.secret?.secretName ?? v.dataVolume?.name,
    ),
  ).toEqual(['settings-0', 'creds-0', undefined, 'root-0']);
}, 120_000);

test('the order surplus VMs go in, and the index of a name', () => {
  const vm = (name: string, ready: boolean) => ({ metadata: { name }, status: { ready } }) as Vm;
  expect(
    poolDeletionOrder('p', [vm('p-0', true), vm('p-1', false), vm('p-2', true), vm('p-10', true)]).map(
      (v) => v.metadata.name,
    ),
  ).toEqual(['p-1', 'p-10', 'p-2', 'p-0']);
  expect([
    poolVmIndex('p', 'p-7'),
    poolVmIndex('p', 'p-07'),
    poolVmIndex('p', 'q-1'),
    poolVmIndex('p', 'p-x'),
  ]).toEqual([7, undefined, undefined, undefined]);
});

test('validation: the field path of each problem; upstream fields not implemented are named', () => {
  const bad = poolObject('bad', 1);
  bad.spec.selector = { matchLabels: { pool: 'other' } };
  (bad.spec as Record<string, unknown>)['updateStrategy'] = { opportunistic: {} };
  expect(validateObject(bad)).toEqual([
    {
      path: 'spec.updateStrategy',
      reason:
        'not implemented by kubevirt-ts: a pool creates and deletes VMs; a template change applies to the VMs created after it',
    },
    {
      path: 'spec.selector',
      reason: 'selector does not match the labels of spec.virtualMachineTemplate.metadata.labels',
    },
  ]);
});
