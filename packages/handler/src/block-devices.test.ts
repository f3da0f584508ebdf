// prepareBlockDevices on a Pod root made of real device nodes (mknod: root only): what a Pod's compute container has
// in its /dev for a volumeDevice, and what must never be touched.
import { spawnSync } from 'node:child_process';
import { chmodSync, lstatSync, mkdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { BlockDeviceError, blockVolumeCandidates, prepareBlockDevices } from './block-devices.js';

const isRoot = process.getuid?.() === 0;
let dir: string;
let root: string;

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'kvblk-'));
  root = path.join(dir, 'root');
  mkdirSync(path.join(root, 'dev'), { recursive: true });
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

type Volume = NonNullable<VirtualMachineInstance['spec']['volumes']>[number];
function vmi(volumes: Volume[], blockClaims: string[] = [], filesystemClaims: string[] = []) {
  return {
    spec: { domain: { devices: {} }, volumes },
    status: {
      volumeStatus: [
        ...blockClaims.map((name) => ({
          name,
          target: '',
          persistentVolumeClaimInfo: { claimName: `c-${name}`, volumeMode: 'Block' },
        })),
        ...filesystemClaims.map((name) => ({
          name,
          target: '',
          persistentVolumeClaimInfo: { claimName: `c-${name}`, volumeMode: 'Filesystem' },
        })),
      ],
    },
  } as unknown as VirtualMachineInstance;
}
const pvc = (name: string, hotpluggable = false): Volume =>
  ({
    name,
    persistentVolumeClaim: { claimName: `c-${name}`, ...(hotpluggable ? { hotpluggable } : {}) },
  }) as Volume;

/** a block device node in the Pod's /dev (loop's major 7; the minor need not exist) */
function blockNode(name: string, mode = '0600', minor = 200): string {
  const p = path.join(root, 'dev', name);
  const r = spawnSync('mknod', ['-m', mode, p, 'b', '7', String(minor)]);
  if (r.status !== 0) throw new Error(`mknod ${p}: ${r.stderr}`);
  return p;
}

test('blockVolumeCandidates: the claim volumes the Pod maps, with what virt-controller reported', () => {
  const v = vmi(
    [
      pvc('a'),
      pvc('hot', true),
      { name: 'dv', dataVolume: { name: 'dv' } } as Volume,
      { name: 'eph', ephemeral: { persistentVolumeClaim: { claimName: 'e' } } } as Volume,
      { name: 'cd', containerDisk: { image: 'x' } } as Volume,
    ],
    ['a', 'dv'],
  );
  expect(blockVolumeCandidates(v)).toEqual([
    { volume: 'a', field: 'spec.volumes[0].persistentVolumeClaim', reportedBlock: true },
    { volume: 'dv', field: 'spec.volumes[2].dataVolume', reportedBlock: true },
    { volume: 'eph', field: 'spec.volumes[3].ephemeral.persistentVolumeClaim', reportedBlock: false },
  ]);
  expect(blockVolumeCandidates(vmi([{ name: 'cd', containerDisk: { image: 'x' } } as Volume]))).toEqual([]);
});

