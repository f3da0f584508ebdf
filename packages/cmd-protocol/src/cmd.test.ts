// CmdServer <-> CmdClient over real unix sockets (temp dirs).
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import { createConnection, createServer, type Server as NetServer } from 'node:net';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { CmdBackend } from './backend.js';
import { CmdClient } from './cmd-client.js';
import { CmdServer } from './cmd-server.js';
import {
  CmdClientError,
  DeadlineExceededError,
  LauncherUnreachableError,
  RpcFailedError,
  VersionMismatchError,
} from './errors.js';
import { CmdClient as GenCmdClient } from './gen/kubevirt/cmd/v1/cmd.js';
import { launcherInitSocketPath, launcherSocketPath, unixTarget } from './sockets.js';
import { quietLogger, sampleVmi, tempDir, waitFor } from './test-util.js';
import type { DomainModel } from './upstream/domain-json.js';

const TEST_DOMAIN: DomainModel = {
  kind: 'Domain',
  apiVersion: 'kubevirt.io/v1',
  metadata: { name: 'testvmi', namespace: 'default', uid: 'u-1' },
  domainName: 'default_testvmi',
  status: { status: 'Running', reason: 'Booted' },
};

const vmi = sampleVmi() as never;

let dir: string;
let cleanup: () => Promise<void>;
const toStop: Array<{ stop(): Promise<void> } | { close(): void }> = [];
beforeEach(async () => ({ dir, cleanup } = await tempDir()));
afterEach(async () => {
  for (const x of toStop.splice(0).reverse()) await ('stop' in x ? x.stop() : x.close());
  await cleanup();
});

async function serve(backend: CmdBackend, opts: { ready?: boolean; supportedVersions?: number[] } = {}) {
  const server = new CmdServer({
    socketsDir: dir,
    backend,
    logger: quietLogger,
    supportedVersions: opts.supportedVersions,
  });
  await server.start();
  if (opts.ready !== false) await server.ready();
  toStop.push(server);
  return server;
}

async function connect(path = launcherSocketPath(dir), opts = {}) {
  const client = await CmdClient.connect(path, opts);
  toStop.push(client);
  return client;
}

/** A backend recording every call. */
function recordingBackend(calls: unknown[][]): Required<CmdBackend> {
  const rec =
    (name: string, result?: unknown) =>
    async (...args: unknown[]) => {
      calls.push([name, ...args]);
      return result;
    };
  return {
    syncVMI: rec('syncVMI'),
    pauseVMI: rec('pauseVMI'),
    unpauseVMI: rec('unpauseVMI'),
    freezeVMI: rec('freezeVMI'),
    unfreezeVMI: rec('unfreezeVMI'),
    softRebootVMI: rec('softRebootVMI'),
    shutdownVMI: rec('shutdownVMI'),
    killVMI: rec('killVMI'),
    deleteVMI: rec('deleteVMI'),
    migrateVMI: rec('migrateVMI'),
    prepareMigrationTarget: rec('prepareMigrationTarget'),
    cancelMigration: rec('cancelMigration'),
    signalTargetPodCleanup: rec('signalTargetPodCleanup'),
    finalizeMigration: rec('finalizeMigration'),
    hotplugHostDevices: rec('hotplugHostDevices'),
    getDomain: async () => (calls.push(['getDomain']), TEST_DOMAIN),
    getDomainStats: rec('getDomainStats', {
      Name: 'default_testvmi',
      Cpu: { TimeSet: true, Time: 5 },
      Vcpu: [{ StateSet: true, State: 1 }],
      NrVirtCpu: 1,
    }),
    getGuestInfo: rec('getGuestInfo', { hostname: 'guest' }),
    getUsers: rec('getUsers', [{ userName: 'root' }]),
    // libvirt-manager answers list objects; upstream's wire carries the bare arrays
    getFilesystems: rec('getFilesystems', { items: [{ diskName: 'vda', mountPoint: '/' }] }),
    ping: rec('ping'),
    exec: async (...args: unknown[]) => (calls.push(['exec', ...args]), { exitCode: 1, stdout: 'out' }),
    guestPing: rec('guestPing'),
    memoryDump: rec('memoryDump'),
    getQemuVersion: async () => (calls.push(['getQemuVersion']), '7.2.0'),
    updateVCPUs: rec('updateVCPUs'),
    updateGuestMemory: rec('updateGuestMemory'),
  };
}

