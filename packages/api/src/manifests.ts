// Reading manifests: multi-document YAML or JSON, and turning a VM into the VMI it would start.
import { yaml } from './yaml-lazy.js';
import type { VirtualMachine, VirtualMachineInstance } from './schemas.js';

/**
 * Parse one or more manifests from YAML (multi-document, `---` separated) or JSON (an object,
 * or an array of objects, or a `kind: List` with items). Empty documents are skipped.
 * Throws an Error with the line number on a syntax error.
 */
export function parseManifests(text: string): unknown[] {
  const out: unknown[] = [];
  const docs = yaml().parseAllDocuments(text, { prettyErrors: true });
  const list = Array.isArray(docs) ? docs : [docs];
  list.forEach((doc, i) => {
    if (doc.errors.length > 0) {
      const err = doc.errors[0]!;
      throw new Error(`document ${i + 1}: ${err.message}`);
    }
    const v: unknown = doc.toJS({ maxAliasCount: 100 });
    if (v === null || v === undefined) return;
    if (Array.isArray(v)) out.push(...v);
    else if (isList(v)) out.push(...(v as { items: unknown[] }).items);
    else out.push(v);
  });
  return out;
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
