// The limits of README "Limits": list bounds, metadata as the API server checks it, control characters,
// nesting depth, and quantities up to the exabytes.
import { validateFile } from './cli/validate-file.js';
import { crdFor, type JSONSchemaProps } from './crd.js';
import { setVirtualMachineDefaults } from './defaults.js';
import { parseManifests } from './manifests.js';
import { isQuantity, parseQuantity } from './quantity.js';
import { baseVm, baseVmi, type Any } from './test-fixtures.js';
import { validateObject } from './validate.js';

/** The CRD schema node at a path of property names (`[]` steps into a list's items). */
function crdNode(kind: string, path: string[]): JSONSchemaProps {
  const version = (crdFor(kind)['spec'] as Any).versions[0];
  let s: Any = version.schema.openAPIV3Schema;
  for (const k of path) s = k === '[]' ? s.items : s.properties[k];
  return s as JSONSchemaProps;
}

describe('lists bounded as upstream bounds them (256 items)', () => {
  const lists: [string, (v: Any) => unknown[], () => unknown][] = [
    ['spec.domain.devices.disks', (v) => v.spec.domain.devices.disks, () => ({ name: 'd', disk: {} })],
    ['spec.domain.devices.interfaces', (v) => v.spec.domain.devices.interfaces, () => ({ name: 'i' })],
    ['spec.volumes', (v) => v.spec.volumes, () => ({ name: 'v', emptyDisk: { capacity: '1Gi' } })],
    ['spec.networks', (v) => v.spec.networks, () => ({ name: 'n', pod: {} })],
    ['spec.accessCredentials', (v) => (v.spec.accessCredentials = []), () => ({})],
  ];

  test.each(lists)('%s: 257 items are one error at the list, naming the bound', (path, list, item) => {
    const v = baseVmi();
    const l = list(v);
    while (l.length < 257) l.push(item());
    expect(validateObject(v)).toEqual([{ path, reason: 'must have at most 256 items, got 257' }]);
    const vm = baseVm();
    vm.spec.template.spec = v.spec;
    expect(validateObject(vm)).toEqual([
      { path: `spec.template.${path}`, reason: 'must have at most 256 items, got 257' },
    ]);
  });

  test('256 disks on 256 volumes are valid', () => {
    const v = baseVmi();
    v.spec.domain.devices.disks = [];
    v.spec.volumes = [];
    for (let i = 0; i < 256; i++) {
      v.spec.domain.devices.disks.push({ name: `d${i}`, disk: {} });
      v.spec.volumes.push({ name: `d${i}`, emptyDisk: { capacity: '1Gi' } });
    }
    expect(validateObject(v)).toEqual([]);
  });

  test('kv-validate refuses a VMI with 10,000 bad disks at once, with one line', () => {
    const v = baseVmi();
    v.spec.domain.devices.disks = Array.from({ length: 10_000 }, (_, i) => ({
      name: `disk-${i % 100}`, // duplicates, no volumes, an unknown field: nothing of it is reported
      disk: { bus: 'floppy' },
      bogus: i,
    }));
    const start = performance.now();
    const lines = validateFile('f.json', JSON.stringify(v));
    const ms = performance.now() - start;
    expect(lines).toEqual(['f.json: spec.domain.devices.disks: must have at most 256 items, got 10000']);
    expect(ms).toBeLessThan(3000); // parsing 10,000 items takes a few hundred ms; quadratic work takes far more
  });

  test('the CRDs carry the bounds', () => {
    for (const path of [
      ['spec', 'domain', 'devices', 'disks'],
      ['spec', 'domain', 'devices', 'interfaces'],
      ['spec', 'volumes'],
      ['spec', 'networks'],
      ['spec', 'accessCredentials'],
    ]) {
      expect(crdNode('VirtualMachineInstance', path)['maxItems']).toBe(256);
      expect(crdNode('VirtualMachine', ['spec', 'template', ...path])['maxItems']).toBe(256);
    }
    expect(crdNode('VirtualMachineInstance', ['spec', 'domain', 'devices', 'inputs'])['maxItems']).toBe(
      undefined,
    );
  });
});

