// The validating webhook's answer for the kinds kubevirt-ts serves but does not implement.
import { NOT_IMPLEMENTED_KINDS, crdGroup, crdVersions } from '@kubevirt-ts/api';
import { RESERVED_VMI_LABELS, componentUsers, validate, type AdmissionRequest } from './admission.js';

const request = (group: string, version: string, kind: string, extra: Partial<AdmissionRequest> = {}) => ({
  uid: 'u1',
  kind: { group, version, kind },
  operation: 'CREATE' as const,
  object: { apiVersion: group ? `${group}/${version}` : version, kind, metadata: { name: 'x' }, spec: {} },
  ...extra,
});

describe('validate: served but not implemented kinds', () => {
  it.each(NOT_IMPLEMENTED_KINDS.map((k) => [k.kind, k]))(
    'a create of %s is refused in every served version, naming the kind',
    (kind, k) => {
      for (const v of crdVersions(k)) {
        const r = validate(request(crdGroup(k), v.name, kind));
        expect(r).toEqual({
          uid: 'u1',
          allowed: false,
          status: {
            code: 403,
            reason: 'Forbidden',
            message: `${kind} (${crdGroup(k)}): not implemented by kubevirt-ts (served so that tools can list and delete it)`,
          },
        });
      }
    },
  );

  it('a dry run is refused the same way', () => {
    const r = validate(
      request('snapshot.kubevirt.io', 'v1beta1', 'VirtualMachineSnapshot', { dryRun: true }),
    );
    expect(r.allowed).toBe(false);
    expect(r.status?.message).toMatch(
      /^VirtualMachineSnapshot \(snapshot\.kubevirt\.io\): not implemented by kubevirt-ts/,
    );
  });

  it('updates and deletes are allowed (an object stored before is not stuck: its finalizers can go)', () => {
    for (const operation of ['UPDATE', 'DELETE'] as const)
      expect(
        validate(request('snapshot.kubevirt.io', 'v1beta1', 'VirtualMachineSnapshot', { operation })),
      ).toEqual({
        uid: 'u1',
        allowed: true,
      });
  });

  it('the group is part of the match: an implemented kind or another group is not refused as not implemented', () => {
    expect(
      validate(request('example.com', 'v1', 'VirtualMachineSnapshot')).status?.message ?? '',
    ).not.toMatch(/not implemented/);
    const vmim = request('kubevirt.io', 'v1', 'VirtualMachineInstanceMigration', {
      object: {
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachineInstanceMigration',
        metadata: { name: 'm', namespace: 'ns' },
        spec: { vmiName: 'vmi' },
      },
    });
    expect(validate(vmim)).toEqual({ uid: 'u1', allowed: true });
  });
});

describe('validate: VirtualMachineInstanceReplicaSet', () => {
  const rs = (selector: unknown) =>
    request('kubevirt.io', 'v1', 'VirtualMachineInstanceReplicaSet', {
      object: {
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachineInstanceReplicaSet',
        metadata: { name: 'x' },
        spec: {
          replicas: 2,
          selector,
          template: {
            metadata: { labels: { app: 'web' } },
            spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } } },
          },
        },
      },
    });
  it('is implemented: a selector matching the template labels is admitted', () => {
    expect(validate(rs({ matchLabels: { app: 'web' } }))).toEqual({ uid: 'u1', allowed: true });
  });
  it('a selector that does not match the template labels is refused at spec.selector', () => {
    const r = validate(rs({ matchLabels: { app: 'db' } }));
    expect(r.allowed).toBe(false);
    expect(r.status?.details?.causes).toEqual([
      expect.objectContaining({ field: 'spec.selector', message: expect.stringMatching(/does not match/) }),
    ]);
  });
  it('a malformed selector requirement is refused at spec.selector', () => {
    const r = validate(rs({ matchExpressions: [{ key: 'app', operator: 'In' }] }));
    expect(r.status?.details?.causes?.[0]?.field).toBe('spec.selector');
  });
});

describe('validate: reserved VMI labels', () => {
  const vmi = (labels: Record<string, string>) => ({
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: 'v', namespace: 'ns', labels },
    spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } } },
  });
  const req = (
    operation: 'CREATE' | 'UPDATE',
    username: string,
    labels: Record<string, string>,
    old: Record<string, string> = {},
  ): AdmissionRequest => ({
    uid: 'u1',
    kind: { group: 'kubevirt.io', version: 'v1', kind: 'VirtualMachineInstance' },
    operation,
    object: vmi(labels),
    oldObject: operation === 'UPDATE' ? vmi(old) : undefined,
    userInfo: { username },
  });
  const controller = 'system:serviceaccount:kubevirt-ts:kubevirt-ts-controller';
  const handler = 'system:serviceaccount:kubevirt-ts:kubevirt-ts-handler';

  it.each(RESERVED_VMI_LABELS)(
    '%s: a user cannot create a VMI with it nor change it; the components can',
    (l) => {
      const created = validate(req('CREATE', 'alice', { [l]: 'x', app: 'db' }));
      expect(created.allowed).toBe(false);
      expect(created.status?.details?.causes).toEqual([
        {
          field: `metadata.labels[${l}]`,
          message:
            "Forbidden: a reserved label, set only by kubevirt-ts's components (a VMI cannot be created with it)",
          reason: 'FieldValueInvalid',
        },
      ]);
      for (const [now, old] of [
        [{ [l]: 'y' }, { [l]: 'x' }],
        [{}, { [l]: 'x' }],
        [{ [l]: 'x' }, {}],
      ] as const) {
        const r = validate(req('UPDATE', 'alice', now, old));
        expect(r.status?.message).toContain(`metadata.labels[${l}]: Forbidden: a reserved label`);
        expect(validate(req('UPDATE', controller, now, old)).allowed).toBe(true);
        expect(validate(req('UPDATE', handler, now, old)).allowed).toBe(true);
      }
      // unchanged: anyone may update the VMI's other labels
      expect(
        validate(req('UPDATE', 'alice', { [l]: 'x', app: 'web' }, { [l]: 'x', app: 'db' })).allowed,
      ).toBe(true);
      expect(validate(req('CREATE', controller, { [l]: 'x' })).allowed).toBe(true);
    },
  );

  it('the components are those of the namespace virt-controller runs in', () => {
    const users = componentUsers('kv');
    expect([...users]).toEqual([
      'system:serviceaccount:kv:kubevirt-ts-operator',
      'system:serviceaccount:kv:kubevirt-ts-controller',
      'system:serviceaccount:kv:kubevirt-ts-handler',
    ]);
    const r = req('CREATE', controller, { 'kubevirt.io/nodeName': 'n' });
    expect(validate(r, { componentUsers: users }).allowed).toBe(false);
    expect(
      validate(
        { ...r, userInfo: { username: 'system:serviceaccount:kv:kubevirt-ts-controller' } },
        { componentUsers: users },
      ).allowed,
    ).toBe(true);
  });
});
