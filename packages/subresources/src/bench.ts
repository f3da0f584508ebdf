// Benchmark: subresource calls through a real kube-apiserver's aggregation layer (testenv), as virtctl makes
// them. Prints per-call latency (p50/p95/max) and calls per second for start/stop pairs on one VM and for
// refused calls (409, no write), and the SubjectAccessReviews behind them. Usage: npm run bench -- [N]
import { KubeClient } from '@kubevirt-ts/controller-runtime';
import { startTestEnv } from '@kubevirt-ts/testenv';
import { startAggregatedTestApi } from './testing.js';

const n = Number(process.argv[2] ?? 200);
const env = await startTestEnv();
try {
  const api = await startAggregatedTestApi(env);
  const admin: KubeClient = api.client;
  await admin.request('POST', '/apis/kubevirt.io/v1/namespaces/default/virtualmachines', {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachine',
    metadata: { name: 'bench' },
    spec: { running: false, template: { spec: { domain: { devices: {} } } } },
  });
  const base = '/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachines/bench';
  const measure = async (label: string, fn: (i: number) => Promise<unknown>) => {
    const ms: number[] = [];
    const t0 = performance.now();
    for (let i = 0; i < n; i++) {
      const t = performance.now();
      await fn(i);
      ms.push(performance.now() - t);
    }
    const total = performance.now() - t0;
    ms.sort((a, b) => a - b);
    const q = (p: number) => ms[Math.min(ms.length - 1, Math.floor(p * ms.length))]!.toFixed(1);
    console.log(
      `${label}: ${n} calls, ${((n * 1000) / total).toFixed(0)}/s, p50 ${q(0.5)} ms, p95 ${q(0.95)} ms, max ${ms[ms.length - 1]!.toFixed(1)} ms`,
    );
  };
  await measure('start/stop alternating (202, one VM patch each)', (i) =>
    admin.request('PUT', `${base}/${i % 2 === 0 ? 'start' : 'stop'}`, {}),
  );
  await measure('stop of a stopped VM (409, no write)', () =>
    admin.request('PUT', `${base}/stop`, {}).then(
      () => {
        throw new Error('expected 409');
      },
      () => undefined,
    ),
  );
  await measure('version (no authorization)', () =>
    admin.request('GET', '/apis/subresources.kubevirt.io/v1/version'),
  );
  await api.stop();
} finally {
  await env.stop();
}
