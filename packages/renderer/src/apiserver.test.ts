// Integration suite against a real kube-apiserver + etcd (tools/testenv): the CRDs from deploy/crds are
// installed, every reference VMI (and the same VMI wrapped in a VirtualMachine) is created through the
// server, schema-invalid objects are rejected by it, and the launcher Pod rendered for each VMI is
// accepted by the server, under the "restricted" Pod Security Standard where the VMI allows it.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1Pod,
} from '@kubernetes/client-node';
import {
  parseManifests,
  parseQuantity,
  setVirtualMachineInstanceDefaults,
  type VirtualMachineInstance,
} from '@kubevirt-ts/api';
import { serverSideApply, startTestEnv, type KubeObject, type TestEnv } from '@kubevirt-ts/testenv';
import { renderLaunchPod } from './index.js';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const crdDir = join(repoRoot, 'deploy', 'crds');
// the converter's reference VMIs (packages/converter/test-fixtures/README.md)
const refDir = join(repoRoot, 'packages', 'converter', 'test-fixtures', 'reference');
const references = readdirSync(refDir)
  .filter((f) => f.endsWith('.yaml'))
  .sort()
  .map((f) => ({
    file: f,
    vmi: parseManifests(readFileSync(join(refDir, f), 'utf8'))[0] as VirtualMachineInstance,
  }));

let env: TestEnv;
let kc: KubeConfig;
let core: CoreV1Api;
let custom: CustomObjectsApi;
const GROUP = 'kubevirt.io';
const VERSION = 'v1';

/** the error body a rejected request got, as text (client-node's ApiException) */
function errorOf(e: unknown): { code: number; body: string } {
  const err = e as { code?: number; body?: unknown; message?: string };
  let body = typeof err.body === 'string' ? err.body : JSON.stringify(err.body ?? err.message);
  try {
    body = (JSON.parse(body) as { message?: string }).message ?? body; // the Status message
  } catch {
    /* not JSON */
  }
  return { code: err.code ?? 0, body };
}

/** resources as numbers, so "1024Mi" and the server's canonical "1Gi" compare equal */
function numeric(r: { requests?: Record<string, string>; limits?: Record<string, string> } | undefined) {
  const conv = (l?: Record<string, string>) =>
    Object.fromEntries(Object.entries(l ?? {}).map(([k, v]) => [k, parseQuantity(v)]));
  return { requests: conv(r?.requests), limits: conv(r?.limits) };
}

async function expectRejected(p: Promise<unknown>): Promise<{ code: number; body: string }> {
  try {
    await p;
  } catch (e) {
    return errorOf(e);
  }
  throw new Error('the API server accepted an object it should have rejected');
}

async function ensureNamespace(name: string, labels: Record<string, string> = {}): Promise<void> {
  try {
    await core.createNamespace({ body: { metadata: { name, labels } } });
  } catch (e) {
    if (errorOf(e).code !== 409) throw e;
  }
}

beforeAll(async () => {
  env = await startTestEnv();
  kc = env.kubeConfig();
  core = kc.makeApiClient(CoreV1Api);
  custom = kc.makeApiClient(CustomObjectsApi);
  const files = readdirSync(crdDir).filter((f) => f.endsWith('.yaml'));
  expect(files.length).toBeGreaterThanOrEqual(3);
  // server-side apply, waiting for each CRD to be Established (raw manifests: see testenv's apply.ts)
  const crds = files.flatMap((f) => parseManifests(readFileSync(join(crdDir, f), 'utf8')) as KubeObject[]);
  await serverSideApply(kc, crds, { fieldManager: 'renderer-test' });
  // launcher Pods of ordinary VMIs must pass the "restricted" Pod Security Standard
  await ensureNamespace('restricted', { 'pod-security.kubernetes.io/enforce': 'restricted' });
  await ensureNamespace('privileged', { 'pod-security.kubernetes.io/enforce': 'privileged' });
}, 120000);

afterAll(async () => {
  await env?.stop();
});

