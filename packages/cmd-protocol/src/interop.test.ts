// Interop with upstream KubeVirt: interop/go is built from upstream's own generated gRPC code
// (kubevirt.io/kubevirt v1.6.0 pkg/handler-launcher-com, grpc-go; tools/setup.d/40-cmd-interop.sh)
// and plays the other side of a real unix socket: upstream virt-handler against our CmdServer,
// our CmdClient against an upstream-style launcher, and the same for notify in both directions.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { CmdBackend } from './backend.js';
import { CmdClient } from './cmd-client.js';
import { CmdServer } from './cmd-server.js';
import { RpcFailedError } from './errors.js';
import { NotifyClient } from './notify-client.js';
import { NotifyServer, type DomainEvent } from './notify-server.js';
import { ensureSocketDir, launcherSocketPath, notifySocketPath } from './sockets.js';
import { quietLogger, sampleVmi, tempDir, waitFor } from './test-util.js';
import { toUpstreamDomain, type DomainModel } from './upstream/domain-json.js';
import { toUpstreamK8sEvent } from './upstream/k8s-event.js';

const buildScript = fileURLToPath(new URL('../interop/build.sh', import.meta.url));
let tool: string;

beforeAll(async () => {
  // Quick when tools/setup.d/40-cmd-interop.sh already built it.
  const { stdout } = await promisify(execFile)('bash', [buildScript], { timeout: 600_000 });
  tool = stdout.trim();
}, 600_000);

let dir: string;
let cleanup: () => Promise<void>;
const children: ChildProcess[] = [];
beforeEach(async () => ({ dir, cleanup } = await tempDir()));
afterEach(async () => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
  await cleanup();
});

type Line = Record<string, any>;

/** Runs the tool to completion and returns its JSON lines. */
async function run(args: string[]): Promise<Line[]> {
  const { stdout } = await promisify(execFile)(tool, args, { timeout: 60_000 });
  return stdout
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Line);
}

/** Waits for (and returns) the first output line matching `pred` (output arrives asynchronously). */
async function line(lines: Line[], pred: (l: Line) => boolean, what: string): Promise<Line> {
  await waitFor(() => lines.some(pred), what, 10_000);
  return lines.find(pred)!;
}

