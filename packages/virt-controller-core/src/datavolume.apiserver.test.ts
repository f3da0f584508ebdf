// A VM's dataVolumeTemplates against a real kube-apiserver + etcd (tools/testenv) with the controller running and a
// DataVolume CRD standing in for CDI's (created after the controller started, as when CDI is installed later; the
// suite plays CDI by writing the DataVolume's status): the VM creates its DataVolumes, owned by it; its VMI waits
// until they are ready while printableStatus says Provisioning; a failed import shows DataVolumeError with the
// DataVolume's reason; a clone from another namespace is created only when the VM's service account may clone; a
// DataVolume waiting for its first consumer gets the temporary provisioning Pod, removed once the claim is populated.
import { EVENTS, PODS, type KubeObject, type Resource } from '@kubevirt-ts/controller-runtime';
import { VMIS, VMS, type Vm, type Vmi } from './common.js';
import { DATA_VOLUMES, PVCS, type DataVolume } from './claims.js';
import { podsOf, poller, startController, stopController, type ControllerSuite } from './test-apiserver.js';

const NS = 'dv-test';
const OTHER = 'dv-source';
const { until, finish } = poller();
let s: ControllerSuite | undefined;

const CRDS: Resource = {
  group: 'apiextensions.k8s.io',
  version: 'v1',
  plural: 'customresourcedefinitions',
  namespaced: false,
};
const rbac = (plural: string): Resource => ({
  group: 'rbac.authorization.k8s.io',
  version: 'v1',
  plural,
  namespaced: true,
});
const NAMESPACES: Resource = { group: '', version: 'v1', plural: 'namespaces', namespaced: false };

beforeAll(async () => {
  s = await startController(NS, 'dv-test');
  // CDI arrives after virt-controller: its DataVolume informer lists again until the resource is served
  await s.api.create(CRDS, undefined, {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: 'datavolumes.cdi.kubevirt.io' },
    spec: {
      group: 'cdi.kubevirt.io',
      scope: 'Namespaced',
      names: {
        plural: 'datavolumes',
        singular: 'datavolume',
        kind: 'DataVolume',
        listKind: 'DataVolumeList',
      },
      versions: [
        {
          name: 'v1beta1',
          served: true,
          storage: true,
          subresources: { status: {} },
          schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
        },
      ],
    },
  } as KubeObject);
  await s.api.create(NAMESPACES, undefined, {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: OTHER },
  });
  await until('the DataVolume resource', async () => {
    try {
      return await s!.api.list(DATA_VOLUMES, NS);
    } catch {
      return undefined;
    }
  });
}, 180000);
afterAll(() => stopController(s ?? {}, finish));

function vm(name: string, dvSpec: Record<string, unknown>, extra: Record<string, unknown> = {}): Vm {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachine',
    metadata: { name, namespace: NS },
    spec: {
      runStrategy: 'Always',
      dataVolumeTemplates: [{ metadata: { name: `${name}-disk`, labels: { app: name } }, spec: dvSpec }],
      template: {
        spec: {
          domain: {
            devices: { disks: [{ name: 'root', disk: {} }] },
            resources: { requests: { memory: '64Mi' } },
          },
          terminationGracePeriodSeconds: 0,
          volumes: [{ name: 'root', dataVolume: { name: `${name}-disk` } }],
          ...extra,
        },
      },
    },
  } as unknown as Vm;
}
const storage = { storage: { resources: { requests: { storage: '1Gi' } } } };
const getVm = (name: string) => s!.api.getOrUndefined<Vm>(VMS, NS, name);
const getDv = (name: string, ns = NS) => s!.api.getOrUndefined<DataVolume>(DATA_VOLUMES, ns, name);
/** CDI's part: the DataVolume's status */
const cdiSets = (name: string, status: DataVolume['status']) =>
  s!.api.patch(DATA_VOLUMES, NS, name, { status }, 'merge', 'status');
const vmStatus = async (name: string) => (await getVm(name))?.status;

