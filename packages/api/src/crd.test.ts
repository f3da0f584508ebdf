import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import {
  CRD_KINDS,
  crdFor,
  crdGroup,
  generateCrdFiles,
  KUBEVIRT_IO_VERSIONS,
  NOT_IMPLEMENTED_KINDS,
  notImplementedMessage,
  type JSONSchemaProps,
} from './crd.js';
import { parseManifests } from './manifests.js';
import { baseVm, baseVmi, baseVmim, referenceYamls, type Any } from './test-fixtures.js';

const CRD_DIR = fileURLToPath(new URL('../../../deploy/crds/', import.meta.url));

test('the committed CRDs in deploy/crds are what the generator writes (run `npm run gen:crds -w @kubevirt-ts/api`)', () => {
  const files = generateCrdFiles();
  expect(
    readdirSync(CRD_DIR)
      .filter((f) => f.endsWith('.yaml'))
      .sort(),
  ).toEqual([...files.keys()].sort());
  for (const [name, text] of files) {
    expect({ name, text: readFileSync(CRD_DIR + name, 'utf8') }).toEqual({ name, text });
  }
});

const ALLOWED = new Set([
  'description',
  'type',
  'properties',
  'items',
  'required',
  'enum',
  'nullable',
  'additionalProperties',
  'minimum',
  'maximum',
  'maxItems',
  'pattern',
  'anyOf',
  'x-kubernetes-int-or-string',
  'x-kubernetes-preserve-unknown-fields',
]);

/** Structural schema rules (apiextensions.k8s.io/v1): every node typed, no foreign keywords. */
function structuralProblems(s: JSONSchemaProps, path: string, out: string[]) {
  for (const k of Object.keys(s)) if (!ALLOWED.has(k)) out.push(`${path}: keyword ${k} is not allowed`);
  if (s['x-kubernetes-int-or-string']) {
    if (s['type'] !== undefined) out.push(`${path}: int-or-string must not have a type`);
    if (JSON.stringify(s['anyOf']) !== JSON.stringify([{ type: 'integer' }, { type: 'string' }]))
      out.push(`${path}: bad anyOf`);
    return;
  }
  if (s['anyOf']) out.push(`${path}: anyOf only allowed for int-or-string`);
  if (typeof s['type'] !== 'string') out.push(`${path}: missing type`);
  if (s['properties'] && s['additionalProperties'] !== undefined)
    out.push(`${path}: properties and additionalProperties together`);
  if (s['type'] === 'array') {
    if (!s['items']) out.push(`${path}: array without items`);
    else structuralProblems(s['items'] as JSONSchemaProps, `${path}[]`, out);
  }
  for (const [k, v] of Object.entries((s['properties'] ?? {}) as Record<string, JSONSchemaProps>))
    structuralProblems(v, `${path}.${k}`, out);
  if (typeof s['additionalProperties'] === 'object')
    structuralProblems(s['additionalProperties'] as JSONSchemaProps, `${path}{}`, out);
  for (const r of (s['required'] as string[] | undefined) ?? []) {
    if (!(s['properties'] as Record<string, unknown> | undefined)?.[r])
      out.push(`${path}: required ${r} is not a property`);
  }
}

/** Fields of `v` the API server would prune with this schema. */
function prunedFields(s: JSONSchemaProps, v: unknown, path: string, out: string[]) {
  if (s['x-kubernetes-preserve-unknown-fields'] && !s['properties']) return;
  if (Array.isArray(v)) {
    v.forEach((x, i) => prunedFields((s['items'] ?? {}) as JSONSchemaProps, x, `${path}[${i}]`, out));
    return;
  }
  if (typeof v !== 'object' || v === null) return;
  const props = (s['properties'] ?? {}) as Record<string, JSONSchemaProps>;
  for (const [k, x] of Object.entries(v)) {
    if (path === '' && k === 'metadata') continue; // ObjectMeta is the API server's own
    if (props[k]) prunedFields(props[k]!, x, `${path}.${k}`, out);
    else if (typeof s['additionalProperties'] === 'object')
      prunedFields(s['additionalProperties'] as JSONSchemaProps, x, `${path}.${k}`, out);
    else if (!s['x-kubernetes-preserve-unknown-fields']) out.push(`${path}.${k}`);
  }
}

