import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createLogger } from '@kubevirt-ts/log';
import {
  ContainerDisks,
  containerDiskFiles,
  parseMountInfo,
  podContainerDisksDir,
} from './container-disks.js';

// The real mounts (sidecar found, host rootfs located, bind mount seen inside the launcher Pod, unmount when the
// launcher goes) are proven on the real node: e2e/src/cluster/vm.test.ts.
describe('container disks', () => {
  it('lists the files a VMI needs: disk_<volume index>.img and the kernelBoot artifacts by base name', () => {
    const vmi = {
      metadata: { name: 'a', namespace: 'ns', uid: 'u1' },
      spec: {
        domain: {
          firmware: {
            kernelBoot: {
              container: { image: 'k', kernelPath: '/boot/vmlinuz', initrdPath: '/boot/initrd.img' },
            },
          },
          devices: {},
        },
        volumes: [
          { name: 'cloud', cloudInitNoCloud: { userData: 'x' } },
          { name: 'root', containerDisk: { image: 'r' } },
          { name: 'data', containerDisk: { image: 'd', path: '/images/data.qcow2' } },
        ],
      },
    } as unknown as VirtualMachineInstance;
    expect(containerDiskFiles(vmi)).toEqual([
      {
        field: 'spec.volumes[1].containerDisk',
        socket: 'disk_1',
        imagePath: undefined,
        target: 'disk_1.img',
      },
      {
        field: 'spec.volumes[2].containerDisk',
        socket: 'disk_2',
        imagePath: '/images/data.qcow2',
        target: 'disk_2.img',
      },
      {
        field: 'spec.domain.firmware.kernelBoot.container.kernelPath',
        socket: 'kernel-boot',
        imagePath: '/boot/vmlinuz',
        target: 'kernel-boot/vmlinuz',
      },
      {
        field: 'spec.domain.firmware.kernelBoot.container.initrdPath',
        socket: 'kernel-boot',
        imagePath: '/boot/initrd.img',
        target: 'kernel-boot/initrd.img',
      },
    ]);
    expect(
      containerDiskFiles({ ...vmi, spec: { domain: { devices: {} } } } as VirtualMachineInstance),
    ).toEqual([]);
  });

  it("names the Pods with container disks mounted, from the host's mountinfo (host pod dir, nothing else)", async () => {
    const proc = await mkdtemp(path.join(tmpdir(), 'kvts-cd-proc-'));
    try {
      await mkdir(path.join(proc, '1', 'ns'), { recursive: true });
      await writeFile(path.join(proc, '1', 'ns', 'mnt'), '');
      const host = '/var/lib/kubelet/pods';
      await writeFile(
        path.join(proc, '1', 'mountinfo'),
        [
          `900 1 0:50 /disk/guest.qcow2 ${podContainerDisksDir(host, 'p1')}/disk_0.img ro - overlay overlay rw`,
          `901 1 0:50 /boot/vmlinuz ${podContainerDisksDir(host, 'p1')}/kernel-boot/vmlinuz ro - overlay overlay rw`,
          `902 1 0:51 /disk/guest.qcow2 ${podContainerDisksDir(host, 'p2')}/disk_0.img ro - overlay overlay rw`,
          // a Pod's other volumes and the same layout elsewhere are not container disks of a Pod
          `903 1 0:52 / ${host}/p3/volumes/kubernetes.io~empty-dir/public rw - tmpfs tmpfs rw`,
          `904 1 0:53 / /elsewhere/p4/volumes/kubernetes.io~empty-dir/container-disks/disk_0.img ro - ext4 /dev/vda rw`,
          '',
        ].join('\n'),
      );
      const cd = new ContainerDisks({
        podsDir: '/pods',
        hostPodsDir: host,
        helper: '/nonexistent',
        procDir: proc,
        log: createLogger({ component: 'test', silent: true }),
      });
      expect((await cd.mountedPods()).sort()).toEqual(['p1', 'p2']);
    } finally {
      await rm(proc, { recursive: true, force: true });
    }
  });

  it('parses mountinfo (optional fields, octal escapes) into root, mount point and superblock', () => {
    const text = [
      '22 27 0:21 / /proc rw,relatime - proc proc rw',
      '812 780 0:95 / /run/c/k8s.io/abc/rootfs rw,relatime shared:400 master:1 - overlay overlay rw,lowerdir=/l1:/l2,upperdir=/u,workdir=/w',
      '813 780 0:96 /sub /mnt/with\\040space rw - ext4 /dev/vda rw',
      '',
    ].join('\n');
    expect(parseMountInfo(text)).toEqual([
      { root: '/', mountPoint: '/proc', fsType: 'proc', source: 'proc', superOptions: 'rw' },
      {
        root: '/',
        mountPoint: '/run/c/k8s.io/abc/rootfs',
        fsType: 'overlay',
        source: 'overlay',
        superOptions: 'rw,lowerdir=/l1:/l2,upperdir=/u,workdir=/w',
      },
      { root: '/sub', mountPoint: '/mnt/with space', fsType: 'ext4', source: '/dev/vda', superOptions: 'rw' },
    ]);
  });

  it("a Pod's container-disks dir under kubelet's pod dir", () => {
    expect(podContainerDisksDir('/pods', 'p1')).toBe(
      '/pods/p1/volumes/kubernetes.io~empty-dir/container-disks',
    );
  });
});
