// Test support: reference vectors, conversion with API defaults, the domain-facts tool.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  parseManifests,
  setVirtualMachineInstanceDefaults,
  vmiFromManifest,
  type VirtualMachineInstance,
} from '@kubevirt-ts/api';
import { toDomain } from './convert.js';
import { toDomainXml } from './xml.js';
import type { ConverterContext } from './context.js';

/** The package's test fixtures (test-fixtures/README.md): the reference vectors and the domain-facts tool. */
export const FIXTURES_DIR = fileURLToPath(new URL('../test-fixtures', import.meta.url));
export const REFERENCE_DIR = path.join(FIXTURES_DIR, 'reference');
export const FACTS_TOOL = path.join(FIXTURES_DIR, 'domain-facts.py');

export interface Vector {
  name: string;
  yaml: string;
  xml: string;
  vmi: VirtualMachineInstance;
}

export function vectors(): Vector[] {
  return readdirSync(REFERENCE_DIR)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f) => {
      const name = f.replace(/\.yaml$/, '');
      const yaml = readFileSync(path.join(REFERENCE_DIR, f), 'utf8');
      return {
        name,
        yaml,
        xml: readFileSync(path.join(REFERENCE_DIR, `${name}.xml`), 'utf8'),
        vmi: vmiFromManifest(parseManifests(yaml)[0]),
      };
    });
}

/** A VMI as a cluster would store it (API defaults applied), converted to XML. */
export function convertWithDefaults(vmi: VirtualMachineInstance, ctx: ConverterContext = {}): string {
  return toDomainXml(toDomain(setVirtualMachineInstanceDefaults(vmi), ctx));
}

/** Runs domain-facts.py on two XML documents: the facts that differ, as { fact: [expected, got] }. */
export function factDiff(
  expectedXml: string,
  actualXml: string,
): { diffs: Record<string, [string, string]>; score: string } {
  const dir = mkdtempSync(path.join(tmpdir(), 'kvts-facts-'));
  try {
    const a = path.join(dir, 'expected.xml');
    const b = path.join(dir, 'actual.xml');
    writeFileSync(a, expectedXml);
    writeFileSync(b, actualXml);
    const r = spawnSync('python3', [FACTS_TOOL, a, b], { encoding: 'utf8' });
    if (r.status !== 0 && r.status !== 1) throw new Error(`domain-facts.py failed: ${r.stderr}`);
    const lines = r.stdout.trim().split('\n');
    const score = lines.pop() ?? '';
    const diffs: Record<string, [string, string]> = {};
    for (const line of lines) {
      const m = /^(\S+)\s+expected (.*?) {2}got (.*)$/.exec(line);
      if (!m) throw new Error(`unexpected domain-facts.py line: ${line}`);
      diffs[m[1]!] = [m[2]!, m[3]!];
    }
    return { diffs, score };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The facts of one domain, as printed by domain-facts.py --dump. */
export function facts(xml: string): Record<string, string> {
  const dir = mkdtempSync(path.join(tmpdir(), 'kvts-facts-'));
  try {
    const a = path.join(dir, 'd.xml');
    writeFileSync(a, xml);
    const r = spawnSync('python3', [FACTS_TOOL, '--dump', a], { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`domain-facts.py failed: ${r.stderr}`);
    const out: Record<string, string> = {};
    for (const line of r.stdout.trim().split('\n')) {
      const i = line.indexOf(' = ');
      if (i > 0) out[line.slice(0, i)] = line.slice(i + 3);
    }
    return out;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
