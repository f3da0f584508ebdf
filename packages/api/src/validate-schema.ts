// Validation, structural part: the TypeBox schemas' compiled checks, their errors as field paths.
import type { TSchema } from '@sinclair/typebox';
import { type TypeCheck, TypeCompiler } from '@sinclair/typebox/compiler';
import { type ValueError, ValueErrorType } from '@sinclair/typebox/errors';
import { pointerToPath } from './paths.js';
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

export function schemaErrors(schema: TSchema, value: unknown): FieldError[] {
  const out: FieldError[] = [];
  const seen = new Set<string>();
  for (const e of checker(schema).Errors(value)) {
    const path = pointerToPath(e.path);
    if (seen.has(path)) continue;
    // an error inside a field already reported as wrong (e.g. `must be an object`) adds nothing
    if ([...seen].some((p) => p !== '' && (path.startsWith(p + '.') || path.startsWith(p + '[')))) continue;
    seen.add(path);
    out.push({ path, reason: reasonFor(e) });
  }
  return out;
}
