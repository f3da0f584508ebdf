// Test fixture (exported as @kubevirt-ts/subresources/testing): serves subresources.kubevirt.io in this
// process behind a testenv kube-apiserver's real aggregation layer, and makes kubeconfigs for users.
//
// How the API server reaches us: an APIService names a Service; with no kube-proxy in testenv a
// ClusterIP is not routable, so the Service is of type ExternalName `localhost` and the APIService's
// port is our listening port (the aggregator dials https://localhost:PORT and verifies our certificate
// for `<service>.<namespace>.svc` against the APIService's caBundle, exactly as on a cluster).
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { parseManifests, type VirtualMachineInstance } from '@kubevirt-ts/api';
import { CmdClient } from '@kubevirt-ts/cmd-protocol';
import { KubeClient, VMIS, VMS } from '@kubevirt-ts/controller-runtime';
import { startHandlerEndpoint, type HandlerEndpoint } from '@kubevirt-ts/handler';
import type { Logger } from '@kubevirt-ts/log';
import { serverSideApply, startTestEnv, type KubeObject, type TestEnv } from '@kubevirt-ts/testenv';
import { HANDLER_TLS_NAME, handlerConnector } from './handler-connector.js';
import { startSubresourceServer, type SubresourceServer } from './server.js';
import type { NodeConnector } from './verbs.js';

export const API_NAMESPACE = 'kubevirt-ts';
/** deploy/43-subresources-api.yaml's Service */
export const API_SERVICE = 'virt-api';

