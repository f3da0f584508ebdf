import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseManifests } from './manifests.js';
import { validateObject } from './validate.js';

const EXAMPLES = fileURLToPath(new URL('../../../examples/', import.meta.url));

test.each(readdirSync(EXAMPLES).filter((f) => /\.ya?ml$|\.json$/.test(f)))('examples/%s validates', (f) => {
  const docs = parseManifests(readFileSync(EXAMPLES + f, 'utf8'));
  expect(docs.length).toBeGreaterThan(0);
  for (const d of docs) expect(validateObject(d)).toEqual([]);
});
