// Benchmarks for @kubevirt-ts/node-libvirt: prints numbers, asserts nothing.
//   node bench/bench.mjs            (after npm run build; session part needs root, libvirtd and the test guest)
//   node bench/bench.mjs --no-session
import { performance } from 'node:perf_hooks';
import path from 'node:path';
import { Connection, DomainStatsTypes } from '../dist/index.js';
import { guestXml, startTestEnv, waitForLine, READY_LINE } from '../dist/test-guest.js';

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
};
const fmt = (n) => (n >= 100 ? n.toFixed(0) : n.toFixed(3));

async function latency(label, n, fn) {
  const xs = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn();
    xs.push(performance.now() - t);
  }
  console.log(`${label}: p50 ${fmt(pct(xs, 50))} ms, p99 ${fmt(pct(xs, 99))} ms (n=${n})`);
}

async function throughput(label, total, concurrency, fn) {
  let next = 0;
  const t = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < total) await fn();
    }),
  );
  const s = (performance.now() - t) / 1000;
  console.log(`${label}: ${(total / s).toFixed(0)} calls/s (${total} calls, ${concurrency} in flight)`);
}

async function eventLoopStall(fn) {
  let maxGap = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    maxGap = Math.max(maxGap, now - last);
    last = now;
  }, 1);
  await fn();
  clearInterval(timer);
  return maxGap;
}

console.log(
  `node ${process.version}, KVTS_LIBVIRT_THREADS=${process.env.KVTS_LIBVIRT_THREADS ?? '32 (default)'}`,
);

// --- in-process test driver
{
  const conn = await Connection.open('test:///default');
  const dom = await conn.lookupDomainByName('test');
  await latency('test:///default getState', 2000, () => dom.getState());
  await throughput('test:///default getState', 20000, 64, () => dom.getState());
  await latency('test:///default open+close', 200, async () =>
    (await Connection.open('test:///default')).close(),
  );
  const gap = await eventLoopStall(() =>
    throughput('test:///default getAllDomainStats', 20000, 64, () => conn.getAllDomainStats()),
  );
  console.log(`  longest JS event-loop gap meanwhile: ${fmt(gap)} ms`);
  let n = 0;
  let t0 = 0;
  const done = new Promise((resolve) =>
    conn.on('lifecycle', () => {
      if (++n === 2000) resolve();
    }),
  );
  t0 = performance.now();
  for (let i = 0; i < 1000; i++) {
    const d = await conn.defineXML(
      `<domain type='test'><name>bench-${i}</name><memory>65536</memory><os><type>hvm</type></os></domain>`,
    );
    await d.undefine();
  }
  await done;
  console.log(
    `test:///default define+undefine with events: ${(2000 / ((performance.now() - t0) / 1000)).toFixed(0)} events/s delivered`,
  );
  await conn.close();
}

// --- session libvirtd (uid 107) + test guest under TCG
if (!process.argv.includes('--no-session')) {
  let t = performance.now();
  const env = await startTestEnv();
  console.log(`session libvirtd: answering ${fmt(performance.now() - t)} ms after spawn`);
  try {
    const conn = await Connection.open(env.daemon.uri);
    t = performance.now();
    await conn.getVersion();
    console.log(
      `session libvirtd: first hypervisor call (QEMU capability probe) ${fmt(performance.now() - t)} ms`,
    );
    const serialLog = path.join(env.baseDir, 'bench.serial.log');
    const events = [];
    conn.on('lifecycle', (e) => events.push([performance.now(), e]));
    t = performance.now();
    const dom = await conn.createXML(
      guestXml({ name: 'bench', kernel: env.kernel, initrd: env.initrd, serialLog }),
    );
    const created = performance.now() - t;
    await waitForLine(serialLog, READY_LINE, 300_000);
    console.log(
      `guest: createXML ${fmt(created)} ms, ready line on serial console ${fmt(performance.now() - t)} ms after createXML (TCG)`,
    );
    await latency('session getState (unix socket RPC)', 1000, () => dom.getState());
    await throughput('session getState', 5000, 16, () => dom.getState());
    await latency('session getAllDomainStats (1 running guest, all stats)', 200, () =>
      conn.getAllDomainStats(),
    );
    await latency('session getAllDomainStats (state, cpu, balloon)', 200, () =>
      conn.getAllDomainStats(DomainStatsTypes.STATE | DomainStatsTypes.CPU_TOTAL | DomainStatsTypes.BALLOON),
    );
    const lat = [];
    for (let i = 0; i < 20; i++) {
      for (const op of ['suspend', 'resume']) {
        const before = events.length;
        const t1 = performance.now();
        await dom[op]();
        while (events.length === before) await new Promise((r) => setTimeout(r, 0));
        lat.push(events[before][0] - t1);
      }
    }
    console.log(
      `suspend/resume call start -> lifecycle event in JS: p50 ${fmt(pct(lat, 50))} ms, p99 ${fmt(pct(lat, 99))} ms (n=${lat.length})`,
    );
    await dom.destroy();
    await conn.close();
  } finally {
    await env.cleanup();
  }
}
