// CustomResourceDefinitions (apiextensions.k8s.io/v1) generated from the TypeBox schemas.
// The output is a structural schema: every node has a type (or x-kubernetes-int-or-string /
// x-kubernetes-preserve-unknown-fields), no TypeBox keywords, maps as additionalProperties.
import type { TSchema } from '@sinclair/typebox';
import { yaml } from './yaml-lazy.js';
import { KubeVirtSchema } from './kubevirt-cr.js';
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

/** The CRD facts of one kind: names, short names, schema and `kubectl get` columns. */
export interface KindInfo {
  kind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  schema: TSchema;
  columns: { name: string; type: string; jsonPath: string; description?: string; priority?: number }[];
  /**
   * false: no `status` subresource (status is written with the object, as upstream's VMI CRD: one write
   * carries a phase and the labels that go with it, e.g. Scheduled and `kubevirt.io/nodeName`)
   */
  statusSubresource?: boolean;
  /** API group and version (default kubevirt.io, v1) */
  group?: string;
  version?: string;
  /** default Namespaced */
  scope?: 'Namespaced' | 'Cluster';
  /** default `['all']` */
  categories?: string[];
}

const AGE = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };
const READY = { name: 'Ready', type: 'string', jsonPath: ".status.conditions[?(@.type=='Ready')].status" };

/** The CRDs of kubevirt.io/v1 this project serves (VirtualMachine, VirtualMachineInstance,
 * VirtualMachineInstanceMigration, KubeVirt), with upstream's names and printer columns. */
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
      { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
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
    columns: [
      { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
      { name: 'VMI', type: 'string', jsonPath: '.spec.vmiName' },
      AGE,
    ],
  },
  {
    kind: 'KubeVirt',
    plural: 'kubevirts',
    singular: 'kubevirt',
    shortNames: ['kv', 'kvs'],
    schema: KubeVirtSchema,
    columns: [AGE, { name: 'Phase', type: 'string', jsonPath: '.status.phase' }],
  },
  ...(
    [
      [
        'VirtualMachineInstancetype',
        VirtualMachineInstancetypeSchema,
        ['vminstancetype', 'vminstancetypes', 'vmf', 'vmfs'],
      ],
      [
        'VirtualMachineClusterInstancetype',
        VirtualMachineClusterInstancetypeSchema,
        ['vmclusterinstancetype', 'vmclusterinstancetypes', 'vmcf', 'vmcfs'],
      ],
      ['VirtualMachinePreference', VirtualMachinePreferenceSchema, ['vmpref', 'vmprefs', 'vmp', 'vmps']],
      ['VirtualMachineClusterPreference', VirtualMachineClusterPreferenceSchema, ['vmcp', 'vmcps']],
    ] as const
  ).map(([kind, schema, shortNames]): KindInfo => ({
    kind,
    plural: `${kind.toLowerCase()}s`,
    singular: kind.toLowerCase(),
    shortNames: [...shortNames],
    schema,
    columns: [],
    statusSubresource: false,
    group: INSTANCETYPE_GROUP,
    version: 'v1beta1',
    // upstream puts the cluster-scoped ones in no category
    ...(kind.includes('Cluster') ? { scope: 'Cluster' as const, categories: [] } : {}),
  })),
];

/** The CRD object for one kind. */
export function crdFor(kind: string): Record<string, unknown> {
  const k = CRD_KINDS.find((x) => x.kind === kind);
  if (!k) throw new Error(`crdFor: unknown kind ${kind}`);
  const openAPIV3Schema = toStructural(k.schema, { root: true });
  const props = openAPIV3Schema['properties'] as Record<string, JSONSchemaProps>;
  props['metadata'] = { type: 'object' };
  // apiVersion/kind are checked by the API server itself, not by the schema
  delete openAPIV3Schema['required'];
  openAPIV3Schema['required'] = ['spec'];
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${k.plural}.${k.group ?? API_GROUP}`,
      labels: { 'app.kubernetes.io/part-of': 'kubevirt-ts' },
    },
    spec: {
      group: k.group ?? API_GROUP,
      names: {
        kind: k.kind,
        listKind: `${k.kind}List`,
        plural: k.plural,
        singular: k.singular,
        shortNames: k.shortNames,
        ...((k.categories ?? ['all']).length ? { categories: k.categories ?? ['all'] } : {}),
      },
      scope: k.scope ?? 'Namespaced',
      versions: [
        {
          name: k.version ?? 'v1',
          served: true,
          storage: true,
          ...(k.statusSubresource === false ? {} : { subresources: { status: {} } }),
          ...(k.columns.length ? { additionalPrinterColumns: k.columns } : {}),
          schema: { openAPIV3Schema },
        },
      ],
    },
  };
}

/** All CRDs as files: name -> YAML text (what `npm run gen:crds` writes into deploy/crds). */
export function generateCrdFiles(): Map<string, string> {
  const files = new Map<string, string>();
  for (const k of CRD_KINDS) {
    const text =
      `# Generated by \`npm run gen:crds -w @kubevirt-ts/api\` from packages/api/src/${k.group ? 'instancetype' : 'schemas'}.ts. Do not edit.\n` +
      yaml().stringify(crdFor(k.kind), { lineWidth: 0, aliasDuplicateObjects: false });
    files.set(`${k.group ?? API_GROUP}_${k.plural}.yaml`, text);
  }
  return files;
}
