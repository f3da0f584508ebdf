// The generated CRDs against a real etcd + kube-apiserver (tools/testenv): they are accepted as
// structural, the reference VMIs are stored without any field pruned, strict field validation
// rejects unknown fields, and the status (a subresource of VMs and VMIMs, written with the object on VMIs), printer columns, short names and categories work.
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { fileURLToPath } from 'node:url';
import type { RequestOptions } from 'node:https';
import { startTestEnv, testEnvAvailable, type TestEnv } from '@kubevirt-ts/testenv';
import { CRD_KINDS, crdFor, crdGroup, crdVersions, NOT_IMPLEMENTED_KINDS, type KindInfo } from './crd.js';
import { parseManifests } from './manifests.js';
import { baseVm, baseVmi, baseVmim, referenceYamls, type Any } from './test-fixtures.js';
import { validateObject } from './validate.js';

const avail = testEnvAvailable();
if (!avail.ok) {
  // say why instead of passing silently; tools/setup.d/50-testenv.sh provides the binaries
  throw new Error(`kube-apiserver test environment unavailable: ${avail.reason}`);
}

let env: TestEnv;

interface Reply {
  status: number;
  body: Any;
  /** the API server's `Warning` header (e.g. a deprecated version) */
  warning?: string;
}

async function kube(
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Reply> {
  const url = new URL(path, env.server);
  const opts: RequestOptions = {
    method,
    hostname: url.hostname,
    port: url.port,
    path: url.pathname + url.search,
    headers: { accept: 'application/json', 'content-type': 'application/json', ...headers },
  };
  await env.kubeConfig().applyToHTTPSOptions(opts);
  return new Promise((resolve, reject) => {
    const req = request(opts, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => {
        let parsed: unknown = text;
        try {
          parsed = JSON.parse(text);
        } catch {
          /* not JSON */
        }
        const w = res.headers['warning'];
        resolve({ status: res.statusCode ?? 0, body: parsed, warning: Array.isArray(w) ? w.join(', ') : w });
      });
    });
    req.on('error', reject);
    if (body !== undefined) req.write(JSON.stringify(body));
    req.end();
  });
}

const crdName = (k: KindInfo) => `${k.plural}.${crdGroup(k)}`;
const plural = (kind: string) => CRD_KINDS.find((k) => k.kind === kind)!.plural;
const objPath = (kind: string, ns: string, name?: string) =>
  `/apis/kubevirt.io/v1/namespaces/${ns}/${plural(kind)}${name ? `/${name}` : ''}`;

async function ensureNamespace(ns: string) {
  const r = await kube('POST', '/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: ns },
  });
  if (r.status !== 201 && r.status !== 409)
    throw new Error(`namespace ${ns}: ${r.status} ${JSON.stringify(r.body)}`);
}

