import {
  applyMigrationPolicy,
  matchMigrationPolicy,
  type MigrationPolicy,
  type MigrationPolicySpec,
} from './migration-policy.js';
import { validateObject } from './validate.js';

const policy = (
  name: string,
  selectors: MigrationPolicySpec['selectors'],
  rest: Partial<MigrationPolicySpec> = {},
) =>
  ({
    apiVersion: 'migrations.kubevirt.io/v1alpha1',
    kind: 'MigrationPolicy',
    metadata: { name },
    spec: { selectors, ...rest },
  }) as MigrationPolicy;

test('the matching policy with the most matched labels wins; VMI labels break a tie, then the lowest name', () => {
  const vmi = { app: 'db', tier: 'gold' };
  const ns = { team: 'a' };
  const byVmi = policy('z-vmi', { virtualMachineInstanceSelector: { app: 'db' } });
  const byNs = policy('a-ns', { namespaceSelector: { team: 'a' } });
  const both = policy('m-both', {
    virtualMachineInstanceSelector: { app: 'db' },
    namespaceSelector: { team: 'a' },
  });
  const miss = policy('a-miss', { virtualMachineInstanceSelector: { app: 'db', tier: 'silver' } });
  const empty = policy('0-empty', {});
  expect(matchMigrationPolicy([byVmi, byNs, both, miss, empty], vmi, ns)?.metadata.name).toBe('m-both');
  // 1 VMI label beats 1 namespace label
  expect(matchMigrationPolicy([byNs, byVmi], vmi, ns)?.metadata.name).toBe('z-vmi');
  // equal scores: the lowest name
  const byVmi2 = policy('b-vmi', { virtualMachineInstanceSelector: { tier: 'gold' } });
  expect(matchMigrationPolicy([byVmi, byVmi2], vmi, ns)?.metadata.name).toBe('b-vmi');
  // an empty selector matches any VMI, with the lowest score
  expect(matchMigrationPolicy([empty, miss], vmi, ns)?.metadata.name).toBe('0-empty');
  expect(matchMigrationPolicy([miss], vmi, ns)).toBeUndefined();
  expect(matchMigrationPolicy([byNs], vmi, undefined)).toBeUndefined();
});

test("a policy's fields are laid over the cluster's; allowPostCopy alone sets allowWorkloadDisruption too", () => {
  const base = {
    allowAutoConverge: false,
    bandwidthPerMigration: '0Mi',
    completionTimeoutPerGiB: 150,
    allowPostCopy: false,
  };
  const spec = { selectors: {}, bandwidthPerMigration: '64Mi', allowPostCopy: true } as MigrationPolicySpec;
  expect(applyMigrationPolicy(base, spec)).toEqual({
    ...base,
    bandwidthPerMigration: '64Mi',
    allowPostCopy: true,
    allowWorkloadDisruption: true,
  });
  expect(base.bandwidthPerMigration).toBe('0Mi');
  expect(applyMigrationPolicy(base, { ...spec, allowWorkloadDisruption: false })).toMatchObject({
    allowPostCopy: true,
    allowWorkloadDisruption: false,
  });
});

test('validation: selectors required, no negative timeout, the feature-gated fields refused by name', () => {
  const p = policy('ok', { namespaceSelector: { a: 'b' } }, { completionTimeoutPerGiB: 10 });
  expect(validateObject(p)).toEqual([]);
  expect(validateObject({ ...p, spec: {} })).toEqual([
    { path: 'spec.selectors', reason: 'required field is missing' },
  ]);
  expect(validateObject({ ...p, spec: { ...p.spec, completionTimeoutPerGiB: -1 } })).toEqual([
    { path: 'spec.completionTimeoutPerGiB', reason: 'must be >= 0, got -1' },
  ]);
  expect(validateObject({ ...p, spec: { ...p.spec, maxDowntimeMs: 300 } })).toEqual([
    {
      path: 'spec.maxDowntimeMs',
      reason: expect.stringMatching(/^not implemented by kubevirt-ts .*MigrationStallDetection/),
    },
  ]);
  expect(validateObject({ ...p, apiVersion: 'migrations.kubevirt.io/v1' })).toEqual([
    {
      path: 'apiVersion',
      reason: 'must be "migrations.kubevirt.io/v1alpha1", got "migrations.kubevirt.io/v1"',
    },
  ]);
});

test('validation of instance types and preferences: schema, metadata, overcommit with hugepages', () => {
  const it = {
    apiVersion: 'instancetype.kubevirt.io/v1beta1',
    kind: 'VirtualMachineInstancetype',
    metadata: { name: 'small' },
    spec: { cpu: { guest: 1 }, memory: { guest: '128Mi' } },
  };
  expect(validateObject(it)).toEqual([]);
  expect(validateObject({ ...it, spec: { cpu: { guest: 1 } } })).toEqual([
    { path: 'spec.memory', reason: 'required field is missing' },
  ]);
  expect(
    validateObject({
      ...it,
      spec: { ...it.spec, memory: { guest: '1Gi', overcommitPercent: 10, hugepages: { pageSize: '2Mi' } } },
    }),
  ).toEqual([
    {
      path: 'spec.memory.overcommitPercent',
      reason: expect.stringMatching(/hugepages cannot be requested together/),
    },
  ]);
  expect(validateObject({ ...it, metadata: { name: 'Bad_Name' } })).toEqual([
    { path: 'metadata.name', reason: expect.any(String) },
  ]);
  const pref = {
    apiVersion: 'instancetype.kubevirt.io/v1beta1',
    kind: 'VirtualMachineClusterPreference',
    metadata: { name: 'virtio' },
    spec: { devices: { preferredDiskBus: 'virtio' }, nope: 1 },
  };
  expect(validateObject(pref)).toEqual([{ path: 'spec.nope', reason: 'unknown field' }]);
});

test('DRA: resourceClaims and a GPU named by a claim are refused with one clear reason', () => {
  const vmi = {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: 'dra' },
    spec: {
      domain: {
        devices: { gpus: [{ name: 'g', claimName: 'c', requestName: 'r' }] },
        resources: { requests: { memory: '64Mi' } },
      },
      resourceClaims: [{ name: 'c', resourceClaimTemplateName: 't' }],
    },
  };
  const errs = validateObject(vmi);
  expect(errs.map((e) => e.path).sort()).toEqual([
    'spec.domain.devices.gpus[0].deviceName',
    'spec.resourceClaims',
  ]);
  for (const e of errs) expect(e.reason).toMatch(/dynamic resource allocation \(DRA\)/);
});
