// virt-handler's command line: flags -> HandlerOptions (minus the KubeConfig). Errors name the flag.
import { parseArgs } from 'node:util';
import { LAUNCHER_UID } from '@kubevirt-ts/handler';

export const USAGE = `usage: virt-handler --node-name NODE [--kubeconfig FILE] [--pods-dir /var/lib/kubelet/pods]
                    [--kubevirt-share-dir /var/run/kubevirt] [--launcher-uid 107] [--launcher-gid 107]
                    [--launcher-ready-timeout-seconds 300] [--heartbeat-interval-seconds 60]
                    [--resync-interval-seconds 5] [--port 8443] [--listen-address 127.0.0.1]
                    [--launcher-image-version V] [--log-level info]
                    [--device-plugin-dir /var/lib/kubelet/device-plugins]
                    [--subresource-cert-file F --subresource-key-file F --subresource-client-ca-file F]
                    [--subresource-port 8186] [--subresource-address 0.0.0.0]
                    [--migration-address IP] [--migration-bind-address 0.0.0.0]
                    [--migration-cert-file F --migration-key-file F --migration-ca-file F]
                    [--launcher-libvirt-socket /var/run/libvirt/run/libvirt/libvirt-sock]

                    [--container-disk-helper /usr/bin/kvts-hostmount] [--host-pods-dir /var/lib/kubelet/pods]`;

export class FlagError extends Error {}

export interface HandlerFlags {
  nodeName: string;
  kubeconfig?: string;
  podsDir: string;
  handlerDir: string;
  launcherUid: number;
  launcherGid: number;
  launcherReadyTimeoutMs: number;
  heartbeatIntervalMs: number;
  resyncIntervalMs: number;
  httpPort?: number;
  httpHost: string;
  launcherImageVersion?: string;
  logLevel: string;
  devicePluginDir?: string;
  /** the subresource endpoint (pause, guestosinfo, ... from virt-controller, mutual TLS): all three or none */
  subresource?: { certFile: string; keyFile: string; clientCaFile: string; port: number; address: string };
  containerDiskHelper?: string;
  hostPodsDir: string;
  /** the migration roles: the address published to sources, the TCP bind address, mutual TLS files (all three or none) */
  migrationFlags: {
    address?: string;
    bindAddress?: string;
    tls?: { certFile: string; keyFile: string; caFile: string };
    launcherLibvirtSocket?: string;
  };
}

function int(flag: string, v: string | undefined, def: number, min = 0): number {
  if (v === undefined) return def;
  if (!/^\d+$/.test(v) || Number(v) < min)
    throw new FlagError(`--${flag}: must be an integer >= ${min}, got ${JSON.stringify(v)}`);
  return Number(v);
}

export function parseHandlerFlags(argv: string[], env: NodeJS.ProcessEnv = process.env): HandlerFlags {
  let values: Record<string, string | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: Object.fromEntries(
        [
          'node-name',
          'kubeconfig',
          'pods-dir',
          'kubevirt-share-dir',
          'launcher-uid',
          'launcher-gid',
          'launcher-ready-timeout-seconds',
          'heartbeat-interval-seconds',
          'resync-interval-seconds',
          'port',
          'listen-address',
          'launcher-image-version',
          'log-level',
          'device-plugin-dir',
          'subresource-cert-file',
          'subresource-key-file',
          'subresource-client-ca-file',
          'subresource-port',
          'subresource-address',
          'container-disk-helper',
          'host-pods-dir',
          'migration-address',
          'migration-bind-address',
          'migration-cert-file',
          'migration-key-file',
          'migration-ca-file',
          'launcher-libvirt-socket',
        ].map((n) => [n, { type: 'string' as const }]),
      ),
    }) as { values: Record<string, string | undefined> });
  } catch (err) {
    throw new FlagError((err as Error).message);
  }
  const nodeName = values['node-name'] ?? env.NODE_NAME;
  if (!nodeName) throw new FlagError('--node-name: required (or $NODE_NAME)');
  const uid = int('launcher-uid', values['launcher-uid'], LAUNCHER_UID);
  const tls = ['subresource-cert-file', 'subresource-key-file', 'subresource-client-ca-file'].map(
    (k) => values[k],
  );
  if (tls.some((v) => v) && !tls.every((v) => v))
    throw new FlagError(
      '--subresource-cert-file, --subresource-key-file and --subresource-client-ca-file go together',
    );
  const mtls = ['migration-cert-file', 'migration-key-file', 'migration-ca-file'].map((k) => values[k]);
  if (mtls.some((v) => v) && !mtls.every((v) => v))
    throw new FlagError('--migration-cert-file, --migration-key-file and --migration-ca-file go together');
  const socket = values['launcher-libvirt-socket'];
  if (socket !== undefined && !socket.startsWith('/'))
    throw new FlagError(
      `--launcher-libvirt-socket: must be an absolute path in the launcher Pod, got ${JSON.stringify(socket)}`,
    );
  return {
    nodeName,
    kubeconfig: values.kubeconfig ?? env.KUBECONFIG,
    podsDir: values['pods-dir'] ?? '/var/lib/kubelet/pods',
    handlerDir: values['kubevirt-share-dir'] ?? '/var/run/kubevirt',
    launcherUid: uid,
    launcherGid: int('launcher-gid', values['launcher-gid'], uid),
    launcherReadyTimeoutMs:
      int('launcher-ready-timeout-seconds', values['launcher-ready-timeout-seconds'], 300, 1) * 1000,
    heartbeatIntervalMs:
      int('heartbeat-interval-seconds', values['heartbeat-interval-seconds'], 60, 1) * 1000,
    resyncIntervalMs: int('resync-interval-seconds', values['resync-interval-seconds'], 5, 1) * 1000,
    httpPort: values.port === undefined ? undefined : int('port', values.port, 0),
    httpHost: values['listen-address'] ?? '127.0.0.1',
    launcherImageVersion: values['launcher-image-version'],
    logLevel: values['log-level'] ?? 'info',
    // empty: no device plugins
    devicePluginDir: (values['device-plugin-dir'] ?? '/var/lib/kubelet/device-plugins') || undefined,
    subresource: tls[0]
      ? {
          certFile: tls[0],
          keyFile: tls[1]!,
          clientCaFile: tls[2]!,
          port: int('subresource-port', values['subresource-port'], 8186),
          address: values['subresource-address'] ?? '0.0.0.0',
        }
      : undefined,
    // empty: container disk files are not mounted (they must already be in the Pods)
    containerDiskHelper: (values['container-disk-helper'] ?? '/usr/bin/kvts-hostmount') || undefined,
    // kubelet's pod dir in the host's mount namespace (where container disks are mounted); default: --pods-dir
    hostPodsDir: values['host-pods-dir'] ?? values['pods-dir'] ?? '/var/lib/kubelet/pods',
    migrationFlags: {
      address: values['migration-address'] ?? env.MY_POD_IP,
      bindAddress: values['migration-bind-address'],
      tls: mtls[0] ? { certFile: mtls[0], keyFile: mtls[1]!, caFile: mtls[2]! } : undefined,
      launcherLibvirtSocket: socket,
    },
  };
}
