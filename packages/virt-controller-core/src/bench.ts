// npm run bench:controller [-- N]: N VMIs -> launcher Pods against testenv's real kube-apiserver.
// - phases raw, controller, raw, controller, raw (interleaved: this machine's load drifts; each controller phase
//   is compared with the mean of its two neighbouring raw phases);
// - raw: N rendered launcher Pods created by the same client with 10 requests in flight (the VMI
//   controller's worker count): the Pod-create rate the API server allows this client; per phase: the Pod
//   creates' latency and requests in flight, and CPU ms per Pod of the API server, etcd and this process;
// - controller: N VMIs created beforehand as the API server stores them with deploy/'s mutating webhook
//   (defaults + finalizer: what a cluster has), then the controller starts; Pods/s from its start until its
//   cache holds every Pod, and over its create window (as raw measures); the first phase's objects are then
//   deleted; after the second the bench plays the kubelet (bind + run every Pod) and counts
//   the controller's API writes per VMI from create to Scheduled (its Events apart: they go through
//   their own client); memory of this process (controller + bench driver) at the end, after a GC when
//   run with --expose-gc (npm run bench does); then the memory of the controller alone: apps/virt-controller's
//   executable as deploy/ runs it, a fresh process over the same objects (controllerProcessMemory).
import { setTimeout as sleep } from 'node:timers/promises';
import { spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KUBEVIRT_CR_NAME, parseManifests } from '@kubevirt-ts/api';
import { KUBEVIRTS, KubeClient, PODS, type KubeObject } from '@kubevirt-ts/controller-runtime';
import { createLogger } from '@kubevirt-ts/log';
import { renderLaunchPod } from '@kubevirt-ts/renderer';
import { freePort, serverSideApply, startTestEnv, type KubeObject as TestObject } from '@kubevirt-ts/testenv';
import { VMIS, nowTimestamp, type Vmi } from './common.js';
import type { Pod } from './context.js';
import { VirtController } from './manager.js';
import { mutate } from './admission.js';

const N = Number(process.argv[2] ?? 1000);
const CONCURRENCY = 10;
const RENDERER = { launcherImage: 'localhost/kubevirt-ts/virt-launcher:bench', useEmulation: true };
const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));

async function pool<T>(items: T[], n: number, fn: (x: T) => Promise<unknown>): Promise<void> {
  let i = 0;
  await Promise.all(
    Array.from({ length: n }, async () => {
      while (i < items.length) await fn(items[i++]!);
    }),
  );
}
const vmiOf = (ns: string, i: number): Vmi =>
  ({
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: `bench-${i}`, namespace: ns },
    spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } } },
  }) as Vmi;

/** the VMI as the API server stores it after deploy/'s mutating webhook (defaults and the finalizer) */
function admitted(v: Vmi): Vmi {
  const r = mutate({
    uid: 'bench',
    operation: 'CREATE',
    kind: { kind: 'VirtualMachineInstance' },
    object: v,
  });
  const ops = JSON.parse(Buffer.from(r.patch ?? 'W10=', 'base64').toString()) as {
    path: string;
    value: unknown;
  }[];
  const out = structuredClone(v) as Vmi & Record<string, unknown>;
  for (const op of ops) {
    if (op.path === '/spec') out.spec = op.value as Vmi['spec'];
    else if (op.path === '/metadata/finalizers') out.metadata.finalizers = op.value as string[];
    else throw new Error(`bench: unexpected mutation ${op.path}`);
  }
  return out;
}

/**
 * Latency of the Pod creates a client sends (ms: mean, p50, p90), the mean number in flight while any is (tells
 * a slow API server, latency up, from a client that does not keep its requests in flight) and the create window
 * (first create sent to last answered, ms).
 */
function podCreateTimes(client: KubeClient) {
  const ms: number[] = [];
  let inFlight = 0;
  let busySince = 0;
  let busyMs = 0;
  let first = 0;
  let last = 0;
  const orig = client.request.bind(client);
  client.request = (async (method: string, path: string, ...rest: unknown[]) => {
    if (method !== 'POST' || !path.endsWith('/pods')) return orig(method, path, ...(rest as []));
    const t = performance.now();
    first ||= t;
    if (inFlight++ === 0) busySince = t;
    try {
      return await orig(method, path, ...(rest as []));
    } finally {
      const now = performance.now();
      ms.push(now - t);
      last = now;
      if (--inFlight === 0) busyMs += now - busySince;
    }
  }) as KubeClient['request'];
  /** the figures, once `n` creates were answered (the watch can deliver a Pod before its create's answer) */
  return async (n: number) => {
    while (ms.length < n) await sleep(5);
    const sorted = [...ms].sort((a, b) => a - b);
    const sum = ms.reduce((a, b) => a + b, 0);
    return {
      meanMs: +(sum / ms.length).toFixed(1),
      p50Ms: +sorted[Math.floor(ms.length / 2)]!.toFixed(1),
      p90Ms: +sorted[Math.floor(ms.length * 0.9)]!.toFixed(1),
      meanInFlight: +(sum / busyMs).toFixed(1),
      windowMs: +(last - first).toFixed(0),
    };
  };
}

