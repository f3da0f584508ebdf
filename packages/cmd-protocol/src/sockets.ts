/**
 * Where the handler <-> launcher sockets live. One module shared by the launcher, the handler
 * and tests, so both sides agree on names.
 *
 *   <sockets-dir>/launcher-init-sock        cmd + info server, up but not ready for commands
 *   <sockets-dir>/launcher-sock             the same server once the launcher is ready (renamed)
 *   <handler-dir>/domain-notify-pipe.sock   notify server of the handler
 *
 * Directories are created 0700, sockets are chmod-ed 0600 right after they are bound.
 */
import { chmod, lstat, mkdir, stat, unlink } from 'node:fs/promises';
import { dirname, isAbsolute, join, resolve } from 'node:path';

export const LAUNCHER_SOCKET_NAME = 'launcher-sock';
export const LAUNCHER_INIT_SOCKET_NAME = 'launcher-init-sock';
export const NOTIFY_SOCKET_NAME = 'domain-notify-pipe.sock';

/** Mode of the directories holding sockets. */
export const SOCKET_DIR_MODE = 0o700;
/** Mode of the socket files. */
export const SOCKET_FILE_MODE = 0o600;
/** sun_path is 108 bytes on Linux, including the terminating NUL. */
export const MAX_SOCKET_PATH_BYTES = 107;

/** The launcher's cmd socket once the launcher is ready. */
export function launcherSocketPath(dir: string): string {
  return join(dir, LAUNCHER_SOCKET_NAME);
}

/** The launcher's cmd socket while it starts up (renamed to {@link launcherSocketPath} when ready). */
export function launcherInitSocketPath(dir: string): string {
  return join(dir, LAUNCHER_INIT_SOCKET_NAME);
}

/** The handler's notify socket. */
export function notifySocketPath(dir: string): string {
  return join(dir, NOTIFY_SOCKET_NAME);
}

/** The grpc-js target for a unix socket path. */
export function unixTarget(socketPath: string): string {
  return `unix:${resolve(socketPath)}`;
}

/** Throws a clear error when a socket path cannot be bound or dialed (relative, too long, NUL). */
export function checkSocketPath(socketPath: string, what = 'socketPath'): void {
  if (typeof socketPath !== 'string' || socketPath === '')
    throw new Error(`${what}: must be a non-empty path`);
  if (socketPath.includes('\0')) throw new Error(`${what}: must not contain NUL bytes`);
  const abs = isAbsolute(socketPath) ? socketPath : resolve(socketPath);
  const len = Buffer.byteLength(abs);
  if (len > MAX_SOCKET_PATH_BYTES) {
    throw new Error(
      `${what}: ${abs} is ${len} bytes, unix socket paths are limited to ${MAX_SOCKET_PATH_BYTES}`,
    );
  }
}

/**
 * Creates `dir` (and parents) and makes it 0700 even when it already existed. A directory this process
 * does not own and so cannot chmod (EPERM) is used as it is: in a Pod the socket dir is a kubelet emptyDir
 * owned by root (mode 0777, visible only to the Pod's containers), and the sockets themselves are still made
 * 0600 right after bind, so other users cannot connect.
 */
export async function ensureSocketDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: SOCKET_DIR_MODE });
  try {
    await chmod(dir, SOCKET_DIR_MODE);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') throw err;
    const st = await stat(dir);
    if (st.uid === process.getuid?.()) throw err;
  }
}

/**
 * Prepares to bind `socketPath`: creates its directory 0700 and removes a stale socket left by a
 * previous process. Refuses to remove anything that is not a socket.
 */
export async function prepareSocketPath(socketPath: string): Promise<void> {
  checkSocketPath(socketPath);
  await ensureSocketDir(dirname(resolve(socketPath)));
  await removeSocketFile(socketPath);
}

/** Removes a socket file if it exists; refuses (throws) when the path is not a socket. */
export async function removeSocketFile(socketPath: string): Promise<void> {
  let st;
  try {
    st = await lstat(socketPath);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  if (!st.isSocket())
    throw new Error(`${socketPath}: exists and is not a unix socket, refusing to remove it`);
  try {
    await unlink(socketPath);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
}
