// Which claim volumes are block devices in the Pod, on a Pod root with a real block device node (mknod: root only)
// at the layout's blockVolumeDevice, and disk preparation leaving a Block claim alone.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { createPodLayout } from '@kubevirt-ts/converter';
import { blockVolumesInPod, isBlockDevice, prepareVolumes } from './index.js';

const isRoot = process.getuid?.() === 0;
let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'kvts-block-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

type Volume = NonNullable<VirtualMachineInstance['spec']['volumes']>[number];
const spec = (volumes: Volume[]) => ({ spec: { domain: {}, volumes } }) as unknown as VirtualMachineInstance;
const VOLUMES: Volume[] = [
  { name: 'pvc', persistentVolumeClaim: { claimName: 'a' } },
  { name: 'fs', persistentVolumeClaim: { claimName: 'b' } },
  { name: 'dv', dataVolume: { name: 'dv' } },
  { name: 'eph', ephemeral: { persistentVolumeClaim: { claimName: 'c' } } },
  { name: 'hot', persistentVolumeClaim: { claimName: 'd', hotpluggable: true } },
  { name: 'cd', containerDisk: { image: 'x' } },
] as Volume[];

test('blockVolumesInPod: claim volumes whose device path is a block device; PVC and ephemeral in isBlockPVC, DataVolumes in isBlockDV', () => {
  const paths = createPodLayout('/pod');
  const asked: string[] = [];
  const blocks = new Set(['/pod/dev/pvc', '/pod/dev/dv', '/pod/dev/eph', '/pod/dev/hot', '/pod/dev/cd']);
  const got = blockVolumesInPod(spec(VOLUMES), paths, (p) => {
    asked.push(p);
    return blocks.has(p);
  });
  expect(got).toEqual({ isBlockPVC: { pvc: true, eph: true }, isBlockDV: { dv: true } });
  // hotplugged volumes (the hotplug dir) and non-claim volumes are never looked at
  expect(asked).toEqual(['/pod/dev/pvc', '/pod/dev/fs', '/pod/dev/dv', '/pod/dev/eph']);
  // a name the layout refuses is left to the converter (which names the field)
  expect(
    blockVolumesInPod(
      spec([{ name: 'a/b', persistentVolumeClaim: { claimName: 'x' } } as Volume]),
      paths,
      () => true,
    ),
  ).toEqual({
    isBlockPVC: {},
    isBlockDV: {},
  });
});

(isRoot ? describe : describe.skip)(
  isRoot ? 'on a real device node' : 'on a real device node (mknod needs root; skipped)',
  () => {
    test('isBlockDevice: a block node, a link to it; not a file, a character device or nothing', () => {
      mkdirSync(path.join(root, 'dev'));
      const blk = path.join(root, 'dev', 'pvc');
      expect(spawnSync('mknod', ['-m', '0600', blk, 'b', '7', '200']).status).toBe(0);
      expect(spawnSync('mknod', ['-m', '0600', path.join(root, 'dev', 'chr'), 'c', '1', '3']).status).toBe(0);
      symlinkSync(blk, path.join(root, 'dev', 'link'));
      writeFileSync(path.join(root, 'dev', 'file'), '');
      expect(
        ['pvc', 'link', 'chr', 'file', 'none'].map((n) => isBlockDevice(path.join(root, 'dev', n))),
      ).toEqual([true, true, false, false, false]);
      expect(blockVolumesInPod(spec(VOLUMES), createPodLayout(root))).toEqual({
        isBlockPVC: { pvc: true },
        isBlockDV: {},
      });
    });

    test('prepareVolumes leaves a Block claim alone (no disk.img), also before virt-controller reported its volumeMode', async () => {
      const paths = createPodLayout(root);
      const dev = paths.blockVolumeDevice('pvc');
      mkdirSync(path.dirname(dev), { recursive: true });
      expect(spawnSync('mknod', ['-m', '0600', dev, 'b', '7', '200']).status).toBe(0);
      const vmi = {
        metadata: { name: 'v', namespace: 'n' },
        spec: { domain: {}, volumes: [{ name: 'pvc', persistentVolumeClaim: { claimName: 'a' } }] },
        status: {},
      } as unknown as VirtualMachineInstance;
      expect(await prepareVolumes(vmi, paths)).toEqual([]);
      expect(existsSync(paths.filesystemVolumeImage('pvc'))).toBe(false);
    });
  },
);