const IMPLEMENTED = CRD_KINDS.filter((k) => k.schema);

describe.each(IMPLEMENTED.map((k) => [k.kind, k]))('%s CRD', (kind, info) => {
  const crd: Any = crdFor(kind);
  // the stored version (a pool is also served as v1alpha1, listed first)
  const version = crd.spec.versions.find((v: Any) => v.storage);
  const schema = version.schema.openAPIV3Schema;

  test('is a v1 CRD (status subresource except on the VMI, as upstream), names, short names and category all', () => {
    expect(crd.apiVersion).toBe('apiextensions.k8s.io/v1');
    expect(crd.metadata.name).toBe(`${info.plural}.${info.group ?? 'kubevirt.io'}`);
    const clusterScoped = kind.includes('Cluster') || kind === 'MigrationPolicy';
    expect(crd.spec.scope).toBe(clusterScoped ? 'Cluster' : 'Namespaced');
    expect(crd.spec.names.kind).toBe(kind);
    // as upstream: the cluster-scoped instance types, preferences and migration policies are in no category
    expect(crd.spec.names.categories).toEqual(clusterScoped ? undefined : ['all']);
    // as upstream: a migration policy has no short name
    expect(crd.spec.names.shortNames?.[0]).toBe(
      {
        VirtualMachine: 'vm',
        VirtualMachineInstance: 'vmi',
        VirtualMachineInstanceMigration: 'vmim',
        KubeVirt: 'kv',
        VirtualMachineInstanceReplicaSet: 'vmirs',
        VirtualMachineInstancetype: 'vminstancetype',
        VirtualMachineClusterInstancetype: 'vmclusterinstancetype',
        VirtualMachinePreference: 'vmpref',
        VirtualMachineClusterPreference: 'vmcp',
        VirtualMachinePool: 'vmpool',
        VirtualMachineInstancePreset: 'vmipreset',
      }[kind],
    );
    expect(version).toMatchObject({ served: true, storage: true });
    if (kind === 'VirtualMachineInstancePreset') {
      // as upstream: stored as v1alpha3, both versions deprecated
      expect(crd.spec.versions.map((v: Any) => [v.name, v.storage, v.deprecated])).toEqual([
        ['v1', false, true],
        ['v1alpha3', true, true],
      ]);
    } else if (!info.group || info.group === 'kubevirt.io') {
      expect(version.name).toBe('v1');
      // upstream's deprecated v1alpha3 is served with the same schema (conversion None)
      expect(crd.spec.versions.map((v: Any) => v.name)).toEqual(['v1', 'v1alpha3']);
      expect(crd.spec.versions[1]).toMatchObject({ ...KUBEVIRT_IO_VERSIONS[1], schema: version.schema });
      expect(crd.spec.conversion).toEqual({ strategy: 'None' });
    } else if (kind === 'VirtualMachinePool')
      expect(crd.spec.versions.map((v: Any) => v.name)).toEqual(['v1alpha1', 'v1beta1']);
    else if (kind === 'MigrationPolicy')
      expect(crd.spec.versions.map((v: Any) => v.name)).toEqual(['v1alpha1']);
    else expect(crd.spec.versions.map((v: Any) => v.name)).toEqual(['v1beta1']);
    // no status subresource on the VMI (as upstream), none at all on instance types and preferences
    if (
      kind === 'VirtualMachineInstance' ||
      kind === 'VirtualMachineInstancePreset' ||
      (info.group && kind !== 'VirtualMachinePool' && kind !== 'MigrationPolicy')
    )
      expect(version.subresources).toBeUndefined();
    else if (kind === 'VirtualMachineInstanceReplicaSet' || kind === 'VirtualMachinePool')
      // and the scale subresource: `kubectl scale vmirs`
      expect(version.subresources).toEqual({
        status: {},
        scale: {
          specReplicasPath: '.spec.replicas',
          statusReplicasPath: '.status.replicas',
          labelSelectorPath: '.status.labelSelector',
        },
      });
    else expect(version.subresources).toEqual({ status: {} });
  });

  test('has the printer columns that apply to it', () => {
    const names = (version.additionalPrinterColumns ?? []).map((c: Any) => c.name);
    const want =
      {
        VirtualMachine: ['Age', 'Status', 'Ready'],
        VirtualMachineInstance: ['Age', 'Phase', 'IP', 'NodeName', 'Ready'],
        VirtualMachineInstanceMigration: ['Phase', 'VMI', 'Age'],
        KubeVirt: ['Age', 'Phase'],
        VirtualMachineInstanceReplicaSet: ['Desired', 'Current', 'Ready', 'Age'],
        VirtualMachinePool: ['Desired', 'Current', 'Ready', 'Age'],
      }[kind] ?? [];
    expect(names).toEqual(want);
    for (const c of version.additionalPrinterColumns ?? []) expect(c.jsonPath).toMatch(/^\./);
  });

  test('has a structural schema', () => {
    const problems: string[] = [];
    structuralProblems(schema, '', problems);
    expect(problems).toEqual([]);
    expect(schema.properties.metadata).toEqual({ type: 'object' });
    expect(schema.required).toEqual(['spec']);
  });
});

