import { toUpstreamGuestList } from './upstream/guest-json.js';
import { toUpstreamDomainStats } from './upstream/stats-json.js';
import { toUpstreamDomain } from './upstream/domain-json.js';
import * as grpc from '@grpc/grpc-js';
import { rename } from 'node:fs/promises';
import { validateVirtualMachineInstance, type FieldError, type VirtualMachineInstance } from './api.js';
import { SUPPORTED_CMD_VERSIONS, type CmdBackend } from './backend.js';
import { CmdInfoService, type CmdInfoServer } from './gen/kubevirt/cmd/info/info.js';
import {
  CmdService,
  type CmdServer as GenCmdServer,
  type Response,
  type VMI,
  type VMIRequest,
  type VirtualMachineOptions,
} from './gen/kubevirt/cmd/v1/cmd.js';
import { bindUnix, CallTracker, errorMessage, stopServer, type SocketOwner } from './grpc-util.js';
import { createLogger, type Logger } from '@kubevirt-ts/log';
import {
  checkSocketPath,
  launcherInitSocketPath,
  launcherSocketPath,
  prepareSocketPath,
  removeSocketFile,
} from './sockets.js';

export interface CmdServerOptions {
  /** Directory of launcher-init-sock / launcher-sock (created 0700). */
  socketsDir: string;
  /** What the rpcs call; missing methods answer "<Rpc> is not supported". */
  backend: CmdBackend;
  logger?: Logger;
  /** VMI validation (default: @kubevirt-ts/api validateVirtualMachineInstance). */
  validateVmi?: (obj: unknown) => FieldError[];
  /** chown the sockets dir and socket to this user (the launcher usually runs as that user already). */
  socketOwner?: SocketOwner;
  /** CmdInfo answer (default [1]); only tests change it. */
  supportedVersions?: readonly number[];
}

type Vmi = VirtualMachineInstance;
type DecodedVmi = { ok: true; vmi: Vmi } | { ok: false; message: string };

/** Longest Response.message built from validation errors (all paths are listed up to this size). */
const MAX_VALIDATION_MESSAGE = 16 * 1024;

/**
 * Serves kubevirt.cmd.v1.Cmd and kubevirt.cmd.info.CmdInfo on the launcher socket. `start()` listens
 * on `<socketsDir>/launcher-init-sock`; `ready()` renames it to `<socketsDir>/launcher-sock`. Each rpc
 * decodes and validates the VMI, then calls the backend; failures become Response{success:false}.
 */
export class CmdServer {
  readonly socketsDir: string;
  private readonly backend: CmdBackend;
  private readonly log: Logger;
  private readonly validate: (obj: unknown) => FieldError[];
  private readonly versions: readonly number[];
  private readonly owner: SocketOwner | undefined;
  private server: grpc.Server | undefined;
  private tracker = new CallTracker();
  private current: string | undefined;

  constructor(opts: CmdServerOptions) {
    this.socketsDir = opts.socketsDir;
    this.backend = opts.backend;
    this.log = opts.logger ?? createLogger('cmd-server');
    this.validate = opts.validateVmi ?? validateVirtualMachineInstance;
    this.versions = opts.supportedVersions ?? SUPPORTED_CMD_VERSIONS;
    this.owner = opts.socketOwner;
    checkSocketPath(launcherInitSocketPath(this.socketsDir), 'socketsDir');
  }

  /** The socket currently served (init or final), or undefined when stopped. */
  get socketPath(): string | undefined {
    return this.current;
  }

  get isReady(): boolean {
    return this.current === launcherSocketPath(this.socketsDir);
  }

  /** Listens on launcher-init-sock (removing stale launcher-init-sock / launcher-sock first). */
  async start(): Promise<void> {
    if (this.server) throw new Error('CmdServer: already started');
    const server = new grpc.Server();
    const tracker = new CallTracker();
    server.addService(CmdService, tracker.wrap(this.cmdImpl()));
    const info: CmdInfoServer = {
      info: (_call, cb) => cb(null, { supportedCmdVersions: [...this.versions] }),
    };
    server.addService(CmdInfoService, tracker.wrap(info));
    const initPath = launcherInitSocketPath(this.socketsDir);
    await prepareSocketPath(launcherSocketPath(this.socketsDir));
    await bindUnix(server, initPath, this.owner);
    this.server = server;
    this.tracker = tracker;
    this.current = initPath;
    this.log.info('cmd server listening', { socket: initPath });
  }

  /** Marks the launcher ready: renames launcher-init-sock to launcher-sock (same listener). */
  async ready(): Promise<void> {
    if (!this.server || !this.current) throw new Error('CmdServer: ready() before start()');
    const finalPath = launcherSocketPath(this.socketsDir);
    if (this.current === finalPath) return;
    await rename(this.current, finalPath);
    this.current = finalPath;
    this.log.info('cmd server ready', { socket: finalPath });
  }

