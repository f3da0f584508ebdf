// Block volumes in the launcher Pod (issue 32). kubelet maps a `volumeMode: Block` claim into the compute container
// as a volumeDevice: the container runtime makes a device node at the renderer's devicePath (`/dev/<volume>`, the Pod
// layout's blockVolumeDevice) in the container's own /dev, with the node's device owner and mode (root 0600 for a
// loop device here; containerd's `device_ownership_from_security_context` is off by default). QEMU runs as the
// launcher's uid (107) and could not open it. As upstream's handler does in non-root mode (v1.9.0
// pkg/virt-handler/non-root.go: changeOwnershipOfBlockDevices), the handler gives the launcher's user that device
// node before the first sync, reaching it through the launcher process's root (/proc/<pid>/root, hostPID) as it
// does /dev/net/tun (pod-network.ts prepareTun).
//
// Differences from upstream: persistentVolumeClaim, dataVolume and ephemeral claim volumes are all looked at
// (upstream only persistentVolumeClaim ones; a Block DataVolume or the read-only backing device of an ephemeral
// volume needs the same), and the Pod's /dev decides: a volume the controller reported Block
// (status.volumeStatus[].persistentVolumeClaimInfo.volumeMode) must be a block device there, any other claim
// volume is changed only when its /dev/<volume> is a block device (ephemeral volumes are not in volumeStatus).
// Nothing is followed: every path component is checked with lstat, and a device node on the node's own /dev file
// system (a runtime that bind-mounts the node's device instead of making one) is refused, so nothing outside the Pod
// changes owner.
import { lchown, chmod, lstat, stat } from 'node:fs/promises';
import path from 'node:path';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';

/** A block device in the launcher Pod that cannot be given to the launcher's user; `field` names the VMI's volume. */
export class BlockDeviceError extends Error {
  constructor(
    readonly field: string,
    reason: string,
  ) {
    super(`${field}: ${reason}`);
    this.name = 'BlockDeviceError';
  }
}

/** A claim volume of the launcher Pod that may be a volumeDevice. */
export interface BlockVolumeCandidate {
  /** spec.volumes[i].name: the device is /dev/<volume> in the compute container */
  volume: string;
  /** the volume's field, e.g. `spec.volumes[1].persistentVolumeClaim` */
  field: string;
  /** virt-controller reported the claim as `volumeMode: Block` (status.volumeStatus) */
  reportedBlock: boolean;
}

/**
 * The claim volumes the launcher Pod maps (persistentVolumeClaim, dataVolume, ephemeral; hotplugged ones are not in
 * the Pod), each with whether virt-controller reported its claim as Block.
 */
export function blockVolumeCandidates(
  vmi: Pick<VirtualMachineInstance, 'spec' | 'status'>,
): BlockVolumeCandidate[] {
  const modes = new Map(
    (vmi.status?.volumeStatus ?? []).map((s) => [s.name, s.persistentVolumeClaimInfo?.volumeMode]),
  );
  const out: BlockVolumeCandidate[] = [];
  (vmi.spec.volumes ?? []).forEach((v, i) => {
    const at = `spec.volumes[${i}]`;
    let field: string | undefined;
    if (v.persistentVolumeClaim && !v.persistentVolumeClaim.hotpluggable)
      field = `${at}.persistentVolumeClaim`;
    else if (v.dataVolume && !v.dataVolume.hotpluggable) field = `${at}.dataVolume`;
    else if (v.ephemeral?.persistentVolumeClaim) field = `${at}.ephemeral.persistentVolumeClaim`;
    if (field) out.push({ volume: v.name, field, reportedBlock: modes.get(v.name) === 'Block' });
  });
  return out;
}

/** What prepareBlockDevices did with one device. */
export interface PreparedBlockDevice {
  volume: string;
  /** the device node as the handler reached it */
  path: string;
  /** its owner or mode was changed (false: it was already the launcher's) */
  changed: boolean;
}

export interface BlockDeviceOptions {
  /** the node's root as the handler sees it (default /proc/1/root: hostPID); its /dev is the node's */
  hostRoot?: string;
  /** the handler's own /dev (default /dev): a device node on it is not the Pod's either */
  ownDev?: string;
}

/**
 * Gives uid:gid (the launcher's) the block device node of every Block claim volume in the launcher Pod whose root
 * the handler reaches at `podRoot` (`/proc/<launcher pid>/root`), with owner read/write. Idempotent. Throws a
 * BlockDeviceError naming the volume when a volume reported Block has no block device in the Pod, or when a path
 * component is a symbolic link, or when the node is the node's own device node.
 */
export async function prepareBlockDevices(
  vmi: Pick<VirtualMachineInstance, 'spec' | 'status'>,
  podRoot: string,
  uid: number,
  gid = uid,
  o: BlockDeviceOptions = {},
): Promise<PreparedBlockDevice[]> {
  const out: PreparedBlockDevice[] = [];
  const candidates = blockVolumeCandidates(vmi);
  if (candidates.length === 0) return out;
  // the file systems of the node's /dev and the handler's: a device node on one of them is not the Pod's own
  const foreign = new Set<number>();
  for (const d of [path.join(o.hostRoot ?? '/proc/1/root', 'dev'), o.ownDev ?? '/dev']) {
    const st = await stat(d).catch(() => undefined);
    if (st) foreign.add(st.dev);
  }
  // no symbolic link on the way (the container's /dev is the runtime's tmpfs; the launcher cannot write there)
  const devDir = await lstat(path.join(podRoot, 'dev')).catch(() => undefined);
  for (const c of candidates) {
    if (c.volume === '' || c.volume === '.' || c.volume === '..' || c.volume.includes('/'))
      throw new BlockDeviceError(
        `${c.field}`,
        `volume name ${JSON.stringify(c.volume)} is not a device name`,
      );
    const rel = `/dev/${c.volume}`;
    const dev = path.join(podRoot, 'dev', c.volume);
    if (!devDir?.isDirectory()) {
      if (c.reportedBlock)
        throw new BlockDeviceError(c.field, `the launcher Pod has no /dev directory (${podRoot}/dev)`);
      continue;
    }
    let st;
    try {
      st = await lstat(dev);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      if (c.reportedBlock)
        throw new BlockDeviceError(
          c.field,
          `the claim is volumeMode Block but the launcher Pod has no device ${rel} (is it a volumeDevice of the compute container?)`,
        );
      continue; // a Filesystem claim: mounted, no device
    }
    if (!st.isBlockDevice()) {
      if (c.reportedBlock)
        throw new BlockDeviceError(
          c.field,
          `the claim is volumeMode Block but ${rel} in the launcher Pod is not a block device${st.isSymbolicLink() ? ' (a symbolic link)' : ''}`,
        );
      continue;
    }
    if (foreign.has(st.dev))
      throw new BlockDeviceError(
        c.field,
        `${rel} in the launcher Pod is a device node of the node's own /dev, not one made for the Pod: not changing its owner`,
      );
    let changed = false;
    if (st.uid !== uid || st.gid !== gid) {
      await lchown(dev, uid, gid);
      changed = true;
    }
    // the owner must read and write (runtimes copy the node's mode: 0600 or 0660 usually); lstat above said it is a
    // device node, not a link, so chmod changes the node itself
    if ((st.mode & 0o600) !== 0o600) {
      await chmod(dev, (st.mode & 0o7777) | 0o600);
      changed = true;
    }
    out.push({ volume: c.volume, path: dev, changed });
  }
  return out;
}
