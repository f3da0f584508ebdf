import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

const MANIFEST = /\.(ya?ml|json)$/;

/**
 * The manifest files (`.yaml`, `.yml`, `.json`) under directory `dir`, at any depth, sorted by path; hidden
 * entries (`.git`, ...) are left out. Paths are `dir` joined with the file's path inside it.
 */
export function manifestFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      if (name.startsWith('.')) continue;
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else if (MANIFEST.test(name)) out.push(p);
    }
  };
  walk(dir);
  return out;
}

/** Whether `path` names a directory (false when it does not exist). */
export function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
