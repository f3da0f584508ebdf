// Where phase 1 leaves its PodNetworkConfig for the launcher: a file per pod-network interface in the
// launcher Pod's share dir (/var/run/kubevirt in the Pod, an emptyDir the node agent reaches through
// kubelet's pod dir, as it does for the notify socket). The Pod can write in that dir, so the writer
// never follows what it finds there and the reader (the launcher) checks what it reads.
import { randomBytes } from 'node:crypto';
import { closeSync, constants, openSync, renameSync, rmSync, writeSync } from 'node:fs';
import path from 'node:path';
import type { PodNetworkConfig } from './phase1.js';

const NAME_RE = /^[A-Za-z0-9]([A-Za-z0-9._-]{0,62})$/;

/** `<dir>/pod-network-<interface>.json`; an interface name that is not one file name component is refused. */
export function podNetworkConfigFile(dir: string, interfaceName: string): string {
  if (!NAME_RE.test(interfaceName))
    throw new Error(`interface name ${JSON.stringify(interfaceName)} cannot be used in a file name`);
  return path.join(dir, `pod-network-${interfaceName}.json`);
}

/**
 * Writes `config` for the launcher into `dir` (a directory the Pod can write in): a new file created
 * exclusively (O_EXCL|O_NOFOLLOW: never through a link the Pod planted), mode 0644, then renamed over
 * the final name (rename replaces a symlink there instead of following it).
 */
export function writePodNetworkConfig(dir: string, interfaceName: string, config: PodNetworkConfig): string {
  const file = podNetworkConfigFile(dir, interfaceName);
  const tmp = path.join(dir, `.pod-network-${randomBytes(8).toString('hex')}.tmp`);
  const fd = openSync(
    tmp,
    constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW,
    0o644,
  );
  try {
    writeSync(fd, `${JSON.stringify(config)}\n`);
  } finally {
    closeSync(fd);
  }
  try {
    renameSync(tmp, file);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
  return file;
}
