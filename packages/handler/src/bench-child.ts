// The handler process of the benchmark: a Handler (this package) with the given dirs; prints its
// /metrics address on stdout, stops on SIGTERM. Kept apart so its RSS is the handler's alone.
// the kubeconfig as apps/virt-handler reads it (LiteKubeConfig: no @kubernetes/client-node in the process)
import { LiteKubeConfig } from '@kubevirt-ts/controller-runtime';
import { createLogger } from '@kubevirt-ts/log';
import { Handler } from './handler.js';

const [kubeconfig, podsDir, handlerDir, nodeName] = process.argv.slice(2) as [string, string, string, string];
const kc = LiteKubeConfig.fromFile(kubeconfig);
const h = new Handler({
  kubeConfig: kc,
  nodeName,
  podsDir,
  handlerDir,
  launcherUid: process.getuid?.() ?? 0,
  httpPort: 0,
  resyncIntervalMs: 5000,
  logger: createLogger({ component: 'virt-handler', level: 'error' }),
});
await h.start();
process.stdout.write(`${h.httpAddress}\n`);
process.on('SIGTERM', () => void h.stop().then(() => process.exit(0)));
// SIGUSR2: where the memory is (the bench asks before it reads the RSS)
process.on('SIGUSR2', () => {
  (globalThis as { gc?: () => void }).gc?.();
  const m = process.memoryUsage();
  const mib = (n: number) => +(n / 2 ** 20).toFixed(1);
  process.stderr.write(
    `${JSON.stringify({ rssMiB: mib(m.rss), heapUsedMiB: mib(m.heapUsed), heapTotalMiB: mib(m.heapTotal), externalMiB: mib(m.external), arrayBuffersMiB: mib(m.arrayBuffers) })}\n`,
  );
});
