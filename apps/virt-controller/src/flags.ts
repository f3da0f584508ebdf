// virt-controller's command line.
import { parseArgs } from 'node:util';

export interface ControllerFlags {
  kubeconfig?: string;
  configNamespace: string;
  configName: string;
  vmWorkers: number;
  vmiWorkers: number;
  leaderElect: boolean;
  leaseName: string;
  leaseNamespace: string;
  identity: string;
  logLevel?: string;
  /** serve the admission webhooks over TLS when both are given */
  tlsCertFile?: string;
  tlsKeyFile?: string;
  webhookPort: number;
  /** plain-HTTP /metrics port; 0 turns it off */
  metricsPort: number;
}

export class UsageError extends Error {}

const posInt = (flag: string, v: string | undefined, dflt: number): number => {
  if (v === undefined) return dflt;
  if (!/^[1-9]\d*$/.test(v))
    throw new UsageError(`--${flag}: must be a positive integer, got ${JSON.stringify(v)}`);
  return Number(v);
};

export const USAGE = `usage: virt-controller [flags]
  --kubeconfig PATH          kubeconfig (default: $KUBECONFIG, else the in-cluster service account)
  --config-namespace NS      namespace of the kubevirt-ts config object (default kubevirt-ts)
  --config-name NAME         name of the config object (default kubevirt-ts-config)
  --vm-workers N             VM controller workers (default 3)
  --vmi-workers N            VMI controller workers (default 10)
  --leader-elect             run the controllers only while holding the Lease
  --lease-name NAME          the Lease (default kubevirt-ts-controller)
  --lease-namespace NS       its namespace (default: $POD_NAMESPACE, else kubevirt-ts)
  --identity ID              this replica in the Lease (default: $POD_NAME, else the host name)
  --log-level LEVEL          error, warn, info, debug (default $KVTS_LOG_LEVEL, else info)
  --tls-cert-file PATH       serving certificate (PEM) of the admission webhooks
  --tls-key-file PATH        its key; with both, the webhooks are served on every replica
  --webhook-port N           their HTTPS port (default 8443)
  --metrics-port N           Prometheus /metrics over HTTP (default 8080; 0: off)`;

export function parseControllerFlags(
  argv: string[],
  env: NodeJS.ProcessEnv,
  hostname: string,
): ControllerFlags {
  let v;
  try {
    v = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        kubeconfig: { type: 'string' },
        'config-namespace': { type: 'string' },
        'config-name': { type: 'string' },
        'vm-workers': { type: 'string' },
        'vmi-workers': { type: 'string' },
        'leader-elect': { type: 'boolean' },
        'lease-name': { type: 'string' },
        'lease-namespace': { type: 'string' },
        identity: { type: 'string' },
        'log-level': { type: 'string' },
        'tls-cert-file': { type: 'string' },
        'tls-key-file': { type: 'string' },
        'webhook-port': { type: 'string' },
        'metrics-port': { type: 'string' },
      },
    }).values;
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  if (!v['tls-cert-file'] !== !v['tls-key-file'])
    throw new UsageError('--tls-cert-file and --tls-key-file go together');
  const level = v['log-level'];
  if (level !== undefined && !['error', 'warn', 'info', 'debug'].includes(level))
    throw new UsageError(`--log-level: must be error, warn, info or debug, got ${JSON.stringify(level)}`);
  return {
    kubeconfig: v.kubeconfig ?? env['KUBECONFIG'],
    configNamespace: v['config-namespace'] ?? 'kubevirt-ts',
    configName: v['config-name'] ?? 'kubevirt-ts-config',
    vmWorkers: posInt('vm-workers', v['vm-workers'], 3),
    vmiWorkers: posInt('vmi-workers', v['vmi-workers'], 10),
    leaderElect: v['leader-elect'] ?? false,
    leaseName: v['lease-name'] ?? 'kubevirt-ts-controller',
    leaseNamespace: v['lease-namespace'] ?? env['POD_NAMESPACE'] ?? 'kubevirt-ts',
    identity: v.identity ?? env['POD_NAME'] ?? hostname,
    logLevel: level,
    tlsCertFile: v['tls-cert-file'],
    tlsKeyFile: v['tls-key-file'],
    webhookPort: posInt('webhook-port', v['webhook-port'], 8443),
    metricsPort: v['metrics-port'] === '0' ? 0 : posInt('metrics-port', v['metrics-port'], 8080),
  };
}
