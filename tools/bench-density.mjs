#!/usr/bin/env node
// npm run bench:density — upstream's density test (tests/performance/density.go) on this project's node
// (tools/cluster.sh up && load-images && deploy, root): N VMIs of the tiny test guest (examples/vm-tiny.yaml's
// template) created 100 ms apart, for each N of --scales (default 1,10,50; --vmis N runs that one scale). For each
// scale it prints:
//   - creation -> Running p50/p95/max (the VMI's `Running` phase transition timestamp, as upstream measures) and
//     creation -> the guest's ready line on its serial console (polled every 0.5 s);
//   - where the time goes, medians from creation: Pod scheduled, compute container started, VMI Scheduled (the
//     domain defined and started by virt-handler), Running, guest ready;
//   - API writes per VMI from the audit log, by verb and resource (VMIs and Pods), against upstream's thresholds
//     (PATCH VMI <= 2x and UPDATE VMI <= 10x the Pod creates) and this project's goal (<= 4 writes per VMI);
//   - the node's memory: MemAvailable before, with N running, after the delete; the marginal memory per VM
//     ((before - running) / N), the same without the guest's RAM (the resident pages of QEMU's guest RAM mapping),
//     and the sum of PSS per VM of the launcher Pods' processes other than QEMU;
//   - virt-handler and virt-controller RSS and CPU seconds, and the CPU seconds of the node's parts (kubelet,
//     containerd and its shims, kube-apiserver + etcd, controller, handler, launchers, QEMU) from the first create
//     to the last guest ready;
//   - launcher container restarts, OOM kills, Failed VMIs (must be none);
//   - after the delete: nothing left (QEMU, launcher processes, Pod netns, mounts under the Pods' dirs, pod cgroups).
// Its last line is one summary for scripts: `density: N VMIs, p50 X s, p95 Y s, W writes/VMI, M MiB/VM marginal`.
// Usage: node tools/bench-density.mjs [--scales 1,10,50 | --vmis N]
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  AUDIT,
  PODS_DIR,
  READY,
  getJson,
  kubectlIn,
  kubectl,
  median,
  percentile,
  requireDeployedCluster,
  serialLogPath,
  until,
  vmiManifest,
} from './cluster-bench-lib.mjs';

const arg = (name) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const SCALES = arg('--vmis')
  ? [Number(arg('--vmis'))]
  : (arg('--scales') ?? '1,10,50').split(',').map(Number);
if (SCALES.some((n) => !Number.isInteger(n) || n < 1))
  throw new Error('bench:density: --vmis/--scales take positive whole numbers');
const NS = 'bench-density';
const STATE_DIR = process.env.KVTS_CLUSTER_DIR ?? '/var/lib/kubevirt-ts-cluster';
const CONTAINERD_SOCK = '/run/kubevirt-ts-containerd/containerd.sock';
const LABEL = 'bench=density';
const TICK = 100; // USER_HZ
const MiB = 1024 * 1024;
const s = (ms) => (ms / 1000).toFixed(1);

// ---------------------------------------------------------------- the node's processes

function memAvailable() {
  const m = /^MemAvailable:\s+(\d+) kB$/m.exec(readFileSync('/proc/meminfo', 'utf8'));
  return Number(m[1]) * 1024;
}

