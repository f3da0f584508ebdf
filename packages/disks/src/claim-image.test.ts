import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { createPodLayout, type PodLayout } from '@kubevirt-ts/converter';
import { mkdir, mkdtemp, open, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  ClaimImageError,
  PrepareError,
  bytesAvailable,
  claimImageSize,
  fitClaimImage,
  prepareVolumes,
  resolveClaimImageOptions,
  run,
} from './index.js';

const MIB = 1024 * 1024;
type Vmi = Pick<VirtualMachineInstance, 'metadata' | 'spec'> & { status?: VirtualMachineInstance['status'] };
type Info = NonNullable<
  NonNullable<VirtualMachineInstance['status']>['volumeStatus']
>[number]['persistentVolumeClaimInfo'];

const F = 'status.volumeStatus[0].persistentVolumeClaimInfo';

describe('claimImageSize: the size rule (upstream host-disk)', () => {
  it('the capacity when no smaller request is given', () => {
    expect(claimImageSize('d', { capacity: { storage: '64Mi' } }, F)).toBe(64 * MIB);
    expect(claimImageSize('d', { capacity: { storage: '64Mi' }, requests: { storage: '64Mi' } }, F)).toBe(
      64 * MIB,
    );
    // a request above the capacity: the capacity
    expect(claimImageSize('d', { capacity: { storage: '64Mi' }, requests: { storage: '1Gi' } }, F)).toBe(
      64 * MIB,
    );
  });
  it('the request when it is smaller than the capacity or the capacity is unknown (a claim bound on first use)', () => {
    expect(claimImageSize('d', { capacity: { storage: '1Gi' }, requests: { storage: '100Mi' } }, F)).toBe(
      100 * MIB,
    );
    expect(claimImageSize('d', { requests: { storage: '2Gi' } }, F)).toBe(2048 * MIB);
  });
  it('aligned down to 1 MiB', () => {
    expect(claimImageSize('d', { capacity: { storage: '10M' } }, F)).toBe(9 * MIB); // 10,000,000 bytes
    expect(claimImageSize('d', { capacity: { storage: String(5 * MIB + 1) } }, F)).toBe(5 * MIB);
  });
  it('refuses a claim without a size, under 1 MiB, or with a bad quantity, naming the field and the volume', () => {
    expect(() => claimImageSize('data', {}, F)).toThrow(
      `${F}: volume "data": the claim gives neither a storage capacity nor a storage request`,
    );
    expect(() => claimImageSize('data', undefined, F)).toThrow(ClaimImageError);
    expect(() => claimImageSize('data', { capacity: { storage: '512Ki' } }, F)).toThrow(
      `${F}: volume "data": the claim's size (524288 bytes) is under 1 MiB`,
    );
    expect(() => claimImageSize('data', { capacity: { storage: 'lots' } }, F)).toThrow(
      `${F}.capacity.storage: invalid quantity "lots"`,
    );
    expect(() => claimImageSize('data', { requests: { storage: '1Zz' } }, F)).toThrow(
      `${F}.requests.storage: invalid quantity`,
    );
  });
});

describe('fitClaimImage: lessPVCSpaceToleration', () => {
  it('the size when it fits', () => {
    expect(fitClaimImage('d', 64 * MIB, 64 * MIB, 10, 'f')).toEqual({ size: 64 * MIB, tolerated: false });
  });
  it('the available space (aligned down to 1 MiB) when it is short by no more than the toleration', () => {
    // 100 MiB wanted, 95.5 MiB free: 90 MiB would do with 10 %
    expect(fitClaimImage('d', 100 * MIB, 95.5 * MIB, 10, 'f')).toEqual({ size: 95 * MIB, tolerated: true });
    expect(fitClaimImage('d', 100 * MIB, 90 * MIB, 10, 'f')).toEqual({ size: 90 * MIB, tolerated: true });
  });
  it('refuses, naming the volume and the figures, when the space is shorter than that', () => {
    expect(() =>
      fitClaimImage('data', 100 * MIB, 90 * MIB - 1, 10, 'spec.volumes[1].persistentVolumeClaim'),
    ).toThrow(
      `spec.volumes[1].persistentVolumeClaim: volume "data": not enough space for disk.img: ${100 * MIB} bytes needed, ${90 * MIB - 1} bytes available on the volume, also with lessPVCSpaceToleration 10%`,
    );
    // no toleration: one byte short is too short
    expect(() => fitClaimImage('data', 100 * MIB, 100 * MIB - 1, 0, 'f')).toThrow('not enough space');
    // tolerated but under 1 MiB left
    expect(() => fitClaimImage('data', MIB, MIB / 2, 100, 'f')).toThrow('not enough space');
  });
  it('options: an integer percentage, a non-negative reserve', () => {
    expect(resolveClaimImageOptions()).toEqual({
      lessPVCSpaceToleration: 10,
      minimumReservePVCBytes: 131072,
    });
    expect(() => resolveClaimImageOptions({ lessPVCSpaceToleration: 101 })).toThrow(
      'lessPVCSpaceToleration: must be an integer percentage from 0 to 100, got 101',
    );
    expect(() => resolveClaimImageOptions({ minimumReservePVCBytes: -1 })).toThrow('minimumReservePVCBytes');
  });
});

