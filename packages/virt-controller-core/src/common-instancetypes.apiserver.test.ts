// The common instance types add-on (deploy/addons/common-instancetypes/) on a real kube-apiserver (tools/testenv)
// with deploy/'s CRDs, the controller and the admission webhooks: `kubectl apply -f` on the folder creates every
// object as written (nothing pruned by the CRDs' schemas), and VMs that name them the way a user coming from
// upstream does (`instancetype: {name: u1.medium}`, `preference: {name: fedora}`, no kind) get VMIs with the CPU,
// memory and devices of upstream's tables; a preference's requirements are enforced at admission.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseManifests } from '@kubevirt-ts/api';
import type { KubeClient, KubeObject } from '@kubevirt-ts/controller-runtime';
import { findBinaries, type TestEnv } from '@kubevirt-ts/testenv';
import { VMIS, VMS, type Vm, type Vmi } from './common.js';
import { CLUSTER_INSTANCETYPES, CLUSTER_PREFERENCES } from './instancetype.js';
import type { VirtController } from './manager.js';
import {
  podsOf,
  poller,
  repoRoot,
  startController,
  stopController,
  startTestWebhooks,
  type TestWebhooks,
} from './test-apiserver.js';

const NS = 'cit-test';
const ADDON = join(repoRoot, 'deploy', 'addons', 'common-instancetypes');
let env: TestEnv;
let api: KubeClient;
let controller: VirtController;
let hooks: TestWebhooks;
const { until, finish } = poller();

type Obj = KubeObject & { metadata: NonNullable<KubeObject['metadata']>; spec: Record<string, unknown> };
const addonObjects = (): Obj[] =>
  readdirSync(ADDON)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .flatMap((f) => parseManifests(readFileSync(join(ADDON, f), 'utf8')) as Obj[]);

/** a VM as a user coming from upstream writes it: instance type and preference by name only */
function vm(name: string, instancetype: string, preference: string): Vm {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachine',
    metadata: { name, namespace: NS },
    spec: {
      running: true,
      instancetype: { name: instancetype },
      preference: { name: preference },
      template: {
        spec: {
          domain: {
            devices: { disks: [{ name: 'root' }], interfaces: [{ name: 'default', masquerade: {} }] },
          },
          networks: [{ name: 'default', pod: {} }],
          volumes: [{ name: 'root', containerDisk: { image: 'quay.io/containerdisks/fedora:41' } }],
        },
      },
    },
  } as unknown as Vm;
}
const vmiOf = (name: string) => until(`VMI ${name}`, () => api.getOrUndefined<Vmi>(VMIS, NS, name));
/** the VMI's launcher Pod, once the controller has rendered it */
const podOf = (vmi: Vmi) =>
  until(`launcher Pod of ${vmi.metadata.name}`, async () => (await podsOf(api, vmi))[0]);

beforeAll(async () => {
  ({ env, api, controller } = await startController(NS, 'common-instancetypes-test'));
  hooks = await startTestWebhooks(api);
}, 180000);

afterAll(async () => {
  await hooks?.close();
  await stopController({ env, api, controller }, finish);
});

