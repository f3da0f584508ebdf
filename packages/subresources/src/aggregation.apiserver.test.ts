// subresources.kubevirt.io/v1 through a real kube-apiserver's aggregation layer (testenv): the server
// runs in this process, kube-apiserver proxies to it with its front-proxy client certificate, and every
// request is authorized by a real SubjectAccessReview against deploy/'s user roles.
import { readFileSync } from 'node:fs';
import { request } from 'node:https';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { KubeApiError, KubeClient, type Resource } from '@kubevirt-ts/controller-runtime';
import { startTestEnv, type TestEnv } from '@kubevirt-ts/testenv';
import { VMIMS, VMIS, VMS } from './verbs.js';
import { bindUserRoles, startAggregatedTestApi, vmObjects, type AggregatedTestApi } from './testing.js';

const NS = 'default';
const SUB = `/apis/subresources.kubevirt.io/v1/namespaces/${NS}`;

let env: TestEnv;
let api: AggregatedTestApi;
let admin: KubeClient;
let objects: ReturnType<typeof vmObjects>;
let viewer: KubeClient;
let editor: KubeClient;
let migrator: KubeClient;

const clientFor = (path: string): KubeClient => {
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  return new KubeClient(kc);
};

beforeAll(async () => {
  env = await startTestEnv();
  api = await startAggregatedTestApi(env);
  admin = api.client;
  objects = vmObjects(admin, NS);
  // alice may view, bob may edit, carol may migrate (in "default" only), through RoleBindings to deploy/'s ClusterRoles
  await bindUserRoles(admin, NS, [
    ['alice', 'kubevirt.io:view'],
    ['bob', 'kubevirt.io:edit'],
    ['carol', 'kubevirt.io:migrate'],
  ]);
  viewer = clientFor(await api.userKubeconfig('alice'));
  editor = clientFor(await api.userKubeconfig('bob'));
  migrator = clientFor(await api.userKubeconfig('carol'));
}, 300000);

afterAll(async () => {
  viewer?.close();
  editor?.close();
  migrator?.close();
  await api?.stop();
  await env?.stop();
});

const createVm = (name: string, spec: Record<string, unknown>) => objects.createVm(name, spec);
/** a VMI as the controllers would have made it, with the given phase and conditions */
const createVmi = (name: string, phase: string, conditions: { type: string; status: string }[] = []) =>
  objects.createVmi(name, phase, conditions);
const getVm = (name: string) => objects.getVm(name);

/** the failure of a request, as { status, body } */
async function failure(
  p: Promise<unknown>,
): Promise<{ status: number; body: Record<string, unknown> | string }> {
  try {
    await p;
  } catch (e) {
    if (!(e instanceof KubeApiError)) throw e;
    let body: Record<string, unknown> | string = e.body;
    try {
      body = JSON.parse(e.body) as Record<string, unknown>;
    } catch {
      /* plain text */
    }
    return { status: e.status, body };
  }
  throw new Error('the request succeeded');
}