test('the VM creates its DataVolume, owned by it; the VMI waits for the import, the VM shows Provisioning', async () => {
  const created = await s!.api.create<Vm>(
    VMS,
    NS,
    vm('importer', { source: { http: { url: 'http://img.test/disk.qcow2' } }, ...storage }),
  );
  const dv = await until('the DataVolume', () => getDv('importer-disk'));
  expect(dv.metadata?.ownerReferences).toEqual([
    expect.objectContaining({
      kind: 'VirtualMachine',
      name: 'importer',
      uid: created.metadata.uid,
      controller: true,
    }),
  ]);
  expect(dv.metadata?.labels).toEqual({ app: 'importer', 'kubevirt.io/created-by': created.metadata.uid });
  expect(dv.spec).toEqual({ source: { http: { url: 'http://img.test/disk.qcow2' } }, ...storage });

  await cdiSets('importer-disk', { phase: 'ImportInProgress', progress: '42.00%' });
  await until(
    'printableStatus Provisioning',
    async () => (await vmStatus('importer'))?.printableStatus === 'Provisioning',
  );
  // the VMI is not created while the import runs (the controller had several syncs by now)
  await until('the VM to sync again', async () =>
    (await vmStatus('importer'))?.conditions?.some((c) => c.type === 'Ready'),
  );
  expect(await s!.api.getOrUndefined<Vmi>(VMIS, NS, 'importer')).toBeUndefined();

  await cdiSets('importer-disk', { phase: 'Succeeded', progress: '100.0%' });
  const vmi = await until('the VMI once the import succeeded', () =>
    s!.api.getOrUndefined<Vmi>(VMIS, NS, 'importer'),
  );
  expect(vmi.spec.volumes).toEqual([{ name: 'root', dataVolume: { name: 'importer-disk' } }]);
  expect(
    (
      await s!.api.list<KubeObject & { reason?: string; message?: string }>(EVENTS, NS, {
        fieldSelector: `involvedObject.uid=${created.metadata.uid}`,
      })
    ).items,
  ).toEqual(
    expect.arrayContaining([
      expect.objectContaining({
        reason: 'SuccessfulDataVolumeCreate',
        message: 'Created DataVolume importer-disk',
      }),
    ]),
  );
});

test('a failed import: DataVolumeError, the DataVolume reason in DataVolumesReady, no VMI; cleared when it recovers', async () => {
  await s!.api.create<Vm>(
    VMS,
    NS,
    vm('broken', { source: { http: { url: 'http://img.test/missing' } }, ...storage }),
  );
  await until('the DataVolume', () => getDv('broken-disk'));
  await cdiSets('broken-disk', {
    phase: 'ImportInProgress',
    restartCount: 2,
    conditions: [
      {
        type: 'Running',
        status: 'False',
        reason: 'Error',
        message:
          'Unable to connect to http data source: expected status code 200, got 404. Status: 404 Not Found',
      },
    ],
  });
  const st = await until('DataVolumeError', async () => {
    const v = await vmStatus('broken');
    return v?.printableStatus === 'DataVolumeError' ? v : undefined;
  });
  expect(st.conditions?.find((c) => c.type === 'DataVolumesReady')).toMatchObject({
    status: 'False',
    reason: 'Error',
    message: expect.stringMatching(
      /^DataVolume broken-disk importer has stopped running due to an error: .*got 404/,
    ),
  });
  expect(await s!.api.getOrUndefined<Vmi>(VMIS, NS, 'broken')).toBeUndefined();
  // CDI retries; the importer runs again: Provisioning, and the condition is gone
  await cdiSets('broken-disk', {
    phase: 'ImportInProgress',
    conditions: [{ type: 'Running', status: 'True', reason: 'Pod is running' }],
  });
  const again = await until('Provisioning again', async () => {
    const v = await vmStatus('broken');
    return v?.printableStatus === 'Provisioning' ? v : undefined;
  });
  expect(again.conditions?.some((c) => c.type === 'DataVolumesReady')).toBe(false);
});

test('a DataVolume of the template name controlled by something else is not taken: Failure names it', async () => {
  await s!.api.create(DATA_VOLUMES, NS, {
    apiVersion: 'cdi.kubevirt.io/v1beta1',
    kind: 'DataVolume',
    metadata: {
      name: 'taken-disk',
      ownerReferences: [
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          name: 'someone',
          uid: '00000000-0000-0000-0000-000000000001',
          controller: true,
        },
      ],
    },
    spec: { source: { blank: {} }, ...storage },
  } as KubeObject);
  await s!.api.create<Vm>(VMS, NS, vm('taken', { source: { blank: {} }, ...storage }));
  const failure = await until('the Failure condition', async () =>
    (await vmStatus('taken'))?.conditions?.find((c) => c.type === 'Failure'),
  );
  expect(failure).toMatchObject({
    reason: 'FailedCreate',
    message:
      'Error encountered while creating DataVolumes: spec.dataVolumeTemplates: DataVolume dv-test/taken-disk exists and is controlled by ConfigMap someone, not by this VirtualMachine',
  });
  expect(await s!.api.getOrUndefined<Vmi>(VMIS, NS, 'taken')).toBeUndefined();
});

