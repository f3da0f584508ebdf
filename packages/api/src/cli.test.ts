import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { stringify } from 'yaml';
import { baseVm, baseVmi, REFERENCE_DIR } from './test-fixtures.js';

const CLI = fileURLToPath(new URL('./cli/kv-validate.js', import.meta.url));
const BIN = fileURLToPath(new URL('../bin/kv-validate.js', import.meta.url));
const ROOT_BIN = fileURLToPath(new URL('../../../node_modules/.bin/kv-validate', import.meta.url));

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kv-validate-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function run(args: string[], input?: string) {
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd: dir, input, encoding: 'utf8' });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

function file(name: string, content: string): string {
  writeFileSync(join(dir, name), content);
  return name;
}

test('valid YAML and JSON files print ok and exit 0', () => {
  const y = file('ok.yaml', stringify(baseVmi()));
  const j = file('ok.json', JSON.stringify(baseVm()));
  const r = run([y, j]);
  expect(r.out).toBe('ok.yaml: ok\nok.json: ok\n');
  expect(r.code).toBe(0);
});

test('one line per error, FILE: path: reason, exit 1', () => {
  const v = baseVmi();
  v.spec.domain.devices.disks.push({ name: 'data', disk: {} });
  v.spec.domain.devices.interfaces[0].macAddress = 'zz';
  const f = file('bad.yaml', stringify(v));
  const ok = file('ok2.yaml', stringify(baseVmi()));
  const r = run([f, ok]);
  expect(r.code).toBe(1);
  expect(r.out.split('\n')).toEqual([
    expect.stringMatching(
      /^bad\.yaml: spec\.domain\.devices\.interfaces\[0\]\.macAddress: "zz" is not a MAC address/,
    ),
    'bad.yaml: spec.domain.devices.disks[2].name: no volume named "data" in spec.volumes',
    'ok2.yaml: ok',
    '',
  ]);
});

test('multi-document YAML: errors name the document', () => {
  const bad = baseVm();
  bad.spec.running = true;
  const f = file('multi.yaml', `${stringify(baseVmi())}---\n${stringify(bad)}`);
  const r = run([f]);
  expect(r.code).toBe(1);
  expect(r.out).toBe(
    'multi.yaml: spec.running: running and runStrategy are mutually exclusive: set only runStrategy (document 2)\n',
  );
});

test('stdin, syntax errors, unreadable files, empty files, usage', () => {
  expect(run(['-'], JSON.stringify(baseVmi()))).toMatchObject({ code: 0, out: '-: ok\n' });
  const syn = run([file('syntax.yaml', 'a: [1, 2\n')]);
  expect(syn.code).toBe(1);
  expect(syn.out).toMatch(/^syntax\.yaml: \(syntax\): document 1: /);
  expect(syn.out).toMatch(/line \d+, column \d+\n$/); // one line, no dangling ':' of the code frame
  const missing = run(['nope.yaml']);
  expect(missing.code).toBe(1);
  expect(missing.out).toMatch(/^nope\.yaml: \(file\): cannot read: ENOENT/);
  expect(run([file('empty.yaml', '# nothing\n')])).toMatchObject({
    code: 1,
    out: 'empty.yaml: (file): no manifests found\n',
  });
  const usage = run([]);
  expect(usage.code).toBe(2);
  expect(usage.err).toMatch(/usage: kv-validate FILE/);
});

test('the reference VMIs', () => {
  const r = spawnSync(process.execPath, [CLI, '01-minimal.yaml', '09-masquerade-ports.yaml'], {
    cwd: REFERENCE_DIR,
    encoding: 'utf8',
  });
  expect(r.stdout).toBe('01-minimal.yaml: ok\n09-masquerade-ports.yaml: ok\n');
  expect(r.status).toBe(0);
});

test('npm workspaces link the bin at the repository root, and it runs', () => {
  expect(existsSync(ROOT_BIN)).toBe(true);
  expect(realpathSync(ROOT_BIN)).toBe(realpathSync(BIN));
  expect(readFileSync(BIN, 'utf8').startsWith('#!/usr/bin/env node\n')).toBe(true);
  const r = spawnSync(ROOT_BIN, ['01-minimal.yaml'], { cwd: REFERENCE_DIR, encoding: 'utf8' });
  expect(r.stdout).toBe('01-minimal.yaml: ok\n');
  expect(r.status).toBe(0);
});

test('the bin says clearly when the package is not built', () => {
  const copy = join(dir, 'unbuilt', 'bin');
  mkdirSync(copy, { recursive: true });
  copyFileSync(BIN, join(copy, 'kv-validate.js'));
  const r = spawnSync(process.execPath, [join(copy, 'kv-validate.js'), 'x.yaml'], { encoding: 'utf8' });
  expect(r.status).toBe(2);
  expect(r.stderr).toMatch(/not built yet/);
});

test('documents of other APIs are not validated, and say so; a directory is walked', () => {
  const sub = join(dir, 'walk', 'nested');
  mkdirSync(sub, { recursive: true });
  writeFileSync(
    join(dir, 'walk', 'pc.yaml'),
    'apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: p}\nvalue: 1\n',
  );
  writeFileSync(
    join(sub, 'mixed.yaml'),
    `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\n${stringify(baseVmi())}`,
  );
  writeFileSync(join(sub, 'notes.txt'), 'not a manifest');
  const r = run(['walk']);
  expect(r.out).toBe(
    'walk/nested/mixed.yaml: ok (not validated, not a KubeVirt kind: ConfigMap v1)\n' +
      'walk/pc.yaml: skipped (not a KubeVirt kind: PriorityClass scheduling.k8s.io/v1)\n',
  );
  expect(r.code).toBe(0);
  // a KubeVirt group's kind that is not implemented is refused, not skipped
  const snap = file(
    'snap.yaml',
    'apiVersion: snapshot.kubevirt.io/v1beta1\nkind: VirtualMachineSnapshot\nmetadata: {name: s}\n',
  );
  expect(run([snap])).toMatchObject({
    code: 1,
    out: expect.stringMatching(/^snap\.yaml: apiVersion: must be/),
  });
});

test('tools/check-examples.mjs: per file accepted/refused/skipped, the refusals with their paths, the summary', () => {
  const ex = join(dir, 'examples');
  mkdirSync(ex, { recursive: true });
  writeFileSync(join(ex, 'a-ok.yaml'), stringify(baseVm()));
  const bad = baseVmi();
  bad.spec.domain.devices.disks.push({ name: 'data', disk: {} });
  writeFileSync(join(ex, 'b-bad.yaml'), stringify(bad));
  writeFileSync(
    join(ex, 'c-pc.yaml'),
    'apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: p}\nvalue: 1\n',
  );
  const tool = fileURLToPath(new URL('../../../tools/check-examples.mjs', import.meta.url));
  const r = spawnSync(process.execPath, [tool, ex], { encoding: 'utf8' });
  expect(r.stdout).toBe(
    [
      'a-ok.yaml: accepted',
      'b-bad.yaml: refused',
      '  spec.domain.devices.disks[2].name: no volume named "data" in spec.volumes',
      'c-pc.yaml: skipped (not a KubeVirt kind: PriorityClass scheduling.k8s.io/v1)',
      'examples: 1 accepted, 1 refused, 1 skipped',
      '',
    ].join('\n'),
  );
  expect(r.status).toBe(1);
  expect(spawnSync(process.execPath, [tool], { encoding: 'utf8' }).status).toBe(2);
  expect(spawnSync(process.execPath, [tool, join(ex, 'a-ok.yaml')], { encoding: 'utf8' }).stderr).toMatch(
    /not a directory/,
  );
});
