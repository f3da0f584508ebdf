// virt-controller as a process serves subresources.kubevirt.io: with --tls-* and --subresources-port, the
// real kube-apiserver's aggregation layer routes deploy/'s APIService to it, and a start through the API
// server changes the VM. The process runs as virt-controller's ServiceAccount (deploy/'s RBAC).
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeClient, VMS } from '@kubevirt-ts/controller-runtime';
import {
  applySubresourceDeploy,
  controllerServiceAccountKubeConfig,
  issueServingCertificate,
  registerTestApiService,
} from '@kubevirt-ts/subresources/testing';
import { freePort, startTestEnv, type TestEnv } from '@kubevirt-ts/testenv';

const main = fileURLToPath(new URL('./main.js', import.meta.url));
let env: TestEnv;
let proc: ChildProcess | undefined;
let admin: KubeClient;

beforeAll(async () => {
  env = await startTestEnv();
  admin = new KubeClient(env.kubeConfig());
}, 120000);
afterAll(async () => {
  if (proc && proc.exitCode === null) {
    proc.kill('SIGTERM');
    await new Promise((r) => proc!.once('exit', r));
  }
  admin?.close();
  await env?.stop();
});

it('serves start through the aggregator with its TLS certificate; SIGTERM closes it', async () => {
  await applySubresourceDeploy(env);
  const dir = await mkdtemp(join(env.dir, 'vc-subresources-'));
  const serving = await issueServingCertificate(dir);
  await writeFile(join(dir, 'tls.crt'), serving.cert);
  await writeFile(join(dir, 'tls.key'), serving.key, { mode: 0o600 });
  const sa = await controllerServiceAccountKubeConfig(env);
  await writeFile(join(dir, 'kubeconfig'), sa.exportConfig(), { mode: 0o600 });
  const port = await freePort();
  let stderr = '';
  proc = spawn(
    process.execPath,
    [
      main,
      '--kubeconfig',
      join(dir, 'kubeconfig'),
      // as deploy/ runs it: every replica serves the API, leader or not
      '--launcher-image=registry.example/kubevirt-ts/virt-launcher:test',
      '--leader-elect',
      '--lease-namespace=kubevirt-ts',
      '--metrics-port=0',
      `--webhook-port=${await freePort()}`,
      `--subresources-port=${port}`,
      `--tls-cert-file=${join(dir, 'tls.crt')}`,
      `--tls-key-file=${join(dir, 'tls.key')}`,
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  proc.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((r) => proc!.once('exit', (c) => r(c)));
  // the log line says when it listens
  const deadline = Date.now() + 60000;
  while (!stderr.includes('serving subresources.kubevirt.io')) {
    if (proc.exitCode !== null) throw new Error(`virt-controller exited ${proc.exitCode}: ${stderr}`);
    if (Date.now() > deadline) throw new Error(`virt-controller did not serve the API: ${stderr}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  await registerTestApiService(env, port, serving.caPem);

  await admin.create(VMS, 'default', {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachine',
    metadata: { name: 'vm1', namespace: 'default' },
    spec: { running: false, template: { spec: { domain: { devices: {} } } } },
  } as never);
  await admin.request(
    'PUT',
    '/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachines/vm1/start',
    {},
  );
  const vm = await admin.get<{ metadata?: object; spec: { running?: boolean } }>(VMS, 'default', 'vm1');
  expect(vm.spec.running).toBe(true);
  expect(stderr).toMatch(/"msg":"subresource request".*"subresource":"start"/);

  proc.kill('SIGTERM');
  expect(await exited).toBe(0);
}, 120000);