test('quantities are int-or-string and template metadata is kept', () => {
  const vmi: Any = crdFor('VirtualMachineInstance');
  const domain = vmi.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.domain;
  expect(
    domain.properties.resources.properties.requests.additionalProperties['x-kubernetes-int-or-string'],
  ).toBe(true);
  expect(domain.properties.memory.properties.guest['x-kubernetes-int-or-string']).toBe(true);
  const vm: Any = crdFor('VirtualMachine');
  const tmeta =
    vm.spec.versions[0].schema.openAPIV3Schema.properties.spec.properties.template.properties.metadata;
  expect(tmeta).toMatchObject({ type: 'object', 'x-kubernetes-preserve-unknown-fields': true });
});

test('the API server would prune no field of the reference VMIs and fixtures', () => {
  const byKind = Object.fromEntries(
    IMPLEMENTED.map((k) => [k.kind, (crdFor(k.kind) as Any).spec.versions[0].schema.openAPIV3Schema]),
  );
  const docs: Any[] = [
    ...referenceYamls().flatMap((r) => parseManifests(r.text)),
    baseVmi(),
    baseVm(),
    baseVmim(),
  ];
  for (const doc of docs) {
    const out: string[] = [];
    prunedFields(byKind[doc.kind], doc, '', out);
    expect({ name: doc.metadata.name, pruned: out }).toEqual({ name: doc.metadata.name, pruned: [] });
  }
});

test('the committed YAML parses back to the generated object', () => {
  for (const k of CRD_KINDS) {
    const text = readFileSync(`${CRD_DIR}${crdGroup(k)}_${k.plural}.yaml`, 'utf8');
    expect(parse(text)).toEqual(crdFor(k.kind));
  }
});

