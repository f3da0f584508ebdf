// The whole examples/ folder through a real kube-apiserver (tools/testenv) with deploy/'s CRDs and our admission
// webhooks (deploy/50-webhooks.yaml's rules, the webhook server in this process, as a cluster runs them): every
// document of every example is accepted. Per file, in file order, in a namespace of its own (the examples say
// `default`): what an example depends on (its instance type and preference, a preset, a Secret, claims, a policy)
// is created for real; the workloads (VMs, VMIs, replica sets, pools, migrations) by a server-side dry run
// (`dryRun: ['All']`: admission runs, nothing is stored). One API server for the whole suite.
// KVTS_EXAMPLES_DIR=<dir> walks another folder (e.g. a checkout of upstream KubeVirt's examples/) as
// `kubectl apply -f <dir>` would, all files in one namespace: each file is then expected to be accepted exactly
// when kv-validate accepts it.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import {
  checkFile,
  isKubeVirtApiVersion,
  manifestFiles,
  parseManifests,
  validateObject,
  yaml,
} from '@kubevirt-ts/api';
import { KubeApiError, type KubeClient, type KubeObject } from '@kubevirt-ts/controller-runtime';
import { migrationConfiguration } from '@kubevirt-ts/renderer';
import type { TestEnv } from '@kubevirt-ts/testenv';
import type { Vmi } from './common.js';
import { migrationOptionsFor } from './migration-policy.js';
import { repoRoot, startApiserver, startTestWebhooks, type TestWebhooks } from './test-apiserver.js';

const EXAMPLES = join(repoRoot, 'examples');
/** the kinds an example runs (dry run); every other document is something it needs, created for real */
const WORKLOADS = new Set([
  'VirtualMachine',
  'VirtualMachineInstance',
  'VirtualMachineInstanceReplicaSet',
  'VirtualMachinePool',
  'VirtualMachineInstanceMigration',
]);

let env: TestEnv;
let api: KubeClient;
let hooks: TestWebhooks;

beforeAll(async () => {
  ({ env, api } = await startApiserver('examples-test', 'examples-test'));
  hooks = await startTestWebhooks(api);
}, 120000);

afterAll(async () => {
  await hooks?.close();
  api?.close();
  await env?.stop();
});

interface ApiResource {
  name: string;
  kind: string;
  namespaced: boolean;
}
const discovered = new Map<string, ApiResource[]>();
/** the resource of `kind` in `apiVersion`, from the API server's discovery (undefined: not served) */
async function resourceOf(apiVersion: string, kind: string): Promise<ApiResource | undefined> {
  let list = discovered.get(apiVersion);
  if (!list) {
    const path = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
    try {
      list = (await api.request<{ resources: ApiResource[] }>('GET', path)).resources.filter(
        (r) => !r.name.includes('/'),
      );
    } catch (e) {
      if (e instanceof KubeApiError && e.status === 404) list = [];
      else throw e;
    }
    discovered.set(apiVersion, list);
  }
  return list.find((r) => r.kind === kind);
}

interface Outcome {
  doc: string;
  ok: boolean;
  message?: string;
  object?: KubeObject;
}

/**
 * Every document of `file` in order, namespaced ones in `ns`: the workloads by a server-side dry run, the rest
 * created for real. A document of an API the server does not serve is reported as not served.
 */
async function apply(file: string, ns: string): Promise<Outcome[]> {
  const docs = parseManifests(readFileSync(file, 'utf8')) as KubeObject[];
  const out: Outcome[] = [];
  for (const [i, d] of docs.entries()) {
    const what = `${basename(file)} document ${i + 1} (${d.kind} ${d.metadata?.name ?? ''})`;
    const r = await resourceOf(d.apiVersion!, d.kind!);
    if (!r) {
      // another API this test server does not serve (e.g. resource.k8s.io/v1) is not admission's to judge
      if (!isKubeVirtApiVersion(d.apiVersion!)) out.push({ doc: what, ok: true, message: 'not served' });
      else out.push({ doc: what, ok: false, message: `${d.apiVersion} ${d.kind} is not served` });
      continue;
    }
    const obj = structuredClone(d);
    if (r.namespaced) (obj.metadata ??= {}).namespace = ns;
    else delete obj.metadata?.namespace;
    const base = d.apiVersion!.includes('/') ? `/apis/${d.apiVersion}` : `/api/${d.apiVersion}`;
    const path = `${base}${r.namespaced ? `/namespaces/${ns}` : ''}/${r.name}`;
    const dryRun = isKubeVirtApiVersion(d.apiVersion!) && WORKLOADS.has(d.kind!);
    try {
      const object = await api.request<KubeObject>('POST', dryRun ? `${path}?dryRun=All` : path, obj);
      out.push({ doc: what, ok: true, object });
    } catch (e) {
      out.push({ doc: what, ok: false, message: e instanceof Error ? e.message : String(e) });
    }
  }
  return out;
}

const namespaces = new Set<string>();
/** a namespace of its own for `file` */
async function namespaceFor(file: string, prefix: string): Promise<string> {
  let ns = `${prefix}-${basename(file)
    .replace(/\.(ya?ml|json)$/, '')
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')}`.slice(0, 63);
  ns = ns.replace(/-+$/, '');
  if (!namespaces.has(ns)) {
    await api.request('POST', '/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: ns },
    });
    namespaces.add(ns);
  }
  return ns;
}

