// CustomResourceDefinitions (apiextensions.k8s.io/v1) generated from the TypeBox schemas.
// The output is a structural schema: every node has a type (or x-kubernetes-int-or-string /
// x-kubernetes-preserve-unknown-fields), no TypeBox keywords, maps as additionalProperties.
import type { TSchema } from '@sinclair/typebox';
import { yaml } from './yaml-lazy.js';
import { KubeVirtSchema } from './kubevirt-cr.js';
import { MigrationPolicySchema } from './migration-policy.js';
import {
  INSTANCETYPE_GROUP,
  VirtualMachineClusterInstancetypeSchema,
  VirtualMachineClusterPreferenceSchema,
  VirtualMachineInstancetypeSchema,
  VirtualMachinePreferenceSchema,
} from './instancetype.js';
import {
  API_GROUP,
  VirtualMachineInstanceMigrationSchema,
  VirtualMachineInstanceReplicaSetSchema,
  VirtualMachinePoolSchema,
  VirtualMachineInstancePresetSchema,
  POOL_GROUP,
  VirtualMachineInstanceSchema,
  VirtualMachineSchema,
} from './schemas.js';

/** An OpenAPI v3 schema object as a CRD holds it (apiextensions.k8s.io/v1 JSONSchemaProps). */
export type JSONSchemaProps = Record<string, unknown>;

type S = TSchema & Record<string, unknown>;

const QUANTITY_PATTERN =
  '^(\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\\+|-)?(([0-9]+(\\.[0-9]*)?)|(\\.[0-9]+))))?$';

function withDescription(out: JSONSchemaProps, s: S): JSONSchemaProps {
  if (typeof s['description'] === 'string') return { description: s['description'], ...out };
  return out;
}

/** Convert a TypeBox schema to a structural OpenAPI v3 schema for a CRD. */
export function toStructural(schema: TSchema, opts: { root?: boolean } = {}): JSONSchemaProps {
  const s = schema as S;
  if (s['x-kvts-objectmeta']) {
    // The API server owns metadata at the root; nested (template) metadata is kept as given.
    return opts.root
      ? { type: 'object' }
      : { type: 'object', nullable: true, 'x-kubernetes-preserve-unknown-fields': true };
  }
  if (s['x-kubernetes-int-or-string']) {
    return withDescription(
      {
        anyOf: [{ type: 'integer' }, { type: 'string' }],
        pattern: QUANTITY_PATTERN,
        'x-kubernetes-int-or-string': true,
      },
      s,
    );
  }
  if (s['x-kubernetes-preserve-unknown-fields']) {
    return withDescription({ type: 'object', 'x-kubernetes-preserve-unknown-fields': true }, s);
  }
  const anyOf = s['anyOf'] as S[] | undefined;
  if (anyOf) {
    if (anyOf.every((x) => typeof x['const'] === 'string')) {
      return withDescription({ type: 'string', enum: anyOf.map((x) => x['const']) }, s);
    }
    const nonNull = anyOf.filter((x) => x['type'] !== 'null');
    if (nonNull.length === 1 && anyOf.length === 2) return { ...toStructural(nonNull[0]!), nullable: true };
    throw new Error(`toStructural: cannot express union ${JSON.stringify(anyOf)} in a structural schema`);
  }
  if (s['const'] !== undefined) return withDescription({ type: typeof s['const'] }, s);
  switch (s['type']) {
    case 'object': {
      if (s['patternProperties']) {
        const pp = Object.values(s['patternProperties'] as Record<string, S>);
        return withDescription({ type: 'object', additionalProperties: toStructural(pp[0]!) }, s);
      }
      const props = (s['properties'] ?? {}) as Record<string, S>;
      const out: JSONSchemaProps = { type: 'object' };
      const keys = Object.keys(props);
      if (keys.length > 0) {
        out['properties'] = Object.fromEntries(
          keys.sort().map((k) => [k, toStructural(props[k]!, { root: false })]),
        );
      }
      const req = (s['required'] as string[] | undefined) ?? [];
      if (req.length > 0) out['required'] = [...req].sort();
      // Loose objects (status, opaque parts) keep fields this schema does not list.
      if (s['additionalProperties'] !== false) out['x-kubernetes-preserve-unknown-fields'] = true;
      return withDescription(out, s);
    }
    case 'array': {
      const out: JSONSchemaProps = { type: 'array', items: toStructural(s['items'] as S) };
      if (typeof s['maxItems'] === 'number') out['maxItems'] = s['maxItems'];
      return withDescription(out, s);
    }
    case 'integer': {
      const out: JSONSchemaProps = { type: 'integer' };
      if (typeof s['minimum'] === 'number') out['minimum'] = s['minimum'];
      if (typeof s['maximum'] === 'number') out['maximum'] = s['maximum'];
      return withDescription(out, s);
    }
    case 'string': {
      const out: JSONSchemaProps = { type: 'string' };
      if (typeof s['pattern'] === 'string') out['pattern'] = s['pattern'];
      return withDescription(out, s);
    }
    case 'number':
    case 'boolean':
      return withDescription({ type: s['type'] }, s);
    default:
      throw new Error(`toStructural: unsupported schema ${JSON.stringify(s)}`);
  }
}

