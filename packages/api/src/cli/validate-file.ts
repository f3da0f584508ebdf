import { parseManifests } from '../manifests.js';
import { validateObject } from '../validate.js';

/**
 * Validate the text of one file; returns the error lines (`FILE: <path>: <reason>`), [] when valid.
 * When a file holds several documents, each reason ends with `(document N)`.
 */
export function validateFile(file: string, text: string): string[] {
  let docs: unknown[];
  try {
    docs = parseManifests(text);
  } catch (err) {
    // the parser's first line ends with ':' before its code frame, which one line cannot show
    return [`${file}: (syntax): ${(err as Error).message.split('\n')[0].replace(/:\s*$/, '')}`];
  }
  if (docs.length === 0) return [`${file}: (file): no manifests found`];
  const lines: string[] = [];
  docs.forEach((doc, i) => {
    const suffix = docs.length > 1 ? ` (document ${i + 1})` : '';
    for (const e of validateObject(doc))
      lines.push(`${file}: ${e.path === '' ? '(root)' : e.path}: ${e.reason}${suffix}`);
  });
  return lines;
}
