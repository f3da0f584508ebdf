import { fromUpstreamDomain, type DomainModel } from './upstream/domain-json.js';
import * as grpc from '@grpc/grpc-js';
import type { VirtualMachineInstance } from './api.js';
import type { ExecResult } from './backend.js';
import { CmdInfoService } from './gen/kubevirt/cmd/info/info.js';
import {
  CmdService,
  VirtualMachineOptions,
  type DeepPartial,
  type Response,
  type VMI,
} from './gen/kubevirt/cmd/v1/cmd.js';
import {
  CmdClientError,
  DeadlineExceededError,
  LauncherUnreachableError,
  RpcFailedError,
  VersionMismatchError,
} from './errors.js';
import { errorMessage, rpcName, UNIX_CHANNEL_OPTIONS } from './grpc-util.js';
import { checkSocketPath, unixTarget } from './sockets.js';

/** The cmd protocol version this client speaks. */
export const CMD_VERSION = 1;

export interface CmdCallOptions {
  /** Deadline of this call in ms (default: the client's timeoutMs). */
  timeoutMs?: number;
  /**
   * Wait for the socket to accept a connection (until the deadline) instead of failing at once
   * with LauncherUnreachableError when nobody listens.
   */
  waitForReady?: boolean;
}

export interface CmdClientOptions {
  /** Default per-call deadline in ms (default 30000). */
  timeoutMs?: number;
}

export interface ConnectOptions extends CmdClientOptions {
  /** Deadline for dialing and the version check (default 10000 ms). */
  connectTimeoutMs?: number;
  /** Wait (up to connectTimeoutMs) for the socket to appear instead of failing at once. */
  waitForReady?: boolean;
}

type Def<Req, Res> = {
  path: string;
  requestSerialize: (v: Req) => Buffer;
  responseDeserialize: (b: Buffer) => Res;
};

/** VMI objects as sent: any JSON-serializable VirtualMachineInstance. */
export type VmiInput = VirtualMachineInstance;
export type VmOptionsInput = DeepPartial<VirtualMachineOptions>;

/**
 * Client of a launcher's cmd socket (handler side). One gRPC channel (one unix-socket connection)
 * is shared by every call, calls may run concurrently, and the channel reconnects by itself after
 * the launcher restarts. Every call has a deadline. Errors: LauncherUnreachableError,
 * VersionMismatchError, DeadlineExceededError, RpcFailedError (with the launcher's message).
 */
export class CmdClient {
  readonly socketPath: string;
  private readonly client: grpc.Client;
  private readonly timeoutMs: number;
  private closed = false;

  /** Creates a client without dialing; use {@link CmdClient.connect} to dial and check the version. */
  constructor(socketPath: string, opts: CmdClientOptions = {}) {
    checkSocketPath(socketPath);
    this.socketPath = socketPath;
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.client = new grpc.Client(
      unixTarget(socketPath),
      grpc.credentials.createInsecure(),
      UNIX_CHANNEL_OPTIONS,
    );
  }

  /** Dials `socketPath` and checks that the launcher speaks cmd version 1. */
  static async connect(socketPath: string, opts: ConnectOptions = {}): Promise<CmdClient> {
    const client = new CmdClient(socketPath, opts);
    try {
      await client.checkVersion({
        timeoutMs: opts.connectTimeoutMs ?? 10_000,
        waitForReady: opts.waitForReady,
      });
      return client;
    } catch (err) {
      client.close();
      throw err;
    }
  }

  /** Closes the channel; later calls fail. */
  close(): void {
    this.closed = true;
    this.client.close();
  }

  /** CmdInfo.Info: the cmd versions the launcher supports. */
  async info(opts?: CmdCallOptions): Promise<number[]> {
    const res = await this.unary(CmdInfoService.info, {}, opts);
    return res.supportedCmdVersions;
  }