const ours = manifestFiles(EXAMPLES);

describe('examples/ through the API server and the admission webhooks', () => {
  it('there are examples, and kv-validate accepts each of them', () => {
    expect(ours.length).toBeGreaterThanOrEqual(20);
    for (const f of ours)
      expect({ f, ...checkFile(f, readFileSync(f, 'utf8')) }).toMatchObject({ verdict: 'accepted' });
  });

  it.each(ours.map((f) => [basename(f), f]))('%s: every document is accepted', async (_name, file) => {
    const results = await apply(file, await namespaceFor(file, 'ex'));
    expect(results.length).toBeGreaterThan(0);
    // a migration passes the schema and reaches upstream's migration admitter, which needs its VMI to exist (it
    // runs only in the cluster e2e): that refusal, and only it, is the expected answer here
    const refusedForNoVmi = (r: { doc: string; message?: string }) =>
      /\(VirtualMachineInstanceMigration /.test(r.doc) &&
      /the VMI "[^"]+" does not exist/.test(r.message ?? '');
    expect(results.filter((r) => !r.ok && !refusedForNoVmi(r))).toEqual([]);
  });

  it('the dry runs went through the mutating webhook: the preset was applied, nothing was stored', async () => {
    const preset = await apply(
      join(EXAMPLES, 'vmipreset-small.yaml'),
      await namespaceFor('preset-again', 'ex'),
    );
    const vmi = preset.find((r) => r.object?.kind === 'VirtualMachineInstance')!.object as unknown as Vmi;
    expect(vmi.spec.domain.cpu?.cores).toBe(2);
    expect(vmi.metadata.annotations).toMatchObject({
      'virtualmachinepreset.kubevirt.io/small-preset': 'kubevirt.io/v1',
    });
    // the dry run stored nothing
    const ns = vmi.metadata.namespace!;
    await expect(
      api.request(
        'GET',
        `/apis/kubevirt.io/v1/namespaces/${ns}/virtualmachineinstances/${vmi.metadata.name}`,
      ),
    ).rejects.toThrow(/404/);
  });

  it('an example broken on purpose is refused, naming the field (the walk can fail)', async () => {
    const text = readFileSync(join(EXAMPLES, 'vm-instancetype.yaml'), 'utf8');
    const docs = parseManifests(text) as KubeObject[];
    const vm = docs.find((d) => d.kind === 'VirtualMachine') as unknown as {
      spec: { template: { spec: { domain: { resources?: unknown } } } };
    };
    // memory set by the template and by the instance type: refused by the webhook once the type is applied
    vm.spec.template.spec.domain.resources = { requests: { memory: '64Mi' } };
    expect(validateObject(vm)).toEqual([]); // kv-validate alone cannot see it: the instance type is on the server
    const ns = await namespaceFor('broken', 'ex');
    const dir = mkdtempSync(join(hooks.dir, 'broken-'));
    const file = join(dir, 'vm-instancetype.yaml');
    writeFileSync(file, docs.map((d) => yaml().stringify(d)).join('---\n'));
    const results = await apply(file, ns);
    expect(results.map((r) => r.ok)).toEqual([true, true, false]);
    expect(results[2]!.message).toMatch(
      /spec\.template\.spec\.domain\.resources\.requests\.memory.*conflicts with selected instance type/,
    );
  });

  it("examples/migrationpolicy.yaml gives a matching VMI its options; another keeps the cluster's", async () => {
    const policy = '/apis/migrations.kubevirt.io/v1alpha1/migrationpolicies/tiny-vms';
    // created by the walk above; when run alone (-t), created here
    if (
      !(await api.request('GET', policy).then(
        () => true,
        () => false,
      ))
    )
      expect((await apply(join(EXAMPLES, 'migrationpolicy.yaml'), 'default'))[0]).toMatchObject({ ok: true });
    const cluster = migrationConfiguration(undefined);
    const vmi = (labels: Record<string, string>) =>
      ({ metadata: { name: 'tiny', namespace: 'default', labels } }) as unknown as Vmi;
    const matched = await migrationOptionsFor(api, vmi({ 'kubevirt.io/vm': 'tiny' }), cluster);
    expect(matched).toEqual({
      policyName: 'tiny-vms',
      configuration: {
        ...cluster,
        bandwidthPerMigration: '64Mi',
        completionTimeoutPerGiB: 300,
        allowAutoConverge: true,
        allowPostCopy: false,
        allowWorkloadDisruption: false,
      },
    });
    expect(await migrationOptionsFor(api, vmi({ 'kubevirt.io/vm': 'other' }), cluster)).toEqual({
      configuration: cluster,
    });
  });
});

const extra = process.env['KVTS_EXAMPLES_DIR'];
(extra ? describe : describe.skip)(
  `KVTS_EXAMPLES_DIR (${extra ?? 'unset'}): admission agrees with kv-validate`,
  () => {
    const files = extra ? manifestFiles(extra) : [];
    it.each(files.map((f) => [f.slice((extra ?? '').length + 1), f]))('%s', async (_name, file) => {
      const verdict = checkFile(file, readFileSync(file, 'utf8')).verdict;
      const results = await apply(file, await namespaceFor('examples', 'up'));
      const refused = results.filter((r) => !r.ok);
      if (verdict === 'refused') expect(refused.length).toBeGreaterThan(0);
      else expect(refused).toEqual([]);
    });
  },
);