(isRoot ? describe : describe.skip)(
  isRoot ? 'prepareBlockDevices' : 'prepareBlockDevices needs root (mknod; skipped: not root)',
  () => {
    test("the Pod's block device nodes of claim volumes become the launcher's (107, owner rw); nothing else changes; idempotent", async () => {
      const blk = blockNode('blk');
      const dv = blockNode('dv', '0660', 201);
      const eph = blockNode('eph', '0400', 202); // an ephemeral volume's backing device: owner read/write added
      const hot = blockNode('hot', '0600', 203); // hotplugged: not in the Pod through this path
      const cfg = blockNode('cfg', '0600', 204); // not a claim volume
      const v = vmi(
        [
          pvc('blk'),
          pvc('fs'), // a Filesystem claim: mounted, no device
          { name: 'dv', dataVolume: { name: 'dv' } } as Volume,
          { name: 'eph', ephemeral: { persistentVolumeClaim: { claimName: 'e' } } } as Volume,
          pvc('hot', true),
          { name: 'cfg', configMap: { name: 'x' } } as Volume,
        ],
        ['blk'],
        ['fs'],
      );
      const done = await prepareBlockDevices(v, root, 107);
      expect(done).toEqual([
        { volume: 'blk', path: blk, changed: true },
        { volume: 'dv', path: dv, changed: true },
        { volume: 'eph', path: eph, changed: true },
      ]);
      const owner = (p: string) => {
        const st = lstatSync(p);
        return { uid: st.uid, gid: st.gid, mode: (st.mode & 0o7777).toString(8), block: st.isBlockDevice() };
      };
      expect(owner(blk)).toEqual({ uid: 107, gid: 107, mode: '600', block: true });
      expect(owner(dv)).toEqual({ uid: 107, gid: 107, mode: '660', block: true });
      expect(owner(eph)).toEqual({ uid: 107, gid: 107, mode: '600', block: true });
      expect(owner(hot)).toEqual({ uid: 0, gid: 0, mode: '600', block: true });
      expect(owner(cfg)).toEqual({ uid: 0, gid: 0, mode: '600', block: true });
      // again: already the launcher's
      expect((await prepareBlockDevices(v, root, 107)).map((d) => d.changed)).toEqual([false, false, false]);
      // another gid
      await prepareBlockDevices(vmi([pvc('blk')], ['blk']), root, 107, 36);
      expect(owner(blk)).toMatchObject({ uid: 107, gid: 36 });
    });

    test('a claim reported Block must be a block device in the Pod: missing, a link, a file or a directory are refused with the field', async () => {
      const v = (name: string) => vmi([pvc('other'), pvc(name)], [name]);
      const field = 'spec.volumes[1].persistentVolumeClaim';
      await expect(prepareBlockDevices(v('data'), root, 107)).rejects.toThrow(
        `${field}: the claim is volumeMode Block but the launcher Pod has no device /dev/data (is it a volumeDevice of the compute container?)`,
      );
      // a link to a block device elsewhere: never followed, the target keeps its owner
      const target = path.join(dir, 'elsewhere');
      spawnSync('mknod', ['-m', '0600', target, 'b', '7', '205']);
      symlinkSync(target, path.join(root, 'dev', 'link'));
      const err = await prepareBlockDevices(v('link'), root, 107).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(BlockDeviceError);
      expect((err as BlockDeviceError).field).toBe(field);
      expect((err as Error).message).toBe(
        `${field}: the claim is volumeMode Block but /dev/link in the launcher Pod is not a block device (a symbolic link)`,
      );
      expect(statSync(target).uid).toBe(0);
      writeFileSync(path.join(root, 'dev', 'file'), '');
      await expect(prepareBlockDevices(v('file'), root, 107)).rejects.toThrow(
        `${field}: the claim is volumeMode Block but /dev/file in the launcher Pod is not a block device`,
      );
      expect(statSync(path.join(root, 'dev', 'file')).uid).toBe(0);
      // a claim not reported Block with something else at /dev/<name>: left alone, no error
      expect(await prepareBlockDevices(vmi([pvc('file'), pvc('link')]), root, 107)).toEqual([]);
    });

    test("a device node on the node's own /dev (or the handler's) is not the Pod's: refused, unchanged", async () => {
      const blk = blockNode('blk');
      await expect(
        prepareBlockDevices(vmi([pvc('blk')], ['blk']), root, 107, 107, {
          ownDev: path.join(dir, 'root', 'dev'),
        }),
      ).rejects.toThrow(
        "spec.volumes[0].persistentVolumeClaim: /dev/blk in the launcher Pod is a device node of the node's own /dev, not one made for the Pod: not changing its owner",
      );
      await expect(
        prepareBlockDevices(vmi([pvc('blk')], ['blk']), root, 107, 107, { hostRoot: path.join(dir, 'root') }),
      ).rejects.toThrow("is a device node of the node's own /dev");
      expect(statSync(blk).uid).toBe(0);
    });

    test('a Pod without /dev, and a VMI without claim volumes', async () => {
      const bare = path.join(dir, 'bare');
      mkdirSync(bare);
      await expect(prepareBlockDevices(vmi([pvc('blk')], ['blk']), bare, 107)).rejects.toThrow(
        'spec.volumes[0].persistentVolumeClaim: the launcher Pod has no /dev directory',
      );
      expect(await prepareBlockDevices(vmi([pvc('fs')]), bare, 107)).toEqual([]);
      chmodSync(bare, 0o755);
      expect(await prepareBlockDevices(vmi([]), '/nonexistent', 107)).toEqual([]);
    });
  },
);
