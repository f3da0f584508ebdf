// virt-controller as processes against a real kube-apiserver (tools/testenv) with deploy/'s namespace,
// CRDs and a KubeVirt CR: two replicas with --leader-elect, one leads; it turns a VMI into a launcher
// Pod with the image of --launcher-image; a patch of the KubeVirt CR's configuration takes effect without a
// restart; on SIGTERM it exits 0 and releases the Lease, and the other replica takes over.
import { setTimeout as sleep } from 'node:timers/promises';
import { spawn, type ChildProcess } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { connect as tlsConnect } from 'node:tls';
import { get as httpsGet } from 'node:https';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseManifests } from '@kubevirt-ts/api';
import { KUBEVIRTS, KubeClient, LEASES, PODS, type Lease } from '@kubevirt-ts/controller-runtime';
import { VMIS, type Pod, type Vmi } from '@kubevirt-ts/virt-controller-core';
import { freePort, serverSideApply, startTestEnv, type KubeObject, type TestEnv } from '@kubevirt-ts/testenv';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const main = fileURLToPath(new URL('./main.js', import.meta.url));
const NS = 'proc-test';
const LAUNCHER_IMAGE = 'registry.example/kubevirt-ts/virt-launcher:test';
let env: TestEnv;
let api: KubeClient;
const procs: ChildProcess[] = [];
let finished = false;
async function until<T>(fn: () => Promise<T | undefined | false>): Promise<T> {
  while (!finished) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined && v !== false) return v;
    await sleep(100);
  }
  throw new Error('suite finished');
}
const manifests = (f: string) =>
  parseManifests(readFileSync(join(repoRoot, 'deploy', f), 'utf8')) as KubeObject[];

/** the serial of the certificate a TLS server on 127.0.0.1:p presents */
function servedSerial(p: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tlsConnect({ host: '127.0.0.1', port: p, rejectUnauthorized: false }, () => {
      const serial = s.getPeerCertificate().serialNumber;
      s.end();
      resolve(serial);
    });
    s.on('error', reject);
  });
}

/** the status of GET /readyz on a webhook port */
function readyz(p: number): Promise<number> {
  return new Promise((resolve, reject) => {
    httpsGet({ host: '127.0.0.1', port: p, path: '/readyz', rejectUnauthorized: false }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    }).on('error', reject);
  });
}

function replica(
  id: string,
  metricsPort: number,
  webhookPort: number,
): { proc: ChildProcess; exit: Promise<number | null> } {
  const proc = spawn(
    process.execPath,
    [
      main,
      '--kubeconfig',
      env.kubeconfigPath,
      `--launcher-image=${LAUNCHER_IMAGE}`,
      '--leader-elect',
      `--identity=${id}`,
      '--lease-namespace=kubevirt-ts',
      `--metrics-port=${metricsPort}`,
      // as deploy/ runs it: the webhooks with the certificate from the Secret it makes (127.0.0.1 added for the test)
      '--webhook-secret=kubevirt-ts-webhook-certs',
      '--webhook-namespace=kubevirt-ts',
      `--webhook-port=${webhookPort}`,
      '--webhook-extra-sans=127.0.0.1',
      // the subresource API (one fixed port per process) is tested in subresources.apiserver.test.ts
      '--subresources-port=0',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, KVTS_LOG_LEVEL: 'info' } },
  );
  proc.stderr!.resume();
  procs.push(proc);
  return { proc, exit: new Promise((r) => proc.on('exit', (code) => r(code))) };
}
const holder = async () =>
  (await api.getOrUndefined<Lease>(LEASES, 'kubevirt-ts', 'kubevirt-ts-controller'))?.spec?.holderIdentity;
async function vmiGetsPod(name: string): Promise<Pod> {
  const vmi = await api.create<Vmi>(VMIS, NS, {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name, namespace: NS },
    spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } } },
  } as Vmi);
  return until(async () => {
    const l = await api.list<Pod>(PODS, NS, { labelSelector: `kubevirt.io/created-by=${vmi.metadata.uid}` });
    return l.items.length === 1 ? l.items[0] : undefined;
  });
}

