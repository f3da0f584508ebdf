#!/usr/bin/env node
// npm run bench:cluster — on the cluster of tools/cluster.sh (one or more nodes: up [--nodes N] && load-images; root), prints:
//   1. VM create -> guest ready line: `kubectl create` of examples/vm-tiny.yaml (renamed per run) until
//      KUBEVIRT-TS-GUEST-READY is in the launcher Pod's serial log on the node (virt-controller creates the VMI and
//      the Pod, the scheduler and kubelet start its containers, virt-handler mounts the container disks and syncs);
//      and on to the guest's DHCP lease on the default pod network (KUBEVIRT-TS-GUEST-NET: phase 1 by virt-handler
//      in the Pod's netns, the launcher's DHCP server);
//   2. the same guest started by `virt-launcher standalone` on this host (spawn -> ready line on its console), and
//      the ratio 1/2 (goal <= 1.3);
//   1b. the time of each step of a cluster run: VMI created, launcher Pod created, bound, compute container started,
//      VMI Scheduled, Running (as first seen by polling the API server), guest ready;
//   3. API writes per VMI up to Running, from the apiserver's audit log (every successful create/update/patch of
//      the VMI and its status, by whom; goal <= 4), and the conflicts (409) seen on the way.
// Usage: node tools/bench-cluster.mjs [--runs N]   (deploy/ is applied: bash tools/cluster.sh deploy, with useEmulation: this host's /dev/kvm
// is root-only, so guests run under TCG as in the e2e)
import { setTimeout as sleep } from 'node:timers/promises';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import {
  AUDIT,
  READY,
  cache,
  getJson,
  kubectl,
  kubectlIn,
  median,
  repo,
  requireDeployedCluster,
  serialLogPath,
  until,
  vmManifest,
} from './cluster-bench-lib.mjs';

const LEASE = 'KUBEVIRT-TS-GUEST-NET ';
const NS = 'default';
const runsArg = process.argv.indexOf('--runs');
const RUNS = runsArg > 0 ? Number(process.argv[runsArg + 1]) : 3;

function writesOf(name, uid) {
  const out = { writes: 0, conflicts: 0, by: {} };
  for (const line of readFileSync(AUDIT, 'utf8').split('\n')) {
    if (!line.includes(`"${name}"`)) continue;
    const e = JSON.parse(line);
    const o = e.objectRef ?? {};
    if (e.stage !== 'ResponseComplete' || o.resource !== 'virtualmachineinstances' || o.name !== name)
      continue;
    if (!['create', 'update', 'patch'].includes(e.verb)) continue;
    if (o.uid && uid && o.uid !== uid) continue;
    const code = e.responseStatus?.code ?? 0;
    if (code === 409) out.conflicts++;
    if (code >= 300) continue;
    out.writes++;
    const who = `${e.user.username.replace(/^system:serviceaccount:kubevirt-ts:/, '')} ${e.verb}${o.subresource ? '/' + o.subresource : ''}`;
    out.by[who] = (out.by[who] ?? 0) + 1;
  }
  return out;
}

async function clusterRun(i) {
  const name = `bench-${process.pid}-${i}`;
  const t0 = performance.now();
  kubectlIn(vmManifest(name), 'create', '-f', '-');
  let runningWrites;
  // the time of each step (first seen by polling the API, every ~0.1-0.3 s here), from the create
  const steps = {};
  const mark = (k) => (steps[k] ??= +((performance.now() - t0) / 1000).toFixed(2));
  let vmi;
  let serial;
  let node;
  for (const end = Date.now() + 600_000; ;) {
    if (Date.now() > end) throw new Error(`timed out waiting for the guest ready line of ${name}`);
    const items = getJson('vmi,pods', '-n', NS)?.items ?? [];
    const v = items.find((o) => o.kind === 'VirtualMachineInstance' && o.metadata.name === name);
    const p =
      v &&
      items.find((o) => o.kind === 'Pod' && o.metadata.labels?.['kubevirt.io/created-by'] === v.metadata.uid);
    if (v) {
      vmi = v;
      mark('vmiCreated');
    }
    if (p) mark('podCreated');
    if (p?.spec?.nodeName) {
      mark('podBound');
      node = p.spec.nodeName;
    }
    if (p?.status?.containerStatuses?.find((c) => c.name === 'compute')?.state?.running)
      mark('computeStarted');
    if (['Scheduled', 'Running'].includes(v?.status?.phase)) mark('vmiScheduled');
    if (v?.status?.phase === 'Running') mark('vmiRunning');
    // the serial log is read through the init of the node holding the Pod's dir: ask until one has it (before the
    // Pod is bound, or its dir made, serialLogPath gives the in-node path, which the root namespace does not have)
    if (p?.spec?.nodeName && v && !serial?.startsWith('/proc/'))
      serial = serialLogPath(p.metadata.uid, v.metadata.uid);
    if (serial && (await readFile(serial, 'utf8').catch(() => '')).includes(READY)) break;
    await sleep(50);
  }
  const readyMs = performance.now() - t0;
  await until('guest DHCP lease line', async () =>
    (await readFile(serial, 'utf8').catch(() => '')).includes(LEASE),
  );
  const leaseMs = performance.now() - t0;
  await until('VMI Running', () => getJson('vmi', '-n', NS, name)?.status?.phase === 'Running', 600_000, 200);
  // the writes up to Running are all in the log once Running is visible (the audit backend writes synchronously)
  runningWrites = writesOf(name, vmi.metadata.uid);
  kubectl('delete', 'vm', '-n', NS, name, '--wait=true', '--timeout=300s');
  await until('VMI gone', () => !getJson('vmi', '-n', NS, name), 300_000, 500);
  mark('vmiRunning');
  return { readyMs, leaseMs, steps, node, ...runningWrites };
}

