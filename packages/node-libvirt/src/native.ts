// Loads the compiled addon (build/Release/kvts_libvirt.node, built by `npm run build` via node-gyp).
import { createRequire } from 'node:module';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from './package-root.js';

export interface NativeDomRef {
  name: string;
  uuid: string;
}
export type NativeEventHandler = (type: string, data: Record<string, unknown>) => void;

/** The addon's class; methods mirror Connection/Domain. Domain methods take the UUID first. */
export interface NativeConnection {
  open(
    uri: string,
    readOnly: boolean,
    onEvent: NativeEventHandler,
    kaInterval: number,
    kaCount: number,
  ): Promise<void>;
  close(): Promise<number | undefined>;
  isAlive(): boolean;
  isOpen(): boolean;
  [method: string]: unknown;
}

interface Addon {
  NativeConnection: new () => NativeConnection;
}

function load(): Addon {
  const pkgRoot = packageRoot();
  const candidates = [
    process.env.KVTS_NODE_LIBVIRT_ADDON,
    path.join(pkgRoot, 'build', 'Release', 'kvts_libvirt.node'),
    path.join(pkgRoot, 'build', 'Debug', 'kvts_libvirt.node'),
  ].filter((p): p is string => !!p);
  const require = createRequire(import.meta.url);
  for (const p of candidates) {
    if (existsSync(p)) return require(p) as Addon;
  }
  throw new Error(
    `@kubevirt-ts/node-libvirt: native addon not built (looked for ${candidates.join(', ')}); ` +
      `run "npm run build" in ${pkgRoot} (needs libvirt-dev, pkg-config, a C++ compiler and npm_config_nodedir=/usr)`,
  );
}

let addon: Addon | undefined;
export function nativeAddon(): Addon {
  addon ??= load();
  return addon;
}
