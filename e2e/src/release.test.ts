// Releases against a real registry: Verdaccio on loopback (storage in a temp folder). `nx release publish`
// publishes every package of the workspace at its version; an empty folder outside the repository installs
// the converter and the api from that registry and uses them from an ES module and a CommonJS TypeScript
// project, and runs their bins. Then, in a clone of the repository, a change to the converter alone is
// released with `nx release` (conventional commits): the converter and what depends on it are bumped, the
// others are not, the converter's CHANGELOG names the change. Publishing a version that exists is refused by
// the registry and nothing in it changes.
import { spawn, spawnSync, type ChildProcess, type SpawnSyncOptions } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '@kubevirt-ts/testenv';
import { cleanToolingEnv } from './tooling-env.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// the converter's reference vectors (packages/converter/test-fixtures/README.md)
const VECTOR = path.join(ROOT, 'packages', 'converter', 'test-fixtures', 'reference');

/** The projects `nx release` handles (nx.json release.projects), read from their package.json files. */
function releasedPackages(root: string): Map<string, { dir: string; version: string; deps: string[] }> {
  const out = new Map<string, { dir: string; version: string; deps: string[] }>();
  const dirs = [
    ...readdirSync(path.join(root, 'packages')).map((d) => path.join('packages', d)),
    'apps/virt-launcher',
  ];
  for (const dir of dirs) {
    const pj = JSON.parse(readFileSync(path.join(root, dir, 'package.json'), 'utf8'));
    // nx release follows dependencies and devDependencies alike when it bumps dependents
    const deps = Object.keys({ ...pj.dependencies, ...pj.devDependencies }).filter((d) =>
      d.startsWith('@kubevirt-ts/'),
    );
    out.set(pj.name, { dir, version: pj.version, deps });
  }
  return out;
}

function cleanEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return { ...cleanToolingEnv(), NX_DAEMON: 'false', NX_NO_CLOUD: 'true', NX_TUI: 'false', ...extra };
}

function run(cmd: string, args: string[], opts: SpawnSyncOptions = {}) {
  return spawnSync(cmd, args, {
    timeout: 900_000,
    ...opts,
    encoding: 'utf8',
    env: cleanEnv(opts.env),
  });
}
function sh(cmd: string, args: string[], opts: SpawnSyncOptions = {}): string {
  const r = run(cmd, args, opts);
  if (r.status !== 0)
    throw new Error(`${cmd} ${args.join(' ')} exited ${r.status}:\n${r.stdout}\n${r.stderr}`.slice(-8000));
  return String(r.stdout);
}

const NX = path.join(ROOT, 'node_modules', '.bin', 'nx');
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

let work = '';
let registry = '';
let verdaccio: ChildProcess | undefined;
let npmrc = ''; // the publisher's user config: the registry's auth token
let publishLog = '';
let firstVersions = new Map<string, string>();

