import type { VirtualMachineInstance } from './api.js';
import type { VirtualMachineOptions } from './gen/kubevirt/cmd/v1/cmd.js';
import type { DomainModel } from './upstream/domain-json.js';

/** Result of {@link CmdBackend.exec}. */
export interface ExecResult {
  exitCode: number;
  stdout: string;
}

/**
 * What the launcher implements behind the cmd server (the DomainManager shape). Every method is
 * optional: an rpc whose method is missing answers `Response{success:false, message:"<Rpc> is not
 * supported"}`. A method signals failure by throwing (or rejecting); the error's message goes back
 * to the handler as `Response.message`. VMIs handed to a method have been decoded and validated
 * with @kubevirt-ts/api's validateVirtualMachineInstance.
 *
 * rpc -> method:
 *   SyncVirtualMachine syncVMI, PauseVirtualMachine pauseVMI, UnpauseVirtualMachine unpauseVMI,
 *   FreezeVirtualMachine freezeVMI, UnfreezeVirtualMachine unfreezeVMI,
 *   SoftRebootVirtualMachine softRebootVMI, ShutdownVirtualMachine shutdownVMI,
 *   KillVirtualMachine killVMI, DeleteVirtualMachine deleteVMI, MigrateVirtualMachine migrateVMI,
 *   SyncMigrationTarget prepareMigrationTarget, CancelVirtualMachineMigration cancelMigration,
 *   SignalTargetPodCleanup signalTargetPodCleanup, FinalizeVirtualMachineMigration finalizeMigration,
 *   HotplugHostDevices hotplugHostDevices, GetDomain getDomain, GetDomainStats getDomainStats,
 *   GetGuestInfo getGuestInfo, GetUsers getUsers, GetFilesystems getFilesystems, Ping ping,
 *   Exec exec, GuestPing guestPing, VirtualMachineMemoryDump memoryDump,
 *   GetQemuVersion getQemuVersion, SyncVirtualMachineCPUs updateVCPUs,
 *   SyncVirtualMachineMemory updateGuestMemory.
 */
export interface CmdBackend {
  syncVMI?(vmi: VirtualMachineInstance, options: VirtualMachineOptions | undefined): Promise<unknown>;
  pauseVMI?(vmi: VirtualMachineInstance): Promise<unknown>;
  unpauseVMI?(vmi: VirtualMachineInstance): Promise<unknown>;
  /** unfreezeTimeoutSeconds: thaw automatically after this many seconds (0: never). */
  freezeVMI?(vmi: VirtualMachineInstance, unfreezeTimeoutSeconds: number): Promise<unknown>;
  unfreezeVMI?(vmi: VirtualMachineInstance): Promise<unknown>;
  softRebootVMI?(vmi: VirtualMachineInstance): Promise<unknown>;
  /** Graceful (ACPI) shutdown. */
  shutdownVMI?(vmi: VirtualMachineInstance): Promise<unknown>;
  killVMI?(vmi: VirtualMachineInstance): Promise<unknown>;
  deleteVMI?(vmi: VirtualMachineInstance): Promise<unknown>;
  /** options: the decoded JSON of MigrationRequest.options (undefined when empty). */
  migrateVMI?(vmi: VirtualMachineInstance, options: unknown): Promise<unknown>;
  prepareMigrationTarget?(
    vmi: VirtualMachineInstance,
    options: VirtualMachineOptions | undefined,
  ): Promise<unknown>;
  cancelMigration?(vmi: VirtualMachineInstance): Promise<unknown>;
  signalTargetPodCleanup?(vmi: VirtualMachineInstance): Promise<unknown>;
  finalizeMigration?(
    vmi: VirtualMachineInstance,
    options: VirtualMachineOptions | undefined,
  ): Promise<unknown>;
  hotplugHostDevices?(vmi: VirtualMachineInstance): Promise<unknown>;
  /** The domain, or undefined when there is none yet; sent in upstream's api.Domain JSON shape. */
  getDomain?(): Promise<DomainModel | undefined>;
  /** Domain stats (JSON-serializable), or undefined when there is no domain. */
  getDomainStats?(): Promise<unknown | undefined>;
  getGuestInfo?(): Promise<unknown>;
  /** The guest's users: an array (or `{items}`) of v1.VirtualMachineInstanceGuestOSUser; sent as a bare array. */
  getUsers?(): Promise<unknown>;
  /** The guest's filesystems: an array (or `{items}`) of v1.VirtualMachineInstanceFileSystem; sent as a bare array. */
  getFilesystems?(): Promise<unknown>;
  /** Optional health check; without it Ping answers success as soon as the server is serving. */
  ping?(): Promise<unknown>;
  exec?(domainName: string, command: string, args: string[], timeoutSeconds: number): Promise<ExecResult>;
  guestPing?(domainName: string, timeoutSeconds: number): Promise<unknown>;
  memoryDump?(vmi: VirtualMachineInstance, dumpPath: string): Promise<unknown>;
  getQemuVersion?(): Promise<string>;
  updateVCPUs?(vmi: VirtualMachineInstance, options: VirtualMachineOptions | undefined): Promise<unknown>;
  updateGuestMemory?(
    vmi: VirtualMachineInstance,
    options: VirtualMachineOptions | undefined,
  ): Promise<unknown>;
}

/** The cmd protocol versions this implementation speaks (CmdInfo answer). */
export const SUPPORTED_CMD_VERSIONS: readonly number[] = [1];
