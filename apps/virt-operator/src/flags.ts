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
  /** where the webhook CA comes from and goes to; undefined (--webhook-secret ''): publish nothing */
  caBundles?: { secretName: string; mutatingWebhook: string; validatingWebhook: string; apiService?: string };
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
  --webhook-secret NAME     the webhook certificate Secret in the namespace whose ca.crt it publishes as the
                           caBundle of the webhook configurations and the APIService below (default
                           kubevirt-ts-webhook-certs; '' publishes nothing)
  --mutating-webhook NAME   MutatingWebhookConfiguration (default kubevirt-ts-mutator)
  --validating-webhook NAME ValidatingWebhookConfiguration (default kubevirt-ts-validator)
  --api-service NAME        APIService served with the same certificate (default v1.subresources.kubevirt.io;
                           '' for none)
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
        'webhook-secret': { type: 'string' },
        'mutating-webhook': { type: 'string' },
        'validating-webhook': { type: 'string' },
        'api-service': { type: 'string' },
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
  const secretName = v['webhook-secret'] ?? 'kubevirt-ts-webhook-certs';
  const apiService = v['api-service'] ?? 'v1.subresources.kubevirt.io';
  const caBundles = secretName
    ? {
        secretName,
        mutatingWebhook: v['mutating-webhook'] || 'kubevirt-ts-mutator',
        validatingWebhook: v['validating-webhook'] || 'kubevirt-ts-validator',
        apiService: apiService || undefined,
      }
    : undefined;
  return {
    caBundles,
    kubeconfig: v.kubeconfig ?? env['KUBECONFIG'],
    namespace: v.namespace ?? env['KVTS_NAMESPACE'] ?? 'kubevirt-ts',
    kubevirtVersion: version,
    defaultConfiguration,
    logLevel: level,
  };
}
