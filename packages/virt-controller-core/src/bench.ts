// npm run bench:controller [-- N]: N VMIs -> launcher Pods against testenv's real kube-apiserver.
// - raw: N rendered launcher Pods created by the same client with 10 requests in flight (the VMI
//   controller's worker count): the Pod-create rate the API server allows this client;
// - controller: N VMIs created beforehand, then the controller starts; time until every VMI has its
//   Pod (Pods/s, and as % of raw); the bench then plays the kubelet (bind + run every Pod) and counts
//   the controller's API writes per VMI from create to Scheduled; RSS of this process (controller +
//   bench driver + client caches) at the end.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseManifests } from '@kubevirt-ts/api';
import { KubeClient, PODS, type KubeObject } from '@kubevirt-ts/controller-runtime';
import { createLogger } from '@kubevirt-ts/log';
import { renderLaunchPod } from '@kubevirt-ts/renderer';
import { serverSideApply, startTestEnv, type KubeObject as TestObject } from '@kubevirt-ts/testenv';
import { VMIS, nowTimestamp, type Vmi } from './common.js';
import type { Pod } from './context.js';
import { VirtController } from './manager.js';

const N = Number(process.argv[2] ?? 1000);
const CONCURRENCY = 10;
const RENDERER = { launcherImage: 'localhost/kubevirt-ts/virt-launcher:bench', useEmulation: true };
const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function pool<T>(items: T[], n: number, fn: (x: T) => Promise<unknown>): Promise<void> {
  let i = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (i < items.length) await fn(items[i++]!);
    }),
  );
}
const vmiOf = (ns: string, i: number): Vmi =>
  ({
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: `bench-${i}`, namespace: ns },
    spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } } },
  }) as Vmi;

const env = await startTestEnv();
const out: Record<string, unknown> = { vmis: N };
try {
  const kc = env.kubeConfig();
  const api = new KubeClient(kc);
  const crdDir = join(repoRoot, 'deploy', 'crds');
  await serverSideApply(
    kc,
    readdirSync(crdDir)
      .filter((f) => f.endsWith('.yaml'))
      .flatMap((f) => parseManifests(readFileSync(join(crdDir, f), 'utf8')) as TestObject[]),
    { fieldManager: 'bench' },
  );
  const NSR = { group: '', version: 'v1', plural: 'namespaces', namespaced: false };
  for (const name of ['bench-raw', 'bench'])
    await api.create(NSR, undefined, {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name },
    } as KubeObject);

  // raw Pod-create rate of the same client
  const rawPods = Array.from({ length: N }, (_, i) => {
    const v = vmiOf('bench-raw', i);
    v.metadata.uid = `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
    return renderLaunchPod(v, RENDERER) as Pod;
  });
  const rawClient = new KubeClient(kc);
  let t = performance.now();
  await pool(rawPods, CONCURRENCY, (p) => rawClient.create(PODS, 'bench-raw', p));
  const rawSec = (performance.now() - t) / 1000;
  out['rawPodsPerSecond'] = +(N / rawSec).toFixed(1);
  rawClient.close();

  // the controller: N VMIs waiting, then start
  await pool(
    Array.from({ length: N }, (_, i) => i),
    CONCURRENCY,
    (i) => api.create(VMIS, 'bench', vmiOf('bench', i)),
  );
  const controller = new VirtController({
    kubeConfig: kc,
    rendererConfig: RENDERER,
    log: createLogger({ component: 'virt-controller', level: 'warn' }),
  });
  t = performance.now();
  await controller.start();
  for (;;) {
    if (controller.ctx.pods.list('bench').length >= N) break;
    await sleep(20);
  }
  const ctrlSec = (performance.now() - t) / 1000;
  out['controllerPodsPerSecond'] = +(N / ctrlSec).toFixed(1);
  out['controllerVsRaw'] = `${((rawSec / ctrlSec) * 100).toFixed(0)}%`;

  // the kubelet runs every Pod; count the controller's writes until every VMI is Scheduled
  for (;;) {
    const pending = controller.ctx.vmis.list('bench').filter((v) => v.status?.phase !== 'Scheduling');
    if (pending.length === 0) break;
    await sleep(50);
  }
  const pods = (await api.list<Pod>(PODS, 'bench')).items;
  await pool(pods, CONCURRENCY, async (p) => {
    const name = p.metadata!.name!;
    await api.request('POST', `/api/v1/namespaces/bench/pods/${name}/binding`, {
      apiVersion: 'v1',
      kind: 'Binding',
      metadata: { name },
      target: { apiVersion: 'v1', kind: 'Node', name: 'node01' },
    });
    await api.patch(
      PODS,
      'bench',
      name,
      {
        status: {
          phase: 'Running',
          containerStatuses: [
            {
              name: 'compute',
              ready: true,
              restartCount: 0,
              image: RENDERER.launcherImage,
              imageID: '',
              state: { running: { startedAt: nowTimestamp() } },
            },
          ],
        },
      },
      'merge',
      'status',
    );
  });
  for (;;) {
    const v = controller.ctx.vmis.list('bench');
    if (v.every((x) => x.status?.phase === 'Scheduled' && x.metadata.labels?.['kubevirt.io/nodeName'])) break;
    await sleep(50);
  }
  await sleep(1000); // let any trailing write land before counting
  out['controllerWritesPerVmiToScheduled'] = +(controller.client.writes / N).toFixed(2);
  out['controllerWritesByVerb'] = controller.client.writesByVerb;
  const mem = process.memoryUsage();
  out['rssMiB'] = +(mem.rss / 2 ** 20).toFixed(1);
  out['heapUsedMiB'] = +(mem.heapUsed / 2 ** 20).toFixed(1);
  await controller.stop();
  api.close();
} finally {
  await env.stop();
}
console.log(JSON.stringify(out, null, 2));
