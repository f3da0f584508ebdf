// VMI verbs end to end except the guest: kube-apiserver (aggregation) -> this package's server -> mutual TLS
// -> virt-handler's subresource endpoint (@kubevirt-ts/handler) -> real gRPC on a unix socket -> a launcher
// cmd server whose backend records the calls and answers the guest agent rpcs.
import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { CmdClient, CmdServer, launcherSocketPath } from '@kubevirt-ts/cmd-protocol';
import { KubeApiError, KubeClient, VMIS } from '@kubevirt-ts/controller-runtime';
import { startHandlerEndpoint, type HandlerEndpoint } from '@kubevirt-ts/handler';
import { createLogger } from '@kubevirt-ts/log';
import { startTestEnv, type TestEnv } from '@kubevirt-ts/testenv';
import { handlerConnector } from './handler-connector.js';
import { issue, issueHandlerTls, startAggregatedTestApi, type AggregatedTestApi } from './testing.js';

const NS = 'default';
const SUB = `/apis/subresources.kubevirt.io/v1/namespaces/${NS}/virtualmachineinstances`;
const log = createLogger({ component: 'test', silent: true });

let env: TestEnv;
let api: AggregatedTestApi;
let admin: KubeClient;
let dir: string;
let launcher: CmdServer;
let cmd: CmdClient;
let endpoint: HandlerEndpoint;
const calls: string[] = [];
let handlerCaPem = '';

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vctl-node-'));
  // the launcher: a real cmd server on a unix socket
  launcher = new CmdServer({
    socketsDir: join(dir, 'sockets'),
    logger: log,
    backend: {
      pauseVMI: async (vmi) => void calls.push(`pause ${vmi.metadata.namespace}/${vmi.metadata.name}`),
      unpauseVMI: async (vmi) => void calls.push(`unpause ${vmi.metadata.name}`),
      softRebootVMI: async (vmi) => void calls.push(`softreboot ${vmi.metadata.name}`),
      freezeVMI: async (vmi, seconds) => void calls.push(`freeze ${vmi.metadata.name} ${seconds}`),
      getGuestInfo: async () => ({ hostname: 'guest1', os: { name: 'Debian', version: '12' } }),
      getUsers: async () => [{ userName: 'root', loginTime: 1700000000 }],
    },
  });
  await launcher.start();
  await launcher.ready();
  cmd = new CmdClient(launcherSocketPath(join(dir, 'sockets')));

  // certificates: virt-handler's serving certificate (name virt-handler) and virt-controller's client certificate
  const tls = await issueHandlerTls(dir);
  const { handlerCA, controllerCA, serving } = tls;
  handlerCaPem = handlerCA;
  env = await startTestEnv();
  admin = new KubeClient(env.kubeConfig());
  endpoint = await startHandlerEndpoint({
    ...serving,
    clientCA: controllerCA,
    host: '127.0.0.1',
    port: 0,
    log,
    // what Handler.launcherFor answers on a node: the VMI (from the API server here) and its launcher client
    lookup: (namespace, name) =>
      vmis.get(`${namespace}/${name}`) ? { vmi: vmis.get(`${namespace}/${name}`)!, client: cmd } : undefined,
  });
  api = await startAggregatedTestApi(env, {
    handler: { tls, port: endpoint.port },
  });
}, 300000);

afterAll(async () => {
  cmd?.close();
  await endpoint?.close();
  await launcher?.stop();
  await api?.stop();
  admin?.close();
  await env?.stop();
  await rm(dir, { recursive: true, force: true });
});

const vmis = new Map<string, VirtualMachineInstance>();
async function runningVmi(name: string, conditions: { type: string; status: string }[] = []): Promise<void> {
  await admin.create(VMIS, NS, {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name, namespace: NS },
    spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } } },
  } as never);
  const vmi = await admin.patch<VirtualMachineInstance>(
    VMIS,
    NS,
    name,
    { status: { phase: 'Running', nodeName: 'node-a', conditions } },
    'merge',
  );
  vmis.set(`${NS}/${name}`, vmi);
}

test('pause, unpause, softreboot and freeze reach the launcher through virt-handler', async () => {
  await runningVmi('vmi1');
  await api.client.request('PUT', `${SUB}/vmi1/pause`, {});
  await api.client.request('PUT', `${SUB}/vmi1/softreboot`, {});
  await api.client.request('PUT', `${SUB}/vmi1/freeze`, { unfreezeTimeout: '2m' });
  await admin.patch(
    VMIS,
    NS,
    'vmi1',
    { status: { conditions: [{ type: 'Paused', status: 'True' }] } },
    'merge',
  );
  await api.client.request('PUT', `${SUB}/vmi1/unpause`, {});
  expect(calls).toEqual(['pause default/vmi1', 'softreboot vmi1', 'freeze vmi1 120', 'unpause vmi1']);
});

test('guestosinfo and userlist come from the launcher in upstream shapes', async () => {
  await runningVmi('vmi2', [{ type: 'AgentConnected', status: 'True' }]);
  expect(await api.client.request('GET', `${SUB}/vmi2/guestosinfo`)).toEqual({
    hostname: 'guest1',
    os: { name: 'Debian', version: '12' },
  });
  expect(await api.client.request('GET', `${SUB}/vmi2/userlist`)).toEqual({
    items: [{ userName: 'root', loginTime: 1700000000 }],
  });
  // an rpc the launcher does not support: upstream's 500 with the launcher's message
  try {
    await api.client.request('GET', `${SUB}/vmi2/filesystemlist`);
    throw new Error('filesystemlist succeeded');
  } catch (e) {
    expect(e).toBeInstanceOf(KubeApiError);
    expect((e as KubeApiError).status).toBe(500);
    expect((e as KubeApiError).message).toMatch(/virt-handler on node node-a answered 500: .*GetFilesystems/);
  }
});

test('a VMI without a launcher on the node: 500 naming the handler answer; nothing called', async () => {
  await admin.create(VMIS, NS, {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: 'elsewhere', namespace: NS },
    spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } } },
  } as never);
  await admin.patch(VMIS, NS, 'elsewhere', { status: { phase: 'Running', nodeName: 'node-b' } }, 'merge');
  const before = calls.length;
  try {
    await api.client.request('PUT', `${SUB}/elsewhere/pause`, {});
    throw new Error('pause succeeded');
  } catch (e) {
    expect((e as KubeApiError).status).toBe(500);
    expect((e as KubeApiError).message).toMatch(
      /answered 404: virtualmachineinstance default\/elsewhere has no running launcher on this node/,
    );
  }
  expect(calls.length).toBe(before);
});

test('virt-handler refuses a client without a certificate its CA signed (TLS handshake)', async () => {
  const stranger = handlerConnector({
    client: admin,
    ...(await issue(
      dir,
      'stranger',
      '/CN=stranger',
      'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n',
      'handler-ca.crt', // signed by the wrong CA
      'handler-ca.key',
    )),
    ca: handlerCaPem, // it trusts the real handler: only its own certificate is wrong
    port: endpoint.port,
    address: async () => '127.0.0.1',
  });
  const before = calls.length;
  await expect(stranger.put(vmis.get(`${NS}/vmi1`)!, 'pause', '{}')).rejects.toThrow(
    /cannot reach virt-handler on node node-a/,
  );
  expect(calls.length).toBe(before);
});
