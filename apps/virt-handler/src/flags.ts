// virt-handler's command line: flags -> HandlerOptions (minus the KubeConfig). Errors name the flag.
import { parseArgs } from 'node:util';
import { readFileSync } from 'node:fs';
import { LAUNCHER_UID, type MigrationTls } from '@kubevirt-ts/handler';

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
                    [--migration-client-cert-file F --migration-client-key-file F]
                    [--migration-client-name virt-handler-client] [--migration-server-name virt-handler]
                    [--subresource-client-names virt-controller[,NAME...]]
                    [--launcher-libvirt-socket /var/run/libvirt/run/libvirt/libvirt-sock]

                    [--container-disk-helper /usr/bin/kvts-hostmount] [--host-pods-dir /var/lib/kubelet/pods]
                    [--seccomp-profile-dir /var/lib/kubelet/seccomp]
                    [--seccomp-base-profile /usr/share/containers/seccomp.json]
                    [--healthz-port 8443] [--kubevirt-namespace kubevirt-ts] [--kubevirt-name kubevirt]`;

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
  subresource?: {
    certFile: string;
    keyFile: string;
    clientCaFile: string;
    port: number;
    address: string;
    /** common names a client certificate must carry (unset: any of the client CA) */
    clientNames?: string[];
  };
  containerDiskHelper?: string;
  hostPodsDir: string;
  /** kubelet's seccomp dir: install the launcher Pods' profile there (off when unset) */
  seccompProfileDir?: string;
  seccompBaseProfile?: string;
  /**
   * upstream's `GET /healthz` over HTTPS (the subresource certificate and key, no client certificate asked) with
   * the resourceVersion of the KubeVirt CR `kubeVirt` as the handler last saw it; needs the --subresource-*-file flags
   */
  healthz?: { port: number; kubeVirt: { namespace: string; name: string } };
  /** the migration roles: the address published to sources, the TCP bind address, mutual TLS files (all three or none) */
  migrationFlags: {
    address?: string;
    bindAddress?: string;
    tls?: {
      certFile: string;
      keyFile: string;
      caFile: string;
      /** a separate client certificate for the source's outbound leg (upstream's handler client certificate) */
      clientCertFile?: string;
      clientKeyFile?: string;
      /** the common name a source's client certificate must carry (target side) */
      clientName?: string;
      /** the common name the target's certificate must carry (source side) */
      serverName?: string;
    };
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
          'migration-client-cert-file',
          'migration-client-key-file',
          'migration-client-name',
          'migration-server-name',
          'subresource-client-names',
          'launcher-libvirt-socket',
          'seccomp-profile-dir',
          'seccomp-base-profile',
          'healthz-port',
          'kubevirt-namespace',
          'kubevirt-name',
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
  if (values['healthz-port'] !== undefined && !tls[0])
    throw new FlagError(
      '--healthz-port: serves HTTPS with the --subresource-*-file certificate, which is missing',
    );
  const mtls = ['migration-cert-file', 'migration-key-file', 'migration-ca-file'].map((k) => values[k]);
  if (mtls.some((v) => v) && !mtls.every((v) => v))
    throw new FlagError('--migration-cert-file, --migration-key-file and --migration-ca-file go together');
  const mclient = ['migration-client-cert-file', 'migration-client-key-file'].map((k) => values[k]);
  if (mclient.some((v) => v) && !mclient.every((v) => v))
    throw new FlagError('--migration-client-cert-file and --migration-client-key-file go together');
  for (const k of ['migration-client-cert-file', 'migration-client-name', 'migration-server-name'])
    if (values[k] !== undefined && !mtls[0])
      throw new FlagError(
        `--${k}: needs --migration-cert-file, --migration-key-file and --migration-ca-file`,
      );
  const clientNames = values['subresource-client-names']
    ?.split(',')
    .map((n) => n.trim())
    .filter(Boolean);
  if (clientNames !== undefined && (clientNames.length === 0 || !tls[0]))
    throw new FlagError(
      '--subresource-client-names: a comma-separated list of names, with the --subresource-*-file flags',
    );
  const socket = values['launcher-libvirt-socket'];
  if (socket !== undefined && !socket.startsWith('/'))
    throw new FlagError(
      `--launcher-libvirt-socket: must be an absolute path in the launcher Pod, got ${JSON.stringify(socket)}`,
    );
  for (const f of ['seccomp-profile-dir', 'seccomp-base-profile']) {
    const v = values[f];
    if (v !== undefined && !v.startsWith('/'))
      throw new FlagError(`--${f}: must be an absolute path, got ${JSON.stringify(v)}`);
  }
  if (values['seccomp-base-profile'] !== undefined && values['seccomp-profile-dir'] === undefined)
    throw new FlagError('--seccomp-base-profile: only with --seccomp-profile-dir');
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
          ...(clientNames ? { clientNames } : {}),
        }
      : undefined,
    // empty: container disk files are not mounted (they must already be in the Pods)
    containerDiskHelper: (values['container-disk-helper'] ?? '/usr/bin/kvts-hostmount') || undefined,
    // kubelet's pod dir in the host's mount namespace (where container disks are mounted); default: --pods-dir
    hostPodsDir: values['host-pods-dir'] ?? values['pods-dir'] ?? '/var/lib/kubelet/pods',
    // off unless asked (deploy/ asks): the handler writes into kubelet's dir only when told where it is
    seccompProfileDir: values['seccomp-profile-dir'],
    seccompBaseProfile: values['seccomp-base-profile'],
    // upstream's /healthz (HTTPS with the subresource certificate): the KubeVirt CR's resourceVersion it has seen
    healthz:
      values['healthz-port'] === undefined
        ? undefined
        : {
            port: int('healthz-port', values['healthz-port'], 8443, 0),
            kubeVirt: {
              namespace: values['kubevirt-namespace'] ?? 'kubevirt-ts',
              name: values['kubevirt-name'] ?? 'kubevirt',
            },
          },
    migrationFlags: {
      address: values['migration-address'] ?? env.MY_POD_IP,
      bindAddress: values['migration-bind-address'],
      tls: mtls[0]
        ? {
            certFile: mtls[0],
            keyFile: mtls[1]!,
            caFile: mtls[2]!,
            ...(mclient[0] ? { clientCertFile: mclient[0], clientKeyFile: mclient[1]! } : {}),
            ...(values['migration-client-name'] !== undefined && {
              clientName: values['migration-client-name'],
            }),
            ...(values['migration-server-name'] !== undefined && {
              serverName: values['migration-server-name'],
            }),
          }
        : undefined,
      launcherLibvirtSocket: socket,
    },
  };
}

/** The migration proxy's TLS options as read from files: the PEM contents, as Buffers. */
export type MigrationTlsRead = MigrationTls & {
  cert: Buffer;
  key: Buffer;
  ca: Buffer;
  clientCert?: Buffer;
  clientKey?: Buffer;
};

/** The migration proxy's TLS options (PEM contents) from the files the flags name (the mounted Secrets). */
export function readMigrationTls(
  t: NonNullable<HandlerFlags['migrationFlags']['tls']>,
  read: (file: string) => Buffer = (f) => readFileSync(f),
): MigrationTlsRead {
  return {
    cert: read(t.certFile),
    key: read(t.keyFile),
    ca: read(t.caFile),
    ...(t.clientCertFile ? { clientCert: read(t.clientCertFile), clientKey: read(t.clientKeyFile!) } : {}),
    ...(t.clientName !== undefined && { clientName: t.clientName }),
    ...(t.serverName !== undefined && { serverName: t.serverName }),
  };
}
