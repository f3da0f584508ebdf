// The .proto files say what the wire-format spec says: every service, rpc, message, field number,
// type and label, parsed from proto/ by an independent .proto parser (@grpc/proto-loader) and compared
// with the spec's tables, typed out below in the spec's own notation.
import * as protoLoader from '@grpc/proto-loader';
import { fileURLToPath } from 'node:url';

const protoDir = fileURLToPath(new URL('../proto', import.meta.url));
const defs = protoLoader.loadSync(
  ['kubevirt/cmd/v1/cmd.proto', 'kubevirt/cmd/info/info.proto', 'kubevirt/notify/v1/notify.proto'],
  { keepCase: true, includeDirs: [protoDir] },
);

const SPEC_MESSAGES: Record<string, string> = {
  'kubevirt.cmd.v1.VMI': '1: bytes vmiJson',
  'kubevirt.cmd.v1.VMIRequest': '1: VMI vmi; 2: VirtualMachineOptions options',
  'kubevirt.cmd.v1.VirtualMachineOptions':
    '1: SMBios VirtualMachineSMBios; 2: uint32 MemBalloonStatsPeriod; 3: repeated string PreallocatedVolumes; ' +
    '4: Topology topology; 5: map<string, DiskInfo> DisksInfo; 6: bool ExpandDisksEnabled; 7: ClusterConfig clusterConfig',
  'kubevirt.cmd.v1.ClusterConfig':
    '1: bool ExpandDisksEnabled; 2: bool FreePageReportingDisabled; 3: bool BochsDisplayForEFIGuests; 4: bool SerialConsoleLogDisabled',
  'kubevirt.cmd.v1.SMBios':
    '1: string manufacturer; 2: string product; 3: string version; 4: string sku; 5: string family',
  'kubevirt.cmd.v1.DiskInfo':
    '1: string format; 2: string backingFile; 3: uint64 actualSize; 4: uint64 virtualSize',
  'kubevirt.cmd.v1.Topology': '1: repeated Cell numa_cells',
  'kubevirt.cmd.v1.Cell':
    '1: uint32 id; 2: Memory memory; 3: repeated Pages pages; 4: repeated Sibling distances; 5: repeated CPU cpus',
  'kubevirt.cmd.v1.Memory': '1: uint64 amount; 2: string unit',
  'kubevirt.cmd.v1.Pages': '1: uint64 count; 2: string unit; 3: uint32 size',
  'kubevirt.cmd.v1.Sibling': '1: uint32 id; 2: uint64 value',
  'kubevirt.cmd.v1.CPU': '1: uint32 id; 2: repeated uint32 siblings',
  'kubevirt.cmd.v1.MigrationRequest': '1: VMI vmi; 2: bytes options',
  'kubevirt.cmd.v1.FreezeRequest': '1: VMI vmi; 2: int32 unfreezeTimeoutSeconds',
  'kubevirt.cmd.v1.MemoryDumpRequest': '1: VMI vmi; 2: string dumpPath',
  'kubevirt.cmd.v1.ExecRequest':
    '1: string domainName; 2: string Command; 3: repeated string Args; 4: int32 timeoutSeconds',
  'kubevirt.cmd.v1.EmptyRequest': '',
  'kubevirt.cmd.v1.Response': '1: bool success; 2: string message',
  'kubevirt.cmd.v1.DomainResponse': '1: Response response; 2: string domain',
  'kubevirt.cmd.v1.DomainStatsResponse': '1: Response response; 2: string domainStats',
  'kubevirt.cmd.v1.GuestInfoResponse': '1: Response response; 2: string guestInfoResponse',
  'kubevirt.cmd.v1.GuestUserListResponse': '1: Response response; 2: string guestUserListResponse',
  'kubevirt.cmd.v1.GuestFilesystemsResponse': '1: Response response; 2: string guestFilesystemsResponse',
  'kubevirt.cmd.v1.ExecResponse': '1: Response response; 2: int32 exitCode; 3: string stdOut',
  'kubevirt.cmd.v1.GuestPingRequest': '1: string domainName; 2: int32 timeoutSeconds',
  'kubevirt.cmd.v1.GuestPingResponse': '1: Response response',
  'kubevirt.cmd.v1.QemuVersionResponse': '1: Response response; 2: string version',
  'kubevirt.cmd.info.CmdInfoRequest': '',
  'kubevirt.cmd.info.CmdInfoResponse': '1: repeated uint32 supportedCmdVersions',
  'kubevirt.notify.v1.DomainEventRequest': '1: bytes domainJSON; 2: bytes statusJSON; 3: string eventType',
  'kubevirt.notify.v1.K8sEventRequest': '1: bytes eventJSON',
  'kubevirt.notify.v1.Response': '1: bool success; 2: string message',
};

