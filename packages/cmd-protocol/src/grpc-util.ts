import * as grpc from '@grpc/grpc-js';
import { chmod } from 'node:fs/promises';
import { prepareSocketPath, SOCKET_FILE_MODE, unixTarget } from './sockets.js';

/** Channel options for unix-socket clients: reconnect quickly after the peer restarts. */
export const UNIX_CHANNEL_OPTIONS: grpc.ChannelOptions = {
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 1000,
  'grpc.min_reconnect_backoff_ms': 100,
};

/**
 * Binds `server` to a unix socket: creates the directory 0700, removes a stale socket, binds and
 * makes the socket 0600 (the 0700 directory closes the window between bind and chmod).
 */
export async function bindUnix(server: grpc.Server, socketPath: string): Promise<void> {
  await prepareSocketPath(socketPath);
  await new Promise<void>((resolve, reject) => {
    server.bindAsync(unixTarget(socketPath), grpc.ServerCredentials.createInsecure(), (err) =>
      err ? reject(new Error(`cannot listen on ${socketPath}: ${err.message}`, { cause: err })) : resolve(),
    );
  });
  await chmod(socketPath, SOCKET_FILE_MODE);
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