test('every kind upstream v1.9.0 installs is served, with its group, scope and stored version', () => {
  const served = Object.fromEntries(
    CRD_KINDS.map((k) => {
      const crd: Any = crdFor(k.kind);
      const stored = crd.spec.versions.filter((v: Any) => v.storage).map((v: Any) => v.name);
      return [
        k.kind,
        `${crd.spec.group} ${crd.spec.scope} ${crd.spec.versions.map((v: Any) => v.name).join(',')} ${stored}`,
      ];
    }),
  );
  expect(served).toEqual({
    VirtualMachine: 'kubevirt.io Namespaced v1,v1alpha3 v1',
    VirtualMachineInstance: 'kubevirt.io Namespaced v1,v1alpha3 v1',
    VirtualMachineInstanceMigration: 'kubevirt.io Namespaced v1,v1alpha3 v1',
    KubeVirt: 'kubevirt.io Namespaced v1,v1alpha3 v1',
    VirtualMachineInstanceReplicaSet: 'kubevirt.io Namespaced v1,v1alpha3 v1',
    VirtualMachineInstancePreset: 'kubevirt.io Namespaced v1,v1alpha3 v1alpha3',
    VirtualMachinePool: 'pool.kubevirt.io Namespaced v1alpha1,v1beta1 v1beta1',
    VirtualMachineSnapshot: 'snapshot.kubevirt.io Namespaced v1alpha1,v1beta1 v1beta1',
    VirtualMachineSnapshotContent: 'snapshot.kubevirt.io Namespaced v1alpha1,v1beta1 v1beta1',
    VirtualMachineRestore: 'snapshot.kubevirt.io Namespaced v1alpha1,v1beta1 v1beta1',
    VirtualMachineExport: 'export.kubevirt.io Namespaced v1beta1,v1 v1',
    VirtualMachineBackup: 'backup.kubevirt.io Namespaced v1alpha1 v1alpha1',
    VirtualMachineBackupTracker: 'backup.kubevirt.io Namespaced v1alpha1 v1alpha1',
    VirtualMachineInstancetype: 'instancetype.kubevirt.io Namespaced v1beta1 v1beta1',
    VirtualMachineClusterInstancetype: 'instancetype.kubevirt.io Cluster v1beta1 v1beta1',
    VirtualMachinePreference: 'instancetype.kubevirt.io Namespaced v1beta1 v1beta1',
    VirtualMachineClusterPreference: 'instancetype.kubevirt.io Cluster v1beta1 v1beta1',
    MigrationPolicy: 'migrations.kubevirt.io Cluster v1alpha1 v1alpha1',
    VirtualMachineClone: 'clone.kubevirt.io Namespaced v1alpha1,v1beta1 v1beta1',
    Plugin: 'plugin.kubevirt.io Cluster v1alpha1 v1alpha1',
  });
  // plurals are unique across groups (deploy/'s 01-crd-<plural>.yaml links rely on it)
  expect(new Set(CRD_KINDS.map((k) => k.plural)).size).toBe(CRD_KINDS.length);
});

describe.each(NOT_IMPLEMENTED_KINDS.map((k) => [k.kind, k]))(
  '%s CRD (served, not implemented)',
  (kind, info) => {
    const crd: Any = crdFor(kind);

    test('keeps any content: a structural schema with spec and status opaque, in every version', () => {
      for (const v of crd.spec.versions) {
        const schema = v.schema.openAPIV3Schema;
        const problems: string[] = [];
        structuralProblems(schema, '', problems);
        expect(problems).toEqual([]);
        const pruned: string[] = [];
        prunedFields(schema, { spec: { a: [{ b: 1 }] }, status: { phase: 'x' }, extra: true }, '', pruned);
        expect(pruned).toEqual([]);
        expect(schema.required).toBeUndefined();
        expect(v.served).toBe(true);
      }
      expect(crd.spec.versions.filter((v: Any) => v.storage)).toHaveLength(1);
      expect(crd.metadata.name).toBe(`${info.plural}.${crdGroup(info)}`);
    });

    test('admission names it as not implemented', () => {
      expect(notImplementedMessage(crdGroup(info), kind)).toBe(
        `${kind} (${crdGroup(info)}): not implemented by kubevirt-ts (served so that tools can list and delete it)`,
      );
    });
  },
);

test('implemented kinds and other groups are not refused as not implemented', () => {
  expect(notImplementedMessage('kubevirt.io', 'VirtualMachine')).toBeUndefined();
  expect(notImplementedMessage(undefined, 'VirtualMachineInstanceReplicaSet')).toBeUndefined();
  expect(notImplementedMessage(undefined, 'VirtualMachineInstancePreset')).toBeUndefined();
  expect(notImplementedMessage('snapshot.kubevirt.io', 'VirtualMachineSnapshot')).toMatch(/not implemented/);
  expect(notImplementedMessage('example.com', 'VirtualMachinePool')).toBeUndefined();
});