test("a clone from another namespace needs the VM's service account to be allowed to clone there", async () => {
  // from the VM's own namespace: allowed as it is (CDI's rule)
  await s!.api.create<Vm>(VMS, NS, vm('local', { source: { pvc: { name: 'golden' } }, ...storage }));
  expect(
    (await until('the same-namespace clone DataVolume', () => getDv('local-disk'))).spec?.source,
  ).toEqual({
    pvc: { name: 'golden' },
  });
  const clone = { source: { pvc: { namespace: OTHER, name: 'golden' } }, ...storage };
  await s!.api.create<Vm>(VMS, NS, vm('cloner', clone));
  const failure = await until('the Failure condition', async () =>
    (await vmStatus('cloner'))?.conditions?.find((c) => c.type === 'Failure'),
  );
  expect(failure?.message).toMatch(
    /^Error encountered while creating DataVolumes: Not authorized to create DataVolume cloner-disk: service account dv-test\/default may not clone dv-source\/golden \(it needs create on datavolumes\/source in namespace dv-source\)/,
  );
  expect(await getDv('cloner-disk')).toBeUndefined();
  // the source namespace lets dv-test's default service account clone from it (CDI's documented Role)
  await s!.api.create(rbac('roles'), OTHER, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name: 'datavolume-cloner' },
    rules: [{ apiGroups: ['cdi.kubevirt.io'], resources: ['datavolumes/source'], verbs: ['create'] }],
  } as KubeObject);
  await s!.api.create(rbac('rolebindings'), OTHER, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name: 'dv-test-may-clone' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'datavolume-cloner' },
    subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: NS }],
  } as KubeObject);
  // a VM change wakes it at once (the failure's retry would, later)
  await s!.api.patch(VMS, NS, 'cloner', { metadata: { labels: { retry: '1' } } }, 'merge');
  const dv = await until('the clone DataVolume', () => getDv('cloner-disk'));
  expect(dv.spec?.source).toEqual({ pvc: { namespace: OTHER, name: 'golden' } });
});

test('a DataVolume waiting for its first consumer: a temporary Pod names the claims; once populated it goes, the launcher Pod comes', async () => {
  const api = s!.api;
  const dv = await api.create<DataVolume>(DATA_VOLUMES, NS, {
    apiVersion: 'cdi.kubevirt.io/v1beta1',
    kind: 'DataVolume',
    metadata: { name: 'wffc-disk' },
    spec: { source: { blank: {} }, ...storage },
  });
  await cdiSets('wffc-disk', { phase: 'WaitForFirstConsumer' });
  // CDI's claim, owned by the DataVolume, Pending (its class binds on the first consumer)
  await api.create(PVCS, NS, {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: {
      name: 'wffc-disk',
      ownerReferences: [
        {
          apiVersion: 'cdi.kubevirt.io/v1beta1',
          kind: 'DataVolume',
          name: 'wffc-disk',
          uid: dv.metadata!.uid!,
          controller: true,
        },
      ],
    },
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
  } as KubeObject);
  const vmi = await api.create<Vmi>(VMIS, NS, {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: 'wffc' },
    spec: {
      domain: {
        devices: { disks: [{ name: 'root', disk: {} }] },
        resources: { requests: { memory: '64Mi' } },
      },
      terminationGracePeriodSeconds: 0,
      volumes: [{ name: 'root', dataVolume: { name: 'wffc-disk' } }],
    },
  } as unknown as Vmi);
  const tmpName = `virt-provision-wffc-${vmi.metadata.uid!.slice(0, 5)}`;
  const tmp = await until('the provisioning Pod', () =>
    api.getOrUndefined<KubeObject & { spec?: Record<string, any> }>(PODS, NS, tmpName),
  );
  expect(tmp.metadata?.ownerReferences).toEqual([
    expect.objectContaining({ kind: 'VirtualMachineInstance', uid: vmi.metadata.uid }),
  ]);
  expect(tmp.metadata?.annotations).toEqual({ 'kubevirt.io/ephemeral-provisioning': 'true' });
  expect(tmp.spec?.volumes).toEqual([{ name: 'root', persistentVolumeClaim: { claimName: 'wffc-disk' } }]);
  const pending = await until('the Synchronized condition', async () =>
    (await api.getOrUndefined<Vmi>(VMIS, NS, 'wffc'))?.status?.conditions?.find(
      (c) => c.type === 'Synchronized',
    ),
  );
  expect(pending).toMatchObject({
    status: 'False',
    reason: 'PVCNotReady',
    message: expect.stringMatching(
      /^spec\.volumes\[0\]\.dataVolume\.name: DataVolume dv-test\/wffc-disk waits for its first consumer: a temporary Pod/,
    ),
  });
  expect(await podsOf(api, vmi)).toEqual([]);
  // the scheduler bound the claim for the temporary Pod; CDI populated it
  await api.patch(
    PVCS,
    NS,
    'wffc-disk',
    { status: { phase: 'Bound', capacity: { storage: '1Gi' } } },
    'merge',
    'status',
  );
  await cdiSets('wffc-disk', { phase: 'Succeeded', progress: '100.0%' });
  const [launcher] = await until('the launcher Pod', async () => {
    const p = await podsOf(api, vmi);
    return p.length ? p : undefined;
  });
  expect(launcher).toBeDefined();
  await until('the provisioning Pod deleted', async () => !(await api.getOrUndefined(PODS, NS, tmpName)));
});