describe('the common instance types add-on', () => {
  it('kubectl apply -f deploy/addons/common-instancetypes/ creates every object as written', () => {
    const kubectl = findBinaries().kubectl ?? 'kubectl';
    const r = spawnSync(kubectl, ['apply', '-f', ADDON], {
      encoding: 'utf8',
      env: { ...process.env, KUBECONFIG: env.kubeconfigPath },
      timeout: 120000,
    });
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
    expect(r.stdout).toMatch(
      /virtualmachineclusterinstancetype\.instancetype\.kubevirt\.io\/u1\.medium created/,
    );
    expect(r.stdout).toMatch(/virtualmachineclusterpreference\.instancetype\.kubevirt\.io\/fedora created/);
  }, 150000);

  it('the API server keeps every field (the CRD schemas prune nothing)', async () => {
    const want = addonObjects();
    const its = (await api.list<Obj>(CLUSTER_INSTANCETYPES, undefined)).items;
    const prefs = (await api.list<Obj>(CLUSTER_PREFERENCES, undefined)).items;
    expect(its).toHaveLength(want.filter((o) => o.kind === 'VirtualMachineClusterInstancetype').length);
    expect(prefs).toHaveLength(want.filter((o) => o.kind === 'VirtualMachineClusterPreference').length);
    expect(its.length).toBe(65);
    expect(prefs.length).toBe(54);
    const stored = new Map([...its, ...prefs].map((o) => [`${o.kind}/${o.metadata.name}`, o]));
    for (const o of want) {
      const s = stored.get(`${o.kind}/${o.metadata.name}`);
      expect({ name: o.metadata.name, spec: s?.spec, labels: s?.metadata.labels }).toEqual({
        name: o.metadata.name,
        spec: o.spec,
        labels: o.metadata.labels,
      });
    }
  });

  it('u1.medium + fedora: 1 vCPU, 4Gi, virtio disk and NIC, RNG, EFI secure boot with SMM, amd64', async () => {
    await api.create<Vm>(VMS, NS, vm('fedora', 'u1.medium', 'fedora'));
    const vmi = await vmiOf('fedora');
    const d = vmi.spec.domain;
    expect(d.cpu).toMatchObject({ sockets: 1, cores: 1, threads: 1 });
    expect(d.memory?.guest).toBe('4Gi');
    expect(d.resources?.requests?.['memory']).toBe('4Gi');
    expect(d.devices?.disks).toEqual([{ name: 'root', disk: { bus: 'virtio' } }]);
    expect(d.devices?.interfaces?.[0]).toMatchObject({ name: 'default', model: 'virtio', masquerade: {} });
    expect(d.devices?.rng).toEqual({});
    expect(d.firmware?.bootloader).toEqual({ efi: { secureBoot: true } });
    expect(d.features?.smm).toMatchObject({});
    expect(vmi.spec.architecture).toBe('amd64');
    expect(vmi.metadata.annotations).toMatchObject({
      'kubevirt.io/cluster-instancetype-name': 'u1.medium',
      'kubevirt.io/cluster-preference-name': 'fedora',
      'vm.kubevirt.io/os': 'linux',
    });
    await podOf(vmi);
  });

  it('u1.large + windows.11: 2 sockets, 8Gi, SATA disk, e1000e NIC, Hyper-V, Windows clock, persistent EFI and TPM', async () => {
    await api.create<Vm>(VMS, NS, vm('win11', 'u1.large', 'windows.11'));
    const vmi = await vmiOf('win11');
    const d = vmi.spec.domain;
    expect(d.cpu).toMatchObject({ sockets: 2, cores: 1, threads: 1 });
    expect(d.memory?.guest).toBe('8Gi');
    expect(d.devices?.disks).toEqual([{ name: 'root', disk: { bus: 'sata' } }]);
    expect(d.devices?.interfaces?.[0]).toMatchObject({ name: 'default', model: 'e1000e' });
    expect(d.devices?.tpm).toEqual({ persistent: true });
    expect(d.devices?.autoattachInputDevice).toBe(true);
    expect(d.features).toMatchObject({
      acpi: {},
      apic: {},
      smm: {},
      hyperv: { relaxed: {}, vapic: {}, spinlocks: { spinlocks: 8191 }, synictimer: { direct: {} } },
    });
    expect(d.clock).toMatchObject({
      utc: {},
      timer: {
        hpet: { present: false },
        hyperv: {},
        pit: { tickPolicy: 'delay' },
        rtc: { tickPolicy: 'catchup' },
      },
    });
    expect(d.firmware?.bootloader).toEqual({ efi: { secureBoot: true, persistent: true } });
    expect(vmi.spec.terminationGracePeriodSeconds).toBe(3600);
    expect(vmi.metadata.annotations).toMatchObject({ 'vm.kubevirt.io/os': 'windows' });
    // the launcher Pod is rendered, with the preference's grace period
    const pod = (await podOf(vmi)) as { spec?: { terminationGracePeriodSeconds?: number } };
    expect(pod.spec?.terminationGracePeriodSeconds).toBeGreaterThanOrEqual(3600);
  });

  it("a VM whose instance type misses the preference's requirements is refused at admission", async () => {
    await expect(api.create<Vm>(VMS, NS, vm('win11-small', 'u1.medium', 'windows.11'))).rejects.toThrow(
      /insufficient CPU resources of 1 vCPU provided by instance type, preference requires 2 vCPU/,
    );
    await expect(api.create<Vm>(VMS, NS, vm('win10-small', 'u1.micro', 'windows.10'))).rejects.toThrow(
      /insufficient Memory resources of 1Gi provided by instance type, preference requires 2Gi/,
    );
    // as upstream, the spread topology is checked first: 4 vCPUs do not spread as 4 cores x 2 threads
    await expect(api.create<Vm>(VMS, NS, vm('dpdk-small', 'cx1.xlarge', 'rhel.9.dpdk'))).rejects.toThrow(
      /instancetype\.spec\.cpu\.guest: 4 vCPUs provided by the instance type are not divisible by the number of threads per core 2/,
    );
    expect(await api.getOrUndefined<Vm>(VMS, NS, 'win11-small')).toBeUndefined();
  });

  it('o1.medium: the launcher Pod requests half of the 4Gi guest memory', async () => {
    await api.create<Vm>(VMS, NS, vm('overcommitted', 'o1.medium', 'ubuntu'));
    const vmi = await vmiOf('overcommitted');
    expect(vmi.spec.domain.memory?.guest).toBe('4Gi');
    expect(vmi.spec.domain.resources?.requests?.['memory']).toBe(String(2 * 1024 ** 3));
  });
});
