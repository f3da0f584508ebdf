// check-examples DIR: every manifest file under DIR (e.g. a checkout of upstream KubeVirt's examples/) checked with
// kv-validate's validator. One line per file, `FILE: accepted`, `FILE: skipped (...)` (only documents of other APIs,
// which are not validated) or `FILE: refused` followed by one `  <path>: <reason>` line per error; then the summary
// `examples: N accepted, M refused, K skipped`. Exit 1 when a file is refused, 2 on a usage error.
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { isDirectory, manifestFiles } from './manifest-files.js';
import { checkFile } from './validate-file.js';

/** What {@link checkExamples} found: the counts of the summary line. */
export interface ExamplesSummary {
  accepted: number;
  refused: number;
  skipped: number;
}

/** Check every manifest under `dir`, writing the report to `out`; returns the counts. */
export function checkExamples(dir: string, out: (line: string) => void): ExamplesSummary {
  const sum: ExamplesSummary = { accepted: 0, refused: 0, skipped: 0 };
  for (const path of manifestFiles(dir)) {
    const file = relative(dir, path);
    const r = checkFile(file, readFileSync(path, 'utf8'));
    sum[r.verdict]++;
    const others = r.skipped.join(', ');
    if (r.verdict === 'skipped') out(`${file}: skipped (not a KubeVirt kind: ${others})`);
    else if (r.verdict === 'accepted')
      out(`${file}: accepted${r.skipped.length ? ` (not validated, not a KubeVirt kind: ${others})` : ''}`);
    else {
      out(`${file}: refused`);
      for (const l of r.errors) out(`  ${l.slice(file.length + 2)}`);
    }
  }
  out(`examples: ${sum.accepted} accepted, ${sum.refused} refused, ${sum.skipped} skipped`);
  return sum;
}

/** The command: `check-examples DIR`. */
export function main(argv: string[] = process.argv.slice(2)): number {
  if (argv.length !== 1 || argv[0] === '-h' || argv[0] === '--help') {
    (argv.length === 1 ? process.stdout : process.stderr).write('usage: check-examples DIR\n');
    return argv.length === 1 ? 0 : 2;
  }
  if (!isDirectory(argv[0]!)) {
    process.stderr.write(`check-examples: ${argv[0]}: not a directory\n`);
    return 2;
  }
  const sum = checkExamples(argv[0]!, (l) => process.stdout.write(l + '\n'));
  return sum.refused ? 1 : 0;
}
