// The pure parts of the common instance types' deployment: the switch (default on, as upstream), the objects kept
// (the bundle with the operator's labels), what counts as edited, and a failed sync in the CR's status.
import {
  commonInstancetypesDeploymentEnabled,
  kubeVirtNotImplemented,
  type KubeVirt,
} from '@kubevirt-ts/api';
import { commonInstancetypesBundle, kubeVirtStatus, upToDate } from './index.js';

const kv = (configuration: KubeVirt['spec']['configuration']): KubeVirt => ({
  apiVersion: 'kubevirt.io/v1',
  kind: 'KubeVirt',
  metadata: { name: 'kubevirt', generation: 1 },
  spec: { configuration },
});

it('is enabled unless enabled is false; the field is implemented (not in NotImplemented)', () => {
  expect(commonInstancetypesDeploymentEnabled(undefined)).toBe(true);
  expect(commonInstancetypesDeploymentEnabled({})).toBe(true);
  expect(commonInstancetypesDeploymentEnabled({ commonInstancetypesDeployment: {} })).toBe(true);
  expect(commonInstancetypesDeploymentEnabled({ commonInstancetypesDeployment: { enabled: true } })).toBe(
    true,
  );
  expect(commonInstancetypesDeploymentEnabled({ commonInstancetypesDeployment: { enabled: false } })).toBe(
    false,
  );
  expect(kubeVirtNotImplemented(kv({ commonInstancetypesDeployment: { enabled: false } }))).toEqual([]);
});

it("the bundle: 65 instance types and 54 preferences, the bundle's labels plus upstream's operator labels", () => {
  const [its, prefs] = commonInstancetypesBundle('v9.9.9');
  expect(its!.resource.plural).toBe('virtualmachineclusterinstancetypes');
  expect(its!.objects).toHaveLength(65);
  expect(prefs!.resource.plural).toBe('virtualmachineclusterpreferences');
  expect(prefs!.objects).toHaveLength(54);
  const medium = its!.objects.find((o) => o.metadata.name === 'u1.medium')!;
  expect(medium.metadata.labels).toMatchObject({
    'app.kubernetes.io/managed-by': 'virt-operator',
    'app.kubernetes.io/component': 'kubevirt',
    'instancetype.kubevirt.io/vendor': 'kubevirt.io',
    'instancetype.kubevirt.io/size': 'medium',
  });
  expect(medium.metadata.annotations!['kubevirt.io/install-strategy-version']).toBe('v9.9.9');
  expect(medium.spec).toEqual({ cpu: { guest: 1 }, memory: { guest: '4Gi' } });
});

it('up to date: labels, annotations and spec equal (an extra label or annotation is an edit, as upstream)', () => {
  const want = commonInstancetypesBundle('v1')[0]!.objects[0]!;
  const cur = structuredClone({ ...want, metadata: { ...want.metadata, uid: 'u', resourceVersion: '7' } });
  expect(upToDate(cur, want)).toBe(true);
  expect(upToDate({ ...cur, spec: { cpu: { guest: 2 }, memory: { guest: '512Mi' } } }, want)).toBe(false);
  expect(
    upToDate({ ...cur, metadata: { ...cur.metadata, labels: { ...cur.metadata.labels, x: 'y' } } }, want),
  ).toBe(false);
  expect(upToDate({ ...cur, metadata: { ...cur.metadata, annotations: {} } }, want)).toBe(false);
});

it('a failed sync: Synchronized, Available, Progressing False and Degraded True, DeploymentFailed; gone when fixed', () => {
  const controller = {
    metadata: { generation: 1 },
    spec: { replicas: 1 },
    status: { observedGeneration: 1, updatedReplicas: 1, availableReplicas: 1 },
  };
  const handler = {
    metadata: { generation: 1 },
    status: {
      observedGeneration: 1,
      desiredNumberScheduled: 1,
      updatedNumberScheduled: 1,
      numberAvailable: 1,
    },
  };
  const o = { version: 'v1', now: '2024-01-01T00:00:00Z' };
  const failed = kubeVirtStatus(
    kv({}),
    { controller, handler, deploymentError: 'unable to create X u1.large: no' },
    o,
  );
  const msg = 'An error occurred during deployment: unable to create X u1.large: no';
  for (const [type, status] of [
    ['Synchronized', 'False'],
    ['Available', 'False'],
    ['Progressing', 'False'],
    ['Degraded', 'True'],
  ])
    expect(failed.conditions!.find((c) => c.type === type)).toMatchObject({
      status,
      reason: 'DeploymentFailed',
      message: msg,
    });
  const fixed = kubeVirtStatus({ ...kv({}), status: failed }, { controller, handler }, o);
  expect(fixed.conditions!.find((c) => c.type === 'Synchronized')).toBeUndefined();
  expect(fixed.conditions!.find((c) => c.type === 'Available')).toMatchObject({ status: 'True' });
});
