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
// a test that started and never ended: its phase was stopped at its time bound (tools/test.sh), so jest never
// reported it; name it (or, when no test of a file that started is running, the file: its beforeAll or afterAll),
// when it started, and the waits of more than a minute since then
const running = new Map();
const waits = [];
for (const p of lines('progress.jsonl')) {
  const file = relative(process.cwd(), join(p.cwd, p.file ?? ''));
  if (p.event === 'file-start') running.set(file, p.at);
  else if (p.event === 'file-end') running.delete(file);
  else if (p.event === 'start') running.set(`${file} › ${p.test}`, p.at);
  else if (p.event === 'end') running.delete(`${file} › ${p.test}`);
  else if (p.event === 'waiting' || p.event === 'waited') waits.push(p);
}
for (const [key, at] of running) {
  if ([...running.keys()].some((k) => k !== key && k.startsWith(`${key} › `))) continue; // a test of it is named
  failed++;
  console.log(`UNFINISHED ${key.includes(' › ') ? key : `${key} › (beforeAll or afterAll)`} (started ${at})`);
  for (const w of waits.filter((w) => w.at >= at).slice(-8))
    console.log(
      w.event === 'waiting'
        ? `    ${w.at} waiting for ${w.what} (bound ${w.timeoutMs} ms)`
        : `    ${w.at} got ${w.what} after ${w.ms} ms`,
    );
}
console.log(`tests: ${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed > 0 || passed === 0 ? 1 : 0);
