// virt-operator against a real kube-apiserver (tools/testenv) with deploy/'s CRDs: it creates the default KubeVirt
// CR, reports Deploying until the virt-controller Deployment and the virt-handler DaemonSet are rolled out (the test
// plays kube-controller-manager and writes their status), then Deployed/Available as `kubectl wait --for
// condition=Available` expects; a configuration patch is reflected in observedGeneration, an invalid value in
// Degraded (naming the field), a field kubevirt-ts does not implement in NotImplemented; a wrong type is refused by
// the API server itself; a deleted CR comes back; an unchanged world writes nothing. The common instance types and
// preferences: installed by default, a deleted or edited one restored, removed when disabled (a user's own objects
// left alone), restored when enabled again; a failure (an admission policy refusing one) reported as upstream does.
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
  deepEqual,
  type KubeObject,
} from '@kubevirt-ts/controller-runtime';
import { createLogger } from '@kubevirt-ts/log';
import {
  serverSideApply,
  startTestEnv,
  type KubeObject as TestObject,
  type TestEnv,
} from '@kubevirt-ts/testenv';
import {
  CLUSTER_INSTANCETYPES,
  CLUSTER_PREFERENCES,
  VirtOperator,
  commonInstancetypesBundle,
} from './index.js';

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
  expect(deployed.status!.defaultArchitecture).toBe(process.arch === 'x64' ? 'amd64' : process.arch);

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

// ---------------------------------------------------------------- the common instance types and preferences

type Bundled = KubeObject & {
  metadata: { name: string; uid?: string; labels?: Record<string, string> };
  spec?: unknown;
};
const SELECTOR = 'app.kubernetes.io/managed-by=virt-operator';
const managed = async (r: typeof CLUSTER_INSTANCETYPES) =>
  (await api.list<Bundled>(r, undefined, { labelSelector: SELECTOR })).items;
const bundle = commonInstancetypesBundle('v0.1.0');
const [wantIts, wantPrefs] = [bundle[0]!.objects, bundle[1]!.objects];
const wantOf = (name: string) => [...wantIts, ...wantPrefs].find((o) => o.metadata.name === name)!;
const setEnabled = (enabled: boolean | null) =>
  api.patch(KUBEVIRTS, NS, KUBEVIRT_CR_NAME, {
    spec: { configuration: { commonInstancetypesDeployment: enabled === null ? null : { enabled } } },
  });
async function allThere(): Promise<void> {
  await until('the whole bundle', async () => {
    const [its, prefs] = [await managed(CLUSTER_INSTANCETYPES), await managed(CLUSTER_PREFERENCES)];
    return its.length === wantIts.length && prefs.length === wantPrefs.length;
  });
}

