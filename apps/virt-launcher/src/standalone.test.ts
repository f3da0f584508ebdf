// loadVmi: what `virt-launcher standalone --vmi FILE` accepts, before anything starts.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ExitCode, LauncherError } from './errors.js';
import {
  STANDALONE_CHILD_ENV,
  STANDALONE_VMI_ENV,
  loadVmi,
  standaloneChildEnv,
  standaloneVmOptions,
  takeStandaloneVmi,
} from './standalone.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'kvts-loadvmi-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function file(name: string, text: string): Promise<string> {
  const f = path.join(dir, name);
  await writeFile(f, text);
  return f;
}

async function failure(p: Promise<unknown>): Promise<LauncherError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(LauncherError);
  return e as LauncherError;
}

describe('loadVmi', () => {
  it("runs a VirtualMachine's template as its VMI: VM name and namespace, template labels, defaults applied", async () => {
    const f = await file(
      'vm.yaml',
      [
        'apiVersion: kubevirt.io/v1',
        'kind: VirtualMachine',
        'metadata: {name: myvm, namespace: ns1}',
        'spec:',
        '  runStrategy: Always',
        '  template:',
        '    metadata: {labels: {app: x}}',
        '    spec:',
        '      domain:',
        '        resources: {requests: {memory: 64Mi}}',
        '        devices: {autoattachPodInterface: false}',
      ].join('\n'),
    );
    const vmi = await loadVmi(f);
    expect(vmi.kind).toBe('VirtualMachineInstance');
    expect(vmi.metadata).toMatchObject({ name: 'myvm', namespace: 'ns1', labels: { app: 'x' } });
    expect(vmi.metadata?.uid).toBeTruthy();
    expect(vmi.spec.domain.resources?.requests?.memory).toBe('64Mi');
    expect(vmi.spec.domain.machine?.type).toBeTruthy(); // defaulted as a cluster would
  });

  it('takes the first document of a multi-document file; a VMI without namespace goes to "default"', async () => {
    const f = await file(
      'multi.yaml',
      [
        'apiVersion: kubevirt.io/v1',
        'kind: VirtualMachineInstance',
        'metadata: {name: first}',
        'spec: {domain: {resources: {requests: {memory: 64Mi}}, devices: {}}}',
        '---',
        'apiVersion: kubevirt.io/v1',
        'kind: VirtualMachineInstance',
        'metadata: {name: second}',
        'spec: {domain: {resources: {requests: {memory: 64Mi}}, devices: {}}}',
      ].join('\n'),
    );
    const vmi = await loadVmi(f);
    expect(vmi.metadata).toMatchObject({ name: 'first', namespace: 'default' });
  });

  it('refuses what it cannot run: missing file (exit 2), other kinds, bad YAML, invalid spec naming the field (exit 3)', async () => {
    const missing = await failure(loadVmi(path.join(dir, 'nope.yaml')));
    expect(missing.exitCode).toBe(ExitCode.USAGE);
    expect(missing.message).toContain('--vmi: cannot read');

    const cm = await failure(loadVmi(await file('cm.yaml', 'kind: ConfigMap\nmetadata: {name: x}\n')));
    expect(cm.exitCode).toBe(ExitCode.INVALID_VMI);
    expect(cm.message).toContain('kind "ConfigMap" is not VirtualMachine or VirtualMachineInstance');

    const broken = await failure(loadVmi(await file('broken.yaml', 'a: [\n')));
    expect(broken.exitCode).toBe(ExitCode.INVALID_VMI);
    expect(broken.message).toContain('broken.yaml');

    const invalid = await failure(
      loadVmi(
        await file(
          'invalid.yaml',
          [
            'apiVersion: kubevirt.io/v1',
            'kind: VirtualMachineInstance',
            'metadata: {name: bad}',
            'spec: {domain: {memory: {guest: foo}, devices: {}}}',
          ].join('\n'),
        ),
      ),
    );
    expect(invalid.exitCode).toBe(ExitCode.INVALID_VMI);
    expect(invalid.message).toContain('spec.domain.memory.guest: invalid quantity "foo"');
  });

  it('a hostDisk needs --feature-gates HostDisk (off by default), naming the field', async () => {
    const f = await file(
      'hostdisk.yaml',
      [
        'apiVersion: kubevirt.io/v1',
        'kind: VirtualMachineInstance',
        'metadata: {name: hd}',
        'spec:',
        '  domain: {resources: {requests: {memory: 64Mi}}, devices: {autoattachPodInterface: false}}',
        '  volumes: [{name: h, hostDisk: {path: /var/tmp/kvts-never-created.img, type: Disk}}]',
      ].join('\n'),
    );
    const off = await failure(loadVmi(f));
    expect(off.exitCode).toBe(ExitCode.INVALID_VMI);
    expect(off.message).toContain(
      'spec.volumes[0].hostDisk: hostDisk volumes need the HostDisk feature gate',
    );
    const on = await loadVmi(f, ['HostDisk']);
    expect(on.spec.volumes?.[0]?.hostDisk?.path).toBe('/var/tmp/kvts-never-created.img');
  });

  it("is validated as a cluster admits it: upstream's memory.guest + dedicatedCpuPlacement VMI gets its request", async () => {
    const f = await file(
      'isolated.yaml',
      [
        'apiVersion: kubevirt.io/v1',
        'kind: VirtualMachineInstance',
        'metadata: {name: vmi-fedora}',
        'spec:',
        '  domain:',
        '    cpu: {cores: 1, sockets: 1, threads: 1, dedicatedCpuPlacement: true, isolateEmulatorThread: true}',
        '    devices: {autoattachPodInterface: false, disks: [{name: ro, disk: {readonly: true}}]}',
        '    memory: {guest: 1024M}',
        '    resources: {}',
        '  volumes: [{name: ro, containerDisk: {image: example/disk:1}}]',
      ].join('\n'),
    );
    // a read-only disk without a bus becomes a SATA disk, which cannot be read-only: refused after defaults
    const e = await failure(loadVmi(f));
    expect(e.message).toContain(
      'spec.domain.devices.disks[0].disk.bus: sata hard disks do not support readonly',
    );
    await writeFile(f, (await readFile(f, 'utf8')).replace('readonly: true', 'bus: virtio'));
    const vmi = await loadVmi(f);
    expect(vmi.spec.domain.resources?.requests?.memory).toBe('1024M');
  });
});

