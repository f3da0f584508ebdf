// The controller process of `npm run bench:controller`: a VirtController alone (no bench driver in the
// process) over the bench's objects; once its caches hold them and its queues are idle it prints its
// memory (after a GC: run with --expose-gc) as JSON on stdout and exits.
//   node --expose-gc dist/bench-child.js KUBECONFIG N
import { setTimeout as sleep } from 'node:timers/promises';
import { LiteKubeConfig } from '@kubevirt-ts/controller-runtime';
import { createLogger } from '@kubevirt-ts/log';
import { VirtController } from './manager.js';

const [kubeconfig, n] = process.argv.slice(2) as [string, string];
const N = Number(n);
const kc = LiteKubeConfig.fromFile(kubeconfig);
const c = new VirtController({
  kubeConfig: kc,
  rendererConfig: { launcherImage: 'localhost/kubevirt-ts/virt-launcher:bench', useEmulation: true },
  log: createLogger({ component: 'virt-controller', level: 'error' }),
});
await c.start();
while (c.ctx.vmis.list('bench').length < N || c.ctx.pods.list('bench').length < N) await sleep(100);
while (c.ctx.vmiQueue.len() + c.ctx.vmiQueue.inFlight() + c.ctx.vmQueue.len() > 0) await sleep(100);
await sleep(1000);
(globalThis as { gc?: () => void }).gc?.();
const m = process.memoryUsage();
if (process.env['KVTS_BENCH_SMAPS']) {
  // where the RSS is: the largest mappings (anonymous ones grouped), on stderr
  const { readFileSync } = await import('node:fs');
  const by = new Map<string, number>();
  let cur = '';
  for (const line of readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    const h = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (h) cur = h[1] || '[anon]';
    const r = /^Rss:\s+(\d+) kB/.exec(line);
    if (r) by.set(cur, (by.get(cur) ?? 0) + Number(r[1]));
  }
  const top = [...by].sort((a, b) => b[1] - a[1]).slice(0, 8);
  process.stderr.write(`${top.map(([k, v]) => `${(v / 1024).toFixed(1)} MiB ${k}`).join('\n')}\n`);
}
if (process.env['KVTS_BENCH_HEAPSNAPSHOT']) {
  // what the live heap holds: a snapshot for DevTools (Memory tab) or any heap-snapshot reader
  const { writeHeapSnapshot } = await import('node:v8');
  process.stderr.write(`heap snapshot: ${writeHeapSnapshot(process.env['KVTS_BENCH_HEAPSNAPSHOT'])}\n`);
}
const mib = (x: number) => +(x / 2 ** 20).toFixed(1);
process.stdout.write(
  `${JSON.stringify({ rssMiB: mib(m.rss), heapUsedMiB: mib(m.heapUsed), heapTotalMiB: mib(m.heapTotal), writes: c.client.writes })}\n`,
);
await c.stop();
process.exit(0);