/** One version a CRD serves (apiextensions.k8s.io/v1 CustomResourceDefinitionVersion, without schema). */
export interface CrdVersion {
  name: string;
  served: boolean;
  storage: boolean;
  deprecated?: boolean;
  deprecationWarning?: string;
}

/** The CRD facts of one kind: group, versions, names, short names, scope, schema and `kubectl get` columns. */
export interface KindInfo {
  kind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  /** default `kubevirt.io` */
  group?: string;
  /** default `KUBEVIRT_IO_VERSIONS` (v1 stored, v1alpha3 served and deprecated), as upstream's core kinds */
  versions?: CrdVersion[];
  /** default Namespaced */
  scope?: 'Namespaced' | 'Cluster';
  /** default `['all']` */
  categories?: string[];
  /**
   * The schema of an implemented kind. Absent: upstream serves the kind but kubevirt-ts does not implement
   * it yet; its CRD keeps any content (so tools can list and delete it) and admission refuses to create one.
   */
  schema?: TSchema;
  columns: { name: string; type: string; jsonPath: string; description?: string; priority?: number }[];
  /**
   * false: no `status` subresource (status is written with the object, as upstream's VMI CRD: one write
   * carries a phase and the labels that go with it, e.g. Scheduled and `kubevirt.io/nodeName`)
   */
  statusSubresource?: boolean;
  /** the scale subresource (`kubectl scale`): where the desired and current replicas and the selector are */
  scale?: { specReplicasPath: string; statusReplicasPath: string; labelSelectorPath?: string };
}

/** The versions upstream serves its core kubevirt.io kinds in: v1 (stored) and the deprecated v1alpha3. */
export const KUBEVIRT_IO_VERSIONS: CrdVersion[] = [
  { name: 'v1', served: true, storage: true },
  {
    name: 'v1alpha3',
    served: true,
    storage: false,
    deprecated: true,
    deprecationWarning: 'kubevirt.io/v1alpha3 is now deprecated and will be removed in a future release.',
  },
];

const served = (name: string, storage: boolean): CrdVersion => ({ name, served: true, storage });
/** an older version served next to the stored one, as upstream's pool, snapshot and clone CRDs */
const ALPHA1_BETA1 = [served('v1alpha1', false), served('v1beta1', true)];

const AGE = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };
const READY = { name: 'Ready', type: 'string', jsonPath: ".status.conditions[?(@.type=='Ready')].status" };
const PHASE = { name: 'Phase', type: 'string', jsonPath: '.status.phase' };
const col = (name: string, type: string, jsonPath: string) => ({ name, type, jsonPath });
const REPLICAS = [
  col('Desired', 'integer', '.spec.replicas'),
  col('Current', 'integer', '.status.replicas'),
  col('Ready', 'integer', '.status.readyReplicas'),
  AGE,
];
const SNAPSHOT_STATE = [
  col('ReadyToUse', 'boolean', '.status.readyToUse'),
  col('CreationTime', 'date', '.status.creationTime'),
  col('Error', 'string', '.status.error.message'),
];
const SOURCE = [
  col('SourceKind', 'string', '.spec.source.kind'),
  col('SourceName', 'string', '.spec.source.name'),
];

/** an instancetype.kubevirt.io kind: v1beta1 only, no status, no columns; the cluster-scoped ones in no category */
function instancetypeKind(kind: string, schema: TSchema, shortNames: string[], scope?: 'Cluster'): KindInfo {
  return {
    kind,
    schema,
    group: INSTANCETYPE_GROUP,
    versions: [served('v1beta1', true)],
    ...(scope ? { scope, categories: [] } : {}),
    plural: `${kind.toLowerCase()}s`,
    singular: kind.toLowerCase(),
    shortNames,
    statusSubresource: false,
    columns: [],
  };
}

