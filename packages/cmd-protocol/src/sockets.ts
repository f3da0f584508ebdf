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
import { lstat, mkdir, stat, unlink } from 'node:fs/promises';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { MAX_SOCKET_PATH_BYTES } from '@kubevirt-ts/converter';

export const LAUNCHER_SOCKET_NAME = 'launcher-sock';
export const LAUNCHER_INIT_SOCKET_NAME = 'launcher-init-sock';
export const NOTIFY_SOCKET_NAME = 'domain-notify-pipe.sock';

/** Mode of the directories holding sockets. */
export const SOCKET_DIR_MODE = 0o700;
/** Mode of the socket files. */
export const SOCKET_FILE_MODE = 0o600;
/** sun_path is 108 bytes on Linux, including the terminating NUL (the converter's Pod layout owns the number). */
export { MAX_SOCKET_PATH_BYTES };

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
 * Creates `dir` (and parents) 0700. A directory that already exists is used as it is, its mode never
 * changed: it is not this process's to change (e.g. `--socket-dir /tmp/x` given by a user, or in a Pod a
 * kubelet emptyDir owned by root, mode 0777, visible only to the Pod's containers). The sockets themselves
 * are made 0600 right after bind, so other users cannot connect; in a dir others can enter there is a
 * short window between bind and that chmod, which only a dir of our own closes. Returns whether `dir` was
 * created here.
 */
export async function ensureSocketDir(dir: string): Promise<boolean> {
  const created = await mkdir(dir, { recursive: true, mode: SOCKET_DIR_MODE });
  if (created === undefined) {
    if (!(await stat(dir)).isDirectory()) throw new Error(`${dir}: not a directory`);
    return false;
  }
  // mkdir's mode went through the umask, which only removes bits: the new dir is at most 0700
  return true;
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

/**
 * MigrationRequest.options exactly as upstream's virt-handler sends it: `json.Marshal` of
 * `cmdclient.MigrationOptions` (pkg/virt-handler/cmd-client, KubeVirt v1.1.0). The struct has no
 * json tags, so the keys are the Go field names and every field is always present.
 */
export interface UpstreamMigrationOptions {
  /** resource.Quantity: bytes per second as a quantity string ("0" = unlimited, "64Mi") */
  Bandwidth: string;
  /** int64 seconds: abort when the remaining data has not shrunk for this long (0 = never) */
  ProgressTimeout: number;
  /** int64 seconds per GiB of guest memory: abort when the migration takes longer (0 = never) */
  CompletionTimeoutPerGiB: number;
  /** bool: VIR_MIGRATE_UNSAFE */
  UnsafeMigration: boolean;
  /** bool: VIR_MIGRATE_AUTO_CONVERGE */
  AllowAutoConverge: boolean;
  /** bool: VIR_MIGRATE_POSTCOPY */
  AllowPostCopy: boolean;
  /** *uint: parallel migration connections (null = off) */
  ParallelMigrationThreads: number | null;
}

/**
 * Upstream's migration proxy socket for a key (`<shareDir>/migrationproxy/<key>-source.sock`):
 * key `<uid>` carries the libvirt connection, `<uid>-49152` QEMU's migration stream, `<uid>-49153` the
 * disks of a block migration.
 */
export function migrationProxySocketPath(shareDir: string, key: string): string {
  return `${shareDir.replace(/\/+$/, '')}/migrationproxy/${key}-source.sock`;
}

/** Upstream's LibvirtDirectMigrationPort: the key suffix of QEMU's migration stream socket. */
export const LIBVIRT_DIRECT_MIGRATION_PORT = 49152;

/**
 * Upstream's LibvirtBlockMigrationPort: the key suffix of the disks' stream socket in a block migration
 * (status.migrationMethod BlockMigration): the target QEMU's NBD server listens there, the source QEMU
 * copies the node-local disks to it (libvirt's disks_uri).
 */
export const LIBVIRT_BLOCK_MIGRATION_PORT = 49153;

/**
 * The launcher ports a migration needs (upstream's GetMigrationPortsList): QEMU's migration stream, and with a
 * block migration the disks' stream too. The libvirt connection (key without port) is always there besides.
 */
export function migrationPortsList(blockMigration: boolean): number[] {
  return blockMigration
    ? [LIBVIRT_DIRECT_MIGRATION_PORT, LIBVIRT_BLOCK_MIGRATION_PORT]
    : [LIBVIRT_DIRECT_MIGRATION_PORT];
}

/** `<uid>` or `<uid>-<port>` (upstream's ConstructProxyKey; port 0: no suffix). */
export function migrationProxyKey(uid: string, port = 0): string {
  return port ? `${uid}-${port}` : uid;
}

/**
 * Where upstream's launcher migrates to: its libvirtd connects to the handler's proxy socket for
 * the VMI (`qemu+unix:///session?socket=<shareDir>/migrationproxy/<uid>-source.sock`, a session
 * daemon: our launcher is unprivileged), QEMU streams to `unix://<shareDir>/migrationproxy/<uid>-49152-source.sock`
 * and, in a block migration, copies the disks to `unix://<shareDir>/migrationproxy/<uid>-49153-source.sock`
 * (disksURI; the target QEMU's NBD server listens at the same path in the target Pod).
 */
export function upstreamMigrationTarget(
  shareDir: string,
  uid: string,
): { targetURI: string; migrationURI: string; disksURI: string } {
  if (!uid) throw new Error('metadata.uid: required to find the migration proxy sockets');
  const sock = (port: number) => migrationProxySocketPath(shareDir, migrationProxyKey(uid, port));
  return {
    targetURI: `qemu+unix:///session?socket=${sock(0)}`,
    migrationURI: `unix://${sock(LIBVIRT_DIRECT_MIGRATION_PORT)}`,
    disksURI: `unix://${sock(LIBVIRT_BLOCK_MIGRATION_PORT)}`,
  };
}
