// virtctl create vm|instancetype|preference: the printed manifests (upstream v1.9.0's shapes and defaults),
// the refusals naming their flag, and every printed manifest accepted by @kubevirt-ts/api's validation.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Value } from '@sinclair/typebox/value';
import {
  validateObject,
  yaml,
  VirtualMachineClusterInstancetypeSchema,
  VirtualMachineClusterPreferenceSchema,
  VirtualMachineInstancetypeSchema,
  VirtualMachinePreferenceSchema,
} from '@kubevirt-ts/api';
import { canonicalQuantity } from './create.js';
import { run } from './run.js';

type Obj = Record<string, any>;

/** every manifest printed by a passing case, validated at the end */
const printed: Obj[] = [];

async function virtctl(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  // no kubeconfig anywhere: create must not need one
  const code = await run(argv, {
    stdout: (s) => (out += s),
    stderr: (s) => (err += s),
    env: { HOME: '/nonexistent' },
  });
  return { code, out, err };
}

async function create(...argv: string[]): Promise<Obj> {
  const r = await virtctl('create', ...argv);
  if (r.code !== 0) throw new Error(`exit ${r.code}: ${r.err}`);
  const o = argv.includes('json') ? (JSON.parse(r.out) as Obj) : (yaml().parse(r.out) as Obj);
  printed.push(o);
  return o;
}

async function refused(argv: string[], message: string): Promise<void> {
  const r = await virtctl('create', ...argv);
  expect(r.out).toBe('');
  expect(r.err).toContain(message);
  expect(r.code).toBe(2);
}

const SUFFIX = /^[bcdfghjklmnpqrstvwxz2456789]{5}$/;

