// Test support of the apiserver suites (not published: dist/test-*): a real kube-apiserver + etcd
// (tools/testenv) with deploy/'s CRDs and the suite's namespace, a poll that ends with the suite, and
// what kubelet does to a launcher Pod (the suites play kubelet and virt-handler themselves).
import { spawnSync } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { KubeConfig } from '@kubernetes/client-node';
import { parseManifests } from '@kubevirt-ts/api';
import { KubeClient, PODS, type KubeObject, type Resource } from '@kubevirt-ts/controller-runtime';
import { createLogger } from '@kubevirt-ts/log';
import { LABEL_CREATED_BY } from '@kubevirt-ts/renderer';
import {
  serverSideApply,
  startTestEnv,
  type KubeObject as TestObject,
  type TestEnv,
} from '@kubevirt-ts/testenv';
import { nowTimestamp, type Vmi } from './common.js';
import type { Pod } from './context.js';
import { VirtController, type VirtControllerOptions } from './manager.js';
import { startWebhookServer, type WebhookServer, type WebhookServerOptions } from './webhook.js';

export const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));

/** The objects of deploy/ file `name` (e.g. 00-namespace.yaml). */
export function deployObjects(name: string): TestObject[] {
  return parseManifests(readFileSync(join(repoRoot, 'deploy', name), 'utf8')) as TestObject[];
}

/** The CRDs of deploy/crds. */
export function deployCrds(): TestObject[] {
  const dir = join(repoRoot, 'deploy', 'crds');
  return readdirSync(dir)
    .filter((f) => f.endsWith('.yaml'))
    .flatMap((f) => parseManifests(readFileSync(join(dir, f), 'utf8')) as TestObject[]);
}

export interface Apiserver {
  env: TestEnv;
  kc: KubeConfig;
  api: KubeClient;
}

/**
 * Starts kube-apiserver + etcd, applies `before` (e.g. deploy/'s namespace) and the CRDs with server-side
 * apply as `fieldManager`, then creates the namespace `ns` the suite works in.
 */
export async function startApiserver(
  ns: string,
  fieldManager: string,
  before: TestObject[] = [],
): Promise<Apiserver> {
  const env = await startTestEnv();
  const kc = env.kubeConfig();
  const api = new KubeClient(kc);
  await serverSideApply(kc, [...before, ...deployCrds()], { fieldManager });
  await api.create({ group: '', version: 'v1', plural: 'namespaces', namespaced: false }, undefined, {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: ns },
  } as KubeObject);
  return { env, kc, api };
}

/** The launcher image the suites' controllers render Pods with, on emulation (no KVM for the test guests). */
export const TEST_RENDERER = {
  launcherImage: 'localhost/kubevirt-ts/virt-launcher:test',
  useEmulation: true,
};

/** A suite's API server and the VirtController running on it. */
export interface ControllerSuite extends Apiserver {
  controller: VirtController;
}

/**
 * {@link startApiserver}, then a started VirtController on it (log level from KVTS_LOG_LEVEL, default warn;
 * {@link TEST_RENDERER} unless `options` names a rendererConfig).
 */
export async function startController(
  ns: string,
  fieldManager: string,
  options: Omit<VirtControllerOptions, 'kubeConfig'> = {},
): Promise<ControllerSuite> {
  const s = await startApiserver(ns, fieldManager);
  const controller = new VirtController({
    kubeConfig: s.kc,
    log: createLogger({ component: 'virt-controller', level: process.env.KVTS_LOG_LEVEL ?? 'warn' }),
    rendererConfig: TEST_RENDERER,
    ...options,
  });
  await controller.start();
  return { ...s, controller };
}

/** A controller suite's afterAll: ends its polls (`finish`), stops the controller, the client and the API
 * server (each only when it was started). */
export async function stopController(s: Partial<ControllerSuite>, finish: () => void): Promise<void> {
  finish();
  await s.controller?.stop();
  s.api?.close();
  await s.env?.stop();
}

