// Validation, structural part: the TypeBox schemas' compiled checks, their errors as field paths, and the
// checked value the semantic rules read (typed by the schema: they never re-walk `unknown`).
import type { Static, TSchema } from '@sinclair/typebox';
import { type TypeCheck, TypeCompiler } from '@sinclair/typebox/compiler';
import { type ValueError, ValueErrorType } from '@sinclair/typebox/errors';
import { pointerToPath } from './paths.js';
import { NO_CONTROL_CHARS } from './schema-helpers.js';
import type { FieldError } from './validate-common.js';

// ------------------------------------------------------------------ structural (schema) checks

const compiled = new Map<TSchema, TypeCheck<TSchema>>();
function checker(schema: TSchema): TypeCheck<TSchema> {
  let c = compiled.get(schema);
  if (!c) {
    c = TypeCompiler.Compile(schema);
    compiled.set(schema, c);
  }
  return c;
}

export function describe(v: unknown): string {
  if (v === undefined) return 'nothing';
  const s = JSON.stringify(v);
  return s === undefined ? String(v) : s.length > 40 ? `${s.slice(0, 40)}...` : s;
}

function reasonFor(e: ValueError): string {
  const s = e.schema as TSchema & Record<string, unknown>;
  switch (e.type) {
    case ValueErrorType.ObjectRequiredProperty:
      return 'required field is missing';
    case ValueErrorType.ObjectAdditionalProperties:
      return 'unknown field';
    case ValueErrorType.String:
      return `must be a string, got ${describe(e.value)}`;
    case ValueErrorType.Boolean:
      return `must be true or false, got ${describe(e.value)}`;
    case ValueErrorType.Integer:
      return `must be an integer, got ${describe(e.value)}`;
    case ValueErrorType.Number:
      return `must be a number, got ${describe(e.value)}`;
    case ValueErrorType.IntegerMinimum:
    case ValueErrorType.NumberMinimum:
      return `must be >= ${String(s['minimum'])}, got ${describe(e.value)}`;
    case ValueErrorType.Object:
      return `must be an object, got ${describe(e.value)}`;
    case ValueErrorType.Array:
      return `must be a list, got ${describe(e.value)}`;
    case ValueErrorType.ArrayMaxItems:
      return `must have at most ${String(s['maxItems'])} items, got ${(e.value as unknown[]).length}`;
    case ValueErrorType.StringPattern:
      if (s['pattern'] === NO_CONTROL_CHARS)
        return `must not contain control characters (newline, tab, NUL, ...), got ${describe(e.value)}`;
      return `${describe(e.value)} does not match ${String(s['pattern'])}`;
    case ValueErrorType.Literal:
      return `must be ${JSON.stringify(s['const'])}, got ${describe(e.value)}`;
    case ValueErrorType.StringFormat:
      if (s['format'] === 'quantity') return `invalid quantity ${describe(e.value)}`;
      return `${describe(e.value)} is not a valid ${String(s['format'])}`;
    case ValueErrorType.Union: {
      if (s['x-kubernetes-int-or-string']) {
        return `invalid quantity ${describe(e.value)}: expected a number with an optional suffix (e.g. 128Mi, 2Gi, 500m, 1G)`;
      }
      const anyOf = (s['anyOf'] as Record<string, unknown>[] | undefined) ?? [];
      if (anyOf.length > 0 && anyOf.every((x) => 'const' in x)) {
        return `unsupported value ${describe(e.value)}: must be one of ${anyOf
          .map((x) => String(x['const']))
          .filter((x) => x !== '')
          .join(', ')}`;
      }
      return e.message;
    }
    default:
      return e.message;
  }
}

/** What the semantic rules read: the schema's type with every field optional. A document that passed the
 * schema check is one; one that failed is made one by {@link checkSchema} (each wrong value taken out), so
 * every present value has the schema's type and only required fields may be missing. */
export type Checked<T> = T extends readonly (infer U)[]
  ? Checked<U>[]
  : T extends object
    ? { [K in keyof T]?: Checked<T[K]> }
    : T;

/** The schema check of `value` (a copy the caller owns: it is changed in place). Returns the structural
 * errors as field paths and the value as the semantic rules see it: as given when it passed; otherwise with
 * each wrong value taken out (an object or list of the wrong type becomes an empty one, so that its presence
 * still counts; any other wrong value is removed, a list item leaving a hole so that later indices and their
 * field paths stay as they were; an unknown field is dropped). */
export function checkSchema<T extends TSchema>(
  schema: T,
  value: unknown,
): { errors: FieldError[]; value: Checked<Static<T>> } {
  const c = checker(schema);
  if (c.Check(value)) return { errors: [], value: value as Checked<Static<T>> };
  const raw = [...c.Errors(value)];
  for (const e of raw) takeOut(value, e);
  // every wrong value is out: what is left has the schema's types, with fields possibly missing
  return { errors: fieldErrors(raw), value: value as Checked<Static<T>> };
}

function takeOut(root: unknown, e: ValueError) {
  if (e.type === ValueErrorType.ObjectRequiredProperty || e.path === '') return;
  const keys = e.path
    .slice(1)
    .split('/')
    .map((k) => k.replace(/~1/g, '/').replace(/~0/g, '~'));
  let parent = root;
  for (const k of keys.slice(0, -1)) {
    if (typeof parent !== 'object' || parent === null) return; // already taken out with an outer value
    parent = (parent as Record<string, unknown>)[k];
  }
  if (typeof parent !== 'object' || parent === null) return;
  const key = keys[keys.length - 1]!;
  const holder = parent as Record<string, unknown>;
  if (!Object.hasOwn(holder, key)) return;
  if (e.type === ValueErrorType.ArrayMaxItems) {
    holder[key] = []; // a list over its bound is emptied: its items are neither read nor reported one by one
    return;
  }
  const type = e.type === ValueErrorType.ObjectAdditionalProperties ? undefined : e.schema['type'];
  if (type === 'object' && !isPlainObject(holder[key])) holder[key] = {};
  else if (type === 'array' && !Array.isArray(holder[key])) holder[key] = [];
  else if (type !== 'object' && type !== 'array') delete holder[key];
}

const isPlainObject = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Schema errors as field paths (an error inside a field already reported adds nothing). Linear in the
 * number of errors times the depth: a list of 10,000 bad items costs no more than reading it. */
function fieldErrors(errors: Iterable<ValueError>): FieldError[] {
  const out: FieldError[] = [];
  const seen = new Set<string>();
  for (const e of errors) {
    // an error inside a field already reported as wrong (e.g. `must be an object`) adds nothing
    const pointers = e.path.split('/');
    let inside = false;
    for (let n = 2; n < pointers.length && !inside; n++) inside = seen.has(pointers.slice(0, n).join('/'));
    if (inside || seen.has(e.path)) continue;
    seen.add(e.path);
    out.push({ path: pointerToPath(e.path), reason: reasonFor(e) });
  }
  return out;
}