test('discovery and version are served through the aggregator', async () => {
  const list = await viewer.request<{ groupVersion: string; resources: { name: string; verbs: string[] }[] }>(
    'GET',
    '/apis/subresources.kubevirt.io/v1',
  );
  expect(list.groupVersion).toBe('subresources.kubevirt.io/v1');
  expect(list.resources).toContainEqual(
    expect.objectContaining({ name: 'virtualmachines/start', verbs: ['update'] }),
  );
  expect(list.resources).toContainEqual(
    expect.objectContaining({ name: 'virtualmachineinstances/guestosinfo', verbs: ['get'] }),
  );
  const v = await viewer.request<{ gitVersion: string; platform: string }>(
    'GET',
    '/apis/subresources.kubevirt.io/v1/version',
  );
  expect(v.gitVersion).toMatch(/^v\d+\.\d+\.\d+/);
  expect(v.platform).toMatch(/^linux\//);
});

test('start of a Halted VM sets running: true (202); start of a running VM is a 409 as upstream', async () => {
  await createVm('halted', { running: false });
  await editor.request('PUT', `${SUB}/virtualmachines/halted/start`, {});
  expect((await getVm('halted')).spec['running']).toBe(true);

  await createVm('rs-halted', { runStrategy: 'Halted' });
  await editor.request('PUT', `${SUB}/virtualmachines/rs-halted/start`);
  expect((await getVm('rs-halted')).spec['runStrategy']).toBe('Always');

  await createVmi('halted', 'Running');
  const f = await failure(editor.request('PUT', `${SUB}/virtualmachines/halted/start`, {}));
  expect(f.status).toBe(409);
  expect(f.body).toMatchObject({
    kind: 'Status',
    reason: 'Conflict',
    code: 409,
    message: 'Operation cannot be fulfilled on virtualmachine.kubevirt.io "halted": VM is already running',
  });
});

test('start of an Always VM is refused; of a Manual VM queues a Start request in status', async () => {
  await createVm('always', { runStrategy: 'Always' });
  await createVmi('always', 'Succeeded');
  const f = await failure(editor.request('PUT', `${SUB}/virtualmachines/always/start`));
  expect(f.status).toBe(409);
  expect((f.body as { message: string }).message).toMatch(
    /"always": Always does not support manual start requests$/,
  );

  await createVm('manual', { runStrategy: 'Manual' });
  await editor.request('PUT', `${SUB}/virtualmachines/manual/start`, { paused: true });
  expect((await getVm('manual')).status?.['stateChangeRequests']).toEqual([
    { action: 'Start', data: { paused: 'true' } },
  ]);
  // a second start while the first is queued: upstream's "already underway"
  const g = await failure(editor.request('PUT', `${SUB}/virtualmachines/manual/start`));
  expect(g.status).toBe(500);
  expect((g.body as { message: string }).message).toBe(
    'Internal error occurred: unable to complete request: stop/start already underway',
  );
});

test('stop: of a stopped VM is a 409; of an Always VM sets runStrategy Halted; grace period lands on the VMI', async () => {
  await createVm('stopped', { running: false });
  const f = await failure(editor.request('PUT', `${SUB}/virtualmachines/stopped/stop`, {}));
  expect(f.status).toBe(409);
  expect((f.body as { message: string }).message).toBe(
    'Operation cannot be fulfilled on virtualmachine.kubevirt.io "stopped": VM is not running',
  );

  await createVm('running', { runStrategy: 'Always' });
  const vmi = await createVmi('running', 'Running');
  await editor.request('PUT', `${SUB}/virtualmachines/running/stop`, { gracePeriod: 0 });
  expect((await getVm('running')).spec['runStrategy']).toBe('Halted');
  const after = await objects.getVmi('running');
  expect(after.spec.terminationGracePeriodSeconds).toBe(0);

  // Manual: a Stop request naming the VMI's uid
  await createVm('manual-stop', { runStrategy: 'Manual' });
  const mvmi = await createVmi('manual-stop', 'Running');
  await editor.request('PUT', `${SUB}/virtualmachines/manual-stop/stop`);
  expect((await getVm('manual-stop')).status?.['stateChangeRequests']).toEqual([
    { action: 'Stop', uid: mvmi.metadata.uid },
  ]);
  expect(vmi.metadata.uid).toBeTruthy();
});

test('stop per run strategy as upstream: RerunOnFailure (like Manual) keeps its strategy and queues a Stop; Once becomes Halted', async () => {
  await createVm('rerun-stop', { runStrategy: 'RerunOnFailure' });
  let f = await failure(editor.request('PUT', `${SUB}/virtualmachines/rerun-stop/stop`));
  expect(f.status).toBe(409);
  expect((f.body as { message: string }).message).toMatch(/"rerun-stop": VM is not running$/);
  const vmi = await createVmi('rerun-stop', 'Running');
  await editor.request('PUT', `${SUB}/virtualmachines/rerun-stop/stop`, {});
  const vm = await getVm('rerun-stop');
  expect(vm.spec['runStrategy']).toBe('RerunOnFailure');
  expect(vm.status?.['stateChangeRequests']).toEqual([{ action: 'Stop', uid: vmi.metadata.uid }]);
  // once the VMI is gone (the VM controller's part), start queues a Start request
  await admin.delete(VMIS, NS, 'rerun-stop');
  await admin.patch(VMS, NS, 'rerun-stop', { status: { stateChangeRequests: null } }, 'merge', 'status');
  await editor.request('PUT', `${SUB}/virtualmachines/rerun-stop/start`);
  expect((await getVm('rerun-stop')).status?.['stateChangeRequests']).toEqual([
    { action: 'Start', data: {} },
  ]);
  expect((await getVm('rerun-stop')).spec['runStrategy']).toBe('RerunOnFailure');

  await createVm('once-stop', { runStrategy: 'Once' });
  await createVmi('once-stop', 'Running');
  await editor.request('PUT', `${SUB}/virtualmachines/once-stop/stop`);
  expect((await getVm('once-stop')).spec['runStrategy']).toBe('Halted');
  f = await failure(editor.request('PUT', `${SUB}/virtualmachines/once-stop/start`));
  expect(f.status).toBe(409);
});

test('restart: Stop+Start requests; refused for Halted, without a VMI, and with a positive grace period', async () => {
  await createVm('restart-me', { runStrategy: 'Always' });
  let f = await failure(editor.request('PUT', `${SUB}/virtualmachines/restart-me/restart`));
  expect(f.status).toBe(409);
  expect((f.body as { message: string }).message).toMatch(/VM is not running: Halted$/);
  const vmi = await createVmi('restart-me', 'Running');
  await editor.request('PUT', `${SUB}/virtualmachines/restart-me/restart`);
  expect((await getVm('restart-me')).status?.['stateChangeRequests']).toEqual([
    { action: 'Stop', uid: vmi.metadata.uid },
    { action: 'Start', data: {} },
  ]);
  f = await failure(
    editor.request('PUT', `${SUB}/virtualmachines/restart-me/restart`, { gracePeriodSeconds: 5 }),
  );
  expect(f).toMatchObject({
    status: 400,
    body: { reason: 'BadRequest', message: 'For force restart, only gracePeriod=0 is supported for now' },
  });
  await createVm('restart-halted', { running: false });
  f = await failure(editor.request('PUT', `${SUB}/virtualmachines/restart-halted/restart`));
  expect((f.body as { message: string }).message).toMatch(
    /RunStategy Halted does not support manual restart requests$/,
  );
});

test('restart with gracePeriodSeconds 0 deletes the running launcher Pod (grace 1 s)', async () => {
  await createVm('force', { runStrategy: 'Always' });
  const vmi = await createVmi('force', 'Running');
  const pods: Resource = { group: '', version: 'v1', plural: 'pods', namespaced: true };
  await admin.create(pods, NS, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'virt-launcher-force-abcde',
      namespace: NS,
      labels: { 'kubevirt.io': 'virt-launcher', 'kubevirt.io/created-by': vmi.metadata.uid },
    },
    spec: { nodeName: 'node-a', containers: [{ name: 'compute', image: 'virt-launcher' }] },
  } as never);
  await admin.patch(
    pods,
    NS,
    'virt-launcher-force-abcde',
    { status: { phase: 'Running' } },
    'merge',
    'status',
  );
  await editor.request('PUT', `${SUB}/virtualmachines/force/restart`, { gracePeriodSeconds: 0 });
  // no kubelet here: the graceful delete of a bound Pod leaves it with its deletion timestamp and grace period
  const pod = await admin.get<{
    metadata: { deletionTimestamp?: string; deletionGracePeriodSeconds?: number };
  }>(pods, NS, 'virt-launcher-force-abcde');
  expect(pod.metadata.deletionTimestamp).toBeTruthy();
  expect(pod.metadata.deletionGracePeriodSeconds).toBe(1);
});

