#!/usr/bin/env node
// Benchmark: validation, defaulting and parsing throughput on the converter reference VMIs.
// Prints numbers; asserts nothing. Run: npm run bench -w @kubevirt-ts/api [-- ITERATIONS]
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setVirtualMachineInstanceDefaults } from './defaults.js';
import { parseManifests } from './manifests.js';
import type { VirtualMachineInstance } from './schemas.js';
import { validateObject } from './validate.js';

// the converter's reference VMIs (packages/converter/test-fixtures/README.md)
const dir = fileURLToPath(new URL('../../converter/test-fixtures/reference', import.meta.url));
const texts = readdirSync(dir)
  .filter((f) => f.endsWith('.yaml'))
  .map((f) => readFileSync(join(dir, f), 'utf8'));
const docs = texts.flatMap((t) => parseManifests(t));
const iterations = Number(process.argv[2] ?? 2000);

function bench(name: string, fn: () => void) {
  for (let i = 0; i < 50; i++) fn(); // warm up (compiles the TypeBox checkers)
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < iterations; i++) fn();
  const ns = Number(process.hrtime.bigint() - t0);
  const perDoc = ns / iterations / docs.length / 1000;
  console.log(
    `${name.padEnd(28)} ${perDoc.toFixed(1).padStart(8)} µs/doc  ${(1e6 / perDoc).toFixed(0).padStart(8)} docs/s`,
  );
}

console.log(`${docs.length} reference VMIs from ${dir}, ${iterations} iterations`);
const t0 = process.hrtime.bigint();
validateObject(docs[0]);
console.log(
  `${'first call (compile)'.padEnd(28)} ${(Number(process.hrtime.bigint() - t0) / 1e6).toFixed(1).padStart(8)} ms`,
);
bench('validateObject', () => docs.forEach((d) => validateObject(d)));
bench('setVMIDefaults', () =>
  docs.forEach((d) => setVirtualMachineInstanceDefaults(d as VirtualMachineInstance)),
);
bench('parseManifests (YAML)', () => texts.forEach((t) => parseManifests(t)));
bench('defaults + validate', () =>
  docs.forEach((d) => validateObject(setVirtualMachineInstanceDefaults(d as VirtualMachineInstance))),
);