  /** Throws VersionMismatchError unless the launcher lists version 1. */
  async checkVersion(opts?: CmdCallOptions): Promise<void> {
    const versions = await this.info(opts);
    if (!versions.includes(CMD_VERSION))
      throw new VersionMismatchError(this.socketPath, versions, CMD_VERSION);
  }

  syncVMI(vmi: VmiInput, options?: VmOptionsInput, opts?: CmdCallOptions): Promise<void> {
    return this.vmiCall(
      CmdService.syncVirtualMachine,
      { vmi: encodeVmi(vmi), options: vmOptions(options) },
      opts,
    );
  }
  pauseVMI(vmi: VmiInput, opts?: CmdCallOptions): Promise<void> {
    return this.vmiCall(CmdService.pauseVirtualMachine, { vmi: encodeVmi(vmi), options: undefined }, opts);
  }
  unpauseVMI(vmi: VmiInput, opts?: CmdCallOptions): Promise<void> {
    return this.vmiCall(CmdService.unpauseVirtualMachine, { vmi: encodeVmi(vmi), options: undefined }, opts);
  }
  freezeVMI(vmi: VmiInput, unfreezeTimeoutSeconds: number, opts?: CmdCallOptions): Promise<void> {
    return this.vmiCall(
      CmdService.freezeVirtualMachine,
      { vmi: encodeVmi(vmi), unfreezeTimeoutSeconds },
      opts,
    );
  }
  unfreezeVMI(vmi: VmiInput, opts?: CmdCallOptions): Promise<void> {
    return this.vmiCall(CmdService.unfreezeVirtualMachine, { vmi: encodeVmi(vmi), options: undefined }, opts);
  }
  softRebootVMI(vmi: VmiInput, opts?: CmdCallOptions): Promise<void> {
    return this.vmiCall(
      CmdService.softRebootVirtualMachine,
      { vmi: encodeVmi(vmi), options: undefined },
      opts,
    );
  }
  shutdownVMI(vmi: VmiInput, opts?: CmdCallOptions): Promise<void> {
    return this.vmiCall(CmdService.shutdownVirtualMachine, { vmi: encodeVmi(vmi), options: undefined }, opts);
  }
  killVMI(vmi: VmiInput, opts?: CmdCallOptions): Promise<void> {
    return this.vmiCall(CmdService.killVirtualMachine, { vmi: encodeVmi(vmi), options: undefined }, opts);
  }
  deleteVMI(vmi: VmiInput, opts?: CmdCallOptions): Promise<void> {
    return this.vmiCall(CmdService.deleteVirtualMachine, { vmi: encodeVmi(vmi), options: undefined }, opts);
  }
  /** migrationOptions is sent as JSON (MigrationRequest.options). */
  migrateVMI(vmi: VmiInput, migrationOptions: unknown, opts?: CmdCallOptions): Promise<void> {
    const options =
      migrationOptions === undefined ? Buffer.alloc(0) : Buffer.from(JSON.stringify(migrationOptions));
    return this.vmiCall(CmdService.migrateVirtualMachine, { vmi: encodeVmi(vmi), options }, opts);
  }
  /** SyncMigrationTarget. */
  prepareMigrationTarget(vmi: VmiInput, options?: VmOptionsInput, opts?: CmdCallOptions): Promise<void> {
    return this.vmiCall(
      CmdService.syncMigrationTarget,
      { vmi: encodeVmi(vmi), options: vmOptions(options) },
      opts,
    );
  }
  /** CancelVirtualMachineMigration. */
  cancelMigration(vmi: VmiInput, opts?: CmdCallOptions): Promise<void> {
    return this.vmiCall(
      CmdService.cancelVirtualMachineMigration,
      { vmi: encodeVmi(vmi), options: undefined },
      opts,
    );
  }
  signalTargetPodCleanup(vmi: VmiInput, opts?: CmdCallOptions): Promise<void> {
    return this.vmiCall(CmdService.signalTargetPodCleanup, { vmi: encodeVmi(vmi), options: undefined }, opts);
  }
  /** FinalizeVirtualMachineMigration. */
  finalizeMigration(vmi: VmiInput, options?: VmOptionsInput, opts?: CmdCallOptions): Promise<void> {
    const req = { vmi: encodeVmi(vmi), options: vmOptions(options) };
    return this.vmiCall(CmdService.finalizeVirtualMachineMigration, req, opts);
  }
  hotplugHostDevices(vmi: VmiInput, opts?: CmdCallOptions): Promise<void> {
    return this.vmiCall(CmdService.hotplugHostDevices, { vmi: encodeVmi(vmi), options: undefined }, opts);
  }
  /** VirtualMachineMemoryDump. */
  memoryDump(vmi: VmiInput, dumpPath: string, opts?: CmdCallOptions): Promise<void> {
    return this.vmiCall(CmdService.virtualMachineMemoryDump, { vmi: encodeVmi(vmi), dumpPath }, opts);
  }
  /** SyncVirtualMachineCPUs. */
  updateVCPUs(vmi: VmiInput, options?: VmOptionsInput, opts?: CmdCallOptions): Promise<void> {
    return this.vmiCall(
      CmdService.syncVirtualMachineCpUs,
      { vmi: encodeVmi(vmi), options: vmOptions(options) },
      opts,
    );
  }
  /** SyncVirtualMachineMemory. */
  updateGuestMemory(vmi: VmiInput, options?: VmOptionsInput, opts?: CmdCallOptions): Promise<void> {
    const req = { vmi: encodeVmi(vmi), options: vmOptions(options) };
    return this.vmiCall(CmdService.syncVirtualMachineMemory, req, opts);
  }