describe('virtctl create vm', () => {
  it("prints upstream's VirtualMachine: runStrategy Always, 180 s grace, 512Mi, devices {}, status {}", async () => {
    const r = await virtctl(
      'create',
      'vm',
      '--name',
      'my-vm',
      '--volume-containerdisk',
      'src:my.registry/img:tag',
    );
    expect(r.code).toBe(0);
    expect(r.out).toBe(`apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: my-vm
spec:
  runStrategy: Always
  template:
    metadata: {}
    spec:
      domain:
        devices: {}
        memory:
          guest: 512Mi
      terminationGracePeriodSeconds: 180
      volumes:
      - containerDisk:
          image: my.registry/img:tag
        name: my-vm-containerdisk-0
status: {}
`);
    printed.push(yaml().parse(r.out) as Obj);
  });

  it('names a VM without --name vm-<5 random characters>; -n puts it in that namespace', async () => {
    const vm = await create('vm');
    expect(vm['metadata']['name']).toMatch(/^vm-/);
    expect(vm['metadata']['name'].slice(3)).toMatch(SUFFIX);
    expect(vm['metadata']['namespace']).toBeUndefined();
    expect(vm['spec']['template']['spec']['volumes']).toBeUndefined();
    expect((await create('vm', '-n', 'ns1'))['metadata']['namespace']).toBe('ns1');
  });

  it('--run-strategy (any case), --termination-grace-period, --memory', async () => {
    const vm = await create(
      'vm',
      '--run-strategy',
      'rerunonfailure',
      '--termination-grace-period',
      '0',
      '--memory',
      '1Gi',
    );
    expect(vm['spec']['runStrategy']).toBe('RerunOnFailure');
    expect(vm['spec']['template']['spec']['terminationGracePeriodSeconds']).toBe(0);
    expect(vm['spec']['template']['spec']['domain']['memory']).toEqual({ guest: '1Gi' });
  });

  it('--instancetype and --preference with and without kind; the instance type drops memory', async () => {
    const vm = await create(
      'vm',
      '--instancetype',
      'VirtualMachineInstancetype/my-it',
      '--preference',
      'my-pref',
    );
    // lower-cased, as upstream prints it
    expect(vm['spec']['instancetype']).toEqual({ name: 'my-it', kind: 'virtualmachineinstancetype' });
    expect(vm['spec']['preference']).toEqual({ name: 'my-pref' });
    expect(vm['spec']['template']['spec']['domain']).toEqual({ devices: {} });
    const vm2 = await create(
      'vm',
      '--instancetype',
      'it',
      '--preference',
      'virtualmachineclusterpreference/p',
    );
    expect(vm2['spec']['instancetype']).toEqual({ name: 'it' });
    expect(vm2['spec']['preference']).toEqual({ name: 'p', kind: 'virtualmachineclusterpreference' });
  });

  it("volumes: containerdisks, PVCs and imports in upstream's order; boot orders become disks", async () => {
    const vm = await create(
      'vm',
      '--name',
      'vm1',
      '--volume-import',
      'type:blank,size:1Gi,name:scratch',
      '--volume-pvc',
      'src:my-pvc,bootorder:2',
      '--volume-containerdisk',
      'src:img1',
      '--volume-containerdisk',
      'src:img2,name:second,bootorder:1',
    );
    const t = vm['spec']['template']['spec'];
    expect(t['volumes']).toEqual([
      { name: 'vm1-containerdisk-0', containerDisk: { image: 'img1' } },
      { name: 'second', containerDisk: { image: 'img2' } },
      { name: 'my-pvc', persistentVolumeClaim: { claimName: 'my-pvc' } },
      { name: 'scratch', dataVolume: { name: 'scratch' } },
    ]);
    expect(t['domain']['devices']).toEqual({
      disks: [
        { name: 'second', bootOrder: 1 },
        { name: 'my-pvc', bootOrder: 2 },
      ],
    });
    expect(vm['spec']['dataVolumeTemplates']).toEqual([
      {
        metadata: { name: 'scratch' },
        spec: { source: { blank: {} }, storage: { resources: { requests: { storage: '1Gi' } } } },
      },
    ]);
  });

  it('--volume-import types pvc, snapshot, ds, registry, http; generated names imported-volume-<5>', async () => {
    const vm = await create(
      'vm',
      '--volume-import',
      'type:pvc,src:ns/pvc1,name:a',
      '--volume-import',
      'type:snapshot,src:ns/snap1,name:b,size:2Gi',
      '--volume-import',
      'type:ds,src:fedora,name:c',
      '--volume-import',
      'type:registry,url:docker://quay.io/x:1,size:5Gi,pullmethod:node,name:d',
      '--volume-import',
      'type:http,url:https://example.com/disk.img,size:5Gi,extraheaders:A: 1;B: 2',
    );
    const specs = (vm['spec']['dataVolumeTemplates'] as Obj[]).map((d) => d['spec']);
    expect(specs).toEqual([
      { source: { pvc: { name: 'pvc1', namespace: 'ns' } }, storage: {} },
      {
        source: { snapshot: { name: 'snap1', namespace: 'ns' } },
        storage: { resources: { requests: { storage: '2Gi' } } },
      },
      { sourceRef: { kind: 'DataSource', name: 'fedora' }, storage: {} },
      {
        source: { registry: { url: 'docker://quay.io/x:1', pullMethod: 'node' } },
        storage: { resources: { requests: { storage: '5Gi' } } },
      },
      {
        source: { http: { url: 'https://example.com/disk.img', extraHeaders: ['A: 1', 'B: 2'] } },
        storage: { resources: { requests: { storage: '5Gi' } } },
      },
    ]);
    const last = vm['spec']['dataVolumeTemplates'][4]['metadata']['name'] as string;
    expect(last).toMatch(/^imported-volume-/);
    expect(last.slice('imported-volume-'.length)).toMatch(SUFFIX);
  });

  it('infers the instance type and preference implicitly from the first PVC (policy Ignore, memory kept)', async () => {
    const r = await virtctl('create', 'vm', '--name', 'vm1', '--volume-pvc', 'src:golden');
    expect(r.code).toBe(0);
    expect(r.out).toBe(`apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: vm1
spec:
  instancetype:
    inferFromVolume: golden
    inferFromVolumeFailurePolicy: Ignore
  preference:
    inferFromVolume: golden
    inferFromVolumeFailurePolicy: Ignore
  runStrategy: Always
  template:
    metadata: {}
    spec:
      domain:
        devices: {}
        memory:
          guest: 512Mi
      terminationGracePeriodSeconds: 180
      volumes:
      - name: golden
        persistentVolumeClaim:
          claimName: golden
status: {}
`);
    printed.push(yaml().parse(r.out) as Obj);
  });

  const implicit = (volume: string) => ({
    inferFromVolume: volume,
    inferFromVolumeFailurePolicy: 'Ignore',
  });

  it.each([
    ['type:pvc,size:1Gi,src:ns/my-volume,name:my-pvc', 'my-pvc'],
    ['type:registry,size:1Gi,url:docker://my-containerdisk,name:my-containerdisk', 'my-containerdisk'],
    ['type:snapshot,src:ns/snap,name:from-snap', 'from-snap'],
    ['type:ds,src:ns/fedora,name:from-ds', 'from-ds'],
  ])('implicit inference from a DataVolume template %s', async (importSpec, volume) => {
    const vm = await create('vm', '--volume-import', importSpec);
    expect(vm['spec']['instancetype']).toEqual(implicit(volume));
    expect(vm['spec']['preference']).toEqual(implicit(volume));
    expect(vm['spec']['template']['spec']['domain']['memory']).toEqual({ guest: '512Mi' });
  });

  it('implicit inference picks the volume of the lowest boot order, else the first volume', async () => {
    const vm = await create(
      'vm',
      '--volume-import',
      'type:ds,src:my-ds-2,bootorder:2',
      '--volume-import',
      'type:ds,src:my-ds-1,bootorder:1',
    );
    const second = vm['spec']['dataVolumeTemplates'][1]['metadata']['name'] as string;
    expect(second).toMatch(/^imported-volume-/);
    expect(vm['spec']['dataVolumeTemplates'][1]['spec']['sourceRef']['name']).toBe('my-ds-1');
    expect(vm['spec']['instancetype']).toEqual(implicit(second));
    expect(vm['spec']['preference']).toEqual(implicit(second));
    // PVCs come before imports among the volumes: the PVC is the first one
    const first = await create(
      'vm',
      '--volume-import',
      'type:ds,src:fedora,name:root',
      '--volume-pvc',
      'src:data',
    );
    expect(first['spec']['instancetype']).toEqual(implicit('data'));
    // the lowest boot order is a containerdisk: nothing is inferred, though a PVC follows
    const cd = await create(
      'vm',
      '--volume-pvc',
      'src:data,bootorder:2',
      '--volume-containerdisk',
      'src:img,bootorder:1',
    );
    expect(cd['spec']['instancetype']).toBeUndefined();
    expect(cd['spec']['preference']).toBeUndefined();
  });

  it.each([
    [[]],
    [['--volume-containerdisk', 'src:img']],
    [['--volume-import', 'type:blank,size:1Gi']],
    [
      [
        '--volume-import',
        'type:http,size:1Gi,url:http://example.com/disk.img,bootorder:1',
        '--volume-pvc',
        'src:p',
      ],
    ],
    [['--cloud-init', 'nocloud']],
    [['--volume-pvc', 'src:p', '--infer-instancetype=false', '--infer-preference=false']],
  ])('implicit inference is silently left out when it cannot apply or is turned off: %j', async (argv) => {
    const vm = await create('vm', ...argv);
    expect(vm['spec']['instancetype']).toBeUndefined();
    expect(vm['spec']['preference']).toBeUndefined();
    expect(vm['spec']['template']['spec']['domain']['memory']).toEqual({ guest: '512Mi' });
  });

  it('--memory, --instancetype, --preference stop the implicit inference of their own field only', async () => {
    const mem = await create('vm', '--memory', '1Gi', '--volume-import', 'type:ds,src:my-ds,name:my-ds');
    expect(mem['spec']['instancetype']).toBeUndefined();
    expect(mem['spec']['template']['spec']['domain']['memory']).toEqual({ guest: '1Gi' });
    expect(mem['spec']['preference']).toEqual(implicit('my-ds'));
    const it = await create('vm', '--instancetype', 'u1.small', '--volume-pvc', 'src:p');
    expect(it['spec']['instancetype']).toEqual({ name: 'u1.small' });
    expect(it['spec']['template']['spec']['domain']['memory']).toBeUndefined();
    expect(it['spec']['preference']).toEqual(implicit('p'));
    const pref = await create('vm', '--preference', 'fedora', '--volume-pvc', 'src:p');
    expect(pref['spec']['preference']).toEqual({ name: 'fedora' });
    expect(pref['spec']['instancetype']).toEqual(implicit('p'));
    // one turned off, the other still implicit
    const off = await create('vm', '--volume-pvc', 'src:p', '--infer-preference=false');
    expect(off['spec']['preference']).toBeUndefined();
    expect(off['spec']['instancetype']).toEqual(implicit('p'));
  });

  it('explicit inference: no failure policy, the instance type drops the guest memory', async () => {
    const r = await virtctl(
      'create',
      'vm',
      '--name',
      'vm2',
      '--volume-import',
      'type:ds,src:os/fedora,name:root,bootorder:1',
      '--infer-instancetype',
      '--infer-preference',
    );
    expect(r.code).toBe(0);
    expect(r.out).toBe(`apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata:
  name: vm2
spec:
  dataVolumeTemplates:
  - metadata:
      name: root
    spec:
      sourceRef:
        kind: DataSource
        name: fedora
        namespace: os
      storage: {}
  instancetype:
    inferFromVolume: root
  preference:
    inferFromVolume: root
  runStrategy: Always
  template:
    metadata: {}
    spec:
      domain:
        devices:
          disks:
          - bootOrder: 1
            name: root
      terminationGracePeriodSeconds: 180
      volumes:
      - dataVolume:
          name: root
        name: root
status: {}
`);
    printed.push(yaml().parse(r.out) as Obj);
    // upstream's spelling --infer-instancetype=true is the same
    const eq = await create('vm', '--volume-pvc', 'src:my-pvc', '--infer-instancetype=true');
    expect(eq['spec']['instancetype']).toEqual({ inferFromVolume: 'my-pvc' });
    expect(eq['spec']['template']['spec']['domain']['memory']).toBeUndefined();
    // the preference stays implicit
    expect(eq['spec']['preference']).toEqual(implicit('my-pvc'));
  });

  it('--infer-instancetype-from / --infer-preference-from name the volume; -o json keeps it', async () => {
    const vm = await create(
      'vm',
      '--volume-import',
      'type:ds,src:my-ds-1,name:my-ds-1',
      '--volume-import',
      'type:ds,src:my-ds-2,name:my-ds-2',
      '--infer-instancetype-from=my-ds-2',
      '-o',
      'json',
    );
    expect(vm['spec']['instancetype']).toEqual({ inferFromVolume: 'my-ds-2' });
    expect(vm['spec']['template']['spec']['domain']['memory']).toBeUndefined();
    expect(vm['spec']['preference']).toEqual(implicit('my-ds-1'));
    // upstream's all-flags case: a named instance type and the preference from the PVC of boot order 1
    const all = await create(
      'vm',
      '--instancetype',
      'virtualmachineinstancetype/my-it',
      '--infer-preference-from',
      'my-pvc',
      '--volume-import',
      'type:ds,src:ns/my-ds,size:10Gi',
      '--volume-pvc',
      'src:my-pvc,bootorder:1',
    );
    expect(all['spec']['instancetype']).toEqual({ name: 'my-it', kind: 'virtualmachineinstancetype' });
    expect(all['spec']['preference']).toEqual({ inferFromVolume: 'my-pvc' });
    expect(all['spec']['template']['spec']['domain']['memory']).toBeUndefined();
  });

  it('cloud-init: generated user data, base64 user/network data, configdrive, none', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'virtctl-create-'));
    writeFileSync(join(dir, 'pw'), 'hunter2\n');
    const r = await virtctl(
      'create',
      'vm',
      '--user',
      'fedora',
      '--password-file',
      join(dir, 'pw'),
      '--ssh-key',
      'ssh-ed25519 AAAA1 a,ssh-ed25519 AAAA2 b',
      '--ssh-key',
      'ssh-rsa AAAA3 c',
      '--ga-manage-ssh',
    );
    expect(r.code).toBe(0);
    expect(r.err).toBe(
      'WARNING: --password-file: The password is stored in cleartext in the VM definition!\n',
    );
    const vm = yaml().parse(r.out) as Obj;
    printed.push(vm);
    expect(vm['spec']['template']['spec']['volumes']).toEqual([
      {
        name: 'cloudinitdisk',
        cloudInitNoCloud: {
          userData:
            '#cloud-config\nuser: fedora\npassword: hunter2\nchpasswd: { expire: False }\n' +
            'ssh_authorized_keys:\n  - ssh-ed25519 AAAA1 a\n  - ssh-ed25519 AAAA2 b\n  - ssh-rsa AAAA3 c\n' +
            "runcmd:\n  - [ setsebool, -P, 'virt_qemu_ga_manage_ssh', 'on' ]",
        },
      },
    ]);
    const cd = await create(
      'vm',
      '--cloud-init',
      'ConfigDrive',
      '--cloud-init-user-data',
      'I2Nsb3VkLWNvbmZpZwo=',
      '--cloud-init-network-data',
      'dmVyc2lvbjogMgo=',
    );
    expect(cd['spec']['template']['spec']['volumes']).toEqual([
      {
        name: 'cloudinitdisk',
        cloudInitConfigDrive: {
          userDataBase64: 'I2Nsb3VkLWNvbmZpZwo=',
          networkDataBase64: 'dmVyc2lvbjogMgo=',
        },
      },
    ]);
    // --cloud-init alone: the empty #cloud-config; none: no volume
    expect((await create('vm', '--cloud-init', 'nocloud'))['spec']['template']['spec']['volumes']).toEqual([
      { name: 'cloudinitdisk', cloudInitNoCloud: { userData: '#cloud-config' } },
    ]);
    // pflag's spellings of a boolean flag's value
    expect(
      (await create('vm', '--ga-manage-ssh=false'))['spec']['template']['spec']['volumes'],
    ).toBeUndefined();
    expect((await create('vm', '--ga-manage-ssh=1'))['spec']['template']['spec']['volumes']).toEqual([
      {
        name: 'cloudinitdisk',
        cloudInitNoCloud: {
          userData: "#cloud-config\nruncmd:\n  - [ setsebool, -P, 'virt_qemu_ga_manage_ssh', 'on' ]",
        },
      },
    ]);
    const none = await virtctl('create', 'vm', '--cloud-init', 'none', '--ssh-key', 'k');
    expect(none.err).toContain('--cloud-init: was set to none');
    expect((yaml().parse(none.out) as Obj)['spec']['template']['spec']['volumes']).toBeUndefined();
  });

  it('prints quantities as Kubernetes does after parsing (upstream: resource.Quantity)', async () => {
    const vm = await create('vm', '--memory', '1024Mi', '--volume-import', 'type:blank,size:0.5Gi,name:a');
    expect(vm['spec']['template']['spec']['domain']['memory']).toEqual({ guest: '1Gi' });
    expect(vm['spec']['dataVolumeTemplates'][0]['spec']['storage']).toEqual({
      resources: { requests: { storage: '512Mi' } },
    });
    expect(
      [
        '512Mi',
        '1536Mi',
        '1.5Ki',
        '0.5Ki',
        '0.1Ki',
        '1000',
        '2048',
        '1500M',
        '0.5G',
        '1000000k',
        '100m',
        '0',
        '1e3',
        '+2Gi',
      ].map(canonicalQuantity),
    ).toEqual([
      '512Mi',
      '1536Mi',
      '1536',
      '512',
      '0.1Ki',
      '1k',
      '2048',
      '1500M',
      '500M',
      '1G',
      '100m',
      '0',
      '1e3',
      '2Gi',
    ]);
    const it = await create('instancetype', '--cpu', '1', '--memory', '2048Mi');
    expect(it['spec']['memory']).toEqual({ guest: '2Gi' });
  });

  it('-o json prints the same object', async () => {
    const a = await create('vm', '--name', 'j', '-o', 'json');
    const r = await virtctl('create', 'vm', '--name', 'j');
    expect(a).toEqual(yaml().parse(r.out));
  });

  it.each([
    [['--memory', 'lots'], '--memory: value "lots" is not a quantity'],
    [
      ['--run-strategy', 'Sometimes'],
      '--run-strategy: invalid run strategy "Sometimes", supported values are: Always, Manual, Halted, Once, RerunOnFailure',
    ],
    [['--termination-grace-period', '1.5'], '--termination-grace-period: must be a whole number'],
    [['--instancetype', 'bogus/x'], '--instancetype: invalid instancetype kind "bogus"'],
    [['--instancetype', 'a/b/c'], '--instancetype: invalid count 2 of slashes'],
    [['--preference', 'virtualmachinepreference/'], '--preference: name cannot be empty'],
    [['--memory', '1Gi', '--instancetype', 'x'], '--memory and --instancetype cannot be used together'],
    [
      ['--cloud-init-user-data', 'eA==', '--user', 'u'],
      '--cloud-init-user-data and --user cannot be used together',
    ],
    [['--volume-containerdisk', 'name:x'], '--volume-containerdisk: src must be specified'],
    [['--volume-containerdisk', 'src:x,size:1Gi'], '--volume-containerdisk: unknown param(s): size:1Gi'],
    [
      ['--volume-containerdisk', 'src'],
      '--volume-containerdisk: params need to have at least one colon: src',
    ],
    [['--volume-containerdisk', 'src:x,name:Bad_Name'], '--volume-containerdisk: invalid name "Bad_Name"'],
    [
      ['--volume-containerdisk', 'src:x,bootorder:0'],
      '--volume-containerdisk: bootorder must be greater than 0',
    ],
    [
      ['--volume-containerdisk', 'src:x,bootorder:one'],
      '--volume-containerdisk: param "bootorder" must be a whole number',
    ],
    [
      ['--volume-containerdisk', 'src:x,bootorder:1', '--volume-pvc', 'src:p,bootorder:1'],
      '--volume-pvc: bootorder 1 was specified multiple times',
    ],
    [['--volume-pvc', 'src:ns/p'], '--volume-pvc: not allowed to specify namespace of pvc "p"'],
    [
      ['--volume-pvc', 'src:p', '--volume-pvc', 'src:p'],
      '--volume-pvc: there is already a volume with name "p"',
    ],
    [['--volume-import', 'size:1Gi'], '--volume-import: type must be specified'],
    [['--volume-import', 'type:ftp'], '--volume-import: invalid volume import type "ftp"'],
    [['--volume-import', 'type:blank'], '--volume-import: size must be specified'],
    [['--volume-import', 'type:blank,size:big'], '--volume-import: size "big" is not a quantity'],
    [['--volume-import', 'type:pvc,src:p'], '--volume-import: namespace of pvc "p" must be specified'],
    [['--volume-import', 'type:registry,size:1Gi'], '--volume-import: exactly one of url or imagestream'],
    [
      ['--volume-import', 'type:registry,size:1Gi,url:u,pullmethod:x'],
      '--volume-import: pullmethod must be set to pod or node',
    ],
    [['--volume-import', 'type:http,size:1Gi'], '--volume-import: url is required with http volume source'],
    [['--cloud-init', 'cdrom'], '--cloud-init: invalid cloud-init data source type "cdrom"'],
    [['--password-file', '/nonexistent/pw'], '--password-file: ENOENT'],
    [['-o', 'xml'], '--output: must be yaml or json, got "xml"'],
    [
      ['--infer-instancetype'],
      '--infer-instancetype: at least one volume is needed to infer an instance type or preference',
    ],
    [
      ['--infer-preference'],
      '--infer-preference: at least one volume is needed to infer an instance type or preference',
    ],
    [
      ['--infer-instancetype-from', 'does-not-exist', '--volume-pvc', 'src:p'],
      '--infer-instancetype-from: there is no volume with name "does-not-exist"',
    ],
    [['--infer-preference-from=nope'], '--infer-preference-from: there is no volume with name "nope"'],
    [
      ['--infer-instancetype', '--volume-containerdisk', 'src:my.registry/my-image:my-tag'],
      '--infer-instancetype: inference of instancetype or preference works only with datasources, datavolumes or pvcs',
    ],
    [
      [
        '--infer-preference-from',
        'my-vol',
        '--volume-containerdisk',
        'name:my-vol,src:img',
        '--volume-pvc',
        'src:p',
      ],
      '--infer-preference-from: inference of instancetype or preference works only with datasources, datavolumes or pvcs',
    ],
    [
      ['--infer-preference', '--cloud-init', 'nocloud'],
      '--infer-preference: inference of instancetype or preference works only with datasources, datavolumes or pvcs',
    ],
    [
      ['--infer-instancetype', '--volume-import', 'type:http,size:256Mi,url:http://url.com'],
      '--infer-instancetype: this datavolume is not valid to infer an instancetype or preference from (source needs to be PVC, Registry or Snapshot, sourceRef needs to be DataSource)',
    ],
    [
      ['--infer-preference-from', 'my-vol', '--volume-import', 'name:my-vol,type:blank,size:1Gi'],
      '--infer-preference-from: this datavolume is not valid to infer an instancetype or preference from (source needs to be PVC, Registry or Snapshot, sourceRef needs to be DataSource)',
    ],
    [
      ['--memory', '1Gi', '--infer-instancetype'],
      '--memory and --infer-instancetype cannot be used together',
    ],
    [
      ['--memory', '1Gi', '--infer-instancetype=false'],
      '--memory and --infer-instancetype cannot be used together',
    ],
    [
      ['--memory', '1Gi', '--infer-instancetype-from', 'v'],
      '--memory and --infer-instancetype-from cannot be used together',
    ],
    [
      ['--instancetype', 'x', '--infer-instancetype'],
      '--instancetype and --infer-instancetype cannot be used together',
    ],
    [
      ['--infer-instancetype', '--infer-instancetype-from', 'v'],
      '--infer-instancetype and --infer-instancetype-from cannot be used together',
    ],
    [
      ['--memory', '1Gi', '--instancetype', 'x', '--infer-instancetype', '--infer-preference-from', 'v'],
      '--memory, --instancetype and --infer-instancetype cannot be used together',
    ],
    [
      ['--preference', 'p', '--infer-preference'],
      '--preference and --infer-preference cannot be used together',
    ],
    [
      ['--preference', 'p', '--infer-preference-from', 'v'],
      '--preference and --infer-preference-from cannot be used together',
    ],
    [
      ['--infer-preference=true', '--infer-preference-from', 'v'],
      '--infer-preference and --infer-preference-from cannot be used together',
    ],
    [['--infer-instancetype=not-a-bool'], '--infer-instancetype: invalid boolean "not-a-bool"'],
    [['--volume-sysprep', 'src:cm'], '--volume-sysprep: not implemented by kubevirt-ts'],
    [['--access-cred', 'type:ssh,src:keys'], '--access-cred: not implemented by kubevirt-ts'],
    [['--volume-datasource', 'src:ds'], '--volume-datasource: not implemented by kubevirt-ts'],
    [['--volume-clone-pvc', 'src:ns/p'], '--volume-clone-pvc: not implemented by kubevirt-ts'],
    [['--volume-blank', 'size:1Gi'], '--volume-blank: not implemented by kubevirt-ts'],
    [
      ['--volume-import', 'type:s3,url:u,size:1Gi'],
      '--volume-import: type:s3 is not implemented by kubevirt-ts',
    ],
    [
      ['--volume-import', 'type:gcs,url:u,size:1Gi'],
      '--volume-import: type:gcs is not implemented by kubevirt-ts',
    ],
    [['--bogus'], "Unknown option '--bogus'"],
    [['extra'], 'expects no arguments, got "extra"'],
  ])('refuses %j: %s', async (argv, message) => {
    await refused(['vm', ...argv], message);
  });
});

