/**
 * Opening a unix socket that a launcher Pod created (the serial console `virt-serial0`, the VNC
 * server `virt-vnc`), from the node agent, which runs as root.
 *
 * The files live in the Pod's private emptyDir (`/var/run/kubevirt-private/<vmi uid>/` in the Pod;
 * `<podsDir>/<pod uid>/volumes/kubernetes.io~empty-dir/private/<vmi uid>/` on the node). Everything
 * below `private/` is written by the launcher (uid 107), so a component there may be a symlink planted
 * to make root connect somewhere else. As upstream's safepath does, nothing there is followed: the
 * VMI's dir is opened with O_PATH|O_NOFOLLOW|O_DIRECTORY, the socket with O_PATH|O_NOFOLLOW relative to
 * it (through /proc/self/fd), checked to be a socket owned by the launcher's uid, and connected through
 * its own descriptor (`/proc/self/fd/N`), so what is checked is what is connected to. The path through
 * /proc/self/fd is also short, where the full path can exceed a unix socket address's 108 bytes.
 */
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import path from 'node:path';

/** O_PATH (Linux; not in Node's fs.constants) */
const O_PATH = 0o10000000;

export class LauncherSocketError extends Error {}

async function openNoFollow(p: string, what: string, dir: boolean): Promise<FileHandle> {
  try {
    return await open(p, O_PATH | constants.O_NOFOLLOW | (dir ? constants.O_DIRECTORY : 0));
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') throw new LauncherSocketError(`${what} does not exist`);
    if (code === 'ELOOP' || code === 'ENOTDIR')
      throw new LauncherSocketError(`${what} is a symlink or not a directory: refused`);
    throw new LauncherSocketError(`${what}: ${(e as Error).message}`);
  }
}

/**
 * Connects to `<privateDir>/<vmiUid>/<name>`: `privateDir` is trusted (kubelet's dir of the Pod's
 * private emptyDir), the rest is not. Resolves once connected; the returned socket is the caller's.
 */
export async function connectLauncherSocket(
  privateDir: string,
  vmiUid: string,
  name: string,
  launcherUid: number,
): Promise<Socket> {
  for (const c of [vmiUid, name])
    if (!c || c === '.' || c === '..' || c.includes('/') || c.includes('\0'))
      throw new LauncherSocketError(`${JSON.stringify(c)} is not a file name`);
  const shown = path.join(privateDir, vmiUid, name);
  const dir = await openNoFollow(path.join(privateDir, vmiUid), `the VMI's private dir of ${shown}`, true);
  try {
    const sock = await openNoFollow(`/proc/self/fd/${dir.fd}/${name}`, shown, false);
    try {
      const st = await sock.stat();
      if (!st.isSocket()) throw new LauncherSocketError(`${shown} is not a unix socket: refused`);
      if (st.uid !== launcherUid)
        throw new LauncherSocketError(
          `${shown} is owned by uid ${st.uid}, launchers run as uid ${launcherUid}: refused`,
        );
      return await new Promise<Socket>((resolve, reject) => {
        const s = connect(`/proc/self/fd/${sock.fd}`);
        s.once('connect', () => {
          s.removeListener('error', reject);
          resolve(s);
        });
        s.once('error', (e) => reject(new LauncherSocketError(`cannot connect to ${shown}: ${e.message}`)));
      });
    } finally {
      await sock.close();
    }
  } finally {
    await dir.close();
  }
}
