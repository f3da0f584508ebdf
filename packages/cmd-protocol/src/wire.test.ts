// Wire compatibility: messages are encoded by hand from the field numbers of the spec (the protobuf
// wire format written out in test-util.ts, independent of the generated code), decoded with the
// generated code, and the reverse (generated encode == hand encoding, byte for byte). Then whole rpcs
// travel over a real unix socket with hand-made bytes on one side, to pin the method paths.
import * as grpc from '@grpc/grpc-js';
import { join } from 'node:path';
import * as info from './gen/kubevirt/cmd/info/info.js';
import * as cmd from './gen/kubevirt/cmd/v1/cmd.js';
import * as notify from './gen/kubevirt/notify/v1/notify.js';
import { CmdClient } from './cmd-client.js';
import { CmdServer } from './cmd-server.js';
import type { CmdBackend } from './backend.js';
import { NotifyClient } from './notify-client.js';
import { ensureSocketDir, launcherSocketPath, notifySocketPath, unixTarget } from './sockets.js';
import {
  decodeRaw,
  encodeRaw,
  fieldsOf,
  quietLogger,
  sampleVmi,
  tempDir,
  type RawField,
} from './test-util.js';
import { toUpstreamDomain, type DomainModel } from './upstream/domain-json.js';

const WIRE_DOMAIN: DomainModel = {
  metadata: { name: 'd', namespace: 'default' },
  domainName: 'default_d',
  status: { status: 'Shutoff', reason: 'Destroyed' },
};

interface Fns<T> {
  encode(m: T): { finish(): Uint8Array };
  decode(b: Uint8Array): T;
  fromPartial(o: object): T;
}

const vmiJson = JSON.stringify(sampleVmi('wire'));
const rawVmi: RawField = { no: 1, message: [{ no: 1, bytes: vmiJson }] };
const objVmi = { vmiJson: Buffer.from(vmiJson) };
const BIG = 1234567890123; // > 2^32: uint64 must not be truncated

