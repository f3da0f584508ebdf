#!/usr/bin/env node
// The main job's build (tools/setup.sh --run): compiles an app and the workspace packages it imports at run
// time (its `dependencies`, transitively; not devDependencies) file by file with TypeScript's
// `transpileModule`, without the test files (`*.test.ts`, `test-*.ts`) and without type checking, then runs
// each project's `build:native` npm script when it has one (the libvirt addon, the launcher's monitor) and its
// `build:bundle` script when it has one (an app's executable, dist/main.js: tools/bundle-app.mjs, as its full
// `npm run build` does; tools/setup.sh --run points it at the lock file's esbuild).
// The type check is the full build's (`nx run-many -t build`, `tsc -b`, which the test mode runs): that is
// why this needs only the app's runtime dependencies and the `typescript` and `esbuild` packages, not @types/* or jest.
// Compiling one file at a time gives tsc's own JavaScript because the sources keep to `isolatedModules`
// (set in tsconfig.base.json, so `tsc -b` refuses what a per-file compile would get wrong, such as
// re-exporting a type without `export type`). No .d.ts and no .tsbuildinfo are written, and a project's
// .tsbuildinfo is removed when a file of it is compiled: the next `tsc -b` builds and checks it all again.
// A file is compiled again only when its output is missing or older than it.
//   node tools/run-build.mjs TYPESCRIPT_DIR [APP_DIR]     (APP_DIR defaults to apps/virt-launcher)
//   node tools/run-build.mjs --check TYPESCRIPT_DIR [APP_DIR]   after a full build (`tsc -b`): compiles every
//     file in memory, writes nothing, and fails naming each file whose JavaScript or source map differs from
//     tsc's (e2e/src/run-build.test.ts runs it).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = path.resolve(fileURLToPath(new URL('..', import.meta.url)));
const args = process.argv.slice(2);
const check = args[0] === '--check';
const [tsDir, appArg = 'apps/virt-launcher'] = check ? args.slice(1) : args;
if (!tsDir) {
  console.error('usage: run-build.mjs [--check] TYPESCRIPT_DIR [APP_DIR]');
  process.exit(2);
}
const ts = createRequire(import.meta.url)(path.resolve(tsDir)); // the package's directory: its "main"
const started = Date.now();
const readJson = (file) => JSON.parse(readFileSync(file, 'utf8'));
const die = (msg) => {
  console.error(`run-build: ${msg}`);
  process.exit(1);
};

// Where Node.js finds package NAME from DIR: DIR/node_modules/NAME, else the same in each parent up to the repository.
function installed(dir, name, from) {
  for (let d = dir; ; d = path.dirname(d)) {
    const candidate = path.join(d, 'node_modules', name);
    if (existsSync(candidate)) return candidate;
    if (d === repo || d === path.dirname(d)) die(`${from}: its dependency ${name} is not installed (npm ci)`);
  }
}

// Workspace projects in build order: each one after the workspace packages it depends on.
function buildOrder(appDir) {
  const order = [];
  const seen = new Set();
  const visit = (dir) => {
    if (seen.has(dir)) return;
    seen.add(dir);
    const pkg = readJson(path.join(dir, 'package.json'));
    for (const name of Object.keys(pkg.dependencies ?? {})) {
      const target = realpathSync(installed(dir, name, pkg.name));
      // a workspace package is a symlink out of node_modules into the repository; registry packages need no build
      if (!path.relative(repo, target).split(path.sep).includes('node_modules')) visit(target);
    }
    order.push(dir);
  };
  visit(appDir);
  return order;
}

const isTest = (file) => file.endsWith('.test.ts') || path.basename(file).startsWith('test-');
const formatHost = {
  getCanonicalFileName: (f) => f,
  getCurrentDirectory: () => repo,
  getNewLine: () => '\n',
};
const report = (diagnostics) => die(`\n${ts.formatDiagnostics(diagnostics, formatHost)}`);