/** the node flags (ENTRYPOINT) and environment (ENV, but PATH) apps/virt-controller's Containerfile runs with */
function deployedNode(): { flags: string[]; env: Record<string, string> } {
  const text = readFileSync(join(repoRoot, 'apps/virt-controller/Containerfile'), 'utf8');
  const entry = /^ENTRYPOINT (\[.*\])$/m.exec(text);
  const envLine = /^ENV (.*)$/m.exec(text);
  if (!entry || !envLine)
    throw new Error('bench: no ENTRYPOINT or ENV line in apps/virt-controller/Containerfile');
  const flags = (JSON.parse(entry[1]!) as string[]).filter((a) => a.startsWith('--'));
  const env = Object.fromEntries(
    envLine[1]!
      .split(/\s+/)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)])
      .filter(([k]) => k !== 'PATH'),
  ) as Record<string, string>;
  // a preloaded library that is not there is skipped by the dynamic loader with a warning: measure what the image runs
  for (const lib of env['LD_PRELOAD']?.split(/[\s:]+/).filter(Boolean) ?? [])
    if (!existsSync(lib))
      throw new Error(
        `bench: ${lib} (LD_PRELOAD of apps/virt-controller's Containerfile) is missing: bash tools/setup.sh`,
      );
  return { flags, env };
}

/** the namespace deploy/ installs into (the Lease, the webhook and handler certificate Secrets) */
const DEPLOY_NAMESPACE = 'kubevirt-ts';
/** the controller's executable, as its image runs it */
const APP_MAIN = join(repoRoot, 'apps/virt-controller/dist/main.js');
/** how long the controller process is watched idling once ready (V8's memory reducer acts after a few seconds) */
const IDLE_SECONDS = 30;

/** the virt-controller container's arguments in deploy/40-virt-controller.yaml */
function deployedArgs(): string[] {
  type Doc = {
    kind?: string;
    spec?: { template?: { spec?: { containers?: { name: string; args?: string[] }[] } } };
  };
  const docs = parseManifests(
    readFileSync(join(repoRoot, 'deploy/40-virt-controller.yaml'), 'utf8'),
  ) as Doc[];
  const c = docs
    .find((d) => d.kind === 'Deployment')
    ?.spec?.template?.spec?.containers?.find((x) => x.name === 'virt-controller');
  if (!c?.args) throw new Error('bench: no virt-controller container args in deploy/40-virt-controller.yaml');
  return c.args;
}

const rssMiB = (pid: number) =>
  +(Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024).toFixed(1);

/** a process's largest mappings by RSS (anonymous ones grouped), for KVTS_BENCH_SMAPS */
function largestMappings(pid: number): string[] {
  const by = new Map<string, number>();
  let cur = '';
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const h = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (h) cur = h[1] || '[anon]';
    const r = /^Rss:\s+(\d+) kB/.exec(line);
    if (r) by.set(cur, (by.get(cur) ?? 0) + Number(r[1]));
  }
  return [...by]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 8)
    .map(([k, v]) => `${(v / 1024).toFixed(1)} MiB ${k}`);
}

/**
 * Start the controller's executable with `flags` (node's) and `env` (beside PATH) and deploy/'s arguments (its ports
 * moved to free ones), wait until it is the leader with every one of the `n` VMIs cached and reconciled and its
 * queues empty, then read its RSS every second for IDLE_SECONDS; stop it with SIGTERM (it must exit 0).
 */
