#!/usr/bin/env node
// The repository stands alone: no source, test, bench or script reads a path outside it (a clone with nothing
// beside it must build, test and bench). Part of `npm run lint` (tools/test.sh). Checks every file git knows of
// (tracked, and untracked ones not ignored) that holds code: sources, scripts, Containerfiles, manifests. Fails,
// naming file and line, on:
//   - a path of this development machine's layout (`/work/...`), or a `shared` folder beside the repository
//     (`../shared`, `join(x, '..', 'shared')`);
//   - `new URL('REL', import.meta.url)` whose REL leaves the repository, from the file's own directory (a
//     package's src/ and dist/ are at the same depth, so one check serves both);
//   - `join(ROOT, '..')`, where ROOT is the repository's root (ROOT, repoRoot, repo, REPO);
//   - `$(dirname "$0")/REL` or `$(dirname "${BASH_SOURCE[0]}")/REL` in a shell script that leaves it.
// Caches ($KVTS_CACHE, under ~/.cache) and system paths (/usr, /etc, /run, /tmp...) are not the repository's
// content and are allowed. Documentation (*.md) is not checked: it may say where a file came from.
//   node tools/lint-paths.mjs [ROOT]     (ROOT: a git work tree, default this repository)
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(process.argv[2] ?? fileURLToPath(new URL('..', import.meta.url)));
const CODE =
  /\.(?:[cm]?[jt]s|sh|py|go|c|h|cc|ya?ml|json|toml|conf)$|(?:^|\/)(?:Containerfile|Dockerfile|Makefile)$/;
const SKIP = /(?:^|\/)(?:node_modules|dist|build)\/|(?:^|\/)package-lock\.json$/;

const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
  cwd: root,
  encoding: 'utf8',
})
  .split('\0')
  .filter((f) => f && CODE.test(f) && !SKIP.test(f));

const outside = (fromDir, rel) => {
  const target = path.resolve(fromDir, rel);
  return target !== root && !target.startsWith(root + path.sep);
};

const rules = [
  {
    re: /\/work\/[\w.+-]/g,
    why: () => "a path of this machine's layout (/work/...): not part of the repository",
  },
  {
    re: /(?:\.\.\/)+shared\b|['"]\.\.['"]\s*,\s*['"]shared['"]/g,
    why: () => 'a shared folder beside the repository: copy what is needed into the repository',
  },
  {
    re: /new URL\(\s*['"]([^'"]+)['"]\s*,\s*import\.meta\.url\s*\)/g,
    why: (m, dir) => outside(dir, m[1]) && `new URL('${m[1]}', import.meta.url) leaves the repository`,
  },
  {
    re: /join\(\s*(?:ROOT|REPO|repo|repoRoot)\s*,\s*['"]\.\.['"]/g,
    why: () => "join(<repository root>, '..'): a path beside the repository",
  },
  {
    re: /\$\(dirname\s+"(?:\$0|\$\{BASH_SOURCE\[0\]\})"\)\/((?:\.\.\/?)+[^"'\s)]*)/g,
    why: (m, dir) => outside(dir, m[1]) && `$(dirname ...)/${m[1]} leaves the repository`,
  },
];

const problems = [];
for (const file of files) {
  let text;
  try {
    text = readFileSync(path.join(root, file), 'utf8');
  } catch {
    continue; // listed by git but deleted in the work tree
  }
  // its own patterns and comments, and its test's samples of what it refuses
  if (file === 'tools/lint-paths.mjs' || file === 'e2e/src/lint-paths.test.ts') continue;
  const dir = path.dirname(path.join(root, file));
  const lines = text.split('\n');
  lines.forEach((line, i) => {
    for (const rule of rules) {
      for (const m of line.matchAll(rule.re)) {
        const why = rule.why(m, dir);
        if (why) problems.push(`${file}:${i + 1}: ${why}`);
      }
    }
  });
}
if (problems.length) {
  console.error(
    `lint-paths: ${problems.length} reference(s) to paths outside the repository:\n  ${problems.join('\n  ')}`,
  );
  process.exit(1);
}
console.log(`lint-paths: ${files.length} files read, none reaches outside the repository`);