// Each case: message, hand encoding (fields in number order, proto3 defaults omitted, repeated
// scalars packed, as every protobuf encoder writes them), and the object the generated code should see.
const cases: Array<[string, Fns<any>, RawField[], object]> = [
  ['cmd.v1.VMI', cmd.VMI, [{ no: 1, bytes: vmiJson }], objVmi],
  [
    'cmd.v1.VMIRequest (all VirtualMachineOptions fields)',
    cmd.VMIRequest,
    [
      rawVmi,
      {
        no: 2,
        message: [
          {
            no: 1,
            message: [
              { no: 1, bytes: 'KubeVirt' },
              { no: 2, bytes: 'None' },
              { no: 3, bytes: '1.0' },
              { no: 4, bytes: 'sku-1' },
              { no: 5, bytes: 'fam' },
            ],
          },
          { no: 2, varint: 10 },
          { no: 3, bytes: 'rootdisk' },
          { no: 3, bytes: 'datadisk' },
          {
            no: 4,
            message: [
              {
                no: 1,
                message: [
                  { no: 1, varint: 1 },
                  {
                    no: 2,
                    message: [
                      { no: 1, varint: BIG },
                      { no: 2, bytes: 'KiB' },
                    ],
                  },
                  {
                    no: 3,
                    message: [
                      { no: 1, varint: 512 },
                      { no: 2, bytes: 'KiB' },
                      { no: 3, varint: 2048 },
                    ],
                  },
                  {
                    no: 4,
                    message: [
                      { no: 1, varint: 1 },
                      { no: 2, varint: 10 },
                    ],
                  },
                  {
                    no: 5,
                    message: [
                      { no: 1, varint: 3 },
                      { no: 2, packed: [3, 7] },
                    ],
                  },
                ],
              },
            ],
          },
          {
            no: 5,
            message: [
              { no: 1, bytes: 'rootdisk' },
              {
                no: 2,
                message: [
                  { no: 1, bytes: 'qcow2' },
                  { no: 2, bytes: '/var/run/base.img' },
                  { no: 3, varint: BIG },
                  { no: 4, varint: 10737418240 },
                ],
              },
            ],
          },
          { no: 6, varint: true },
          {
            no: 7,
            message: [
              { no: 1, varint: true },
              { no: 2, varint: true },
              { no: 3, varint: true },
              { no: 4, varint: true },
            ],
          },
        ],
      },
    ],
    {
      vmi: objVmi,
      options: {
        VirtualMachineSMBios: {
          manufacturer: 'KubeVirt',
          product: 'None',
          version: '1.0',
          sku: 'sku-1',
          family: 'fam',
        },
        MemBalloonStatsPeriod: 10,
        PreallocatedVolumes: ['rootdisk', 'datadisk'],
        topology: {
          numaCells: [
            {
              id: 1,
              memory: { amount: BIG, unit: 'KiB' },
              pages: [{ count: 512, unit: 'KiB', size: 2048 }],
              distances: [{ id: 1, value: 10 }],
              cpus: [{ id: 3, siblings: [3, 7] }],
            },
          ],
        },
        DisksInfo: {
          rootdisk: {
            format: 'qcow2',
            backingFile: '/var/run/base.img',
            actualSize: BIG,
            virtualSize: 10737418240,
          },
        },
        ExpandDisksEnabled: true,
        clusterConfig: {
          ExpandDisksEnabled: true,
          FreePageReportingDisabled: true,
          BochsDisplayForEFIGuests: true,
          SerialConsoleLogDisabled: true,
        },
      },
    },
  ],
  [
    'cmd.v1.MigrationRequest',
    cmd.MigrationRequest,
    [rawVmi, { no: 2, bytes: '{"bandwidth":"64Mi"}' }],
    { vmi: objVmi, options: Buffer.from('{"bandwidth":"64Mi"}') },
  ],
  [
    'cmd.v1.FreezeRequest',
    cmd.FreezeRequest,
    [rawVmi, { no: 2, varint: 30 }],
    { vmi: objVmi, unfreezeTimeoutSeconds: 30 },
  ],
  [
    'cmd.v1.FreezeRequest (negative int32 is 10 bytes)',
    cmd.FreezeRequest,
    [{ no: 2, varint: -1 }],
    { unfreezeTimeoutSeconds: -1 },
  ],
  [
    'cmd.v1.MemoryDumpRequest',
    cmd.MemoryDumpRequest,
    [rawVmi, { no: 2, bytes: '/dump/x.mem' }],
    { vmi: objVmi, dumpPath: '/dump/x.mem' },
  ],
  [
    'cmd.v1.ExecRequest',
    cmd.ExecRequest,
    [
      { no: 1, bytes: 'default_vm' },
      { no: 2, bytes: '/bin/echo' },
      { no: 3, bytes: 'a b' },
      { no: 3, bytes: '' },
      { no: 4, varint: 5 },
    ],
    { domainName: 'default_vm', Command: '/bin/echo', Args: ['a b', ''], timeoutSeconds: 5 },
  ],
  ['cmd.v1.EmptyRequest', cmd.EmptyRequest, [], {}],
  [
    'cmd.v1.Response',
    cmd.Response,
    [
      { no: 1, varint: true },
      { no: 2, bytes: 'ok ✓' },
    ],
    { success: true, message: 'ok ✓' },
  ],
  [
    'cmd.v1.DomainResponse',
    cmd.DomainResponse,
    [
      { no: 1, message: [{ no: 1, varint: true }] },
      { no: 2, bytes: '{"kind":"Domain"}' },
    ],
    { response: { success: true, message: '' }, domain: '{"kind":"Domain"}' },
  ],
  [
    'cmd.v1.DomainStatsResponse',
    cmd.DomainStatsResponse,
    [
      { no: 1, message: [{ no: 2, bytes: 'no domain' }] },
      { no: 2, bytes: '{}' },
    ],
    { response: { success: false, message: 'no domain' }, domainStats: '{}' },
  ],
  [
    'cmd.v1.GuestInfoResponse',
    cmd.GuestInfoResponse,
    [
      { no: 1, message: [{ no: 1, varint: true }] },
      { no: 2, bytes: '{"hostname":"g"}' },
    ],
    { response: { success: true, message: '' }, guestInfoResponse: '{"hostname":"g"}' },
  ],
  [
    'cmd.v1.GuestUserListResponse',
    cmd.GuestUserListResponse,
    [
      { no: 1, message: [{ no: 1, varint: true }] },
      { no: 2, bytes: '[]' },
    ],
    { response: { success: true, message: '' }, guestUserListResponse: '[]' },
  ],
  [
    'cmd.v1.GuestFilesystemsResponse',
    cmd.GuestFilesystemsResponse,
    [
      { no: 1, message: [{ no: 1, varint: true }] },
      { no: 2, bytes: '[{"diskName":"vda"}]' },
    ],
    { response: { success: true, message: '' }, guestFilesystemsResponse: '[{"diskName":"vda"}]' },
  ],
  [
    'cmd.v1.ExecResponse',
    cmd.ExecResponse,
    [
      { no: 1, message: [{ no: 1, varint: true }] },
      { no: 2, varint: 3 },
      { no: 3, bytes: 'out\n' },
    ],
    { response: { success: true, message: '' }, exitCode: 3, stdOut: 'out\n' },
  ],
  [
    'cmd.v1.GuestPingRequest',
    cmd.GuestPingRequest,
    [
      { no: 1, bytes: 'ns_vm' },
      { no: 2, varint: 2 },
    ],
    { domainName: 'ns_vm', timeoutSeconds: 2 },
  ],
  [
    'cmd.v1.GuestPingResponse',
    cmd.GuestPingResponse,
    [{ no: 1, message: [{ no: 2, bytes: 'agent not connected' }] }],
    { response: { success: false, message: 'agent not connected' } },
  ],
  [
    'cmd.v1.QemuVersionResponse',
    cmd.QemuVersionResponse,
    [
      { no: 1, message: [{ no: 1, varint: true }] },
      { no: 2, bytes: '7.2.0' },
    ],
    { response: { success: true, message: '' }, version: '7.2.0' },
  ],
  ['cmd.info.CmdInfoRequest', info.CmdInfoRequest, [], {}],
  [
    'cmd.info.CmdInfoResponse',
    info.CmdInfoResponse,
    [{ no: 1, packed: [1, 2] }],
    { supportedCmdVersions: [1, 2] },
  ],
  [
    'notify.v1.DomainEventRequest',
    notify.DomainEventRequest,
    [
      { no: 1, bytes: '{"kind":"Domain"}' },
      { no: 2, bytes: '{"status":"Failure"}' },
      { no: 3, bytes: 'MODIFIED' },
    ],
    {
      domainJSON: Buffer.from('{"kind":"Domain"}'),
      statusJSON: Buffer.from('{"status":"Failure"}'),
      eventType: 'MODIFIED',
    },
  ],
  [
    'notify.v1.K8sEventRequest',
    notify.K8sEventRequest,
    [{ no: 1, bytes: '{"reason":"Started"}' }],
    { eventJSON: Buffer.from('{"reason":"Started"}') },
  ],
  [
    'notify.v1.Response',
    notify.Response,
    [
      { no: 1, varint: true },
      { no: 2, bytes: 'm' },
    ],
    { success: true, message: 'm' },
  ],
];

