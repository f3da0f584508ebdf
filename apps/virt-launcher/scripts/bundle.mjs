// dist/main.js, the launcher's executable: dist/cli.js (tsc's output of src/cli.ts) and every module it
// loads, bundled by esbuild into a few files (dist/main.js and dist/chunks/). Node resolves, reads and
// links each ES module file on its own: about 580 of them (TypeBox alone 218, gRPC 65) cost most of the
// launcher's start-up, twice in standalone (README "Start-up time"). The commands still load what they
// need when they run (each dynamic import() is a chunk). Packages keep their separate modules; only this
// app's entry is bundled.
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const app = path.resolve(fileURLToPath(new URL('..', import.meta.url)));
const dist = path.join(app, 'dist');

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
  // CommonJS dependencies (winston, gRPC) call require(): give the ES module output a real one
  banner: {
    js: "import { createRequire as __kvtsCreateRequire } from 'node:module'; const require = __kvtsCreateRequire(import.meta.url);",
  },
  // loaded by Node itself: `await import('yaml')` (a NoCloud disk's meta-data) of a CommonJS package gets its named
  // exports from Node's interop; esbuild's namespace of a bundled CommonJS module in a dynamic import had none
  // (`stringify is not a function`, found by e2e/src/launcher/disks.test.ts). It is a dependency of the launcher's
  // packages, installed beside it.
  external: ['yaml'],
  logLevel: 'warning',
});