  /** Stops serving (running calls get up to graceMs) and removes the socket file. */
  async stop(graceMs = 5000): Promise<void> {
    const server = this.server;
    const path = this.current;
    this.server = undefined;
    this.current = undefined;
    if (!server) return;
    await stopServer(server, this.tracker, graceMs);
    if (path) await removeSocketFile(path).catch(() => undefined);
    this.log.info('cmd server stopped', { socket: path });
  }

  private decodeVmi(field: string, vmi: VMI | undefined): DecodedVmi {
    if (!vmi || vmi.vmiJson.length === 0) return { ok: false, message: `${field}.vmiJson: missing` };
    let obj: unknown;
    try {
      obj = JSON.parse(Buffer.from(vmi.vmiJson).toString('utf8'));
    } catch (err) {
      return { ok: false, message: `${field}.vmiJson: not valid JSON: ${errorMessage(err)}` };
    }
    let errors: FieldError[];
    try {
      errors = this.validate(obj);
    } catch (err) {
      return { ok: false, message: `${field}.vmiJson: validation failed: ${errorMessage(err)}` };
    }
    if (errors.length > 0) {
      let message = `invalid VirtualMachineInstance: ${errors.map((e) => `${e.path || '(root)'}: ${e.reason}`).join('; ')}`;
      if (message.length > MAX_VALIDATION_MESSAGE)
        message = `${message.slice(0, MAX_VALIDATION_MESSAGE)} ...`;
      return { ok: false, message };
    }
    return { ok: true, vmi: obj as Vmi };
  }

  private logFields(vmi: Vmi | undefined): Record<string, unknown> {
    const m = vmi?.metadata;
    return m ? { kind: 'VirtualMachineInstance', namespace: m.namespace, name: m.name, uid: m.uid } : {};
  }

  /** Runs `fn`, turning a thrown error into Response{success:false}. Never rejects. */
  private async run(rpc: string, vmi: Vmi | undefined, fn: () => Promise<unknown>): Promise<Response> {
    try {
      await fn();
      this.log.debug(`${rpc} succeeded`, this.logFields(vmi));
      return { success: true, message: '' };
    } catch (err) {
      const message = errorMessage(err);
      this.log.error(`${rpc} failed: ${message}`, { ...this.logFields(vmi), reason: message });
      return { success: false, message };
    }
  }

  private unsupported(rpc: string): Response {
    return { success: false, message: `${rpc} is not supported` };
  }

  /** An rpc taking a VMI and answering Response. */
  private vmiRpc<Req extends { vmi?: VMI | undefined }>(
    rpc: string,
    method: ((vmi: Vmi, req: Req) => Promise<unknown>) | undefined,
  ): grpc.handleUnaryCall<Req, Response> {
    return (call, cb) => {
      if (!method) return cb(null, this.unsupported(rpc));
      const decoded = this.decodeVmi('vmi', call.request.vmi);
      if (!decoded.ok) {
        this.log.warn(`${rpc} rejected: ${decoded.message}`, { reason: decoded.message });
        return cb(null, { success: false, message: decoded.message });
      }
      void this.run(rpc, decoded.vmi, () => method(decoded.vmi, call.request)).then((r) => cb(null, r));
    };
  }

  /** An rpc answering `{ response, <field>: JSON string }`. */
  private jsonRpc<K extends string>(
    rpc: string,
    field: K,
    method: (() => Promise<unknown>) | undefined,
  ): grpc.handleUnaryCall<unknown, { response: Response } & Record<K, string>> {
    return (_call, cb) => {
      const answer = (response: Response, json: string) =>
        cb(null, { response, [field]: json } as { response: Response } & Record<K, string>);
      if (!method) return answer(this.unsupported(rpc), '');
      let json = '';
      void this.run(rpc, undefined, async () => {
        const value = await method();
        json = value === undefined ? '' : JSON.stringify(value);
      }).then((r) => answer(r, r.success ? json : ''));
    };
  }