const differing = [];

// Returns how many files were compiled (0: all up to date); with --check, how many were compared.
function compile(dir, pkg) {
  const configFile = path.join(dir, 'tsconfig.json');
  const read = ts.readConfigFile(configFile, ts.sys.readFile);
  if (read.error) report([read.error]);
  const parsed = ts.parseJsonConfigFileContent(read.config, ts.sys, dir, undefined, configFile);
  if (parsed.errors.length) report(parsed.errors);
  const { rootDir, outDir } = parsed.options;
  if (!rootDir || !outDir) die(`${configFile}: rootDir and outDir are needed`);
  // One file alone cannot tell NodeNext which module format it has (that is the package.json's "type"):
  // every package here is an ES module, for which NodeNext and ESNext emit the same.
  if (pkg.type !== 'module') die(`${pkg.name}: only ES-module packages ("type": "module") are supported`);
  const options = {
    ...parsed.options,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    declaration: false,
    declarationMap: false,
    composite: false,
    incremental: false,
    // each file is compiled on its own; where its output goes is decided below
    rootDir: undefined,
    outDir: undefined,
  };
  let count = 0;
  for (const file of parsed.fileNames) {
    if (isTest(file) || file.endsWith('.d.ts')) continue;
    const out = path.join(outDir, path.relative(rootDir, file)).replace(/\.ts$/, '.js');
    if (!check && existsSync(out) && statSync(out).mtimeMs >= statSync(file).mtimeMs) continue;
    const result = ts.transpileModule(readFileSync(file, 'utf8'), {
      compilerOptions: options,
      fileName: file,
      reportDiagnostics: true,
    });
    const errors = (result.diagnostics ?? []).filter((d) => d.category === ts.DiagnosticCategory.Error);
    if (errors.length) report(errors);
    const outputs = [[out, result.outputText]];
    if (result.sourceMapText) {
      // the map names its source as tsc's does: relative to the output file
      const map = JSON.parse(result.sourceMapText);
      map.sources = [path.relative(path.dirname(out), file)];
      outputs.push([`${out}.map`, JSON.stringify(map)]);
    }
    for (const [name, text] of outputs) {
      if (!check) {
        mkdirSync(path.dirname(name), { recursive: true });
        writeFileSync(name, text);
      } else if (!existsSync(name) || readFileSync(name, 'utf8') !== text) {
        differing.push(path.relative(repo, name));
      }
    }
    count++;
  }
  if (count && !check) {
    // tsc -b trusts its .tsbuildinfo that the outputs it lists (.d.ts included) are there: drop it, so that the
    // next tsc -b builds this project again instead of leaving it without declarations
    const configName = path.basename(configFile, '.json');
    const buildInfo =
      parsed.options.tsBuildInfoFile ??
      path.join(outDir, path.relative(rootDir, dir), `${configName}.tsbuildinfo`);
    rmSync(buildInfo, { force: true });
  }
  return count;
}

for (const dir of buildOrder(path.resolve(repo, appArg))) {
  const pkg = readJson(path.join(dir, 'package.json'));
  const count = compile(dir, pkg);
  if (check) {
    console.log(`[run-build] ${pkg.name}: ${count} files compared with tsc's output`);
    continue;
  }
  for (const script of ['build:native', 'build:bundle']) {
    if (!pkg.scripts?.[script]) continue;
    const r = spawnSync('npm', ['run', '--silent', script], { cwd: dir, stdio: 'inherit' });
    if (r.error) throw r.error;
    if (r.status !== 0) die(`${pkg.name}: npm run ${script} failed (${r.status ?? r.signal})`);
  }
  console.log(`[run-build] ${pkg.name}: ${count ? `${count} files compiled` : 'up to date'}`);
}
if (differing.length) die(`these differ from tsc's output (or tsc wrote none):\n  ${differing.join('\n  ')}`);
console.log(`[run-build] done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