/**
 * `until(what, fn)` polls every `everyMs` until `fn` returns a value (not undefined or false); it has no
 * deadline of its own (jest's test timeout bounds it) and gives up once `finish()` is called (afterAll).
 */
export function poller(everyMs = 50): {
  until<T>(what: string, fn: () => Promise<T | undefined | false>): Promise<T>;
  finish(): void;
} {
  let finished = false;
  return {
    async until<T>(what: string, fn: () => Promise<T | undefined | false>): Promise<T> {
      let last: unknown;
      while (!finished) {
        try {
          const v = await fn();
          if (v !== undefined && v !== false) return v;
        } catch (e) {
          last = e;
        }
        await sleep(everyMs);
      }
      throw new Error(`gave up waiting for ${what} (suite finished)${last ? `: ${String(last)}` : ''}`);
    },
    finish() {
      finished = true;
    },
  };
}

/** The launcher Pods of a VMI (by the renderer's created-by label). */
export async function podsOf(api: KubeClient, vmi: Vmi): Promise<Pod[]> {
  const ns = vmi.metadata.namespace;
  return (await api.list<Pod>(PODS, ns, { labelSelector: `${LABEL_CREATED_BY}=${vmi.metadata.uid}` })).items;
}

/** The Pod status kubelet writes once the compute container of `image` runs. */
export function runningPodStatus(image: string): Record<string, unknown> {
  return {
    phase: 'Running',
    conditions: [{ type: 'Ready', status: 'True' }],
    containerStatuses: [
      {
        name: 'compute',
        ready: true,
        restartCount: 0,
        image,
        imageID: '',
        state: { running: { startedAt: nowTimestamp() } },
      },
    ],
  };
}

/** The scheduler: binds the Pod to `node`. */
export async function bindPod(api: KubeClient, pod: Pod, node: string): Promise<void> {
  const name = pod.metadata!.name!;
  await api.request('POST', `/api/v1/namespaces/${pod.metadata!.namespace}/pods/${name}/binding`, {
    apiVersion: 'v1',
    kind: 'Binding',
    metadata: { name },
    target: { apiVersion: 'v1', kind: 'Node', name: node },
  });
}

/** kubelet: binds the Pod to `node` (unless bound) and runs its compute container of `image`. */
export async function kubeletRuns(api: KubeClient, pod: Pod, node: string, image: string): Promise<Pod> {
  if (!pod.spec?.nodeName) await bindPod(api, pod, node);
  return api.patch<Pod>(
    PODS,
    pod.metadata!.namespace,
    pod.metadata!.name!,
    { status: runningPodStatus(image) },
    'merge',
    'status',
  );
}

/**
 * A VirtualMachine in `ns` with two errors (`running` together with `runStrategy`, a disk name given twice): what
 * the admission suites apply to see every error with its field path.
 */
export function invalidVm(ns: string) {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachine',
    metadata: { name: 'bad', namespace: ns },
    spec: {
      running: true,
      runStrategy: 'Always',
      template: {
        spec: {
          domain: {
            devices: {
              disks: [
                { name: 'root', disk: {} },
                { name: 'root', disk: {} },
              ],
            },
            resources: { requests: { memory: '64Mi' } },
          },
        },
      },
    },
  };
}