describe.each(cases)('%s', (_name, fns, raw, obj) => {
  test('hand-encoded bytes decode with the generated code', () => {
    expect(fns.decode(encodeRaw(raw))).toEqual(fns.fromPartial(obj));
  });
  test('the generated code encodes to the same bytes', () => {
    expect(Buffer.from(fns.encode(fns.fromPartial(obj)).finish()).toString('hex')).toBe(
      Buffer.from(encodeRaw(raw)).toString('hex'),
    );
  });
});

test('repeated uint32 also decodes unpacked (proto2-style encoders)', () => {
  const bytes = encodeRaw([
    { no: 1, varint: 3 },
    { no: 2, varint: 3 },
    { no: 2, varint: 7 },
  ]);
  expect(cmd.CPU.decode(bytes)).toEqual({ id: 3, siblings: [3, 7] });
  expect(info.CmdInfoResponse.decode(encodeRaw([{ no: 1, varint: 1 }])).supportedCmdVersions).toEqual([1]);
});

test('unknown fields (a newer peer) are skipped', () => {
  const bytes = encodeRaw([
    { no: 1, varint: true },
    { no: 99, bytes: 'future' },
    { no: 2, bytes: 'x' },
  ]);
  expect(cmd.Response.decode(bytes)).toEqual({ success: true, message: 'x' });
});

