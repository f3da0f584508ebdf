/**
 * Kubelet device plugins (API v1beta1, gRPC over unix sockets in kubelet's device-plugins dir), as
 * virt-handler runs them: one plugin per device node (`devices.kubevirt.io/kvm` -> /dev/kvm, `tun` ->
 * /dev/net/tun, `vhost-net` -> /dev/vhost-net), each advertising `count` interchangeable devices that are
 * Healthy while the device node exists. Allocate hands the container the device node (rw + mknod).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { removeSocketFile, unixTarget } from '@kubevirt-ts/cmd-protocol';
import type { Logger } from '@kubevirt-ts/log';

export const DEVICE_PLUGIN_VERSION = 'v1beta1';
export const KUBELET_SOCKET = 'kubelet.sock';

export interface DeviceNode {
  /** resource name, e.g. devices.kubevirt.io/kvm */
  resourceName: string;
  /** the device node on the host, e.g. /dev/kvm */
  hostPath: string;
  /** where the container sees it (default: the same path) */
  containerPath?: string;
}

/** upstream's three: KVM, tun, vhost-net */
export const KUBEVIRT_DEVICES: DeviceNode[] = [
  { resourceName: 'devices.kubevirt.io/kvm', hostPath: '/dev/kvm' },
  { resourceName: 'devices.kubevirt.io/tun', hostPath: '/dev/net/tun' },
  { resourceName: 'devices.kubevirt.io/vhost-net', hostPath: '/dev/vhost-net' },
];

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Pkg = any;
let pkg: Pkg | undefined;
function api(): Pkg {
  if (!pkg) {
    const file = fileURLToPath(new URL('../proto/deviceplugin-v1beta1.proto', import.meta.url));
    pkg = grpc.loadPackageDefinition(
      protoLoader.loadSync(file, { keepCase: true, longs: Number, enums: String, defaults: true }),
    ).v1beta1;
  }
  return pkg;
}
/** The generated service definitions (for tests playing kubelet). */
export function devicePluginApi(): {
  Registration: grpc.ServiceClientConstructor;
  DevicePlugin: grpc.ServiceClientConstructor;
} {
  return api() as never;
}

export interface DevicePluginOptions {
  device: DeviceNode;
  /** kubelet's device-plugins dir (default /var/lib/kubelet/device-plugins) */
  dir: string;
  /** devices advertised (default 1000, as upstream) */
  count?: number;
  /** health re-check period (default 5 s) */
  healthIntervalMs?: number;
  log: Logger;
}

export class DevicePlugin {
  readonly socketPath: string;
  private server: grpc.Server | undefined;
  private streams = new Set<grpc.ServerWritableStream<unknown, unknown>>();
  private timer: NodeJS.Timeout | undefined;
  private healthy = false;

  constructor(private readonly o: DevicePluginOptions) {
    // kubevirt_kvm.sock etc.: the endpoint kubelet dials, relative to its dir
    this.socketPath = path.join(o.dir, `kubevirt-${o.device.resourceName.split('/').pop()}.sock`);
  }

  private devices() {
    const health = this.healthy ? 'Healthy' : 'Unhealthy';
    const name = this.o.device.resourceName.split('/').pop();
    return Array.from({ length: this.o.count ?? 1000 }, (_, i) => ({ ID: `${name}${i}`, health }));
  }

  /** Serves the plugin socket, then registers with kubelet. */
  async start(): Promise<void> {
    this.healthy = existsSync(this.o.device.hostPath);
    const server = new grpc.Server();
    const spec = {
      container_path: this.o.device.containerPath ?? this.o.device.hostPath,
      host_path: this.o.device.hostPath,
      permissions: 'mrw',
    };
    server.addService(api().DevicePlugin.service, {
      GetDevicePluginOptions: (_c: unknown, cb: grpc.sendUnaryData<unknown>) =>
        cb(null, { pre_start_required: false, get_preferred_allocation_available: false }),
      ListAndWatch: (call: grpc.ServerWritableStream<unknown, unknown>) => {
        this.streams.add(call);
        call.write({ devices: this.devices() });
        call.on('cancelled', () => this.streams.delete(call));
        call.on('close', () => this.streams.delete(call));
      },
      GetPreferredAllocation: (_c: unknown, cb: grpc.sendUnaryData<unknown>) =>
        cb(null, { container_responses: [] }),
      Allocate: (
        call: grpc.ServerUnaryCall<{ container_requests: Array<{ devices_ids: string[] }> }, unknown>,
        cb: grpc.sendUnaryData<unknown>,
      ) => {
        if (!this.healthy) {
          cb({
            code: grpc.status.FAILED_PRECONDITION,
            details: `${this.o.device.hostPath} is not present on this node`,
          });
          return;
        }
        cb(null, {
          container_responses: call.request.container_requests.map(() => ({
            devices: [spec],
            envs: {},
            mounts: [],
            annotations: {},
          })),
        });
      },
      PreStartContainer: (_c: unknown, cb: grpc.sendUnaryData<unknown>) => cb(null, {}),
    });
    await removeSocketFile(this.socketPath);
    await new Promise<void>((resolve, reject) =>
      server.bindAsync(unixTarget(this.socketPath), grpc.ServerCredentials.createInsecure(), (err) =>
        err ? reject(new Error(`cannot listen on ${this.socketPath}: ${err.message}`)) : resolve(),
      ),
    );
    this.server = server;
    await this.register();
    this.timer = setInterval(() => this.checkHealth(), this.o.healthIntervalMs ?? 5000);
    this.timer.unref?.();
    this.o.log.info(`device plugin ${this.o.device.resourceName} registered`, {
      healthy: this.healthy,
      socket: this.socketPath,
    });
  }

  /** Registers with kubelet (again after kubelet restarted: call it when kubelet.sock was re-created). */
  async register(): Promise<void> {
    const Registration = api().Registration as grpc.ServiceClientConstructor;
    const client = new Registration(
      unixTarget(path.join(this.o.dir, KUBELET_SOCKET)),
      grpc.credentials.createInsecure(),
    );
    try {
      await new Promise<void>((resolve, reject) =>
        (
          client as unknown as { Register: (r: unknown, o: unknown, cb: (e: Error | null) => void) => void }
        ).Register(
          {
            version: DEVICE_PLUGIN_VERSION,
            endpoint: path.basename(this.socketPath),
            resource_name: this.o.device.resourceName,
            options: { pre_start_required: false, get_preferred_allocation_available: false },
          },
          { deadline: Date.now() + 10_000 },
          (err) =>
            err
              ? reject(new Error(`registering ${this.o.device.resourceName} with kubelet: ${err.message}`))
              : resolve(),
        ),
      );
    } finally {
      client.close();
    }
  }

  /** Sends the device list again when the device node appeared or disappeared. */
  checkHealth(): void {
    const now = existsSync(this.o.device.hostPath);
    if (now === this.healthy) return;
    this.healthy = now;
    this.o.log.warn(
      `${this.o.device.hostPath} ${now ? 'is back' : 'is gone'}: devices ${now ? 'Healthy' : 'Unhealthy'}`,
      {
        reason: now ? 'DeviceHealthy' : 'DeviceUnhealthy',
      },
    );
    for (const s of this.streams) s.write({ devices: this.devices() });
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    for (const s of this.streams) s.end();
    this.streams.clear();
    const s = this.server;
    this.server = undefined;
    if (s) await new Promise<void>((r) => s.tryShutdown(() => r()));
    await removeSocketFile(this.socketPath).catch(() => undefined);
  }
}
