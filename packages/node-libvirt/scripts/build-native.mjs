// Builds the native addon with node-gyp when it is missing or older than its sources.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const out = path.join(root, 'build', 'Release', 'kvts_libvirt.node');
const sources = [
  path.join(root, 'binding.gyp'),
  ...readdirSync(path.join(root, 'native')).map((f) => path.join(root, 'native', f)),
];
const outTime = existsSync(out) ? statSync(out).mtimeMs : 0;
if (outTime && sources.every((s) => statSync(s).mtimeMs <= outTime) && !process.argv.includes('--force')) {
  process.exit(0);
}
const env = { ...process.env, npm_config_nodedir: process.env.npm_config_nodedir || '/usr' };
const r = spawnSync('node-gyp', ['rebuild', '--silent'], { cwd: root, env, stdio: 'inherit', shell: false });
if (r.error) {
  // node-gyp not on PATH (outside npm scripts): use the workspace's copy
  const local = spawnSync(process.execPath, [path.join(root, '../../node_modules/node-gyp/bin/node-gyp.js'), 'rebuild', '--silent'], { cwd: root, env, stdio: 'inherit' });
  process.exit(local.status ?? 1);
}
process.exit(r.status ?? 1);