/**
 * The CRDs this project serves, with upstream v1.9.0's groups, versions, names, scopes and printer columns:
 * first the implemented kinds (VirtualMachine, VirtualMachineInstance, VirtualMachineInstanceMigration, KubeVirt
 * and the four of instancetype.kubevirt.io), then every other kind upstream installs (no `schema`: served, not
 * implemented; see `NOT_IMPLEMENTED_KINDS`; MigrationPolicy, among them, has one: it is implemented).
 */
export const CRD_KINDS: KindInfo[] = [
  {
    kind: 'VirtualMachine',
    plural: 'virtualmachines',
    singular: 'virtualmachine',
    shortNames: ['vm', 'vms'],
    schema: VirtualMachineSchema,
    columns: [AGE, { name: 'Status', type: 'string', jsonPath: '.status.printableStatus' }, READY],
  },
  {
    kind: 'VirtualMachineInstance',
    plural: 'virtualmachineinstances',
    singular: 'virtualmachineinstance',
    shortNames: ['vmi', 'vmis'],
    schema: VirtualMachineInstanceSchema,
    statusSubresource: false,
    columns: [
      AGE,
      PHASE,
      { name: 'IP', type: 'string', jsonPath: '.status.interfaces[0].ipAddress' },
      { name: 'NodeName', type: 'string', jsonPath: '.status.nodeName' },
      READY,
    ],
  },
  {
    kind: 'VirtualMachineInstanceMigration',
    plural: 'virtualmachineinstancemigrations',
    singular: 'virtualmachineinstancemigration',
    shortNames: ['vmim', 'vmims'],
    schema: VirtualMachineInstanceMigrationSchema,
    columns: [PHASE, { name: 'VMI', type: 'string', jsonPath: '.spec.vmiName' }, AGE],
  },
  {
    kind: 'KubeVirt',
    plural: 'kubevirts',
    singular: 'kubevirt',
    shortNames: ['kv', 'kvs'],
    schema: KubeVirtSchema,
    columns: [AGE, PHASE],
  },
  instancetypeKind('VirtualMachineInstancetype', VirtualMachineInstancetypeSchema, [
    'vminstancetype',
    'vminstancetypes',
    'vmf',
    'vmfs',
  ]),
  instancetypeKind(
    'VirtualMachineClusterInstancetype',
    VirtualMachineClusterInstancetypeSchema,
    ['vmclusterinstancetype', 'vmclusterinstancetypes', 'vmcf', 'vmcfs'],
    'Cluster',
  ),
  instancetypeKind('VirtualMachinePreference', VirtualMachinePreferenceSchema, [
    'vmpref',
    'vmprefs',
    'vmp',
    'vmps',
  ]),
  instancetypeKind(
    'VirtualMachineClusterPreference',
    VirtualMachineClusterPreferenceSchema,
    ['vmcp', 'vmcps'],
    'Cluster',
  ),
  {
    kind: 'VirtualMachineInstanceReplicaSet',
    plural: 'virtualmachineinstancereplicasets',
    singular: 'virtualmachineinstancereplicaset',
    shortNames: ['vmirs', 'vmirss'],
    schema: VirtualMachineInstanceReplicaSetSchema,
    columns: REPLICAS,
    scale: {
      specReplicasPath: '.spec.replicas',
      statusReplicasPath: '.status.replicas',
      labelSelectorPath: '.status.labelSelector',
    },
  },
  {
    kind: 'VirtualMachinePool',
    group: POOL_GROUP,
    versions: ALPHA1_BETA1,
    plural: 'virtualmachinepools',
    singular: 'virtualmachinepool',
    shortNames: ['vmpool', 'vmpools'],
    schema: VirtualMachinePoolSchema,
    columns: REPLICAS,
    scale: {
      specReplicasPath: '.spec.replicas',
      statusReplicasPath: '.status.replicas',
      labelSelectorPath: '.status.labelSelector',
    },
  },
  {
    kind: 'VirtualMachineInstancePreset',
    plural: 'virtualmachineinstancepresets',
    singular: 'virtualmachineinstancepreset',
    shortNames: ['vmipreset', 'vmipresets'],
    schema: VirtualMachineInstancePresetSchema,
    // upstream stores presets as v1alpha3; both versions are deprecated
    versions: [
      {
        ...served('v1', false),
        deprecated: true,
        deprecationWarning:
          'kubevirt.io/v1 VirtualMachineInstancePresets is now deprecated and will be removed in v2.',
      },
      {
        ...served('v1alpha3', true),
        deprecated: true,
        deprecationWarning:
          'kubevirt.io/v1alpha3 VirtualMachineInstancePresets is now deprecated and will be removed in v2.',
      },
    ],
    statusSubresource: false,
    columns: [],
  },
  // served, not implemented
  {
    kind: 'VirtualMachineSnapshot',
    group: 'snapshot.kubevirt.io',
    versions: ALPHA1_BETA1,
    plural: 'virtualmachinesnapshots',
    singular: 'virtualmachinesnapshot',
    shortNames: ['vmsnapshot', 'vmsnapshots'],
    columns: [...SOURCE, PHASE, ...SNAPSHOT_STATE],
  },
  {
    kind: 'VirtualMachineSnapshotContent',
    group: 'snapshot.kubevirt.io',
    versions: ALPHA1_BETA1,
    plural: 'virtualmachinesnapshotcontents',
    singular: 'virtualmachinesnapshotcontent',
    shortNames: ['vmsnapshotcontent', 'vmsnapshotcontents'],
    columns: SNAPSHOT_STATE,
  },
  {
    kind: 'VirtualMachineRestore',
    group: 'snapshot.kubevirt.io',
    versions: ALPHA1_BETA1,
    plural: 'virtualmachinerestores',
    singular: 'virtualmachinerestore',
    shortNames: ['vmrestore', 'vmrestores'],
    columns: [
      col('TargetKind', 'string', '.spec.target.kind'),
      col('TargetName', 'string', '.spec.target.name'),
      col('Complete', 'boolean', '.status.complete'),
      col('RestoreTime', 'date', '.status.restoreTime'),
    ],
  },
  {
    kind: 'VirtualMachineExport',
    group: 'export.kubevirt.io',
    versions: [
      {
        ...served('v1beta1', false),
        deprecated: true,
        deprecationWarning:
          'export.kubevirt.io/v1beta1 VirtualMachineExport is now deprecated and will be removed in a future version.',
      },
      served('v1', true),
    ],
    plural: 'virtualmachineexports',
    singular: 'virtualmachineexport',
    shortNames: ['vmexport', 'vmexports'],
    columns: [...SOURCE, PHASE],
  },
  {
    kind: 'VirtualMachineBackup',
    group: 'backup.kubevirt.io',
    versions: [served('v1alpha1', true)],
    plural: 'virtualmachinebackups',
    singular: 'virtualmachinebackup',
    shortNames: ['vmbackup', 'vmbackups'],
    columns: [
      ...SOURCE,
      col('Type', 'string', '.status.type'),
      col('CheckpointName', 'string', '.status.checkpointName'),
    ],
  },
  {
    kind: 'VirtualMachineBackupTracker',
    group: 'backup.kubevirt.io',
    versions: [served('v1alpha1', true)],
    plural: 'virtualmachinebackuptrackers',
    singular: 'virtualmachinebackuptracker',
    shortNames: ['vmbackuptracker', 'vmbackuptrackers'],
    columns: [
      ...SOURCE,
      col('LatestCheckpoint', 'string', '.status.latestCheckpoint.name'),
      col('CheckpointTime', 'date', '.status.latestCheckpoint.creationTime'),
    ],
  },
  {
    kind: 'MigrationPolicy',
    group: 'migrations.kubevirt.io',
    versions: [served('v1alpha1', true)],
    scope: 'Cluster',
    categories: [],
    schema: MigrationPolicySchema,
    plural: 'migrationpolicies',
    singular: 'migrationpolicy',
    shortNames: [],
    columns: [],
  },
  {
    kind: 'VirtualMachineClone',
    group: 'clone.kubevirt.io',
    versions: ALPHA1_BETA1,
    plural: 'virtualmachineclones',
    singular: 'virtualmachineclone',
    shortNames: ['vmclone', 'vmclones'],
    columns: [
      PHASE,
      col('SourceVirtualMachine', 'string', '.spec.source.name'),
      col('TargetVirtualMachine', 'string', '.spec.target.name'),
    ],
  },
  {
    // installed by upstream's operator with the others (no feature gate)
    kind: 'Plugin',
    group: 'plugin.kubevirt.io',
    versions: [served('v1alpha1', true)],
    scope: 'Cluster',
    categories: [],
    plural: 'plugins',
    singular: 'plugin',
    shortNames: [],
    statusSubresource: false,
    columns: [],
  },
];