describe('the VMI handed from the standalone monitor process to its launcher', () => {
  it('goes through the environment as loadVmi returned it (same uid), and is taken out of it', async () => {
    const f = await file(
      'handed.yaml',
      'apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata: {name: handed}\nspec: {domain: {resources: {requests: {memory: 64Mi}}, devices: {}}}\n',
    );
    const vmi = await loadVmi(f);
    const env: NodeJS.ProcessEnv = { PATH: '/bin', ...standaloneChildEnv(vmi, true) };
    expect(env[STANDALONE_CHILD_ENV]).toBe('owned');
    expect(standaloneChildEnv(vmi, false)[STANDALONE_CHILD_ENV]).toBe('given');
    const got = takeStandaloneVmi(env);
    expect(got).toEqual(vmi);
    expect(got!.metadata!.uid).toBe(vmi.metadata!.uid); // generated once, by the monitor process
    expect(env[STANDALONE_VMI_ENV]).toBeUndefined(); // libvirtd and QEMU do not inherit it
    expect(env.PATH).toBe('/bin');
    expect(takeStandaloneVmi(env)).toBeUndefined(); // not given: the launcher reads the file
  });

  it('is not put in the environment when larger than 64 KiB (the kernel caps one string at 128 KiB)', async () => {
    const vmi = await loadVmi(
      await file(
        'big.json',
        JSON.stringify({
          apiVersion: 'kubevirt.io/v1',
          kind: 'VirtualMachineInstance',
          metadata: { name: 'big', annotations: { big: 'x'.repeat(70 * 1024) } },
          spec: { domain: { resources: { requests: { memory: '64Mi' } }, devices: {} } },
        }),
      ),
    );
    const env = standaloneChildEnv(vmi, true);
    expect(env[STANDALONE_CHILD_ENV]).toBe('owned');
    expect(env[STANDALONE_VMI_ENV]).toBeUndefined();
  });
});

describe('standaloneVmOptions', () => {
  it('sends what virt-handler would: the default SMBIOS of a KubeVirt cluster and the staged disks', () => {
    expect(standaloneVmOptions({ root: { format: 'raw', virtualSize: 4096 } })).toEqual({
      VirtualMachineSMBios: { manufacturer: 'KubeVirt', product: 'None', family: 'KubeVirt' },
      DisksInfo: { root: { format: 'raw', virtualSize: 4096, backingFile: '' } },
    });
  });
});
