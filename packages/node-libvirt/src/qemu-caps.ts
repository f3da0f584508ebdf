// A host-wide cache of the QEMU capabilities a session libvirtd probes (startSessionLibvirtd's
// daemons): seeded into a new daemon's cache dir before it starts, saved back after its first domain.
import { chown, copyFile, mkdir, readdir, rename } from 'node:fs/promises';
import path from 'node:path';

/** Where a session libvirtd with this base dir (startSessionLibvirtd's baseDir) keeps QEMU's probed capabilities. */
export function qemuCapsDir(baseDir: string): string {
  return path.join(baseDir, 'cache', 'libvirt', 'qemu', 'cache', 'capabilities');
}

/**
 * A fresh libvirtd probes the QEMU binary (1-2 s) before its first domain. Seeding its cache with an
 * earlier probe skips that; libvirt itself checks the entry is still valid (QEMU binary, libvirt
 * version, kernel, microcode) and re-probes when not, so a stale entry costs nothing but the probe.
 * Call before the daemon starts; as root, the copies belong to `user` (the daemon's uid/gid).
 */
export async function seedQemuCaps(
  baseDir: string,
  cacheDir: string,
  user?: { uid: number; gid: number },
): Promise<void> {
  let files: string[];
  try {
    files = (await readdir(cacheDir)).filter((f) => f.endsWith('.xml'));
  } catch {
    return;
  }
  if (files.length === 0) return;
  const dst = qemuCapsDir(baseDir);
  await mkdir(dst, { recursive: true });
  for (const f of files) await copyFile(path.join(cacheDir, f), path.join(dst, f));
  if (user && process.getuid?.() === 0) {
    for (let d = dst; d !== baseDir && d.startsWith(baseDir); d = path.dirname(d))
      await chown(d, user.uid, user.gid);
    for (const f of files) await chown(path.join(dst, f), user.uid, user.gid);
  }
}

/** Keeps what the daemon under `baseDir` probed, for the next one (best effort: errors are ignored). */
export async function saveQemuCaps(baseDir: string, cacheDir: string): Promise<void> {
  try {
    const files = (await readdir(qemuCapsDir(baseDir))).filter((f) => f.endsWith('.xml'));
    if (files.length === 0) return;
    await mkdir(cacheDir, { recursive: true });
    for (const f of files) {
      const tmp = path.join(cacheDir, `.${f}.${process.pid}`);
      await copyFile(path.join(qemuCapsDir(baseDir), f), tmp);
      await rename(tmp, path.join(cacheDir, f));
    }
  } catch {
    /* only a cache */
  }
}
