// VMIs on PersistentVolumeClaims against a real kube-apiserver + etcd (tools/testenv) with deploy/crds and the
// controller running: the launcher Pod waits for a missing or unbound claim (Pending, the Synchronized condition, an
// event) and is created once the claim exists and binds, or at once for a claim whose StorageClass binds on the first
// consumer; the Pod mounts Block claims as devices and Filesystem claims as directories; status.volumeStatus carries
// each claim's persistentVolumeClaimInfo. There is no kube-controller-manager (no PV controller): the test binds a
// claim as it would, by writing `status.phase: Bound` (and the capacity) through the claim's status subresource.
import { EVENTS, KubeClient, type KubeObject } from '@kubevirt-ts/controller-runtime';
import { VMIS, VMS, type Vm, type Vmi } from './common.js';
import { PVCS, STORAGE_CLASSES, type Pvc } from './claims.js';
import { podsOf, poller, startController, stopController, type ControllerSuite } from './test-apiserver.js';

const NS = 'pvc-test';
let s: ControllerSuite | undefined;
let api: KubeClient;
const { until, finish } = poller();

interface Event extends KubeObject {
  type?: string;
  reason?: string;
  message?: string;
}
type Condition = { type: string; status: string; reason?: string; message?: string };
/** the full launcher Pod (the controller's cache keeps less) */
interface FullPod extends KubeObject {
  spec?: {
    volumes?: { name: string; persistentVolumeClaim?: { claimName: string; readOnly?: boolean } }[];
    containers?: {
      name: string;
      volumeMounts?: { name: string; mountPath: string }[];
      volumeDevices?: { name: string; devicePath: string }[];
    }[];
  };
}

function vmiObject(name: string, volumes: unknown[], disks?: unknown[]): Vmi {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name, namespace: NS },
    spec: {
      domain: {
        devices: { disks: disks ?? volumes.map((v) => ({ name: (v as { name: string }).name, disk: {} })) },
        resources: { requests: { memory: '64Mi' } },
      },
      terminationGracePeriodSeconds: 0,
      volumes,
    },
  } as unknown as Vmi;
}

function claim(
  name: string,
  mode: 'Block' | 'Filesystem',
  storageClassName: string,
  accessModes = ['ReadWriteOnce'],
) {
  return {
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    metadata: { name, namespace: NS },
    spec: { accessModes, volumeMode: mode, storageClassName, resources: { requests: { storage: '1Gi' } } },
  } as Pvc;
}
/** the PV controller's part: the claim is bound, with the capacity of its volume */
const bind = (name: string, capacity = '2Gi') =>
  api.patch(
    PVCS,
    NS,
    name,
    { status: { phase: 'Bound', accessModes: ['ReadWriteOnce'], capacity: { storage: capacity } } },
    'merge',
    'status',
  );

const getVmi = (name: string) => api.getOrUndefined<Vmi>(VMIS, NS, name);
const cond = (v: Vmi | undefined, type: string) =>
  (v?.status?.conditions as Condition[] | undefined)?.find((c) => c.type === type);
async function eventWith(uid: string | undefined, reason: string, message: RegExp): Promise<Event> {
  return until(`event ${reason}`, async () =>
    (await api.list<Event>(EVENTS, NS, { fieldSelector: `involvedObject.uid=${uid}` })).items.find(
      (e) => e.reason === reason && message.test(e.message ?? ''),
    ),
  );
}
/** the VMI once its Synchronized condition has `reason` */
const waitsWith = (name: string, reason: string) =>
  until(`${name} Synchronized ${reason}`, async () => {
    const v = await getVmi(name);
    return cond(v, 'Synchronized')?.reason === reason && v;
  });
const podOf = async (vmi: Vmi) =>
  until('launcher pod', async () => (await podsOf(api, vmi))[0] as unknown as FullPod | undefined);
const compute = (p: FullPod) => p.spec!.containers!.find((c) => c.name === 'compute')!;
const phaseIs = (name: string, phase: string) =>
  until(`${name} ${phase}`, async () => {
    const v = await getVmi(name);
    return v?.status?.phase === phase && v;
  });

beforeAll(async () => {
  s = await startController(NS, 'pvc-test');
  api = s.api;
  // as local-path's class (deploy/addons/storage): bound when the first Pod using the claim is scheduled
  await api.create(STORAGE_CLASSES, undefined, {
    apiVersion: 'storage.k8s.io/v1',
    kind: 'StorageClass',
    metadata: { name: 'wffc-test' },
    provisioner: 'rancher.io/local-path',
    volumeBindingMode: 'WaitForFirstConsumer',
  } as KubeObject);
}, 120_000);
afterAll(() => stopController(s ?? {}, finish), 60_000);