  /** Ping: resolves when the launcher answers success. */
  async ping(opts?: CmdCallOptions): Promise<void> {
    const res = await this.unary(CmdService.ping, {}, opts);
    this.check('Ping', res);
  }

  /** The launcher's domain (upstream's api.Domain JSON, decoded), or undefined when it has none. */
  async getDomain(opts?: CmdCallOptions): Promise<DomainModel | undefined> {
    const res = await this.unary(CmdService.getDomain, {}, opts);
    this.check('GetDomain', res.response);
    const json = this.parse('GetDomain', 'domain', res.domain);
    if (json === undefined) return undefined;
    try {
      return fromUpstreamDomain(json);
    } catch (err) {
      throw new RpcFailedError(this.socketPath, 'GetDomain', `domain: ${errorMessage(err)}`);
    }
  }
  /** Domain stats (parsed JSON), or undefined when there is no domain. */
  async getDomainStats(opts?: CmdCallOptions): Promise<unknown | undefined> {
    const res = await this.unary(CmdService.getDomainStats, {}, opts);
    this.check('GetDomainStats', res.response);
    return this.parse('GetDomainStats', 'domainStats', res.domainStats);
  }
  async getGuestInfo(opts?: CmdCallOptions): Promise<unknown | undefined> {
    const res = await this.unary(CmdService.getGuestInfo, {}, opts);
    this.check('GetGuestInfo', res.response);
    return this.parse('GetGuestInfo', 'guestInfoResponse', res.guestInfoResponse);
  }
  async getUsers(opts?: CmdCallOptions): Promise<unknown | undefined> {
    const res = await this.unary(CmdService.getUsers, {}, opts);
    this.check('GetUsers', res.response);
    return this.parse('GetUsers', 'guestUserListResponse', res.guestUserListResponse);
  }
  async getFilesystems(opts?: CmdCallOptions): Promise<unknown | undefined> {
    const res = await this.unary(CmdService.getFilesystems, {}, opts);
    this.check('GetFilesystems', res.response);
    return this.parse('GetFilesystems', 'guestFilesystemsResponse', res.guestFilesystemsResponse);
  }
  /** Runs a command in the guest (through the guest agent); a non-zero exit code is not an error. */
  async exec(
    domainName: string,
    command: string,
    args: string[],
    timeoutSeconds: number,
    opts?: CmdCallOptions,
  ): Promise<ExecResult> {
    const req = { domainName, Command: command, Args: args, timeoutSeconds };
    const res = await this.unary(CmdService.exec, req, opts);
    this.check('Exec', res.response);
    return { exitCode: res.exitCode, stdout: res.stdOut };
  }
  async guestPing(domainName: string, timeoutSeconds: number, opts?: CmdCallOptions): Promise<void> {
    const res = await this.unary(CmdService.guestPing, { domainName, timeoutSeconds }, opts);
    this.check('GuestPing', res.response);
  }
  async getQemuVersion(opts?: CmdCallOptions): Promise<string> {
    const res = await this.unary(CmdService.getQemuVersion, {}, opts);
    this.check('GetQemuVersion', res.response);
    return res.version;
  }

