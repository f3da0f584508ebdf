// The committed generated code must match what tools/gen-proto.sh produces from proto/ now.
import { execFile } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { tempDir } from './test-util.js';

const run = promisify(execFile);
const pkgDir = fileURLToPath(new URL('..', import.meta.url));
const repoRoot = join(pkgDir, '..', '..');

async function listFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .sort();
}

test('src/gen is up to date with proto/ (run: bash tools/gen-proto.sh)', async () => {
  const { dir, cleanup } = await tempDir('kvts-gen-');
  try {
    await run('bash', [join(repoRoot, 'tools', 'gen-proto.sh'), dir]);
    const committed = join(pkgDir, 'src', 'gen');
    const fresh = await listFiles(dir);
    expect(await listFiles(committed)).toEqual(fresh);
    expect(fresh).toEqual([
      'kubevirt/cmd/info/info.ts',
      'kubevirt/cmd/v1/cmd.ts',
      'kubevirt/notify/v1/notify.ts',
    ]);
    for (const f of fresh) {
      const want = await readFile(join(dir, f), 'utf8');
      const have = await readFile(join(committed, f), 'utf8');
      if (have !== want)
        throw new Error(`src/gen/${f} is stale: run bash tools/gen-proto.sh and commit the result`);
    }
  } finally {
    await cleanup();
  }
}, 60_000);
