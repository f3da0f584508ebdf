// An app's executable: dist/main.js, esbuild's bundle of dist/cli.js (tsc's output of src/cli.ts) and every module it
// loads, written into dist/main.js and dist/chunks/ (each dynamic import() is a chunk, loaded when it runs).
// Run by the app's `npm run build:bundle` (its `npm run build` after tsc, and the main job's tools/run-build.mjs),
// from the app's directory; dist/main.js is made executable (its shebang carries the app's V8 flags):
//   node ../../tools/bundle-app.mjs [--minify]
// esbuild is the workspace's devDependency; the main job, which installs no devDependencies, points
// KVTS_ESBUILD_DIR at the lock file's esbuild package (tools/lock-package-install.sh) and ESBUILD_BINARY_PATH
// at its platform binary.
// Why: Node resolves, reads and links each ES module file on its own (hundreds per app: start-up time), and keeps
// every module's source text in its heap (memory: --minify drops the whitespace and comments, the names stay for
// stack traces). Packages keep their separate modules; only apps' entries are bundled.
import { chmod, rm } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const esbuildDir = process.env.KVTS_ESBUILD_DIR;
const { build } = await import(
  esbuildDir ? pathToFileURL(path.join(esbuildDir, 'lib', 'main.js')).href : 'esbuild'
);

const { values } = parseArgs({
  options: { minify: { type: 'boolean', default: false } },
});
const dist = path.resolve('dist');

await rm(path.join(dist, 'chunks'), { recursive: true, force: true });
await build({
  entryPoints: { main: path.join(dist, 'cli.js') },
  outdir: dist,
  bundle: true,
  splitting: true,
  chunkNames: 'chunks/[name]-[hash]',
  format: 'esm',
  platform: 'node',
  target: 'node22',
  minifyWhitespace: values.minify,
  minifySyntax: values.minify,
  // CommonJS dependencies (winston, gRPC) call require(): give the ES module output a real one
  banner: {
    js: "import { createRequire as __kvtsCreateRequire } from 'node:module'; const require = __kvtsCreateRequire(import.meta.url);",
  },
  logLevel: 'warning',
});
await chmod(path.join(dist, 'main.js'), 0o755);
