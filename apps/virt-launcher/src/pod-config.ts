import path from 'node:path';
import { LAUNCHER_GID, LAUNCHER_UID } from '@kubevirt-ts/converter';
import { ExitCode, LauncherError } from './errors.js';
import type { LauncherFlags } from './flags.js';
import { createLayout } from './layout.js';

/** In-Pod launcher config from the flags: the converter's layout decides where files live. */
export function podConfig(f: LauncherFlags) {
  const root = f.privateDir.endsWith('/var/run/kubevirt-private')
    ? f.privateDir.slice(0, -'/var/run/kubevirt-private'.length)
    : '';
  const layout = createLayout(root);
  const mismatch: string[] = [];
  if (f.containerDiskDir !== path.resolve(layout.containerDisksDir || '/'))
    mismatch.push(`--container-disk-dir must be ${layout.containerDisksDir}`);
  if (f.ephemeralDiskDir !== path.resolve(layout.ephemeralDisksDir || '/'))
    mismatch.push(`--ephemeral-disk-dir must be ${layout.ephemeralDisksDir}`);
  if (mismatch.length > 0) {
    throw new LauncherError(
      `${mismatch.join('; ')} (the pod layout the domain is rendered with; use --root to move all of it)`,
      ExitCode.USAGE,
      'flags',
    );
  }
  const isRoot = process.getuid?.() === 0;
  return {
    name: f.name,
    namespace: f.namespace,
    uid: f.uid,
    gracePeriodSeconds: f.gracePeriodSeconds,
    qemuTimeoutMs: f.qemuTimeoutMs,
    allowEmulation: f.allowEmulation,
    root,
    socketsDir: path.join(f.kubevirtShareDir, 'sockets'),
    notifyDir: f.kubevirtShareDir,
    shareDir: f.kubevirtShareDir,
    podNetworkDir: f.kubevirtShareDir,
    libvirtBaseDir: f.libvirtRunDir,
    libvirtUser:
      f.libvirtUid !== undefined
        ? { uid: f.libvirtUid, gid: f.libvirtGid ?? f.libvirtUid }
        : isRoot
          ? { uid: LAUNCHER_UID, gid: LAUNCHER_GID }
          : undefined,
    keepAfterFailure: f.keepAfterFailure,
    // the sizing of disk.img on filesystem claims (the KubeVirt CR's developerConfiguration, through the renderer)
    claimImage: {
      ...(f.lessPVCSpaceToleration !== undefined ? { lessPVCSpaceToleration: f.lessPVCSpaceToleration } : {}),
      ...(f.minimumReservePVCBytes !== undefined ? { minimumReservePVCBytes: f.minimumReservePVCBytes } : {}),
    },
    // a node-wide cache dir can be mounted into Pods; off unless set
    capsCacheDir: process.env.KVTS_QEMU_CAPS_CACHE || undefined,
    // the Pod's name (the renderer's downward-API POD_NAME): SignalTargetPodCleanup is for the migration's target Pod
    podName: process.env.POD_NAME || undefined,
  };
}
