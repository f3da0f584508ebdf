// Validation helpers shared by the areas: the FieldError list, value readers, name and path checks,
// metadata (names, labels, annotations) and unique names in a list.
import { sub } from './paths.js';
import { isQuantity, parseQuantity } from './quantity.js';
import type { ObjectMeta } from './schemas.js';
import type { Checked } from './validate-schema.js';

/** One problem found by validation: the field's path and the reason (`${path}: ${reason}` is the
 * message the CLI and the admission webhook print). */
export interface FieldError {
  /** Field path, e.g. `spec.domain.devices.disks[2].name` ('' for the whole document). */
  path: string;
  /** Plain-language reason. */
  reason: string;
}

/** The kinds {@link validateObject} accepts (kubevirt.io/v1; VirtualMachinePool: pool.kubevirt.io/v1beta1; instance
 * types and preferences: instancetype.kubevirt.io/v1beta1; MigrationPolicy: migrations.kubevirt.io/v1alpha1). */
export const KINDS = [
  'VirtualMachine',
  'VirtualMachineInstance',
  'VirtualMachineInstanceMigration',
  'VirtualMachineInstanceReplicaSet',
  'VirtualMachinePool',
  'VirtualMachineInstancePreset',
  'VirtualMachineInstancetype',
  'VirtualMachineClusterInstancetype',
  'VirtualMachinePreference',
  'VirtualMachineClusterPreference',
  'MigrationPolicy',
] as const;

// ------------------------------------------------------------------ helpers

// The schema types carry the structure; these readers are for the parts the schemas keep opaque
// (dnsConfig, accessCredentials, dataVolumeTemplates, ...) and for the whole document before its check.
export type Obj = Record<string, unknown>;
export const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
export const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
export const obj = (v: unknown): Obj => (isObj(v) ? v : {});
export const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** Quantity value or undefined when absent or invalid (invalid ones are reported by the schema check). */
export function qty(v: unknown): number | undefined {
  if (!isQuantity(v)) return undefined;
  try {
    return parseQuantity(v);
  } catch {
    return undefined;
  }
}

/** The deepest nesting of objects and lists a manifest may have (the document itself is level 1). The
 * deepest kubevirt.io/v1 field is about 15 levels down; the bound keeps every recursive step (parsing,
 * copying, checking) far from the engine's stack limit, so a hostile document gets this error instead. */
export const MAX_DEPTH = 100;

/** The error for a document nested deeper than {@link MAX_DEPTH} levels. */
export const TOO_DEEP = `document nested deeper than ${MAX_DEPTH} levels`;

/** Whether `v` nests objects and lists deeper than {@link MAX_DEPTH} levels. Walks without recursion, so
 * any depth (or a cycle) is measured safely. */
export function tooDeep(v: unknown): boolean {
  const stack: [unknown, number][] = [[v, 1]];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const [x, depth] = top;
    if (typeof x !== 'object' || x === null) continue;
    if (depth > MAX_DEPTH) return true;
    for (const child of Object.values(x)) stack.push([child, depth + 1]);
  }
  return false;
}

/** Deep copy (of JSON-like data: plain objects, arrays, primitives) without null-valued object fields:
 * the API server treats `field: null` as absent. */