/** A VMI with claim volumes (the claim dir of each one that is mounted exists) and its claim infos. */
async function claimVmi(
  paths: PodLayout,
  volumes: VirtualMachineInstance['spec']['volumes'],
  infos: Record<string, Info | undefined>,
  mounted = volumes!.map((v) => v.name),
): Promise<Vmi> {
  for (const v of mounted) await mkdir(path.dirname(paths.filesystemVolumeImage(v)), { recursive: true });
  return {
    metadata: { name: 'v', namespace: 'n' },
    spec: { domain: { devices: { disks: volumes!.map((v) => ({ name: v.name })) } }, volumes },
    status: {
      volumeStatus: Object.entries(infos).map(([name, info]) => ({
        name,
        ...(info ? { persistentVolumeClaimInfo: info } : {}),
      })),
    },
  };
}

describe('prepareVolumes: disk.img on filesystem claims (real files)', () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(path.join(os.tmpdir(), 'kvts-claim-'));
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  it('creates a sparse raw disk.img of the claim size owned by the launcher uid, keeps an existing one as it is', async () => {
    const paths = createPodLayout(root);
    const vmi = await claimVmi(
      paths,
      [
        { name: 'data', persistentVolumeClaim: { claimName: 'c1' } },
        { name: 'dv', dataVolume: { name: 'c2' } },
      ],
      {
        data: {
          claimName: 'c1',
          capacity: { storage: '64Mi' },
          requests: { storage: '64Mi' },
          filesystemOverhead: '0.055',
        },
        dv: { claimName: 'c2', capacity: { storage: '1Gi' }, requests: { storage: '20M' } },
      },
    );
    const steps: [string, Record<string, unknown>][] = [];
    const res = await prepareVolumes(vmi, paths, {
      owner: { uid: 107, gid: 107 },
      onStep: (m, f) => steps.push([m, f]),
    });
    expect(res.map((r) => [r.volume, r.kind, r.action, r.size])).toEqual([
      ['data', 'persistentVolumeClaim disk.img', 'created', 64 * MIB],
      ['dv', 'dataVolume disk.img', 'created', 19 * MIB], // 20,000,000 bytes, aligned down
    ]);
    const st = await stat(paths.filesystemVolumeImage('data'));
    expect(st.size).toBe(64 * MIB);
    expect(st.blocks * 512).toBeLessThan(MIB); // sparse
    if (process.getuid?.() === 0) expect([st.uid, st.gid]).toEqual([107, 107]);
    // the claim's dir is the volume's: not chowned
    expect((await stat(path.dirname(paths.filesystemVolumeImage('data')))).uid).toBe(process.getuid?.());
    expect(steps[0]![0]).toBe(`volume data: persistentVolumeClaim disk.img created (${64 * MIB} bytes)`);
    expect(steps[0]![1]).toMatchObject({ volume: 'data', size: 64 * MIB });
    // the guest's writes: kept by the next start (a new launcher), whatever the claim now says
    const fh = await open(paths.filesystemVolumeImage('data'), 'r+');
    await fh.write('marker', 0);
    await fh.close();
    const again = await prepareVolumes(
      { ...vmi, status: { volumeStatus: [{ name: 'data' }, { name: 'dv' }] } },
      paths,
    );
    expect(again.map((r) => [r.volume, r.action, r.size])).toEqual([
      ['data', 'exists', undefined],
      ['dv', 'exists', undefined],
    ]);
    expect((await readFile(paths.filesystemVolumeImage('data'))).subarray(0, 6).toString()).toBe('marker');
    expect((await stat(paths.filesystemVolumeImage('data'))).size).toBe(64 * MIB);
  });

  it('skips Block claims, hotplugged claims and virtiofs filesystems; ephemeral claims are used, never created', async () => {
    const paths = createPodLayout(root);
    const vmi = await claimVmi(
      paths,
      [
        { name: 'blk', persistentVolumeClaim: { claimName: 'b' } },
        { name: 'hot', persistentVolumeClaim: { claimName: 'h', hotpluggable: true } },
        { name: 'fs', persistentVolumeClaim: { claimName: 'f' } },
        { name: 'eph', ephemeral: { persistentVolumeClaim: { claimName: 'e' } } },
      ],
      {
        blk: { volumeMode: 'Block', capacity: { storage: '64Mi' } },
        hot: { capacity: { storage: '64Mi' } },
        fs: { capacity: { storage: '64Mi' } },
      },
    );
    vmi.spec.domain.devices!.filesystems = [{ name: 'fs', virtiofs: {} }];
    expect(await prepareVolumes(vmi, paths)).toEqual([]);
    for (const v of ['blk', 'hot', 'fs', 'eph'])
      await expect(stat(paths.filesystemVolumeImage(v))).rejects.toThrow('ENOENT');
  });

  it('refuses, naming the volume and the field: no claim info, a claim without a size, not mounted, read-only', async () => {
    const paths = createPodLayout(root);
    const err = async (vmi: Vmi) => {
      const e = await prepareVolumes(vmi, paths).then(
        () => undefined,
        (x: unknown) => x,
      );
      expect(e).toBeInstanceOf(PrepareError);
      return (e as PrepareError).message;
    };
    const pvc = (claimName: string, readOnly?: boolean) => [
      { name: 'data', persistentVolumeClaim: { claimName, ...(readOnly ? { readOnly } : {}) } },
    ];
    expect(await err(await claimVmi(paths, pvc('c'), { data: { capacity: { storage: '1Mi' } } }, []))).toBe(
      `spec.volumes[0].persistentVolumeClaim: claim c of volume "data" is not mounted at ${path.dirname(paths.filesystemVolumeImage('data'))}`,
    );
    expect(await err(await claimVmi(paths, pvc('c'), {}))).toBe(
      'status.volumeStatus: volume "data": no persistentVolumeClaimInfo for it (virt-controller reports the claim there): the size of its disk.img is unknown',
    );
    expect(await err(await claimVmi(paths, pvc('c'), { data: { claimName: 'c' } }))).toBe(
      `${F}: volume "data": the claim gives neither a storage capacity nor a storage request: the size of its disk.img is unknown`,
    );
    expect(await err(await claimVmi(paths, pvc('c', true), { data: { capacity: { storage: '1Mi' } } }))).toBe(
      'spec.volumes[0].persistentVolumeClaim.readOnly: claim c is mounted read-only and holds no disk.img: a read-only claim must already hold the image',
    );
    // a read-only claim that holds its image is fine
    await writeFile(paths.filesystemVolumeImage('data'), Buffer.alloc(MIB));
    const ok = await prepareVolumes(await claimVmi(paths, pvc('c', true), {}), paths);
    expect(ok.map((r) => r.action)).toEqual(['exists']);
  });

  // a real small filesystem: a 32 MiB ext4 image loop-mounted as the claim's dir (root and loop devices needed)
  const loopIt = process.getuid?.() === 0 ? it : it.skip;
  loopIt(
    'a volume smaller than the claim: within lessPVCSpaceToleration the free space, beyond it an error',
    async () => {
      const paths = createPodLayout(root);
      const fsImage = path.join(root, 'fs.img');
      await writeFile(fsImage, Buffer.alloc(0));
      await run('truncate', ['-s', '32M', fsImage]);
      await run('mkfs.ext4', ['-q', '-F', '-m', '0', fsImage]);
      const dir = path.dirname(paths.filesystemVolumeImage('data'));
      await mkdir(dir, { recursive: true });
      await run('mount', ['-o', 'loop', fsImage, dir]);
      try {
        const free = await bytesAvailable(dir, 131072);
        // a claim 1 MiB above the free space (rounded up): short by less than 10 %
        const claim = (Math.floor(free / MIB) + 1) * MIB;
        expect(claim * 0.9).toBeLessThanOrEqual(free);
        const vmi = (storage: string) =>
          claimVmi(paths, [{ name: 'data', persistentVolumeClaim: { claimName: 'small' } }], {
            data: { capacity: { storage } },
          });
        // 64 MiB on a 32 MiB filesystem
        await expect(prepareVolumes(await vmi('64Mi'), paths)).rejects.toThrow(
          `spec.volumes[0].persistentVolumeClaim: volume "data": not enough space for disk.img: ${64 * MIB} bytes needed, ${free} bytes available on the volume, also with lessPVCSpaceToleration 10%`,
        );
        // no toleration: refused too
        await expect(
          prepareVolumes(await vmi(String(claim)), paths, { claimImage: { lessPVCSpaceToleration: 0 } }),
        ).rejects.toThrow('not enough space for disk.img');
        const steps: string[] = [];
        const res = await prepareVolumes(await vmi(String(claim)), paths, { onStep: (m) => steps.push(m) });
        const expected = free - (free % MIB);
        expect(res.map((r) => [r.action, r.size, r.tolerated])).toEqual([['created', expected, true]]);
        expect((await stat(paths.filesystemVolumeImage('data'))).size).toBe(expected);
        expect(steps[0]).toContain(
          'the volume has less room than the claim, within lessPVCSpaceToleration 10%',
        );
      } finally {
        await run('umount', [dir]);
      }
    },
  );
});
