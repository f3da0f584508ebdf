// The yaml library, loaded on first use: parsing and writing manifests need it, the many importers of
// this package that only use types, defaults or validation (virt-launcher: about 3 MiB RSS) do not.
import { createRequire } from 'node:module';
import type * as Yaml from 'yaml';

let mod: typeof Yaml | undefined;

/** The `yaml` module (its CommonJS build, loaded synchronously the first time). */
export function yaml(): typeof Yaml {
  mod ??= createRequire(import.meta.url)('yaml') as typeof Yaml;
  return mod;
}