export function dropNulls<T>(v: T): T {
  if (typeof v !== 'object' || v === null) return v;
  if (Array.isArray(v)) {
    const arr: unknown[] = new Array(v.length);
    for (let i = 0; i < v.length; i++) arr[i] = dropNulls(v[i] as unknown);
    return arr as T;
  }
  const src = v as Obj;
  const out: Obj = {};
  for (const k in src) {
    if (!Object.hasOwn(src, k)) continue;
    const x = src[k];
    if (x === null || x === undefined) continue;
    // a JSON key "__proto__" stays a plain field of the copy (assignment would set its prototype)
    if (k === '__proto__')
      Object.defineProperty(out, k, {
        value: dropNulls(x),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    else out[k] = dropNulls(x);
  }
  return out as T;
}

export const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
export const MAC_RE = /^[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(\1[0-9A-Fa-f]{2}){4}$/;
export const PCI_RE = /^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$/;
export const SERIAL_RE = /^[A-Za-z0-9_.+-]+$/;
export const UUID_RE = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/** upstream validatePath: absolute, no relative components, not "/". */
export function checkAbsolutePath(p: string | undefined): string | undefined {
  if (p === undefined || p === '') return undefined;
  if (p === '/') return 'must not point to the root directory';
  const parts = p.split('/');
  if (
    !p.startsWith('/') ||
    parts.some((x, i) => x === '.' || x === '..' || (x === '' && i > 0 && i < parts.length - 1))
  ) {
    return `${JSON.stringify(p)} must be an absolute path to a file without relative components`;
  }
  return undefined;
}

/** Checks a Kubernetes DNS-1123 label (at most 63 characters of a-z, 0-9 and '-', starting and ending
 * with a letter or digit). Returns the reason it is invalid, or undefined when it is valid. */
export function checkDns1123Label(v: string): string | undefined {
  if (v.length > 63) return `must be no more than 63 characters (is ${v.length})`;
  if (!DNS1123_LABEL.test(v))
    return `"${v}" is not a valid DNS-1123 label: lower case letters, digits and '-', starting and ending with a letter or digit`;
  return undefined;
}

/** Checks a Kubernetes DNS-1123 subdomain (at most 253 characters of a-z, 0-9, '-' and '.', starting and
 * ending with a letter or digit), e.g. an object name. Returns the reason it is invalid, or undefined. */
export function checkDns1123Subdomain(v: string): string | undefined {
  if (v.length > 253) return `must be no more than 253 characters (is ${v.length})`;
  if (!DNS1123_SUBDOMAIN.test(v))
    return `"${v}" is not a valid DNS-1123 subdomain: lower case letters, digits, '-' and '.', starting and ending with a letter or digit`;
  return undefined;
}

// ------------------------------------------------------------------ semantic checks

/** The semantic errors found, and the paths the schema check already reported (where a value of the wrong
 * type was taken out: a rule that would only repeat that error asks {@link Errs.reported}). */
export class Errs {
  list: FieldError[] = [];
  private readonly structural: ReadonlySet<string>;
  constructor(structural: readonly FieldError[] = []) {
    this.structural = new Set(structural.map((f) => f.path));
  }
  add(path: string, reason: string) {
    this.list.push({ path, reason });
  }
  /** Whether the schema check reported the field at `path` itself (missing, or of the wrong type). */
  reported(path: string): boolean {
    return this.structural.has(path);
  }
  /** Whether a field was given: present, or given with a value the schema check rejected (and took out). */
  given(value: unknown, path: string): boolean {
    return value !== undefined || this.structural.has(path);
  }
}

export function validateMetadata(
  m: Checked<ObjectMeta> | undefined,
  base: string,
  e: Errs,
  opts: { nameRequired: boolean; label?: boolean },
) {
  const checkName = opts.label ? checkDns1123Label : checkDns1123Subdomain;
  const name = m?.name;
  if (name === undefined || name === '') {
    if (opts.nameRequired && !m?.generateName)
      e.add(sub(base, 'name'), 'required: a name (or generateName) must be given');
  } else {
    const bad = checkName(name);
    if (bad) e.add(sub(base, 'name'), bad);
  }
  const prefix = m?.generateName;
  if (prefix) {
    // as apimachinery's prefix check: a trailing '-' is fine, since characters are appended to it
    const bad = checkName(prefix.length > 1 && prefix.endsWith('-') ? `${prefix.slice(0, -2)}a` : prefix);
    if (bad) e.add(sub(base, 'generateName'), bad);
  }
  const ns = m?.namespace;
  if (ns !== undefined && ns !== '') {
    const bad = checkDns1123Label(ns);
    if (bad) e.add(sub(base, 'namespace'), bad);
  }
  let annotationBytes = 0;
  for (const [k, v] of Object.entries(m?.annotations ?? {})) {
    // case does not matter in annotation keys (apimachinery lower-cases them before the check); the reason
    // names the key as given
    const bad = checkQualifiedName(k.toLowerCase()) && checkQualifiedName(k);
    if (bad) e.add(sub(sub(base, 'annotations'), k), `annotation key ${bad}`);
    annotationBytes += Buffer.byteLength(k) + Buffer.byteLength(v ?? '');
  }
  if (annotationBytes > MAX_ANNOTATIONS_BYTES)
    e.add(
      sub(base, 'annotations'),
      `too long: keys and values together must be at most ${MAX_ANNOTATIONS_BYTES} bytes (256 KiB), got ${annotationBytes}`,
    );
  for (const [k, v] of Object.entries(m?.labels ?? {})) {
    const p = sub(sub(base, 'labels'), k);
    const badKey = checkQualifiedName(k);
    if (badKey) e.add(p, `label key ${badKey}`);
    if (v !== undefined && v !== '' && (v.length > 63 || !LABEL_VALUE_RE.test(v))) {
      e.add(
        p,
        `label value ${JSON.stringify(v)} must be at most 63 characters of [A-Za-z0-9-_.], starting and ending with a letter or digit`,
      );
    }
  }
}

/** The API server's bound on the annotations of one object: keys and values together, in bytes. */
const MAX_ANNOTATIONS_BYTES = 256 * 1024;

const LABEL_VALUE_RE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** Kubernetes qualified name (label and annotation keys): [prefix/]name. */
export function checkQualifiedName(k: string): string | undefined {
  const parts = k.split('/');
  if (parts.length > 2) return `${JSON.stringify(k)} has more than one '/'`;
  const name = parts[parts.length - 1]!;
  if (parts.length === 2) {
    const bad = checkDns1123Subdomain(parts[0]!);
    if (parts[0] === '' || bad)
      return `${JSON.stringify(k)} has an invalid prefix: must be a DNS-1123 subdomain`;
  }
  if (name === '' || name.length > 63 || !LABEL_VALUE_RE.test(name)) {
    return `${JSON.stringify(k)}: the name part must be 1-63 characters of [A-Za-z0-9-_.], starting and ending with a letter or digit`;
  }
  return undefined;
}

/** Unique non-empty names in a list; reports duplicates at `<list>[i].name`. Returns the names. */
export function uniqueNames(
  list: readonly { name?: string }[],
  base: string,
  e: Errs,
  what: string,
): Map<string, number> {
  const names = new Map<string, number>();
  list.forEach((item, i) => {
    const n = item.name;
    if (n === undefined) return;
    if (n === '') {
      e.add(sub(sub(base, i), 'name'), `${what} name must not be empty`);
      return;
    }
    const first = names.get(n);
    if (first !== undefined)
      e.add(sub(sub(base, i), 'name'), `duplicate ${what} name "${n}" (also ${sub(base, first)})`);
    else names.set(n, i);
  });
  return names;
}
