// npm run bench (root: npm run bench:cmd): Ping round trips between CmdClient and CmdServer over a
// real unix socket. Prints sequential latency (p50/p99) and throughput with many calls in flight.
// Options: --calls N (sequential pings, default 5000), --seconds S (throughput run, default 3),
// --concurrency C (calls in flight, default 64).
import { CmdClient } from './cmd-client.js';
import { CmdServer } from './cmd-server.js';
import { launcherSocketPath } from './sockets.js';
import { quietLogger, sampleVmi, tempDir } from './test-util.js';

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return dflt;
  const v = Number(process.argv[i + 1]);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`--${name}: must be a positive number`);
  return v;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

async function main(): Promise<void> {
  const calls = arg('calls', 5000);
  const seconds = arg('seconds', 3);
  const concurrency = arg('concurrency', 64);
  const { dir, cleanup } = await tempDir('kvts-bench-');
  const server = new CmdServer({
    socketsDir: dir,
    backend: { syncVMI: async () => undefined },
    logger: quietLogger,
  });
  await server.start();
  await server.ready();
  const client = await CmdClient.connect(launcherSocketPath(dir));
  try {
    for (let i = 0; i < 500; i++) await client.ping(); // warm up (JIT, HTTP/2 windows)

    const lat: number[] = [];
    for (let i = 0; i < calls; i++) {
      const t0 = process.hrtime.bigint();
      await client.ping();
      lat.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    lat.sort((a, b) => a - b);

    let done = 0;
    const end = Date.now() + seconds * 1000;
    const t0 = process.hrtime.bigint();
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (Date.now() < end) {
          await client.ping();
          done++;
        }
      }),
    );
    const elapsed = Number(process.hrtime.bigint() - t0) / 1e9;

    // SyncVirtualMachine with a small VMI and a no-op backend: JSON + validation on the server.
    const vmi = sampleVmi('bench') as never;
    const syncCalls = Math.max(1, Math.floor(calls / 5));
    for (let i = 0; i < 100; i++) await client.syncVMI(vmi);
    const syncLat: number[] = [];
    for (let i = 0; i < syncCalls; i++) {
      const s0 = process.hrtime.bigint();
      await client.syncVMI(vmi);
      syncLat.push(Number(process.hrtime.bigint() - s0) / 1e6);
    }
    syncLat.sort((a, b) => a - b);

    console.log(`cmd-protocol Ping over a unix socket (node ${process.version}, ${calls} sequential calls)`);
    console.log(`  latency p50: ${percentile(lat, 50).toFixed(3)} ms`);
    console.log(`  latency p99: ${percentile(lat, 99).toFixed(3)} ms`);
    console.log(`  sequential:  ${(calls / (lat.reduce((a, b) => a + b, 0) / 1000)).toFixed(0)} calls/s`);
    console.log(
      `  concurrent:  ${(done / elapsed).toFixed(0)} calls/s (${concurrency} in flight, ${seconds} s)`,
    );
    console.log(
      `SyncVirtualMachine (VMI decoded + validated, no-op backend, ${syncCalls} calls): ` +
        `p50 ${percentile(syncLat, 50).toFixed(3)} ms, p99 ${percentile(syncLat, 99).toFixed(3)} ms`,
    );
  } finally {
    client.close();
    await server.stop();
    await cleanup();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
