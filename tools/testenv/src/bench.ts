// Benchmark: control-plane start and stop times (real etcd + kube-apiserver). Prints numbers; asserts nothing.
//   npm run bench -w @kubevirt-ts/testenv [-- RUNS]
import { CoreV1Api } from '@kubernetes/client-node';
import { startTestEnv } from './index.js';

const runs = Number(process.argv[2] ?? 3);
const starts: number[] = [];
const stops: number[] = [];
for (let i = 0; i < runs; i++) {
  const env = await startTestEnv();
  starts.push(env.startupMs);
  const core = env.kubeConfig().makeApiClient(CoreV1Api);
  const t = Date.now();
  for (let j = 0; j < 100; j++) await core.createNamespace({ body: { metadata: { name: `bench-${j}` } } });
  const createMs = Date.now() - t;
  const s = Date.now();
  await env.stop();
  stops.push(Date.now() - s);
  console.log(
    `run ${i + 1}: ready in ${env.startupMs} ms, 100 sequential namespace creates in ${createMs} ms, stopped in ${stops[i]} ms`,
  );
}
const med = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
console.log(`testenv: median start ${med(starts)} ms, median stop ${med(stops)} ms over ${runs} runs`);
