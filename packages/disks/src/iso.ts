import { mkdir, mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { run, which } from './exec.js';

/** A file to put in an ISO: path inside the ISO (forward slashes) -> content. */
export type IsoFiles = Record<string, string | Buffer>;

/**
 * Writes an ISO 9660 image (Joliet + Rock Ridge) with the given volume id from a source directory,
 * like upstream (`-output F -follow-links -volid ID -joliet -rock DIR`; xorriso also gets `-partition_cyl_align on`).
 * Uses genisoimage, or xorriso in its genisoimage mode when genisoimage is missing.
 */
export async function makeIsoFromDir(output: string, volid: string, sourceDir: string): Promise<void> {
  await mkdir(path.dirname(output), { recursive: true });
  const tmp = `${output}.tmp`;
  await rm(tmp, { force: true });
  const common = ['-output', tmp, '-follow-links', '-volid', volid, '-joliet', '-rock'];
  const genisoimage = which('genisoimage');
  if (genisoimage) {
    await run(genisoimage, ['-quiet', ...common, sourceDir]);
  } else {
    const xorriso = which('xorriso');
    if (!xorriso) throw new Error('neither genisoimage nor xorriso is installed (needed to build ISO disks)');
    await run(xorriso, ['-as', 'genisoimage', '-quiet', ...common, '-partition_cyl_align', 'on', sourceDir]);
  }
  await rename(tmp, output);
}

/** Writes an ISO from in-memory files (cloud-init NoCloud / ConfigDrive). */
export async function makeIsoFromFiles(output: string, volid: string, files: IsoFiles): Promise<void> {
  await mkdir(path.dirname(output), { recursive: true });
  const dir = await mkdtemp(path.join(path.dirname(output), '.iso-src-'));
  try {
    for (const [name, content] of Object.entries(files)) {
      const rel = path.normalize(name);
      if (rel.startsWith('..') || path.isAbsolute(rel))
        throw new Error(`ISO file name ${JSON.stringify(name)} escapes the image`);
      const p = path.join(dir, rel);
      await mkdir(path.dirname(p), { recursive: true });
      await writeFile(p, content);
    }
    await makeIsoFromDir(output, volid, dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