beforeAll(async () => {
  env = await startTestEnv();
  api = new KubeClient(env.kubeConfig());
  await serverSideApply(
    env.kubeConfig(),
    [
      ...manifests('00-namespace.yaml'),
      // every CRD deploy/ installs: the controller watches several kinds
      ...readdirSync(join(repoRoot, 'deploy', 'crds'))
        .filter((f) => f.endsWith('.yaml'))
        .flatMap((f) => manifests(join('crds', f))),
    ],
    { fieldManager: 'process-test' },
  );
  await api.create({ group: '', version: 'v1', plural: 'namespaces', namespaced: false }, undefined, {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: NS },
  });
  // what virt-operator creates on a fresh install (no operator runs here)
  await api.create(KUBEVIRTS, 'kubevirt-ts', {
    apiVersion: 'kubevirt.io/v1',
    kind: 'KubeVirt',
    metadata: { name: 'kubevirt', namespace: 'kubevirt-ts' },
    spec: { configuration: { developerConfiguration: { useEmulation: false } } },
  } as KubeObject);
}, 120000);

afterAll(async () => {
  finished = true;
  for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  api?.close();
  await env?.stop();
});

it('two replicas, one leader; the leader makes launcher Pods with the KubeVirt CR, read live; SIGTERM hands over', async () => {
  const ports = { 'replica-a': await freePort(), 'replica-b': await freePort() };
  const hookPorts = [await freePort(), await freePort()];
  const a = replica('replica-a', ports['replica-a'], hookPorts[0]!);
  const b = replica('replica-b', ports['replica-b'], hookPorts[1]!);
  const first = await until(holder);
  expect(['replica-a', 'replica-b']).toContain(first);
  // both replicas (leader or not) serve the webhooks with the one certificate in the Secret
  const secret = await until(() =>
    api.getOrUndefined<KubeObject & { data: Record<string, string> }>(
      { group: '', version: 'v1', plural: 'secrets', namespaced: true },
      'kubevirt-ts',
      'kubevirt-ts-webhook-certs',
    ),
  );
  const serial = new X509Certificate(Buffer.from(secret.data['tls.crt']!, 'base64')).serialNumber;
  for (const p of hookPorts) expect(await until(() => servedSerial(p))).toBe(serial);
  const pod1 = await vmiGetsPod('one');
  type Containers = {
    spec: { containers: { name: string; image: string; command?: string[]; args?: string[] }[] };
  };
  const compute = (p: Pod) => (p as unknown as Containers).spec.containers.find((c) => c.name === 'compute')!;
  expect(compute(pod1).image).toBe(LAUNCHER_IMAGE);
  const emulated = (p: Pod) =>
    [...(compute(p).command ?? []), ...(compute(p).args ?? [])].includes('--allow-emulation');
  expect(emulated(pod1)).toBe(false);
  // the configuration is read live: a patch of the CR changes the next launcher Pod, no restart
  await api.patch(KUBEVIRTS, 'kubevirt-ts', 'kubevirt', {
    spec: { configuration: { developerConfiguration: { useEmulation: true } } },
  });
  await until(async () => emulated(await vmiGetsPod(`live-${Date.now()}`)));
  // the leader's /metrics shows its work
  const metrics = await until(async () => {
    const text = await (await fetch(`http://127.0.0.1:${ports[first as keyof typeof ports]}/metrics`)).text();
    return /kubevirt_ts_vmi_phase_count\{phase="Scheduling"\} [1-9]/.test(text) ? text : undefined;
  });
  expect(metrics).toMatch(
    /^kubevirt_ts_controller_reconcile_total\{controller="vmi",result="success"\} [1-9]\d*$/m,
  );
  const [leader, other] = first === 'replica-a' ? [a, b] : [b, a];
  const otherId = first === 'replica-a' ? 'replica-b' : 'replica-a';
  const leaderHookPort = hookPorts[first === 'replica-a' ? 0 : 1]!;
  expect(await readyz(leaderHookPort)).toBe(200);
  const t0 = Date.now();
  leader.proc.kill('SIGTERM');
  // shutting down: not ready at once (the endpoints drop it), still serving for --shutdown-delay (5 s)
  expect(await until(async () => ((await readyz(leaderHookPort)) === 503 ? true : undefined))).toBe(true);
  expect(await leader.exit).toBe(0);
  expect(Date.now() - t0).toBeGreaterThanOrEqual(5000);
  await until(async () => (await holder()) === otherId);
  await vmiGetsPod('two');
  other.proc.kill('SIGTERM');
  expect(await other.exit).toBe(0);
}, 180000);
