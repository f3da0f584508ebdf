/** Errors of {@link CmdClient}. All extend CmdClientError, which carries the socket and the rpc. */
export class CmdClientError extends Error {
  constructor(
    message: string,
    /** The launcher socket the client talks to. */
    readonly socketPath: string,
    /** The rpc name as on the wire (e.g. "SyncVirtualMachine"), or "Info" for the version check. */
    readonly rpc: string,
    /** The gRPC status code when the error came from the transport. */
    readonly grpcCode?: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The launcher socket cannot be reached (no socket, nobody listening, connection lost). */
export class LauncherUnreachableError extends CmdClientError {}

/** The launcher does not list cmd protocol version 1 in CmdInfo. */
export class VersionMismatchError extends CmdClientError {
  constructor(
    socketPath: string,
    readonly supportedVersions: number[],
    readonly wantedVersion: number,
  ) {
    super(
      `launcher at ${socketPath} supports cmd versions [${supportedVersions.join(', ')}], need ${wantedVersion}`,
      socketPath,
      'Info',
    );
  }
}

/** The call did not finish before its deadline. */
export class DeadlineExceededError extends CmdClientError {
  constructor(
    socketPath: string,
    rpc: string,
    readonly timeoutMs: number,
    options?: ErrorOptions,
  ) {
    super(
      `${rpc}: no answer from launcher at ${socketPath} within ${timeoutMs} ms`,
      socketPath,
      rpc,
      4,
      options,
    );
  }
}

/**
 * The launcher answered but the command failed: either Response{success:false} (then
 * `launcherMessage` is the launcher's message) or a gRPC error status other than unreachable/deadline.
 */
export class RpcFailedError extends CmdClientError {
  constructor(
    socketPath: string,
    rpc: string,
    readonly launcherMessage: string,
    grpcCode?: number,
    options?: ErrorOptions,
  ) {
    super(`${rpc} failed: ${launcherMessage}`, socketPath, rpc, grpcCode, options);
  }
}
