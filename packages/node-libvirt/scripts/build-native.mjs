// Builds the native addon (build/Release/kvts_libvirt.node) with node-gyp when it is missing or older
// than its sources. Serialized with flock(1): several nx builds may run it at once in one work tree.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(import.meta.dirname, '..');
const out = path.join(root, 'build', 'Release', 'kvts_libvirt.node');
const force = process.argv.includes('--force');

function upToDate() {
  if (!existsSync(out)) return false;
  const outTime = statSync(out).mtimeMs;
  const sources = [
    path.join(root, 'binding.gyp'),
    // native/monitor.c is the monitor's (scripts/build-monitor.mjs), not the addon's
    ...readdirSync(path.join(root, 'native'))
      .filter((f) => f !== 'monitor.c')
      .map((f) => path.join(root, 'native', f)),
  ];
  return sources.every((s) => statSync(s).mtimeMs <= outTime);
}

if (!force && upToDate()) process.exit(0);

if (!process.argv.includes('--locked')) {
  const lock = path.join(
    os.tmpdir(),
    `kvts-node-libvirt-build-${createHash('sha1').update(root).digest('hex').slice(0, 12)}.lock`,
  );
  const r = spawnSync(
    'flock',
    [lock, process.execPath, import.meta.filename, '--locked', ...process.argv.slice(2)],
    {
      stdio: 'inherit',
    },
  );
  if (r.error) throw r.error;
  process.exit(r.status ?? 1);
}

// holding the lock: another build may have finished meanwhile
if (!force && upToDate()) process.exit(0);
// headers: npm_config_nodedir, else those of the node running this (an official build carries
// include/node), else Debian's /usr/include/node. An N-API addon: one build loads in every Node >= 22.
const prefix = path.resolve(process.execPath, '..', '..');
const nodedir = existsSync(path.join(prefix, 'include', 'node', 'node_api.h')) ? prefix : '/usr';
const env = { ...process.env, npm_config_nodedir: process.env.npm_config_nodedir || nodedir };
// node-gyp: the workspace's (a devDependency at the repository root), else the one npm bundles and
// names in npm_config_node_gyp while it runs this as the install script of an installed tarball.
let nodeGyp;
try {
  nodeGyp = path.join(
    path.dirname(fileURLToPath(import.meta.resolve('node-gyp/package.json'))),
    'bin',
    'node-gyp.js',
  );
} catch {
  nodeGyp = process.env.npm_config_node_gyp;
  if (!nodeGyp) {
    console.error('@kubevirt-ts/node-libvirt: node-gyp not found (install it, or build through npm install)');
    process.exit(1);
  }
}
const r = spawnSync(process.execPath, [nodeGyp, 'rebuild', '--silent'], { cwd: root, env, stdio: 'inherit' });
if (r.error) throw r.error;
process.exit(r.status ?? 1);