function openssl(certDir: string, args: string[]) {
  const r = spawnSync('openssl', args, { cwd: certDir, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
}
/** a CA and a serving certificate for 127.0.0.1, made by openssl in `certDir` */
export function makeCerts(certDir: string): { ca: string; cert: string; key: string } {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(certDir, [
    'req',
    '-x509',
    ...ec,
    '-keyout',
    'ca.key',
    '-out',
    'ca.crt',
    '-days',
    '2',
    '-subj',
    '/CN=webhook-test-ca',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  writeFileSync(
    join(certDir, 'srv.ext'),
    'basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n',
  );
  openssl(certDir, [
    'req',
    '-new',
    ...ec,
    '-keyout',
    'srv.key',
    '-out',
    'srv.csr',
    '-subj',
    '/CN=virt-controller-webhook',
  ]);
  openssl(certDir, [
    'x509',
    '-req',
    '-in',
    'srv.csr',
    '-CA',
    'ca.crt',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-days',
    '2',
    '-extfile',
    'srv.ext',
    '-out',
    'srv.crt',
  ]);
  const read = (f: string) => readFileSync(join(certDir, f), 'utf8');
  return { ca: read('ca.crt'), cert: read('srv.crt'), key: read('srv.key') };
}

/**
 * deploy/50-webhooks.yaml's webhooks of `kind`, each calling the webhook server on 127.0.0.1:`port` at its path: the
 * same rules, match conditions, side effects and failurePolicy (Fail) as a cluster gets
 */
export function webhookConfig(kind: 'Mutating' | 'Validating', port: number, ca: string): KubeObject {
  const name = kind === 'Mutating' ? 'mutate' : 'validate';
  type Hook = {
    name: string;
    clientConfig: { service: { path: string } };
    rules: unknown[];
    matchConditions?: unknown[];
    sideEffects?: string;
  };
  const deployed = deployObjects('50-webhooks.yaml').find((o) => o.kind === `${kind}WebhookConfiguration`) as
    { webhooks: Hook[] } | undefined;
  return {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: `${kind}WebhookConfiguration`,
    metadata: { name: `kubevirt-ts-${name}` },
    webhooks: deployed!.webhooks.map((w) => ({
      name: w.name,
      clientConfig: {
        url: `https://127.0.0.1:${port}${w.clientConfig.service.path}`,
        caBundle: Buffer.from(ca).toString('base64'),
      },
      rules: w.rules,
      ...(w.matchConditions ? { matchConditions: w.matchConditions } : {}),
      failurePolicy: 'Fail',
      matchPolicy: 'Equivalent',
      sideEffects: w.sideEffects ?? 'None',
      admissionReviewVersions: ['v1'],
      timeoutSeconds: 10,
    })),
  } as KubeObject;
}

const MWC: Resource = {
  group: 'admissionregistration.k8s.io',
  version: 'v1',
  plural: 'mutatingwebhookconfigurations',
  namespaced: false,
};
const VWC: Resource = {
  group: 'admissionregistration.k8s.io',
  version: 'v1',
  plural: 'validatingwebhookconfigurations',
  namespaced: false,
};

/** Registers the mutating and validating webhooks (see {@link webhookConfig}) with the API server. */
export async function registerWebhooks(api: KubeClient, port: number, ca: string): Promise<void> {
  await api.create(MWC, undefined, webhookConfig('Mutating', port, ca));
  await api.create(VWC, undefined, webhookConfig('Validating', port, ca));
}

/** A suite's webhook server and the dir of its certificates. */
export interface TestWebhooks {
  hook: WebhookServer;
  /** the certificates' dir, removed by close (a suite may keep scratch files there) */
  dir: string;
  /** stops the server and removes the dir */
  close(): Promise<void>;
}

/**
 * The admission webhooks as deploy/ registers them, served by this process: a CA and serving certificate made with
 * openssl ({@link makeCerts}), the server on loopback with `api` as its client (and `options`), and the two webhook
 * configurations ({@link registerWebhooks}).
 */
export async function startTestWebhooks(
  api: KubeClient,
  options: Omit<WebhookServerOptions, 'cert' | 'key' | 'host'> = {},
): Promise<TestWebhooks> {
  const dir = mkdtempSync(join(tmpdir(), 'kvts-webhooks-'));
  const { ca, cert, key } = makeCerts(dir);
  const hook = await startWebhookServer({ cert, key, host: '127.0.0.1', client: api, ...options });
  await registerWebhooks(api, hook.port, ca);
  return {
    hook,
    dir,
    close: async () => {
      await hook.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
