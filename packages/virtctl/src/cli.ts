#!/usr/bin/env node
// virtctl: the bin. All logic is in run.ts.
import { run } from './run.js';

// exit once stdout is flushed: a console session leaves stdin (a terminal or a pipe) open, which would keep
// the process alive after the session ended
const exit = (code: number) => process.stdout.write('', () => process.exit(code));

run(process.argv.slice(2), {
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
  env: process.env,
  terminal: { stdin: process.stdin, stdout: process.stdout },
}).then(exit, (e: unknown) => {
  process.stderr.write(`virtctl: ${e instanceof Error ? e.message : String(e)}\n`);
  exit(1);
});