test('migrate (kubevirt.io:migrate; edit is refused) creates a VirtualMachineInstanceMigration for a running VMI, 409 otherwise', async () => {
  await createVm('mig', { runStrategy: 'Always' });
  await createVmi('mig', 'Scheduled');
  // migrating is kubevirt.io:migrate's, not edit's (as upstream): kube-apiserver refuses bob before proxying
  const denied = await failure(editor.request('PUT', `${SUB}/virtualmachines/mig/migrate`, {}));
  expect(denied).toMatchObject({
    status: 403,
    body: { message: expect.stringMatching(/User "bob" cannot update resource "virtualmachines\/migrate"/) },
  });
  const f = await failure(migrator.request('PUT', `${SUB}/virtualmachines/mig/migrate`, {}));
  expect(f.status).toBe(409);
  await admin.patch(VMIS, NS, 'mig', { status: { phase: 'Running' } }, 'merge');
  await migrator.request('PUT', `${SUB}/virtualmachines/mig/migrate`, {});
  const migs = await admin.list<{ metadata: { name: string }; spec: { vmiName: string } }>(VMIMS, NS);
  const mine = migs.items.filter((m) => m.spec.vmiName === 'mig');
  expect(mine).toHaveLength(1);
  expect(mine[0]!.metadata.name).toMatch(/^kubevirt-migrate-vm-/);
  // dry run creates nothing
  await migrator.request('PUT', `${SUB}/virtualmachines/mig/migrate`, { dryRun: ['All'] });
  expect(
    (await admin.list<{ metadata?: object; spec: { vmiName: string } }>(VMIMS, NS)).items.filter(
      (m) => m.spec.vmiName === 'mig',
    ),
  ).toHaveLength(1);
});

