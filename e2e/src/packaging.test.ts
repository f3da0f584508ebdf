// Every published package as a user gets it: `npm pack` of each, all tarballs installed together into
// an empty folder outside the repository (dependencies from the npm cache; node-libvirt's addon is
// compiled by its install script with node-gyp), then imported and run there by plain node processes:
// one real call per package, the bins on a reference VMI, and the README import lines type-checked.
// Each runs under Node 22 (the oldest the packages support: engines >=22.19) and Node 24 (the project's
// runtime), both the official builds tools/node-install.sh caches; a CommonJS consumer require()s them.
import { spawnSync, type SpawnSyncOptions } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cleanToolingEnv } from './tooling-env.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// the converter's reference vectors and domain-facts tool (packages/converter/test-fixtures/README.md)
const FIXTURES = path.join(ROOT, 'packages', 'converter', 'test-fixtures');
const REFERENCE = path.join(FIXTURES, 'reference');

const PACKAGES = [
  'api',
  'log',
  'converter',
  'disks',
  'renderer',
  'cmd-protocol',
  'node-libvirt',
  'libvirt-manager',
] as const;
type Pkg = (typeof PACKAGES)[number];

/** The official Node.js builds the packages are run under (pinned in tools/node-install.sh). */
const RUNTIMES = ['22', '24'] as const;
type Runtime = (typeof RUNTIMES)[number];
const nodeDirs = new Map<Runtime, string>();

function cleanEnv(): NodeJS.ProcessEnv {
  const env = cleanToolingEnv(['npm_config_cache', 'npm_config_registry', 'npm_config_userconfig']);
  // node-gyp builds the addon against the headers of the node running this (an N-API addon: one
  // build loads in every runtime below)
  const prefix = path.resolve(process.execPath, '../..');
  env.npm_config_nodedir = existsSync(path.join(prefix, 'include/node/node_api.h')) ? prefix : '/usr';
  return env;
}

/** The environment with `runtime`'s node first on PATH (for `#!/usr/bin/env node` bins). */
function runtimeEnv(runtime: Runtime): NodeJS.ProcessEnv {
  const env = cleanEnv();
  env.PATH = `${path.join(nodeDirs.get(runtime)!, 'bin')}:${env.PATH ?? ''}`;
  return env;
}

function run(cmd: string, args: string[], opts: SpawnSyncOptions = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', env: cleanEnv(), timeout: 600_000, ...opts });
  if (r.error) throw r.error;
  return { status: r.status, stdout: String(r.stdout), stderr: String(r.stderr) };
}
function sh(cmd: string, args: string[], opts: SpawnSyncOptions = {}): string {
  const r = run(cmd, args, opts);
  if (r.status !== 0)
    throw new Error(`${cmd} ${args.join(' ')} failed (${r.status}):\n${r.stderr}\n${r.stdout}`);
  return r.stdout;
}

interface PackResult {
  name: string;
  filename: string;
  files: { path: string }[];
}

let work: string;
let app: string;
const packed = new Map<Pkg, PackResult>();