// Every rpc name of the spec, typed out here (not taken from the generated code).
const SPEC_CMD_RPCS = [
  'SyncVirtualMachine',
  'PauseVirtualMachine',
  'UnpauseVirtualMachine',
  'FreezeVirtualMachine',
  'UnfreezeVirtualMachine',
  'SoftRebootVirtualMachine',
  'ShutdownVirtualMachine',
  'KillVirtualMachine',
  'DeleteVirtualMachine',
  'MigrateVirtualMachine',
  'SyncMigrationTarget',
  'CancelVirtualMachineMigration',
  'SignalTargetPodCleanup',
  'FinalizeVirtualMachineMigration',
  'HotplugHostDevices',
  'GetDomain',
  'GetDomainStats',
  'GetGuestInfo',
  'GetUsers',
  'GetFilesystems',
  'Ping',
  'Exec',
  'GuestPing',
  'VirtualMachineMemoryDump',
  'GetQemuVersion',
  'SyncVirtualMachineCPUs',
  'SyncVirtualMachineMemory',
];

const identity = (b: Buffer) => b;

/** Calls `path` with raw request bytes and returns the raw answer. */
function rawCall(client: grpc.Client, path: string, body: Uint8Array): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    client.makeUnaryRequest(
      path,
      identity,
      identity,
      Buffer.from(body),
      new grpc.Metadata(),
      {},
      (err, res) => (err ? reject(err) : resolve(res!)),
    ),
  );
}

