// Packs @kubevirt-ts/api with `npm pack`, installs the tarball into an empty folder outside the
// repository (dependencies from the npm cache when present) and uses it as a consumer would.
import { spawnSync, type SpawnSyncOptions } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PKG_DIR = fileURLToPath(new URL('..', import.meta.url));

function cleanEnv(): NodeJS.ProcessEnv {
  // don't let the npm that runs jest (workspace, prefix, ...) leak into the nested npm calls
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (
      k.startsWith('npm_') &&
      !['npm_config_cache', 'npm_config_registry', 'npm_config_userconfig'].includes(k)
    )
      continue;
    if (k === 'NODE_OPTIONS' || k.startsWith('JEST')) continue;
    env[k] = v;
  }
  return env;
}

function sh(cmd: string, args: string[], opts: SpawnSyncOptions) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', env: cleanEnv(), timeout: 180_000, ...opts });
  if (r.status !== 0)
    throw new Error(
      `${cmd} ${args.join(' ')} failed (${r.status}): ${String(r.stderr)}\n${String(r.stdout)}`,
    );
  return String(r.stdout);
}

let work: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'kvts-api-pack-'));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

test('npm pack -> npm install from the tarball in an empty folder -> import and run', () => {
  sh('npm', ['pack', '--pack-destination', work, '--silent'], { cwd: PKG_DIR });
  const tgz = readdirSync(work).find((f) => f.endsWith('.tgz'));
  expect(tgz).toMatch(/^kubevirt-ts-api-\d+\.\d+\.\d+\.tgz$/);

  const listing = sh('tar', ['tzf', join(work, tgz!)], {});
  expect(listing).toMatch(/package\/dist\/index\.js/);
  expect(listing).toMatch(/package\/dist\/index\.d\.ts/);
  expect(listing).toMatch(/package\/dist\/cli\/kv-validate\.js/);
  expect(listing).toMatch(/package\/README\.md/);
  expect(listing).not.toMatch(/\.test\.js/);
  expect(listing).not.toMatch(/test-fixtures/);

  const app = join(work, 'app');
  sh('mkdir', ['-p', app], {});
  writeFileSync(
    join(app, 'package.json'),
    JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module' }),
  );
  sh('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--silent', join(work, tgz!)], {
    cwd: app,
  });

  writeFileSync(
    join(app, 'main.js'),
    `import { validateObject, setVirtualMachineInstanceDefaults, parseQuantity, VirtualMachineInstanceSchema } from '@kubevirt-ts/api';
const vmi = { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachineInstance', metadata: { name: 'a' },
  spec: { domain: { resources: { requests: { memory: '64Mi' } }, devices: { disks: [{ name: 'x' }] } } } };
console.log(JSON.stringify({
  errors: validateObject(vmi).map((e) => e.path),
  machine: setVirtualMachineInstanceDefaults({ ...vmi, spec: { domain: { resources: { requests: { memory: '64Mi' } } } } }).spec.domain.machine.type,
  q: parseQuantity('64Mi'),
  schema: VirtualMachineInstanceSchema.properties.spec.type,
}));
`,
  );
  const out = JSON.parse(sh(process.execPath, ['main.js'], { cwd: app }));
  expect(out).toEqual({
    errors: ['spec.domain.devices.disks[0].name'],
    machine: 'q35',
    q: 67108864,
    schema: 'object',
  });

  writeFileSync(
    join(app, 'vmi.json'),
    JSON.stringify({
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstance',
      metadata: { name: 'a' },
      spec: { domain: { memory: { guest: '1Gi' } } },
    }),
  );
  expect(sh(join(app, 'node_modules/.bin/kv-validate'), ['vmi.json'], { cwd: app })).toBe('vmi.json: ok\n');
}, 240_000);