describe('common instance types and preferences', () => {
  it('installs them by default, labelled as upstream labels them, and a resync writes nothing', async () => {
    expect(wantIts).toHaveLength(65);
    expect(wantPrefs).toHaveLength(54);
    await allThere();
    const medium = await api.get<Bundled>(CLUSTER_INSTANCETYPES, undefined, 'u1.medium');
    expect(medium.metadata.labels).toMatchObject({
      'app.kubernetes.io/managed-by': 'virt-operator',
      'app.kubernetes.io/component': 'kubevirt',
      'instancetype.kubevirt.io/vendor': 'kubevirt.io',
    });
    expect(medium.metadata.annotations).toMatchObject({ 'kubevirt.io/install-strategy-version': 'v0.1.0' });
    expect(medium.spec).toEqual({ cpu: { guest: 1 }, memory: { guest: '4Gi' } });
    const fedora = await api.get<Bundled>(CLUSTER_PREFERENCES, undefined, 'fedora');
    expect(fedora.spec).toEqual(wantOf('fedora').spec);

    const before = [...(await managed(CLUSTER_INSTANCETYPES)), ...(await managed(CLUSTER_PREFERENCES))];
    operator.commonInstancetypes.trigger();
    await sleep(1000);
    const after = [...(await managed(CLUSTER_INSTANCETYPES)), ...(await managed(CLUSTER_PREFERENCES))];
    expect(after.map((o) => o.metadata.resourceVersion)).toEqual(
      before.map((o) => o.metadata.resourceVersion),
    );
    expect(operator.commonInstancetypes.error).toBeUndefined();
  });

  it('a deleted one comes back; an edited one (spec, labels) is restored', async () => {
    const old = await api.get<Bundled>(CLUSTER_INSTANCETYPES, undefined, 'u1.medium');
    await api.delete(CLUSTER_INSTANCETYPES, undefined, 'u1.medium');
    const back = await until('u1.medium again', async () => {
      const o = await api.get<Bundled>(CLUSTER_INSTANCETYPES, undefined, 'u1.medium');
      return o.metadata.uid !== old.metadata.uid ? o : undefined;
    });
    expect(back.spec).toEqual(old.spec);

    // an edit of the spec, and one that removes the managed-by label (the object leaves the operator's watch)
    await api.patch(CLUSTER_PREFERENCES, undefined, 'fedora', {
      spec: { cpu: { preferredCPUTopology: 'cores' } },
    });
    await api.patch(CLUSTER_INSTANCETYPES, undefined, 'cx1.large', {
      metadata: { labels: { 'app.kubernetes.io/managed-by': null, 'someone-elses': 'x' } },
      spec: { memory: { guest: '1Gi' } },
    });
    await until('fedora restored', async () => {
      const o = await api.get<Bundled>(CLUSTER_PREFERENCES, undefined, 'fedora');
      return deepEqual(o.spec, wantOf('fedora').spec);
    });
    const cx = await until('cx1.large restored', async () => {
      const o = await api.get<Bundled>(CLUSTER_INSTANCETYPES, undefined, 'cx1.large');
      return deepEqual(o.spec, wantOf('cx1.large').spec) ? o : undefined;
    });
    expect(cx.metadata.labels).toEqual(wantOf('cx1.large').metadata.labels);
  });

  it("disabled: removes the ones it manages and leaves a user's own; enabled again: restores them", async () => {
    const own = (name: string, guest: number) => ({
      apiVersion: 'instancetype.kubevirt.io/v1beta1',
      kind: 'VirtualMachineClusterInstancetype',
      metadata: { name, labels: { team: 'a' } },
      spec: { cpu: { guest }, memory: { guest: '1Gi' } },
    });
    await api.create(CLUSTER_INSTANCETYPES, undefined, own('my.own', 3));
    await setEnabled(false);
    await until('none managed', async () => {
      const [its, prefs] = [await managed(CLUSTER_INSTANCETYPES), await managed(CLUSTER_PREFERENCES)];
      return its.length === 0 && prefs.length === 0;
    });
    expect(await api.getOrUndefined(CLUSTER_INSTANCETYPES, undefined, 'u1.medium')).toBeUndefined();
    const mine = await api.get<Bundled>(CLUSTER_INSTANCETYPES, undefined, 'my.own');
    expect(mine.spec).toEqual(own('my.own', 3).spec);

    // while disabled, a user's own object of a bundle name is left alone
    await api.create(CLUSTER_INSTANCETYPES, undefined, own('u1.medium', 7));
    await sleep(1000);
    const users = await api.get<Bundled>(CLUSTER_INSTANCETYPES, undefined, 'u1.medium');
    expect(users.spec).toEqual(own('u1.medium', 7).spec);
    expect(users.metadata.labels).toEqual({ team: 'a' });
    const kv = await getKv();
    expect(cond(kv, 'NotImplemented')!.status).toBe('False'); // the field is implemented

    // enabled again (unset: the default): the bundle comes back; as upstream, a same-named object is taken over
    await setEnabled(null);
    await allThere();
    const taken = await api.get<Bundled>(CLUSTER_INSTANCETYPES, undefined, 'u1.medium');
    expect(taken.metadata.uid).toBe(users.metadata.uid);
    expect(taken.spec).toEqual(wantOf('u1.medium').spec);
    expect(taken.metadata.labels).toEqual(wantOf('u1.medium').metadata.labels);
    const still = await api.get<Bundled>(CLUSTER_INSTANCETYPES, undefined, 'my.own');
    expect(still.metadata.resourceVersion).toBe(mine.metadata.resourceVersion);

    await setEnabled(true);
    await api.delete(CLUSTER_PREFERENCES, undefined, 'windows.11');
    await allThere();
  });

  it('a failure is reported as upstream reports it (Degraded, DeploymentFailed) until it is fixed', async () => {
    // an admission policy refuses u1.large (and a probe, to know when the policy is in force)
    const policy = {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name: 'no-u1-large' },
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: {
          resourceRules: [
            {
              apiGroups: ['instancetype.kubevirt.io'],
              apiVersions: ['*'],
              operations: ['CREATE'],
              resources: ['virtualmachineclusterinstancetypes'],
            },
          ],
        },
        validations: [
          {
            expression: "!(object.metadata.name in ['u1.large', 'probe'])",
            message: 'refused by the test policy',
          },
        ],
      },
    };
    const binding = {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name: 'no-u1-large' },
      spec: { policyName: 'no-u1-large', validationActions: ['Deny'] },
    };
    await serverSideApply(env.kubeConfig(), [policy, binding] as TestObject[], {
      fieldManager: 'operator-test',
    });
    await until('the policy in force', async () => {
      const refused = await api
        .create(CLUSTER_INSTANCETYPES, undefined, {
          apiVersion: 'instancetype.kubevirt.io/v1beta1',
          kind: 'VirtualMachineClusterInstancetype',
          metadata: { name: 'probe' },
          spec: { cpu: { guest: 1 }, memory: { guest: '1Gi' } },
        })
        .then(
          async () => {
            await api.delete(CLUSTER_INSTANCETYPES, undefined, 'probe');
            return false;
          },
          (e: unknown) => e instanceof KubeApiError && /refused by the test policy/.test(e.message),
        );
      return refused;
    });
    await api.delete(CLUSTER_INSTANCETYPES, undefined, 'u1.large');
    const failed = await until('Degraded', async () => {
      const kv = await getKv();
      return cond(kv, 'Degraded')?.reason === 'DeploymentFailed' ? kv : undefined;
    });
    const msg = cond(failed, 'Degraded')!.message!;
    expect(msg).toMatch(
      /^An error occurred during deployment: unable to create or update VirtualMachineClusterInstancetype u1\.large: .*refused by the test policy/,
    );
    expect(cond(failed, 'Degraded')!.status).toBe('True');
    expect(cond(failed, 'Available')).toMatchObject({
      status: 'False',
      reason: 'DeploymentFailed',
      message: msg,
    });
    expect(cond(failed, 'Progressing')).toMatchObject({ status: 'False', reason: 'DeploymentFailed' });
    expect(cond(failed, 'Synchronized')).toMatchObject({ status: 'False', reason: 'DeploymentFailed' });

    const admission = (plural: string) => ({
      group: 'admissionregistration.k8s.io',
      version: 'v1',
      plural,
      namespaced: false,
    });
    await api.delete(admission('validatingadmissionpolicybindings'), undefined, 'no-u1-large');
    await api.delete(admission('validatingadmissionpolicies'), undefined, 'no-u1-large');
    const fixed = await until(
      'Available again',
      async () => {
        const kv = await getKv();
        return cond(kv, 'Available')?.status === 'True' ? kv : undefined;
      },
      60000,
    );
    expect(cond(fixed, 'Synchronized')).toBeUndefined();
    expect(cond(fixed, 'Degraded')).toMatchObject({ status: 'False', reason: 'AllComponentsReady' });
    await api.get(CLUSTER_INSTANCETYPES, undefined, 'u1.large');
  }, 90000);
});
