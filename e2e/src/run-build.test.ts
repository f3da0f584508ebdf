// The main job's build (tools/run-build.mjs: one file at a time, no type check) against tsc's: after the full
// build (`tsc -b`, which this project's build ran before the tests), its --check mode compiles virt-launcher
// and every package it imports in memory and compares the JavaScript and source maps with tsc's, byte for byte.
// A small project of its own shows that a difference is found and named.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TYPESCRIPT = path.join(ROOT, 'node_modules', 'typescript');
const RUN_BUILD = path.join(ROOT, 'tools', 'run-build.mjs');

function runBuild(...args: string[]) {
  return spawnSync(process.execPath, [RUN_BUILD, ...args], { cwd: ROOT, encoding: 'utf8' });
}

test("virt-launcher and the packages it imports: the main job's build emits tsc's output", () => {
  const r = runBuild('--check', TYPESCRIPT);
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
  const compared = new Map(
    [...r.stdout.matchAll(/\[run-build\] (\S+): (\d+) files compared/g)].map((m) => [m[1], Number(m[2])]),
  );
  expect([...compared.keys()].sort()).toEqual([
    '@kubevirt-ts/api',
    '@kubevirt-ts/cmd-protocol',
    '@kubevirt-ts/converter',
    '@kubevirt-ts/disks',
    '@kubevirt-ts/libvirt-manager',
    '@kubevirt-ts/log',
    '@kubevirt-ts/network',
    '@kubevirt-ts/node-libvirt',
    '@kubevirt-ts/virt-launcher',
  ]);
  for (const n of compared.values()) expect(n).toBeGreaterThan(0);
  expect([...compared.values()].reduce((a, b) => a + b)).toBeGreaterThanOrEqual(80);
});

describe('--check on a project of its own', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'kvts-run-build-'));
    mkdirSync(path.join(dir, 'src'));
    writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'sample', type: 'module' }));
    writeFileSync(
      path.join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          strict: true,
          isolatedModules: true,
          sourceMap: true,
          types: [],
          rootDir: 'src',
          outDir: 'dist',
        },
        include: ['src/**/*.ts'],
      }),
    );
    // a type-only import (elided), an enum (emitted as code), a parameter property
    writeFileSync(path.join(dir, 'src', 'shape.ts'), 'export interface Shape { sides: number }\n');
    writeFileSync(
      path.join(dir, 'src', 'index.ts'),
      [
        "import type { Shape } from './shape.js';",
        'export enum Kind { Square = 4, Triangle = 3 }',
        'export class Named { constructor(public readonly name: string) {} }',
        'export const square: Shape = { sides: Kind.Square };',
        '',
      ].join('\n'),
    );
    const tsc = spawnSync(process.execPath, [path.join(TYPESCRIPT, 'bin', 'tsc'), '-p', dir], {
      encoding: 'utf8',
    });
    expect(tsc.stdout + tsc.stderr).toBe('');
    expect(tsc.status).toBe(0);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test("tsc's output passes", () => {
    const r = runBuild('--check', TYPESCRIPT, dir);
    expect(r.stderr).toBe('');
    expect(r.stdout).toContain('sample: 2 files compared');
    expect(r.status).toBe(0);
  });

  test('a changed output fails, naming the file', () => {
    const out = path.join(dir, 'dist', 'index.js');
    const original = readFileSync(out, 'utf8');
    const changed = original.replace('Kind[Kind["Square"] = 4]', 'Kind[Kind["Square"] = 5]');
    expect(changed).not.toBe(original);
    writeFileSync(out, changed);
    const r = runBuild('--check', TYPESCRIPT, dir);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain("differ from tsc's output");
    expect(r.stderr).toContain(path.join('dist', 'index.js'));
    expect(r.stderr).not.toContain('shape.js');
  });
});