test('every rpc round-trips with its arguments and results', async () => {
  const calls: unknown[][] = [];
  await serve(recordingBackend(calls));
  const c = await connect();
  const o = { MemBalloonStatsPeriod: 7, PreallocatedVolumes: ['a'] };
  const name = (v: unknown) => (v as { metadata: { name: string } }).metadata.name;

  await c.syncVMI(vmi, o);
  await c.pauseVMI(vmi);
  await c.unpauseVMI(vmi);
  await c.freezeVMI(vmi, 30);
  await c.unfreezeVMI(vmi);
  await c.softRebootVMI(vmi);
  await c.shutdownVMI(vmi);
  await c.killVMI(vmi);
  await c.deleteVMI(vmi);
  await c.migrateVMI(vmi, { bandwidth: '64Mi', allowPostCopy: true });
  await c.prepareMigrationTarget(vmi, o);
  await c.cancelMigration(vmi);
  await c.signalTargetPodCleanup(vmi);
  await c.finalizeMigration(vmi, o);
  await c.hotplugHostDevices(vmi);
  expect(await c.getDomain()).toEqual(TEST_DOMAIN);
  // upstream's stats.DomainStats, every field as Go writes it
  expect(await c.getDomainStats()).toEqual({
    Name: 'default_testvmi',
    UUID: '',
    Cpu: { TimeSet: true, Time: 5, UserSet: false, User: 0, SystemSet: false, System: 0 },
    Memory: null,
    MigrateDomainJobInfo: null,
    Vcpu: [
      {
        StateSet: true,
        State: 1,
        TimeSet: false,
        Time: 0,
        WaitSet: false,
        Wait: 0,
        DelaySet: false,
        Delay: 0,
      },
    ],
    Net: null,
    Block: null,
    CPUMapSet: false,
    CPUMap: null,
    NrVirtCpu: 1,
  });
  expect(await c.getGuestInfo()).toEqual({ hostname: 'guest' });
  expect(await c.getUsers()).toEqual([{ userName: 'root' }]);
  expect(await c.getFilesystems()).toEqual([{ diskName: 'vda', mountPoint: '/' }]);
  await c.ping();
  expect(await c.exec('default_testvmi', '/bin/true', ['-x', 'y z'], 10)).toEqual({
    exitCode: 1,
    stdout: 'out',
  });
  await c.guestPing('default_testvmi', 3);
  await c.memoryDump(vmi, '/var/run/kubevirt/dump');
  expect(await c.getQemuVersion()).toBe('7.2.0');
  await c.updateVCPUs(vmi, o);
  await c.updateGuestMemory(vmi, o);

  const byName = new Map(calls.map((x) => [x[0] as string, x.slice(1)]));
  expect(byName.size).toBe(27);
  for (const m of [
    'pauseVMI',
    'unpauseVMI',
    'unfreezeVMI',
    'softRebootVMI',
    'shutdownVMI',
    'killVMI',
    'deleteVMI',
    'cancelMigration',
    'signalTargetPodCleanup',
    'hotplugHostDevices',
  ]) {
    expect(byName.get(m)!.length).toBe(1);
    expect(byName.get(m)![0]).toEqual(sampleVmi());
  }
  for (const m of [
    'syncVMI',
    'prepareMigrationTarget',
    'finalizeMigration',
    'updateVCPUs',
    'updateGuestMemory',
  ]) {
    const [v, opts] = byName.get(m)!;
    expect(name(v)).toBe('testvmi');
    expect(opts).toMatchObject({
      MemBalloonStatsPeriod: 7,
      PreallocatedVolumes: ['a'],
      ExpandDisksEnabled: false,
    });
  }
  expect(byName.get('freezeVMI')![1]).toBe(30);
  expect(byName.get('migrateVMI')![1]).toEqual({ bandwidth: '64Mi', allowPostCopy: true });
  expect(byName.get('exec')).toEqual(['default_testvmi', '/bin/true', ['-x', 'y z'], 10]);
  expect(byName.get('guestPing')).toEqual(['default_testvmi', 3]);
  expect(byName.get('memoryDump')![1]).toBe('/var/run/kubevirt/dump');
});