function openssl(args: string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const p = spawn('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    p.stderr.on('data', (d: Buffer) => (err += d.toString()));
    p.on('error', reject);
    p.on('exit', (c) => (c === 0 ? resolve() : reject(new Error(`openssl ${args[0]}: ${err.trim()}`))));
  });
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/** A self-signed CA in dir (`<name>.crt`, `<name>.key`); returns its PEM. */
export async function makeCA(dir: string, name: string): Promise<string> {
  await openssl(
    [
      'req',
      '-x509',
      ...EC,
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.crt`,
      '-days',
      '2',
      '-subj',
      `/CN=${name}`,
    ].concat(['-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign']),
    dir,
  );
  return readFile(join(dir, `${name}.crt`), 'utf8');
}

/** A certificate signed by caCrt/caKey, for a server (dns names) or a client (subject). */
export async function issue(
  dir: string,
  name: string,
  subj: string,
  ext: string,
  caCrt: string,
  caKey: string,
): Promise<{ cert: string; key: string }> {
  await writeFile(join(dir, `${name}.ext`), ext);
  await openssl(['req', '-new', ...EC, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subj], dir);
  await openssl(
    [
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      caCrt,
      '-CAkey',
      caKey,
      '-CAcreateserial',
      '-days',
      '2',
      '-extfile',
      `${name}.ext`,
      '-out',
      `${name}.crt`,
    ],
    dir,
  );
  return {
    cert: await readFile(join(dir, `${name}.crt`), 'utf8'),
    key: await readFile(join(dir, `${name}.key`), 'utf8'),
  };
}

/** The mutual TLS between virt-controller and virt-handler, as tests and benches need it. */
export interface HandlerTls {
  /** PEM of the CA that signs virt-handler's serving certificate */
  handlerCA: string;
  /** PEM of the CA that signs virt-controller's client certificate */
  controllerCA: string;
  /** virt-handler's serving certificate (names HANDLER_TLS_NAME) */
  serving: { cert: string; key: string };
  /** virt-controller's client certificate */
  clientCert: { cert: string; key: string };
}

/** Two CAs in dir, virt-handler's serving certificate and virt-controller's client certificate. */
export async function issueHandlerTls(dir: string): Promise<HandlerTls> {
  const handlerCA = await makeCA(dir, 'handler-ca');
  const controllerCA = await makeCA(dir, 'controller-ca');
  const serving = await issue(
    dir,
    'handler',
    '/CN=virt-handler',
    `basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:${HANDLER_TLS_NAME}\n`,
    'handler-ca.crt',
    'handler-ca.key',
  );
  const clientCert = await issue(
    dir,
    'controller',
    '/CN=virt-controller',
    'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n',
    'controller-ca.crt',
    'controller-ca.key',
  );
  return { handlerCA, controllerCA, serving, clientCert };
}

export interface AggregatedTestApi {
  server: SubresourceServer;
  /** admin client */
  client: KubeClient;
  /** writes a kubeconfig for `user` (client certificate from the testenv CA) and returns its path */
  userKubeconfig(user: string, groups?: string[], namespace?: string): Promise<string>;
  stop(): Promise<void>;
}

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const CONTROLLER_SA = 'kubevirt-ts-controller';

const deployFile = async (f: string): Promise<KubeObject[]> =>
  parseManifests(await readFile(join(repoRoot, 'deploy', f), 'utf8')) as KubeObject[];

/** deploy/'s CRDs, namespace, ServiceAccounts and the RBAC the subresource API needs, applied server-side. */
export async function applySubresourceDeploy(env: TestEnv): Promise<void> {
  const crdDir = join(repoRoot, 'deploy', 'crds');
  const objects: KubeObject[] = [];
  for (const f of (await readdir(crdDir)).filter((x) => x.endsWith('.yaml')))
    objects.push(...(parseManifests(await readFile(join(crdDir, f), 'utf8')) as KubeObject[]));
  for (const f of [
    '00-namespace.yaml',
    '10-service-accounts.yaml',
    '22-rbac-users.yaml',
    '23-rbac-subresources.yaml',
  ])
    objects.push(...(await deployFile(f)));
  await serverSideApply(env.kubeConfig(), objects, { fieldManager: 'subresources-test' });
}

/** A CA and a serving certificate for `virt-api.kubevirt-ts.svc` (deploy/'s Service), in dir. */
export async function issueServingCertificate(
  dir: string,
): Promise<{ cert: string; key: string; caPem: string }> {
  await makeCA(dir, 'ca');
  const svcDns = `${API_SERVICE}.${API_NAMESPACE}.svc`;
  const serving = await issue(
    dir,
    'serving',
    `/CN=${svcDns}`,
    `basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:${svcDns}\n`,
    'ca.crt',
    'ca.key',
  );
  return { ...serving, caPem: await readFile(join(dir, 'ca.crt'), 'utf8') };
}

/**
 * deploy/'s APIService as it is, plus what is set at run time (caBundle) and testenv's routing: no kube-proxy
 * runs, so the Service becomes an ExternalName for localhost and the APIService names `port`. Resolves once the
 * aggregator reports it Available and routes discovery to it.
 */
export async function registerTestApiService(env: TestEnv, port: number, caPem: string): Promise<void> {
  const kc = env.kubeConfig();
  const client = new KubeClient(kc);
  try {
    const apiService = (await deployFile('43-subresources-api.yaml')).find((o) => o.kind === 'APIService') as
      (KubeObject & { spec: { service: { port: number }; caBundle?: string } }) | undefined;
    if (!apiService) throw new Error('deploy/43-subresources-api.yaml has no APIService');
    apiService.spec.service.port = port;
    apiService.spec.caBundle = Buffer.from(caPem).toString('base64');
    const service = {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: API_SERVICE, namespace: API_NAMESPACE },
      spec: { type: 'ExternalName', externalName: 'localhost' },
    } as KubeObject;
    await serverSideApply(kc, [service, apiService], { fieldManager: 'subresources-test', force: true });
    const deadline = Date.now() + 120000;
    let last = '';
    for (;;) {
      try {
        const svc = await client.request<{
          status?: { conditions?: { type: string; status: string; message?: string }[] };
        }>('GET', '/apis/apiregistration.k8s.io/v1/apiservices/v1.subresources.kubevirt.io');
        const c = svc.status?.conditions?.find((x) => x.type === 'Available');
        last = JSON.stringify(c);
        if (c?.status === 'True') {
          await client.request('GET', '/apis/subresources.kubevirt.io/v1');
          return;
        }
      } catch (e) {
        last = (e as Error).message;
      }
      if (Date.now() > deadline)
        throw new Error(`APIService v1.subresources.kubevirt.io never became available: ${last}`);
      await new Promise((r) => setTimeout(r, 300));
    }
  } finally {
    client.close();
  }
}

/** A kubeconfig (object) with a token of virt-controller's ServiceAccount. */
export async function controllerServiceAccountKubeConfig(env: TestEnv): Promise<KubeConfig> {
  const client = new KubeClient(env.kubeConfig());
  try {
    const token = await client.request<{ status: { token: string } }>(
      'POST',
      `/api/v1/namespaces/${API_NAMESPACE}/serviceaccounts/${CONTROLLER_SA}/token`,
      { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 7200 } },
    );
    const saKc = new KubeConfig();
    saKc.loadFromOptions({
      clusters: [{ name: 'testenv', server: env.server, caData: Buffer.from(env.caPem).toString('base64') }],
      users: [{ name: CONTROLLER_SA, token: token.status.token }],
      contexts: [{ name: 'sa', cluster: 'testenv', user: CONTROLLER_SA }],
      currentContext: 'sa',
    });
    return saKc;
  } finally {
    client.close();
  }
}

/**
 * deploy/'s CRDs, namespace, ServiceAccounts and RBAC; our server in this process as virt-controller's
 * ServiceAccount (deploy/'s RBAC must be enough); deploy/'s APIService routed to it. `node` reaches the
 * virt-handlers; `handler` instead: every node's virt-handler is the endpoint on loopback `port` (testenv has
 * no Pods with IPs), dialled with mutual TLS from `tls` as virt-controller does.
 */
export async function startAggregatedTestApi(
  env: TestEnv,
  opts: { node?: NodeConnector; handler?: { tls: HandlerTls; port: number } } = {},
): Promise<AggregatedTestApi> {
  const client = new KubeClient(env.kubeConfig());
  const h = opts.handler;
  const node = h
    ? handlerConnector({
        client,
        ...h.tls.clientCert,
        ca: h.tls.handlerCA,
        port: h.port,
        address: async () => '127.0.0.1',
      })
    : opts.node;
  const dir = await mkdtemp(join(env.dir, 'subresources-'));
  await applySubresourceDeploy(env);
  const serving = await issueServingCertificate(dir);
  const server = await startSubresourceServer({
    kubeConfig: await controllerServiceAccountKubeConfig(env),
    cert: serving.cert,
    key: serving.key,
    host: '127.0.0.1',
    node,
  });
  await registerTestApiService(env, server.port, serving.caPem);

  const caCrt = join(env.dir, 'ca.crt');
  const caKey = join(env.dir, 'ca.key');
  return {
    server,
    client,
    async userKubeconfig(user, groups = [], namespace = 'default') {
      const subj = `/CN=${user}` + groups.map((g) => `/O=${g}`).join('');
      const c = await issue(
        dir,
        `user-${user}`,
        subj,
        'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n',
        caCrt,
        caKey,
      );
      const b64 = (s: string) => Buffer.from(s).toString('base64');
      const path = join(dir, `kubeconfig-${user}`);
      await writeFile(
        path,
        JSON.stringify({
          apiVersion: 'v1',
          kind: 'Config',
          clusters: [
            {
              name: 'testenv',
              cluster: { server: env.server, 'certificate-authority-data': b64(env.caPem) },
            },
          ],
          users: [
            { name: user, user: { 'client-certificate-data': b64(c.cert), 'client-key-data': b64(c.key) } },
          ],
          contexts: [{ name: user, context: { cluster: 'testenv', user, namespace } }],
          'current-context': user,
        }),
        { mode: 0o600 },
      );
      return path;
    },
    async stop() {
      client.close();
      await server.close();
    },
  };
}

/** Binds each user to a ClusterRole in namespace `ns` (a RoleBinding `<user>-<role>`), as an admin would. */
export async function bindUserRoles(
  admin: KubeClient,
  ns: string,
  bindings: readonly (readonly [user: string, clusterRole: string])[],
): Promise<void> {
  for (const [user, role] of bindings) {
    await admin.request('POST', `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings`, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: `${user}-${role.replace(':', '-')}` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
      subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
    });
  }
}

/**
 * VMs and VMIs in namespace `ns`, written with `admin` as the controllers would have made them (a minimal
 * template), for the subresource suites.
 */
export function vmObjects(admin: KubeClient, ns: string) {
  const template = { spec: { domain: { devices: {} }, terminationGracePeriodSeconds: 30 } };
  return {
    /** a VirtualMachine with `spec` and the minimal template */
    async createVm(name: string, spec: Record<string, unknown>): Promise<void> {
      await admin.create(VMS, ns, {
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachine',
        metadata: { name, namespace: ns },
        spec: { ...spec, template },
      } as never);
    },
    /** a VMI of the template's spec in `phase` on node-a, with `conditions` when given */
    async createVmi(
      name: string,
      phase: string,
      conditions?: { type: string; status: string }[],
    ): Promise<{ metadata: { uid: string } }> {
      const vmi = await admin.create<{ metadata: { uid: string } }>(VMIS, ns, {
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachineInstance',
        metadata: { name, namespace: ns },
        spec: template.spec,
      } as never);
      const status = { phase, nodeName: 'node-a', ...(conditions && { conditions }) };
      await admin.patch(VMIS, ns, name, { status }, 'merge');
      return vmi;
    },
    getVmi: (name: string) =>
      admin.get<{ metadata?: object; spec: { terminationGracePeriodSeconds: number } }>(VMIS, ns, name),
    getVm: (name: string) =>
      admin.get<{ metadata?: object; spec: Record<string, unknown>; status?: Record<string, unknown> }>(
        VMS,
        ns,
        name,
      ),
  };
}

/** {@link startStreamsTestStack}'s parts. */
export interface StreamsTestStack {
  env: TestEnv;
  api: AggregatedTestApi;
  /** admin client */
  admin: KubeClient;
  /** the launcher Pods' private dir: a VMI's serial and VNC sockets are in `<privateDir>/<uid>/` */
  privateDir: string;
  endpoint: HandlerEndpoint;
  /**
   * Creates the VMI `namespace/name` (64Mi, `devices`) and writes its phase with node `node-a` (the VMI has no
   * status subresource, as upstream: status is written with the object); the handler endpoint serves it from then.
   */
  createVmi(
    namespace: string,
    name: string,
    opts?: { phase?: string; devices?: Record<string, unknown> },
  ): Promise<VirtualMachineInstance>;
  /** Writes the VMI's phase (node `node-a`) as {@link createVmi} does. */
  setPhase(namespace: string, name: string, phase: string): Promise<VirtualMachineInstance>;
  /**
   * The unix sockets the VMI's launcher Pod would serve: its serial port (`virt-serial0`, each connection
   * handed to `serial`) and its VNC server (`virt-vnc`, greets with `RFB 003.008`).
   */
  serveStreams(vmi: VirtualMachineInstance, serial: (c: Socket) => void): Promise<void>;
  stop(): Promise<void>;
}

/**
 * The console and VNC streams end to end except QEMU: a testenv kube-apiserver, the aggregated API in this process
 * ({@link startAggregatedTestApi}) and virt-handler's real endpoint (@kubevirt-ts/handler) over mutual TLS, whose
 * launcher Pods are the VMIs made by `createVmi`, their private dirs under a temp dir named from `tmpPrefix`.
 * Streams make no cmd rpc: the launcher client is one to a socket that does not exist.
 */
export async function startStreamsTestStack(opts: {
  tmpPrefix: string;
  log?: Logger;
  pingIntervalMs?: number;
}): Promise<StreamsTestStack> {
  const dir = await mkdtemp(join(tmpdir(), opts.tmpPrefix));
  const privateDir = join(dir, 'pod', 'private');
  const vmis = new Map<string, VirtualMachineInstance>();
  const servers: Server[] = [];
  let env: TestEnv | undefined;
  let admin: KubeClient | undefined;
  let endpoint: HandlerEndpoint | undefined;
  let api: AggregatedTestApi | undefined;
  const nowhere = new CmdClient(join(dir, 'no-such-socket'));
  const stop = async () => {
    for (const s of servers) s.close();
    await endpoint?.close();
    nowhere.close();
    await api?.stop();
    admin?.close();
    await env?.stop();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await mkdir(privateDir, { recursive: true });
    const tls = await issueHandlerTls(dir);
    env = await startTestEnv();
    admin = new KubeClient(env.kubeConfig());
    endpoint = await startHandlerEndpoint({
      ...tls.serving,
      clientCA: tls.controllerCA,
      host: '127.0.0.1',
      port: 0,
      log: opts.log,
      launcherUid: process.getuid!(),
      pingIntervalMs: opts.pingIntervalMs,
      lookup: (namespace, name) => {
        const vmi = vmis.get(`${namespace}/${name}`);
        return vmi ? { vmi, client: nowhere, privateDir } : undefined;
      },
    });
    api = await startAggregatedTestApi(env, { handler: { tls, port: endpoint.port } });
  } catch (e) {
    await stop();
    throw e;
  }
  const client = admin;
  const setPhase = async (namespace: string, name: string, phase: string) => {
    const vmi = await client.patch<VirtualMachineInstance>(
      VMIS,
      namespace,
      name,
      { status: { phase, nodeName: 'node-a' } },
      'merge',
    );
    vmis.set(`${namespace}/${name}`, vmi);
    return vmi;
  };
  const listen = (path: string, onConn: (c: Socket) => void) =>
    new Promise<void>((resolve) => {
      const s = createServer(onConn);
      servers.push(s);
      s.listen(path, resolve);
    });
  return {
    env,
    api,
    admin,
    privateDir,
    endpoint,
    async createVmi(namespace, name, o = {}) {
      await client.create(VMIS, namespace, {
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachineInstance',
        metadata: { name, namespace },
        spec: { domain: { devices: o.devices ?? {}, resources: { requests: { memory: '64Mi' } } } },
      } as never);
      return setPhase(namespace, name, o.phase ?? 'Running');
    },
    setPhase,
    async serveStreams(vmi, serial) {
      const uidDir = join(privateDir, vmi.metadata!.uid!);
      await mkdir(uidDir, { recursive: true });
      await listen(join(uidDir, 'virt-serial0'), serial);
      await listen(join(uidDir, 'virt-vnc'), (c) => {
        c.on('error', () => undefined);
        c.write('RFB 003.008\n');
      });
    },
    stop,
  };
}
