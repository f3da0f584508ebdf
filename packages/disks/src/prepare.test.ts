import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { createPodLayout } from '@kubevirt-ts/converter';
import { mkdtemp, mkdir, readFile, rm, stat, writeFile, readlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  PrepareError,
  disksInfoOf,
  imageFormat,
  prepareVolumes,
  quantityToBytes,
  run,
  stageLocalImages,
} from './index.js';

type TestVmi = Pick<VirtualMachineInstance, 'metadata' | 'spec'>;

let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'kvts-prepare-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Lists the files of an ISO with xorriso (a real reader of what genisoimage wrote). */
async function isoInfo(iso: string): Promise<{ volid: string; files: string[] }> {
  const { stdout, stderr } = await run('xorriso', ['-indev', iso, '-find', '/', '-type', 'f']);
  const files = stdout
    .split('\n')
    .filter((l) => l.startsWith("'"))
    .map((l) => l.replace(/'/g, ''))
    .sort();
  const volid = /Volume id\s*:\s*'([^']*)'/.exec(stderr)?.[1] ?? '';
  return { volid, files };
}

async function isoFile(iso: string, file: string): Promise<string> {
  const out = path.join(root, 'extract-' + path.basename(file));
  await run('xorriso', ['-osirrox', 'on', '-indev', iso, '-extract', file, out]);
  return readFile(out, 'utf8');
}

