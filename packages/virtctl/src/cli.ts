#!/usr/bin/env node
// virtctl: the bin. All logic is in run.ts.
import { run } from './run.js';

run(process.argv.slice(2), {
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
  env: process.env,
  terminal: { stdin: process.stdin, stdout: process.stdout },
}).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`virtctl: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = 1;
  },
);
