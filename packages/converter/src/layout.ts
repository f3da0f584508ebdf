// Where files live inside a virt-launcher Pod. The converter writes these paths into the domain;
// the launcher creates the files there; the renderer mounts the volumes that hold them. The
// default layout is upstream KubeVirt's; `createPodLayout(root)` moves every path under `root`
// (tests and non-Pod launchers run with a temporary root).
import path from 'node:path';

// The Pod's user and the socket path limit live in the api package (the lowest one); re-exported here,
// where this package's API has always offered them.
export { LAUNCHER_UID, LAUNCHER_GID, MAX_SOCKET_PATH_BYTES } from '@kubevirt-ts/api';

/** Config volumes kubelet mounts into the Pod for the launcher to read (the ISO is built from there). */
export type ConfigSourceKind = 'configMap' | 'secret' | 'downwardAPI' | 'serviceAccount' | 'sysprep';

/** Where each file the domain refers to lives inside the launcher Pod (upstream KubeVirt's paths).
 * Methods that take a name (volume, VMI name/namespace/uid) throw when it is not a single path
 * component ('', '.', '..', or containing '/' or NUL; an empty uid is accepted, as upstream). */
export interface PodLayout {
  /** prefix every path below starts with ('' for the real Pod) */
  readonly root: string;
  /** /var/run/kubevirt-private: launcher-private state (sockets, config ISOs, PVC mount points) */
  readonly privateDir: string;
  /** /var/run/kubevirt-private/<uid>: per-VMI sockets (serial console, VNC) */
  vmiPrivateDir(uid: string): string;
  /** unix socket the serial console port N binds (virt-handler's console proxy connects to it) */
  serialSocket(uid: string, port?: number): string;
  /** file the serial console is logged to (when the context enables the serial console log) */
  serialLogFile(uid: string, port?: number): string;
  /** unix socket of the VNC server */
  vncSocket(uid: string): string;
  /** /var/run/kubevirt/container-disks: images extracted by the container-disk containers */
  readonly containerDisksDir: string;
  /** the container-disk image of the volume at index `volumeIndex` of spec.volumes (the backing file) */
  containerDiskImage(volumeIndex: number): string;
  /** kernel/initrd extracted from spec.domain.firmware.kernelBoot.container, by their base names */
  kernelBootFile(artifactPath: string): string;
  /** /var/run/kubevirt-ephemeral-disks: writable overlays */
  readonly ephemeralDisksDir: string;
  /** qcow2 overlay over a container disk or an ephemeral PVC (written by the launcher) */
  ephemeralOverlay(volumeName: string): string;
  /** qcow2 file of an emptyDisk volume */
  emptyDiskImage(volumeName: string): string;
  /** cloud-init ISO (NoCloud or ConfigDrive) */
  cloudInitIso(kind: 'noCloud' | 'configDrive', namespace: string, name: string): string;
  /** ISO built from a configMap / secret / downwardAPI / serviceAccount volume */
  configIso(kind: 'configMap' | 'secret' | 'downwardAPI' | 'serviceAccount', volumeName: string): string;
  /** where kubelet mounts the source of a config volume: /var/run/kubevirt-private/{config-map,secret,
   * downwardapi,sysprep}/<volume>, and the Pod's service account token dir for serviceAccount */
  configSourceDir(kind: ConfigSourceKind, volumeName: string): string;
  /** disk.img on a filesystem-mode PVC / DataVolume */
  filesystemVolumeImage(volumeName: string): string;
  /** block-mode PVC / DataVolume device node */
  blockVolumeDevice(volumeName: string): string;
  /** image of a hotplugged filesystem-mode PVC / DataVolume */
  hotplugImage(volumeName: string): string;
  /** device node of a hotplugged block-mode PVC / DataVolume */
  hotplugBlockDevice(volumeName: string): string;
  /** hostDisk image as mounted into the Pod */
  hostDiskImage(volumeName: string, hostPath: string): string;
  /** EFI variable store of the VMI (copied from the firmware's template) */
  nvramFile(vmiName: string): string;
  /** tap device name for the pod-network interface at index i of spec.domain.devices.interfaces */
  tapDevice(interfaceIndex: number): string;
  /** unix socket of the passt the launcher runs for the interface at index i (standalone), in the VMI's private dir */
  passtSocket(uid: string, interfaceIndex: number): string;
}

