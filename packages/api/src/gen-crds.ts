#!/usr/bin/env node
// Writes the CRDs into a directory (default: deploy/crds at the repository root).
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateCrdFiles } from './crd.js';

const dir = resolve(process.argv[2] ?? fileURLToPath(new URL('../../../deploy/crds', import.meta.url)));
mkdirSync(dir, { recursive: true });
for (const [name, text] of generateCrdFiles()) {
  writeFileSync(join(dir, name), text);
  console.log(`wrote ${join(dir, name)}`);
}
