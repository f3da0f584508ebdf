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
