#!/usr/bin/env node
// kv-validate FILE...: validates kubevirt.io/v1 manifests (multi-document YAML or JSON; '-' is stdin).
// Prints `FILE: ok` or one line per error `FILE: <path>: <reason>`; exit 1 if any file is invalid.
import { readFileSync } from 'node:fs';
import { validateFile } from './validate-file.js';

const args = process.argv.slice(2);
if (args.length === 0 || args.includes('-h') || args.includes('--help')) {
  const out = args.length === 0 ? process.stderr : process.stdout;
  out.write('usage: kv-validate FILE... (YAML or JSON, multi-document; - for stdin)\n');
  process.exit(args.length === 0 ? 2 : 0);
}
let failed = false;
for (const file of args) {
  let text: string;
  try {
    text = readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (err) {
    process.stdout.write(`${file}: (file): cannot read: ${(err as Error).message}\n`);
    failed = true;
    continue;
  }
  const lines = validateFile(file, text);
  if (lines.length === 0) process.stdout.write(`${file}: ok\n`);
  else {
    failed = true;
    for (const l of lines) process.stdout.write(l + '\n');
  }
}
process.exit(failed ? 1 : 0);
