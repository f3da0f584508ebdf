// Small builders over TypeBox so every schema in this package has the same conventions:
// - Strict objects (spec side) reject unknown fields; Loose objects (status, metadata) keep them.
// - Enum() is a union of string literals (CRD: `type: string` + `enum`).
// - Quantity() is a Kubernetes quantity (CRD: `x-kubernetes-int-or-string: true`).
import {
  FormatRegistry,
  Type,
  type TLiteral,
  type TProperties,
  type TSchema,
  type TUnion,
} from '@sinclair/typebox';
import { isQuantity } from './quantity.js';

if (!FormatRegistry.Has('quantity')) FormatRegistry.Set('quantity', (v) => isQuantity(v));

export const Opt = Type.Optional;

export function Strict<T extends TProperties>(props: T, description?: string) {
  return Type.Object(props, { additionalProperties: false, ...(description ? { description } : {}) });
}

export function Loose<T extends TProperties>(props: T, description?: string) {
  return Type.Object(props, description ? { description } : {});
}

/** An object whose content is not modelled here and is kept as given (CRD: x-kubernetes-preserve-unknown-fields). */
export function Opaque(description?: string) {
  return Type.Object(
    {},
    { 'x-kubernetes-preserve-unknown-fields': true, ...(description ? { description } : {}) },
  );
}

export function Enum<const T extends string[]>(
  values: [...T],
  description?: string,
): TUnion<{ [K in keyof T]: TLiteral<T[K]> }> {
  return Type.Union(
    values.map((v) => Type.Literal(v)),
    description ? { description } : {},
  ) as unknown as TUnion<{ [K in keyof T]: TLiteral<T[K]> }>;
}

export function Quantity(description?: string) {
  return Type.Union([Type.String({ format: 'quantity' }), Type.Number()], {
    'x-kubernetes-int-or-string': true,
    ...(description ? { description } : {}),
  });
}

export function StringMap(description?: string) {
  return Type.Record(Type.String(), Type.String(), description ? { description } : {});
}

export function QuantityMap(description?: string) {
  return Type.Record(Type.String(), Quantity(), description ? { description } : {});
}

export const Bool = (description?: string) => Type.Boolean(description ? { description } : {});
export const Str = (description?: string) => Type.String(description ? { description } : {});
export const UInt = (description?: string) =>
  Type.Integer({ minimum: 0, ...(description ? { description } : {}) });
export const Int = (description?: string) => Type.Integer(description ? { description } : {});
export const Arr = <T extends TSchema>(items: T, description?: string) =>
  Type.Array(items, description ? { description } : {});

/** The most items upstream's CRDs allow in the lists they bound (disks, interfaces, volumes, networks,
 * accessCredentials: `+kubebuilder:validation:MaxItems:=256`). */
export const MAX_LIST_ITEMS = 256;
/** A list of at most {@link MAX_LIST_ITEMS} items (CRD: `maxItems`), as upstream bounds it. */
export const List = <T extends TSchema>(items: T, description?: string) =>
  Type.Array(items, { maxItems: MAX_LIST_ITEMS, ...(description ? { description } : {}) });

/** No C0 control character (U+0000-U+001F, so no NUL, tab or newline) and no DEL. */
export const NO_CONTROL_CHARS = '^[^\\x00-\\x1F\\x7F]*$';
/** A one-line string: an image, path, object name or identifier that ends up on a command line, in a file
 * name, in a Pod field or in libvirt XML (CRD: `pattern`). Multi-line data (cloud-init user data) is `Str`. */
export const Line = (description?: string) =>
  Type.String({ pattern: NO_CONTROL_CHARS, ...(description ? { description } : {}) });
