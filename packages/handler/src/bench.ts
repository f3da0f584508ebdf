// Benchmark of the node agent with fake-fast launchers (real CmdServers + NotifyClients in this
// process, no libvirt): a handler process against a real kube-apiserver (testenv).
// Prints VMIs synced per second, status writes per VMI up to Running, the handler's CPU per VMI synced,
// and its RSS and PSS (3 s after the last VMI is Running, and after 30 s idle).
//   npm run bench:handler [-- VMIS]      (default 50)
// The handler process is the image's program: apps/virt-handler's dist/main.js with the node flags of
// apps/virt-handler/Containerfile's ENTRYPOINT and its ENV (but PATH). Overrides: BENCH_HANDLER_NODE_FLAGS="..."
// (node flags instead of the ENTRYPOINT's), BENCH_HANDLER_ENV="K=V ..." (instead of the ENV line's; "" for none),
// BENCH_HANDLER_MAIN=FILE (another build of the app), BENCH_HANDLER_CHILD=1 (the package's bench-child instead of
// the app: it prints its heap breakdown).
import { setTimeout as sleep } from 'node:timers/promises';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import {
  parseManifests,
  setVirtualMachineInstanceDefaults,
  type VirtualMachineInstance,
} from '@kubevirt-ts/api';
import { CmdServer, NotifyClient, type DomainModel } from '@kubevirt-ts/cmd-protocol';
import { createLogger } from '@kubevirt-ts/log';
import { serverSideApply, startTestEnv, type KubeObject } from '@kubevirt-ts/testenv';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { podNotifyPipePath, podPublicDir, podSocketsDir } from './launchers.js';

const N = Number(process.argv[2] ?? 50);
const NODE = 'bench-node';
const NS = 'bench';
const repo = fileURLToPath(new URL('../../../', import.meta.url));
const quiet = createLogger({ component: 'bench', level: 'error' });
const CHILD = process.env.BENCH_HANDLER_CHILD === '1';
const APP_MAIN = process.env.BENCH_HANDLER_MAIN ?? path.join(repo, 'apps/virt-handler/dist/main.js');

/** the node flags (ENTRYPOINT) and environment (ENV, but PATH) apps/virt-handler's Containerfile runs with */
function deployedNode(): { flags: string[]; env: Record<string, string> } {
  const text = readFileSync(path.join(repo, 'apps/virt-handler/Containerfile'), 'utf8');
  const entry = /^ENTRYPOINT (\[.*\])$/m.exec(text);
  const envLine =
    process.env.BENCH_HANDLER_ENV !== undefined
      ? process.env.BENCH_HANDLER_ENV
      : (/^ENV (.*)$/m.exec(text)?.[1] ?? '');
  if (!entry) throw new Error('bench: no ENTRYPOINT line in apps/virt-handler/Containerfile');
  const flags =
    process.env.BENCH_HANDLER_NODE_FLAGS !== undefined
      ? process.env.BENCH_HANDLER_NODE_FLAGS.split(' ').filter(Boolean)
      : (JSON.parse(entry[1]!) as string[]).filter((a) => a.startsWith('--'));
  const env = Object.fromEntries(
    envLine
      .split(/\s+/)
      .filter((kv) => kv.includes('='))
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)])
      .filter(([k]) => k !== 'PATH'),
  ) as Record<string, string>;
  // a preloaded library that is not there is skipped by the dynamic loader with a warning: measure what the image runs
  for (const lib of env['LD_PRELOAD']?.split(/[\s:]+/).filter(Boolean) ?? [])
    if (!existsSync(lib)) throw new Error(`bench: ${lib} (LD_PRELOAD) is missing: bash tools/setup.sh`);
  return { flags, env };
}

/** RSS and PSS (MiB) of a process, from /proc/<pid>/smaps_rollup */
async function memOf(pid: number): Promise<{ rss: number; pss: number }> {
  const t = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kib = (f: string) => Number(new RegExp(`^${f}:\\s+(\\d+) kB`, 'm').exec(t)?.[1]);
  return { rss: kib('Rss') / 1024, pss: kib('Pss') / 1024 };
}

