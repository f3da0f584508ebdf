// virt-convert, run as a real process (the bin) and through main().
import { describe, expect, test } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { main, type CliIO } from './cli.js';
import { parseDomainXml } from './xml.js';
import { REFERENCE_DIR, convertWithDefaults, factDiff, vectors } from './test-util.js';
import { readFileSync } from 'node:fs';

const BIN = fileURLToPath(new URL('./cli.js', import.meta.url));
const run = (args: string[]) => spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8' });

function io(files: Record<string, string>, kvm = true): CliIO & { out: string; err: string } {
  const o = {
    out: '',
    err: '',
    stdout: (s: string) => void (o.out += s),
    stderr: (s: string) => void (o.err += s),
    readFile: (f: string) => {
      if (!(f in files)) throw new Error(`ENOENT: ${f}`);
      return files[f]!;
    },
    kvmPresent: () => kvm,
  };
  return o;
}

describe('virt-convert (process)', () => {
  test('prints the domain XML of a vector; matches upstream facts', () => {
    const file = path.join(REFERENCE_DIR, '09-masquerade-ports.yaml');
    const r = run([file]);
    expect(r.status).toBe(0);
    expect(r.stderr).toBe('');
    expect(parseDomainXml(r.stdout).name).toBe('default_net-masq');
    expect(
      factDiff(readFileSync(path.join(REFERENCE_DIR, '09-masquerade-ports.xml'), 'utf8'), r.stdout).diffs,
    ).toEqual({});
  });
  test('invalid input exits 1 with the validation errors and no XML', () => {
    const r = run([path.join(REFERENCE_DIR, '15-xml-metachars.yaml')]);
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('spec.domain.devices.disks[0].serial');
  });
  test('usage errors exit 2', () => {
    expect(run([]).status).toBe(2);
    expect(run(['--bogus', 'x.yaml']).status).toBe(2);
  });
});

describe('virt-convert (main)', () => {
  test('for every vector the CLI prints what the parity tests compare (or, for 15, refuses it)', () => {
    for (const v of vectors()) {
      const o = io({ [v.name]: v.yaml });
      const code = main([v.name], o);
      if (v.name.startsWith('15-')) {
        expect([v.name, code, o.out]).toEqual([v.name, 1, '']);
        continue;
      }
      expect([v.name, code, o.err]).toEqual([v.name, 0, '']);
      expect(o.out).toBe(convertWithDefaults(v.vmi));
    }
  });

  const vm = `apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: { name: from-vm, namespace: prod }
spec:
  runStrategy: Always
  template:
    spec:
      domain:
        resources: { requests: { memory: 64Mi } }
        devices: { disks: [ { name: root, disk: {} } ] }
      volumes: [ { name: root, containerDisk: { image: quay.io/containerdisks/fedora:latest } } ]
`;
  test("a VirtualMachine's template is converted, with API defaults (bus sata, pod interface)", () => {
    const o = io({ 'vm.yaml': `---\nkind: ConfigMap\napiVersion: v1\nmetadata: { name: x }\n---\n${vm}` });
    expect(main(['vm.yaml'], o)).toBe(0);
    const d = parseDomainXml(o.out);
    expect(d.name).toBe('prod_from-vm');
    expect(d.type).toBe('kvm');
    expect(d.devices.disks![0]!.target).toEqual({ dev: 'sda', bus: 'sata' });
    expect(d.devices.interfaces![0]!.alias).toBe('ua-default');
  });
  test('--emulation: qemu when KVM is missing; error without it', () => {
    const a = io({ 'vm.yaml': vm }, false);
    expect(main(['vm.yaml', '--emulation'], a)).toBe(0);
    expect(parseDomainXml(a.out).type).toBe('qemu');
    const b = io({ 'vm.yaml': vm }, false);
    expect(main(['vm.yaml'], b)).toBe(1);
    expect(b.out).toBe('');
    expect(b.err).toMatch(/not available and emulation is not allowed/);
    const c = io({ 'vm.yaml': vm }, true);
    expect(main(['vm.yaml', '--emulation', '--no-kvm'], c)).toBe(0);
    expect(parseDomainXml(c.out).type).toBe('qemu');
  });
  test('--arch other than amd64 says it is not implemented', () => {
    const o = io({ 'vm.yaml': vm });
    expect(main(['vm.yaml', '--arch', 'arm64'], o)).toBe(1);
    expect(o.err).toMatch(/not implemented/);
    expect(o.out).toBe('');
  });
  test('bad YAML, no VMI, unconvertible VMI: exit 1, message, no XML', () => {
    const cases: [string, RegExp][] = [
      ['a: [', /vm.yaml/],
      ['kind: ConfigMap\napiVersion: v1\n', /no VirtualMachineInstance or VirtualMachine/],
      [
        vm.replace(
          'disks: [ { name: root, disk: {} } ]',
          'disks: [ { name: root, disk: {} } ], gpus: [ { name: g, deviceName: x/y } ]',
        ),
        /gpus.*not implemented/,
      ],
    ];
    for (const [text, re] of cases) {
      const o = io({ 'vm.yaml': text });
      expect(main(['vm.yaml'], o)).toBe(1);
      expect(o.out).toBe('');
      expect(o.err).toMatch(re);
    }
  });
  test('missing file', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'kvts-cli-'));
    try {
      writeFileSync(path.join(dir, 'ok.yaml'), vm);
      expect(run([path.join(dir, 'ok.yaml'), '--emulation']).status).toBe(0);
      const r = run([path.join(dir, 'missing.yaml')]);
      expect(r.status).toBe(1);
      expect(r.stdout).toBe('');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