test('getDomain without a domain is undefined; options left out arrive as undefined', async () => {
  const seen: unknown[] = [];
  await serve({ getDomain: async () => undefined, syncVMI: async (_v, o) => void seen.push(o) });
  const c = await connect();
  expect(await c.getDomain()).toBeUndefined();
  await c.syncVMI(vmi);
  expect(seen).toEqual([undefined]);
});

test('an empty backend answers "<Rpc> is not supported" for every rpc but Ping, and keeps serving', async () => {
  await serve({});
  const c = await connect();
  const attempts: Array<[string, () => Promise<unknown>]> = [
    ['SyncVirtualMachine', () => c.syncVMI(vmi)],
    ['PauseVirtualMachine', () => c.pauseVMI(vmi)],
    ['UnpauseVirtualMachine', () => c.unpauseVMI(vmi)],
    ['FreezeVirtualMachine', () => c.freezeVMI(vmi, 1)],
    ['UnfreezeVirtualMachine', () => c.unfreezeVMI(vmi)],
    ['SoftRebootVirtualMachine', () => c.softRebootVMI(vmi)],
    ['ShutdownVirtualMachine', () => c.shutdownVMI(vmi)],
    ['KillVirtualMachine', () => c.killVMI(vmi)],
    ['DeleteVirtualMachine', () => c.deleteVMI(vmi)],
    ['MigrateVirtualMachine', () => c.migrateVMI(vmi, {})],
    ['SyncMigrationTarget', () => c.prepareMigrationTarget(vmi)],
    ['CancelVirtualMachineMigration', () => c.cancelMigration(vmi)],
    ['SignalTargetPodCleanup', () => c.signalTargetPodCleanup(vmi)],
    ['FinalizeVirtualMachineMigration', () => c.finalizeMigration(vmi)],
    ['HotplugHostDevices', () => c.hotplugHostDevices(vmi)],
    ['GetDomain', () => c.getDomain()],
    ['GetDomainStats', () => c.getDomainStats()],
    ['GetGuestInfo', () => c.getGuestInfo()],
    ['GetUsers', () => c.getUsers()],
    ['GetFilesystems', () => c.getFilesystems()],
    ['Exec', () => c.exec('d', 'c', [], 1)],
    ['GuestPing', () => c.guestPing('d', 1)],
    ['VirtualMachineMemoryDump', () => c.memoryDump(vmi, '/x')],
    ['GetQemuVersion', () => c.getQemuVersion()],
    ['SyncVirtualMachineCPUs', () => c.updateVCPUs(vmi)],
    ['SyncVirtualMachineMemory', () => c.updateGuestMemory(vmi)],
  ];
  expect(attempts.length).toBe(26);
  for (const [rpc, call] of attempts) {
    const err = await call().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(RpcFailedError);
    expect(err).toMatchObject({ rpc, launcherMessage: `${rpc} is not supported` });
  }
  await c.ping();
});

test('an invalid VMI is refused with the field paths, and the backend is not called', async () => {
  const calls: unknown[][] = [];
  await serve(recordingBackend(calls));
  const c = await connect();
  const bad = sampleVmi() as any;
  bad.spec.domain.devices.disks.push({ name: 'nope', disk: { bus: 'virtio' } }); // no such volume
  bad.metadata.name = 'Bad_Name';
  const err = (await c.syncVMI(bad).catch((e: unknown) => e)) as RpcFailedError;
  expect(err).toBeInstanceOf(RpcFailedError);
  expect(err.launcherMessage).toMatch(/^invalid VirtualMachineInstance: /);
  expect(err.launcherMessage).toContain('metadata.name');
  expect(err.launcherMessage).toContain('spec.domain.devices.disks[1]');
  await expect(c.pauseVMI({ kind: 'Pod' } as never)).rejects.toThrow(
    /invalid VirtualMachineInstance: .*kind/,
  );
  expect(calls).toEqual([]);
});