async function until(what: string, ok: () => Promise<boolean>, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await ok().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** `npm view NAME FIELD --json` against the test registry (undefined when the package is unknown). */
function view(name: string, field: string): unknown {
  const r = run('npm', ['view', name, field, '--json', `--registry=${registry}`]);
  if (r.status !== 0) return undefined;
  const out = String(r.stdout).trim();
  return out ? JSON.parse(out) : undefined;
}

beforeAll(async () => {
  work = mkdtempSync(path.join(tmpdir(), 'kvts-release-'));
  const port = await freePort();
  registry = `http://127.0.0.1:${port}/`;
  // no uplinks: this registry holds only what is published to it; users get @kubevirt-ts/* from it and the
  // rest from their default registry (a scoped registry in their .npmrc)
  const config = [
    `storage: ${path.join(work, 'storage')}`,
    'auth:',
    '  htpasswd:',
    `    file: ${path.join(work, 'htpasswd')}`,
    '    max_users: 10',
    'packages:',
    "  '@kubevirt-ts/*':",
    '    access: $all',
    '    publish: $authenticated',
    '    unpublish: $authenticated',
    "  '**':",
    '    access: $all',
    '    publish: $authenticated',
    'web:',
    '  enable: false',
    'log: { type: stdout, format: json, level: warn }',
    '',
  ].join('\n');
  writeFileSync(path.join(work, 'verdaccio.yaml'), config);
  verdaccio = spawn(
    process.execPath,
    [
      path.join(ROOT, 'node_modules', 'verdaccio', 'bin', 'verdaccio'),
      '-c',
      path.join(work, 'verdaccio.yaml'),
      '-l',
      `127.0.0.1:${port}`,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: cleanEnv() },
  );
  let vlog = '';
  verdaccio.stdout!.on('data', (d) => (vlog += d));
  verdaccio.stderr!.on('data', (d) => (vlog += d));
  await until(`verdaccio on ${registry} (${vlog})`, async () => (await fetch(`${registry}-/ping`)).ok);

  // a publisher account (htpasswd registration, as `npm adduser` does) and its token
  const res = await fetch(`${registry}-/user/org.couchdb.user:release`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'release', password: 'release-password', type: 'user', roles: [] }),
  });
  const token = ((await res.json()) as { token?: string }).token;
  if (!token) throw new Error(`verdaccio gave no token (${res.status})`);
  npmrc = path.join(work, 'publisher.npmrc');
  writeFileSync(npmrc, `//127.0.0.1:${port}/:_authToken=${token}\n`);

  firstVersions = new Map([...releasedPackages(ROOT)].map(([n, p]) => [n, p.version]));
  // the first release: every package of the workspace at its version (built by the test command's setup)
  const t0 = Date.now();
  publishLog = sh(NX, ['release', 'publish', `--registry=${registry}`], {
    cwd: ROOT,
    env: { NPM_CONFIG_USERCONFIG: npmrc },
  });
  console.log(
    `nx release publish (${firstVersions.size} packages) took ${((Date.now() - t0) / 1000).toFixed(1)} s`,
  );
}, 900_000);

afterAll(() => {
  verdaccio?.kill('SIGTERM');
  if (work) rmSync(work, { recursive: true, force: true });
});

test('nx release publish puts every package on the registry at its version', () => {
  for (const [name, version] of firstVersions) {
    expect([name, view(name, 'version')]).toEqual([name, version]);
  }
  // the apps people do not run from npm stay private
  expect(view('@kubevirt-ts/virt-controller', 'version')).toBeUndefined();
  expect(view('@kubevirt-ts/virt-handler', 'version')).toBeUndefined();
  expect(publishLog).not.toMatch(/Skipped/);
});