describe('virtctl create instancetype', () => {
  it('prints a VirtualMachineClusterInstancetype by default', async () => {
    const r = await virtctl('create', 'instancetype', '--cpu', '2', '--memory', '4Gi', '--name', 'my-it');
    expect(r.out).toBe(`apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterInstancetype
metadata:
  name: my-it
spec:
  cpu:
    guest: 2
  memory:
    guest: 4Gi
`);
    printed.push(yaml().parse(r.out) as Obj);
    const gen = await create('instancetype', '--cpu', '1', '--memory', '1Gi');
    expect(gen['metadata']['name']).toMatch(/^clusterinstancetype-/);
    expect(gen['metadata']['name'].slice('clusterinstancetype-'.length)).toMatch(SUFFIX);
  });

  it('--namespaced or -n: a VirtualMachineInstancetype; gpus, host devices, IOThreads policy', async () => {
    const it1 = await create(
      'instancetype',
      '--cpu',
      '4',
      '--memory',
      '8Gi',
      '-n',
      'ns1',
      '--gpu',
      'name:gpu1,devicename:nvidia.com/GP102GL',
      '--hostdevice',
      'name:hd1,devicename:intel.com/qat',
      '--hostdevice',
      'name:hd2,devicename:intel.com/qat',
      '--iothreadspolicy',
      'shared',
    );
    expect(it1['kind']).toBe('VirtualMachineInstancetype');
    expect(it1['metadata']['namespace']).toBe('ns1');
    expect(it1['metadata']['name']).toMatch(/^instancetype-/);
    expect(it1['spec']).toEqual({
      cpu: { guest: 4 },
      memory: { guest: '8Gi' },
      gpus: [{ name: 'gpu1', deviceName: 'nvidia.com/GP102GL' }],
      hostDevices: [
        { name: 'hd1', deviceName: 'intel.com/qat' },
        { name: 'hd2', deviceName: 'intel.com/qat' },
      ],
      ioThreadsPolicy: 'shared',
    });
    const it2 = await create('instancetype', '--cpu', '1', '--memory', '1Gi', '--namespaced', '-o', 'json');
    expect(it2['kind']).toBe('VirtualMachineInstancetype');
    expect(it2['metadata']['namespace']).toBeUndefined();
  });

  it.each([
    [[], 'required flag(s) --cpu, --memory not set'],
    [['--cpu', '1'], 'required flag(s) --memory not set'],
    [['--cpu', '0', '--memory', '1Gi'], '--cpu: cpu value must be greater than zero'],
    [['--cpu=-1', '--memory', '1Gi'], '--cpu: must be a whole number'],
    [['--cpu', '1', '--memory', 'x'], '--memory: value "x" is not a quantity'],
    [['--cpu', '1', '--memory', '1Gi', '--gpu', 'devicename:d'], '--gpu: name must be specified'],
    [
      ['--cpu', '1', '--memory', '1Gi', '--hostdevice', 'name:n'],
      '--hostdevice: deviceName must be specified',
    ],
    [['--cpu', '1', '--memory', '1Gi', '--gpu', 'name:n,vendor:v'], '--gpu: unknown param(s): vendor:v'],
    [
      ['--cpu', '1', '--memory', '1Gi', '--iothreadspolicy', 'dedicated'],
      '--iothreadspolicy: IOThread must be of value auto or shared',
    ],
  ])('refuses %j: %s', async (argv, message) => {
    await refused(['instancetype', ...argv], message);
  });
});

