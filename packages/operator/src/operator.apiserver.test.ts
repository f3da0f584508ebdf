// virt-operator against a real kube-apiserver (tools/testenv) with deploy/'s CRDs: it creates the default KubeVirt
// CR, reports Deploying until the virt-controller Deployment and the virt-handler DaemonSet are rolled out (the test
// plays kube-controller-manager and writes their status), then Deployed/Available as `kubectl wait --for
// condition=Available` expects; a configuration patch is reflected in observedGeneration, an invalid value in
// Degraded (naming the field), a field kubevirt-ts does not implement in NotImplemented; a wrong type is refused by
// the API server itself; a deleted CR comes back; an unchanged world writes nothing.
import { setTimeout as sleep } from 'node:timers/promises';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KUBEVIRT_CR_NAME, parseManifests, type KubeVirt } from '@kubevirt-ts/api';
import {
  DAEMONSETS,
  DEPLOYMENTS,
  KUBEVIRTS,
  KubeApiError,
  KubeClient,
  type KubeObject,
} from '@kubevirt-ts/controller-runtime';
import { createLogger } from '@kubevirt-ts/log';
import {
  serverSideApply,
  startTestEnv,
  type KubeObject as TestObject,
  type TestEnv,
} from '@kubevirt-ts/testenv';
import { VirtOperator } from './index.js';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const NS = 'kubevirt-ts';
const crdDir = join(repoRoot, 'deploy', 'crds');
const crds = readdirSync(crdDir)
  .filter((f) => f.endsWith('.yaml'))
  .flatMap((f) => parseManifests(readFileSync(join(crdDir, f), 'utf8')) as TestObject[]);

let env: TestEnv;
let api: KubeClient;
let operator: VirtOperator;
let finished = false;
type Kv = KubeVirt & KubeObject;

async function until<T>(what: string, fn: () => Promise<T | undefined | false>, ms = 30000): Promise<T> {
  const end = Date.now() + ms;
  let last: unknown;
  while (!finished && Date.now() < end) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
    } catch (e) {
      last = e;
    }
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}
const getKv = () => api.get<Kv>(KUBEVIRTS, NS, KUBEVIRT_CR_NAME);
const cond = (kv: Kv, type: string) => kv.status?.conditions?.find((c) => c.type === type);

beforeAll(async () => {
  env = await startTestEnv();
  api = new KubeClient(env.kubeConfig());
  const ns = parseManifests(
    readFileSync(join(repoRoot, 'deploy', '00-namespace.yaml'), 'utf8'),
  ) as TestObject[];
  await serverSideApply(env.kubeConfig(), [...ns, ...crds], { fieldManager: 'operator-test' });
  const labels = { app: 'x' };
  const template = { metadata: { labels }, spec: { containers: [{ name: 'c', image: 'x' }] } };
  await api.create(DEPLOYMENTS, NS, {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'virt-controller', namespace: NS },
    spec: { replicas: 2, selector: { matchLabels: labels }, template },
  });
  await api.create(DAEMONSETS, NS, {
    apiVersion: 'apps/v1',
    kind: 'DaemonSet',
    metadata: { name: 'virt-handler', namespace: NS },
    spec: { selector: { matchLabels: labels }, template },
  });
  operator = new VirtOperator({
    kubeConfig: env.kubeConfig(),
    namespace: NS,
    version: 'v0.1.0',
    defaultConfiguration: { developerConfiguration: { useEmulation: true } },
    log: createLogger({ component: 'virt-operator', silent: true }),
  });
  await operator.start();
}, 120000);

afterAll(async () => {
  finished = true;
  await operator?.stop();
  api?.close();
  await env?.stop();
});

/** what kube-controller-manager writes once the components are rolled out */
async function rollOut(): Promise<void> {
  const dep = await api.get<KubeObject & { status?: object }>(DEPLOYMENTS, NS, 'virt-controller');
  await api.update(
    DEPLOYMENTS,
    {
      ...dep,
      status: {
        observedGeneration: dep.metadata!.generation,
        replicas: 2,
        updatedReplicas: 2,
        readyReplicas: 2,
        availableReplicas: 2,
      },
    },
    'status',
  );
  const ds = await api.get<KubeObject & { status?: object }>(DAEMONSETS, NS, 'virt-handler');
  await api.update(
    DAEMONSETS,
    {
      ...ds,
      status: {
        observedGeneration: ds.metadata!.generation,
        currentNumberScheduled: 1,
        numberMisscheduled: 0,
        desiredNumberScheduled: 1,
        numberReady: 1,
        updatedNumberScheduled: 1,
        numberAvailable: 1,
      },
    },
    'status',
  );
}