test('a VMI as a cluster stores it (metadata, status, fields newer than ours) is accepted', async () => {
  const seen: unknown[] = [];
  await serve({ syncVMI: async (v) => void seen.push(v) });
  const c = await connect();
  const v = sampleVmi() as any;
  v.metadata = {
    ...v.metadata,
    resourceVersion: '12345',
    generation: 2,
    creationTimestamp: '2025-01-01T00:00:00Z',
    labels: { 'kubevirt.io/nodeName': 'node01' },
    annotations: { 'kubevirt.io/latest-observed-api-version': 'v1' },
    finalizers: ['kubevirt.io/virtualMachineControllerFinalize', 'foregroundDeleteVirtualMachine'],
    ownerReferences: [
      {
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachine',
        name: 'vm',
        uid: 'u1',
        controller: true,
        blockOwnerDeletion: true,
      },
    ],
    managedFields: [
      {
        manager: 'virt-controller',
        operation: 'Update',
        apiVersion: 'kubevirt.io/v1',
        fieldsType: 'FieldsV1',
        fieldsV1: { 'f:status': {} },
      },
    ],
  };
  v.spec.domain.firmware = { uuid: '5d307ca9-b3ef-428c-8861-06e72d69f223' };
  v.spec.domain.machine = { type: 'q35' };
  v.status = {
    phase: 'Scheduled',
    nodeName: 'node01',
    activePods: { abc: 'node01' },
    conditions: [{ type: 'Ready', status: 'False', lastProbeTime: null, reason: 'PodNotReady' }],
    currentCPUTopology: { cores: 1, sockets: 1, threads: 1 },
    runtimeUser: 107,
    aFieldFromANewerKubeVirt: { x: 1 },
  };
  await c.syncVMI(v);
  expect(seen).toEqual([v]);
});

test('large VMIs: 1 MiB goes through, beyond the 4 MiB gRPC message limit is refused cleanly', async () => {
  const seen: number[] = [];
  await serve({ syncVMI: async (v) => void seen.push(JSON.stringify(v).length) });
  const c = await connect();
  const big = sampleVmi() as any;
  // the bulk in the status (the API server caps annotations at 256 KiB, and so does the launcher's validation)
  const condition = { type: 'Ready', status: 'False', message: 'x'.repeat(1 << 20) };
  big.status = { conditions: [condition] };
  await c.syncVMI(big);
  expect(seen[0]).toBeGreaterThan(1 << 20);
  condition.message = 'x'.repeat(5 << 20);
  const err = await c.syncVMI(big).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(RpcFailedError);
  expect(err).toMatchObject({ grpcCode: grpc.status.RESOURCE_EXHAUSTED });
  expect(seen.length).toBe(1);
  await c.ping();
});

test('malformed or missing vmiJson gets Response{success:false}, never a crash', async () => {
  const calls: unknown[][] = [];
  await serve(recordingBackend(calls));
  const raw = new GenCmdClient(unixTarget(launcherSocketPath(dir)), grpc.credentials.createInsecure());
  toStop.push(raw);
  const send = (vmiJson: Buffer | undefined) =>
    new Promise<{ success: boolean; message: string }>((resolve, reject) =>
      raw.syncVirtualMachine({ vmi: vmiJson ? { vmiJson } : undefined, options: undefined }, (err, res) =>
        err ? reject(err) : resolve(res),
      ),
    );
  expect(await send(Buffer.from('{"kind": "VirtualMach'))).toMatchObject({
    success: false,
    message: expect.stringMatching(/^vmi\.vmiJson: not valid JSON: /),
  });
  expect(await send(Buffer.from([0xff, 0xfe, 0x00]))).toMatchObject({ success: false });
  expect(await send(undefined)).toEqual({ success: false, message: 'vmi.vmiJson: missing' });
  expect(await send(Buffer.from('null'))).toMatchObject({
    success: false,
    message: expect.stringMatching(/^invalid VirtualMachineInstance/),
  });
  expect(await send(Buffer.from('[1,2]'))).toMatchObject({ success: false });
  expect(calls).toEqual([]);
  const c = await connect();
  await c.ping();
});