beforeAll(async () => {
  env = await startTestEnv();
  for (const k of CRD_KINDS) {
    const r = await kube('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crdFor(k.kind));
    if (r.status !== 201)
      throw new Error(`creating the ${k.kind} CRD: ${r.status} ${JSON.stringify(r.body)}`);
  }
  // wait until every CRD is Established and served
  const deadline = Date.now() + 60_000;
  for (const k of CRD_KINDS) {
    for (;;) {
      const r = await kube('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crdName(k)}`);
      const est = (r.body.status?.conditions ?? []).find((c: Any) => c.type === 'Established');
      if (est?.status === 'True') {
        const list = await kube('GET', `/apis/${crdGroup(k)}/${crdVersions(k)[0]!.name}/${k.plural}`);
        if (list.status === 200) break;
      }
      if (Date.now() > deadline)
        throw new Error(`CRD ${k.kind} not established: ${JSON.stringify(r.body.status)}`);
      await new Promise((res) => setTimeout(res, 200));
    }
  }
  await ensureNamespace('prod');
}, 180_000);

afterAll(async () => {
  await env?.stop();
});

test('the API server accepts the CRDs with no structural-schema complaints', async () => {
  for (const k of CRD_KINDS) {
    const r = await kube('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crdName(k)}`);
    const conds: Any[] = r.body.status.conditions;
    expect(conds.find((c) => c.type === 'NonStructuralSchema')).toBeUndefined();
    expect(conds.find((c) => c.type === 'NamesAccepted')?.status).toBe('True');
  }
});

test('every reference VMI and the fixtures are stored unchanged (nothing pruned) under strict field validation', async () => {
  // kubectl get -o yaml output of an upstream VM and VMI, metadata reduced to what a create may carry
  const upstream = parseManifests(
    readFileSync(fileURLToPath(new URL('../testdata/upstream-vm-get.yaml', import.meta.url)), 'utf8'),
  ).map((d0) => {
    const d = d0 as Any;
    const { name, labels, annotations } = d.metadata;
    return {
      ...d,
      metadata: { name: `upstream-${name}`, namespace: 'default', labels, annotations },
      status: undefined,
    };
  });
  const docs: Any[] = [
    ...referenceYamls().flatMap((r) => parseManifests(r.text)),
    baseVmi(),
    baseVm(),
    baseVmim(),
    ...upstream,
  ];
  for (const doc of docs) {
    const ns = doc.metadata.namespace ?? 'default';
    const r = await kube('POST', `${objPath(doc.kind, ns)}?fieldValidation=Strict`, doc);
    expect({
      name: doc.metadata.name,
      status: r.status,
      msg: r.status === 201 ? '' : r.body.message,
    }).toEqual({
      name: doc.metadata.name,
      status: 201,
      msg: '',
    });
    const back = await kube('GET', objPath(doc.kind, ns, doc.metadata.name));
    expect(back.body.spec).toEqual(doc.spec);
  }
});

test('strict field validation rejects an unknown field under spec.domain, naming it', async () => {
  const v = baseVmi();
  v.metadata.name = 'unknown-field';
  v.spec.domain.coress = 2;
  const r = await kube('POST', `${objPath('VirtualMachineInstance', 'default')}?fieldValidation=Strict`, v);
  expect(r.status).toBe(400);
  expect(r.body.message).toMatch(/unknown field "spec\.domain\.coress"/);
});

test('the CRD schema rejects wrong types and unknown enum values', async () => {
  const vm = baseVm();
  vm.metadata.name = 'bad-strategy';
  vm.spec.runStrategy = 'Sometimes';
  const r = await kube('POST', objPath('VirtualMachine', 'default'), vm);
  expect(r.status).toBe(422);
  expect(r.body.message).toMatch(/spec\.runStrategy/);
  const v = baseVmi();
  v.metadata.name = 'bad-quantity-type';
  v.spec.domain.resources.requests.memory = true;
  const q = await kube('POST', objPath('VirtualMachineInstance', 'default'), v);
  expect(q.status).toBe(422);
  expect(q.body.message).toMatch(/spec\.domain\.resources\.requests\.memory/);
});

test('the cluster and validateObject agree on the limits: list bounds, control characters, metadata, Ei', async () => {
  const cases: [string, (v: Any) => void, RegExp | undefined][] = [
    ['too-many-disks', (v) => (v.spec.domain.devices.disks = Array(257).fill({ name: 'd' })), /disks/],
    ['newline-image', (v) => (v.spec.volumes[0].containerDisk.image = 'quay.io/a\nb'), /image/],
    ['big-annotations', (v) => (v.metadata.annotations = { a: 'x'.repeat(256 * 1024) }), /annotations/],
    ['Bad_Name', () => undefined, /Bad_Name/],
    ['exabytes', (v) => (v.spec.domain.resources.requests.memory = '1Ei'), undefined],
  ];
  for (const [name, mutate, refused] of cases) {
    const v = baseVmi();
    v.metadata.name = name;
    mutate(v);
    const r = await kube('POST', objPath('VirtualMachineInstance', 'default'), v);
    expect({ name, status: r.status, library: validateObject(v).length > 0 }).toEqual({
      name,
      status: refused ? 422 : 201,
      library: refused !== undefined,
    });
    if (refused) expect(r.body.message).toMatch(refused);
  }
});

test('a VMI status is written with the object (no subresource, as upstream) and printer columns show it', async () => {
  const v = baseVmi();
  v.metadata.name = 'with-status';
  await kube('POST', objPath('VirtualMachineInstance', 'default'), v);
  const cur = await kube('GET', objPath('VirtualMachineInstance', 'default', 'with-status'));
  const upd = {
    ...cur.body,
    status: {
      phase: 'Running',
      nodeName: 'node01',
      interfaces: [{ name: 'default', ipAddress: '10.244.0.5' }],
      conditions: [{ type: 'Ready', status: 'True' }],
      fieldFromTheFuture: 'kept',
    },
  };
  const sub = await kube('PUT', `${objPath('VirtualMachineInstance', 'default', 'with-status')}/status`, upd);
  expect(sub.status).toBe(404);
  // one write carries a label and the status (the VMI controller's Scheduled + kubevirt.io/nodeName)
  upd.metadata.labels = { 'kubevirt.io/nodeName': 'node01' };
  const s = await kube('PUT', objPath('VirtualMachineInstance', 'default', 'with-status'), upd);
  expect(s.status).toBe(200);
  expect(s.body.status.fieldFromTheFuture).toBe('kept');
  expect(s.body.metadata.labels['kubevirt.io/nodeName']).toBe('node01');
  const table = await kube('GET', objPath('VirtualMachineInstance', 'default', 'with-status'), undefined, {
    accept: 'application/json;as=Table;v=v1;g=meta.k8s.io',
  });
  expect(table.body.kind).toBe('Table');
  const cols = table.body.columnDefinitions.map((c: Any) => c.name);
  expect(cols).toEqual(['Name', 'Age', 'Phase', 'IP', 'NodeName', 'Ready']);
  const cells = table.body.rows[0].cells;
  expect(cells[0]).toBe('with-status');
  expect(cells.slice(2)).toEqual(['Running', '10.244.0.5', 'node01', 'True']);
});

test('discovery lists short names and the category all', async () => {
  const r = await kube('GET', '/apis/kubevirt.io/v1');
  const byName = Object.fromEntries(r.body.resources.map((x: Any) => [x.name, x]));
  expect(byName['virtualmachines'].shortNames).toEqual(['vm', 'vms']);
  expect(byName['virtualmachineinstances'].shortNames).toEqual(['vmi', 'vmis']);
  expect(byName['virtualmachineinstancemigrations'].shortNames).toEqual(['vmim', 'vmims']);
  for (const k of CRD_KINDS.filter(
    (x) => crdGroup(x) === 'kubevirt.io' && x.plural !== 'virtualmachineinstancepresets',
  ))
    expect(byName[k.plural].categories).toEqual(['all']);
  // the instance types and preferences: their own group, the cluster-scoped ones in no category (as upstream)
  const it = await kube('GET', '/apis/instancetype.kubevirt.io/v1beta1');
  const itByName = Object.fromEntries(it.body.resources.map((x: Any) => [x.name, x]));
  expect(itByName['virtualmachineinstancetypes']).toMatchObject({ namespaced: true, categories: ['all'] });
  expect(itByName['virtualmachineclusterinstancetypes'].namespaced).toBe(false);
  expect(itByName['virtualmachineclusterinstancetypes'].categories).toBeUndefined();
  expect(byName['virtualmachines/status']).toBeDefined();
  expect(byName['virtualmachineinstancemigrations/status']).toBeDefined();
  expect(byName['virtualmachineinstances/status']).toBeUndefined();
});

test('every served version of every kind lists across namespaces; v1alpha3 says it is deprecated', async () => {
  for (const k of CRD_KINDS) {
    for (const v of crdVersions(k)) {
      const r = await kube('GET', `/apis/${crdGroup(k)}/${v.name}/${k.plural}`);
      expect({ kind: k.kind, version: v.name, status: r.status }).toEqual({
        kind: k.kind,
        version: v.name,
        status: 200,
      });
    }
  }
  const r = await kube('GET', '/apis/kubevirt.io/v1alpha3/virtualmachines');
  expect(r.body.kind).toBe('VirtualMachineList');
  expect(r.body.apiVersion).toBe('kubevirt.io/v1alpha3');
  expect(r.warning).toContain('kubevirt.io/v1alpha3 is now deprecated');
  expect((await kube('GET', '/apis/kubevirt.io/v1/virtualmachines')).warning).toBeUndefined();
});

test('a kind not implemented keeps whatever it is given (no webhook here: the CRD alone)', async () => {
  expect(NOT_IMPLEMENTED_KINDS.map((k) => k.kind)).toContain('VirtualMachineSnapshot');
  const snap = {
    apiVersion: 'snapshot.kubevirt.io/v1beta1',
    kind: 'VirtualMachineSnapshot',
    metadata: { name: 's', namespace: 'default' },
    spec: { replicas: 2, anything: { nested: [1, 'two'] } },
    extra: 'kept',
  };
  const base = 'namespaces/default/virtualmachinesnapshots';
  const r = await kube('POST', `/apis/snapshot.kubevirt.io/v1beta1/${base}`, snap);
  expect(r.status).toBe(201);
  expect({ spec: r.body.spec, extra: r.body.extra }).toEqual({ spec: snap.spec, extra: 'kept' });
  const old = await kube('GET', `/apis/snapshot.kubevirt.io/v1alpha1/${base}/s`);
  expect(old.body.apiVersion).toBe('snapshot.kubevirt.io/v1alpha1');
  expect(old.body.spec).toEqual(snap.spec);
});
