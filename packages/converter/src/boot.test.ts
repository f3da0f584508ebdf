// The converter's domain boots a real guest: a VMI with a kernel-boot container and a containerDisk,
// converted with a layout rooted in a temp dir, defined and started on a private libvirtd under
// QEMU emulation (TCG); the guest's serial console (logged by libvirt) shows the ready line.
import { afterAll, beforeAll, expect, test } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import {
  chownSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  setVirtualMachineInstanceDefaults,
  validateVirtualMachineInstance,
  type VirtualMachineInstance,
} from '@kubevirt-ts/api';
import { toDomain } from './convert.js';
import { toDomainXml } from './xml.js';
import { createPodLayout } from './layout.js';
import { startSessionDaemon, type SessionDaemon } from './test-libvirtd.js';

const CACHE =
  process.env.KVTS_CACHE ??
  path.join(process.env.XDG_CACHE_HOME ?? path.join(process.env.HOME ?? '/root', '.cache'), 'kubevirt-ts');
const GUEST = path.join(CACHE, 'guest');

let daemon: SessionDaemon;
let root: string;
beforeAll(async () => {
  daemon = await startSessionDaemon();
  root = mkdtempSync(path.join(tmpdir(), 'kvts-conv-pod-'));
}, 60_000);
afterAll(async () => {
  await daemon?.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

test('a converted VMI boots the test guest under TCG (kernel boot + containerDisk overlay, serial console log)', async () => {
  expect([
    existsSync(path.join(GUEST, 'vmlinuz')),
    existsSync(path.join(GUEST, 'initramfs.img')),
    'build it: bash tools/guest/build.sh',
  ]).toEqual([true, true, 'build it: bash tools/guest/build.sh']);
  const uid = '3c1f6a4e-0b7a-4c55-9a51-6f0c0d1e2f3a';
  const vmi: VirtualMachineInstance = {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: 'boot', namespace: 'tests', uid },
    spec: {
      domain: {
        resources: { requests: { memory: '256Mi' } },
        firmware: {
          kernelBoot: {
            kernelArgs: 'console=ttyS0 kvts.poweroff',
            container: {
              image: 'example.com/guest:1',
              kernelPath: '/boot/vmlinuz',
              initrdPath: '/boot/initramfs.img',
            },
          },
        },
        devices: {
          autoattachPodInterface: false,
          autoattachGraphicsDevice: false,
          disks: [{ name: 'root', disk: { bus: 'virtio' } }],
        },
      },
      volumes: [{ name: 'root', containerDisk: { image: 'example.com/disk:1' } }],
    },
  };
  expect(validateVirtualMachineInstance(vmi)).toEqual([]);
  const layout = createPodLayout(root);
  const domain = toDomain(setVirtualMachineInstanceDefaults(vmi), {
    allowEmulation: true,
    kvmAvailable: false,
    layout,
    serialConsoleLog: true,
  });
  expect(domain.type).toBe('qemu');

  // what the launcher prepares: kernel artifacts, the container disk image and its overlay, private dirs
  const own = (p: string) => {
    if (daemon.uid !== undefined) chownSync(p, daemon.uid, daemon.gid!);
  };
  const mk = (dir: string) => {
    mkdirSync(dir, { recursive: true });
    let d = dir;
    while (d.startsWith(root)) {
      own(d);
      d = path.dirname(d);
    }
  };
  mk(path.dirname(layout.kernelBootFile('/boot/vmlinuz')));
  copyFileSync(path.join(GUEST, 'vmlinuz'), layout.kernelBootFile('/boot/vmlinuz'));
  copyFileSync(path.join(GUEST, 'initramfs.img'), layout.kernelBootFile('/boot/initramfs.img'));
  own(layout.kernelBootFile('/boot/vmlinuz'));
  own(layout.kernelBootFile('/boot/initramfs.img'));
  mk(layout.containerDisksDir);
  mk(path.dirname(layout.ephemeralOverlay('root')));
  mk(layout.vmiPrivateDir(uid));
  const img = layout.containerDiskImage(0);
  const overlay = layout.ephemeralOverlay('root');
  for (const args of [
    ['create', '-q', '-f', 'qcow2', img, '16M'],
    ['create', '-q', '-f', 'qcow2', '-b', img, '-F', 'qcow2', overlay],
  ]) {
    const r = spawnSync('qemu-img', args, { encoding: 'utf8' });
    expect([args[0], r.status, r.stderr]).toEqual([args[0], 0, '']);
  }
  own(img);
  own(overlay);
  expect(domain.devices.disks![0]!.source).toEqual({ file: overlay });
  expect(domain.devices.disks![0]!.backingStore!.source).toEqual({ file: img });

  const def = daemon.define(toDomainXml(domain)); // define + undefine: the definition is valid
  expect([def.ok, def.output]).toEqual([true, '']);
  const file = path.join(root, 'domain.xml');
  writeFileSync(file, toDomainXml(domain));
  own(file);
  const start = daemon.virsh(['create', file]); // transient domain: gone when the guest powers off
  expect([start.status, start.stderr]).toEqual([0, '']);

  const log = layout.serialLogFile(uid);
  const deadline = Date.now() + 240_000;
  let text = '';
  while (Date.now() < deadline) {
    text = existsSync(log) ? readFileSync(log, 'utf8') : '';
    if (text.includes('KUBEVIRT-TS-GUEST-READY')) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  const state = daemon.virsh(['list', '--name']).stdout.trim();
  if (state) daemon.virsh(['destroy', state]);
  expect(text).toContain('KUBEVIRT-TS-GUEST-READY');
}, 300_000);