/** A name used as a path component (volume names, VMI name/namespace/uid): one component, no traversal. */
function component(kind: string, name: string): string {
  if (name === '' && kind === 'uid') return name; // upstream writes /var/run/kubevirt-private//virt-vnc for a VMI without uid
  if (name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) {
    throw new Error(`${kind} ${JSON.stringify(name)} cannot be used as a file name`);
  }
  return name;
}

/** The Pod layout with every path moved under `root` (trailing slashes dropped; '' gives the
 * standard layout, {@link podLayout}). Used by tests and by launchers that run outside a Pod. */
export function createPodLayout(root = ''): PodLayout {
  const r = root.replace(/\/+$/, '');
  const privateDir = `${r}/var/run/kubevirt-private`;
  const containerDisksDir = `${r}/var/run/kubevirt/container-disks`;
  const ephemeralDisksDir = `${r}/var/run/kubevirt-ephemeral-disks`;
  // upstream joins "/var/run/kubevirt-private/" + uid + "/virt-vnc" by string formatting, which gives
  // a double slash for an empty uid; keep that form so paths compare equal to upstream's.
  const vmiDir = (uid: string) => `${privateDir}/${component('uid', uid)}`;
  return {
    root: r,
    privateDir,
    vmiPrivateDir: vmiDir,
    serialSocket: (uid, port = 0) => `${vmiDir(uid)}/virt-serial${port}`,
    serialLogFile: (uid, port = 0) => `${vmiDir(uid)}/virt-serial${port}-log`,
    vncSocket: (uid) => `${vmiDir(uid)}/virt-vnc`,
    containerDisksDir,
    containerDiskImage: (i) => `${containerDisksDir}/disk_${i}.img`,
    kernelBootFile: (p) =>
      `${containerDisksDir}/kernel-boot/${component('kernel boot artifact', path.posix.basename(p))}`,
    ephemeralDisksDir,
    ephemeralOverlay: (v) => `${ephemeralDisksDir}/disk-data/${component('volume', v)}/disk.qcow2`,
    emptyDiskImage: (v) => `${r}/var/run/libvirt/empty-disks/${component('volume', v)}.qcow2`,
    cloudInitIso: (kind, ns, name) =>
      `${r}/var/run/libvirt/cloud-init-dir/${component('namespace', ns)}/${component('name', name)}/${
        kind === 'noCloud' ? 'noCloud.iso' : 'configdrive.iso'
      }`,
    configIso: (kind, v) => {
      switch (kind) {
        case 'configMap':
          return `${privateDir}/config-map-disks/${component('volume', v)}.iso`;
        case 'secret':
          return `${privateDir}/secret-disks/${component('volume', v)}.iso`;
        case 'downwardAPI':
          return `${privateDir}/downwardapi-disks/${component('volume', v)}.iso`;
        case 'serviceAccount':
          return `${privateDir}/service-account-disk/service-account.iso`;
      }
    },
    configSourceDir: (kind, v) => {
      switch (kind) {
        case 'configMap':
          return `${privateDir}/config-map/${component('volume', v)}`;
        case 'secret':
          return `${privateDir}/secret/${component('volume', v)}`;
        case 'downwardAPI':
          return `${privateDir}/downwardapi/${component('volume', v)}`;
        case 'sysprep':
          return `${privateDir}/sysprep/${component('volume', v)}`;
        case 'serviceAccount':
          return `${r}/var/run/secrets/kubernetes.io/serviceaccount`;
      }
    },
    filesystemVolumeImage: (v) => `${privateDir}/vmi-disks/${component('volume', v)}/disk.img`,
    blockVolumeDevice: (v) => `${r}/dev/${component('volume', v)}`,
    hotplugImage: (v) => `${r}/var/run/kubevirt/hotplug-disks/${component('volume', v)}.img`,
    hotplugBlockDevice: (v) => `${r}/var/run/kubevirt/hotplug-disks/${component('volume', v)}`,
    hostDiskImage: (v, hostPath) =>
      `${privateDir}/vmi-disks/${component('volume', v)}/${component('hostDisk path', path.posix.basename(hostPath))}`,
    nvramFile: (name) => `${r}/var/lib/libvirt/qemu/nvram/${component('name', name)}_VARS.fd`,
    tapDevice: (i) => `tap${i}`,
    passtSocket: (uid, i) => `${vmiDir(uid)}/passt${i}.sock`,
  };
}

/** The standard in-Pod layout (upstream KubeVirt's paths). */
export const podLayout: PodLayout = createPodLayout('');
