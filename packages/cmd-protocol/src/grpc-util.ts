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
 * Binds `server` to a unix socket: creates the directory 0700 (an existing one keeps its mode), removes a
 * stale socket, binds and makes the socket 0600 (a 0700 directory closes the window between bind and chmod). With
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
  try {
    await chmod(socketPath, SOCKET_FILE_MODE);
    if (owner) await chown(socketPath, owner.uid, owner.gid);
  } catch (err) {
    server.forceShutdown(); // do not leave a listener behind with the wrong mode or owner
    throw err;
  }
}

/**
 * Counts the calls a server is running, so that stopping waits for exactly those (grpc-js's own
 * tryShutdown can miss a session that is closing at that moment and then waits for nothing).
 */
export class CallTracker {
  private inFlight = 0;
  private stopping = false;
  private waiters: Array<() => void> = [];

  /** Wraps every unary handler of `impl`: counted while running, refused (UNAVAILABLE) once stopping. */
  wrap<T extends grpc.UntypedServiceImplementation>(impl: T): T {
    const out: grpc.UntypedServiceImplementation = {};
    for (const [name, fn] of Object.entries(impl)) {
      const handler = fn as grpc.handleUnaryCall<unknown, unknown>;
      out[name] = ((call, cb) => {
        if (this.stopping) return cb({ code: grpc.status.UNAVAILABLE, details: 'server is shutting down' });
        this.inFlight++;
        let done = false;
        const finish: grpc.sendUnaryData<unknown> = (err, value) => {
          if (!done) {
            done = true;
            this.inFlight--;
            if (this.inFlight === 0) for (const w of this.waiters.splice(0)) w();
          }
          cb(err, value);
        };
        handler(call, finish);
      }) as grpc.handleUnaryCall<unknown, unknown>;
    }
    return out as T;
  }

  /** Refuses new calls and resolves when running calls are done (true) or after graceMs (false). */
  drain(graceMs: number): Promise<boolean> {
    this.stopping = true;
    if (this.inFlight === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== done);
        resolve(false);
      }, graceMs);
      const done = () => {
        clearTimeout(timer);
        resolve(true);
      };
      this.waiters.push(done);
    });
  }
}

/**
 * Lets running calls finish for up to graceMs (new ones are refused), closes the connections
 * gracefully so the last answers get out (bounded: tryShutdown can wait for a session that is
 * already gone), then closes whatever is left.
 */
export async function stopServer(server: grpc.Server, tracker: CallTracker, graceMs: number): Promise<void> {
  await tracker.drain(graceMs);
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, Math.min(500, Math.max(graceMs, 10)));
    server.tryShutdown(() => {
      clearTimeout(timer);
      resolve();
    });
  });
  server.forceShutdown();
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