describe('over a unix socket with hand-made bytes', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  beforeEach(async () => ({ dir, cleanup } = await tempDir()));
  afterEach(() => cleanup());

  test('CmdServer answers every rpc of the spec at /kubevirt.cmd.v1.Cmd/<Rpc> and Info at /kubevirt.cmd.info.CmdInfo/Info', async () => {
    const seen: string[] = [];
    const backend: CmdBackend = {
      syncVMI: async (vmi, options) =>
        seen.push(`sync ${vmi.metadata?.name} ${options?.MemBalloonStatsPeriod}`),
      freezeVMI: async (_vmi, t) => seen.push(`freeze ${t}`),
      exec: async (d, c, a, t) => (
        seen.push(`exec ${d} ${c} ${a.join(',')} ${t}`),
        { exitCode: 2, stdout: 'hi' }
      ),
      getDomain: async () => WIRE_DOMAIN,
    };
    const server = new CmdServer({ socketsDir: dir, backend, logger: quietLogger });
    await server.start();
    await server.ready();
    const client = new grpc.Client(unixTarget(launcherSocketPath(dir)), grpc.credentials.createInsecure());
    try {
      const infoRes = decodeRaw(await rawCall(client, '/kubevirt.cmd.info.CmdInfo/Info', new Uint8Array()));
      // packed repeated uint32 [1]
      expect(fieldsOf(infoRes, 1).map((f) => Buffer.from(f.value as Uint8Array).toString('hex'))).toEqual([
        '01',
      ]);

      const sync = decodeRaw(
        await rawCall(
          client,
          '/kubevirt.cmd.v1.Cmd/SyncVirtualMachine',
          encodeRaw([rawVmi, { no: 2, message: [{ no: 2, varint: 15 }] }]),
        ),
      );
      expect(sync).toEqual([{ no: 1, wireType: 0, value: 1n }]);
      expect(seen).toContain('sync wire 15');

      await rawCall(
        client,
        '/kubevirt.cmd.v1.Cmd/FreezeVirtualMachine',
        encodeRaw([rawVmi, { no: 2, varint: 42 }]),
      );
      expect(seen).toContain('freeze 42');

      const exec = decodeRaw(
        await rawCall(
          client,
          '/kubevirt.cmd.v1.Cmd/Exec',
          encodeRaw([
            { no: 1, bytes: 'd' },
            { no: 2, bytes: 'cmd' },
            { no: 3, bytes: 'x' },
            { no: 3, bytes: 'y' },
            { no: 4, varint: 9 },
          ]),
        ),
      );
      expect(seen).toContain('exec d cmd x,y 9');
      expect(fieldsOf(exec, 2)[0]!.value).toBe(2n);
      expect(Buffer.from(fieldsOf(exec, 3)[0]!.value as Uint8Array).toString()).toBe('hi');

      const dom = decodeRaw(await rawCall(client, '/kubevirt.cmd.v1.Cmd/GetDomain', new Uint8Array()));
      expect(decodeRaw(fieldsOf(dom, 1)[0]!.value as Uint8Array)).toEqual([
        { no: 1, wireType: 0, value: 1n },
      ]);
      expect(JSON.parse(Buffer.from(fieldsOf(dom, 2)[0]!.value as Uint8Array).toString())).toEqual(
        toUpstreamDomain(WIRE_DOMAIN),
      );

      // Every other rpc exists (no UNIMPLEMENTED) and answers a well-formed "not supported".
      for (const rpc of SPEC_CMD_RPCS) {
        if (['SyncVirtualMachine', 'FreezeVirtualMachine', 'Exec', 'GetDomain'].includes(rpc)) continue;
        const res = decodeRaw(await rawCall(client, `/kubevirt.cmd.v1.Cmd/${rpc}`, encodeRaw([rawVmi])));
        // Response-returning rpcs: Response fields at top level; others: Response in field 1.
        const top = fieldsOf(res, 1)[0];
        const response = top && top.wireType === 2 ? decodeRaw(top.value as Uint8Array) : res;
        if (rpc === 'Ping') {
          expect(response).toEqual([{ no: 1, wireType: 0, value: 1n }]);
          continue;
        }
        expect(fieldsOf(response, 1)).toEqual([]); // success = false (default, omitted)
        expect(Buffer.from(fieldsOf(response, 2)[0]!.value as Uint8Array).toString()).toBe(
          `${rpc} is not supported`,
        );
      }
    } finally {
      client.close();
      await server.stop();
    }
  });

  test('CmdClient talks to a hand-coded launcher', async () => {
    const server = new grpc.Server();
    const requests: Record<string, Buffer> = {};
    const handler =
      (name: string, answer: Uint8Array): grpc.handleUnaryCall<Buffer, Buffer> =>
      (call, cb) => {
        requests[name] = call.request;
        cb(null, Buffer.from(answer));
      };
    server.register(
      '/kubevirt.cmd.info.CmdInfo/Info',
      handler('Info', encodeRaw([{ no: 1, packed: [1] }])),
      identity,
      identity,
      'unary',
    );
    server.register(
      '/kubevirt.cmd.v1.Cmd/GetQemuVersion',
      handler(
        'GetQemuVersion',
        encodeRaw([
          { no: 1, message: [{ no: 1, varint: true }] },
          { no: 2, bytes: '8.0.0' },
        ]),
      ),
      identity,
      identity,
      'unary',
    );
    server.register(
      '/kubevirt.cmd.v1.Cmd/MigrateVirtualMachine',
      handler('Migrate', encodeRaw([{ no: 2, bytes: 'migration refused' }])),
      identity,
      identity,
      'unary',
    );
    // A DomainResponse without its Response field, and one with a domain that is not JSON.
    server.register(
      '/kubevirt.cmd.v1.Cmd/GetDomain',
      handler('GetDomain', new Uint8Array()),
      identity,
      identity,
      'unary',
    );
    server.register(
      '/kubevirt.cmd.v1.Cmd/GetDomainStats',
      handler(
        'GetDomainStats',
        encodeRaw([
          { no: 1, message: [{ no: 1, varint: true }] },
          { no: 2, bytes: '{not json' },
        ]),
      ),
      identity,
      identity,
      'unary',
    );
    const path = launcherSocketPath(dir);
    await new Promise<void>((res, rej) =>
      server.bindAsync(unixTarget(path), grpc.ServerCredentials.createInsecure(), (e) =>
        e ? rej(e) : res(),
      ),
    );
    const client = await CmdClient.connect(path);
    try {
      expect(await client.getQemuVersion()).toBe('8.0.0');
      await expect(client.getDomain()).rejects.toMatchObject({
        name: 'RpcFailedError',
        launcherMessage: 'launcher sent no response status',
      });
      await expect(client.getDomainStats()).rejects.toMatchObject({
        name: 'RpcFailedError',
        launcherMessage: expect.stringMatching(/^domainStats: not valid JSON/),
      });
      // An rpc this launcher does not serve at all: gRPC UNIMPLEMENTED surfaces as RpcFailedError.
      await expect(client.ping()).rejects.toMatchObject({
        name: 'RpcFailedError',
        grpcCode: grpc.status.UNIMPLEMENTED,
      });
      await expect(client.migrateVMI(sampleVmi('m') as never, { bandwidth: '1Mi' })).rejects.toMatchObject({
        name: 'RpcFailedError',
        launcherMessage: 'migration refused',
      });
      const mig = decodeRaw(requests['Migrate']!);
      const vmi = decodeRaw(fieldsOf(mig, 1)[0]!.value as Uint8Array);
      expect(JSON.parse(Buffer.from(fieldsOf(vmi, 1)[0]!.value as Uint8Array).toString()).metadata.name).toBe(
        'm',
      );
      expect(JSON.parse(Buffer.from(fieldsOf(mig, 2)[0]!.value as Uint8Array).toString())).toEqual({
        bandwidth: '1Mi',
      });
    } finally {
      client.close();
      server.forceShutdown();
    }
  });

  test('NotifyClient sends to /kubevirt.notify.v1.Notify/* what a hand-coded handler expects', async () => {
    const server = new grpc.Server();
    const got: Array<[string, Buffer]> = [];
    for (const rpc of ['HandleDomainEvent', 'HandleK8sEvent']) {
      server.register(
        `/kubevirt.notify.v1.Notify/${rpc}`,
        ((call, cb) => {
          got.push([rpc, call.request]);
          cb(null, Buffer.from(encodeRaw([{ no: 1, varint: true }])));
        }) as grpc.handleUnaryCall<Buffer, Buffer>,
        identity,
        identity,
        'unary',
      );
    }
    const path = notifySocketPath(join(dir, 'h'));
    await ensureSocketDir(join(dir, 'h'));
    await new Promise<void>((res, rej) =>
      server.bindAsync(unixTarget(path), grpc.ServerCredentials.createInsecure(), (e) =>
        e ? rej(e) : res(),
      ),
    );
    const client = new NotifyClient(path, { logger: quietLogger });
    try {
      client.sendDomainEvent({ eventType: 'DELETED', domain: WIRE_DOMAIN });
      client.sendK8sEvent({ type: 'Normal', reason: 'Stopped', message: '' });
      expect(await client.flush(5000)).toBe(true);
      expect(got.map(([rpc]) => rpc)).toEqual(['HandleDomainEvent', 'HandleK8sEvent']);
      const dom = decodeRaw(got[0]![1]);
      expect(JSON.parse(Buffer.from(fieldsOf(dom, 1)[0]!.value as Uint8Array).toString())).toEqual(
        toUpstreamDomain(WIRE_DOMAIN),
      );
      expect(fieldsOf(dom, 2)).toEqual([]);
      expect(Buffer.from(fieldsOf(dom, 3)[0]!.value as Uint8Array).toString()).toBe('DELETED');
      const k8s = decodeRaw(got[1]![1]);
      expect(JSON.parse(Buffer.from(fieldsOf(k8s, 1)[0]!.value as Uint8Array).toString())).toMatchObject({
        reason: 'Stopped',
        type: 'Normal',
        involvedObject: {},
        firstTimestamp: null,
      });
    } finally {
      client.close();
      server.forceShutdown();
    }
  });
});

