// Instance types and preferences through a real kube-apiserver (tools/testenv) with deploy/'s CRDs, the
// controller and the admission webhooks: a VM naming them gets a VMI with them applied, they are stored in
// ControllerRevisions the VM's status references, a later change of the instance type reaches the VM only once the
// reference is cleared and the VM restarts, and admission refuses a template that conflicts with its instance type.
import { PODS, isNotFound, type KubeClient, type KubeObject } from '@kubevirt-ts/controller-runtime';
import type { TestEnv } from '@kubevirt-ts/testenv';
import { VMIS, VMS, nowTimestamp, type Vm, type Vmi } from './common.js';
import { CLUSTER_INSTANCETYPES, CONTROLLER_REVISIONS, INSTANCETYPES, PREFERENCES } from './instancetype.js';
import type { VirtController } from './manager.js';
import {
  poller,
  startController,
  stopController,
  startTestWebhooks,
  type TestWebhooks,
} from './test-apiserver.js';

const NS = 'it-test';
let env: TestEnv;
let api: KubeClient;
let controller: VirtController;
let hooks: TestWebhooks;
const { until, finish } = poller();

const getVm = (name: string) => api.getOrUndefined<Vm>(VMS, NS, name);
const getVmi = (name: string) => api.getOrUndefined<Vmi>(VMIS, NS, name);

const instancetype = (name: string, guest: number, memory: string) =>
  ({
    apiVersion: 'instancetype.kubevirt.io/v1beta1',
    kind: 'VirtualMachineClusterInstancetype',
    metadata: { name },
    spec: { cpu: { guest }, memory: { guest: memory } },
  }) as KubeObject;

function vm(name: string, it: Record<string, unknown>, domain: Record<string, unknown> = {}): Vm {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachine',
    metadata: { name, namespace: NS },
    spec: {
      running: true,
      instancetype: it,
      preference: { name: 'fedora', kind: 'VirtualMachinePreference' },
      template: {
        spec: {
          domain: { devices: { disks: [{ name: 'root' }] }, ...domain },
          volumes: [{ name: 'root', containerDisk: { image: 'quay.io/containerdisks/fedora:41' } }],
          terminationGracePeriodSeconds: 0,
        },
      },
    },
  } as unknown as Vm;
}

/** virt-handler and kubelet: the VMI (having run: no start backoff) fails and its Pods go; the VM (Always)
 * starts a new one */
async function failVmi(name: string): Promise<Vmi> {
  const old = (await getVmi(name))!;
  const at = nowTimestamp();
  const phaseTransitionTimestamps = ['Running', 'Failed'].map((phase) => ({
    phase,
    phaseTransitionTimestamp: at,
  }));
  await api.patch(VMIS, NS, name, { status: { phase: 'Failed', phaseTransitionTimestamps } }, 'merge');
  const pods = await api.list<KubeObject>(PODS, NS);
  for (const p of pods.items)
    await api.delete(PODS, NS, p.metadata!.name!, { gracePeriodSeconds: 0 }).catch((e) => {
      if (!isNotFound(e)) throw e;
    });
  return until('a new VMI', async () => {
    const v = await getVmi(name);
    return v && v.metadata.uid !== old.metadata.uid ? v : undefined;
  });
}

beforeAll(async () => {
  ({ env, api, controller } = await startController(NS, 'instancetype-test'));
  hooks = await startTestWebhooks(api);
  await api.create(CLUSTER_INSTANCETYPES, undefined, instancetype('u1.small', 2, '256Mi'));
  await api.create(PREFERENCES, NS, {
    apiVersion: 'instancetype.kubevirt.io/v1beta1',
    kind: 'VirtualMachinePreference',
    metadata: { name: 'fedora', namespace: NS },
    spec: { cpu: { preferredCPUTopology: 'cores' }, devices: { preferredDiskBus: 'virtio' } },
  } as KubeObject);
}, 180000);

afterAll(async () => {
  await hooks?.close();
  await stopController({ env, api, controller }, finish);
});