/** user + system CPU ms of a process so far (/proc/<pid>/stat) */
async function cpuMs(pid: number): Promise<number> {
  const f = (await readFile(`/proc/${pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100; // utime, stime in clock ticks (USER_HZ 100)
}

const env = await startTestEnv();
const base = await mkdtemp(path.join(tmpdir(), 'kvhb-'));
const launchers: Array<{ server: CmdServer; notify?: NotifyClient }> = [];
let child: ReturnType<typeof spawn> | undefined;
try {
  const kc = env.kubeConfig();
  const crdDir = path.join(repo, 'deploy', 'crds');
  const crds = readdirSync(crdDir)
    .filter((f) => f.endsWith('.yaml'))
    .flatMap((f) => parseManifests(readFileSync(path.join(crdDir, f), 'utf8')) as KubeObject[]);
  await serverSideApply(kc, crds, { fieldManager: 'bench' });
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  await core.createNamespace({ body: { metadata: { name: NS } } });
  await core.createNode({ body: { metadata: { name: NODE } } });
  const podsDir = path.join(base, 'pods');

  // the launchers: ready at once; a sync reports the domain Running through the notify pipe
  const vmiRes = { group: 'kubevirt.io', version: 'v1', namespace: NS, plural: 'virtualmachineinstances' };
  const created: VirtualMachineInstance[] = [];
  for (let i = 0; i < N; i++) {
    const name = `vm-${i}`;
    const spec = setVirtualMachineInstanceDefaults({
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstance',
      metadata: { name, namespace: NS },
      spec: {
        domain: { resources: { requests: { memory: '64Mi' } }, devices: { autoattachPodInterface: false } },
      },
    } as unknown as VirtualMachineInstance);
    created.push(
      (await custom.createNamespacedCustomObject({ ...vmiRes, body: spec })) as VirtualMachineInstance,
    );
  }
  for (let i = 0; i < created.length; i++) {
    const podUid = `pod-${i}`;
    await mkdir(podPublicDir(podsDir, podUid), { recursive: true });
    await mkdir(podSocketsDir(podsDir, podUid), { recursive: true, mode: 0o700 });
    await symlink('../sockets', path.join(podPublicDir(podsDir, podUid), 'sockets'));
    let domain: DomainModel | undefined;
    const entry: { server: CmdServer; notify?: NotifyClient } = {
      server: new CmdServer({
        socketsDir: path.join(podPublicDir(podsDir, podUid), 'sockets'),
        logger: quiet,
        backend: {
          syncVMI: async (vmi) => {
            domain = {
              metadata: { name: vmi.metadata.name!, namespace: NS, uid: vmi.metadata.uid! },
              domainName: `${NS}_${vmi.metadata.name}`,
              status: { status: 'Running', reason: 'Booted' },
            };
            entry.notify ??= new NotifyClient(podNotifyPipePath(podsDir, podUid), { logger: quiet });
            entry.notify.sendDomainEvent({ eventType: 'ADDED', domain });
          },
          getDomain: async () => domain,
          getDomainStats: async () => ({
            Name: domain?.domainName ?? '',
            UUID: '',
            Vcpu: [],
            Net: [],
            Block: [],
            NrVirtCpu: 1,
            Cpu: { Time: 1e9, TimeSet: true },
          }),
        },
      }),
    };
    await entry.server.start();
    await entry.server.ready();
    launchers.push(entry);
  }

  const deployed = deployedNode();
  let address: string | undefined;
  const handlerDir = path.join(base, 'handler');
  child = CHILD
    ? spawn(
        process.execPath,
        [
          '--expose-gc',
          ...deployed.flags,
          fileURLToPath(new URL('./bench-child.js', import.meta.url)),
          env.kubeconfigPath,
          podsDir,
          handlerDir,
          NODE,
        ],
        { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...deployed.env } },
      )
    : spawn(
        process.execPath,
        [
          ...deployed.flags,
          APP_MAIN,
          `--node-name=${NODE}`,
          `--kubeconfig=${env.kubeconfigPath}`,
          `--pods-dir=${podsDir}`,
          `--kubevirt-share-dir=${handlerDir}`,
          `--launcher-uid=${process.getuid?.() ?? 0}`,
          // nothing on this host's kubelet: no device plugins (the app registers them with the host's kubelet by
          // default, replacing a running cluster's handler's), container-disk mounts under the bench's dir
          '--device-plugin-dir=',
          '--container-disk-helper=',
          `--host-pods-dir=${podsDir}`,
          '--port=0',
          '--log-level=info',
        ],
        // the app logs on stderr: read there for its address
        { stdio: ['ignore', 'inherit', 'pipe'], env: { ...process.env, ...deployed.env } },
      );
  let out = '';
  (CHILD ? child.stdout! : child.stderr!).setEncoding('utf8').on('data', (d: string) => {
    if (!address) out += d;
  });
  while (!address) {
    if (child.exitCode !== null) throw new Error(`the handler exited ${child.exitCode}: ${out}`);
    address = CHILD
      ? out.includes('\n')
        ? out.split('\n')[0]!.trim()
        : undefined
      : /serving \/healthz and \/metrics on (\S+?)"/.exec(out)?.[1];
    await sleep(50);
  }
  if (!address.startsWith('http')) address = `http://${address}`;
  const metricsUrl = `${address}/metrics`;
  const cpu0 = await cpuMs(child.pid!);

  // virt-controller's part, all at once: status Scheduled + activePods and the node label (one write)
  const t0 = Date.now();
  await Promise.all(
    created.map(async (v, i) => {
      await custom.replaceNamespacedCustomObject({
        ...vmiRes,
        name: v.metadata.name!,
        body: {
          ...v,
          metadata: { ...v.metadata, labels: { 'kubevirt.io/nodeName': NODE } },
          status: { phase: 'Scheduled', nodeName: NODE, activePods: { [`pod-${i}`]: NODE } },
        },
      });
    }),
  );
  for (;;) {
    const list = (await custom.listNamespacedCustomObject(vmiRes)) as { items: VirtualMachineInstance[] };
    if (list.items.filter((v) => v.status?.phase === 'Running').length === N) break;
    await sleep(100);
  }
  const secs = (Date.now() - t0) / 1000;
  const cpuSync = (await cpuMs(child.pid!)) - cpu0;
  await sleep(3000); // let anything pending settle
  const metrics = await (await fetch(metricsUrl)).text();
  // the bench child prints its memory breakdown (after a GC) on stderr; the app has no SIGUSR2 handler
  if (CHILD) child.kill('SIGUSR2');
  await sleep(500);
  const writes = Number(/^kubevirt_handler_vmi_status_writes_total\{[^}]*\} (\d+)/m.exec(metrics)?.[1]);
  const settled = await memOf(child.pid!);
  const cpuIdle0 = await cpuMs(child.pid!);
  await sleep(30_000); // idle: V8's memory reducer and the allocator's decay act within seconds
  const idle = await memOf(child.pid!);
  const cpuIdle = (await cpuMs(child.pid!)) - cpuIdle0;
  const what = CHILD ? 'bench-child' : path.relative(repo, APP_MAIN);
  console.log(`VMIs: ${N} fake-fast launchers, handler ${process.version} (${what})`);
  console.log(`  node flags: ${deployed.flags.join(' ') || '(none)'}`);
  console.log(
    `  environment: ${
      Object.entries(deployed.env)
        .map(([k, v]) => `${k}=${v}`)
        .join(' ') || '(none)'
    }`,
  );
  console.log(`  Scheduled -> Running for all: ${secs.toFixed(2)} s, ${(N / secs).toFixed(1)} VMIs synced/s`);
  console.log(
    `  handler CPU while syncing: ${(cpuSync / N).toFixed(1)} ms per VMI; idle 30 s: ${cpuIdle} ms`,
  );
  console.log(`  status writes per VMI up to Running: ${(writes / N).toFixed(2)} (goal <= 2)`);
  console.log(
    `  handler RSS / PSS with ${N} launchers: ${settled.rss.toFixed(1)} / ${settled.pss.toFixed(1)} MiB 3 s after; ` +
      `${idle.rss.toFixed(1)} / ${idle.pss.toFixed(1)} MiB after 30 s idle (goal <= 40)`,
  );
} finally {
  child?.kill('SIGTERM');
  if (child && child.exitCode === null) await new Promise((r) => child!.once('exit', r));
  for (const l of launchers) {
    l.notify?.close();
    await l.server.stop();
  }
  await rm(base, { recursive: true, force: true });
  await env.stop();
}
