// Builds the native monitor (native/monitor.c -> build/virt-launcher-monitor, static) with the C compiler
// when it is missing or older than its source. Like the addon it is built here and at install, never shipped.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, statSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(import.meta.dirname, '..');
const src = path.join(root, 'native', 'monitor.c');
const out = path.join(root, 'build', 'virt-launcher-monitor');

if (existsSync(out) && statSync(src).mtimeMs <= statSync(out).mtimeMs) process.exit(0);
mkdirSync(path.dirname(out), { recursive: true });
const tmp = `${out}.${process.pid}`;
const r = spawnSync(
  process.env.CC || 'cc',
  ['-O2', '-Wall', '-Wextra', '-Werror', '-static', '-o', tmp, src],
  { stdio: 'inherit' },
);
if (r.error) throw r.error;
if (r.status !== 0) process.exit(r.status ?? 1);
// rename: a monitor running from the old file keeps it, concurrent builds never see half a binary
renameSync(tmp, out);
