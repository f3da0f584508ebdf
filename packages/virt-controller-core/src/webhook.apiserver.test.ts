// The admission webhooks through a real kube-apiserver (tools/testenv): the API server calls the
// webhook server over TLS on loopback (a CA and serving certificate made by openssl for the test),
// registered with failurePolicy Fail, as deploy/ will register it.
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  NOT_IMPLEMENTED_KINDS,
  crdGroup,
  crdVersions,
  setVirtualMachineInstanceDefaults,
  validateObject,
  type VirtualMachineInstance,
} from '@kubevirt-ts/api';
import { KubeClient, type KubeObject, type Resource } from '@kubevirt-ts/controller-runtime';
import { KubeConfig } from '@kubernetes/client-node';
import { kubeRequest, type TestEnv } from '@kubevirt-ts/testenv';
import { formatFieldError } from './admission.js';
import { VMIMS, VMIS, VMS, VMI_FINALIZER, type Vm, type Vmi } from './common.js';
import { invalidVm, startApiserver, startTestWebhooks, type TestWebhooks } from './test-apiserver.js';

const NS = 'hook-test';
let env: TestEnv;
let api: KubeClient;
let hooks: TestWebhooks;

beforeAll(async () => {
  ({ env, api } = await startApiserver(NS, 'webhook-test'));
  hooks = await startTestWebhooks(api);
}, 120000);

afterAll(async () => {
  await hooks?.close();
  api?.close();
  await env?.stop();
});

const badVm = invalidVm(NS);

/** kubectl on the test's API server, asynchronously: the webhook server answering the API server runs in this process */
function kubectl(...args: string[]): Promise<{ status: number; stderr: string }> {
  const bin = env.binaries.kubectl;
  expect(bin).toBeDefined();
  return new Promise((resolve) =>
    execFile(bin!, ['--kubeconfig', env.kubeconfigPath, ...args], (err, _out, stderr) =>
      resolve({ status: err ? ((err as { code?: number }).code ?? 1) : 0, stderr }),
    ),
  );
}

