// virt-handler's upstream-shaped /healthz through a real kube-apiserver (tools/testenv) with deploy/'s KubeVirt CRD:
// the KubeVirt CR's resourceVersion as the handler's informer sees it, before and after a change of the CR.
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { get as httpsGet } from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseManifests } from '@kubevirt-ts/api';
import { KUBEVIRTS, KubeClient, type KubeObject } from '@kubevirt-ts/controller-runtime';
import { serverSideApply, startTestEnv, type TestEnv } from '@kubevirt-ts/testenv';
import { startHealthzServer, type HealthzServer } from './healthz.js';
import { openSslPki } from './test-pki.js';

const NS = 'kubevirt-ts';
const crd = fileURLToPath(new URL('../../../deploy/crds/kubevirt.io_kubevirts.yaml', import.meta.url));
let env: TestEnv;
let api: KubeClient;
let server: HealthzServer;
let dir: string;

beforeAll(async () => {
  env = await startTestEnv();
  api = new KubeClient(env.kubeConfig());
  await serverSideApply(env.kubeConfig(), parseManifests(readFileSync(crd, 'utf8')) as never, {
    fieldManager: 'healthz-test',
  });
  await api.create({ group: '', version: 'v1', plural: 'namespaces', namespaced: false }, undefined, {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: NS },
  } as KubeObject);
  dir = await mkdtemp(path.join(tmpdir(), 'kvts-healthz-'));
  const pki = await openSslPki(dir);
  const { cert, key } = await pki.issue('virt-handler', 'serverAuth');
  server = await startHealthzServer({
    cert,
    key,
    port: 0,
    host: '127.0.0.1',
    client: api,
    kubeVirt: { namespace: NS, name: 'kubevirt' },
  });
}, 120000);

afterAll(async () => {
  await server?.close();
  api?.close();
  await env?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const get = (p: string): Promise<{ status?: number; type?: string; body: string }> =>
  new Promise((resolve, reject) => {
    httpsGet({ host: '127.0.0.1', port: server.port, path: p, rejectUnauthorized: false }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode, type: res.headers['content-type'], body }));
    }).on('error', reject);
  });

async function until(what: string, ok: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await ok()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const reported = async (p = '/healthz') =>
  (JSON.parse((await get(p)).body) as Record<string, unknown>)['config-resource-version'];

describe('GET /healthz', () => {
  it("reports no version without a CR, then the CR's, then the patched one; //healthz as upstream's tests ask", async () => {
    const none = await get('/healthz');
    expect(none.status).toBe(200);
    expect(none.type).toBe('application/json');
    expect(JSON.parse(none.body)).toEqual({
      apiserver: { connectivity: 'ok' },
      'config-resource-version': '',
    });
    const created = await api.create(KUBEVIRTS, NS, {
      apiVersion: 'kubevirt.io/v1',
      kind: 'KubeVirt',
      metadata: { name: 'kubevirt', namespace: NS },
      spec: { configuration: { developerConfiguration: { useEmulation: true } } },
    } as KubeObject);
    await until(
      'the created CR reported',
      async () => (await reported()) === created.metadata?.resourceVersion,
    );
    const cur = await api.get<KubeObject & { spec: Record<string, unknown> }>(KUBEVIRTS, NS, 'kubevirt');
    cur.spec = { configuration: { developerConfiguration: { useEmulation: false } } };
    const updated = await api.update(KUBEVIRTS, cur);
    expect(updated.metadata?.resourceVersion).not.toBe(created.metadata?.resourceVersion);
    await until(
      'the patched CR reported',
      async () => (await reported('//healthz')) === updated.metadata?.resourceVersion,
    );
    expect((await get('/metrics')).status).toBe(404);
  });
});