  private async vmiCall<Req extends { vmi: VMI | undefined }>(
    def: Def<Req, Response>,
    req: Req,
    opts?: CmdCallOptions,
  ): Promise<void> {
    this.check(rpcName(def.path), await this.unary(def, req, opts));
  }

  private check(rpc: string, res: Response | undefined): void {
    if (!res) throw new RpcFailedError(this.socketPath, rpc, 'launcher sent no response status');
    if (!res.success) throw new RpcFailedError(this.socketPath, rpc, res.message || '(no message)');
  }

  private parse(rpc: string, field: string, json: string): unknown | undefined {
    if (json === '') return undefined;
    try {
      return JSON.parse(json);
    } catch (err) {
      throw new RpcFailedError(this.socketPath, rpc, `${field}: not valid JSON: ${errorMessage(err)}`);
    }
  }

  /** One unary call with a deadline, gRPC errors mapped to typed errors. */
  private unary<Req, Res>(def: Def<Req, Res>, req: Req, opts: CmdCallOptions = {}): Promise<Res> {
    const rpc = rpcName(def.path);
    if (this.closed)
      return Promise.reject(new CmdClientError(`${rpc}: client is closed`, this.socketPath, rpc));
    const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    const callOpts: grpc.CallOptions = { deadline: Date.now() + timeoutMs };
    const metadata = new grpc.Metadata();
    if (opts.waitForReady) metadata.setOptions({ waitForReady: true });
    return new Promise<Res>((resolve, reject) => {
      this.client.makeUnaryRequest(
        def.path,
        def.requestSerialize,
        def.responseDeserialize,
        req,
        metadata,
        callOpts,
        (err: grpc.ServiceError | null, res?: Res) => {
          if (err) return reject(this.mapError(rpc, err, timeoutMs));
          if (res === undefined) return reject(new RpcFailedError(this.socketPath, rpc, 'empty answer'));
          resolve(res);
        },
      );
    });
  }

  private mapError(rpc: string, err: grpc.ServiceError, timeoutMs: number): Error {
    switch (err.code) {
      // CANCELLED: we never cancel calls ourselves, so the launcher closed the connection mid-call.
      case grpc.status.CANCELLED:
      case grpc.status.UNAVAILABLE:
        return new LauncherUnreachableError(
          // grpc-js ends some details with an empty "Resolution note:"
          `${rpc}: launcher at ${this.socketPath} is unreachable: ${err.details.replace(/\s*Resolution note:\s*$/, '')}`,
          this.socketPath,
          rpc,
          err.code,
          { cause: err },
        );
      case grpc.status.DEADLINE_EXCEEDED:
        return new DeadlineExceededError(this.socketPath, rpc, timeoutMs, { cause: err });
      default:
        return new RpcFailedError(
          this.socketPath,
          rpc,
          `${grpc.status[err.code] ?? err.code}: ${err.details}`,
          err.code,
          {
            cause: err,
          },
        );
    }
  }
}

function encodeVmi(vmi: VmiInput): VMI {
  return { vmiJson: Buffer.from(JSON.stringify(vmi)) };
}

function vmOptions(options: VmOptionsInput | undefined): VirtualMachineOptions | undefined {
  return options === undefined ? undefined : VirtualMachineOptions.fromPartial(options);
}