/** The kinds served (so listing and deleting them works) but refused at admission: not implemented yet. */
export const NOT_IMPLEMENTED_KINDS: KindInfo[] = CRD_KINDS.filter((k) => !k.schema);

/** The API group of a kind's CRD. */
export const crdGroup = (k: KindInfo): string => k.group ?? API_GROUP;

/** The versions a kind's CRD serves. */
export const crdVersions = (k: KindInfo): CrdVersion[] => k.versions ?? KUBEVIRT_IO_VERSIONS;

/** A kubevirt-ts refusal for a kind it serves but does not implement; undefined for any other kind. */
export function notImplementedMessage(
  group: string | undefined,
  kind: string | undefined,
): string | undefined {
  const k = NOT_IMPLEMENTED_KINDS.find((x) => x.kind === kind && crdGroup(x) === (group ?? API_GROUP));
  return (
    k &&
    `${k.kind} (${crdGroup(k)}): not implemented by kubevirt-ts (served so that tools can list and delete it)`
  );
}

/** What a kind without a schema stores: any content, spec and status opaque. */
const OPAQUE_SCHEMA: JSONSchemaProps = {
  type: 'object',
  properties: {
    spec: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
    status: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true },
  },
  'x-kubernetes-preserve-unknown-fields': true,
};

