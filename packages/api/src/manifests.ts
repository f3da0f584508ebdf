// Reading manifests: multi-document YAML or JSON, and turning a VM into the VMI it would start.
import type { CST } from 'yaml';
import { yaml } from './yaml-lazy.js';
import type { VirtualMachine, VirtualMachineInstance } from './schemas.js';
import { MAX_DEPTH, tooDeep } from './validate-common.js';

/**
 * Parse one or more manifests from YAML (multi-document, `---` separated) or JSON (an object,
 * or an array of objects, or a `kind: List` with items). Empty documents are skipped.
 * Throws an Error with the line number on a syntax error, and `document N: nested deeper than 100 levels`
 * for a document that deep (see MAX_DEPTH).
 */
export function parseManifests(text: string): unknown[] {
  const out: unknown[] = [];
  const json = fromJson(text);
  if (json !== undefined) {
    if (tooDeep(json)) throw new Error(`document 1: nested deeper than ${MAX_DEPTH} levels`);
    addManifests(json, out);
    return out;
  }
  tooDeepDocument(text);
  const docs = yaml().parseAllDocuments(text, { prettyErrors: true });
  const list = Array.isArray(docs) ? docs : [docs];
  list.forEach((doc, i) => {
    if (doc.errors.length > 0) {
      const err = doc.errors[0]!;
      throw new Error(`document ${i + 1}: ${err.message}`);
    }
    addManifests(doc.toJS({ maxAliasCount: 100 }), out);
  });
  return out;
}

/** A JSON document read with the engine's parser (far faster than the YAML one, no recursion, and as the
 * API server reads JSON: a repeated key keeps its last value); undefined when `text` is not JSON, which
 * the YAML parser then reads or explains. */
function fromJson(text: string): unknown {
  if (!/^\s*[[{]/.test(text)) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** Adds the manifests of one document to `out`: an object, each item of an array or of a `kind: *List`. */
function addManifests(v: unknown, out: unknown[]) {
  if (v === null || v === undefined) return;
  // one by one: spreading a list of 100,000s of items as arguments overflows the stack
  const items = Array.isArray(v) ? v : isList(v) ? (v as { items: unknown[] }).items : [v];
  for (const x of items) out.push(x);
}

/** Throws `document N: nested deeper than MAX_DEPTH levels` when a document of `text` nests its
 * collections that deep. The yaml library composes documents recursively; its syntax tree (built without
 * recursion) is measured first, without recursion either. */
function tooDeepDocument(text: string) {
  let n = 0;
  for (const token of new (yaml().Parser)().parse(text)) {
    if (token.type !== 'document') continue;
    n++;
    const stack: [CST.Token | null | undefined, number][] = [[token.value, 1]];
    for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
      const [t, depth] = top;
      if (t?.type !== 'block-map' && t?.type !== 'block-seq' && t?.type !== 'flow-collection') continue;
      if (depth > MAX_DEPTH) throw new Error(`document ${n}: nested deeper than ${MAX_DEPTH} levels`);
      for (const item of t.items) stack.push([item.key, depth + 1], [item.value, depth + 1]);
    }
  }
}

function isList(v: unknown): boolean {
  if (typeof v !== 'object' || v === null) return false;
  const o = v as Record<string, unknown>;
  return typeof o['kind'] === 'string' && (o['kind'] as string).endsWith('List') && Array.isArray(o['items']);
}

/**
 * The VMI a manifest describes: a VirtualMachineInstance as is, or a VirtualMachine's
 * spec.template turned into a VMI (name and namespace from the VM, labels/annotations from the
 * template). Throws for any other kind. Does not validate or default (see validateObject and
 * setVirtualMachineInstanceDefaults).
 */
export function vmiFromManifest(obj: unknown): VirtualMachineInstance {
  if (typeof obj !== 'object' || obj === null || Array.isArray(obj))
    throw new Error('vmiFromManifest: manifest must be an object');
  const o = obj as Record<string, unknown>;
  if (o['kind'] === 'VirtualMachineInstance') return structuredClone(o) as unknown as VirtualMachineInstance;
  if (o['kind'] === 'VirtualMachine') {
    const vm = o as unknown as VirtualMachine;
    const tmpl = vm.spec?.template;
    if (!tmpl || typeof tmpl !== 'object')
      throw new Error('vmiFromManifest: spec.template: required field is missing');
    const tmeta = tmpl.metadata ?? {};
    const metadata: VirtualMachineInstance['metadata'] = {};
    if (vm.metadata?.name !== undefined) metadata.name = vm.metadata.name;
    if (vm.metadata?.namespace !== undefined) metadata.namespace = vm.metadata.namespace;
    if (tmeta.labels) metadata.labels = structuredClone(tmeta.labels);
    if (tmeta.annotations) metadata.annotations = structuredClone(tmeta.annotations);
    return {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstance',
      metadata,
      spec: structuredClone(tmpl.spec),
    };
  }
  throw new Error(
    `vmiFromManifest: kind ${JSON.stringify(o['kind'])} is not VirtualMachine or VirtualMachineInstance`,
  );
}
