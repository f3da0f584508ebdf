import { UsageError, parseControllerFlags } from './flags.js';

describe('virt-controller flags', () => {
  it('defaults (upstream worker counts, the Lease deploy/ names, identity from POD_NAME)', () => {
    expect(parseControllerFlags([], { POD_NAME: 'vc-1', POD_NAMESPACE: 'ns1' }, 'host')).toEqual({
      kubeconfig: undefined,
      configNamespace: 'kubevirt-ts',
      configName: 'kubevirt-ts-config',
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
      metricsPort: 8080,
    });
    expect(parseControllerFlags([], {}, 'host').identity).toBe('host');
  });
  it('takes the flags deploy/ passes', () => {
    const f = parseControllerFlags(['--leader-elect', '--lease-name=x', '--vmi-workers', '4'], {}, 'h');
    expect(f).toMatchObject({ leaderElect: true, leaseName: 'x', vmiWorkers: 4 });
  });
  it.each([
    [['--vm-workers=0'], /--vm-workers: must be a positive integer/],
    [['--log-level=loud'], /--log-level/],
    [['--nope'], /nope/],
    [['--tls-cert-file=/c'], /go together/],
    [['--webhook-port=x'], /--webhook-port/],
  ])('refuses %j', (argv, re) => {
    expect(() => parseControllerFlags(argv, {}, 'h')).toThrow(UsageError);
    expect(() => parseControllerFlags(argv, {}, 'h')).toThrow(re);
  });
});
