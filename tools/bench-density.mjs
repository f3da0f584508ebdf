#!/usr/bin/env node
// npm run bench:density — upstream's density test (tests/performance/density.go) on this project's cluster
// (tools/cluster.sh up [--nodes N] && load-images && deploy, root): N VMIs of the tiny test guest
// (examples/vm-tiny.yaml's template) created 100 ms apart, spread by the scheduler over the nodes, for each N of
// --scales (default 1,10,30: two nodes of 2 CPUs take 31 launcher Pods of 120m; --vmis N runs that one scale). For
// each scale it prints:
//   - creation -> Running p50/p95/max (the VMI's `Running` phase transition timestamp, as upstream measures) and
//     creation -> the guest's ready line on its serial console (polled every 0.5 s);
//   - where the time goes, medians from creation: Pod scheduled, compute container started, VMI Scheduled (the
//     domain defined and started by virt-handler), Running, guest ready;
//   - API writes per VMI from the audit log, by verb and resource (VMIs and Pods), against upstream's thresholds
//     (PATCH VMI <= 2x and UPDATE VMI <= 10x the Pod creates) and this project's goal (<= 4 writes per VMI);
//   - the machine's memory (the nodes share one kernel): MemAvailable before, with N running, after the delete; the
//     marginal memory per VM ((before - running) / N), the same without the guest's RAM (the resident pages of
//     QEMU's guest RAM mapping), and the sum of PSS per VM of the launcher Pods' processes other than QEMU;
//   - per node (its cgroup root /sys/fs/cgroup/<hierarchy>/<prefix>nodeI, tools/cluster/README.md): its VMs, their
//     CPU requests, creation -> Running p50/p95, its Pods' working set (the kubepods memory cgroup) before, running
//     and after, per VM with and without the guests' RAM;
//   - each launcher Pod's memory peak and working set (its cgroup on its node) against its memory request;
//   - virt-handler and virt-controller RSS and CPU seconds, and the CPU seconds of the node's parts (kubelet,
//     containerd and its shims, kube-apiserver + etcd, controller, handler, launchers, QEMU; split per node) from
//     the first create to the last guest ready;
//   - issue 33's goals (GOAL below) met or missed;
//   - launcher container restarts, OOM kills, Failed VMIs (must be none);
//   - after the delete: nothing left (QEMU, mounts under the Pods' dirs in each node's mountinfo, Pod cgroups
//     under each node's cgroup root).
// Its last line is one summary for scripts: `density: N VMIs on K node(s) (...), p50 X s, p95 Y s, W writes/VMI,
// M MiB/VM marginal, request R % over the peak`.
// Usage: node tools/bench-density.mjs [--scales 1,10,30 | --vmis N] [--cpu-request 50m]
//   (a shared cluster: under flock -o <its lock>)
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
  nodeCgroupDir,
  nodeInitPid,
  nodeNames,
  nodeOfProcess,
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
  : (arg('--scales') ?? '1,10,30').split(',').map(Number);
if (SCALES.some((n) => !Number.isInteger(n) || n < 1))
  throw new Error('bench:density: --vmis/--scales take positive whole numbers');
// --cpu-request Q: the VMIs request Q of CPU (upstream's density VMIs: 100m, which vm-tiny's 1 vCPU gets from the
// default cpuAllocationRatio); less lets more launcher Pods fit the nodes' CPUs (the CPU work is the same)
const CPU_REQUEST = arg('--cpu-request');
if (CPU_REQUEST !== undefined && !/^\d+m?$/.test(CPU_REQUEST))
  throw new Error(`bench:density: --cpu-request takes a CPU quantity like 50m, not "${CPU_REQUEST}"`);
const MEMORY_REQUEST = '      requests:\n        memory: 128Mi\n';
function manifest(name) {
  const m = vmiManifest(name, NS, { bench: 'density' });
  if (CPU_REQUEST === undefined) return m;
  if (!m.includes(MEMORY_REQUEST))
    throw new Error('bench:density: examples/vm-tiny.yaml has no 128Mi request to add a CPU request to');
  return m.replace(MEMORY_REQUEST, `      requests:\n        cpu: ${CPU_REQUEST}\n        memory: 128Mi\n`);
}
const NS = 'bench-density';
const STATE_DIR = process.env.KVTS_CLUSTER_DIR ?? '/var/lib/kubevirt-ts-cluster';
// each node's containerd socket is /run/kubevirt-ts-containerd-<node>/containerd.sock (tools/cluster/README.md)
const CONTAINERD_SOCK = '/run/kubevirt-ts-containerd';
const LABEL = 'bench=density';
const TICK = 100; // USER_HZ
const MiB = 1024 * 1024;
const s = (ms) => (ms / 1000).toFixed(1);
const pct = (x) => (x === undefined ? '-' : `${x >= 0 ? '+' : ''}${(x * 100).toFixed(0)} %`);
// issue 33's goals (README.md "Density on the node"): per-VM overhead without the guest's RAM, creation -> Running
// p50/p95, each launcher Pod's memory request within 25 % of its use
const GOAL = { overheadMiB: 80, p50s: 18, p95s: 30, slack: 0.25 };

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
        node: undefined,
        rss: Number(rest[21]) * 4096,
      });
    } catch {
      /* gone meanwhile */
    }
  }
  for (const p of out) p.node = nodeOfProcess(p.cgroup, p.cmdline);
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