describe('admission webhooks through the API server', () => {
  it('kubectl apply of an invalid VM prints every error with its field path, as kv-validate does', async () => {
    const expected = validateObject(badVm).map(formatFieldError);
    expect(expected.length).toBeGreaterThanOrEqual(2);
    const file = join(hooks.dir, 'bad-vm.json');
    writeFileSync(file, JSON.stringify(badVm));
    const r = await kubectl('apply', '-f', file);
    expect(r.status).not.toBe(0);
    // kubectl lists the causes of the webhook's Status: one `* path: reason` line per error
    expect(r.stderr).toMatch(/The request is invalid/);
    for (const line of expected) expect(r.stderr).toContain(`* ${line}\n`);
  });

  it('a VMI is stored with the API defaults and the finalizer', async () => {
    const vmi = {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstance',
      metadata: { name: 'defaults', namespace: NS },
      spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } } },
    } as unknown as VirtualMachineInstance;
    const created = await api.create<Vmi>(VMIS, NS, vmi as Vmi);
    expect(created.spec).toEqual(setVirtualMachineInstanceDefaults(vmi).spec);
    expect(created.spec.domain.firmware?.uuid).toBeDefined();
    expect(created.metadata.finalizers).toEqual([VMI_FINALIZER]);
  });

  it("a migration is labelled with its VMI's name (kubevirt.io/vmi-name), as upstream's mutator does", async () => {
    const created = await api.create<KubeObject>(VMIMS, NS, {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstanceMigration',
      metadata: { generateName: 'kubevirt-migrate-vm-', namespace: NS, labels: { keep: 'me' } },
      spec: { vmiName: 'defaults' },
    } as KubeObject);
    expect(created.metadata?.labels).toEqual({ keep: 'me', 'kubevirt.io/vmi-name': 'defaults' });
    const list = await api.list<KubeObject>(VMIMS, NS, { labelSelector: 'kubevirt.io/vmi-name==defaults' });
    expect(list.items.map((m) => m.metadata?.name)).toEqual([created.metadata?.name]);
  });

  it("a migration is refused as upstream's admitter does: no such VMI, one not migratable, one already migrating", async () => {
    const vmim = (vmiName: string) =>
      ({
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachineInstanceMigration',
        metadata: { generateName: 'mig-', namespace: NS },
        spec: { vmiName },
      }) as KubeObject;
    await expect(api.create(VMIMS, NS, vmim('nowhere'))).rejects.toThrow(
      `the VMI "${NS}/nowhere" does not exist`,
    );
    // 'defaults' has the unfinished migration of the test above (no controller runs here)
    await expect(api.create(VMIMS, NS, vmim('defaults'))).rejects.toThrow(
      /in-flight migration detected\. Active migration job \(kubevirt-migrate-vm-\w+\) is currently already in progress for VMI defaults\./,
    );
    const pinned = await api.create<Vmi>(VMIS, NS, {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstance',
      metadata: { name: 'pinned-host', namespace: NS },
      spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } } },
    } as unknown as Vmi);
    await api.update(VMIS, {
      ...pinned,
      status: {
        phase: 'Running',
        conditions: [
          {
            type: 'LiveMigratable',
            status: 'False',
            reason: 'DisksNotLiveMigratable',
            message: 'cannot migrate VMI with non-shared HostDisk',
          },
        ],
      },
    } as Vmi);
    await expect(api.create(VMIMS, NS, vmim('pinned-host'))).rejects.toThrow(
      'Cannot migrate VMI, Reason: DisksNotLiveMigratable, Message: cannot migrate VMI with non-shared HostDisk',
    );
  });

  it('a VMI spec cannot change after creation; its labels can', async () => {
    const cur = await api.get<Vmi>(VMIS, NS, 'defaults');
    const changed = structuredClone(cur);
    changed.spec.domain.resources = { requests: { memory: '128Mi' } };
    await expect(api.update(VMIS, changed)).rejects.toThrow(
      /spec: Forbidden: the spec of a VirtualMachineInstance cannot change/,
    );
    const relabeled = structuredClone(cur);
    relabeled.metadata.labels = { a: 'b' };
    const ok = await api.update<Vmi>(VMIS, relabeled);
    expect(ok.metadata.labels).toEqual({ a: 'b' });
  });

  it("reserved labels (kubevirt.io/nodeName, ...): nobody but the components' service accounts sets or changes them", async () => {
    const vmi = (name: string, labels: Record<string, string>) =>
      ({
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachineInstance',
        metadata: { name, namespace: NS, labels },
        spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } } },
      }) as unknown as Vmi;
    // the admin of this API server is a person, not a component
    await expect(api.create(VMIS, NS, vmi('pinned', { 'kubevirt.io/nodeName': 'node-x' }))).rejects.toThrow(
      /metadata\.labels\[kubevirt\.io\/nodeName\]: Forbidden: a reserved label/,
    );
    const plain = await api.create<Vmi>(VMIS, NS, vmi('plain', { app: 'db', 'kubevirt.io/domain': 'plain' }));
    await expect(
      api.patch(
        VMIS,
        NS,
        'plain',
        { metadata: { labels: { 'kubevirt.io/migrationTargetNodeName': 'n' } } },
        'merge',
      ),
    ).rejects.toThrow(/metadata\.labels\[kubevirt\.io\/migrationTargetNodeName\]: Forbidden/);
    // virt-controller's service account (a real token) may: it schedules VMIs
    const ns = 'kubevirt-ts';
    const sa = 'kubevirt-ts-controller';
    await api.create({ group: '', version: 'v1', plural: 'namespaces', namespaced: false }, undefined, {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: ns },
    } as KubeObject);
    const SAS: Resource = { group: '', version: 'v1', plural: 'serviceaccounts', namespaced: true };
    await api.create(SAS, ns, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: sa },
    } as KubeObject);
    await api.create(
      { group: 'rbac.authorization.k8s.io', version: 'v1', plural: 'clusterrolebindings', namespaced: false },
      undefined,
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name: 'reserved-labels-test' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
        subjects: [{ kind: 'ServiceAccount', name: sa, namespace: ns }],
      } as KubeObject,
    );
    const tr = await kubeRequest<{ status: { token: string } }>(
      env.kubeConfig(),
      'POST',
      `/api/v1/namespaces/${ns}/serviceaccounts/${sa}/token`,
      { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 600 } },
    );
    const c = env.kubeConfig().getCurrentCluster()!;
    const asController = new KubeConfig();
    asController.loadFromOptions({
      clusters: [{ name: 'c', server: c.server, caData: c.caData, caFile: c.caFile, skipTLSVerify: false }],
      users: [{ name: 'u', token: tr.status.token }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    const controller = new KubeClient(asController);
    try {
      const scheduled = await controller.patch<Vmi>(
        VMIS,
        NS,
        'plain',
        { metadata: { labels: { 'kubevirt.io/nodeName': 'node-x' } } },
        'merge',
      );
      expect(scheduled.metadata.labels).toEqual({
        app: 'db',
        'kubevirt.io/domain': 'plain',
        'kubevirt.io/nodeName': 'node-x',
      });
      const made = await controller.create<Vmi>(VMIS, NS, vmi('made', { 'kubevirt.io/created-by': 'uid-1' }));
      expect(made.metadata.labels?.['kubevirt.io/created-by']).toBe('uid-1');
    } finally {
      controller.close();
    }
    // other labels stay free, kubevirt.io ones that are not reserved too
    const relabeled = await api.patch<Vmi>(
      VMIS,
      NS,
      'plain',
      { metadata: { labels: { app: 'web' } } },
      'merge',
    );
    expect(relabeled.metadata.labels?.app).toBe('web');
    expect(plain.metadata.labels?.['kubevirt.io/domain']).toBe('plain');
  });

  it('VirtualMachineInstancePresets: a new VMI matching one gets its settings and the annotation; conflicts refuse it', async () => {
    const presets: Resource = {
      group: 'kubevirt.io',
      version: 'v1',
      plural: 'virtualmachineinstancepresets',
      namespaced: true,
    };
    const preset = (name: string, cores: number) =>
      ({
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachineInstancePreset',
        metadata: { name, namespace: NS },
        spec: {
          selector: { matchLabels: { flavor: name } },
          domain: { cpu: { cores }, resources: { requests: { memory: '96Mi' } } },
        },
      }) as KubeObject;
    await api.create(presets, NS, preset('small', 2));
    // validated as any kind: a malformed selector is refused with its path
    const bad = preset('bad', 1) as KubeObject & { spec: { selector: object } };
    bad.spec.selector = { matchExpressions: [{ key: 'a', operator: 'In' }] };
    await expect(api.create(presets, NS, bad)).rejects.toThrow(/spec\.selector: /);
    const vmi = (name: string, labels: Record<string, string>) =>
      ({
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachineInstance',
        metadata: { name, namespace: NS, labels },
        spec: { domain: { devices: {} } },
      }) as unknown as Vmi;
    const made = await api.create<Vmi>(VMIS, NS, vmi('preset-small', { flavor: 'small' }));
    expect(made.spec.domain.cpu?.cores).toBe(2);
    expect(made.spec.domain.resources?.requests?.memory).toBe('96Mi');
    expect(made.metadata.annotations?.['virtualmachinepreset.kubevirt.io/small']).toBe('kubevirt.io/v1');
    // a second matching preset that disagrees: the VMI is refused, naming both
    await api.create(presets, NS, {
      ...preset('small-too', 4),
      spec: { selector: { matchLabels: { flavor: 'small' } }, domain: { cpu: { cores: 4 } } },
    } as KubeObject);
    await expect(api.create<Vmi>(VMIS, NS, vmi('preset-clash', { flavor: 'small' }))).rejects.toThrow(
      /presets 'small-too' and 'small' conflict: spec\.cpu/,
    );
    // the old version of the kind is served too (deprecated, as upstream)
    const old = await api.list<KubeObject>({ ...presets, version: 'v1alpha3' }, NS);
    expect(old.items.map((p) => p.metadata?.name).sort()).toEqual(['small', 'small-too']);
  });

  it('VirtualMachinePools (pool.kubevirt.io, v1beta1 and v1alpha1) are validated: each problem with its field path', async () => {
    const pools: Resource = {
      group: 'pool.kubevirt.io',
      version: 'v1beta1',
      plural: 'virtualmachinepools',
      namespaced: true,
    };
    const pool = (name: string, selector: string, apiVersion = 'pool.kubevirt.io/v1beta1') =>
      ({
        apiVersion,
        kind: 'VirtualMachinePool',
        metadata: { name, namespace: NS },
        spec: {
          replicas: 0,
          selector: { matchLabels: { pool: selector } },
          virtualMachineTemplate: {
            metadata: { labels: { pool: name } },
            spec: {
              runStrategy: 'Halted',
              template: {
                spec: {
                  domain: {
                    devices: { disks: [{ name: 'nope' }] },
                    resources: { requests: { memory: '64Mi' } },
                  },
                },
              },
            },
          },
        },
      }) as KubeObject;
    await expect(api.create(pools, NS, pool('bad', 'other'))).rejects.toThrow(
      /spec\.virtualMachineTemplate\.spec\.template\.spec\.domain\.devices\.disks\[0\]\.name: .*\n.*spec\.selector: selector does not match/s,
    );
    // the older version is converted for the webhook (matchPolicy Equivalent) and refused the same way
    await expect(
      api.create({ ...pools, version: 'v1alpha1' }, NS, pool('old', 'other', 'pool.kubevirt.io/v1alpha1')),
    ).rejects.toThrow(/spec\.selector: selector does not match/);
    const ok = pool('good', 'good');
    (
      ok as {
        spec: { virtualMachineTemplate: { spec: { template: { spec: { domain: { devices: object } } } } } };
      }
    ).spec.virtualMachineTemplate.spec.template.spec.domain.devices = {};
    const created = await api.create<KubeObject>(pools, NS, ok);
    expect(created.metadata?.name).toBe('good');
  });

  it('a valid VM is accepted with its template defaulted; an invalid update is rejected', async () => {
    const vm = await api.create<Vm>(VMS, NS, {
      ...badVm,
      metadata: { name: 'good', namespace: NS },
      spec: {
        running: false,
        template: { spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } } } },
      },
    } as unknown as Vm);
    expect(vm.spec.template.spec.domain.firmware?.uuid).toBeDefined();
    const bad = structuredClone(vm);
    bad.spec.runStrategy = 'Always';
    await expect(api.update(VMS, bad)).rejects.toThrow(
      /spec\.running: running and runStrategy are mutually exclusive/,
    );
  });

  it('every served kind not implemented lists (200, empty) across namespaces; a create is refused by name', async () => {
    for (const k of NOT_IMPLEMENTED_KINDS) {
      for (const v of crdVersions(k)) {
        const res: Resource = {
          group: crdGroup(k),
          version: v.name,
          plural: k.plural,
          namespaced: k.scope !== 'Cluster',
        };
        const list = await api.list<KubeObject>(res, undefined);
        expect({ kind: k.kind, version: v.name, items: list.items }).toEqual({
          kind: k.kind,
          version: v.name,
          items: [],
        });
      }
    }
    const snapshots: Resource = {
      group: 'snapshot.kubevirt.io',
      version: 'v1beta1',
      plural: 'virtualmachinesnapshots',
      namespaced: true,
    };
    const obj = {
      apiVersion: 'snapshot.kubevirt.io/v1beta1',
      kind: 'VirtualMachineSnapshot',
      metadata: { name: 'snap', namespace: NS },
      spec: { source: { apiGroup: 'kubevirt.io', kind: 'VirtualMachine', name: 'vm' } },
    } as KubeObject;
    const refused =
      /admission webhook "validate\.kubevirt-ts\.kubevirt\.io" denied the request: VirtualMachineSnapshot \(snapshot\.kubevirt\.io\): not implemented by kubevirt-ts/;
    await expect(api.create(snapshots, NS, obj)).rejects.toThrow(refused);
    // a dry run is answered the same way (sideEffects: None)
    const file = join(hooks.dir, 'snapshot.json');
    writeFileSync(file, JSON.stringify(obj));
    const dry = await kubectl('create', '--dry-run=server', '-f', file);
    expect(dry.status).not.toBe(0);
    expect(dry.stderr).toMatch(refused);
    const clusterScoped: Resource = {
      group: 'plugin.kubevirt.io',
      version: 'v1alpha1',
      plural: 'plugins',
      namespaced: false,
    };
    await expect(
      api.create(clusterScoped, undefined, {
        apiVersion: 'plugin.kubevirt.io/v1alpha1',
        kind: 'Plugin',
        metadata: { name: 'plugin' },
        spec: {},
      } as KubeObject),
    ).rejects.toThrow(/Plugin \(plugin\.kubevirt\.io\): not implemented by kubevirt-ts/);
  });

  it('kubevirt.io/v1alpha3 is served for VMs and validated as v1 (matchPolicy Equivalent)', async () => {
    const vms = { ...VMS, version: 'v1alpha3' };
    await expect(
      api.create(vms, NS, { ...badVm, apiVersion: 'kubevirt.io/v1alpha3' } as unknown as KubeObject),
    ).rejects.toThrow(/running and runStrategy are mutually exclusive/);
    const list = await api.list<KubeObject>(vms, NS);
    expect(list.items.map((o) => o.apiVersion)).toEqual(list.items.map(() => 'kubevirt.io/v1alpha3'));
  });

  it('failurePolicy Fail: with the webhook down, kubevirt objects are refused', async () => {
    await hooks.hook.close();
    await expect(
      api.create<Vm>(VMS, NS, {
        ...badVm,
        metadata: { name: 'nohook', namespace: NS },
        spec: {
          running: false,
          template: { spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } } } },
        },
      } as unknown as Vm),
    ).rejects.toThrow(/failed calling webhook/);
  });
});