it('creates the default KubeVirt CR, Deploying until the components are rolled out, then Deployed', async () => {
  const created = await until('the default CR with a status', async () => {
    const kv = await getKv();
    return kv.status?.phase ? kv : undefined;
  });
  expect(created.spec.configuration).toEqual({ developerConfiguration: { useEmulation: true } });
  expect(created.status).toMatchObject({
    phase: 'Deploying',
    observedGeneration: 1,
    operatorVersion: 'v0.1.0',
  });
  expect(cond(created, 'Available')).toMatchObject({ status: 'False', reason: 'DeploymentInProgress' });
  expect(cond(created, 'Available')!.message).toMatch(
    /virt-controller: rollout not observed yet; virt-handler: rollout not observed yet/,
  );
  expect(cond(created, 'Progressing')).toMatchObject({ status: 'True', reason: 'DeploymentInProgress' });
  expect(cond(created, 'NotImplemented')).toMatchObject({ status: 'False', reason: 'AllFieldsImplemented' });
  expect(created.status!.observedKubeVirtVersion).toBeUndefined();

  await rollOut();
  const deployed = await until('Deployed', async () => {
    const kv = await getKv();
    return kv.status?.phase === 'Deployed' ? kv : undefined;
  });
  expect(cond(deployed, 'Available')).toMatchObject({
    status: 'True',
    reason: 'AllComponentsReady',
    message: 'All components are ready.',
  });
  expect(cond(deployed, 'Progressing')).toMatchObject({ status: 'False', reason: 'AllComponentsReady' });
  expect(cond(deployed, 'Degraded')).toMatchObject({ status: 'False', reason: 'AllComponentsReady' });
  expect(cond(deployed, 'Created')).toMatchObject({ status: 'True', reason: 'AllResourcesCreated' });
  expect(deployed.status!.observedKubeVirtVersion).toBe('v0.1.0');

  // nothing changed: a reconcile writes nothing
  operator.queue.add(`${NS}/${KUBEVIRT_CR_NAME}`);
  await sleep(1000);
  expect((await getKv()).metadata!.resourceVersion).toBe(deployed.metadata!.resourceVersion);
});

it('a patch shows in observedGeneration; an invalid value in Degraded and an unimplemented field in NotImplemented', async () => {
  await api.patch(KUBEVIRTS, NS, KUBEVIRT_CR_NAME, {
    spec: {
      configuration: {
        additionalGuestMemoryOverheadRatio: '0.5',
        network: { defaultNetworkInterface: 'bridge', binding: { sidecar: { sidecarImage: 'x' } } },
        developerConfiguration: { logVerbosity: { virtLauncher: 4 } },
      },
    },
  });
  const kv = await until('generation 2 observed', async () => {
    const k = await getKv();
    return k.status?.observedGeneration === 2 ? k : undefined;
  });
  expect(kv.status!.phase).toBe('Deployed');
  expect(cond(kv, 'Available')!.status).toBe('True');
  expect(cond(kv, 'Degraded')).toMatchObject({ status: 'True', reason: 'InvalidConfiguration' });
  expect(cond(kv, 'Degraded')!.message).toMatch(/^spec\.configuration\.additionalGuestMemoryOverheadRatio: /);
  expect(cond(kv, 'NotImplemented')).toMatchObject({ status: 'True', reason: 'FieldsNotImplemented' });
  expect(cond(kv, 'NotImplemented')!.message).toBe(
    'not implemented by kubevirt-ts, ignored: spec.configuration.developerConfiguration.logVerbosity, spec.configuration.network.binding',
  );

  // a wrong type never reaches the operator: the CRD's schema refuses it, naming the field
  const refused = await api
    .patch(KUBEVIRTS, NS, KUBEVIRT_CR_NAME, {
      spec: { configuration: { migrations: { progressTimeout: 0 } } },
    })
    .then(
      () => undefined,
      (e: unknown) => e,
    );
  expect(refused).toBeInstanceOf(KubeApiError);
  expect(String((refused as Error).message)).toMatch(/spec\.configuration\.migrations\.progressTimeout/);

  await api.patch(KUBEVIRTS, NS, KUBEVIRT_CR_NAME, {
    spec: {
      configuration: {
        additionalGuestMemoryOverheadRatio: null,
        network: null,
        developerConfiguration: null,
      },
    },
  });
  const fixed = await until('generation 3 observed', async () => {
    const k = await getKv();
    return k.status?.observedGeneration === 3 ? k : undefined;
  });
  expect(cond(fixed, 'Degraded')).toMatchObject({ status: 'False', reason: 'AllComponentsReady' });
  expect(cond(fixed, 'NotImplemented')!.status).toBe('False');
});

it('a component that is not ready makes the CR Deploying again; a deleted CR is created again', async () => {
  const ds = await api.get<KubeObject & { status?: Record<string, unknown> }>(DAEMONSETS, NS, 'virt-handler');
  await api.update(DAEMONSETS, { ...ds, status: { ...ds.status, numberAvailable: 0 } }, 'status');
  const deploying = await until('Deploying', async () => {
    const kv = await getKv();
    return kv.status?.phase === 'Deploying' ? kv : undefined;
  });
  expect(cond(deploying, 'Available')!.message).toMatch(/virt-handler: available on 0\/1 nodes/);
  await rollOut();

  const old = await getKv();
  await api.delete(KUBEVIRTS, NS, KUBEVIRT_CR_NAME);
  const again = await until('a new CR', async () => {
    const kv = await getKv();
    return kv.metadata!.uid !== old.metadata!.uid && kv.status?.phase === 'Deployed' ? kv : undefined;
  });
  expect(again.spec.configuration).toEqual({ developerConfiguration: { useEmulation: true } });
});