describe('CRDs from deploy/crds on a real kube-apiserver', () => {
  it('serves VirtualMachine, VirtualMachineInstance and VirtualMachineInstanceMigration (and every CRD of deploy/crds)', async () => {
    const ext = kc.makeApiClient(ApiextensionsV1Api);
    const names = (await ext.listCustomResourceDefinition()).items.map((c) => c.metadata!.name).sort();
    expect(names).toEqual(
      expect.arrayContaining([
        'kubevirts.kubevirt.io',
        'virtualmachineinstancemigrations.kubevirt.io',
        'virtualmachineinstances.kubevirt.io',
        'virtualmachines.kubevirt.io',
      ]),
    );
    expect(names.length).toBe(readdirSync(crdDir).filter((f) => f.endsWith('.yaml')).length);
  });

  it.each(references.map((r) => [r.file, r.vmi] as const))(
    'accepts reference VMI %s (and keeps its spec)',
    async (_file, vmi) => {
      const ns = 'refs';
      await ensureNamespace(ns);
      const body = { ...vmi, metadata: { ...vmi.metadata, namespace: ns } };
      const created = (await custom.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: ns,
        plural: 'virtualmachineinstances',
        body,
        fieldValidation: 'Strict',
      })) as VirtualMachineInstance;
      expect(created.metadata.uid).toBeTruthy();
      // nothing pruned: the schema knows every field the reference uses
      expect(created.spec).toEqual(vmi.spec);
    },
  );

  it.each(references.map((r) => [r.file, r.vmi] as const))(
    'accepts reference VMI %s wrapped in a VirtualMachine',
    async (_file, vmi) => {
      const ns = 'refs-vm';
      await ensureNamespace(ns);
      const vm = {
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachine',
        metadata: { name: vmi.metadata.name, namespace: ns },
        spec: {
          runStrategy: 'Halted',
          template: { metadata: { labels: { 'kubevirt.io/vm': vmi.metadata.name! } }, spec: vmi.spec },
        },
      };
      const created = (await custom.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: ns,
        plural: 'virtualmachines',
        body: vm,
        fieldValidation: 'Strict',
      })) as { spec: { template: { spec: unknown } } };
      expect(created.spec.template.spec).toEqual(vmi.spec);
    },
  );

  describe('rejects schema-invalid objects', () => {
    const base = references[0]!.vmi;
    const cases: [string, (v: VirtualMachineInstance) => unknown, RegExp][] = [
      [
        'missing spec.domain',
        (v) => ({ ...v, spec: { ...v.spec, domain: undefined } }),
        /spec\.domain: Required value/,
      ],
      [
        'negative cores',
        (v) => ({ ...v, spec: { ...v.spec, domain: { ...v.spec.domain, cpu: { cores: -1 } } } }),
        /spec\.domain\.cpu\.cores/,
      ],
      [
        'disks not an array',
        (v) => ({ ...v, spec: { ...v.spec, domain: { ...v.spec.domain, devices: { disks: 'root' } } } }),
        /spec\.domain\.devices\.disks/,
      ],
      [
        'unknown disk cache mode',
        (v) => ({
          ...v,
          spec: {
            ...v.spec,
            domain: { ...v.spec.domain, devices: { disks: [{ name: 'a', cache: 'bogus' }] } },
          },
        }),
        /spec\.domain\.devices\.disks\[0\]\.cache/,
      ],
      [
        'unknown field (strict field validation)',
        (v) => ({ ...v, spec: { ...v.spec, domian: {} } }),
        /unknown field "spec\.domian"/,
      ],
    ];
    it.each(cases)('%s', async (_what, mutate, message) => {
      const body = mutate({ ...base, metadata: { name: 'invalid', namespace: 'default' } });
      const r = await expectRejected(
        custom.createNamespacedCustomObject({
          group: GROUP,
          version: VERSION,
          namespace: 'default',
          plural: 'virtualmachineinstances',
          body,
          fieldValidation: 'Strict',
        }),
      );
      expect([400, 422]).toContain(r.code);
      expect(r.body).toMatch(message);
    });
  });
});

