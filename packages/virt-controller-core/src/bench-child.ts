// The controller process of `npm run bench:controller`: a VirtController alone (no bench driver in the
// process) over the bench's objects; once its caches hold them and its queues are idle it prints its
// memory (after a GC: run with --expose-gc) as JSON on stdout and exits.
//   node --expose-gc dist/bench-child.js KUBECONFIG N
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { createLogger } from '@kubevirt-ts/log';
import { VirtController } from './manager.js';

const [kubeconfig, n] = process.argv.slice(2) as [string, string];
const N = Number(n);
const kc = new KubeConfig();
kc.loadFromFile(kubeconfig);
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
const mib = (x: number) => +(x / 2 ** 20).toFixed(1);
process.stdout.write(
  `${JSON.stringify({ rssMiB: mib(m.rss), heapUsedMiB: mib(m.heapUsed), heapTotalMiB: mib(m.heapTotal), writes: c.client.writes })}\n`,
);
await c.stop();
process.exit(0);
