// Property test against a real kube-apiserver: for generated VMIs (compute, memory, volumes, networks,
// placement in many combinations) renderLaunchPod either names a bad field or produces a Pod the
// server accepts (server-side dry run), with QoS Guaranteed exactly when the VMI asks for it.
import fc from 'fast-check';
import { CoreV1Api } from '@kubernetes/client-node';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { startTestEnv, type TestEnv } from '@kubevirt-ts/testenv';
import { renderLaunchPod, RenderError } from './index.js';

let env: TestEnv;
let core: CoreV1Api;
beforeAll(async () => {
  env = await startTestEnv();
  core = env.kubeConfig().makeApiClient(CoreV1Api);
  await core.createNamespace({
    body: { metadata: { name: 'fuzz', labels: { 'pod-security.kubernetes.io/enforce': 'privileged' } } },
  });
}, 120000);
afterAll(async () => {
  await env?.stop();
});

const dnsLabel = fc.stringMatching(/^[a-z]([a-z0-9-]{0,14}[a-z0-9])?$/);
const volumeKinds = [
  (n: string) => ({ name: n, containerDisk: { image: `example.com/${n}:1` } }),
  (n: string) => ({ name: n, persistentVolumeClaim: { claimName: `claim-${n}` } }),
  (n: string) => ({ name: n, dataVolume: { name: `dv-${n}` } }),
  (n: string) => ({ name: n, ephemeral: { persistentVolumeClaim: { claimName: `golden-${n}` } } }),
  (n: string) => ({ name: n, emptyDisk: { capacity: '1Gi' } }),
  (n: string) => ({
    name: n,
    hostDisk: { path: `/var/lib/vms/${n}/disk.img`, type: 'DiskOrCreate', capacity: '1Gi' },
  }),
  (n: string) => ({ name: n, configMap: { name: `cm-${n}` } }),
  (n: string) => ({ name: n, secret: { secretName: `s-${n}` } }),
  (n: string) => ({
    name: n,
    cloudInitNoCloud: { secretRef: { name: `ud-${n}` }, networkDataSecretRef: { name: `nd-${n}` } },
  }),
  (n: string) => ({ name: n, cloudInitConfigDrive: { userData: '#cloud-config\n' } }),
];

const vmiArb = fc
  .record({
    name: dnsLabel,
    memMi: fc.integer({ min: 1, max: 64 }).map((n) => n * 64),
    cores: fc.integer({ min: 1, max: 4 }),
    sockets: fc.integer({ min: 1, max: 2 }),
    threads: fc.integer({ min: 1, max: 2 }),
    dedicated: fc.boolean(),
    guaranteed: fc.boolean(),
    hugepages: fc.boolean(),
    cpuRequest: fc.option(
      fc.integer({ min: 1, max: 4000 }).map((m) => `${m}m`),
      { nil: undefined },
    ),
    volumes: fc.uniqueArray(fc.integer({ min: 0, max: volumeKinds.length - 1 }), { maxLength: 6 }),
    binding: fc.constantFrom('masquerade', 'bridge', 'passt', 'none', 'auto'),
    model: fc.constantFrom('virtio', 'e1000'),
    graphics: fc.boolean(),
    tpm: fc.boolean(),
    efi: fc.boolean(),
    grace: fc.option(fc.integer({ min: 0, max: 600 }), { nil: undefined }),
    nodeSelector: fc.dictionary(dnsLabel, dnsLabel, { maxKeys: 3 }),
    useEmulation: fc.boolean(),
  })
  .map((g): { vmi: VirtualMachineInstance; useEmulation: boolean; wantGuaranteed: boolean } => {
    const volumes = g.volumes.map((k, i) => volumeKinds[k]!(`vol${i}`));
    const interfaces =
      g.binding === 'none' || g.binding === 'auto'
        ? undefined
        : [{ name: 'default', model: g.model, [g.binding]: {} }];
    const guaranteed = g.guaranteed && !g.dedicated;
    const vmi = {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstance',
      metadata: { name: g.name, namespace: 'fuzz', uid: '00000000-0000-4000-8000-00000000f022' },
      spec: {
        terminationGracePeriodSeconds: g.grace,
        nodeSelector: g.nodeSelector,
        domain: {
          cpu: { cores: g.cores, sockets: g.sockets, threads: g.threads, dedicatedCpuPlacement: g.dedicated },
          memory: g.hugepages ? { hugepages: { pageSize: '2Mi' } } : undefined,
          resources: guaranteed
            ? { requests: { memory: `${g.memMi}Mi`, cpu: '2' }, limits: { memory: `${g.memMi}Mi`, cpu: '2' } }
            : { requests: { memory: `${g.memMi}Mi`, ...(g.cpuRequest ? { cpu: g.cpuRequest } : {}) } },
          firmware: g.efi ? { bootloader: { efi: { secureBoot: false } } } : undefined,
          devices: {
            autoattachGraphicsDevice: g.graphics,
            autoattachPodInterface: g.binding !== 'none',
            ...(g.tpm ? { tpm: {} } : {}),
            ...(interfaces ? { interfaces } : {}),
            disks: volumes.map((v) => ({ name: v.name })),
          },
        },
        ...(interfaces ? { networks: [{ name: 'default', pod: {} }] } : {}),
        volumes,
      },
    } as unknown as VirtualMachineInstance;
    return {
      vmi: JSON.parse(JSON.stringify(vmi)) as VirtualMachineInstance,
      useEmulation: g.useEmulation,
      wantGuaranteed: g.dedicated || guaranteed,
    };
  });

it('every generated VMI renders to a Pod the API server accepts, Guaranteed exactly when asked', async () => {
  let accepted = 0;
  await fc.assert(
    fc.asyncProperty(vmiArb, async ({ vmi, useEmulation, wantGuaranteed }) => {
      let pod;
      try {
        pod = renderLaunchPod(vmi, {
          launcherImage: 'example.com/launcher:1',
          useEmulation,
          featureGates: ['HostDisk'],
        });
      } catch (e) {
        if (e instanceof RenderError) return; // a named bad field is an acceptable answer
        throw e;
      }
      const got = await core.createNamespacedPod({
        namespace: 'fuzz',
        body: pod,
        dryRun: 'All',
        fieldValidation: 'Strict',
      });
      expect(got.status?.qosClass === 'Guaranteed').toBe(wantGuaranteed);
      accepted++;
    }),
    { numRuns: 60, seed: Number(process.env.FC_SEED ?? 20261121) },
  );
  expect(accepted).toBeGreaterThan(40); // the generator mostly produces valid VMIs
}, 120000);
