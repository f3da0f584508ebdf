// virt-operator's command line.
import { parseArgs } from 'node:util';
import type { KubeVirtConfiguration } from '@kubevirt-ts/api';

export interface OperatorFlags {
  kubeconfig?: string;
  namespace: string;
  kubevirtVersion: string;
  /** spec.configuration of the KubeVirt CR it creates when the namespace has none */
  defaultConfiguration?: KubeVirtConfiguration;
  logLevel?: string;
}

export class UsageError extends Error {}

export const USAGE = `usage: virt-operator [flags]
  --kubeconfig PATH        kubeconfig (default: $KUBECONFIG, else the in-cluster service account)
  --namespace NS           the install namespace: the KubeVirt CR, virt-controller and virt-handler
                           (default: $KVTS_NAMESPACE, else kubevirt-ts)
  --kubevirt-version V     the version this installation runs, reported in the KubeVirt CR's status (required)
  --default-configuration JSON
                           spec.configuration of the KubeVirt CR \`kubevirt\` it creates when the namespace has
                           none (default: create none)
  --log-level LEVEL        error, warn, info, debug (default $KVTS_LOG_LEVEL, else info)`;

export function parseOperatorFlags(argv: string[], env: NodeJS.ProcessEnv): OperatorFlags {
  let v;
  try {
    v = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        kubeconfig: { type: 'string' },
        namespace: { type: 'string' },
        'kubevirt-version': { type: 'string' },
        'log-level': { type: 'string' },
        'default-configuration': { type: 'string' },
      },
    }).values;
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const version = v['kubevirt-version'];
  if (!version) throw new UsageError('--kubevirt-version is required');
  let defaultConfiguration: KubeVirtConfiguration | undefined;
  const dc = v['default-configuration'];
  if (dc !== undefined) {
    try {
      defaultConfiguration = JSON.parse(dc) as KubeVirtConfiguration;
    } catch (e) {
      throw new UsageError(`--default-configuration: not JSON: ${(e as Error).message}`);
    }
    if (
      typeof defaultConfiguration !== 'object' ||
      defaultConfiguration === null ||
      Array.isArray(defaultConfiguration)
    )
      throw new UsageError('--default-configuration: must be a JSON object (a KubeVirt spec.configuration)');
  }
  const level = v['log-level'];
  if (level !== undefined && !['error', 'warn', 'info', 'debug'].includes(level))
    throw new UsageError(`--log-level: must be error, warn, info or debug, got ${JSON.stringify(level)}`);
  return {
    kubeconfig: v.kubeconfig ?? env['KUBECONFIG'],
    namespace: v.namespace ?? env['KVTS_NAMESPACE'] ?? 'kubevirt-ts',
    kubevirtVersion: version,
    defaultConfiguration,
    logLevel: level,
  };
}