test('a missing claim holds the Pod (FailedPvcNotFound), an unbound one too (PVCNotReady); bound: a Pod with the block device and volumeStatus', async () => {
  const vmi = await api.create<Vmi>(
    VMIS,
    NS,
    vmiObject('on-block', [{ name: 'root', persistentVolumeClaim: { claimName: 'blk' } }]),
  );
  const pending = await waitsWith('on-block', 'FailedPvcNotFound');
  expect(pending.status?.phase).toBe('Pending');
  const sync = cond(pending, 'Synchronized')!;
  expect(sync.status).toBe('False');
  expect(sync.message).toBe(
    'spec.volumes[0].persistentVolumeClaim.claimName: PersistentVolumeClaim pvc-test/blk does not exist; waiting for it to be created',
  );
  // upstream shows the missing claim as an unschedulable Pod too
  expect(cond(pending, 'PodScheduled')).toMatchObject({
    status: 'False',
    reason: 'Unschedulable',
    message: sync.message,
  });
  const ev = await eventWith(
    vmi.metadata.uid,
    'FailedPvcNotFound',
    /PersistentVolumeClaim pvc-test\/blk does not exist/,
  );
  expect(ev.type).toBe('Normal');
  expect(await podsOf(api, vmi)).toEqual([]);

  // the claim appears, not bound (no StorageClass: a static PersistentVolume would bind it): still no Pod
  await api.create(PVCS, NS, claim('blk', 'Block', ''));
  const unbound = await waitsWith('on-block', 'PVCNotReady');
  expect(cond(unbound, 'Synchronized')!.message).toMatch(
    /pvc-test\/blk is Pending, not Bound \(no StorageClass/,
  );
  expect(cond(unbound, 'PodScheduled')).toBeUndefined();
  expect(unbound.status?.phase).toBe('Pending');
  await eventWith(vmi.metadata.uid, 'PVCNotReady', /pvc-test\/blk is Pending/);
  expect(await podsOf(api, vmi)).toEqual([]);

  // bound: the Pod is created with the claim as a block device (no mount), the VMI moves on
  await bind('blk');
  const pod = await podOf(vmi);
  expect(pod.spec!.volumes!.find((v) => v.name === 'root')).toEqual({
    name: 'root',
    persistentVolumeClaim: { claimName: 'blk' },
  });
  expect(compute(pod).volumeDevices).toEqual([{ name: 'root', devicePath: '/dev/root' }]);
  expect(compute(pod).volumeMounts!.find((m) => m.name === 'root')).toBeUndefined();
  const scheduling = await phaseIs('on-block', 'Scheduling');
  expect(cond(scheduling, 'Synchronized')).toBeUndefined();
  expect(scheduling.status?.volumeStatus).toEqual([
    {
      name: 'root',
      persistentVolumeClaimInfo: {
        claimName: 'blk',
        accessModes: ['ReadWriteOnce'],
        volumeMode: 'Block',
        capacity: { storage: '2Gi' },
        requests: { storage: '1Gi' },
        filesystemOverhead: '0',
      },
    },
  ]);

  // the claim grows: the status follows
  await bind('blk', '5Gi');
  await until('capacity 5Gi', async () => {
    const v = await getVmi('on-block');
    return v?.status?.volumeStatus?.[0]?.persistentVolumeClaimInfo?.capacity?.['storage'] === '5Gi';
  });
});

test('WaitForFirstConsumer: a Pending claim does not hold the Pod (the scheduler binds it); filesystem claims are mounted', async () => {
  await api.create(PVCS, NS, claim('data', 'Filesystem', 'wffc-test', ['ReadWriteMany']));
  const vmi = await api.create<Vmi>(
    VMIS,
    NS,
    vmiObject('on-wffc', [
      { name: 'data', persistentVolumeClaim: { claimName: 'data' } },
      { name: 'cd', containerDisk: { image: 'example.com/disk:1' } },
    ]),
  );
  const pod = await podOf(vmi);
  expect(pod.spec!.volumes!.find((v) => v.name === 'data')?.persistentVolumeClaim).toEqual({
    claimName: 'data',
  });
  expect(compute(pod).volumeMounts!.find((m) => m.name === 'data')?.mountPath).toBe(
    '/var/run/kubevirt-private/vmi-disks/data',
  );
  expect(compute(pod).volumeDevices ?? []).toEqual([]);
  const v = await phaseIs('on-wffc', 'Scheduling');
  expect(cond(v, 'Synchronized')).toBeUndefined();
  // the claim is still Pending: no capacity yet; ReadWriteMany tells virt-handler the volume is shared
  expect(v.status?.volumeStatus).toEqual([
    { name: 'cd' },
    {
      name: 'data',
      persistentVolumeClaimInfo: {
        claimName: 'data',
        accessModes: ['ReadWriteMany'],
        volumeMode: 'Filesystem',
        requests: { storage: '1Gi' },
        filesystemOverhead: '0.055',
      },
    },
  ]);
});

test('a dataVolume volume whose DataVolume does not exist waits naming the field; its claim bound: the Pod', async () => {
  const vmi = await api.create<Vmi>(
    VMIS,
    NS,
    vmiObject('on-dv', [{ name: 'os', dataVolume: { name: 'fedora-dv' } }]),
  );
  const w = await waitsWith('on-dv', 'FailedPvcNotFound');
  // no CDI in this API server: the DataVolume resource itself is unknown, which reads as "no DataVolume"
  expect(cond(w, 'Synchronized')!.message).toBe(
    'spec.volumes[0].dataVolume.name: neither DataVolume pvc-test/fedora-dv nor a PersistentVolumeClaim of that name exists; waiting for one of them to be created',
  );
  expect(await podsOf(api, vmi)).toEqual([]);
  await api.create(PVCS, NS, claim('fedora-dv', 'Filesystem', ''));
  await bind('fedora-dv');
  const pod = await podOf(vmi);
  expect(compute(pod).volumeMounts!.find((m) => m.name === 'os')?.mountPath).toBe(
    '/var/run/kubevirt-private/vmi-disks/os',
  );
  const v = await phaseIs('on-dv', 'Scheduling');
  expect(v.status?.volumeStatus?.[0]?.persistentVolumeClaimInfo?.claimName).toBe('fedora-dv');
});

test('a lun on a Filesystem claim: no Pod, a Warning and the condition naming the disk', async () => {
  await api.create(PVCS, NS, claim('fs-for-lun', 'Filesystem', ''));
  await bind('fs-for-lun');
  const vmi = await api.create<Vmi>(
    VMIS,
    NS,
    vmiObject(
      'lun-on-fs',
      [{ name: 'l', persistentVolumeClaim: { claimName: 'fs-for-lun' } }],
      [{ name: 'l', lun: {} }],
    ),
  );
  const w = await waitsWith('lun-on-fs', 'PVCVolumeModeMismatch');
  expect(w.status?.phase).toBe('Pending');
  expect(cond(w, 'Synchronized')!.message).toMatch(
    /^spec\.domain\.devices\.disks\[0\]\.lun: a lun passes a block device through, but PersistentVolumeClaim pvc-test\/fs-for-lun/,
  );
  const ev = await eventWith(vmi.metadata.uid, 'PVCVolumeModeMismatch', /disks\[0\]\.lun/);
  expect(ev.type).toBe('Warning');
  expect(await podsOf(api, vmi)).toEqual([]);
});

test("a VM's printableStatus: ErrorPvcNotFound while its claim is missing, WaitingForVolumeBinding while unbound", async () => {
  const vm = {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachine',
    metadata: { name: 'vm-claim', namespace: NS },
    spec: {
      runStrategy: 'Always',
      template: {
        metadata: { labels: { 'kubevirt.io/vm': 'vm-claim' } },
        spec: vmiObject('x', [{ name: 'root', persistentVolumeClaim: { claimName: 'vm-root' } }]).spec,
      },
    },
  } as unknown as Vm;
  await api.create(VMS, NS, vm);
  const status = (want: string) =>
    until(`vm ${want}`, async () => {
      const got = await api.getOrUndefined<Vm>(VMS, NS, 'vm-claim');
      return got?.status?.printableStatus === want && got;
    });
  await status('ErrorPvcNotFound');
  await api.create(PVCS, NS, claim('vm-root', 'Filesystem', 'wffc-test'));
  // WaitForFirstConsumer: the Pod is created, the claim stays Pending until the scheduler places it
  await status('WaitingForVolumeBinding');
  const vmi = (await getVmi('vm-claim'))!;
  await podOf(vmi);
  await bind('vm-root');
  await status('Starting');
});
