// virt-controller's command line.
import { parseArgs } from 'node:util';

export interface ControllerFlags {
  kubeconfig?: string;
  configNamespace: string;
  configName: string;
  /** the virt-launcher image of launcher Pods */
  launcherImage: string;
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
  /** the webhook TLS Secret virt-controller reads, and creates and renews when it is its own */
  webhookSecret?: string;
  /** namespace of the Secret and the Service */
  webhookNamespace: string;
  /** the Service the API server calls the webhooks through: its DNS names go into the certificate */
  webhookService: string;
  /** more names / IPs for the serving certificate */
  webhookExtraSans: string[];
  mutatingWebhook: string;
  validatingWebhook: string;
  webhookCaValiditySeconds: number;
  webhookCertValiditySeconds: number;
  webhookCheckSeconds: number;
  /** a node whose virt-handler heartbeat is older than this is unresponsive: its stuck VMIs fail */
  heartbeatTimeoutSeconds: number;
  shutdownDelaySeconds: number;
  /** plain-HTTP /metrics port; 0 turns it off */
  metricsPort: number;
  /** HTTPS port of the aggregated API subresources.kubevirt.io (same certificate as the webhooks); 0 turns it off */
  subresourcesPort: number;
  /** mutual TLS to virt-handler's subresource endpoint (VMI verbs): all three files or none */
  handlerClient?: { certFile: string; keyFile: string; caFile: string; port: number; namespace: string };
  /** make the handler mutual-TLS certificates (Secrets in webhookNamespace) instead of --handler-client-* files */
  manageHandlerCerts: boolean;
  handlerCaValiditySeconds: number;
  handlerCertValiditySeconds: number;
  handlerPort: number;
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
  --launcher-image REF       the virt-launcher image of launcher Pods (required)
  --config-namespace NS      namespace of the KubeVirt CR, the cluster's configuration, read live (default:
                             $KVTS_NAMESPACE, else kubevirt-ts)
  --config-name NAME         its name (default kubevirt)
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
  --webhook-secret NAME      serve the webhooks with the certificate in this Secret (tls.crt, tls.key,
                             ca.crt); created and renewed by virt-controller when absent, used unchanged
                             when the operator made it (no kubevirt-ts.io/managed-by annotation)
  --webhook-namespace NS     namespace of that Secret and of the Service (default: $KVTS_NAMESPACE, else kubevirt-ts)
  --webhook-service NAME     the Service in front of the webhooks (default virt-controller-webhook)
  --webhook-extra-sans LIST  more DNS names / IPs for the serving certificate, comma separated
  --mutating-webhook NAME    MutatingWebhookConfiguration whose caBundle (virt-operator publishes it) must
                             trust a new CA before a certificate it signed is served (default kubevirt-ts-mutator)
  --validating-webhook NAME  the same for the ValidatingWebhookConfiguration (default kubevirt-ts-validator)
  --webhook-ca-validity S    lifetime of a CA it makes, seconds (default 604800: 7 days)
  --webhook-cert-validity S  lifetime of a serving certificate, seconds (default 86400); both are renewed
                             once 80% of it has passed
  --webhook-check-interval S how often the Secret is checked (renewal due, another replica rotated; default 60)
  --metrics-port N           Prometheus /metrics over HTTP (default 8080; 0: off)
  --handler-heartbeat-timeout S
                             a node whose virt-handler heartbeat is older is unresponsive: it is marked
                             unschedulable and its VMIs without a live launcher Pod fail; once its
                             kubelet is unreachable as long, all its VMIs fail (default 300)
  --shutdown-delay S         on SIGTERM, /readyz fails at once and the webhooks and subresources go on being
                             served this long (the API server stops sending calls here once the endpoints
                             drop the replica), then calls in flight get as long to finish (default 5; 0: off)
  --subresources-port N      HTTPS port of the aggregated API subresources.kubevirt.io, with the
                             --tls-* certificate, on every replica (default 8444; 0: off)
  --handler-client-cert-file, --handler-client-key-file, --handler-ca-file PATH
                             client certificate for virt-handler's subresource endpoint and the CA of
                             its serving certificate; without them VMI verbs (pause, ...) answer 503
  --manage-handler-certs     make those certificates: a CA (Secret kubevirt-ts-handler-ca) signing virt-handler's
                             serving certificate (Secret virt-handler-certs, which the DaemonSet mounts) and a
                             client certificate for this process (in memory); instead of the three files.
                             All are renewed once 80% of their lifetime has passed (a new CA is trusted first,
                             then signs); virt-handler re-reads the mounted Secret
  --handler-ca-validity S    lifetime of that CA, seconds (default 604800: 7 days)
  --handler-cert-validity S  lifetime of virt-handler's and this process's certificates, seconds (default 86400)
  --handler-port N           that endpoint's port (default 8186)`;

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
        'launcher-image': { type: 'string' },
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
        'webhook-secret': { type: 'string' },
        'webhook-namespace': { type: 'string' },
        'webhook-service': { type: 'string' },
        'webhook-extra-sans': { type: 'string' },
        'mutating-webhook': { type: 'string' },
        'validating-webhook': { type: 'string' },
        'webhook-ca-validity': { type: 'string' },
        'webhook-cert-validity': { type: 'string' },
        'webhook-check-interval': { type: 'string' },
        'metrics-port': { type: 'string' },
        'handler-heartbeat-timeout': { type: 'string' },
        'shutdown-delay': { type: 'string' },
        'subresources-port': { type: 'string' },
        'handler-client-cert-file': { type: 'string' },
        'handler-client-key-file': { type: 'string' },
        'handler-ca-file': { type: 'string' },
        'handler-port': { type: 'string' },
        'manage-handler-certs': { type: 'boolean' },
        'handler-ca-validity': { type: 'string' },
        'handler-cert-validity': { type: 'string' },
      },
    }).values;
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  if (!v['tls-cert-file'] !== !v['tls-key-file'])
    throw new UsageError('--tls-cert-file and --tls-key-file go together');
  if (v['tls-cert-file'] && v['webhook-secret'])
    throw new UsageError(
      '--webhook-secret and --tls-cert-file are two ways to get the certificate: give one',
    );
  const handlerTls = [v['handler-client-cert-file'], v['handler-client-key-file'], v['handler-ca-file']];
  if (handlerTls.some((x) => x) && !handlerTls.every((x) => x))
    throw new UsageError(
      '--handler-client-cert-file, --handler-client-key-file and --handler-ca-file go together',
    );
  if (v['manage-handler-certs'] && handlerTls[0])
    throw new UsageError(
      '--manage-handler-certs and --handler-client-* are two ways to get the handler certificates: give one',
    );
  const launcherImage = v['launcher-image'];
  if (!launcherImage)
    throw new UsageError('--launcher-image is required (the virt-launcher image of launcher Pods)');
  const level = v['log-level'];
  if (level !== undefined && !['error', 'warn', 'info', 'debug'].includes(level))
    throw new UsageError(`--log-level: must be error, warn, info or debug, got ${JSON.stringify(level)}`);
  return {
    kubeconfig: v.kubeconfig ?? env['KUBECONFIG'],
    configNamespace: v['config-namespace'] ?? env['KVTS_NAMESPACE'] ?? 'kubevirt-ts',
    configName: v['config-name'] ?? 'kubevirt',
    launcherImage,
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
    webhookSecret: v['webhook-secret'],
    webhookNamespace: v['webhook-namespace'] ?? env['KVTS_NAMESPACE'] ?? 'kubevirt-ts',
    webhookService: v['webhook-service'] ?? 'virt-controller-webhook',
    webhookExtraSans: (v['webhook-extra-sans'] ?? '')
      .split(',')
      .map((x) => x.trim())
      .filter(Boolean),
    mutatingWebhook: v['mutating-webhook'] ?? 'kubevirt-ts-mutator',
    validatingWebhook: v['validating-webhook'] ?? 'kubevirt-ts-validator',
    webhookCaValiditySeconds: posInt('webhook-ca-validity', v['webhook-ca-validity'], 7 * 86400),
    webhookCertValiditySeconds: posInt('webhook-cert-validity', v['webhook-cert-validity'], 86400),
    webhookCheckSeconds: posInt('webhook-check-interval', v['webhook-check-interval'], 60),
    heartbeatTimeoutSeconds: posInt('handler-heartbeat-timeout', v['handler-heartbeat-timeout'], 300),
    shutdownDelaySeconds: v['shutdown-delay'] === '0' ? 0 : posInt('shutdown-delay', v['shutdown-delay'], 5),
    metricsPort: v['metrics-port'] === '0' ? 0 : posInt('metrics-port', v['metrics-port'], 8080),
    subresourcesPort:
      v['subresources-port'] === '0' ? 0 : posInt('subresources-port', v['subresources-port'], 8444),
    handlerClient: handlerTls[0]
      ? {
          certFile: handlerTls[0],
          keyFile: handlerTls[1]!,
          caFile: handlerTls[2]!,
          port: posInt('handler-port', v['handler-port'], 8186),
          namespace: env['POD_NAMESPACE'] ?? 'kubevirt-ts',
        }
      : undefined,
    manageHandlerCerts: v['manage-handler-certs'] ?? false,
    handlerCaValiditySeconds: posInt('handler-ca-validity', v['handler-ca-validity'], 7 * 86400),
    handlerCertValiditySeconds: posInt('handler-cert-validity', v['handler-cert-validity'], 86400),
    handlerPort: posInt('handler-port', v['handler-port'], 8186),
  };
}
