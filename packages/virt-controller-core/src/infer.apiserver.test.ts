// inferFromVolume through a real kube-apiserver (tools/testenv) and the admission webhooks: a VM whose
// instancetype/preference matchers name a volume gets them from the labels of that volume's PersistentVolumeClaim
// (directly, through a dataVolumeTemplate copying a PVC, or a DataVolume CDI garbage-collected), as upstream's VM
// mutator infers them; failures refuse the VM with upstream's message, or drop the matcher under the Ignore policy.
import type { KubeClient, KubeObject, Resource } from '@kubevirt-ts/controller-runtime';
import type { TestEnv } from '@kubevirt-ts/testenv';
import { VMS, type Vm } from './common.js';
import { INFER_LABELS } from './infer.js';
import { startApiserver, startTestWebhooks, type TestWebhooks } from './test-apiserver.js';

const NS = 'infer-test';
const PVCS: Resource = { group: '', version: 'v1', plural: 'persistentvolumeclaims', namespaced: true };
let env: TestEnv;
let api: KubeClient;
let hooks: TestWebhooks;

const pvc = (name: string, labels: Record<string, string>) =>
  api.create(PVCS, NS, {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name, namespace: NS, labels },
    spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
  } as KubeObject);

const LABELS = {
  [INFER_LABELS.instancetype.name]: 'u1.small',
  [INFER_LABELS.preference.name]: 'fedora',
  [INFER_LABELS.preference.kind]: 'VirtualMachinePreference',
};

function vm(
  name: string,
  volume: Record<string, unknown>,
  matchers: Record<string, unknown> = {
    instancetype: { inferFromVolume: 'root' },
    preference: { inferFromVolume: 'root' },
  },
  extra: Record<string, unknown> = {},
): Vm {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachine',
    metadata: { name, namespace: NS },
    spec: {
      runStrategy: 'Halted',
      ...matchers,
      ...extra,
      template: {
        spec: {
          domain: { devices: {}, memory: { guest: '256Mi' } },
          volumes: [{ name: 'root', ...volume }],
        },
      },
    },
  } as unknown as Vm;
}

beforeAll(async () => {
  ({ env, api } = await startApiserver(NS, 'infer-test'));
  hooks = await startTestWebhooks(api);
  await pvc('labelled', LABELS);
  await pvc('plain', {});
  // a DataVolume's PVC once CDI garbage-collected the DataVolume (and here: no CDI at all)
  await pvc('collected-dv', { [INFER_LABELS.instancetype.name]: 'cx1.large' });
}, 120000);

afterAll(async () => {
  await hooks?.close();
  api?.close();
  await env?.stop();
});

describe('inferFromVolume at admission', () => {
  it('from the labels of a PVC: the stored VM names the instance type and preference, inferFromVolume is gone', async () => {
    const created = await api.create<Vm>(
      VMS,
      NS,
      vm('from-pvc', { persistentVolumeClaim: { claimName: 'labelled' } }),
    );
    expect(created.spec.instancetype).toEqual({ name: 'u1.small' });
    expect(created.spec.preference).toEqual({ name: 'fedora', kind: 'VirtualMachinePreference' });
  });

  it('from the PVC a dataVolumeTemplate copies, and from the PVC of a DataVolume that is gone', async () => {
    const fromTemplate = await api.create<Vm>(
      VMS,
      NS,
      vm('from-dvt', { dataVolume: { name: 'root-dv' } }, undefined, {
        dataVolumeTemplates: [
          {
            metadata: { name: 'root-dv' },
            spec: { source: { pvc: { name: 'labelled', namespace: NS } }, storage: {} },
          },
        ],
      }),
    );
    expect(fromTemplate.spec.instancetype).toEqual({ name: 'u1.small' });
    const fromCollected = await api.create<Vm>(
      VMS,
      NS,
      vm('from-dv', { dataVolume: { name: 'collected-dv' } }, { instancetype: { inferFromVolume: 'root' } }),
    );
    expect(fromCollected.spec.instancetype).toEqual({ name: 'cx1.large' });
  });

  it("failures refuse the VM with upstream's messages (Reject, the default)", async () => {
    await expect(
      api.create(VMS, NS, vm('no-label', { persistentVolumeClaim: { claimName: 'plain' } })),
    ).rejects.toThrow(
      /unable to find required instancetype\.kubevirt\.io\/default-instancetype label on the volume/,
    );
    await expect(
      api.create(VMS, NS, vm('no-claim', { persistentVolumeClaim: { claimName: 'missing' } })),
    ).rejects.toThrow(/persistentvolumeclaims "missing" not found/);
    await expect(
      api.create(VMS, NS, vm('container', { containerDisk: { image: 'quay.io/containerdisks/fedora:41' } })),
    ).rejects.toThrow(/unable to infer defaults from volume root as type is not supported/);
    // a matcher naming both an object and a volume, or a volume the template does not have
    await expect(
      api.create(
        VMS,
        NS,
        vm(
          'both',
          { persistentVolumeClaim: { claimName: 'labelled' } },
          { instancetype: { name: 'u1.small', inferFromVolume: 'root' } },
        ),
      ),
    ).rejects.toThrow(
      /spec\.instancetype\.name: Name already set, should be cleared before setting inferFromVolume/,
    );
    await expect(
      api.create(
        VMS,
        NS,
        vm(
          'no-volume',
          { persistentVolumeClaim: { claimName: 'labelled' } },
          { preference: { inferFromVolume: 'data' } },
        ),
      ),
    ).rejects.toThrow(/unable to find volume data to infer defaults/);
  });

  it('inferFromVolumeFailurePolicy Ignore: what cannot be inferred drops the matcher; an inferred instance type clears the memory', async () => {
    const dropped = await api.create<Vm>(
      VMS,
      NS,
      vm(
        'ignored',
        { containerDisk: { image: 'quay.io/containerdisks/fedora:41' } },
        {
          instancetype: { inferFromVolume: 'root', inferFromVolumeFailurePolicy: 'Ignore' },
          preference: { inferFromVolume: 'root', inferFromVolumeFailurePolicy: 'Ignore' },
        },
      ),
    );
    expect(dropped.spec.instancetype).toBeUndefined();
    expect(dropped.spec.preference).toBeUndefined();
    expect(dropped.spec.template.spec.domain.memory?.guest).toBe('256Mi');
    const inferred = await api.create<Vm>(
      VMS,
      NS,
      vm(
        'ignore-ok',
        { persistentVolumeClaim: { claimName: 'labelled' } },
        { instancetype: { inferFromVolume: 'root', inferFromVolumeFailurePolicy: 'Ignore' } },
      ),
    );
    expect(inferred.spec.instancetype).toEqual({ name: 'u1.small' });
    expect(inferred.spec.template.spec.domain.memory).toBeUndefined();
  });
});
