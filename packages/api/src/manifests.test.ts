import { parseManifests, vmiFromManifest } from './manifests.js';
import { baseVm, baseVmi } from './test-fixtures.js';

test('multi-document YAML, empty documents skipped', () => {
  const text = `---\napiVersion: v1\nkind: A\n---\n# only a comment\n---\napiVersion: v1\nkind: B\n...\n`;
  expect(parseManifests(text)).toEqual([
    { apiVersion: 'v1', kind: 'A' },
    { apiVersion: 'v1', kind: 'B' },
  ]);
});

test('JSON object, JSON array and a List', () => {
  expect(parseManifests('{"kind":"A"}')).toEqual([{ kind: 'A' }]);
  expect(parseManifests('[{"kind":"A"},{"kind":"B"}]')).toEqual([{ kind: 'A' }, { kind: 'B' }]);
  expect(parseManifests(JSON.stringify({ apiVersion: 'v1', kind: 'List', items: [{ kind: 'A' }] }))).toEqual([
    { kind: 'A' },
  ]);
});

test('quantities stay strings, numbers stay numbers', () => {
  expect(parseManifests('a: 128Mi\nb: 2\nc: "2"\n')).toEqual([{ a: '128Mi', b: 2, c: '2' }]);
});

test('syntax errors throw with the document number and position', () => {
  expect(() => parseManifests('a: b\n---\nx: [1, 2\n')).toThrow(/document 2/);
  expect(() => parseManifests('{"a": 1')).toThrow(/document 1/);
  expect(() => parseManifests('a: b\n  c: d\n')).toThrow(/at line 1, column 4/);
});

test('vmiFromManifest: a VMI as is (copied)', () => {
  const v = baseVmi();
  const out = vmiFromManifest(v);
  expect(out).toEqual(v);
  expect(out).not.toBe(v);
});

test('vmiFromManifest: a VM becomes the VMI of its template', () => {
  const vm = baseVm();
  vm.spec.template.metadata.annotations = { a: 'b' };
  const vmi = vmiFromManifest(vm);
  expect(vmi.kind).toBe('VirtualMachineInstance');
  expect(vmi.apiVersion).toBe('kubevirt.io/v1');
  expect(vmi.metadata).toEqual({
    name: 'testvm',
    namespace: 'default',
    labels: { app: 'testvm' },
    annotations: { a: 'b' },
  });
  expect(vmi.spec).toEqual(vm.spec.template.spec);
  expect(vmi.spec).not.toBe(vm.spec.template.spec);
});

test('vmiFromManifest rejects other kinds and VMs without a template', () => {
  expect(() => vmiFromManifest({ kind: 'Pod' })).toThrow(/kind "Pod"/);
  expect(() => vmiFromManifest('x')).toThrow(/must be an object/);
  expect(() => vmiFromManifest({ kind: 'VirtualMachine', spec: {} })).toThrow(/spec.template/);
});