beforeAll(() => {
  for (const r of RUNTIMES)
    nodeDirs.set(r, sh('bash', [path.join(ROOT, 'tools/node-install.sh'), r], { timeout: 300_000 }).trim());
  work = mkdtempSync(path.join(tmpdir(), 'kvts-packaging-'));
  const tarballs = path.join(work, 'tarballs');
  mkdirSync(tarballs);
  for (const p of PACKAGES)
    if (!existsSync(path.join(ROOT, 'packages', p, 'dist', 'index.js')))
      throw new Error(`packages/${p} is not built (run: npx nx run-many -t build)`);
  // one npm process packs them all; --json gives each tarball's name and file list
  const out = sh(
    'npm',
    ['pack', '--json', '--pack-destination', tarballs, ...PACKAGES.map((p) => `--workspace=packages/${p}`)],
    { cwd: ROOT },
  );
  const results = JSON.parse(out.slice(out.indexOf('['))) as PackResult[];
  for (const p of PACKAGES) {
    const r = results.find((x) => x.name === `@kubevirt-ts/${p}`);
    if (!r) throw new Error(`npm pack gave no tarball for @kubevirt-ts/${p}`);
    packed.set(p, r);
  }

  app = path.join(work, 'app');
  mkdirSync(app);
  writeFileSync(
    path.join(app, 'package.json'),
    JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module' }),
  );
  const args = [
    'install',
    '--no-audit',
    '--no-fund',
    ...PACKAGES.map((p) => path.join(tarballs, packed.get(p)!.filename)),
  ];
  // dependencies from the npm cache; the registry only when something is not cached
  const offline = run('npm', [...args, '--offline'], { cwd: app });
  if (offline.status !== 0) sh('npm', [...args, '--prefer-offline'], { cwd: app });
}, 900_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

/** A small VMI (as JSON) the consumer scripts default and use. */
const SMALL_VMI = JSON.stringify({
  apiVersion: 'kubevirt.io/v1',
  kind: 'VirtualMachineInstance',
  metadata: { name: 'small', namespace: 'demo', uid: '6c2c0d39-0f6f-4d5c-9f3e-2f4c8e0f7a11' },
  spec: { domain: { resources: { requests: { memory: '128Mi' } }, devices: {} } },
});

/** Runs a module (ES, or CommonJS for .cjs) in the consumer folder with `runtime`'s plain node;
 * returns its stdout parsed as JSON. */
function consumer(runtime: Runtime, name: string, code: string): unknown {
  writeFileSync(path.join(app, name), code);
  const node = path.join(nodeDirs.get(runtime)!, 'bin', 'node');
  const out = sh(node, [name], { cwd: app, timeout: 120_000, env: runtimeEnv(runtime) });
  return JSON.parse(out);
}

describe('tarball contents', () => {
  test.each(PACKAGES)(
    '%s: README, package.json, built code with types; no tests, sources or build leftovers',
    (p) => {
      const files = packed
        .get(p)!
        .files.map((f) => f.path)
        .sort();
      const manifest = JSON.parse(readFileSync(path.join(ROOT, 'packages', p, 'package.json'), 'utf8')) as {
        exports: Record<string, { types?: string; import?: string; default?: string } | string>;
        bin?: Record<string, string>;
        version: string;
        engines?: { node?: string };
      };
      expect(manifest.version).toMatch(/^\d+\.\d+\.\d+$/);
      expect(manifest.engines?.node).toBe('>=22.19');
      expect(files).toEqual(expect.arrayContaining(['README.md', 'package.json']));
      // everything exports and bin point at is in the tarball
      const targets = [
        ...Object.values(manifest.exports).flatMap((e) =>
          typeof e === 'string' ? [e] : [e.types, e.import, e.default],
        ),
        ...Object.values(manifest.bin ?? {}),
      ].filter((t): t is string => typeof t === 'string');
      expect(targets).toContain('./dist/index.d.ts');
      for (const t of targets) expect(files).toContain(path.posix.normalize(t));

      const unwanted = files.filter(
        (f) =>
          /\.test\.|(^|\/)test-|(^|\/)bench[./]|\.map$|\.tsbuildinfo$|^src\/|^build\/|\.node$|jest\.config|tsconfig/.test(
            f,
          ) ||
          (f.endsWith('.ts') && !f.endsWith('.d.ts')),
      );
      expect(unwanted).toEqual([]);
      // no stale build output: every compiled module has its source in the repository
      const orphans = files
        .filter((f) => f.startsWith('dist/') && f.endsWith('.js'))
        .filter((f) => !existsSync(path.join(ROOT, 'packages', p, 'src', f.slice(5, -3) + '.ts')));
      expect(orphans).toEqual([]);
    },
  );

  test('node-libvirt carries binding.gyp, the native sources and its build script, not a prebuilt addon', () => {
    const files = packed.get('node-libvirt')!.files.map((f) => f.path);
    expect(files).toEqual(
      expect.arrayContaining([
        'binding.gyp',
        'native/binding.cc',
        'scripts/build-native.mjs',
        'native/monitor.c',
        'scripts/build-monitor.mjs',
      ]),
    );
    expect(files.filter((f) => f.startsWith('build/'))).toEqual([]);
    // ... and the install built it in the consumer folder
    expect(
      existsSync(path.join(app, 'node_modules/@kubevirt-ts/node-libvirt/build/Release/kvts_libvirt.node')),
    ).toBe(true);
    // ... and the native monitor
    expect(
      existsSync(path.join(app, 'node_modules/@kubevirt-ts/node-libvirt/build/virt-launcher-monitor')),
    ).toBe(true);
  });
});

describe.each(RUNTIMES)('installed from the tarballs, imported and called under Node %s', (rt) => {
  test('the runtime is that Node.js', () => {
    expect(consumer(rt, 'version.mjs', 'console.log(JSON.stringify(process.versions.node));')).toMatch(
      new RegExp(`^${rt}\\.`),
    );
  });

  test('api: validateObject, defaults, parseQuantity', () => {
    expect(
      consumer(
        rt,
        'api.mjs',
        `import { validateObject, setVirtualMachineInstanceDefaults, parseQuantity } from '@kubevirt-ts/api';
const vmi = { apiVersion: 'kubevirt.io/v1', kind: 'VirtualMachineInstance', metadata: { name: 'a' },
  spec: { domain: { resources: { requests: { memory: '64Mi' } }, devices: { disks: [{ name: 'x' }] } } } };
console.log(JSON.stringify({
  errors: validateObject(vmi).map((e) => e.path),
  machine: setVirtualMachineInstanceDefaults({ ...vmi, spec: { domain: { resources: { requests: { memory: '64Mi' } } } } }).spec.domain.machine.type,
  q: parseQuantity('64Mi'),
}));
`,
      ),
    ).toEqual({ errors: ['spec.domain.devices.disks[0].name'], machine: 'q35', q: 67108864 });
  });

  test('log: createLogger writes one JSON object per line', () => {
    const out = consumer(
      rt,
      'log.mjs',
      `import { PassThrough } from 'node:stream';
import { createLogger } from '@kubevirt-ts/log';
const stream = new PassThrough();
let text = '';
stream.on('data', (d) => (text += d));
const log = createLogger({ component: 'consumer', identity: { kind: 'VirtualMachineInstance', name: 'a' }, stream });
log.info('hello', { reason: 'Test' });
setImmediate(() => console.log(JSON.stringify(text.trim().split('\\n').map((l) => JSON.parse(l)))));
`,
    ) as Record<string, unknown>[];
    expect(out).toHaveLength(1);
    expect(out[0]).toMatchObject({
      component: 'consumer',
      level: 'info',
      msg: 'hello',
      kind: 'VirtualMachineInstance',
      name: 'a',
      reason: 'Test',
    });
    expect(typeof out[0]!.timestamp).toBe('string');
  });

  test('converter: toDomainXml(toDomain(vmi)) and back', () => {
    const out = consumer(
      rt,
      'converter.mjs',
      `import { setVirtualMachineInstanceDefaults } from '@kubevirt-ts/api';
import { toDomain, toDomainXml, parseDomainXml } from '@kubevirt-ts/converter';
const vmi = setVirtualMachineInstanceDefaults(${SMALL_VMI});
const xml = toDomainXml(toDomain(vmi, { allowEmulation: true, kvmAvailable: false }));
const back = parseDomainXml(xml);
console.log(JSON.stringify({ name: back.name, type: back.type, roundTrip: toDomainXml(back) === xml, memory: /<memory unit="b">134217728<\\/memory>/.test(xml) }));
`,
    );
    expect(out).toEqual({ name: 'demo_small', type: 'qemu', roundTrip: true, memory: true });
  });

  test('renderer: renderLaunchPod', () => {
    const out = consumer(
      rt,
      'renderer.mjs',
      `import { setVirtualMachineInstanceDefaults } from '@kubevirt-ts/api';
import { renderLaunchPod } from '@kubevirt-ts/renderer';
const vmi = setVirtualMachineInstanceDefaults(${SMALL_VMI});
const pod = renderLaunchPod(vmi, { launcherImage: 'example.org/virt-launcher:1', useEmulation: true });
const compute = pod.spec.containers.find((c) => c.name === 'compute');
console.log(JSON.stringify({ generateName: pod.metadata.generateName, image: compute.image, emulation: compute.command.includes('--allow-emulation') }));
`,
    );
    expect(out).toEqual({
      generateName: 'virt-launcher-small-',
      image: 'example.org/virt-launcher:1',
      emulation: true,
    });
  });

  test('cmd-protocol: CmdServer on a temp socket, Ping and GetDomain through a CmdClient', () => {
    const out = consumer(
      rt,
      'cmd-protocol.mjs',
      `import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CmdServer, CmdClient, launcherSocketPath } from '@kubevirt-ts/cmd-protocol';
const dir = mkdtempSync(join(tmpdir(), 'kvts-consumer-'));
const server = new CmdServer({ socketsDir: dir, backend: {}, logger: { info() {}, warn() {}, error() {}, debug() {} } });
await server.start();
await server.ready();
const client = await CmdClient.connect(launcherSocketPath(dir));
await client.ping();
let unsupported = '';
try { await client.getDomain(); } catch (e) { unsupported = e.message; }
client.close();
await server.stop();
rmSync(dir, { recursive: true, force: true });
console.log(JSON.stringify({ pinged: true, unsupported }));
`,
    ) as { pinged: boolean; unsupported: string };
    expect(out.pinged).toBe(true);
    expect(out.unsupported).toMatch(/not supported/);
  });

  test('node-libvirt: open test:///default, list domains, read a state', () => {
    const out = consumer(
      rt,
      'node-libvirt.mjs',
      `import { Connection } from '@kubevirt-ts/node-libvirt';
const conn = await Connection.open('test:///default');
const domains = await conn.listAllDomains();
const state = await domains[0].getState();
const out = { names: domains.map((d) => d.name), reasonName: typeof state.reasonName, version: (await conn.getLibVersion()) > 0 };
await conn.close();
console.log(JSON.stringify(out));
`,
    );
    expect(out).toEqual({ names: ['test'], reasonName: 'string', version: true });
  });

  test('libvirt-manager: DomainManager over test:///default, getDomain', () => {
    const out = consumer(
      rt,
      'libvirt-manager.mjs',
      `import { Connection } from '@kubevirt-ts/node-libvirt';
import { createPodLayout } from '@kubevirt-ts/converter';
import { DomainManager } from '@kubevirt-ts/libvirt-manager';
const conn = await Connection.open('test:///default');
const manager = new DomainManager({ connection: conn, context: { layout: createPodLayout('') },
  logger: { info() {}, warn() {}, error() {}, debug() {} } });
const dom = await manager.getDomain('test');
const none = await manager.getDomain('demo_absent');
await conn.close();
console.log(JSON.stringify({ name: dom?.spec?.name ?? dom?.metadata?.name, status: dom?.status?.status, none: none === undefined }));
`,
    );
    expect(out).toEqual({ name: 'test', status: 'Running', none: true });
  });
});

describe.each(RUNTIMES)('a CommonJS consumer under Node %s', (rt) => {
  test('require() of every package loads it (ES modules from require) and it works', () => {
    const out = consumer(
      rt,
      'consumer.cjs',
      `const names = ${JSON.stringify(PACKAGES.map((p) => `@kubevirt-ts/${p}`))};
const exported = {};
for (const n of names) exported[n] = typeof require(n) === 'object' && Object.keys(require(n)).length > 0;
const { setVirtualMachineInstanceDefaults } = require('@kubevirt-ts/api');
const { toDomain, toDomainXml } = require('@kubevirt-ts/converter');
const xml = toDomainXml(toDomain(setVirtualMachineInstanceDefaults(${SMALL_VMI}), { allowEmulation: true, kvmAvailable: false }));
console.log(JSON.stringify({ exported, name: xml.includes('<name>demo_small</name>') }));
`,
    );
    expect(out).toEqual({
      exported: Object.fromEntries(PACKAGES.map((p) => [`@kubevirt-ts/${p}`, true])),
      name: true,
    });
  });
});

describe.each(RUNTIMES)('bins from the tarballs under Node %s', (rt) => {
  test('kv-validate: a reference VMI is ok, an invalid one names the field', () => {
    const bin = path.join(app, 'node_modules/.bin/kv-validate');
    const env = runtimeEnv(rt);
    expect(sh(bin, [path.join(REFERENCE, '09-masquerade-ports.yaml')], { cwd: app, env })).toMatch(/: ok\n$/);
    const bad = run(bin, [path.join(REFERENCE, '15-xml-metachars.yaml')], { cwd: app, env });
    expect(bad.status).toBe(1);
    expect(bad.stdout + bad.stderr).toContain('spec.domain.devices.disks[0].serial');
  });

  test('virt-convert: a reference VMI gives the domain upstream gives (domain-facts.py)', () => {
    const xml = sh(
      path.join(app, 'node_modules/.bin/virt-convert'),
      [path.join(REFERENCE, '09-masquerade-ports.yaml')],
      { cwd: app, env: runtimeEnv(rt) },
    );
    expect(xml).toContain('<name>default_net-masq</name>');
    const actual = path.join(work, `actual-${rt}.xml`);
    writeFileSync(actual, xml);
    const facts = run('python3', [
      path.join(FIXTURES, 'domain-facts.py'),
      path.join(REFERENCE, '09-masquerade-ports.xml'),
      actual,
    ]);
    expect(facts.stdout.trim().split('\n').pop()).toMatch(/\(100(\.0)?%\)$/);
  });
});

test('every README import of @kubevirt-ts/* type-checks against the installed tarballs', () => {
  // the import statements of each README's ts code blocks, exactly as written
  const imports: string[] = [];
  for (const p of PACKAGES) {
    const readme = readFileSync(path.join(ROOT, 'packages', p, 'README.md'), 'utf8');
    for (const block of readme.matchAll(/```(?:ts|typescript|js|javascript)\n([\s\S]*?)```/g))
      for (const m of block[1]!.matchAll(/^import\s[\s\S]*?from\s+'([^']+)';/gm))
        if (m[1]!.startsWith('@kubevirt-ts/')) imports.push(`// packages/${p}/README.md\n${m[0]}`);
  }
  const seen = new Set(imports.map((i) => /from '(@kubevirt-ts\/[^']+)'/.exec(i)![1]));
  expect([...seen].sort()).toEqual(PACKAGES.map((p) => `@kubevirt-ts/${p}`).sort());
  // one module per import so equal local names from different READMEs do not clash
  const dir = path.join(app, 'readme-imports');
  mkdirSync(dir, { recursive: true });
  imports.forEach((imp, i) => writeFileSync(path.join(dir, `i${i}.ts`), `${imp}\nexport {};\n`));
  writeFileSync(
    path.join(app, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        target: 'ES2022',
        strict: true,
        noEmit: true,
        skipLibCheck: false,
        types: ['node'],
        typeRoots: [path.join(ROOT, 'node_modules/@types')],
      },
      include: ['readme-imports/*.ts'],
    }),
  );
  const r = run(
    process.execPath,
    [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json'],
    {
      cwd: app,
      timeout: 180_000,
    },
  );
  // our own declaration files are checked too; third-party ones only as their own authors ship them
  // (e.g. @kubernetes/client-node's isomorphic-ws refers to ws without types)
  const errors = (r.stdout + r.stderr)
    .split('\n')
    .filter((l) => /error TS\d+/.test(l))
    .filter((l) => !l.startsWith('node_modules/') || l.startsWith('node_modules/@kubevirt-ts/'));
  expect(errors).toEqual([]);
  if (r.status !== 0) expect(r.stdout + r.stderr).toMatch(/^node_modules\/(?!@kubevirt-ts\/)/m);
}, 200_000);