test('garbage bytes on every rpc never crash the servers', async () => {
  const { dir, cleanup } = await tempDir();
  const server = new CmdServer({
    socketsDir: dir,
    backend: { syncVMI: async () => undefined, exec: async () => ({ exitCode: 0, stdout: '' }) },
    logger: quietLogger,
  });
  await server.start();
  const client = new grpc.Client(unixTarget(server.socketPath!), grpc.credentials.createInsecure());
  const paths = [...SPEC_CMD_RPCS.map((r) => `/kubevirt.cmd.v1.Cmd/${r}`), '/kubevirt.cmd.info.CmdInfo/Info'];
  // Deterministic pseudo-random payloads: random bytes, truncated valid messages, huge lengths.
  let seed = 42;
  const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
  const valid = encodeRaw([rawVmi, { no: 2, message: [{ no: 2, varint: 5 }] }]);
  const payloads: Uint8Array[] = [
    Uint8Array.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]), // field 1, length 4 GiB
    Uint8Array.from([0x08]), // truncated varint
    Uint8Array.from([0x0f]), // wire type 7 does not exist
  ];
  for (let i = 0; i < 60; i++) {
    if (i % 2) payloads.push(valid.subarray(0, Math.floor(rnd() * valid.length)));
    else payloads.push(Uint8Array.from({ length: Math.floor(rnd() * 64) }, () => Math.floor(rnd() * 256)));
  }
  try {
    let answered = 0;
    let refused = 0;
    for (const path of paths) {
      for (const p of payloads.slice(0, 12 + (path.length % 7))) {
        await rawCall(client, path, p).then(
          () => answered++,
          (err: grpc.ServiceError) => {
            expect(err.code).toBe(grpc.status.INTERNAL); // undecodable request
            refused++;
          },
        );
      }
    }
    expect(answered + refused).toBeGreaterThan(300);
    expect(refused).toBeGreaterThan(0);
    // Still serving.
    const ping = decodeRaw(await rawCall(client, '/kubevirt.cmd.v1.Cmd/Ping', new Uint8Array()));
    expect(ping).toEqual([{ no: 1, wireType: 0, value: 1n }]);
  } finally {
    client.close();
    await server.stop();
    await cleanup();
  }
}, 60_000);

test('uint64 beyond 2^53 is refused by the decoder, not silently rounded', () => {
  const bytes = encodeRaw([{ no: 3, varint: 2n ** 53n + 1n }]);
  expect(() => cmd.DiskInfo.decode(bytes)).toThrow(/MAX_SAFE_INTEGER/);
  expect(cmd.DiskInfo.decode(encodeRaw([{ no: 3, varint: 2n ** 53n - 1n }])).actualSize).toBe(2 ** 53 - 1);
});