/** every process: pid, comm, cmdline, cgroup text, CPU seconds, RSS bytes */
function processes() {
  const out = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.push({
        pid: Number(d),
        comm: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')),
        cmdline: readFileSync(`/proc/${d}/cmdline`, 'utf8').replace(/\0/g, ' '),
        cgroup: readFileSync(`/proc/${d}/cgroup`, 'utf8'),
        cpu: (Number(rest[11]) + Number(rest[12])) / TICK,
        rss: Number(rest[21]) * 4096,
      });
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

/** which part of the node a process is */
function partOf(p, launcherPods) {
  if (p.comm.startsWith('qemu-system')) return 'qemu';
  const pod = launcherPods.find((uid) => p.cgroup.includes(uid) || p.cgroup.includes(uid.replace(/-/g, '_')));
  if (pod) return 'launchers';
  // the cluster's own components name its state dir (or containerd's socket) on their command lines; the
  // machine may run other kube-apiservers and etcds (tools/testenv's), which are not the node's
  const ours = p.cmdline.includes(STATE_DIR) || p.cmdline.includes(CONTAINERD_SOCK);
  if (ours && /\/kubelet /.test(p.cmdline)) return 'kubelet';
  if (ours && (p.comm === 'containerd' || p.comm.startsWith('containerd-shim'))) return 'containerd';
  if (ours && /kube-apiserver|^etcd /.test(p.cmdline)) return 'apiserver+etcd';
  if (/@kubevirt-ts\/virt-controller\//.test(p.cmdline)) return 'controller';
  if (/@kubevirt-ts\/virt-handler\//.test(p.cmdline)) return 'handler';
  return undefined;
}

/** CPU seconds by part between two samples: per process (a new one counts from its start) */
function cpuByPart(before, after, launcherPods) {
  const was = new Map(before.map((p) => [p.pid, p.cpu]));
  const out = {};
  for (const p of after) {
    const part = partOf(p, launcherPods);
    if (part) out[part] = (out[part] ?? 0) + p.cpu - (was.get(p.pid) ?? 0);
  }
  return out;
}

/** PSS (bytes) of a process, and the resident bytes of its largest mapping (QEMU: the guest's RAM) */
function memoryOf(pid) {
  let pss = 0;
  try {
    pss = Number(/^Pss:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'))[1]) * 1024;
  } catch {
    return { pss: 0, guestRss: 0 };
  }
  let guestRss = 0;
  let biggest = 0;
  try {
    let size = 0;
    for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
      let m = /^Size:\s+(\d+) kB$/.exec(line);
      if (m) size = Number(m[1]);
      m = /^Rss:\s+(\d+) kB$/.exec(line);
      if (m && size > biggest) {
        biggest = size;
        guestRss = Number(m[1]) * 1024;
      }
    }
  } catch {
    /* gone */
  }
  return { pss, guestRss };
}

/** a Kubernetes memory quantity in bytes (the forms the renderer writes: Ki/Mi/Gi or bytes) */
function memBytes(q) {
  const m = /^(\d+)(Ki|Mi|Gi)?$/.exec(q ?? '');
  return m ? Number(m[1]) * { Ki: 1024, Mi: MiB, Gi: 1024 * MiB }[m[2]] || Number(m[1]) : 0;
}

/** the peak memory use of a Pod's cgroup (cgroup v1 memory controller, any QoS class) */
function podMemoryPeak(uid) {
  for (const qos of ['burstable/', 'besteffort/', ''])
    try {
      return Number(
        readFileSync(`/sys/fs/cgroup/memory/kubepods/${qos}pod${uid}/memory.max_usage_in_bytes`, 'utf8'),
      );
    } catch {
      /* another QoS class */
    }
  return 0;
}

/** what the VMIs of this run could leave on the node */
function leftovers(podUids) {
  const left = [];
  for (const p of processes())
    if (p.comm.startsWith('qemu-system') && p.cmdline.includes(`guest=${NS}_`))
      left.push(`QEMU pid ${p.pid}`);
  const mounts = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4] ?? '');
  for (const uid of podUids) {
    for (const m of mounts) if (m.startsWith(`${PODS_DIR}/${uid}/`)) left.push(`mount ${m}`);
    for (const c of ['memory', 'cpu,cpuacct', 'pids'])
      try {
        const hit = readdirSync(`/sys/fs/cgroup/${c}/kubepods`, { recursive: true }).find(
          (d) => String(d).includes(uid) || String(d).includes(uid.replace(/-/g, '_')),
        );
        if (hit) left.push(`cgroup ${c}/kubepods/${hit}`);
      } catch {
        /* no such hierarchy */
      }
  }
  return left;
}

// ---------------------------------------------------------------- one scale

function auditSize() {
  try {
    return statSync(AUDIT).size;
  } catch {
    return 0;
  }
}

function writesPerVerb(offset) {
  const text = readFileSync(AUDIT).subarray(offset).toString('utf8');
  const counts = {};
  const byWho = {};
  for (const line of text.split('\n')) {
    if (!line.includes(`"${NS}"`)) continue;
    let e;
    try {
      e = JSON.parse(line);
    } catch {
      continue;
    }
    const o = e.objectRef ?? {};
    if (e.stage !== 'ResponseComplete' || o.namespace !== NS) continue;
    if (!['create', 'update', 'patch'].includes(e.verb) || (e.responseStatus?.code ?? 0) >= 300) continue;
    if (o.resource !== 'virtualmachineinstances' && o.resource !== 'pods') continue;
    const key = `${e.verb.toUpperCase()} ${o.resource === 'pods' ? 'Pod' : 'VMI'}${o.subresource ? '/' + o.subresource : ''}`;
    counts[key] = (counts[key] ?? 0) + 1;
    if (o.resource === 'virtualmachineinstances') {
      const who = `${key} by ${e.user.username.replace(/^system:serviceaccount:kubevirt-ts:/, '')}`;
      byWho[who] = (byWho[who] ?? 0) + 1;
    }
  }
  return { counts, byWho };
}

const ts = (t) => (t ? Date.parse(t) : undefined);

async function scale(n) {
  kubectl('create', 'namespace', NS);
  await sleep(2000);
  const before = memAvailable();
  const load = loadavg()[0];
  const auditAt = auditSize();
  const procs0 = processes();
  const names = Array.from({ length: n }, (_, i) => `dens-${i}`);
  const t0 = Date.now();
  for (const [i, name] of names.entries()) {
    kubectlIn(vmiManifest(name, NS, { bench: 'density' }), 'create', '-f', '-');
    const next = t0 + (i + 1) * 100;
    if (Date.now() < next) await sleep(next - Date.now());
  }
  const createdIn = Date.now() - t0;
  // poll until every guest printed its ready line
  const readyAt = new Map();
  let vmis = [];
  let pods = [];
  await until(
    `${n} guests ready`,
    async () => {
      vmis = getJson('vmi', '-n', NS, '-l', LABEL)?.items ?? [];
      pods = getJson('pods', '-n', NS)?.items ?? [];
      const failed = vmis.filter((v) => v.status?.phase === 'Failed');
      if (failed.length) throw new Error(`VMIs Failed: ${failed.map((v) => v.metadata.name).join(', ')}`);
      // a launcher Pod the scheduler has refused for a minute will not start: say why (the node's CPU or memory
      // cannot take the requests of N launcher Pods) instead of waiting
      for (const p of pods) {
        const c = p.status?.conditions?.find((x) => x.type === 'PodScheduled');
        if (
          c?.status === 'False' &&
          c.reason === 'Unschedulable' &&
          Date.now() - ts(c.lastTransitionTime) > 60_000
        )
          throw new Error(`launcher Pod ${p.metadata.name} unschedulable for a minute: ${c.message}`);
      }
      for (const v of vmis) {
        if (readyAt.has(v.metadata.name)) continue;
        const pod = pods.find((p) => p.metadata.labels?.['kubevirt.io/created-by'] === v.metadata.uid);
        if (!pod) continue;
        const text = await readFile(serialLogPath(pod.metadata.uid, v.metadata.uid), 'utf8').catch(() => '');
        if (text.includes(READY)) readyAt.set(v.metadata.name, Date.now());
      }
      return readyAt.size === n;
    },
    1_800_000,
    500,
  );
  const allReady = Date.now();
  const podUids = pods.map((p) => p.metadata.uid);
  const procs = processes();
  const cpuDelta = cpuByPart(procs0, procs, podUids);
  await sleep(3000); // the guests settle
  const running = memAvailable();
  // memory of the launcher Pods' processes
  let pss = 0;
  let qemuGuestRss = 0;
  for (const p of processes()) {
    const part = partOf(p, podUids);
    if (part === 'qemu') qemuGuestRss += memoryOf(p.pid).guestRss;
    else if (part === 'launchers') pss += memoryOf(p.pid).pss;
  }
  // each launcher Pod's memory peak (its cgroup's max_usage_in_bytes) against its memory request
  const peaks = [];
  let request = 0;
  for (const p of pods) {
    request = Math.max(request, ...p.spec.containers.map((c) => memBytes(c.resources?.requests?.memory)));
    const peak = podMemoryPeak(p.metadata.uid);
    if (peak) peaks.push(peak);
  }
  const component = (re) => procs.filter((p) => re.test(p.cmdline) && !p.comm.startsWith('sh'));
  const handler = component(/@kubevirt-ts\/virt-handler\//);
  const controller = component(/@kubevirt-ts\/virt-controller\//);

  // per VMI: the steps, from its creation
  const steps = { scheduled: [], started: [], vmiScheduled: [], running: [], ready: [] };
  for (const v of vmis) {
    const c = ts(v.metadata.creationTimestamp);
    const pod = pods.find((p) => p.metadata.labels?.['kubevirt.io/created-by'] === v.metadata.uid);
    const phase = (ph) =>
      ts(v.status?.phaseTransitionTimestamps?.find((x) => x.phase === ph)?.phaseTransitionTimestamp);
    const sched = ts(pod?.status?.conditions?.find((x) => x.type === 'PodScheduled')?.lastTransitionTime);
    const started = ts(
      pod?.status?.containerStatuses?.find((x) => x.name === 'compute')?.state?.running?.startedAt,
    );
    if (sched) steps.scheduled.push(sched - c);
    if (started) steps.started.push(started - c);
    if (phase('Scheduled')) steps.vmiScheduled.push(phase('Scheduled') - c);
    if (phase('Running')) steps.running.push(phase('Running') - c);
    // the API's timestamps have whole seconds: the ready line is measured from the create command's own clock
    steps.ready.push(readyAt.get(v.metadata.name) - (t0 + names.indexOf(v.metadata.name) * 100));
  }
  const restarts = pods.flatMap((p) =>
    (p.status?.containerStatuses ?? [])
      .filter((c) => c.restartCount > 0 || c.lastState?.terminated?.reason === 'OOMKilled')
      .map(
        (c) =>
          `${p.metadata.name}/${c.name}: ${c.restartCount} restarts ${c.lastState?.terminated?.reason ?? ''}`,
      ),
  );
  const { counts: writes, byWho } = writesPerVerb(auditAt);

  // delete, then nothing left and the memory back
  const tDel = Date.now();
  kubectl('delete', 'vmi', '-n', NS, '-l', LABEL, '--wait=true', '--timeout=900s');
  await until(
    'the launcher Pods gone',
    () => (getJson('pods', '-n', NS)?.items ?? []).length === 0,
    900_000,
    1000,
  );
  const deletedIn = Date.now() - tDel;
  kubectl('delete', 'namespace', NS, '--wait=true', '--timeout=300s');
  const left = await until(
    'nothing left on the node',
    () => {
      const l = leftovers(podUids);
      return l.length === 0 ? [] : false;
    },
    120_000,
    1000,
  ).catch(() => leftovers(podUids));
  await sleep(5000);
  const after = memAvailable();

  const marginal = (before - running) / n;
  const out = {
    n,
    p50: percentile(steps.running, 50),
    p95: percentile(steps.running, 95),
    max: Math.max(...steps.running),
    readyP50: percentile(steps.ready, 50),
    readyP95: percentile(steps.ready, 95),
    writes,
    writesPerVmi: Object.values(writes).reduce((a, b) => a + b, 0) / n,
    vmiWritesPerVmi:
      Object.entries(writes)
        .filter(([k]) => k.includes('VMI'))
        .reduce((a, [, b]) => a + b, 0) / n,
    marginalMiB: marginal / MiB,
    marginalNoGuestMiB: (marginal - qemuGuestRss / n) / MiB,
    pssMiB: pss / n / MiB,
  };
  console.log(
    `\n== ${n} VMI(s), created 100 ms apart in ${s(createdIn)} s (load average ${load.toFixed(2)} at the start)`,
  );
  console.log(
    `creation -> Running: p50 ${s(out.p50)} s, p95 ${s(out.p95)} s, max ${s(out.max)} s; -> guest ready: p50 ${s(out.readyP50)} s, p95 ${s(out.readyP95)} s`,
  );
  console.log(
    `where the time goes (medians from creation): Pod scheduled ${s(median(steps.scheduled))} s, compute started ${s(median(steps.started))} s, VMI Scheduled ${s(median(steps.vmiScheduled))} s, Running ${s(median(steps.running))} s, guest ready ${s(median(steps.ready))} s`,
  );
  const podCreates = writes['CREATE Pod'] ?? 0;
  const perVmi = (o) =>
    Object.entries(o)
      .sort()
      .map(([k, v]) => `${k} ${(v / n).toFixed(2)}`)
      .join(', ');
  const vmiUpdates = (writes['UPDATE VMI'] ?? 0) + (writes['UPDATE VMI/status'] ?? 0);
  console.log(
    `API writes per VMI: VMI ${out.vmiWritesPerVmi.toFixed(2)} (goal <= 4), all ${out.writesPerVmi.toFixed(2)}: ${perVmi(writes)}`,
  );
  console.log(`  VMI writes by whom, per VMI: ${perVmi(byWho)}`);
  console.log(
    `  upstream's thresholds: PATCH VMI ${writes['PATCH VMI'] ?? 0} <= ${2 * podCreates}, UPDATE VMI ${vmiUpdates} <= ${10 * podCreates} (2x and 10x the Pod creates)`,
  );
  console.log(
    `node memory: MemAvailable ${(before / MiB).toFixed(0)} MiB before, ${(running / MiB).toFixed(0)} MiB with ${n} running, ${(after / MiB).toFixed(0)} MiB after the delete (${(((after - before) / before) * 100).toFixed(1)} %); per VM: ${out.marginalMiB.toFixed(0)} MiB marginal, ${out.marginalNoGuestMiB.toFixed(0)} MiB without the guest's RAM (goal <= 80), launcher processes' PSS without QEMU ${out.pssMiB.toFixed(0)} MiB`,
  );
  if (peaks.length)
    console.log(
      `launcher Pod memory peak (cgroup): median ${(median(peaks) / MiB).toFixed(0)} MiB, max ${(Math.max(...peaks) / MiB).toFixed(0)} MiB, against its request ${(request / MiB).toFixed(0)} MiB (${((request / Math.max(...peaks) - 1) * 100).toFixed(0)} % over the max)`,
    );
  console.log(
    `CPU seconds, first create -> last guest ready (${s(allReady - t0)} s): ${Object.entries(cpuDelta)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} ${v.toFixed(1)}`)
      .join(', ')}`,
  );
  console.log(
    `virt-handler RSS ${(handler.reduce((a, p) => a + p.rss, 0) / MiB).toFixed(0)} MiB, virt-controller RSS ${(controller.reduce((a, p) => a + p.rss, 0) / MiB).toFixed(0)} MiB (all replicas)`,
  );
  console.log(
    `restarts/OOM kills: ${restarts.length ? restarts.join('; ') : 'none'}; Failed VMIs: none; delete took ${s(deletedIn)} s; left on the node: ${left.length ? left.join(', ') : 'nothing'}`,
  );
  return { ...out, restarts, left };
}

requireDeployedCluster('bench:density');
if (getJson('namespace', NS))
  throw new Error(`bench:density: namespace ${NS} exists (an earlier run?): delete it first`);
const results = [];
for (const n of SCALES)
  try {
    results.push(await scale(n));
  } catch (e) {
    kubectl('delete', 'namespace', NS, '--wait=true', '--timeout=600s');
    throw e;
  }
const last = results.at(-1);
const bad = results.flatMap((r) => [...r.restarts, ...r.left]);
if (bad.length) console.log(`\nFAILED: ${bad.join('; ')}`);
console.log(
  `density: ${last.n} VMIs, p50 ${s(last.p50)} s, p95 ${s(last.p95)} s, ${last.vmiWritesPerVmi.toFixed(1)} writes/VMI, ${last.marginalNoGuestMiB.toFixed(0)} MiB/VM marginal`,
);
process.exitCode = bad.length ? 1 : 0;