describe('prepareVolumes (real qemu-img / genisoimage)', () => {
  it('creates a qcow2 overlay over a raw container disk, an empty disk, a DiskOrCreate host disk', async () => {
    const paths = createPodLayout(root);
    await mkdir(path.dirname(paths.containerDiskImage(1)), { recursive: true });
    await writeFile(paths.containerDiskImage(1), Buffer.alloc(1024 * 1024));
    const hostFile = path.join(root, 'host', 'data', 'disk.img');
    await mkdir(path.dirname(paths.hostDiskImage('hd', hostFile)), { recursive: true });
    const vmi: TestVmi = {
      metadata: { name: 'v', namespace: 'n' },
      spec: {
        domain: {},
        volumes: [
          // a hotplugged claim is in the hotplug dir, not here: nothing to prepare
          { name: 'pvc', persistentVolumeClaim: { claimName: 'x', hotpluggable: true } },
          { name: 'root', containerDisk: { image: 'img' } },
          { name: 'scratch', emptyDisk: { capacity: '64Mi' } },
          { name: 'hd', hostDisk: { path: hostFile, type: 'DiskOrCreate', capacity: '10Mi' } },
        ],
      },
    };
    const steps: string[] = [];
    const res = await prepareVolumes(vmi, paths, { onStep: (m) => steps.push(m) });
    expect(res.map((r) => [r.volume, r.action])).toEqual([
      ['root', 'created'],
      ['scratch', 'created'],
      ['hd', 'created'],
    ]);
    const info = JSON.parse(
      (await run('qemu-img', ['info', '--output=json', paths.ephemeralOverlay('root')])).stdout,
    );
    expect(info.format).toBe('qcow2');
    expect(info['backing-filename']).toBe(paths.containerDiskImage(1));
    expect(info['backing-filename-format']).toBe('raw');
    const empty = JSON.parse(
      (await run('qemu-img', ['info', '--output=json', paths.emptyDiskImage('scratch')])).stdout,
    );
    expect(empty['virtual-size']).toBe(64 * 1024 * 1024);
    expect((await stat(paths.hostDiskImage('hd', hostFile))).size).toBe(10 * 1024 * 1024);
    expect(steps).toHaveLength(3);
    // idempotent: a second run keeps the guest's disks
    const again = await prepareVolumes(vmi, paths);
    expect(again.map((r) => r.action)).toEqual(['exists', 'exists', 'exists']);
  });

  it('overlays a qcow2 base with -F qcow2', async () => {
    const paths = createPodLayout(root);
    await mkdir(path.dirname(paths.containerDiskImage(0)), { recursive: true });
    await run('qemu-img', ['create', '-f', 'qcow2', paths.containerDiskImage(0), '1M']);
    await prepareVolumes(
      { metadata: {}, spec: { domain: {}, volumes: [{ name: 'r', containerDisk: { image: 'i' } }] } },
      paths,
    );
    const info = JSON.parse(
      (await run('qemu-img', ['info', '--output=json', paths.ephemeralOverlay('r')])).stdout,
    );
    expect(info['backing-filename-format']).toBe('qcow2');
    expect(await imageFormat(paths.ephemeralOverlay('r'))).toBe('qcow2');
  });

  it('reports what it found in container disk images: format and virtual size reach disksInfo', async () => {
    const paths = createPodLayout(root);
    await mkdir(path.dirname(paths.containerDiskImage(0)), { recursive: true });
    await writeFile(paths.containerDiskImage(0), Buffer.alloc(2 * 1024 * 1024));
    await run('qemu-img', ['create', '-f', 'qcow2', paths.containerDiskImage(1), '3M']);
    const vmi: TestVmi = {
      metadata: {},
      spec: {
        domain: {},
        volumes: [
          { name: 'rawdisk', containerDisk: { image: 'a' } },
          { name: 'qdisk', containerDisk: { image: 'b' } },
          { name: 'scratch', emptyDisk: { capacity: '1Mi' } },
        ],
      },
    };
    const res = await prepareVolumes(vmi, paths);
    expect(res[0]!.image).toEqual({ format: 'raw', virtualSize: 2 * 1024 * 1024 });
    expect(res[1]!.image).toEqual({ format: 'qcow2', virtualSize: 3 * 1024 * 1024 });
    expect(disksInfoOf(res)).toEqual({
      rawdisk: { format: 'raw', virtualSize: 2 * 1024 * 1024 },
      qdisk: { format: 'qcow2', virtualSize: 3 * 1024 * 1024 },
    });
    // a restarted launcher (overlays exist) finds the same facts
    expect(disksInfoOf(await prepareVolumes(vmi, paths))).toEqual(disksInfoOf(res));
  });

  it('refuses a container disk image with a backing file (a real qcow2 chain), naming the field', async () => {
    const paths = createPodLayout(root);
    const secret = path.join(root, 'secret.raw');
    await writeFile(secret, Buffer.alloc(1024 * 1024, 0x41));
    await mkdir(path.dirname(paths.containerDiskImage(0)), { recursive: true });
    await run('qemu-img', ['create', '-f', 'qcow2', '-b', secret, '-F', 'raw', paths.containerDiskImage(0)]);
    const vmi: TestVmi = {
      metadata: {},
      spec: { domain: {}, volumes: [{ name: 'r', containerDisk: { image: 'i' } }] },
    };
    const err = await prepareVolumes(vmi, paths).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PrepareError);
    expect((err as PrepareError).path).toBe('spec.volumes[0].containerDisk');
    expect((err as Error).message).toContain('backing file');
    expect((err as Error).message).toContain(secret);
    // nothing half-done: no overlay was created
    await expect(stat(paths.ephemeralOverlay('r'))).rejects.toThrow();
  });

  it('refuses a container disk image whose format is neither raw nor qcow2', async () => {
    const paths = createPodLayout(root);
    await mkdir(path.dirname(paths.containerDiskImage(0)), { recursive: true });
    await run('qemu-img', ['create', '-f', 'vmdk', paths.containerDiskImage(0), '1M']);
    const err = await prepareVolumes(
      { metadata: {}, spec: { domain: {}, volumes: [{ name: 'r', containerDisk: { image: 'i' } }] } },
      paths,
    ).catch((e: unknown) => e);
    expect((err as Error).message).toBe(
      'spec.volumes[0].containerDisk: image format vmdk is not supported (raw or qcow2 only)',
    );
  });

  it('builds NoCloud and ConfigDrive ISOs with the upstream labels and files', async () => {
    const paths = createPodLayout(root);
    await prepareVolumes(
      {
        metadata: { name: 'web', namespace: 'prod', uid: 'abc' },
        spec: {
          domain: {},
          volumes: [
            {
              name: 'ci',
              cloudInitNoCloud: {
                userDataBase64: Buffer.from('#cloud-config\npassword: x\n').toString('base64'),
                networkData: 'version: 2\n',
              },
            },
          ],
        },
      },
      paths,
    );
    const nc = await isoInfo(paths.cloudInitIso('noCloud', 'prod', 'web'));
    expect(nc.volid).toBe('cidata');
    expect(nc.files).toEqual(['/meta-data', '/network-config', '/user-data']);
    expect(await isoFile(paths.cloudInitIso('noCloud', 'prod', 'web'), '/user-data')).toBe(
      '#cloud-config\npassword: x\n',
    );
    expect(await isoFile(paths.cloudInitIso('noCloud', 'prod', 'web'), '/meta-data')).toBe(
      'instance-id: web.prod\nlocal-hostname: web\n',
    );

    await prepareVolumes(
      {
        metadata: { name: 'web', namespace: 'prod', uid: 'abc' },
        spec: { domain: {}, volumes: [{ name: 'cd', cloudInitConfigDrive: { userData: 'hello <&>' } }] },
      },
      paths,
    );
    const cd = await isoInfo(paths.cloudInitIso('configDrive', 'prod', 'web'));
    expect(cd.volid).toBe('config-2');
    expect(cd.files).toEqual(['/openstack/latest/meta_data.json', '/openstack/latest/user_data']);
    expect(
      JSON.parse(
        await isoFile(paths.cloudInitIso('configDrive', 'prod', 'web'), '/openstack/latest/meta_data.json'),
      ),
    ).toMatchObject({ uuid: 'abc', hostname: 'web' });
  });

  it('builds configMap / secret / serviceAccount ISOs from mounted dirs, errors name the volume field', async () => {
    const paths = createPodLayout(root);
    await mkdir(paths.configSourceDir('configMap', 'cm'), { recursive: true });
    await writeFile(path.join(paths.configSourceDir('configMap', 'cm'), 'app.conf'), 'k=v\n');
    await mkdir(paths.configSourceDir('serviceAccount', 'sa'), { recursive: true });
    await writeFile(path.join(paths.configSourceDir('serviceAccount', 'sa'), 'token'), 'tok');
    const vmi: TestVmi = {
      metadata: {},
      spec: {
        domain: {},
        volumes: [
          { name: 'cm', configMap: { name: 'c' } },
          { name: 'sa', serviceAccount: { serviceAccountName: 'default' } },
        ],
      },
    };
    await prepareVolumes(vmi, paths);
    expect(await isoInfo(paths.configIso('configMap', 'cm'))).toEqual({
      volid: 'cfgdata',
      files: ['/app.conf'],
    });
    expect((await isoInfo(paths.configIso('serviceAccount', 'sa'))).files).toEqual(['/token']);

    const err = await prepareVolumes(
      {
        metadata: {},
        spec: { domain: {}, volumes: [vmi.spec!.volumes![0]!, { name: 's', secret: { secretName: 'x' } }] },
      },
      paths,
    ).catch((e) => e);
    expect(err).toBeInstanceOf(PrepareError);
    expect(err.path).toBe('spec.volumes[1].secret');
    expect(err.message).toMatch(/secret volume "s" is not mounted at/);
  });

  it('fails clearly on a missing container disk, a missing Disk-type host disk, bad capacity, missing kernel', async () => {
    const paths = createPodLayout(root);
    const e1 = await prepareVolumes(
      { metadata: {}, spec: { domain: {}, volumes: [{ name: 'r', containerDisk: { image: 'i' } }] } },
      paths,
    ).catch((e) => e);
    expect(e1.message).toMatch(
      /^spec\.volumes\[0\]\.containerDisk: container disk image for volume "r" not found/,
    );
    const e2 = await prepareVolumes(
      {
        metadata: {},
        spec: {
          domain: {},
          volumes: [{ name: 'h', hostDisk: { path: '/nonexistent/x.img', type: 'Disk' } }],
        },
      },
      paths,
    ).catch((e) => e);
    expect(e2.message).toMatch(/^spec\.volumes\[0\]\.hostDisk\.path: \/nonexistent\/x\.img does not exist/);
    const e3 = await prepareVolumes(
      { metadata: {}, spec: { domain: {}, volumes: [{ name: 'e', emptyDisk: { capacity: 'lots' } }] } },
      paths,
    ).catch((e) => e);
    expect(e3.message).toMatch(/^spec\.volumes\[0\]\.emptyDisk\.capacity: invalid quantity/);
    const e4 = await prepareVolumes(
      {
        metadata: {},
        spec: {
          domain: { firmware: { kernelBoot: { container: { image: 'k', kernelPath: '/boot/vmlinuz' } } } },
        },
      },
      paths,
    ).catch((e) => e);
    expect(e4.message).toMatch(
      /^spec\.domain\.firmware\.kernelBoot\.container\.kernelPath: kernel boot file/,
    );
  });

  it('refuses names the Pod layout cannot use as file names, naming the field, before creating anything', async () => {
    const paths = createPodLayout(root);
    const err = await prepareVolumes(
      {
        metadata: { name: 'web', namespace: 'prod' },
        spec: {
          domain: {},
          volumes: [
            { name: 'scratch', emptyDisk: { capacity: '1Mi' } },
            { name: '..', emptyDisk: { capacity: '1Mi' } },
          ],
        },
      },
      paths,
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PrepareError);
    expect((err as PrepareError).path).toBe('spec.volumes[1].name');
    expect((err as Error).message).toMatch(/cannot be used as a file name/);
    await expect(stat(paths.emptyDiskImage('scratch'))).rejects.toThrow();

    const ns = await prepareVolumes(
      {
        metadata: { name: 'web', namespace: '../etc' },
        spec: { domain: {}, volumes: [{ name: 'ci', cloudInitNoCloud: { userData: 'x' } }] },
      },
      paths,
    ).catch((e: unknown) => e);
    expect((ns as PrepareError).path).toBe('metadata.namespace');
  });

  it('quantities', () => {
    expect(quantityToBytes('1Gi', 'f')).toBe(2 ** 30);
    expect(quantityToBytes('2G', 'f')).toBe(2e9);
    expect(quantityToBytes(512, 'f')).toBe(512);
    expect(() => quantityToBytes('1.2.3', 'f')).toThrow(/^f: invalid quantity/);
  });
});

