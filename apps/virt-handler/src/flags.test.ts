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
  it('migration: address from $MY_POD_IP, TLS files together, an absolute libvirt socket path', () => {
    expect(parseHandlerFlags(['--node-name', 'x'], { MY_POD_IP: '10.0.0.7' }).migrationFlags).toEqual({
      address: '10.0.0.7',
      bindAddress: undefined,
      tls: undefined,
      launcherLibvirtSocket: undefined,
    });
    const f = parseHandlerFlags(
      [
        '--node-name',
        'x',
        '--migration-address=10.0.0.9',
        '--migration-bind-address=10.0.0.9',
        '--migration-cert-file=c',
        '--migration-key-file=k',
        '--migration-ca-file=ca',
        '--launcher-libvirt-socket=/run/lv/libvirt-sock',
      ],
      { MY_POD_IP: '10.0.0.7' },
    );
    expect(f.migrationFlags).toEqual({
      address: '10.0.0.9',
      bindAddress: '10.0.0.9',
      tls: { certFile: 'c', keyFile: 'k', caFile: 'ca' },
      launcherLibvirtSocket: '/run/lv/libvirt-sock',
    });
    expect(() => parseHandlerFlags(['--node-name', 'x', '--migration-ca-file', 'ca'], {})).toThrow(
      /--migration-cert-file, --migration-key-file and --migration-ca-file go together/,
    );
    expect(() =>
      parseHandlerFlags(['--node-name', 'x', '--launcher-libvirt-socket', 'libvirt-sock'], {}),
    ).toThrow(/--launcher-libvirt-socket: must be an absolute path/);
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
