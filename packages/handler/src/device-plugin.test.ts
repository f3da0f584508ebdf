// The device plugin against a test playing kubelet: a real Registration server on kubelet.sock in a
// temp dir, and a real gRPC client on the plugin's socket (ListAndWatch stream, Allocate).
import { mkdtemp, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { unixTarget } from '@kubevirt-ts/cmd-protocol';
import { createLogger } from '@kubevirt-ts/log';
import { DevicePlugin, devicePluginApi } from './device-plugin.js';

const log = createLogger({ component: 'test', silent: true });
let dir: string;
let kubelet: grpc.Server;
const registered: unknown[] = [];

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'kvdp-'));
  registered.length = 0;
  kubelet = new grpc.Server();
  kubelet.addService(devicePluginApi().Registration.service, {
    Register: (call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<unknown>) => {
      registered.push(call.request);
      cb(null, {});
    },
  });
  await new Promise<void>((resolve, reject) =>
    kubelet.bindAsync(
      unixTarget(path.join(dir, 'kubelet.sock')),
      grpc.ServerCredentials.createInsecure(),
      (e) => (e ? reject(e) : resolve()),
    ),
  );
});
afterEach(async () => {
  await new Promise<void>((r) => kubelet.tryShutdown(() => r()));
  await rm(dir, { recursive: true, force: true });
});

type Client = grpc.Client & Record<string, (...a: unknown[]) => unknown>;

it('registers with kubelet, lists devices Healthy while the device node exists, Unhealthy when it goes, and allocates the node', async () => {
  const node = path.join(dir, 'fake-kvm');
  await writeFile(node, '');
  const plugin = new DevicePlugin({
    device: { resourceName: 'devices.kubevirt.io/kvm', hostPath: node, containerPath: '/dev/kvm' },
    dir,
    count: 3,
    healthIntervalMs: 60_000,
    log,
  });
  await plugin.start();
  try {
    expect(registered).toEqual([
      {
        version: 'v1beta1',
        endpoint: 'kubevirt-kvm.sock',
        resource_name: 'devices.kubevirt.io/kvm',
        options: { pre_start_required: false, get_preferred_allocation_available: false },
      },
    ]);
    const client = new (devicePluginApi().DevicePlugin)(
      unixTarget(plugin.socketPath),
      grpc.credentials.createInsecure(),
    ) as Client;
    const stream = client.ListAndWatch({}) as grpc.ClientReadableStream<{
      devices: Array<{ ID: string; health: string }>;
    }>;
    const lists: Array<Array<{ ID: string; health: string }>> = [];
    stream.on('data', (m) => lists.push(m.devices));
    stream.on('error', () => undefined);
    const until = async (n: number) => {
      while (lists.length < n) await new Promise((r) => setTimeout(r, 20));
    };
    await until(1);
    expect(lists[0]!.map((d) => `${d.ID}:${d.health}`)).toEqual([
      'kvm0:Healthy',
      'kvm1:Healthy',
      'kvm2:Healthy',
    ]);

    const alloc = await new Promise<{ container_responses: Array<{ devices: unknown[] }> }>(
      (resolve, reject) =>
        client.Allocate({ container_requests: [{ devices_ids: ['kvm1'] }] }, (e: Error | null, r: never) =>
          e ? reject(e) : resolve(r),
        ),
    );
    expect(alloc.container_responses).toHaveLength(1);
    expect(alloc.container_responses[0]!.devices).toEqual([
      { container_path: '/dev/kvm', host_path: node, permissions: 'mrw' },
    ]);

    await unlink(node);
    plugin.checkHealth();
    await until(2);
    expect(lists[1]!.every((d) => d.health === 'Unhealthy')).toBe(true);
    await expect(
      new Promise((resolve, reject) =>
        client.Allocate({ container_requests: [{ devices_ids: ['kvm0'] }] }, (e: Error | null, r: unknown) =>
          e ? reject(e) : resolve(r),
        ),
      ),
    ).rejects.toThrow(/is not present on this node/);
    stream.cancel();
    client.close();
  } finally {
    await plugin.stop();
  }
});

it('fails clearly when kubelet is not there', async () => {
  await new Promise<void>((r) => kubelet.tryShutdown(() => r()));
  const plugin = new DevicePlugin({
    device: { resourceName: 'devices.kubevirt.io/tun', hostPath: '/nonexistent' },
    dir: path.join(dir, 'nowhere'),
    log,
  });
  await expect(plugin.start()).rejects.toThrow(
    /cannot listen|registering devices.kubevirt.io\/tun with kubelet/,
  );
  await plugin.stop();
});
