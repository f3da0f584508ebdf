// deploy/51-node-restriction.yaml on a real kube-apiserver, with real service-account tokens: a token bound to a
// virt-handler Pod on node-a (TokenRequest, as the kubelet asks for it) names node-a, and with it virt-handler may
// change node-a (kubevirt.io labels and annotations only) and the VMIs on node-a or migrating to it (status and
// kubevirt.io labels), nothing of node-b's. deploy/ is applied as it is, without the admission webhooks (nothing
// serves them here) and the RBAC of deploy/ still applies on top.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import YAML from 'yaml';
import {
  kubeRequest,
  serverSideApply,
  startTestEnv,
  KubeRequestError,
  type KubeObject,
  type TestEnv,
} from './index.js';
import * as gen from './gen-deploy.js';

const deployDir = join(fileURLToPath(new URL('../../../', import.meta.url)), 'deploy');
const NS = 'node-restriction';
const MERGE = 'application/merge-patch+json';

let env: TestEnv;
let admin: KubeConfig;
const handler: Record<'a' | 'b', KubeConfig> = {} as never;

/** a kubeconfig that authenticates with `token` (no client certificate) */
function withToken(token: string): KubeConfig {
  const c = admin.getCurrentCluster()!;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: c.server, caData: c.caData, caFile: c.caFile, skipTLSVerify: false }],
    users: [{ name: 'u', token }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}

/** a token of virt-handler's service account, bound to `pod` when given (as the kubelet's projected token is) */
async function handlerToken(pod?: KubeObject): Promise<string> {
  const r = await kubeRequest<{ status: { token: string } }>(
    admin,
    'POST',
    `/api/v1/namespaces/${gen.NAMESPACE}/serviceaccounts/${gen.HANDLER}/token`,
    {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: {
        expirationSeconds: 3600,
        boundObjectRef: pod
          ? { apiVersion: 'v1', kind: 'Pod', name: pod.metadata!.name, uid: pod.metadata!.uid }
          : undefined,
      },
    },
  );
  return r.status.token;
}

/** the status code and message of a request (200 when it went through) */
async function attempt(
  kc: KubeConfig,
  method: string,
  path: string,
  body?: unknown,
): Promise<{ code: number; message: string }> {
  try {
    await kubeRequest(kc, method, path, body, method === 'PATCH' ? MERGE : 'application/json');
    return { code: 200, message: '' };
  } catch (e) {
    if (!(e instanceof KubeRequestError)) throw e;
    let message = e.message;
    try {
      message = (JSON.parse(e.body) as { message: string }).message;
    } catch {
      /* not a Status */
    }
    return { code: e.status, message };
  }
}

const node = (name: string) => `/api/v1/nodes/${name}`;
const vmiPath = (name: string) => `/apis/kubevirt.io/v1/namespaces/${NS}/virtualmachineinstances/${name}`;

async function createVmi(
  name: string,
  labels: Record<string, string>,
  status: Record<string, unknown>,
): Promise<void> {
  await kubeRequest(admin, 'POST', `/apis/kubevirt.io/v1/namespaces/${NS}/virtualmachineinstances`, {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name, labels: { app: 'db', ...labels } },
    spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } } },
    status,
  });
}

