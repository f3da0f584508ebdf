import * as grpc from '@grpc/grpc-js';
import { chmod, chown } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { prepareSocketPath, SOCKET_FILE_MODE, unixTarget } from './sockets.js';

/** Channel options for unix-socket clients: reconnect quickly after the peer restarts. */
export const UNIX_CHANNEL_OPTIONS: grpc.ChannelOptions = {
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 1000,
  'grpc.min_reconnect_backoff_ms': 100,
};

/** Who owns a socket and its directory (so that a peer running as that user can connect). */
export interface SocketOwner {
  uid: number;
  gid: number;
}

/**
 * Binds `server` to a unix socket: creates the directory 0700, removes a stale socket, binds and
 * makes the socket 0600 (the 0700 directory closes the window between bind and chmod). With
 * `owner`, the directory and the socket are chown-ed to it.
 */
export async function bindUnix(server: grpc.Server, socketPath: string, owner?: SocketOwner): Promise<void> {
  await prepareSocketPath(socketPath);
  if (owner) await chown(dirname(resolve(socketPath)), owner.uid, owner.gid);
  await new Promise<void>((resolve, reject) => {
    server.bindAsync(unixTarget(socketPath), grpc.ServerCredentials.createInsecure(), (err) =>
      err ? reject(new Error(`cannot listen on ${socketPath}: ${err.message}`, { cause: err })) : resolve(),
    );
  });
  await chmod(socketPath, SOCKET_FILE_MODE);
  if (owner) await chown(socketPath, owner.uid, owner.gid);
}

/** Stops accepting calls, lets running calls finish for up to graceMs, then cancels the rest. */
export async function shutdownServerAndWait(server: grpc.Server, graceMs: number): Promise<void> {
  await new Promise<void>((resolve) => {
    let done = false;
    const timer = setTimeout(() => {
      if (done) return;
      done = true;
      server.forceShutdown();
      resolve();
    }, graceMs);
    timer.unref();
    server.tryShutdown(() => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve();
    });
  });
}

/** The message of anything thrown. */
export function errorMessage(err: unknown): string {
  if (err instanceof Error) return err.message || err.name;
  return String(err);
}

/** The last segment of a method path: "/kubevirt.cmd.v1.Cmd/Ping" -> "Ping". */
export function rpcName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}
