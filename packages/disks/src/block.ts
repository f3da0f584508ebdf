// Which claim volumes reach this launcher as block devices (issue 32). The renderer maps a `volumeMode: Block` claim
// into the compute container as a volumeDevice at the Pod layout's blockVolumeDevice (/dev/<volume>), a Filesystem
// one as a mount; the launcher tells them apart by what is there, as upstream's launcher does (v1.9.0
// pkg/virt-launcher/virtwrap/manager.go: isBlockDeviceVolume on /dev/<volume> for each persistentVolumeClaim,
// dataVolume and ephemeral volume), and gives the converter isBlockPVC / isBlockDV: a block disk
// (`<source dev=...>`) instead of a file disk on the claim's disk.img.
import { statSync } from 'node:fs';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import type { PodLayout } from '@kubevirt-ts/converter';

/** The converter context's block maps: persistentVolumeClaim and ephemeral volumes in isBlockPVC, dataVolume ones in isBlockDV. */
export interface BlockVolumes {
  isBlockPVC: Record<string, boolean>;
  isBlockDV: Record<string, boolean>;
}

/** Whether `p` is a block device (a link to one counts: the runtime may make the devicePath a link). */
export function isBlockDevice(p: string): boolean {
  try {
    return statSync(p).isBlockDevice();
  } catch {
    return false;
  }
}

/**
 * The VMI's claim volumes (not hotplugged: those are in the hotplug dir) that are block devices at
 * `paths.blockVolumeDevice(name)` in this Pod. Volumes whose device name the layout refuses are left out (the
 * converter reports them with their field).
 */
export function blockVolumesInPod(
  vmi: Pick<VirtualMachineInstance, 'spec'>,
  paths: Pick<PodLayout, 'blockVolumeDevice'>,
  isBlock: (p: string) => boolean = isBlockDevice,
): BlockVolumes {
  const out: BlockVolumes = { isBlockPVC: {}, isBlockDV: {} };
  for (const v of vmi.spec.volumes ?? []) {
    const map =
      (v.persistentVolumeClaim && !v.persistentVolumeClaim.hotpluggable) || v.ephemeral?.persistentVolumeClaim
        ? out.isBlockPVC
        : v.dataVolume && !v.dataVolume.hotpluggable
          ? out.isBlockDV
          : undefined;
    if (!map) continue;
    let dev: string;
    try {
      dev = paths.blockVolumeDevice(v.name);
    } catch {
      continue;
    }
    if (isBlock(dev)) map[v.name] = true;
  }
  return out;
}