describe('metadata as the API server checks it', () => {
  const meta = (m: Any) => {
    const v = baseVmi();
    Object.assign(v.metadata, m);
    return validateObject(v);
  };

  test('annotations: keys and values together at most 256 KiB, counted in bytes', () => {
    const fill = (bytes: number) => ({ a: 'x'.repeat(bytes - 4), b: 'é' }); // 'é' is 2 bytes
    expect(meta({ annotations: fill(256 * 1024) })).toEqual([]);
    expect(meta({ annotations: fill(256 * 1024 + 1) })).toEqual([
      {
        path: 'metadata.annotations',
        reason: 'too long: keys and values together must be at most 262144 bytes (256 KiB), got 262145',
      },
    ]);
  });

  test('annotation keys: qualified names in any case (the API server lower-cases them first)', () => {
    expect(meta({ annotations: { 'Example.COM/Some-Key': 'v', UPPER: 'v' } })).toEqual([]);
    const errs = meta({ annotations: { 'a/b/c': '', 'bad key': '', [`${'x'.repeat(254)}/k`]: '' } });
    expect(errs.map((e) => e.path)).toEqual([
      'metadata.annotations["a/b/c"]',
      'metadata.annotations["bad key"]',
      `metadata.annotations["${'x'.repeat(254)}/k"]`,
    ]);
  });

  test('label keys and values', () => {
    expect(meta({ labels: { 'app.kubernetes.io/name': 'x', k: '', 'a-b_c.d': 'A-b_c.9' } })).toEqual([]);
    const errs = meta({
      labels: {
        'Example.com/k': 'v', // a label key's prefix is a lower-case DNS subdomain
        [`${'n'.repeat(64)}`]: 'v',
        [`${'p'.repeat(254)}/k`]: 'v',
        long: 'v'.repeat(64),
        dash: '-v',
        newline: 'v\n',
      },
    });
    expect(errs.map((e) => e.path)).toEqual([
      'metadata.labels["Example.com/k"]',
      `metadata.labels.${'n'.repeat(64)}`,
      `metadata.labels["${'p'.repeat(254)}/k"]`,
      'metadata.labels.long',
      'metadata.labels.dash',
      'metadata.labels.newline',
    ]);
  });

  test('name: a DNS-1123 subdomain of at most 253 characters', () => {
    expect(meta({ name: `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}` })).toEqual(
      [],
    );
    expect(meta({ name: 'a'.repeat(254) })).toEqual([
      { path: 'metadata.name', reason: 'must be no more than 253 characters (is 254)' },
    ]);
    expect(meta({ name: 'Upper' }).map((e) => e.path)).toEqual(['metadata.name']);
  });

  test('generateName: a subdomain prefix, a trailing dash allowed', () => {
    expect(meta({ name: undefined, generateName: 'testvm-' })).toEqual([]);
    expect(meta({ name: undefined, generateName: 'a.b' })).toEqual([]);
    for (const bad of ['Test-', 'a_b-', '-a', 'a..b-', `${'a'.repeat(254)}`]) {
      expect(meta({ name: undefined, generateName: bad }).map((e) => e.path)).toEqual([
        'metadata.generateName',
      ]);
    }
  });
});

describe('control characters in strings that become command lines, file names or XML', () => {
  const cases: [string, (v: Any) => void, string][] = [
    [
      'containerDisk image',
      (v) => (v.spec.volumes[0].containerDisk.image = 'quay.io/a\nb'),
      'spec.volumes[0].containerDisk.image',
    ],
    [
      'containerDisk image (NUL)',
      (v) => (v.spec.volumes[0].containerDisk.image = 'quay.io/a\u0000'),
      'spec.volumes[0].containerDisk.image',
    ],
    [
      'containerDisk path',
      (v) => (v.spec.volumes[0].containerDisk.path = '/disk/a\tb.img'),
      'spec.volumes[0].containerDisk.path',
    ],
    [
      'hostDisk path',
      (v) => (v.spec.volumes[0] = { name: 'root', hostDisk: { path: '/data/x\r.img', type: 'Disk' } }),
      'spec.volumes[0].hostDisk.path',
    ],
    [
      'PVC claim name',
      (v) => (v.spec.volumes[0] = { name: 'root', persistentVolumeClaim: { claimName: 'pvc\u007f' } }),
      'spec.volumes[0].persistentVolumeClaim.claimName',
    ],
    [
      'secret name',
      (v) => (v.spec.volumes[0] = { name: 'root', secret: { secretName: 's\n' } }),
      'spec.volumes[0].secret.secretName',
    ],
    [
      'configMap name',
      (v) => (v.spec.volumes[0] = { name: 'root', configMap: { name: 'c\u001b' } }),
      'spec.volumes[0].configMap.name',
    ],
    [
      'cloud-init secretRef',
      (v) => (v.spec.volumes[1].cloudInitNoCloud = { secretRef: { name: 'x\n' } }),
      'spec.volumes[1].cloudInitNoCloud.secretRef.name',
    ],
    [
      'kernel args',
      (v) =>
        (v.spec.domain.firmware = {
          kernelBoot: {
            kernelArgs: 'console=ttyS0\ninit=/bin/sh',
            container: { image: 'k', kernelPath: '/k' },
          },
        }),
      'spec.domain.firmware.kernelBoot.kernelArgs',
    ],
    [
      'kernelBoot image',
      (v) => (v.spec.domain.firmware = { kernelBoot: { container: { image: 'k\n', kernelPath: '/k' } } }),
      'spec.domain.firmware.kernelBoot.container.image',
    ],
    [
      'kernelBoot initrdPath',
      (v) => (v.spec.domain.firmware = { kernelBoot: { container: { image: 'k', initrdPath: '/i\n' } } }),
      'spec.domain.firmware.kernelBoot.container.initrdPath',
    ],
    [
      'multus network name',
      (v) => {
        v.spec.networks[0] = { name: 'default', multus: { networkName: 'ns/net\n' } };
        v.spec.domain.devices.interfaces[0] = { name: 'default', bridge: {} };
      },
      'spec.networks[0].multus.networkName',
    ],
    ['CPU model', (v) => (v.spec.domain.cpu = { model: 'Haswell\n' }), 'spec.domain.cpu.model'],
  ];

  test.each(cases)('%s', (_name, mutate, path) => {
    const v = baseVmi();
    mutate(v);
    const errs = validateObject(v);
    expect(errs).toEqual([
      {
        path,
        reason: expect.stringMatching(/^must not contain control characters \(newline, tab, NUL, \.\.\.\)/),
      },
    ]);
  });

  test('user data is data: multi-line, tabs allowed', () => {
    const v = baseVmi();
    v.spec.volumes[1].cloudInitNoCloud.userData = '#cloud-config\nruncmd:\n\t- echo hi\n';
    expect(validateObject(v)).toEqual([]);
  });

  test('names of disks, volumes, interfaces and networks are DNS labels already', () => {
    const v = baseVmi();
    v.spec.domain.devices.disks[0].name = 'root\n';
    v.spec.volumes[0].name = 'root\n';
    expect(validateObject(v).map((e) => e.path)).toEqual([
      'spec.volumes[0].name',
      'spec.domain.devices.disks[0].name',
    ]);
  });

  test('the CRD refuses them too', () => {
    const p = crdNode('VirtualMachineInstance', ['spec', 'volumes', '[]', 'containerDisk', 'image'])[
      'pattern'
    ];
    expect(p).toBe('^[^\\x00-\\x1F\\x7F]*$');
    const re = new RegExp(p as string);
    expect(re.test('quay.io/containerdisks/fedora:41')).toBe(true);
    expect(re.test('a\nb')).toBe(false);
    expect(re.test('a\u0000')).toBe(false);
  });
});

