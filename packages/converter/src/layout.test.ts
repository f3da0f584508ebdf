import { describe, expect, test } from '@jest/globals';
import { createPodLayout, podLayout } from './layout.js';

describe('pod layout', () => {
  test('standard in-Pod paths (upstream KubeVirt)', () => {
    const L = podLayout;
    expect(L.serialSocket('uid-1')).toBe('/var/run/kubevirt-private/uid-1/virt-serial0');
    expect(L.serialLogFile('uid-1')).toBe('/var/run/kubevirt-private/uid-1/virt-serial0-log');
    expect(L.vncSocket('uid-1')).toBe('/var/run/kubevirt-private/uid-1/virt-vnc');
    expect(L.vncSocket('')).toBe('/var/run/kubevirt-private//virt-vnc');
    expect(L.containerDiskImage(3)).toBe('/var/run/kubevirt/container-disks/disk_3.img');
    expect(L.kernelBootFile('/boot/vmlinuz')).toBe('/var/run/kubevirt/container-disks/kernel-boot/vmlinuz');
    expect(L.ephemeralOverlay('root')).toBe('/var/run/kubevirt-ephemeral-disks/disk-data/root/disk.qcow2');
    expect(L.emptyDiskImage('scratch')).toBe('/var/run/libvirt/empty-disks/scratch.qcow2');
    expect(L.cloudInitIso('noCloud', 'default', 'vm')).toBe(
      '/var/run/libvirt/cloud-init-dir/default/vm/noCloud.iso',
    );
    expect(L.cloudInitIso('configDrive', 'default', 'vm')).toBe(
      '/var/run/libvirt/cloud-init-dir/default/vm/configdrive.iso',
    );
    expect(L.configIso('configMap', 'c')).toBe('/var/run/kubevirt-private/config-map-disks/c.iso');
    expect(L.configIso('secret', 's')).toBe('/var/run/kubevirt-private/secret-disks/s.iso');
    expect(L.configIso('downwardAPI', 'd')).toBe('/var/run/kubevirt-private/downwardapi-disks/d.iso');
    expect(L.configIso('serviceAccount', 'x')).toBe(
      '/var/run/kubevirt-private/service-account-disk/service-account.iso',
    );
    expect(L.configSourceDir('configMap', 'c')).toBe('/var/run/kubevirt-private/config-map/c');
    expect(L.configSourceDir('secret', 's')).toBe('/var/run/kubevirt-private/secret/s');
    expect(L.configSourceDir('downwardAPI', 'd')).toBe('/var/run/kubevirt-private/downwardapi/d');
    expect(L.configSourceDir('sysprep', 'p')).toBe('/var/run/kubevirt-private/sysprep/p');
    expect(L.configSourceDir('serviceAccount', 'x')).toBe('/var/run/secrets/kubernetes.io/serviceaccount');
    expect(L.filesystemVolumeImage('pvc')).toBe('/var/run/kubevirt-private/vmi-disks/pvc/disk.img');
    expect(L.blockVolumeDevice('pvc')).toBe('/dev/pvc');
    expect(L.hostDiskImage('h', '/data/x.img')).toBe('/var/run/kubevirt-private/vmi-disks/h/x.img');
    expect(L.nvramFile('vm')).toBe('/var/lib/libvirt/qemu/nvram/vm_VARS.fd');
    expect(L.tapDevice(0)).toBe('tap0');
    expect(L.hotplugImage('hp')).toBe('/var/run/kubevirt/hotplug-disks/hp.img');
    expect(L.hotplugBlockDevice('hp')).toBe('/var/run/kubevirt/hotplug-disks/hp');
  });
  test('a root prefix moves every path', () => {
    const L = createPodLayout('/tmp/pod/');
    expect(L.root).toBe('/tmp/pod');
    expect(L.serialSocket('u')).toBe('/tmp/pod/var/run/kubevirt-private/u/virt-serial0');
    expect(L.blockVolumeDevice('v')).toBe('/tmp/pod/dev/v');
    expect(L.nvramFile('vm')).toBe('/tmp/pod/var/lib/libvirt/qemu/nvram/vm_VARS.fd');
    expect(L.configSourceDir('serviceAccount', 'x')).toBe(
      '/tmp/pod/var/run/secrets/kubernetes.io/serviceaccount',
    );
  });
  test('names that would leave their directory are refused', () => {
    expect(() => podLayout.emptyDiskImage('../x')).toThrow(/cannot be used as a file name/);
    expect(() => podLayout.ephemeralOverlay('..')).toThrow();
    expect(() => podLayout.cloudInitIso('noCloud', 'a/b', 'vm')).toThrow();
    expect(() => podLayout.kernelBootFile('/')).toThrow();
    expect(() => podLayout.configSourceDir('secret', '../etc')).toThrow(/cannot be used as a file name/);
  });
});