describe('instance types and preferences', () => {
  it('the VMI gets the instance type and preference; they are stored in ControllerRevisions the VM references; a later change waits for the reference to be cleared and a restart', async () => {
    const created = await api.create<Vm>(VMS, NS, vm('it-vm', { name: 'u1.small' }));
    // the VM is stored as given: not defaulted before the instance type applies
    expect(created.spec.template.spec.domain.cpu).toBeUndefined();
    const vmi = await until('vmi', () => getVmi('it-vm'));
    expect(vmi.spec.domain.cpu).toMatchObject({ sockets: 1, cores: 2, threads: 1 });
    expect(vmi.spec.domain.memory?.guest).toBe('256Mi');
    expect(vmi.spec.domain.resources?.requests?.['memory']).toBe('256Mi');
    expect(vmi.spec.domain.devices?.disks).toEqual([{ name: 'root', disk: { bus: 'virtio' } }]);
    expect(vmi.metadata.annotations).toMatchObject({
      'kubevirt.io/cluster-instancetype-name': 'u1.small',
      'kubevirt.io/preference-name': 'fedora',
    });

    const it1 = await api.get<KubeObject>(CLUSTER_INSTANCETYPES, undefined, 'u1.small');
    const pref = await api.get<KubeObject>(PREFERENCES, NS, 'fedora');
    const itRev = `it-vm-u1.small-v1beta1-${it1.metadata!.uid}-1`;
    const prefRev = `it-vm-fedora-v1beta1-${pref.metadata!.uid}-1`;
    const status = await until('status refs', async () => {
      const v = await getVm('it-vm');
      return v?.status?.instancetypeRef && v.status.preferenceRef ? v.status : undefined;
    });
    expect(status.instancetypeRef).toEqual({ name: 'u1.small', controllerRevisionRef: { name: itRev } });
    expect(status.preferenceRef).toEqual({
      name: 'fedora',
      kind: 'VirtualMachinePreference',
      controllerRevisionRef: { name: prefRev },
    });
    const cr = await api.get<KubeObject & { data: { kind: string; spec: unknown } }>(
      CONTROLLER_REVISIONS,
      NS,
      itRev,
    );
    expect(cr.metadata?.ownerReferences?.[0]).toMatchObject({
      kind: 'VirtualMachine',
      uid: created.metadata.uid,
      controller: true,
    });
    expect(cr.metadata?.labels?.['instancetype.kubevirt.io/object-name']).toBe('u1.small');
    expect(cr.data).toMatchObject({
      kind: 'VirtualMachineClusterInstancetype',
      spec: { cpu: { guest: 2 }, memory: { guest: '256Mi' } },
    });

    // the instance type grows: a restart still gets the stored revision
    const it2 = { ...it1, spec: { cpu: { guest: 4 }, memory: { guest: '512Mi' } } };
    await api.update(CLUSTER_INSTANCETYPES, it2);
    const second = await failVmi('it-vm');
    expect(second.spec.domain.cpu).toMatchObject({ cores: 2 });
    expect(second.spec.domain.memory?.guest).toBe('256Mi');

    // the reference is cleared: a new revision is stored, the running VMI is not changed, the next start uses it
    await api.patch(
      VMS,
      NS,
      'it-vm',
      [{ op: 'remove', path: '/status/instancetypeRef/controllerRevisionRef' }],
      'json',
      'status',
    );
    const itRev2 = `it-vm-u1.small-v1beta1-${it1.metadata!.uid}-2`;
    await until(
      'new revision referenced',
      async () => (await getVm('it-vm'))?.status?.instancetypeRef?.controllerRevisionRef?.name === itRev2,
    );
    const same = (await getVmi('it-vm'))!;
    expect(same.metadata.uid).toBe(second.metadata.uid);
    expect(same.spec.domain.cpu).toMatchObject({ cores: 2 });
    const third = await failVmi('it-vm');
    expect(third.spec.domain.cpu).toMatchObject({ sockets: 1, cores: 4, threads: 1 });
    expect(third.spec.domain.memory?.guest).toBe('512Mi');
  });

  it('a template that sets what its instance type sets is refused at admission with the field path', async () => {
    await expect(
      api.create<Vm>(VMS, NS, vm('conflict', { name: 'u1.small' }, { cpu: { sockets: 2 } })),
    ).rejects.toThrow(
      /spec\.template\.spec\.domain\.cpu\.sockets: VM field\(s\) spec\.template\.spec\.domain\.cpu\.sockets conflicts with selected instance type/,
    );
    await expect(
      api.create<Vm>(VMS, NS, vm('conflict', { name: 'u1.small' }, { memory: { guest: '1Gi' } })),
    ).rejects.toThrow(
      /VM field\(s\) spec\.template\.spec\.domain\.memory\.guest conflicts with selected instance type/,
    );
  });

  it('an unknown instance type: the VM is admitted (as upstream v1.9) and does not start, FailedFindInstancetype, until it exists', async () => {
    await api.create<Vm>(VMS, NS, vm('missing', { name: 'nope', kind: 'VirtualMachineInstancetype' }));
    const failed = await until('Failure condition', async () => {
      const c = (await getVm('missing'))?.status?.conditions?.find((x) => x.type === 'Failure');
      return c?.reason === 'FailedFindInstancetype' ? c : undefined;
    });
    expect(failed.message).toMatch(/"nope" not found/);
    expect(await getVmi('missing')).toBeUndefined();
    await api.create(INSTANCETYPES, NS, {
      ...instancetype('nope', 1, '128Mi'),
      kind: 'VirtualMachineInstancetype',
      metadata: { name: 'nope', namespace: NS },
    });
    const vmi = await until('vmi', () => getVmi('missing'));
    expect(vmi.spec.domain.cpu).toMatchObject({ sockets: 1, cores: 1, threads: 1 });
    expect(vmi.metadata.annotations?.['kubevirt.io/instancetype-name']).toBe('nope');
  });
});