test('backend failures come back as RpcFailedError with the launcher message', async () => {
  await serve({
    syncVMI: async () => {
      throw new Error('virError(Code=1): internal error: qemu unexpectedly closed the monitor');
    },
    killVMI: () => Promise.reject('plain string reason'),
    pauseVMI: () => {
      throw new TypeError('synchronous throw');
    },
    getDomain: async () => {
      throw new Error('domain lookup failed');
    },
    exec: async () => {
      throw new Error('guest agent not connected');
    },
  });
  const c = await connect();
  await expect(c.syncVMI(vmi)).rejects.toMatchObject({
    name: 'RpcFailedError',
    rpc: 'SyncVirtualMachine',
    launcherMessage: 'virError(Code=1): internal error: qemu unexpectedly closed the monitor',
  });
  await expect(c.killVMI(vmi)).rejects.toMatchObject({ launcherMessage: 'plain string reason' });
  await expect(c.pauseVMI(vmi)).rejects.toMatchObject({ launcherMessage: 'synchronous throw' });
  await expect(c.getDomain()).rejects.toMatchObject({ launcherMessage: 'domain lookup failed' });
  await expect(c.exec('d', 'c', [], 1)).rejects.toMatchObject({
    launcherMessage: 'guest agent not connected',
  });
  await c.ping();
});

test('starts on launcher-init-sock; ready() renames it to launcher-sock on the same listener', async () => {
  const server = await serve({ getQemuVersion: async () => 'v' }, { ready: false });
  expect(server.socketPath).toBe(launcherInitSocketPath(dir));
  expect(server.isReady).toBe(false);
  await expect(CmdClient.connect(launcherSocketPath(dir))).rejects.toBeInstanceOf(LauncherUnreachableError);
  const early = await connect(launcherInitSocketPath(dir));
  expect(await early.getQemuVersion()).toBe('v');

  await server.ready();
  expect(server.isReady).toBe(true);
  await expect(stat(launcherInitSocketPath(dir))).rejects.toThrow(/ENOENT/);
  expect((await stat(launcherSocketPath(dir))).mode & 0o777).toBe(0o600);
  const c = await connect();
  expect(await c.getQemuVersion()).toBe('v');
  expect(await early.getQemuVersion()).toBe('v'); // established connection is unaffected
});

test('a launcher that does not list version 1 is refused', async () => {
  await serve({}, { supportedVersions: [2, 3] });
  const err = await CmdClient.connect(launcherSocketPath(dir)).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(VersionMismatchError);
  expect(err).toMatchObject({ supportedVersions: [2, 3], wantedVersion: 1 });
});

test('no socket: LauncherUnreachableError at once; with waitForReady the client waits for the launcher', async () => {
  const err = await CmdClient.connect(launcherSocketPath(dir)).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(LauncherUnreachableError);
  expect((err as Error).message).toMatch(/^Info: launcher at \S+ is unreachable: .*ENOENT/);
  expect((err as Error).message).not.toMatch(/Resolution note:\s*$/);

  const pending = CmdClient.connect(launcherSocketPath(dir), {
    waitForReady: true,
    connectTimeoutMs: 10_000,
  });
  await sleep(300);
  await serve({});
  const c = await pending;
  toStop.push(c);
  await c.ping();

  const waitErr = await CmdClient.connect(join(dir, 'other', 'launcher-sock'), {
    waitForReady: true,
    connectTimeoutMs: 300,
  }).catch((e: unknown) => e);
  expect(waitErr).toBeInstanceOf(DeadlineExceededError);
});

test('deadlines fire on a stuck launcher, which keeps serving other calls', async () => {
  let release!: () => void;
  const stuck = new Promise<void>((r) => (release = r));
  await serve({ syncVMI: () => stuck, getQemuVersion: async () => 'ok' });
  const c = await connect(undefined, { timeoutMs: 60_000 });
  const t0 = Date.now();
  const err = await c.syncVMI(vmi, undefined, { timeoutMs: 300 }).catch((e: unknown) => e);
  const took = Date.now() - t0;
  expect(err).toBeInstanceOf(DeadlineExceededError);
  expect(err).toMatchObject({ rpc: 'SyncVirtualMachine', timeoutMs: 300 });
  expect(took).toBeGreaterThanOrEqual(250);
  expect(await c.getQemuVersion()).toBe('ok');
  release();
});

