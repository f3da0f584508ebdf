// Test support: the element tree toDomainXml renders, rendered instead by fast-xml-parser's builder
// with the options the converter used before it had its own renderer. Tests compare the two byte for
// byte: the renderer must write exactly what the library writes (escaping, indentation, empty
// elements), over the property test's random VMIs and the metacharacter strings of xml.test.ts.
import { XMLBuilder } from 'fast-xml-parser';
import type { XEl } from './xml.js';

const XML_ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  "'": '&apos;',
  '"': '&quot;',
};

const builder = new XMLBuilder({
  ignoreAttributes: false,
  attributeNamePrefix: '',
  textNodeName: '#text',
  format: true,
  indentBy: '  ',
  suppressEmptyNode: true,
  suppressBooleanAttributes: false,
  preserveOrder: true,
  // the library's default entity table (& first, then > < ' "), in one pass
  entities: [{ regex: /[&<>'"]/g, val: (ch: string) => XML_ESCAPES[ch]! }],
} as ConstructorParameters<typeof XMLBuilder>[0]);

type Ordered = Record<string, unknown>;

function toOrdered(n: XEl): Ordered {
  const children: Ordered[] =
    n.text !== undefined ? (n.text === '' ? [] : [{ '#text': n.text }]) : (n.children ?? []).map(toOrdered);
  const out: Ordered = { [n.tag]: children };
  if (n.attrs) {
    let at: Record<string, string> | undefined;
    for (const k in n.attrs) {
      const v = n.attrs[k];
      if (v !== undefined) (at ??= {})[k] = String(v);
    }
    if (at) out[':@'] = at;
  }
  return out;
}

/** `root` as fast-xml-parser's builder writes it (without the leading newline of its formatted output). */
export function libraryXml(root: XEl): string {
  return (builder.build([toOrdered(root)]) as string).replace(/^\n/, '');
}