describe('virtctl create preference', () => {
  it('prints a VirtualMachineClusterPreference with an empty spec by default', async () => {
    const r = await virtctl('create', 'preference', '--name', 'p');
    expect(r.out).toBe(`apiVersion: instancetype.kubevirt.io/v1beta1
kind: VirtualMachineClusterPreference
metadata:
  name: p
spec: {}
`);
    printed.push(yaml().parse(r.out) as Obj);
    const gen = await create('preference');
    expect(gen['metadata']['name'].slice('clusterpreference-'.length)).toMatch(SUFFIX);
  });

  it('--namespaced / -n, --cpu-topology, --volume-storage-class, --machine-type', async () => {
    const p = await create(
      'preference',
      '-n',
      'ns1',
      '--cpu-topology',
      'spread',
      '--volume-storage-class',
      'fast',
      '--machine-type',
      'q35',
    );
    expect(p['kind']).toBe('VirtualMachinePreference');
    expect(p['metadata']['name']).toMatch(/^preference-/);
    expect(p['metadata']['namespace']).toBe('ns1');
    expect(p['spec']).toEqual({
      cpu: { preferredCPUTopology: 'spread' },
      machine: { preferredMachineType: 'q35' },
      volumes: { preferredStorageClassName: 'fast' },
    });
    expect((await create('preference', '--namespaced'))['kind']).toBe('VirtualMachinePreference');
  });

  it('refuses an unknown topology, naming the flag', async () => {
    await refused(
      ['preference', '--cpu-topology', 'preferCores'],
      '--cpu-topology: CPU topology must have a value of sockets, cores, threads or spread',
    );
  });
});