beforeAll(async () => {
  env = await startTestEnv();
  admin = env.kubeConfig();
  // deploy/ without the webhooks (no virt-controller serves them here)
  for (const f of readdirSync(deployDir)
    .filter((f) => f.endsWith('.yaml') && f !== '50-webhooks.yaml')
    .sort()) {
    const objs = YAML.parseAllDocuments(readFileSync(join(deployDir, f), 'utf8'))
      .map((d) => d.toJSON() as KubeObject)
      .filter((o) => o);
    await serverSideApply(admin, objs, { fieldManager: 'kubevirt-ts-deploy' });
  }
  await env.createNamespace(NS);
  for (const n of ['a', 'b'] as const) {
    await kubeRequest(admin, 'POST', '/api/v1/nodes', {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: `node-${n}`, labels: { 'kubevirt.io/schedulable': 'true', zone: n } },
    });
    const pod = await kubeRequest<KubeObject>(admin, 'POST', `/api/v1/namespaces/${gen.NAMESPACE}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: `virt-handler-${n}` },
      spec: {
        nodeName: `node-${n}`,
        serviceAccountName: gen.HANDLER,
        containers: [{ name: 'virt-handler', image: 'virt-handler' }],
      },
    });
    handler[n] = withToken(await handlerToken(pod));
  }
  // a new policy takes effect once kube-apiserver has compiled it (its policy informer, about a second): wait until a
  // write it must refuse is refused
  const end = Date.now() + 60_000;
  for (;;) {
    const probe = await attempt(handler.a, 'PATCH', node('node-b'), {
      metadata: { labels: { 'kubevirt.io/p': 'x' } },
    });
    if (probe.code === 403) break;
    if (Date.now() > end)
      throw new Error(`the node restriction policy did not take effect: ${JSON.stringify(probe)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
  await createVmi('on-a', { 'kubevirt.io/nodeName': 'node-a' }, { nodeName: 'node-a', phase: 'Running' });
  await createVmi('on-b', { 'kubevirt.io/nodeName': 'node-b' }, { nodeName: 'node-b', phase: 'Running' });
  await createVmi(
    'b-to-a',
    { 'kubevirt.io/nodeName': 'node-b', 'kubevirt.io/migrationTargetNodeName': 'node-a' },
    { nodeName: 'node-b', phase: 'Running', migrationState: { sourceNode: 'node-b', targetNode: 'node-a' } },
  );
}, 180000);
afterAll(async () => {
  await env?.stop();
});

describe("virt-handler's node restriction (ValidatingAdmissionPolicy, real bound tokens)", () => {
  it("a token bound to the handler's Pod names the Pod's node", async () => {
    const r = await kubeRequest<{
      status: { userInfo: { username: string; extra?: Record<string, string[]> } };
    }>(handler.a, 'POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'SelfSubjectReview',
    });
    expect(r.status.userInfo.username).toBe(`system:serviceaccount:${gen.NAMESPACE}:${gen.HANDLER}`);
    expect(r.status.userInfo.extra?.[gen.NODE_NAME_EXTRA]).toEqual(['node-a']);
  });

  it('its own Node: kubevirt.io labels and annotations yes; other nodes, other labels, the spec no', async () => {
    const heartbeat = {
      metadata: {
        labels: { 'kubevirt.io/schedulable': 'false', 'cpu-model.node.kubevirt.io/qemu64': 'true' },
        annotations: { 'kubevirt.io/heartbeat': new Date().toISOString() },
      },
    };
    expect(await attempt(handler.a, 'PATCH', node('node-a'), heartbeat)).toEqual({ code: 200, message: '' });
    expect(await attempt(handler.b, 'PATCH', node('node-b'), heartbeat)).toEqual({ code: 200, message: '' });
    const other = await attempt(handler.a, 'PATCH', node('node-b'), heartbeat);
    expect(other.code).toBe(403);
    expect(other.message).toContain('virt-handler on node node-a may not change node node-b');
    for (const bad of [
      { metadata: { labels: { zone: 'x' } } },
      { metadata: { labels: { zone: null } } },
      { metadata: { annotations: { 'node.alpha.kubernetes.io/ttl': '0' } } },
      { spec: { unschedulable: true } },
      { spec: { taints: [{ key: 'k', effect: 'NoSchedule' }] } },
    ]) {
      const r = await attempt(handler.a, 'PATCH', node('node-a'), bad);
      expect({ bad, code: r.code }).toEqual({ bad, code: 403 });
      expect(r.message).toContain(
        'virt-handler may change only kubevirt.io labels and annotations of its node node-a',
      );
    }
    const n = await kubeRequest<KubeObject & { spec: { unschedulable?: boolean } }>(
      admin,
      'GET',
      node('node-a'),
    );
    expect(n.metadata!.labels).toMatchObject({ zone: 'a', 'kubevirt.io/schedulable': 'false' });
    expect(n.spec.unschedulable).toBeUndefined();
  });

  it('VMIs on its node or migrating to it: status and kubevirt.io labels yes; other VMIs, the spec, a third node no', async () => {
    expect(
      await attempt(handler.a, 'PATCH', vmiPath('on-a'), { status: { phase: 'Running', reason: 'ok' } }),
    ).toEqual({
      code: 200,
      message: '',
    });
    const other = await attempt(handler.a, 'PATCH', vmiPath('on-b'), { status: { phase: 'Failed' } });
    expect(other.code).toBe(403);
    expect(other.message).toContain(
      `virt-handler on node node-a may not change VirtualMachineInstance ${NS}/on-b (on node-b)`,
    );
    const only = 'virt-handler may change only the status and kubevirt.io labels of VirtualMachineInstance';
    for (const bad of [
      { spec: { domain: { resources: { requests: { memory: '128Mi' } } } } },
      { metadata: { labels: { app: 'web' } } },
      { metadata: { labels: { 'kubevirt.io/nodeName': 'node-c' } } },
      { status: { nodeName: 'node-c' } },
    ]) {
      const r = await attempt(handler.a, 'PATCH', vmiPath('on-a'), bad);
      expect({ bad, code: r.code }).toEqual({ bad, code: 403 });
      expect(r.message).toContain(`${only} ${NS}/on-a`);
    }
    // a migration from node-b to node-a: the target's handler writes the migration state and takes the VMI over
    expect(
      await attempt(handler.a, 'PATCH', vmiPath('b-to-a'), {
        status: {
          migrationState: { sourceNode: 'node-b', targetNode: 'node-a', targetNodeDomainDetected: true },
        },
      }),
    ).toEqual({ code: 200, message: '' });
    expect(
      await attempt(handler.a, 'PATCH', vmiPath('b-to-a'), {
        metadata: {
          labels: { 'kubevirt.io/nodeName': 'node-a', 'kubevirt.io/migrationTargetNodeName': null },
        },
        status: { nodeName: 'node-a' },
      }),
    ).toEqual({ code: 200, message: '' });
    const moved = await kubeRequest<KubeObject & { status: { nodeName: string } }>(
      admin,
      'GET',
      vmiPath('b-to-a'),
    );
    expect((moved.metadata!.labels as Record<string, string>)['kubevirt.io/nodeName']).toBe('node-a');
    expect(moved.status.nodeName).toBe('node-a');
    // the source's handler may still write it while its migration state names node-b as the source (it reports
    // the source side's end), but may not take it back
    expect(
      await attempt(handler.b, 'PATCH', vmiPath('b-to-a'), { status: { reason: 'handed over' } }),
    ).toEqual({
      code: 200,
      message: '',
    });
    expect((await attempt(handler.b, 'PATCH', vmiPath('on-a'), { status: { reason: 'x' } })).code).toBe(403);
  });

  it("a token that names no node (not bound to a Pod) is refused, and others' writes are not affected", async () => {
    const unbound = withToken(await handlerToken());
    const r = await attempt(unbound, 'PATCH', node('node-a'), {
      metadata: { labels: { 'kubevirt.io/x': 'y' } },
    });
    expect(r.code).toBe(403);
    expect(r.message).toContain("virt-handler's token names no node");
    // the admin (and virt-controller) are not matched by the policy
    expect(
      (await attempt(admin, 'PATCH', node('node-a'), { metadata: { labels: { zone: 'x' } } })).code,
    ).toBe(200);
    expect(
      (await attempt(admin, 'PATCH', vmiPath('on-b'), { metadata: { labels: { app: 'web' } } })).code,
    ).toBe(200);
  });
});