describe('stageLocalImages (standalone)', () => {
  it('refuses a container disk image with a backing file before anything is staged', async () => {
    const paths = createPodLayout(path.join(root, 'pod'));
    const base = path.join(root, 'base.qcow2');
    await run('qemu-img', ['create', '-f', 'qcow2', base, '1M']);
    const top = path.join(root, 'top.qcow2');
    await run('qemu-img', ['create', '-f', 'qcow2', '-b', base, '-F', 'qcow2', top]);
    const err = await stageLocalImages(
      {
        metadata: {},
        spec: { domain: {}, volumes: [{ name: 'root', containerDisk: { image: 'reg/cd:1' } }] },
      },
      new Map([['reg/cd:1', top]]),
      paths,
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PrepareError);
    expect((err as Error).message).toMatch(
      /^spec\.volumes\[0\]\.containerDisk\.image: image has a backing file \(".*base\.qcow2"\)/,
    );
    await expect(stat(paths.containerDiskImage(0))).rejects.toThrow();
  });

  it('maps container disk and kernel boot image references to local files', async () => {
    const paths = createPodLayout(path.join(root, 'pod'));
    const img = path.join(root, 'images');
    await mkdir(path.join(img, 'cd', 'disk'), { recursive: true });
    await writeFile(path.join(img, 'cd', 'disk', 'root.img'), Buffer.alloc(4096));
    await mkdir(path.join(img, 'kernel', 'boot'), { recursive: true });
    await writeFile(path.join(img, 'kernel', 'boot', 'vmlinuz'), 'K');
    await writeFile(path.join(img, 'kernel', 'boot', 'initrd.gz'), 'I');
    const vmi: TestVmi = {
      metadata: { name: 'vm', namespace: 'default' },
      spec: {
        domain: {
          firmware: {
            kernelBoot: {
              container: { image: 'reg/k:1', kernelPath: '/boot/vmlinuz', initrdPath: '/boot/initrd.gz' },
            },
          },
        },
        volumes: [
          { name: 'ci', cloudInitNoCloud: { userData: 'x' } },
          { name: 'root', containerDisk: { image: 'reg/cd:1' } },
        ],
      },
    };
    const staged = await stageLocalImages(
      vmi,
      new Map([
        ['reg/k:1', path.join(img, 'kernel')],
        ['reg/cd:1', path.join(img, 'cd')],
      ]),
      paths,
    );
    expect(staged).toEqual({ root: { format: 'raw', virtualSize: 4096 } });
    expect(await readlink(paths.containerDiskImage(1))).toBe(path.join(img, 'cd', 'disk', 'root.img'));
    expect(await readFile(paths.kernelBootFile('/boot/vmlinuz'), 'utf8')).toBe('K');
    expect(await readFile(paths.kernelBootFile('/boot/initrd.gz'), 'utf8')).toBe('I');
    const res = await prepareVolumes(vmi, paths);
    expect(res.map((r) => r.kind)).toEqual([
      'cloudInitNoCloud ISO',
      'containerDisk overlay',
      'kernelPath',
      'initrdPath',
    ]);

    const err = await stageLocalImages(vmi, new Map(), paths).catch((e) => e);
    expect(err.message).toMatch(/image "reg\/cd:1" is not mapped \(add --image reg\/cd:1=PATH\)/);
  });
});
