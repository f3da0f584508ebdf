import { parseOperatorFlags, UsageError } from './flags.js';

describe('parseOperatorFlags', () => {
  it('defaults from the environment', () => {
    expect(
      parseOperatorFlags(['--kubevirt-version=v0.1.0'], { KVTS_NAMESPACE: 'kv', KUBECONFIG: '/k' }),
    ).toEqual({
      kubeconfig: '/k',
      namespace: 'kv',
      kubevirtVersion: 'v0.1.0',
      defaultConfiguration: undefined,
      logLevel: undefined,
      caBundles: {
        secretName: 'kubevirt-ts-webhook-certs',
        mutatingWebhook: 'kubevirt-ts-mutator',
        validatingWebhook: 'kubevirt-ts-validator',
        apiService: 'v1.subresources.kubevirt.io',
      },
    });
    expect(parseOperatorFlags(['--kubevirt-version=v1', '--webhook-secret='], {}).caBundles).toBeUndefined();
    expect(
      parseOperatorFlags(['--kubevirt-version=v1', '--api-service=', '--mutating-webhook=m'], {}).caBundles,
    ).toEqual({
      secretName: 'kubevirt-ts-webhook-certs',
      mutatingWebhook: 'm',
      validatingWebhook: 'kubevirt-ts-validator',
      apiService: undefined,
    });
    expect(
      parseOperatorFlags(['--kubevirt-version=v1', '--default-configuration={"imagePullPolicy":"Never"}'], {})
        .defaultConfiguration,
    ).toEqual({ imagePullPolicy: 'Never' });
    expect(parseOperatorFlags(['--kubevirt-version=v1', '--namespace=x'], {}).namespace).toBe('x');
  });

  it.each([
    [[], /--kubevirt-version is required/],
    [['--kubevirt-version=v1', '--log-level=loud'], /--log-level/],
    [['--kubevirt-version=v1', '--colour'], /colour/],
    [['--kubevirt-version=v1', '--default-configuration={'], /--default-configuration: not JSON/],
    [['--kubevirt-version=v1', '--default-configuration=[]'], /must be a JSON object/],
  ])('refuses %j', (argv, re) => {
    expect(() => parseOperatorFlags(argv, {})).toThrow(UsageError);
    expect(() => parseOperatorFlags(argv, {})).toThrow(re);
  });
});
