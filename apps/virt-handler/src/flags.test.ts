import { FlagError, parseHandlerFlags } from './flags.js';

describe('virt-handler flags', () => {
  it('defaults follow upstream paths; the node name comes from $NODE_NAME', () => {
    const f = parseHandlerFlags([], { NODE_NAME: 'n1' });
    expect(f).toMatchObject({
      nodeName: 'n1',
      podsDir: '/var/lib/kubelet/pods',
      handlerDir: '/var/run/kubevirt',
      launcherUid: 107,
      launcherGid: 107,
      launcherReadyTimeoutMs: 300_000,
      heartbeatIntervalMs: 60_000,
      httpHost: '127.0.0.1',
      devicePluginDir: '/var/lib/kubelet/device-plugins',
    });
    expect(f.httpPort).toBeUndefined();
    expect(f.subresource).toBeUndefined();
    const tls = ['--subresource-cert-file=c', '--subresource-key-file=k', '--subresource-client-ca-file=ca'];
    expect(parseHandlerFlags(['--node-name', 'x', ...tls], {}).subresource).toEqual({
      certFile: 'c',
      keyFile: 'k',
      clientCaFile: 'ca',
      port: 8186,
      address: '0.0.0.0',
    });
  });
  it('parses values', () => {
    const f = parseHandlerFlags(
      ['--node-name', 'x', '--launcher-uid', '0', '--port', '0', '--launcher-ready-timeout-seconds', '7'],
      {},
    );
    expect(f).toMatchObject({
      nodeName: 'x',
      launcherUid: 0,
      launcherGid: 0,
      httpPort: 0,
      launcherReadyTimeoutMs: 7000,
    });
    // an empty --device-plugin-dir turns the device plugins off
    expect(
      parseHandlerFlags(['--node-name', 'x', '--device-plugin-dir', ''], {}).devicePluginDir,
    ).toBeUndefined();
  });
  it('names the bad flag', () => {
    expect(() => parseHandlerFlags([], {})).toThrow(/--node-name: required/);
    expect(() => parseHandlerFlags(['--node-name', 'x', '--launcher-uid', 'qemu'], {})).toThrow(
      /--launcher-uid: must be an integer >= 0, got "qemu"/,
    );
    expect(() => parseHandlerFlags(['--node-name', 'x', '--bogus'], {})).toThrow(FlagError);
    expect(() => parseHandlerFlags(['--node-name', 'x', '--subresource-cert-file', 'c'], {})).toThrow(
      /--subresource-cert-file, --subresource-key-file and --subresource-client-ca-file go together/,
    );
  });
});