test('VMI verbs: validated as upstream, then refused with 503 naming the missing virt-handler endpoint', async () => {
  await createVmi('pending-vmi', 'Scheduling');
  let f = await failure(editor.request('PUT', `${SUB}/virtualmachineinstances/pending-vmi/pause`, {}));
  expect(f).toMatchObject({
    status: 409,
    body: {
      message:
        'Operation cannot be fulfilled on virtualmachineinstance.kubevirt.io "pending-vmi": VM is not running',
    },
  });
  await createVmi('paused-vmi', 'Running', [{ type: 'Paused', status: 'True' }]);
  f = await failure(editor.request('PUT', `${SUB}/virtualmachineinstances/paused-vmi/pause`, {}));
  expect((f.body as { message: string }).message).toMatch(/VMI is already paused$/);
  await createVmi('run-vmi', 'Running');
  f = await failure(editor.request('PUT', `${SUB}/virtualmachineinstances/run-vmi/unpause`, {}));
  expect((f.body as { message: string }).message).toMatch(/VMI is not paused$/);
  // the guest agent reads fail as upstream's httpGetRequestHandler: 500 with the error's text as the body
  f = await failure(editor.request('GET', `${SUB}/virtualmachineinstances/run-vmi/guestosinfo`));
  expect(f).toEqual({
    status: 500,
    body: 'Operation cannot be fulfilled on virtualmachineinstance.kubevirt.io "run-vmi": VMI does not have guest agent connected',
  });
  f = await failure(editor.request('GET', `${SUB}/virtualmachineinstances/no-such-vmi/userlist`));
  expect(f).toEqual({ status: 500, body: 'virtualmachineinstance.kubevirt.io "no-such-vmi" not found' });
  f = await failure(editor.request('PUT', `${SUB}/virtualmachineinstances/run-vmi/pause`, {}));
  expect(f.status).toBe(503);
  expect((f.body as { message: string }).message).toMatch(
    /pause of virtualmachineinstance default\/run-vmi needs its virt-handler \(node node-a\).*not implemented/,
  );
});

