#!/usr/bin/env node
// kv-validate FILE|DIR...: validates KubeVirt manifests (multi-document YAML or JSON; '-' is stdin; a directory: its
// .yaml/.yml/.json files at any depth). Prints `FILE: ok` or one line per error `FILE: <path>: <reason>`; a document
// of another API (a ConfigMap, a PriorityClass, ...) is not validated and says so. Exit 1 if any file is invalid.
import { readFileSync } from 'node:fs';
import { isDirectory, manifestFiles } from './manifest-files.js';
import { checkFile } from './validate-file.js';

const args = process.argv.slice(2);
if (args.length === 0 || args.includes('-h') || args.includes('--help')) {
  const out = args.length === 0 ? process.stderr : process.stdout;
  out.write(
    'usage: kv-validate FILE|DIR... (YAML or JSON, multi-document; - for stdin; a directory: its manifests)\n',
  );
  process.exit(args.length === 0 ? 2 : 0);
}
let failed = false;
for (const file of args.flatMap((a) => (a !== '-' && isDirectory(a) ? manifestFiles(a) : [a]))) {
  let text: string;
  try {
    text = readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (err) {
    process.stdout.write(`${file}: (file): cannot read: ${(err as Error).message}\n`);
    failed = true;
    continue;
  }
  const r = checkFile(file, text);
  const others = r.skipped.join(', ');
  if (r.verdict === 'skipped') process.stdout.write(`${file}: skipped (not a KubeVirt kind: ${others})\n`);
  else if (r.verdict === 'accepted')
    process.stdout.write(
      r.skipped.length ? `${file}: ok (not validated, not a KubeVirt kind: ${others})\n` : `${file}: ok\n`,
    );
  else {
    failed = true;
    for (const l of r.errors) process.stdout.write(l + '\n');
  }
}
process.exit(failed ? 1 : 0);
