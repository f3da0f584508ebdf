// tools/lint-paths.mjs (part of `npm run lint`): a repository of its own with one offending line of each kind is
// refused with every file and line named; the same repository without them, and this repository, pass.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const LINT = path.join(ROOT, 'tools', 'lint-paths.mjs');
const lint = (dir: string) => spawnSync(process.execPath, [LINT, dir], { encoding: 'utf8' });

const FILES: Record<string, { bad: string; good: string }> = {
  'packages/a/src/fixtures.ts': {
    bad: "export const dir = new URL('../../../../shared/reference', import.meta.url);",
    good: "export const dir = new URL('../test-fixtures/reference', import.meta.url);",
  },
  'packages/a/src/deep.ts': {
    bad: "export const up = new URL('../../../../elsewhere', import.meta.url);",
    good: "export const up = new URL('../../../README.md', import.meta.url);",
  },
  'e2e/src/beside.test.ts': {
    bad: "import path from 'node:path';\nconst ROOT = '/x';\nexport const s = path.join(ROOT, '..', 'other');",
    good: "import path from 'node:path';\nconst ROOT = '/x';\nexport const s = path.join(ROOT, 'other');",
  },
  'tools/x.sh': {
    bad: '#!/bin/sh\ncat "$(dirname "$0")/../../outside/file"',
    good: '#!/bin/sh\ncat "$(dirname "$0")/../README.md"',
  },
  'tools/y.py': { bad: "open('/work/shared/x')", good: "open('/usr/share/x')" },
};

describe('tools/lint-paths.mjs', () => {
  let dir: string;
  const write = (which: 'bad' | 'good') => {
    for (const [file, v] of Object.entries(FILES)) {
      mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
      writeFileSync(path.join(dir, file), `${v[which]}\n`);
    }
  };
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'kvts-lint-paths-'));
    expect(spawnSync('git', ['init', '-q', dir]).status).toBe(0);
    writeFileSync(path.join(dir, 'README.md'), 'docs may say ../shared/x\n');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('each path outside the repository is named with its file and line', () => {
    write('bad');
    const r = lint(dir);
    expect(r.status).toBe(1);
    const named = [...r.stderr.matchAll(/^ {2}(\S+):(\d+): /gm)].map((m) => `${m[1]}:${m[2]}`);
    expect(new Set(named)).toEqual(
      new Set([
        'packages/a/src/fixtures.ts:1',
        'packages/a/src/deep.ts:1',
        'e2e/src/beside.test.ts:3',
        'tools/x.sh:2',
        'tools/y.py:1',
      ]),
    );
  });

  test('paths inside the repository and system paths pass', () => {
    write('good');
    const r = lint(dir);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  test('this repository passes', () => {
    const r = lint(ROOT);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });
});