  private cmdImpl(): GenCmdServer {
    const b = this.backend;
    const bind = <F extends (...a: never[]) => unknown>(f: F | undefined): F | undefined =>
      f ? (f.bind(b) as F) : undefined;
    const withOpts = (
      f: ((vmi: Vmi, o: VirtualMachineOptions | undefined) => Promise<unknown>) | undefined,
    ) => (f ? (vmi: Vmi, req: VMIRequest) => f.call(b, vmi, req.options) : undefined);
    const plain = (f: ((vmi: Vmi) => Promise<unknown>) | undefined) =>
      f ? (vmi: Vmi) => f.call(b, vmi) : undefined;
    const migrate = b.migrateVMI;
    const freeze = b.freezeVMI;
    const dump = b.memoryDump;
    const exec = b.exec;
    const guestPing = b.guestPing;
    const qemuVersion = b.getQemuVersion;
    const ping = bind(b.ping);

    return {
      syncVirtualMachine: this.vmiRpc('SyncVirtualMachine', withOpts(b.syncVMI)),
      pauseVirtualMachine: this.vmiRpc('PauseVirtualMachine', plain(b.pauseVMI)),
      unpauseVirtualMachine: this.vmiRpc('UnpauseVirtualMachine', plain(b.unpauseVMI)),
      freezeVirtualMachine: this.vmiRpc(
        'FreezeVirtualMachine',
        freeze ? (vmi, req) => freeze.call(b, vmi, req.unfreezeTimeoutSeconds) : undefined,
      ),
      unfreezeVirtualMachine: this.vmiRpc('UnfreezeVirtualMachine', plain(b.unfreezeVMI)),
      softRebootVirtualMachine: this.vmiRpc('SoftRebootVirtualMachine', plain(b.softRebootVMI)),
      shutdownVirtualMachine: this.vmiRpc('ShutdownVirtualMachine', plain(b.shutdownVMI)),
      killVirtualMachine: this.vmiRpc('KillVirtualMachine', plain(b.killVMI)),
      deleteVirtualMachine: this.vmiRpc('DeleteVirtualMachine', plain(b.deleteVMI)),
      migrateVirtualMachine: this.vmiRpc(
        'MigrateVirtualMachine',
        migrate
          ? (vmi, req) => {
              let options: unknown;
              if (req.options.length > 0) {
                try {
                  options = JSON.parse(Buffer.from(req.options).toString('utf8'));
                } catch (err) {
                  throw new Error(`options: not valid JSON: ${errorMessage(err)}`);
                }
              }
              return migrate.call(b, vmi, options);
            }
          : undefined,
      ),
      syncMigrationTarget: this.vmiRpc('SyncMigrationTarget', withOpts(b.prepareMigrationTarget)),
      cancelVirtualMachineMigration: this.vmiRpc('CancelVirtualMachineMigration', plain(b.cancelMigration)),
      signalTargetPodCleanup: this.vmiRpc('SignalTargetPodCleanup', plain(b.signalTargetPodCleanup)),
      finalizeVirtualMachineMigration: this.vmiRpc(
        'FinalizeVirtualMachineMigration',
        withOpts(b.finalizeMigration),
      ),
      hotplugHostDevices: this.vmiRpc('HotplugHostDevices', plain(b.hotplugHostDevices)),
      getDomain: this.jsonRpc(
        'GetDomain',
        'domain',
        b.getDomain &&
          (async () => {
            const d = await b.getDomain!.call(b);
            return d === undefined ? undefined : toUpstreamDomain(d);
          }),
      ),
      getDomainStats: this.jsonRpc(
        'GetDomainStats',
        'domainStats',
        b.getDomainStats &&
          (async () => {
            const s = await b.getDomainStats!.call(b);
            return s === undefined ? undefined : toUpstreamDomainStats(s as Record<string, unknown>);
          }),
      ),
      getGuestInfo: this.jsonRpc('GetGuestInfo', 'guestInfoResponse', bind(b.getGuestInfo)),
      getUsers: this.jsonRpc(
        'GetUsers',
        'guestUserListResponse',
        b.getUsers && (async () => toUpstreamGuestList(await b.getUsers!.call(b))),
      ),
      getFilesystems: this.jsonRpc(
        'GetFilesystems',
        'guestFilesystemsResponse',
        b.getFilesystems && (async () => toUpstreamGuestList(await b.getFilesystems!.call(b))),
      ),
      ping: (_call, cb) => {
        if (!ping) return cb(null, { success: true, message: '' });
        void this.run('Ping', undefined, ping).then((r) => cb(null, r));
      },
      exec: (call, cb) => {
        if (!exec) return cb(null, { response: this.unsupported('Exec'), exitCode: 0, stdOut: '' });
        const { domainName, Command, Args, timeoutSeconds } = call.request;
        let result = { exitCode: 0, stdout: '' };
        void this.run('Exec', undefined, async () => {
          result = await exec.call(b, domainName, Command, Args, timeoutSeconds);
        }).then((response) => cb(null, { response, exitCode: result.exitCode, stdOut: result.stdout }));
      },
      guestPing: (call, cb) => {
        if (!guestPing) return cb(null, { response: this.unsupported('GuestPing') });
        const { domainName, timeoutSeconds } = call.request;
        void this.run('GuestPing', undefined, () => guestPing.call(b, domainName, timeoutSeconds)).then(
          (response) => cb(null, { response }),
        );
      },
      virtualMachineMemoryDump: this.vmiRpc(
        'VirtualMachineMemoryDump',
        dump ? (vmi, req) => dump.call(b, vmi, req.dumpPath) : undefined,
      ),
      getQemuVersion: (_call, cb) => {
        if (!qemuVersion) return cb(null, { response: this.unsupported('GetQemuVersion'), version: '' });
        let version = '';
        void this.run('GetQemuVersion', undefined, async () => {
          version = await qemuVersion.call(b);
        }).then((response) => cb(null, { response, version: response.success ? version : '' }));
      },
      // ts-proto's camel case of SyncVirtualMachineCPUs
      syncVirtualMachineCpUs: this.vmiRpc('SyncVirtualMachineCPUs', withOpts(b.updateVCPUs)),
      syncVirtualMachineMemory: this.vmiRpc('SyncVirtualMachineMemory', withOpts(b.updateGuestMemory)),
    };
  }
}