describe('a user installs from the registry', () => {
  let app = '';
  beforeAll(() => {
    app = path.join(work, 'user');
    mkdirSync(app);
    writeFileSync(path.join(app, '.npmrc'), `@kubevirt-ts:registry=${registry}\n`);
    writeFileSync(
      path.join(app, 'package.json'),
      JSON.stringify({ name: 'user', version: '1.0.0', private: true, type: 'module' }),
    );
    const t0 = Date.now();
    // other dependencies (fast-xml-parser, typebox, ...) from the default registry, through the npm cache
    sh(
      'npm',
      [
        'install',
        '--no-audit',
        '--no-fund',
        '--prefer-offline',
        '@kubevirt-ts/converter',
        '@kubevirt-ts/api',
      ],
      {
        cwd: app,
      },
    );
    const size = sh('du', ['-sk', path.join(app, 'node_modules')]).split('\t')[0];
    console.log(
      `converter + api installed from the registry in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${size} KiB`,
    );
  }, 600_000);

  test('they are the tarballs that registry serves, at the published versions', () => {
    const lock = JSON.parse(readFileSync(path.join(app, 'package-lock.json'), 'utf8'));
    for (const n of ['converter', 'api']) {
      const entry = lock.packages[`node_modules/@kubevirt-ts/${n}`];
      // the lock file keeps no address for a scoped registry; the tarball's integrity is the one this registry serves
      const version = firstVersions.get(`@kubevirt-ts/${n}`);
      expect([entry.version, entry.integrity]).toEqual([
        version,
        view(`@kubevirt-ts/${n}@${version}`, 'dist.integrity'),
      ]);
    }
  });

  test("an ES module TypeScript project: the converter README's example type-checks and runs", () => {
    // the first ts block of the README, exactly as written
    const readme = readFileSync(path.join(ROOT, 'packages', 'converter', 'README.md'), 'utf8');
    const example = /```ts\n([\s\S]*?)```/.exec(readme)![1]!;
    writeFileSync(path.join(app, 'example.mts'), example);
    writeFileSync(
      path.join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          module: 'nodenext',
          target: 'es2023',
          strict: true,
          skipLibCheck: false,
          types: [],
        },
        files: ['example.mts'],
      }),
    );
    sh(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: app });
    const out = sh(process.execPath, ['example.mjs'], { cwd: app });
    expect(out).toMatch(/^\[\]\n<domain type="qemu">/);
    expect(out).toContain('<name>default_tiny</name>');
  });

  test('a CommonJS TypeScript project imports both with their types and runs (require of ES modules)', () => {
    const cjs = path.join(app, 'cjs');
    mkdirSync(cjs);
    writeFileSync(
      path.join(cjs, 'package.json'),
      JSON.stringify({ name: 'cjs-user', private: true, type: 'commonjs' }),
    );
    writeFileSync(
      path.join(cjs, 'index.ts'),
      [
        "import { setVirtualMachineInstanceDefaults, type VirtualMachineInstance } from '@kubevirt-ts/api';",
        "import { toDomain, type Domain } from '@kubevirt-ts/converter';",
        'const vmi: VirtualMachineInstance = {',
        "  apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachineInstance', metadata: { name: 'c', namespace: 'ns' },",
        "  spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } } },",
        '};',
        'const d: Domain = toDomain(setVirtualMachineInstanceDefaults(vmi), { allowEmulation: true, kvmAvailable: false });',
        'console.log(JSON.stringify({ name: d.name, memory: d.memory }));',
        '',
      ].join('\n'),
    );
    writeFileSync(
      path.join(cjs, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: { module: 'nodenext', target: 'es2023', strict: true, types: [] },
        files: ['index.ts'],
      }),
    );
    sh(process.execPath, [TSC, '-p', 'tsconfig.json'], { cwd: cjs });
    expect(readFileSync(path.join(cjs, 'index.js'), 'utf8')).toMatch(/require\("@kubevirt-ts\/converter"\)/);
    const out = JSON.parse(sh(process.execPath, ['index.js'], { cwd: cjs }));
    expect(out.name).toBe('ns_c');
    expect(JSON.stringify(out.memory)).toContain('67108864');
  });

  test('npx virt-convert and npx kv-validate run on a reference vector', () => {
    const vector = readdirSync(VECTOR).find((f) => f.startsWith('01-') && f.endsWith('.yaml'));
    expect(vector).toBeDefined();
    const input = path.join(VECTOR, vector!);
    const valid = run('npx', ['--no-install', 'kv-validate', input], { cwd: app });
    expect([valid.status, valid.stderr]).toEqual([0, expect.any(String)]);
    const xml = sh('npx', ['--no-install', 'virt-convert', input], { cwd: app });
    expect(xml).toMatch(/^<domain type="(kvm|qemu)"/);
  });
});