test('errors: unknown VM 404, malformed body 400, wrong method 405, volume hotplug 501', async () => {
  let f = await failure(editor.request('PUT', `${SUB}/virtualmachines/nope/start`));
  expect(f).toMatchObject({
    status: 404,
    body: { reason: 'NotFound', message: 'virtualmachine.kubevirt.io "nope" not found' },
  });
  await createVm('body', { running: false });
  f = await failure(editor.request('PUT', `${SUB}/virtualmachines/body/stop`, { gracePeriod: 'soon' }));
  expect(f.status).toBe(400);
  expect((f.body as { message: string }).message).toMatch(
    /^Can not unmarshal Request body to struct, error: gracePeriod/,
  );
  f = await failure(admin.request('GET', `${SUB}/virtualmachines/body/start`));
  expect(f.status).toBe(405);
  // volume hotplug (upstream's addvolume / removevolume, which kubevirt.io:edit may use): refused, saying why
  for (const path of ['virtualmachines/body/addvolume', 'virtualmachineinstances/body/removevolume']) {
    f = await failure(editor.request('PUT', `${SUB}/${path}`, { name: 'v' }));
    expect(f).toMatchObject({
      status: 501,
      body: {
        reason: 'NotImplemented',
        message: expect.stringMatching(/volume hotplug is not implemented by kubevirt-ts/),
      },
    });
  }
  f = await failure(admin.request('PUT', `${SUB}/virtualmachines/body/nosuchverb`));
  expect(f.status).toBe(404);
});

test('authorization: kubevirt.io:view cannot start or pause, kubevirt.io:edit can; no rights in other namespaces', async () => {
  // kube-apiserver authorizes the subresource before it proxies (RBAC on virtualmachines/start, update)
  await createVm('authz', { running: false });
  let f = await failure(viewer.request('PUT', `${SUB}/virtualmachines/authz/start`));
  expect(f).toMatchObject({
    status: 403,
    body: {
      reason: 'Forbidden',
      message: expect.stringMatching(/User "alice" cannot update resource "virtualmachines\/start"/),
    },
  });
  expect((await getVm('authz')).spec['running']).toBe(false);
  f = await failure(viewer.request('PUT', `${SUB}/virtualmachineinstances/authz/pause`));
  expect(f.status).toBe(403);
  await editor.request('PUT', `${SUB}/virtualmachines/authz/start`);
  expect((await getVm('authz')).spec['running']).toBe(true);
  await env.createNamespace('other');
  f = await failure(
    editor.request('PUT', '/apis/subresources.kubevirt.io/v1/namespaces/other/virtualmachines/x/start'),
  );
  expect(f.status).toBe(403);
});

/** a request straight to our server (not through kube-apiserver), optionally with the front proxy's certificate */
function direct(
  method: string,
  path: string,
  headers: Record<string, string>,
  frontProxy: boolean,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: api.server.port,
        method,
        path,
        rejectUnauthorized: false,
        headers,
        ...(frontProxy
          ? {
              cert: readFileSync(join(env.dir, 'front-proxy-client.crt')),
              key: readFileSync(join(env.dir, 'front-proxy-client.key')),
            }
          : {}),
      },
      (r) => {
        let body = '';
        r.on('data', (d: Buffer) => (body += d.toString()));
        r.on('end', () => resolve({ status: r.statusCode ?? 0, body }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

test('our own checks: no front-proxy certificate is 401; the SubjectAccessReview refuses view, allows edit', async () => {
  await createVm('direct', { running: false });
  const path = `${SUB}/virtualmachines/direct/start`;
  // claiming system:masters in headers without the front proxy's certificate gets nothing
  expect(
    await direct('PUT', path, { 'X-Remote-User': 'mallory', 'X-Remote-Group': 'system:masters' }, false),
  ).toEqual({
    status: 401,
    body: 'request is not authenticated',
  });
  // the front proxy vouches for alice: our SubjectAccessReview says no (upstream answers 401 with the reason)
  const denied = await direct(
    'PUT',
    path,
    { 'X-Remote-User': 'alice', 'X-Remote-Group': 'system:authenticated' },
    true,
  );
  expect(denied.status).toBe(401);
  expect(denied.body).toMatch(/alice.*cannot update resource "virtualmachines\/start"|RBAC/);
  expect((await getVm('direct')).spec['running']).toBe(false);
  // and a missing group header is refused as upstream refuses it
  expect(await direct('PUT', path, { 'X-Remote-User': 'bob' }, true)).toEqual({
    status: 401,
    body: 'a valid group header is required for authorization',
  });
  const ok = await direct(
    'PUT',
    path,
    { 'X-Remote-User': 'bob', 'X-Remote-Group': 'system:authenticated' },
    true,
  );
  expect(ok.status).toBe(202);
  expect((await getVm('direct')).spec['running']).toBe(true);
});
