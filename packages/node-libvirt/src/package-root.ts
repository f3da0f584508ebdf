// This package's root directory, where its build/ (the addon, the native monitor) is. Beside this module
// (dist/..) when it runs from the package; an app that bundles its JavaScript (virt-launcher's
// dist/main.js, esbuild) runs this code from its own directory, so the package is then found as Node
// resolves it from there (the app depends on it, so it is installed beside it).
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const NAME = '@kubevirt-ts/node-libvirt';

function isThisPackage(dir: string): boolean {
  try {
    return (
      (JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string }).name === NAME
    );
  } catch {
    return false;
  }
}

let root: string | undefined;

/** The root directory of @kubevirt-ts/node-libvirt (computed once). */
export function packageRoot(): string {
  if (root !== undefined) return root;
  const beside = path.resolve(import.meta.dirname, '..');
  root = isThisPackage(beside)
    ? beside
    : path.dirname(createRequire(import.meta.url).resolve(`${NAME}/package.json`));
  return root;
}
