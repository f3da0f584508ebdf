import path from 'node:path';
import { createPodLayout } from '@kubevirt-ts/converter';

/**
 * Where the launcher finds its inputs and writes the files the domain uses: the subset of
 * @kubevirt-ts/converter's PodLayout (same method names and paths: upstream KubeVirt's in-Pod layout,
 * optionally moved under a root dir) that disk preparation needs, plus where mounted config volumes are.
 * The converter renders the same paths into the domain XML; `fromPodLayout` adapts its layout object.
 */
export interface PodPaths {
  readonly root: string;
  readonly privateDir: string;
  readonly containerDisksDir: string;
  readonly ephemeralDisksDir: string;
  containerDiskImage(volumeIndex: number): string;
  kernelBootFile(artifactPath: string): string;
  ephemeralOverlay(volumeName: string): string;
  emptyDiskImage(volumeName: string): string;
  cloudInitIso(kind: 'noCloud' | 'configDrive', namespace: string, name: string): string;
  configIso(kind: ConfigKind, volumeName: string): string;
  hostDiskImage(volumeName: string, hostPath: string): string;
  vmiPrivateDir(uid: string): string;
  serialSocket(uid: string, port?: number): string;
  serialLogFile(uid: string, port?: number): string;
  /** where kubelet mounts the source of a configMap / secret / downwardAPI / serviceAccount volume */
  configSourceDir(kind: ConfigKind, volumeName: string): string;
}

export type ConfigKind = 'configMap' | 'secret' | 'downwardAPI' | 'serviceAccount';

/** Adds the mounted-source dirs (the converter's layout: /var/run/kubevirt-private/{config-map,secret,downwardapi}/<vol>). */
export function fromPodLayout(layout: Omit<PodPaths, 'configSourceDir'>): PodPaths {
  const sources = createPodLayout(layout.root);
  const p: PodPaths = Object.create(layout) as PodPaths;
  (p as { configSourceDir: PodPaths['configSourceDir'] }).configSourceDir = (kind, v) =>
    sources.configSourceDir(kind, v);
  return p;
}

/** Same paths as the converter's createPodLayout(root), for the subset above. */
export function podPaths(root = ''): PodPaths {
  const r = root.replace(/\/+$/, '');
  const privateDir = `${r}/var/run/kubevirt-private`;
  const containerDisksDir = `${r}/var/run/kubevirt/container-disks`;
  const ephemeralDisksDir = `${r}/var/run/kubevirt-ephemeral-disks`;
  const vmiDir = (uid: string) => `${privateDir}/${uid}`;
  return fromPodLayout({
    root: r,
    privateDir,
    containerDisksDir,
    ephemeralDisksDir,
    containerDiskImage: (i) => `${containerDisksDir}/disk_${i}.img`,
    kernelBootFile: (p) => `${containerDisksDir}/kernel-boot/${path.posix.basename(p)}`,
    ephemeralOverlay: (v) => `${ephemeralDisksDir}/disk-data/${v}/disk.qcow2`,
    emptyDiskImage: (v) => `${r}/var/run/libvirt/empty-disks/${v}.qcow2`,
    cloudInitIso: (kind, ns, name) =>
      `${r}/var/run/libvirt/cloud-init-dir/${ns}/${name}/${kind === 'noCloud' ? 'noCloud.iso' : 'configdrive.iso'}`,
    configIso: (kind, v) =>
      kind === 'configMap'
        ? `${privateDir}/config-map-disks/${v}.iso`
        : kind === 'secret'
          ? `${privateDir}/secret-disks/${v}.iso`
          : kind === 'downwardAPI'
            ? `${privateDir}/downwardapi-disks/${v}.iso`
            : `${privateDir}/service-account-disk/service-account.iso`,
    hostDiskImage: (v, hostPath) => `${privateDir}/vmi-disks/${v}/${path.posix.basename(hostPath)}`,
    vmiPrivateDir: vmiDir,
    serialSocket: (uid, port = 0) => `${vmiDir(uid)}/virt-serial${port}`,
    serialLogFile: (uid, port = 0) => `${vmiDir(uid)}/virt-serial${port}-log`,
  });
}