function openAPIV3SchemaOf(schema: TSchema): JSONSchemaProps {
  const openAPIV3Schema = toStructural(schema, { root: true });
  const props = openAPIV3Schema['properties'] as Record<string, JSONSchemaProps>;
  props['metadata'] = { type: 'object' };
  // apiVersion/kind are checked by the API server itself, not by the schema
  delete openAPIV3Schema['required'];
  openAPIV3Schema['required'] = ['spec'];
  return openAPIV3Schema;
}

/** The subresources of a kind's CRD: status (unless it has none), scale (when it has one). */
function subresources(k: KindInfo): { subresources?: Record<string, unknown> } {
  const sub: Record<string, unknown> = {};
  if (k.statusSubresource !== false) sub['status'] = {};
  if (k.scale) sub['scale'] = { ...k.scale };
  return Object.keys(sub).length ? { subresources: sub } : {};
}

/** The CRD object for one kind. */
export function crdFor(kind: string): Record<string, unknown> {
  const k = CRD_KINDS.find((x) => x.kind === kind);
  if (!k) throw new Error(`crdFor: unknown kind ${kind}`);
  const openAPIV3Schema = k.schema ? openAPIV3SchemaOf(k.schema) : OPAQUE_SCHEMA;
  const group = crdGroup(k);
  const versions = crdVersions(k);
  const categories = k.categories ?? ['all'];
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${k.plural}.${group}`,
      labels: { 'app.kubernetes.io/part-of': 'kubevirt-ts' },
    },
    spec: {
      group,
      names: {
        kind: k.kind,
        listKind: `${k.kind}List`,
        plural: k.plural,
        singular: k.singular,
        ...(k.shortNames.length ? { shortNames: k.shortNames } : {}),
        ...(categories.length ? { categories } : {}),
      },
      scope: k.scope ?? 'Namespaced',
      // the versions share one schema: no conversion webhook, only apiVersion changes
      ...(versions.length > 1 ? { conversion: { strategy: 'None' } } : {}),
      versions: versions.map((v) => ({
        ...v,
        ...subresources(k),
        ...(k.columns.length ? { additionalPrinterColumns: k.columns } : {}),
        schema: { openAPIV3Schema },
      })),
    },
  };
}

/** All CRDs as files: name -> YAML text (what `npm run gen:crds` writes into deploy/crds). */
export function generateCrdFiles(): Map<string, string> {
  const files = new Map<string, string>();
  for (const k of CRD_KINDS) {
    const text =
      '# Generated by `npm run gen:crds -w @kubevirt-ts/api` from packages/api/src/crd.ts. Do not edit.\n' +
      yaml().stringify(crdFor(k.kind), { lineWidth: 0, aliasDuplicateObjects: false });
    files.set(`${crdGroup(k)}_${k.plural}.yaml`, text);
  }
  return files;
}