describe('rendered launcher Pods on a real kube-apiserver', () => {
  /** VMIs whose Pod cannot be "restricted": hostPath (hostDisk) volumes */
  const needsPrivilegedNamespace = (v: VirtualMachineInstance): boolean =>
    (v.spec.volumes ?? []).some((x) => x.hostDisk);

  it.each(references.map((r) => [r.file, r.vmi] as const))(
    'accepts the launcher Pod of %s',
    async (_file, vmi) => {
      const ns = needsPrivilegedNamespace(vmi) ? 'privileged' : 'restricted';
      const created = (await custom.createNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace: ns,
        plural: 'virtualmachineinstances',
        body: setVirtualMachineInstanceDefaults({ ...vmi, metadata: { ...vmi.metadata, namespace: ns } }),
      })) as VirtualMachineInstance;
      for (const useEmulation of [true, false]) {
        const pod = renderLaunchPod(created, {
          launcherImage: 'registry.example.com/kubevirt-ts/virt-launcher:0.1.0',
          useEmulation,
          featureGates: ['HostDisk'],
        });
        const got: V1Pod = await core.createNamespacedPod({
          namespace: ns,
          body: pod,
          fieldValidation: 'Strict',
        });
        expect(got.metadata!.name).toMatch(new RegExp(`^virt-launcher-${vmi.metadata.name}-[a-z0-9]{5}$`));
        expect(got.metadata!.ownerReferences![0]!.uid).toBe(created.metadata.uid);
        // the server kept what we asked for (nothing dropped or rewritten)
        expect(got.spec!.containers.map((c) => numeric(c.resources))).toEqual(
          pod.spec!.containers.map((c) => numeric(c.resources)),
        );
        expect(got.spec!.volumes!.map((v) => v.name)).toEqual(pod.spec!.volumes!.map((v) => v.name));
      }
    },
  );

  it('accepts a Pod exercising every volume kind, hugepages, dedicated CPUs, GPUs and kernel boot', async () => {
    const vmi: VirtualMachineInstance = setVirtualMachineInstanceDefaults({
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstance',
      metadata: { name: 'everything', namespace: 'privileged' },
      spec: {
        hostname: 'every-thing',
        readinessProbe: { httpGet: { port: 8080, path: '/ready' }, periodSeconds: 5 },
        livenessProbe: { tcpSocket: { port: 22 }, initialDelaySeconds: 30 },
        subdomain: 'vms',
        nodeSelector: { 'node-role.kubernetes.io/worker': '' },
        tolerations: [{ key: 'vms', operator: 'Exists', effect: 'NoSchedule' }],
        affinity: {
          nodeAffinity: {
            preferredDuringSchedulingIgnoredDuringExecution: [
              { weight: 1, preference: { matchExpressions: [{ key: 'ssd', operator: 'Exists' }] } },
            ],
          },
        },
        domain: {
          cpu: { cores: 2, dedicatedCpuPlacement: true, isolateEmulatorThread: true },
          memory: { hugepages: { pageSize: '2Mi' } },
          resources: { requests: { memory: '1Gi' } },
          firmware: {
            bootloader: { efi: { secureBoot: false } },
            kernelBoot: {
              kernelArgs: 'console=ttyS0',
              container: { image: 'example.com/k:1', kernelPath: '/boot/vmlinuz' },
            },
          },
          devices: {
            tpm: {},
            autoattachVSOCK: true,
            gpus: [{ name: 'g', deviceName: 'nvidia.com/GP100' }],
            disks: [
              { name: 'cd' },
              { name: 'pvc' },
              { name: 'dv' },
              { name: 'eph' },
              { name: 'host' },
              { name: 'cm' },
              { name: 'sec' },
              { name: 'dapi' },
              { name: 'ci' },
              { name: 'sa' },
            ],
            interfaces: [{ name: 'default', passt: {} }],
          },
        },
        networks: [{ name: 'default', pod: {} }],
        volumes: [
          { name: 'cd', containerDisk: { image: 'example.com/disk:1', imagePullSecret: 'regcred' } },
          { name: 'pvc', persistentVolumeClaim: { claimName: 'claim' } },
          { name: 'dv', dataVolume: { name: 'blockdv' } },
          { name: 'eph', ephemeral: { persistentVolumeClaim: { claimName: 'golden' } } },
          { name: 'host', hostDisk: { path: '/var/lib/vm/disk.img', type: 'Disk' } },
          { name: 'cm', configMap: { name: 'cfg' } },
          { name: 'sec', secret: { secretName: 'sec' } },
          {
            name: 'dapi',
            downwardAPI: { fields: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }] },
          },
          {
            name: 'ci',
            cloudInitNoCloud: { secretRef: { name: 'ud' }, networkDataSecretRef: { name: 'nd' } },
          },
          { name: 'sa', serviceAccount: { serviceAccountName: 'robot' } },
        ],
      },
    } as VirtualMachineInstance);
    const created = (await custom.createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace: 'privileged',
      plural: 'virtualmachineinstances',
      body: vmi,
      fieldValidation: 'Strict',
    })) as VirtualMachineInstance;
    const pod = renderLaunchPod(
      created,
      { launcherImage: 'example.com/launcher:1', featureGates: ['HostDisk'] },
      { blockdv: { volumeMode: 'Block' } },
    );
    const got = await core.createNamespacedPod({
      namespace: 'privileged',
      body: pod,
      fieldValidation: 'Strict',
    });
    const c = got.spec!.containers[0]!;
    expect(c.resources!.limits!['hugepages-2Mi']).toBe('1Gi'); // the server normalizes 1024Mi to 1Gi
    expect(c.resources!.limits!['nvidia.com/GP100']).toBe('1');
    expect(c.volumeDevices).toEqual([{ name: 'dv', devicePath: '/dev/dv' }]);
    expect(got.spec!.containers.map((x) => x.name)).toEqual(['compute', 'volumecd', 'kernel-boot']);
    expect(got.status?.qosClass).toBe('Guaranteed');
    expect(c.readinessProbe!.httpGet!.port).toBe(8080);
    expect(c.livenessProbe!.tcpSocket!.port).toBe(22);
  });

  it('the restricted Pod Security Standard rejects what it should (the namespace label is enforced)', async () => {
    const vmi = setVirtualMachineInstanceDefaults({
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstance',
      metadata: { name: 'hosty', namespace: 'restricted', uid: '00000000-0000-4000-8000-000000000001' },
      spec: {
        domain: { resources: { requests: { memory: '64Mi' } }, devices: { disks: [{ name: 'h' }] } },
        volumes: [{ name: 'h', hostDisk: { path: '/data/x.img', type: 'Disk' } }],
      },
    } as VirtualMachineInstance);
    const r = await expectRejected(
      core.createNamespacedPod({
        namespace: 'restricted',
        body: renderLaunchPod(vmi, { launcherImage: 'x:1', featureGates: ['HostDisk'] }),
      }),
    );
    expect(r.code).toBe(403);
    expect(r.body).toMatch(/violates PodSecurity "restricted.*"hostPath"/);
  });
});