test('a socket that accepts but never speaks gRPC: connect fails at its deadline', async () => {
  const path = launcherSocketPath(dir);
  const held: Array<{ destroy(): void }> = [];
  const mute = createServer((s) => void held.push(s)); // accepts, reads nothing, answers nothing
  await new Promise<void>((r) => mute.listen(path, r));
  try {
    const t0 = Date.now();
    const err = await CmdClient.connect(path, { connectTimeoutMs: 400 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DeadlineExceededError);
    expect(err).toMatchObject({ rpc: 'Info', timeoutMs: 400 });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(350);
    expect(held.length).toBeGreaterThan(0);
  } finally {
    for (const s of held) s.destroy();
    await new Promise<void>((r) => mute.close(() => r()));
  }
});

test('calls on a closed client fail with a clear error', async () => {
  await serve({});
  const c = await connect();
  c.close();
  const err = await c.ping().catch((e: unknown) => e);
  expect(err).toBeInstanceOf(CmdClientError);
  expect(err).toMatchObject({ message: 'Ping: client is closed', rpc: 'Ping' });
});

test('the client reconnects after the launcher restarts', async () => {
  let generation = 1;
  const backend: CmdBackend = { getQemuVersion: async () => `gen-${generation}` };
  const first = await serve(backend);
  const c = await connect();
  expect(await c.getQemuVersion()).toBe('gen-1');

  await first.stop();
  await expect(c.getQemuVersion({ timeoutMs: 2000 })).rejects.toBeInstanceOf(LauncherUnreachableError);

  generation = 2;
  await serve(backend);
  // The same client object, no re-dial by the caller.
  expect(await c.getQemuVersion({ waitForReady: true, timeoutMs: 5000 })).toBe('gen-2');
  expect(await c.getQemuVersion()).toBe('gen-2');
});

test('1,000 concurrent calls share one connection and all get their own answer', async () => {
  let inFlight = 0;
  let maxInFlight = 0;
  await serve({
    exec: async (_d, command) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await sleep(5);
      inFlight--;
      return { exitCode: Number(command), stdout: `echo ${command}` };
    },
  });
  // A counting proxy in front of the launcher socket: how many connections does the client open?
  const proxyPath = join(dir, 'proxy.sock');
  let connections = 0;
  const sockets: Array<{ destroy(): void }> = [];
  const proxy: NetServer = createServer((down) => {
    connections++;
    const up = createConnection(launcherSocketPath(dir));
    sockets.push(up, down);
    down.pipe(up).pipe(down);
    down.on('error', () => up.destroy());
    up.on('error', () => down.destroy());
  });
  await new Promise<void>((r) => proxy.listen(proxyPath, r));
  try {
    const c = await connect(proxyPath);
    const results = await Promise.all(
      Array.from({ length: 1000 }, (_, i) => c.exec('d', String(i), [], 10, { timeoutMs: 30_000 })),
    );
    results.forEach((r, i) => expect(r).toEqual({ exitCode: i, stdout: `echo ${i}` }));
    expect(connections).toBe(1);
    expect(maxInFlight).toBeGreaterThan(50); // really concurrent, not serialized
  } finally {
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => proxy.close(() => r()));
  }
}, 60_000);

test('stop() waits for running calls up to the grace period', async () => {
  let entered = false;
  const server = await serve({ killVMI: () => ((entered = true), sleep(200)) });
  const c = await connect();
  const call = c.killVMI(vmi);
  await waitFor(() => entered, 'killVMI to start');
  await server.stop(5000);
  await expect(call).resolves.toBeUndefined();
});

test('stop() cancels calls still running after the grace period', async () => {
  let entered = false;
  const server = await serve({ killVMI: () => ((entered = true), new Promise<void>(() => undefined)) });
  const c = await connect();
  const call = c.killVMI(vmi, { timeoutMs: 20_000 }).catch((e: unknown) => e);
  await waitFor(() => entered, 'killVMI to start');
  await server.stop(100);
  expect(await call).toBeInstanceOf(LauncherUnreachableError);
});
