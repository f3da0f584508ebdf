#!/usr/bin/env node
// Benchmarks of DomainManager against real session libvirtds (uid 107) and the test guest under TCG.
// Prints numbers, asserts nothing. Build first (npx tsc -b); run as root:
//   node bench/bench.mjs [--migrations N]
// Measures: syncVMI (define+start) latency, boot to the guest's ready line, pause/unpause latency,
// and N live migrations back and forth over tcp loopback (wall time, libvirt's downtime and data).
import { parseArgs } from 'node:util';
import { ConnectionHolder, DomainManager } from '../dist/index.js';
import {
  freePort,
  guestVMI,
  lastHeartbeat,
  READY,
  readLog,
  startPod,
  waitForLog,
} from '../dist/test-real-env.js';

const { values } = parseArgs({ options: { migrations: { type: 'string', default: '4' } } });
const migrations = Number(values.migrations);
const quiet = { info() {}, warn() {}, error() {}, debug() {} };
const ms = (t0) => Math.round(performance.now() - t0);

const sides = [];
try {
  for (const hostUuid of ['b0000000-0000-4000-8000-00000000000a', 'b0000000-0000-4000-8000-00000000000b']) {
    const pod = await startPod({ hostUuid });
    const holder = new ConnectionHolder(() => pod.open());
    const mgr = new DomainManager({
      connection: holder,
      context: pod.context,
      prepare: (v, s) => pod.prepare(v, s),
      logger: quiet,
    });
    const jobs = [];
    (await holder.get()).on('jobCompleted', (e) => jobs.push(e.params));
    sides.push({ pod, holder, mgr, jobs });
  }
  const uid = 'u-bench';
  const vmi = guestVMI('bench', uid);
  const [a, b] = sides;

  let t0 = performance.now();
  await a.mgr.syncVMI(vmi);
  console.log(`syncVMI (convert, define, start): ${ms(t0)} ms`);
  await waitForLog(a.pod.serialLog(uid), (t) => t.includes(READY), 120_000, 'ready');
  console.log(`syncVMI -> guest ready line (TCG boot): ${ms(t0)} ms`);

  t0 = performance.now();
  await a.mgr.syncVMI(vmi);
  console.log(`syncVMI on the running domain (idempotent): ${ms(t0)} ms`);
  t0 = performance.now();
  await a.mgr.pauseVMI(vmi);
  console.log(`pauseVMI: ${ms(t0)} ms`);
  t0 = performance.now();
  await a.mgr.unpauseVMI(vmi);
  console.log(`unpauseVMI: ${ms(t0)} ms`);
  t0 = performance.now();
  await a.mgr.getDomain();
  console.log(`getDomain: ${ms(t0)} ms`);
  for (const which of ['first', 'second']) {
    // the first call pays a one-time cost inside libvirtd (CPU_TOTAL group, ~2 s here)
    t0 = performance.now();
    await a.mgr.getDomainStats();
    console.log(`getDomainStats (${which}): ${ms(t0)} ms`);
  }

  let from = a;
  let to = b;
  for (let i = 0; i < migrations; i++) {
    await to.mgr.prepareMigrationTarget(vmi);
    const port = await freePort();
    t0 = performance.now();
    await from.mgr.migrateVMI(vmi, {
      targetURI: to.pod.daemon.uri,
      migrationURI: `tcp://127.0.0.1:${port}`,
      destinationXML: (xml) => xml.split(from.pod.root + '/').join(to.pod.root + '/'),
    });
    const st = await from.mgr.waitForMigration(vmi);
    const wall = ms(t0);
    if (st.failed) throw new Error(`migration ${i + 1} failed: ${st.failureReason}`);
    await to.mgr.finalizeMigration(vmi);
    await new Promise((r) => setTimeout(r, 200));
    const job = from.jobs.at(-1) ?? {};
    console.log(
      `migration ${i + 1}: wall ${wall} ms, libvirt time_elapsed ${job.time_elapsed ?? '?'} ms, downtime ${job.downtime ?? '?'} ms, ` +
        `memory transferred ${job.memory_processed !== undefined ? Math.round(Number(job.memory_processed) / 2 ** 20) : '?'} MiB`,
    );
    // the next migration goes back: the old source's copy is Shutoff/Migrated; remove it first
    await from.mgr.deleteVMI(vmi);
    [from, to] = [to, from];
  }
  const text = await readLog(from.pod.serialLog(uid));
  console.log(`guest still running after ${migrations} migrations: heartbeat ${lastHeartbeat(text)}`);
} finally {
  for (const s of sides) {
    await s.mgr.close();
    await s.holder.close();
    await s.pod.cleanup();
  }
}