async function controllerProcessMemory(
  kubeconfig: string,
  flags: string[],
  env: Record<string, string>,
  n: number,
) {
  if (!existsSync(APP_MAIN))
    throw new Error(`bench: ${APP_MAIN} is missing: build apps/virt-controller first`);
  const ports = { metrics: await freePort(), webhook: await freePort(), subresources: await freePort() };
  const child = spawn(
    process.execPath,
    [
      ...flags,
      APP_MAIN,
      ...deployedArgs(),
      `--kubeconfig=${kubeconfig}`,
      `--metrics-port=${ports.metrics}`,
      `--webhook-port=${ports.webhook}`,
      `--subresources-port=${ports.subresources}`,
    ],
    {
      // its log (stderr) is shown only if it fails
      stdio: ['ignore', 'ignore', 'pipe'],
      env: {
        PATH: process.env['PATH'],
        KVTS_NAMESPACE: DEPLOY_NAMESPACE,
        POD_NAME: 'virt-controller-bench',
        ...env,
      },
    },
  );
  let log = '';
  child.stderr!.on('data', (d: Buffer) => (log = (log + d.toString()).slice(-4000)));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let metrics = '';
  const metric = (name: string, labels: string) =>
    [...metrics.matchAll(new RegExp(`^${name}\\{${labels}\\} (\\S+)$`, 'gm'))].reduce(
      (a, m) => a + Number(m[1]),
      0,
    );
  try {
    const t0 = performance.now();
    for (;;) {
      if (child.exitCode !== null)
        throw new Error(`bench: virt-controller exited (${child.exitCode}):\n${log}`);
      metrics = await fetch(`http://127.0.0.1:${ports.metrics}/metrics`).then(
        (r) => r.text(),
        () => '',
      );
      if (
        metric('kubevirt_ts_vmi_phase_count', 'phase="Scheduled"') === n &&
        metric('kubevirt_ts_controller_reconcile_total', 'controller="vmi",[^}]*') >= n &&
        metric('kubevirt_ts_controller_queue_depth', '[^}]*') === 0
      )
        break;
      if (performance.now() - t0 > 180_000)
        throw new Error(
          `bench: virt-controller not ready after 180 s; its metrics:\n${metrics}\nits log:\n${log}`,
        );
      await sleep(500);
    }
    const readySec = (performance.now() - t0) / 1000;
    const rss: number[] = [];
    for (let i = 0; i <= IDLE_SECONDS; i++) {
      rss.push(rssMiB(child.pid!));
      if (i < IDLE_SECONDS) await sleep(1000);
    }
    if (process.env['KVTS_BENCH_SMAPS']) process.stderr.write(`${largestMappings(child.pid!).join('\n')}\n`);
    return {
      readySec: +readySec.toFixed(1),
      rssMiBWhenReady: rss[0],
      [`rssMiBAfter${IDLE_SECONDS}sIdle`]: rss.at(-1),
      rssMiBIdleMinMax: [Math.min(...rss), Math.max(...rss)],
    };
  } finally {
    child.kill('SIGTERM');
    const code = await exited;
    if (code !== 0) process.stderr.write(`bench: virt-controller exited with ${code} on SIGTERM:\n${log}\n`);
  }
}

/** CPU seconds (user + system) of a process so far, from /proc */
function cpuSeconds(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const rest = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(rest[11]) + Number(rest[12])) / 100; // utime, stime in clock ticks (USER_HZ 100)
}

const env = await startTestEnv();
/** CPU seconds of the API server, etcd and this process (driver + controller) */
const cpu = () => ({
  apiserver: cpuSeconds(env.pids.apiserver),
  etcd: cpuSeconds(env.pids.etcd),
  bench: cpuSeconds(process.pid),
});
/** CPU seconds spent per Pod between two cpu() readings */
const cpuPerPod = (a: ReturnType<typeof cpu>, b: ReturnType<typeof cpu>, n: number) =>
  Object.fromEntries(
    Object.keys(a).map((k) => [k, +(((b[k as 'bench'] - a[k as 'bench']) / n) * 1000).toFixed(2)]),
  );