/**
 * CPU seconds by part between two samples: per process (a new one counts from its start); `byNode[part][node]`
 * splits the parts that run on a node (kubelet, containerd, handler, launchers, QEMU)
 */
function cpuByPart(before, after, launcherPods) {
  const was = new Map(before.map((p) => [p.pid, p.cpu]));
  const out = {};
  const byNode = {};
  for (const p of after) {
    const part = partOf(p, launcherPods);
    if (!part) continue;
    const d = p.cpu - (was.get(p.pid) ?? 0);
    out[part] = (out[part] ?? 0) + d;
    if (p.node && part !== 'apiserver+etcd' && part !== 'controller') {
      byNode[part] ??= {};
      byNode[part][p.node] = (byNode[part][p.node] ?? 0) + d;
    }
  }
  return { out, byNode };
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

/** a Kubernetes CPU quantity in millicores (`100m`, `1`, `0.5`) */
function cpuMilli(q) {
  const m = /^(\d+(?:\.\d+)?)(m)?$/.exec(q ?? '');
  return m ? (m[2] ? Number(m[1]) : Math.round(Number(m[1]) * 1000)) : 0;
}

/** a Kubernetes memory quantity in bytes (binary Ki/Mi/Gi, decimal k/M/G, or bytes; the renderer writes both) */
function memBytes(q) {
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|k|M|G)?$/.exec(q ?? '');
  const unit = { Ki: 1024, Mi: MiB, Gi: 1024 * MiB, k: 1e3, M: 1e6, G: 1e9 };
  return m ? Math.round(Number(m[1]) * (m[2] ? unit[m[2]] : 1)) : 0;
}

/**
 * A memory cgroup's figures (cgroup v1): `peak` its max_usage_in_bytes, `workingSet` usage less inactive file pages
 * (what kubelet calls the working set and evicts on), 0s when the cgroup is not there
 */
function cgroupMemory(dir) {
  try {
    const usage = Number(readFileSync(`${dir}/memory.usage_in_bytes`, 'utf8'));
    const inactive = Number(
      /^total_inactive_file (\d+)$/m.exec(readFileSync(`${dir}/memory.stat`, 'utf8'))?.[1] ?? 0,
    );
    return {
      peak: Number(readFileSync(`${dir}/memory.max_usage_in_bytes`, 'utf8')),
      workingSet: Math.max(0, usage - inactive),
    };
  } catch {
    return { peak: 0, workingSet: 0 };
  }
}

/** a Pod's memory cgroup on its node (`/sys/fs/cgroup/memory/<node's cgroup root>/kubepods/<qos>/pod<uid>`) */
function podMemory(uid, node) {
  for (const qos of ['burstable/', 'besteffort/', '']) {
    const m = cgroupMemory(`${nodeCgroupDir(node, 'memory')}/kubepods/${qos}pod${uid}`);
    if (m.peak) return m;
  }
  return { peak: 0, workingSet: 0 };
}

/** each node's Pods' working set (its kubepods memory cgroup) */
const kubepodsMemory = () =>
  Object.fromEntries(
    nodeNames().map((n) => [n, cgroupMemory(`${nodeCgroupDir(n, 'memory')}/kubepods`).workingSet]),
  );

