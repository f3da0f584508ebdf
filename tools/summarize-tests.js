// Prints the closing line of the whole suite from what tools/jest-count-reporter.cjs recorded, then each failed
// test with the start of its message (CI shows the tail of the run's output).
import { readFileSync, existsSync } from 'node:fs';
import { join, relative } from 'node:path';
const dir = process.argv[2] ?? '.';
const lines = (name) =>
  existsSync(join(dir, name))
    ? readFileSync(join(dir, name), 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l))
    : [];
let passed = 0,
  failed = 0,
  skipped = 0;
for (const c of lines('counts.jsonl')) {
  passed += c.passed;
  failed += c.failed;
  skipped += c.skipped;
}
for (const f of lines('failures.jsonl')) {
  console.log(`FAILED ${relative(process.cwd(), join(f.cwd, f.file))} › ${f.test}`);
  console.log(f.message.replace(/^/gm, '    '));
}
console.log(`tests: ${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
