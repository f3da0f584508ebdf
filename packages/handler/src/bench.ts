// Benchmark of the node agent with fake-fast launchers (real CmdServers + NotifyClients in this
// process, no libvirt): a handler process (bench-child) against a real kube-apiserver (testenv).
// Prints VMIs synced per second, status writes per VMI up to Running, and the handler's RSS.
//   npm run bench:handler [-- VMIS]      (default 50)
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
import { readdirSync, readFileSync } from 'node:fs';
import { podNotifyPipePath, podPublicDir, podSocketsDir } from './launchers.js';

const N = Number(process.argv[2] ?? 50);
const NODE = 'bench-node';
const NS = 'bench';
const repo = fileURLToPath(new URL('../../../', import.meta.url));
const quiet = createLogger({ component: 'bench', level: 'error' });

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

  child = spawn(
    process.execPath,
    [
      '--expose-gc',
      // V8 flags of the handler process under test (e.g. what apps/virt-handler's image sets)
      ...(process.env.BENCH_HANDLER_NODE_FLAGS ?? '').split(' ').filter(Boolean),
      fileURLToPath(new URL('./bench-child.js', import.meta.url)),
      env.kubeconfigPath,
      podsDir,
      path.join(base, 'handler'),
      NODE,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  while (!out.includes('\n')) await sleep(50);
  const metricsUrl = `${out.trim()}/metrics`;

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
  await sleep(3000); // let anything pending settle
  const metrics = await (await fetch(metricsUrl)).text();
  child.kill('SIGUSR2'); // the child prints its memory breakdown (after a GC) on stderr
  await sleep(500);
  const writes = Number(/^kubevirt_handler_vmi_status_writes_total\{[^}]*\} (\d+)/m.exec(metrics)?.[1]);
  const rss =
    Number(/VmRSS:\s+(\d+) kB/.exec(await readFile(`/proc/${child.pid}/status`, 'utf8'))?.[1]) / 1024;
  console.log(`VMIs: ${N} fake-fast launchers, handler ${process.version}`);
  console.log(`  Scheduled -> Running for all: ${secs.toFixed(2)} s, ${(N / secs).toFixed(1)} VMIs synced/s`);
  console.log(`  status writes per VMI up to Running: ${(writes / N).toFixed(2)} (goal <= 2)`);
  console.log(`  handler RSS with ${N} launchers: ${rss.toFixed(1)} MiB (goal <= 40)`);
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