async function standaloneRun(i) {
  const dir = await mkdtemp('/tmp/kvb-');
  await chmod(dir, 0o755);
  const vmi = {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: `s${i}`, namespace: 'bench', uid: `uid-s${i}` },
    spec: {
      terminationGracePeriodSeconds: 30,
      domain: {
        resources: { requests: { memory: '128Mi' } },
        firmware: {
          kernelBoot: {
            kernelArgs: 'console=ttyS0 quiet', // no disks here: the test guest's kvts.disks panics without one
            container: {
              image: 'kubevirt-ts/test-guest:latest',
              kernelPath: '/vmlinuz',
              initrdPath: '/initramfs.img',
            },
          },
        },
        devices: {
          autoattachGraphicsDevice: false,
          autoattachMemBalloon: false,
          autoattachPodInterface: false,
          disks: [],
        },
      },
      networks: [],
      volumes: [],
    },
  };
  const file = path.join(dir, 'vmi.json');
  await writeFile(file, JSON.stringify(vmi));
  const main = path.join(repo, 'apps/virt-launcher/dist/main.js');
  const shebang = /^#!\/usr\/bin\/env -S node(.*)$/.exec(readFileSync(main, 'utf8').split('\n', 1)[0]);
  const nodeFlags = shebang ? shebang[1].trim().split(/\s+/).filter(Boolean) : [];
  const t0 = performance.now();
  const child = spawn(
    process.execPath,
    [
      ...nodeFlags,
      main,
      'standalone',
      '--vmi',
      file,
      '--image',
      `kubevirt-ts/test-guest:latest=${path.join(cache, 'guest')}`,
      '--console',
      '--allow-emulation',
      '--work-dir',
      path.join(dir, 'w'),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  let err = '';
  const exited = new Promise((r) => child.on('exit', r));
  child.stderr.setEncoding('utf8').on('data', (d) => (err += d));
  const readyMs = await new Promise((resolve, reject) => {
    child.stdout.setEncoding('utf8').on('data', (d) => {
      out += d;
      if (out.includes(READY)) resolve(performance.now() - t0);
    });
    void exited.then(() => reject(new Error(`standalone run ${i}: exited before the ready line\n${err}`)));
  });
  child.kill('SIGINT');
  await exited;
  await rm(dir, { recursive: true, force: true });
  return readyMs;
}

requireDeployedCluster('bench:cluster');

const cluster = [];
for (let i = 0; i < RUNS; i++) {
  const r = await clusterRun(i);
  cluster.push(r);
  console.log(
    `cluster run ${i + 1} (on ${r.node}): VM create -> guest ready ${(r.readyMs / 1000).toFixed(2)} s, -> DHCP lease ${(r.leaseMs / 1000).toFixed(2)} s; VMI writes to Running ${r.writes} (${Object.entries(
      r.by,
    )
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}), conflicts ${r.conflicts}\n  steps (s from create): ${Object.entries(r.steps)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}, guestReady ${(r.readyMs / 1000).toFixed(2)}`,
  );
}
const standalone = [];
for (let i = 0; i < RUNS; i++) {
  standalone.push(await standaloneRun(i));
  console.log(
    `standalone run ${i + 1}: launcher start -> guest ready ${(standalone[i] / 1000).toFixed(2)} s`,
  );
}
const c = median(cluster.map((r) => r.readyMs));
const s = median(standalone);
console.log(
  `\nVM create -> guest ready (median of ${RUNS}): cluster ${(c / 1000).toFixed(2)} s, standalone launcher ${(s / 1000).toFixed(2)} s, ratio ${(c / s).toFixed(2)}x (goal <= 1.3x)`,
);
console.log(
  `VM create -> guest DHCP lease on the pod network (median of ${RUNS}): ${(median(cluster.map((r) => r.leaseMs)) / 1000).toFixed(2)} s`,
);
console.log(
  `API writes per VMI to Running (median): ${median(cluster.map((r) => r.writes))} (goal <= 4); 409 conflicts (median): ${median(cluster.map((r) => r.conflicts))}`,
);