/** what the VMIs of this run could leave on the nodes: QEMU, mounts under the Pods' dirs, Pod cgroups */
function leftovers(podUids) {
  const left = [];
  for (const p of processes())
    if (p.comm.startsWith('qemu-system') && p.cmdline.includes(`guest=${NS}_`))
      left.push(`QEMU pid ${p.pid}${p.node ? ` on ${p.node}` : ''}`);
  for (const node of nodeNames()) {
    // the node's own mount namespace: its init's mountinfo (mount points as the node sees them)
    const mounts = readFileSync(`/proc/${nodeInitPid(node)}/mountinfo`, 'utf8')
      .split('\n')
      .map((l) => l.split(' ')[4] ?? '');
    for (const uid of podUids) {
      for (const m of mounts) if (m.startsWith(`${PODS_DIR}/${uid}/`)) left.push(`mount ${m} on ${node}`);
      for (const c of ['memory', 'cpu,cpuacct', 'pids']) {
        const dir = `${nodeCgroupDir(node, c)}/kubepods`;
        try {
          const hit = readdirSync(dir, { recursive: true }).find(
            (d) => String(d).includes(uid) || String(d).includes(uid.replace(/-/g, '_')),
          );
          if (hit) left.push(`cgroup ${dir}/${hit}`);
        } catch {
          /* no such hierarchy */
        }
      }
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
  const podsBefore = kubepodsMemory();
  const load = loadavg()[0];
  const auditAt = auditSize();
  const procs0 = processes();
  const names = Array.from({ length: n }, (_, i) => `dens-${i}`);
  const t0 = Date.now();
  for (const [i, name] of names.entries()) {
    kubectlIn(manifest(name), 'create', '-f', '-');
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
  const { out: cpuDelta, byNode: cpuByNode } = cpuByPart(procs0, procs, podUids);
  await sleep(3000); // the guests settle
  const running = memAvailable();
  const podsRunning = kubepodsMemory();
  // memory of the launcher Pods' processes, in all and per node
  let pss = 0;
  let qemuGuestRss = 0;
  const guestRssOn = {};
  for (const p of processes()) {
    const part = partOf(p, podUids);
    if (part === 'qemu') {
      const g = memoryOf(p.pid).guestRss;
      qemuGuestRss += g;
      if (p.node) guestRssOn[p.node] = (guestRssOn[p.node] ?? 0) + g;
    } else if (part === 'launchers') pss += memoryOf(p.pid).pss;
  }
  // each launcher Pod's memory (its cgroup on its node: peak and working set) against its memory request (the
  // sum of its containers' requests)
  const perPod = [];
  for (const p of pods) {
    const request = p.spec.containers.reduce((a, c) => a + memBytes(c.resources?.requests?.memory), 0);
    const cpu = p.spec.containers.reduce((a, c) => a + cpuMilli(c.resources?.requests?.cpu), 0);
    const m = p.spec.nodeName ? podMemory(p.metadata.uid, p.spec.nodeName) : { peak: 0, workingSet: 0 };
    perPod.push({ node: p.spec.nodeName, request, cpu, ...m });
  }
  const peaks = perPod.filter((x) => x.peak).map((x) => x.peak);
  const request = Math.max(0, ...perPod.map((x) => x.request));
  const component = (re) => procs.filter((p) => re.test(p.cmdline) && !p.comm.startsWith('sh'));
  const handler = component(/@kubevirt-ts\/virt-handler\//);
  const controller = component(/@kubevirt-ts\/virt-controller\//);

  // per VMI: the steps, from its creation
  const steps = { scheduled: [], started: [], vmiScheduled: [], running: [], ready: [] };
  const runningOn = {}; // node -> creation -> Running (ms) of its VMIs
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
    if (phase('Running')) {
      steps.running.push(phase('Running') - c);
      if (pod?.spec?.nodeName) (runningOn[pod.spec.nodeName] ??= []).push(phase('Running') - c);
    }
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
  const podsAfter = kubepodsMemory();

  // per node: its VMs, their start, its Pods' memory (kubepods working set) with them running, less the guests' RAM
  const perNode = nodeNames().map((node) => {
    const mine = perPod.filter((x) => x.node === node);
    const k = mine.length;
    const grown = (podsRunning[node] ?? 0) - (podsBefore[node] ?? 0);
    return {
      node,
      vms: k,
      cpuRequest: mine.reduce((a, x) => a + x.cpu, 0),
      p50: runningOn[node]?.length ? percentile(runningOn[node], 50) : undefined,
      p95: runningOn[node]?.length ? percentile(runningOn[node], 95) : undefined,
      perVmMiB: k ? grown / k / MiB : undefined,
      perVmNoGuestMiB: k ? (grown - (guestRssOn[node] ?? 0)) / k / MiB : undefined,
      before: podsBefore[node] ?? 0,
      running: podsRunning[node] ?? 0,
      after: podsAfter[node] ?? 0,
    };
  });
  // requests against use: how far each Pod's memory request is above (+) or below (-) its peak
  const slack = perPod.filter((x) => x.peak && x.request).map((x) => x.request / x.peak - 1);

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
    perNode,
    slackMedian: slack.length ? median(slack) : undefined,
    slackMin: slack.length ? Math.min(...slack) : undefined,
    slackMax: slack.length ? Math.max(...slack) : undefined,
    peakMedianMiB: peaks.length ? median(peaks) / MiB : undefined,
    requestMiB: request / MiB,
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
  for (const x of perNode)
    console.log(
      `  ${x.node}: ${x.vms} VM(s), launcher CPU requests ${x.cpuRequest}m${x.p50 === undefined ? '' : `, creation -> Running p50 ${s(x.p50)} s, p95 ${s(x.p95)} s`}; Pods' working set (kubepods cgroup) ${(x.before / MiB).toFixed(0)} MiB before, ${(x.running / MiB).toFixed(0)} MiB running, ${(x.after / MiB).toFixed(0)} MiB after${x.vms ? `: ${x.perVmMiB.toFixed(0)} MiB per VM, ${x.perVmNoGuestMiB.toFixed(0)} MiB without the guest's RAM` : ''}`,
    );
  if (peaks.length)
    console.log(
      `launcher Pod memory (its cgroup on its node): peak median ${(median(peaks) / MiB).toFixed(0)} MiB, max ${(Math.max(...peaks) / MiB).toFixed(0)} MiB, working set median ${(median(perPod.filter((x) => x.peak).map((x) => x.workingSet)) / MiB).toFixed(0)} MiB, against its request ${(request / MiB).toFixed(0)} MiB: request over the peak by ${pct(out.slackMedian)} median (${pct(out.slackMin)} .. ${pct(out.slackMax)})`,
    );
  const cpuNodes = (part) =>
    cpuByNode[part]
      ? ` (${Object.entries(cpuByNode[part])
          .sort()
          .map(([k, v]) => `${k} ${v.toFixed(1)}`)
          .join(', ')})`
      : '';
  console.log(
    `CPU seconds, first create -> last guest ready (${s(allReady - t0)} s): ${Object.entries(cpuDelta)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} ${v.toFixed(1)}${cpuNodes(k)}`)
      .join(', ')}`,
  );
  // issue 33's goals
  const meets = (ok) => (ok ? 'meets' : 'MISSES');
  const worstNode = Math.max(...perNode.filter((x) => x.vms).map((x) => x.perVmNoGuestMiB));
  console.log(
    `goals: per-VM overhead <= ${GOAL.overheadMiB} MiB: ${out.marginalNoGuestMiB.toFixed(0)} MiB (MemAvailable), worst node ${worstNode.toFixed(0)} MiB (kubepods) ${meets(Math.max(out.marginalNoGuestMiB, worstNode) <= GOAL.overheadMiB)}; start p50 <= ${GOAL.p50s} s: ${s(out.p50)} s ${meets(out.p50 <= GOAL.p50s * 1000)}; p95 <= ${GOAL.p95s} s: ${s(out.p95)} s ${meets(out.p95 <= GOAL.p95s * 1000)}; memory request within ${GOAL.slack * 100} % of use (peak): ${pct(out.slackMin)} .. ${pct(out.slackMax)} ${meets(slack.length > 0 && slack.every((x) => Math.abs(x) <= GOAL.slack))}`,
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
    // the VMIs first, as a run that ends well deletes them: deleting the namespace at once removes launcher Pods
    // under VMIs that are still Scheduled, and those VMIs kept their finalizer (seen at N=32, see README.md)
    console.error(`bench:density: ${e.message}; deleting the VMIs, then the namespace`);
    kubectl('delete', 'vmi', '-n', NS, '-l', LABEL, '--wait=true', '--timeout=300s');
    kubectl('delete', 'namespace', NS, '--wait=true', '--timeout=300s');
    throw e;
  }
const last = results.at(-1);
const bad = results.flatMap((r) => [...r.restarts, ...r.left]);
if (bad.length) console.log(`\nFAILED: ${bad.join('; ')}`);
console.log(
  `density: ${last.n} VMIs on ${last.perNode.filter((x) => x.vms).length} node(s) (${last.perNode.map((x) => `${x.node} ${x.vms}`).join(', ')}), p50 ${s(last.p50)} s, p95 ${s(last.p95)} s, ${last.vmiWritesPerVmi.toFixed(1)} writes/VMI, ${last.marginalNoGuestMiB.toFixed(0)} MiB/VM marginal, request ${pct(last.slackMedian)} over the peak`,
);
process.exitCode = bad.length ? 1 : 0;