/** Starts a serving mode; resolves once it listens. `lines` collects its output. */
async function serve(args: string[]): Promise<{ lines: Line[]; stop: () => Promise<void> }> {
  const child = spawn(tool, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  const lines: Line[] = [];
  createInterface({ input: child.stdout! }).on('line', (l) => lines.push(JSON.parse(l) as Line));
  await waitFor(() => lines.some((l) => l.listening), `${args[0]} to listen`, 20_000);
  return {
    lines,
    stop: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

test('upstream virt-handler (grpc-go, upstream stubs) drives our CmdServer', async () => {
  const calls: Array<[string, ...unknown[]]> = [];
  const backend: CmdBackend = {
    syncVMI: async (vmi, options) => void calls.push(['syncVMI', vmi.metadata?.name, options]),
    freezeVMI: async (_vmi, t) => void calls.push(['freezeVMI', t]),
    migrateVMI: async (_vmi, o) => void calls.push(['migrateVMI', o]),
    killVMI: async () => void calls.push(['killVMI']),
    getDomain: async () => ({
      metadata: { name: 'testvmi', namespace: 'default', uid: 'u-1' },
      domainName: 'default_testvmi',
      status: { status: 'Running', reason: 'Booted' },
    }),
    exec: async (d, c, a, t) => (calls.push(['exec', d, c, a, t]), { exitCode: 7, stdout: 'hello\n' }),
    getQemuVersion: async () => '7.2.0',
    guestPing: async () => {
      throw new Error('guest agent is not connected');
    },
  };
  const server = new CmdServer({ socketsDir: dir, backend, logger: quietLogger });
  await server.start();
  await server.ready();
  try {
    const vmiFile = join(dir, 'vmi.json');
    await writeFile(vmiFile, JSON.stringify(sampleVmi()));
    const out = await run(['handler', launcherSocketPath(dir), vmiFile]);
    const by = (rpc: string) => out.find((l) => l.rpc === rpc);

    expect(by('Info')).toEqual({ rpc: 'Info', supportedCmdVersions: [1] });
    expect(by('Ping')).toEqual({ rpc: 'Ping', success: true, message: '' });
    expect(by('SyncVirtualMachine')).toEqual({ rpc: 'SyncVirtualMachine', success: true, message: '' });
    const sync = calls.find((c) => c[0] === 'syncVMI')!;
    expect(sync[1]).toBe('testvmi');
    expect(sync[2]).toMatchObject({
      VirtualMachineSMBios: { manufacturer: 'KubeVirt', product: 'None', family: 'KubeVirt' },
      MemBalloonStatsPeriod: 10,
      PreallocatedVolumes: ['datavolume'],
      topology: {
        numaCells: [
          {
            id: 0,
            memory: { amount: 1234567890123, unit: 'KiB' },
            pages: [{ count: 512, unit: 'KiB', size: 2048 }],
            distances: [{ id: 0, value: 10 }],
            cpus: [
              { id: 0, siblings: [0, 1] },
              { id: 1, siblings: [0, 1] },
            ],
          },
        ],
      },
      DisksInfo: {
        containerdisk: {
          format: 'qcow2',
          backingFile: '/var/run/kubevirt/container-disks/disk_0.img',
          actualSize: 4096,
          virtualSize: 10737418240,
        },
      },
      clusterConfig: {
        FreePageReportingDisabled: true,
        SerialConsoleLogDisabled: true,
        ExpandDisksEnabled: false,
      },
    });
    expect(calls).toContainEqual(['freezeVMI', 42]);
    expect(calls).toContainEqual(['migrateVMI', { Bandwidth: '64Mi', AllowPostCopy: true }]);
    expect(by('PauseVirtualMachine')).toEqual({
      rpc: 'PauseVirtualMachine',
      success: false,
      message: 'PauseVirtualMachine is not supported',
    });
    expect(by('KillVirtualMachine')).toMatchObject({
      success: false,
      message: expect.stringMatching(/^invalid VirtualMachineInstance: /),
    });
    expect(calls.some((c) => c[0] === 'killVMI')).toBe(false);
    // An upstream rpc outside the spec: a clean gRPC status, no hang.
    expect(by('ResetVirtualMachine')).toMatchObject({ grpcCode: 'Unimplemented' });
    // upstream's api.Domain shape: what upstream's handler decodes
    const up = JSON.parse(by('GetDomain')!.domain as string);
    expect(up).toMatchObject({
      kind: 'Domain',
      apiVersion: 'kubevirt.io/v1',
      ObjectMeta: { name: 'testvmi', namespace: 'default', uid: 'u-1' },
      Spec: { Name: 'default_testvmi', Metadata: { KubeVirt: { UID: 'u-1' } } },
      Status: { Status: 'Running', Reason: 'Booted' },
    });
    expect(up).toEqual(toUpstreamDomain((await backend.getDomain!())!));
    expect(by('Exec')).toEqual({ rpc: 'Exec', success: true, exitCode: 7, stdOut: 'hello\n' });
    expect(calls).toContainEqual(['exec', 'default_testvmi', '/bin/echo', ['a', 'b c'], 5]);
    expect(by('GetQemuVersion')).toEqual({ rpc: 'GetQemuVersion', success: true, version: '7.2.0' });
    expect(by('GuestPing')).toEqual({
      rpc: 'GuestPing',
      success: false,
      message: 'guest agent is not connected',
    });
  } finally {
    await server.stop();
  }
}, 60_000);

test('our CmdClient drives an upstream-stub launcher (grpc-go)', async () => {
  const launcher = await serve(['launcher', launcherSocketPath(dir)]);
  const client = await CmdClient.connect(launcherSocketPath(dir));
  try {
    await client.ping();
    await client.syncVMI(sampleVmi() as never, {
      MemBalloonStatsPeriod: 5,
      PreallocatedVolumes: ['a', 'b'],
      VirtualMachineSMBios: { manufacturer: 'kubevirt-ts' },
      topology: {
        numaCells: [
          { id: 0, memory: { amount: 9007199254740991, unit: 'b' }, cpus: [{ id: 0, siblings: [0, 2] }] },
        ],
      },
      DisksInfo: { rootdisk: { format: 'raw', virtualSize: 21474836480 } },
      clusterConfig: { ExpandDisksEnabled: true },
    });
    expect(
      await line(launcher.lines, (l) => l.received === 'SyncVirtualMachine', 'SyncVirtualMachine'),
    ).toEqual({
      received: 'SyncVirtualMachine',
      vmiName: 'testvmi',
      memBalloonStatsPeriod: 5,
      preallocatedVolumes: ['a', 'b'],
      smbiosManufacturer: 'kubevirt-ts',
      numaMemoryAmount: 9007199254740991,
      cpuSiblings: [0, 2],
      diskVirtualSize: 21474836480,
      diskFormat: 'raw',
      expandDisks: true,
    });
    const err = await client.freezeVMI(sampleVmi() as never, 17).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RpcFailedError);
    expect(err).toMatchObject({ launcherMessage: 'guest agent is not connected' });
    expect(await line(launcher.lines, (l) => l.received === 'FreezeVirtualMachine', 'Freeze')).toEqual({
      received: 'FreezeVirtualMachine',
      unfreezeTimeoutSeconds: 17,
    });
    expect(await client.getDomain()).toEqual({
      kind: 'Domain',
      apiVersion: 'kubevirt.io/v1',
      metadata: { name: 'testvmi', namespace: 'default', uid: 'u-1' },
      domainName: 'default_testvmi',
      status: { status: 'Running', reason: 'Booted' },
    });
    expect(await client.exec('default_testvmi', 'uname', ['-r'], 9)).toEqual({
      exitCode: 3,
      stdout: 'out\n',
    });
    expect(await line(launcher.lines, (l) => l.received === 'Exec', 'Exec')).toEqual({
      received: 'Exec',
      domainName: 'default_testvmi',
      command: 'uname',
      args: ['-r'],
      timeoutSeconds: 9,
    });
    expect(await client.getQemuVersion()).toBe('9.1.0');
  } finally {
    client.close();
    await launcher.stop();
  }
}, 60_000);

test('an upstream launcher notify client (grpc-go) talks to our NotifyServer', async () => {
  const domains: DomainEvent[] = [];
  const events: unknown[] = [];
  const path = notifySocketPath(join(dir, 'handler'));
  const server = new NotifyServer({
    socketPath: path,
    logger: quietLogger,
    onDomainEvent: (e) => void domains.push(e),
    onK8sEvent: (e) => void events.push(e),
  });
  await server.start();
  try {
    const out = await run(['notify-client', path]);
    expect(out.map((l) => [l.rpc, l.success])).toEqual([
      ['HandleDomainEvent', true],
      ['HandleDomainEvent', true],
      ['HandleDomainEvent', false],
      ['HandleK8sEvent', true],
    ]);
    expect(out[2]!.message).toMatch(/^eventType: must be one of/);
    expect(domains).toEqual([
      {
        eventType: 'MODIFIED',
        domain: {
          kind: 'Domain',
          apiVersion: 'kubevirt.io/v1',
          metadata: { name: 'testvmi', namespace: 'default', uid: 'u-1' },
          domainName: 'default_testvmi',
          status: { status: 'Running', reason: 'Booted' },
        },
      },
      {
        eventType: 'ERROR',
        domain: undefined,
        status: { status: 'Failure', message: 'libvirt gone' },
      },
    ]);
    expect(events).toEqual([
      { type: 'Normal', reason: 'Started', message: 'VirtualMachineInstance started.' },
    ]);
  } finally {
    await server.stop();
  }
}, 60_000);

test('our NotifyClient talks to an upstream-stub notify server (grpc-go)', async () => {
  const path = notifySocketPath(join(dir, 'handler'));
  await ensureSocketDir(join(dir, 'handler'));
  const handler = await serve(['notify-server', path]);
  const client = new NotifyClient(path, { logger: quietLogger });
  try {
    const sent: DomainModel = {
      metadata: { name: 'vm', namespace: 'default' },
      domainName: 'default_vm',
      status: { status: 'Running', reason: 'Booted' },
    };
    client.sendDomainEvent({ eventType: 'ADDED', domain: sent });
    client.sendK8sEvent({ type: 'Warning', reason: 'SyncFailed', message: 'x' });
    expect(await client.flush(10_000)).toBe(true);
    await waitFor(() => handler.lines.length >= 3, 'events at the Go handler');
    expect(handler.lines.slice(1)).toEqual([
      {
        received: 'HandleDomainEvent',
        eventType: 'ADDED',
        domainJSON: JSON.stringify(toUpstreamDomain(sent)),
        statusJSON: '',
      },
      {
        received: 'HandleK8sEvent',
        eventJSON: JSON.stringify(
          toUpstreamK8sEvent({ type: 'Warning', reason: 'SyncFailed', message: 'x' }),
        ),
      },
    ]);
  } finally {
    client.close();
    await handler.stop();
  }
}, 60_000);
