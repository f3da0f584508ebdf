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
//   run with --expose-gc (npm run bench does); then the memory of the controller alone (bench-child.js, a
//   fresh controller process over the same objects).
import { setTimeout as sleep } from 'node:timers/promises';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseManifests } from '@kubevirt-ts/api';
import { KubeClient, PODS, type KubeObject } from '@kubevirt-ts/controller-runtime';
import { createLogger } from '@kubevirt-ts/log';
import { renderLaunchPod } from '@kubevirt-ts/renderer';
import { serverSideApply, startTestEnv, type KubeObject as TestObject } from '@kubevirt-ts/testenv';
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
  return { flags, env };
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

  // the controller alone: a fresh controller process over the same 1000 VMIs and Pods (caches full, every
  // VMI Scheduled), memory after a GC: with node's defaults, and as deploy/ runs it (the node flags and the
  // environment of apps/virt-controller's Containerfile, read from it). KVTS_BENCH_SMAPS=1: the child prints its
  // largest mappings on stderr (where the RSS is); KVTS_BENCH_VARIANTS='{"name":{"flags":[..],"env":{..}}}' adds
  // variants to measure
  const variants: Record<string, { flags: string[]; env?: Record<string, string> }> = {
    controllerAlone: { flags: [] },
    controllerAloneAsDeployed: deployedNode(),
    ...(JSON.parse(process.env['KVTS_BENCH_VARIANTS'] ?? '{}') as Record<
      string,
      { flags: string[]; env?: Record<string, string> }
    >),
  };
  for (const [name, v] of Object.entries(variants)) {
    const child = execFileSync(
      process.execPath,
      [
        '--expose-gc',
        ...v.flags,
        fileURLToPath(new URL('./bench-child.js', import.meta.url)),
        env.kubeconfigPath,
        String(N),
      ],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...v.env } },
    );
    out[name] = JSON.parse(child) as { rssMiB: number; heapUsedMiB: number; writes: number };
  }
} finally {
  await env.stop();
}
console.log(JSON.stringify(out, null, 2));
