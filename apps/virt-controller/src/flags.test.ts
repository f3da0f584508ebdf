import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseManifests } from '@kubevirt-ts/api';
import { UsageError, parseControllerFlags } from './flags.js';

const L = '--launcher-image=reg/virt-launcher:1';

describe('virt-controller flags', () => {
  it('defaults (upstream worker counts, the Lease deploy/ names, identity from POD_NAME)', () => {
    expect(parseControllerFlags([L], { POD_NAME: 'vc-1', POD_NAMESPACE: 'ns1' }, 'host')).toEqual({
      kubeconfig: undefined,
      configNamespace: 'kubevirt-ts',
      configName: 'kubevirt',
      launcherImage: 'reg/virt-launcher:1',
      vmWorkers: 3,
      vmiWorkers: 10,
      leaderElect: false,
      leaseName: 'kubevirt-ts-controller',
      leaseNamespace: 'ns1',
      identity: 'vc-1',
      logLevel: undefined,
      tlsCertFile: undefined,
      tlsKeyFile: undefined,
      webhookPort: 8443,
      webhookSecret: undefined,
      webhookNamespace: 'kubevirt-ts',
      webhookService: 'virt-controller-webhook',
      webhookExtraSans: [],
      mutatingWebhook: 'kubevirt-ts-mutator',
      validatingWebhook: 'kubevirt-ts-validator',
      webhookCaValiditySeconds: 7 * 86400,
      webhookCertValiditySeconds: 86400,
      webhookCheckSeconds: 60,
      heartbeatTimeoutSeconds: 300,
      shutdownDelaySeconds: 5,
      metricsPort: 8080,
      subresourcesPort: 8444,
      handlerClient: undefined,
      manageHandlerCerts: false,
      handlerCaValiditySeconds: 7 * 86400,
      handlerCertValiditySeconds: 86400,
      handlerPort: 8186,
    });
    expect(
      parseControllerFlags([L, '--handler-ca-validity=600', '--handler-cert-validity=120'], {}, 'h'),
    ).toMatchObject({ handlerCaValiditySeconds: 600, handlerCertValiditySeconds: 120 });
    expect(
      parseControllerFlags(
        [L, '--handler-client-cert-file=c', '--handler-client-key-file=k', '--handler-ca-file=ca'],
        { POD_NAMESPACE: 'kv' },
        'h',
      ).handlerClient,
    ).toEqual({ certFile: 'c', keyFile: 'k', caFile: 'ca', port: 8186, namespace: 'kv' });
    expect(() => parseControllerFlags([L, '--handler-ca-file=ca'], {}, 'h')).toThrow(
      '--handler-client-cert-file, --handler-client-key-file and --handler-ca-file go together',
    );
    expect(parseControllerFlags([L, '--subresources-port=0'], {}, 'h').subresourcesPort).toBe(0);
    expect(() => parseControllerFlags([L, '--subresources-port=x'], {}, 'h')).toThrow(
      '--subresources-port: must be a positive integer, got "x"',
    );
    expect(parseControllerFlags([L], {}, 'host').identity).toBe('host');
  });
  it('takes the flags deploy/ passes', () => {
    const f = parseControllerFlags([L, '--leader-elect', '--lease-name=x', '--vmi-workers', '4'], {}, 'h');
    expect(f).toMatchObject({ leaderElect: true, leaseName: 'x', vmiWorkers: 4 });
    const dep = parseManifests(
      readFileSync(
        fileURLToPath(new URL('../../../deploy/40-virt-controller.yaml', import.meta.url)),
        'utf8',
      ),
    )[0] as { spec: { template: { spec: { containers: { args: string[] }[] } } } };
    const args = dep.spec.template.spec.containers[0]!.args;
    expect(parseControllerFlags(args, { KVTS_NAMESPACE: 'kubevirt-ts' }, 'h')).toMatchObject({
      launcherImage: 'ghcr.io/kubevirt-ts/virt-launcher:0.1.0',
      configNamespace: 'kubevirt-ts',
      configName: 'kubevirt',
      leaderElect: true,
      leaseName: 'kubevirt-ts-controller',
      webhookSecret: 'kubevirt-ts-webhook-certs',
      webhookService: 'virt-controller-webhook',
      webhookNamespace: 'kubevirt-ts',
      webhookPort: 8443,
      metricsPort: 8080,
      manageHandlerCerts: true,
      handlerClient: undefined,
    });
    expect(
      parseControllerFlags(
        [L, '--webhook-extra-sans= 127.0.0.1 ,vc.example', '--webhook-cert-validity=60'],
        {},
        'h',
      ),
    ).toMatchObject({ webhookExtraSans: ['127.0.0.1', 'vc.example'], webhookCertValiditySeconds: 60 });
  });
  it.each([
    [[], /--launcher-image is required/],
    [['--vm-workers=0'], /--vm-workers: must be a positive integer/],
    [['--log-level=loud'], /--log-level/],
    [['--nope'], /nope/],
    [['--tls-cert-file=/c'], /go together/],
    [['--webhook-port=x'], /--webhook-port/],
    [['--webhook-secret=s', '--tls-cert-file=/c', '--tls-key-file=/k'], /give one/],
    [['--webhook-cert-validity=0'], /--webhook-cert-validity: must be a positive integer/],
    [['--handler-heartbeat-timeout=-1'], /--handler-heartbeat-timeout: must be a positive integer/],
    [['--handler-cert-validity=0'], /--handler-cert-validity: must be a positive integer/],
    [
      [
        '--manage-handler-certs',
        '--handler-client-cert-file=c',
        '--handler-client-key-file=k',
        '--handler-ca-file=ca',
      ],
      /--manage-handler-certs and --handler-client-\* are two ways/,
    ],
  ])('refuses %j', (args, re) => {
    const argv = args.length ? [L, ...args] : args;
    expect(() => parseControllerFlags(argv, {}, 'h')).toThrow(UsageError);
    expect(() => parseControllerFlags(argv, {}, 'h')).toThrow(re);
  });
});