const out: Record<string, unknown> = { vmis: N };
try {
  const kc = env.kubeConfig();
  const api = new KubeClient(kc);
  const crdDir = join(repoRoot, 'deploy', 'crds');
  await serverSideApply(
    kc,
    readdirSync(crdDir)
      .filter((f) => f.endsWith('.yaml'))
      .flatMap((f) => parseManifests(readFileSync(join(crdDir, f), 'utf8')) as TestObject[]),
    { fieldManager: 'bench' },
  );
  const NSR = { group: '', version: 'v1', plural: 'namespaces', namespaced: false };
  for (const name of ['bench-raw-1', 'bench-c1', 'bench-raw-2', 'bench', 'bench-raw-3'])
    await api.create(NSR, undefined, {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name },
    } as KubeObject);

  // raw Pod-create rate of the same client with the controller's concurrency, in three phases interleaved with the
  // two controller phases (raw, controller, raw, controller, raw): this shared machine's load drifts, so each
  // controller phase is compared with the mean of its two neighbouring raw phases
  // (without the virt-launcher label: they are not the controller's, so its Pod informer does not cache them)
  const raw = async (ns: string) => {
    const pods = Array.from({ length: N }, (_, i) => {
      const v = vmiOf(ns, i);
      v.metadata.uid = `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;
      const p = renderLaunchPod(v, RENDERER) as Pod;
      delete p.metadata!.labels!['kubevirt.io'];
      return p;
    });
    const rawClient = new KubeClient(kc);
    const times = podCreateTimes(rawClient);
    const c = cpu();
    const t0 = performance.now();
    await pool(pods, CONCURRENCY, (p) => rawClient.create(PODS, ns, p));
    const sec = (performance.now() - t0) / 1000;
    rawClient.close();
    // where the CPU goes: ms per Pod of the API server, etcd and this process, in each phase
    return {
      podsPerSecond: +(N / sec).toFixed(1),
      cpuMsPerPod: cpuPerPod(c, cpu(), N),
      podCreates: await times(N),
    };
  };

  // a controller phase: N VMIs waiting, then the controller starts; Pods/s from its start until its cache holds
  // the N Pods (informer sync included), and over its create window alone (first Pod create sent to last answered:
  // what the raw phases measure)
  const ctrlPhase = async (ns: string) => {
    await pool(
      Array.from({ length: N }, (_, i) => i),
      CONCURRENCY,
      (i) => api.create(VMIS, ns, admitted(vmiOf(ns, i))),
    );
    const controller = new VirtController({
      kubeConfig: kc,
      rendererConfig: RENDERER,
      log: createLogger({ component: 'virt-controller', level: 'warn' }),
    });
    const times = podCreateTimes(controller.client);
    const c0 = cpu();
    const t = performance.now();
    const mark = () => Number(process.hrtime.bigint() / 1000n); // µs, the clock of a --cpu-prof profile
    const marks: Record<string, number> = { controllerStart: mark() };
    await controller.start();
    marks['synced'] = mark();
    const syncSec = (performance.now() - t) / 1000;
    while (controller.ctx.pods.list(ns).length < N) await sleep(20);
    const sec = (performance.now() - t) / 1000;
    marks['podsCached'] = mark();
    const pc = await times(N);
    return {
      controller,
      stats: {
        podsPerSecond: +(N / sec).toFixed(1),
        createWindowPodsPerSecond: +(N / (pc.windowMs / 1000)).toFixed(1),
        informerSyncSec: +syncSec.toFixed(2),
        cpuMsPerPod: cpuPerPod(c0, cpu(), N),
        podCreates: pc,
        // what else the controller wrote meanwhile (status PUTs compete with the creates at the API server)
        writesByVerbMeanwhile: { ...controller.client.writesByVerb },
        eventsWrittenMeanwhile: controller.recorder.written,
        // KVTS_BENCH_MARKS=1: the phase boundaries, to cut a `node --cpu-prof` profile of this process
        ...(process.env['KVTS_BENCH_MARKS'] ? { marksUs: marks } : {}),
      },
    };
  };
  const pct = (ctrl: number, rawA: number, rawB: number) => +((ctrl / ((rawA + rawB) / 2)) * 100).toFixed(0);

  const raw1 = await raw('bench-raw-1');
  const c1 = await ctrlPhase('bench-c1');
  await c1.controller.stop();
  // clear the first controller phase's objects so that the second starts on the same footing (no kubelet here:
  // Pods go at once with a zero grace period; the VMIs' finalizer is dropped, the controller being stopped)
  await api.request('DELETE', '/api/v1/namespaces/bench-c1/pods?gracePeriodSeconds=0');
  await pool((await api.list<Vmi>(VMIS, 'bench-c1')).items, CONCURRENCY, async (v) => {
    await api.patch(VMIS, 'bench-c1', v.metadata.name!, { metadata: { finalizers: null } }, 'merge');
    await api.delete(VMIS, 'bench-c1', v.metadata.name!);
  });
  const raw2 = await raw('bench-raw-2');
  const { controller, stats: c2 } = await ctrlPhase('bench');

  // the kubelet runs every Pod; count the controller's writes until every VMI is Scheduled
  for (;;) {
    const pending = controller.ctx.vmis.list('bench').filter((v) => v.status?.phase !== 'Scheduling');
    if (pending.length === 0) break;
    await sleep(50);
  }
  const pods = (await api.list<Pod>(PODS, 'bench')).items;
  await pool(pods, CONCURRENCY, async (p) => {
    const name = p.metadata!.name!;
    await api.request('POST', `/api/v1/namespaces/bench/pods/${name}/binding`, {
      apiVersion: 'v1',
      kind: 'Binding',
      metadata: { name },
      target: { apiVersion: 'v1', kind: 'Node', name: 'node01' },
    });
    await api.patch(
      PODS,
      'bench',
      name,
      {
        status: {
          phase: 'Running',
          containerStatuses: [
            {
              name: 'compute',
              ready: true,
              restartCount: 0,
              image: RENDERER.launcherImage,
              imageID: '',
              state: { running: { startedAt: nowTimestamp() } },
            },
          ],
        },
      },
      'merge',
      'status',
    );
  });
  for (;;) {
    const v = controller.ctx.vmis.list('bench');
    if (v.every((x) => x.status?.phase === 'Scheduled' && x.metadata.labels?.['kubevirt.io/nodeName'])) break;
    await sleep(50);
  }
  await sleep(1000); // let any trailing write land before counting
  out['controllerWritesPerVmiToScheduled'] = +(controller.client.writes / N).toFixed(2);
  out['controllerWritesByVerb'] = controller.client.writesByVerb;
  await controller.recorder.flush();
  out['eventWritesPerVmi'] = +(controller.recorder.written / N).toFixed(2);
  api.close();
  (globalThis as { gc?: () => void }).gc?.();
  const mem = process.memoryUsage();
  out['rssMiB'] = +(mem.rss / 2 ** 20).toFixed(1);
  out['heapUsedMiB'] = +(mem.heapUsed / 2 ** 20).toFixed(1);
  await controller.stop();
  const raw3 = await raw('bench-raw-3');
  out['phases'] = { raw1, controller1: c1.stats, raw2, controller2: c2, raw3 };
  // each controller phase against the mean of its neighbouring raw phases: over its create window (the same
  // measure as raw) and from its start (informer sync included)
  out['controllerVsRaw'] = (
    [
      [c1.stats, raw1, raw2],
      [c2, raw2, raw3],
    ] as const
  ).map(([c, a, b]) => ({
    createWindow: `${pct(c.createWindowPodsPerSecond, a.podsPerSecond, b.podsPerSecond)}%`,
    fromStart: `${pct(c.podsPerSecond, a.podsPerSecond, b.podsPerSecond)}%`,
  }));

  // the controller alone, as deploy/ runs it: apps/virt-controller's executable (its bundle, dist/main.js) with the
  // node flags and environment of its Containerfile and the Deployment's arguments (leader election, managed webhook
  // and handler certificates, the admission, subresource and metrics servers), a fresh process over the same 1000
  // VMIs and Pods (caches full, every VMI Scheduled); its RSS read from /proc while it idles, with no forced GC (what
  // the kubelet and `kubectl top` see). Node's defaults (no flags, no environment) for comparison;
  // KVTS_BENCH_VARIANTS='{"name":{"flags":[..],"env":{..}}}' adds variants (e.g. "--heapsnapshot-signal=SIGUSR2");
  // KVTS_BENCH_SMAPS=1 prints each one's largest mappings at the end (where the RSS is)
  await api.create(NSR, undefined, {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: DEPLOY_NAMESPACE },
  } as KubeObject);
  // the KubeVirt CR virt-operator would create (the bench runs no operator): the cluster's configuration
  await api.create(KUBEVIRTS, DEPLOY_NAMESPACE, {
    apiVersion: 'kubevirt.io/v1',
    kind: 'KubeVirt',
    metadata: { name: KUBEVIRT_CR_NAME, namespace: DEPLOY_NAMESPACE },
    spec: { configuration: {} },
  } as KubeObject);
  const deployed = deployedNode();
  const variants: Record<string, { flags: string[]; env?: Record<string, string> }> = {
    controllerAsDeployed: deployed,
    controllerNodeDefaults: { flags: [] },
    ...(JSON.parse(process.env['KVTS_BENCH_VARIANTS'] ?? '{}') as Record<
      string,
      { flags: string[]; env?: Record<string, string> }
    >),
  };
  for (const [name, v] of Object.entries(variants))
    out[name] = await controllerProcessMemory(env.kubeconfigPath, v.flags, v.env ?? {}, N);
} finally {
  await env.stop();
}
console.log(JSON.stringify(out, null, 2));
