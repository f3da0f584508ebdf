// Prints the closing line of the whole suite from what tools/jest-count-reporter.cjs recorded.
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
const file = join(process.argv[2] ?? '.', 'counts.jsonl');
let passed = 0,
  failed = 0,
  skipped = 0;
if (existsSync(file)) {
  for (const line of readFileSync(file, 'utf8').split('\n').filter(Boolean)) {
    const c = JSON.parse(line);
    passed += c.passed;
    failed += c.failed;
    skipped += c.skipped;
  }
}
console.log(`tests: ${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