describe('the next release: a change to the converter alone', () => {
  let clone = '';
  let before = new Map<string, { dir: string; version: string; deps: string[] }>();
  let after = new Map<string, { dir: string; version: string; deps: string[] }>();
  beforeAll(() => {
    clone = path.join(work, 'repo');
    sh('git', ['clone', '--quiet', '--no-hardlinks', ROOT, clone]);
    sh('git', ['config', 'user.email', 'release-test@kubevirt-ts.invalid'], { cwd: clone });
    sh('git', ['config', 'user.name', 'release test'], { cwd: clone });
    symlinkSync(path.join(ROOT, 'node_modules'), path.join(clone, 'node_modules'));
    before = releasedPackages(clone);
    // the tags the first release left (nx release tags `<name>@<version>`)
    for (const [name, p] of before) sh('git', ['tag', `${name}@${p.version}`], { cwd: clone });
    const index = path.join(clone, 'packages', 'converter', 'src', 'index.ts');
    writeFileSync(index, `${readFileSync(index, 'utf8')}// a change released by the release test\n`);
    sh('git', ['commit', '--quiet', '-am', 'fix(converter): the change the release test makes'], {
      cwd: clone,
    });
    // version + changelog + commit + tags; publishing is the separate step below
    sh(NX, ['release', '--skip-publish'], { cwd: clone });
    after = releasedPackages(clone);
    // built code for the packages that are published again (dist is not in git)
    for (const p of after.values()) {
      const dist = path.join(ROOT, p.dir, 'dist');
      if (existsSync(dist)) cpSync(dist, path.join(clone, p.dir, 'dist'), { recursive: true });
    }
  }, 900_000);

  test('the converter and its dependents are bumped, the others are not', () => {
    // who depends on the converter (also as a devDependency), directly or through another package
    const dependsOnConverter = (name: string, seen = new Set<string>()): boolean => {
      // a private workspace package (testenv) is not released: it carries no bump to its users
      if (seen.has(name) || !before.has(name)) return false;
      seen.add(name);
      return before
        .get(name)!
        .deps.some((d) => d === '@kubevirt-ts/converter' || dependsOnConverter(d, seen));
    };
    for (const [name, p] of before) {
      const bumped = name === '@kubevirt-ts/converter' || dependsOnConverter(name);
      const [maj, min, patch] = p.version.split('.').map(Number);
      expect([name, after.get(name)!.version]).toEqual([
        name,
        bumped ? `${maj}.${min}.${patch! + 1}` : p.version,
      ]);
    }
    // internal dependency ranges follow the new versions
    const pj = JSON.parse(readFileSync(path.join(clone, 'packages', 'renderer', 'package.json'), 'utf8'));
    expect(pj.dependencies['@kubevirt-ts/converter']).toContain(after.get('@kubevirt-ts/converter')!.version);
  });

  test("the converter's CHANGELOG names the change; one tag per released package", () => {
    const changelog = readFileSync(path.join(clone, 'packages', 'converter', 'CHANGELOG.md'), 'utf8');
    expect(changelog).toContain(after.get('@kubevirt-ts/converter')!.version);
    expect(changelog).toContain('the change the release test makes');
    const tags = sh('git', ['tag', '--points-at', 'HEAD'], { cwd: clone }).trim().split('\n').sort();
    const released = [...after]
      .filter(([n, p]) => p.version !== before.get(n)!.version)
      .map(([n, p]) => `${n}@${p.version}`);
    expect(tags).toEqual(released.sort());
    expect(existsSync(path.join(clone, 'packages', 'api', 'CHANGELOG.md'))).toBe(false);
  });

  test('publishing it adds the new versions only; what was published stays', () => {
    const integrity = view('@kubevirt-ts/api', 'dist.integrity');
    const log = sh(NX, ['release', 'publish', `--registry=${registry}`], {
      cwd: clone,
      env: { NPM_CONFIG_USERCONFIG: npmrc },
    });
    expect(view('@kubevirt-ts/converter', 'versions')).toEqual([
      firstVersions.get('@kubevirt-ts/converter'),
      after.get('@kubevirt-ts/converter')!.version,
    ]);
    expect(view('@kubevirt-ts/api', 'versions')).toEqual([firstVersions.get('@kubevirt-ts/api')]);
    expect(view('@kubevirt-ts/api', 'dist.integrity')).toBe(integrity);
    expect(log).toMatch(/Skipped .*@kubevirt-ts\/api/);
  }, 600_000);

  test('publishing a version that exists is refused by the registry, and nothing in it changes', () => {
    const version = after.get('@kubevirt-ts/converter')!.version;
    const integrity = view(`@kubevirt-ts/converter@${version}`, 'dist.integrity');
    // same version, different content
    const readme = path.join(clone, 'packages', 'converter', 'README.md');
    writeFileSync(readme, `${readFileSync(readme, 'utf8')}\nchanged after the release\n`);
    const r = run('npm', ['publish', `--registry=${registry}`], {
      cwd: path.join(clone, 'packages', 'converter'),
      env: { NPM_CONFIG_USERCONFIG: npmrc },
    });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/E403|EPUBLISHCONFLICT|cannot publish over|already present/i);
    expect(view(`@kubevirt-ts/converter@${version}`, 'dist.integrity')).toBe(integrity);
  }, 300_000);
});