describe('nesting depth', () => {
  const deepYaml = (levels: number) =>
    `apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: a}\nspec:\n  domain:\n    memory: {guest: 1Gi}\n    bogus: ${'['.repeat(levels)}${']'.repeat(levels)}\n`;

  test('a document nested 100,000 levels is refused by name, not with a stack overflow', () => {
    expect(() => parseManifests(deepYaml(100_000))).toThrow(/^document 1: nested deeper than 100 levels$/);
    expect(validateFile('f.yaml', `---\nkind: x\n---\n${deepYaml(100_000)}`)).toEqual([
      'f.yaml: (syntax): document 2: nested deeper than 100 levels',
    ]);
    const json = `{"kind": "VirtualMachine", "spec": ${'{"a": '.repeat(100_000)}1${'}'.repeat(100_000)}}`;
    expect(() => parseManifests(json)).toThrow(/nested deeper than 100 levels/);
  });

  test('100 levels are read (the bogus field is the only error)', () => {
    // document 1, spec 2, domain 3, bogus's lists 4..100
    expect(validateFile('f.yaml', deepYaml(97))).toEqual(['f.yaml: spec.domain.bogus: unknown field']);
    expect(() => parseManifests(deepYaml(98))).toThrow(/nested deeper than 100 levels/);
  });

  test('validateObject refuses an object nested 100,000 levels with one error and does not throw', () => {
    const v = baseVmi();
    let deep: Any = {};
    for (let i = 0; i < 100_000; i++) deep = { a: deep };
    v.spec.dnsConfig = deep;
    expect(validateObject(v)).toEqual([{ path: '', reason: 'document nested deeper than 100 levels' }]);
    const vm = baseVm();
    vm.spec.dataVolumeTemplates = [deep];
    expect(validateObject(vm)).toEqual([{ path: '', reason: 'document nested deeper than 100 levels' }]);
  });
});

describe('quantities up to the exabytes', () => {
  test('Ei and E are quantities', () => {
    expect(parseQuantity('1Ei')).toBe(2 ** 60);
    expect(parseQuantity('8Ei')).toBe(2 ** 63);
    expect(parseQuantity('1.5Ei')).toBe(1.5 * 2 ** 60);
    expect(parseQuantity('2E')).toBe(2e18);
    for (const q of ['1Ei', '1023Ei', '1E']) expect(isQuantity(q)).toBe(true);
  });

  test('a VM no node can hold (memory 1Ei, a million CPUs) is admitted, before and after the defaults', () => {
    const vm = baseVm();
    vm.spec.template.spec.domain.resources = { requests: { memory: '1Ei', cpu: '1M' } };
    expect(validateObject(vm)).toEqual([]);
    const d = setVirtualMachineDefaults(vm);
    expect(d.spec.template.spec.domain.cpu).toMatchObject({ sockets: 1_000_000, cores: 1, threads: 1 });
    expect(validateObject(d)).toEqual([]);
  });

  test('a memory of 1Ei validates', () => {
    const v = baseVmi();
    v.spec.domain.memory = { guest: '1Ei' };
    v.spec.domain.resources = { limits: { memory: '1Ei' } };
    expect(validateObject(v)).toEqual([]);
  });
});