const SPEC_SERVICES: Record<string, string> = {
  'kubevirt.cmd.info.CmdInfo': 'Info(CmdInfoRequest) CmdInfoResponse',
  'kubevirt.cmd.v1.Cmd': [
    'SyncVirtualMachine(VMIRequest) Response',
    'PauseVirtualMachine(VMIRequest) Response',
    'UnpauseVirtualMachine(VMIRequest) Response',
    'FreezeVirtualMachine(FreezeRequest) Response',
    'UnfreezeVirtualMachine(VMIRequest) Response',
    'SoftRebootVirtualMachine(VMIRequest) Response',
    'ShutdownVirtualMachine(VMIRequest) Response',
    'KillVirtualMachine(VMIRequest) Response',
    'DeleteVirtualMachine(VMIRequest) Response',
    'MigrateVirtualMachine(MigrationRequest) Response',
    'SyncMigrationTarget(VMIRequest) Response',
    'CancelVirtualMachineMigration(VMIRequest) Response',
    'SignalTargetPodCleanup(VMIRequest) Response',
    'FinalizeVirtualMachineMigration(VMIRequest) Response',
    'HotplugHostDevices(VMIRequest) Response',
    'GetDomain(EmptyRequest) DomainResponse',
    'GetDomainStats(EmptyRequest) DomainStatsResponse',
    'GetGuestInfo(EmptyRequest) GuestInfoResponse',
    'GetUsers(EmptyRequest) GuestUserListResponse',
    'GetFilesystems(EmptyRequest) GuestFilesystemsResponse',
    'Ping(EmptyRequest) Response',
    'Exec(ExecRequest) ExecResponse',
    'GuestPing(GuestPingRequest) GuestPingResponse',
    'VirtualMachineMemoryDump(MemoryDumpRequest) Response',
    'GetQemuVersion(EmptyRequest) QemuVersionResponse',
    'SyncVirtualMachineCPUs(VMIRequest) Response',
    'SyncVirtualMachineMemory(VMIRequest) Response',
  ].join('; '),
  'kubevirt.notify.v1.Notify':
    'HandleDomainEvent(DomainEventRequest) Response; HandleK8sEvent(K8sEventRequest) Response',
};

interface FieldDesc {
  name: string;
  number: number;
  label: string;
  type: string;
  typeName: string;
}
interface MessageDesc {
  field: FieldDesc[];
  nestedType: Array<MessageDesc & { name: string; options?: { mapEntry?: boolean } | null }>;
}

function typeOf(f: FieldDesc): string {
  return f.type === 'TYPE_MESSAGE'
    ? f.typeName.replace(/^.*\./, '')
    : f.type.replace(/^TYPE_/, '').toLowerCase();
}

/** A message descriptor in the spec's notation. */
function notation(m: MessageDesc): string {
  return m.field
    .map((f) => {
      const entry = m.nestedType.find((n) => n.name === f.typeName && n.options?.mapEntry);
      if (entry) {
        const [k, v] = entry.field;
        return `${f.number}: map<${typeOf(k!)}, ${typeOf(v!)}> ${f.name}`;
      }
      return `${f.number}: ${f.label === 'LABEL_REPEATED' ? 'repeated ' : ''}${typeOf(f)} ${f.name}`;
    })
    .join('; ');
}

test('every message of the spec has exactly the spec fields', () => {
  const messages = Object.entries(defs)
    .filter(([, d]) => (d as { format?: string }).format === 'Protocol Buffer 3 DescriptorProto')
    .map(([name]) => name)
    .sort();
  expect(messages).toEqual(Object.keys(SPEC_MESSAGES).sort());
  for (const [name, spec] of Object.entries(SPEC_MESSAGES)) {
    const m = (defs[name] as unknown as { type: MessageDesc }).type;
    expect(`${name} { ${notation(m)} }`).toBe(`${name} { ${spec} }`);
  }
});

test('every service has exactly the spec rpcs, unary, with the spec request and response types', () => {
  for (const [service, spec] of Object.entries(SPEC_SERVICES)) {
    const svc = defs[service] as unknown as Record<
      string,
      {
        path: string;
        requestStream: boolean;
        responseStream: boolean;
        requestType: { type: { name: string } };
        responseType: { type: { name: string } };
      }
    >;
    const rpcs = Object.entries(svc).map(([rpc, m]) => {
      expect(m.path).toBe(`/${service}/${rpc}`);
      expect([m.requestStream, m.responseStream]).toEqual([false, false]);
      return `${rpc}(${m.requestType.type.name}) ${m.responseType.type.name}`;
    });
    expect(rpcs.join('; ')).toBe(spec);
  }
});