describe('virtctl create: the command', () => {
  it('needs a known subcommand; --help lists them', async () => {
    const r = await virtctl('create');
    expect(r.code).toBe(2);
    expect(r.err).toContain('virtctl create: expects one of vm, instancetype, preference');
    expect((await virtctl('create', 'clone')).err).toContain('got "clone"');
    const h = await virtctl('create', '--help');
    expect(h.code).toBe(0);
    expect(h.out).toContain('virtctl create instancetype');
    const vh = await virtctl('create', 'vm', '--help');
    expect(vh.out).toContain('--volume-containerdisk=VALUE (repeatable)');
    expect((await virtctl('help', 'create', 'preference')).out).toContain('--cpu-topology');
  });
});

describe('the printed manifests validate with @kubevirt-ts/api', () => {
  const SCHEMAS = {
    VirtualMachineInstancetype: VirtualMachineInstancetypeSchema,
    VirtualMachineClusterInstancetype: VirtualMachineClusterInstancetypeSchema,
    VirtualMachinePreference: VirtualMachinePreferenceSchema,
    VirtualMachineClusterPreference: VirtualMachineClusterPreferenceSchema,
  } as const;

  it('every VirtualMachine passes validateObject, every (Cluster)Instancetype/Preference its schema', () => {
    const kinds = new Set(printed.map((o) => o['kind']));
    expect([...kinds].sort()).toEqual([
      'VirtualMachine',
      'VirtualMachineClusterInstancetype',
      'VirtualMachineClusterPreference',
      'VirtualMachineInstancetype',
      'VirtualMachinePreference',
    ]);
    for (const o of printed) {
      if (o['kind'] === 'VirtualMachine') {
        expect({ name: o['metadata']['name'], errors: validateObject(o) }).toEqual({
          name: o['metadata']['name'],
          errors: [],
        });
      } else {
        const schema = SCHEMAS[o['kind'] as keyof typeof SCHEMAS];
        expect({
          kind: o['kind'],
          errors: [...Value.Errors(schema, o)].map((e) => `${e.path}: ${e.message}`),
        }).toEqual({
          kind: o['kind'],
          errors: [],
        });
      }
    }
  });
});
