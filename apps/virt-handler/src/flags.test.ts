import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { FlagError, parseHandlerFlags, readMigrationTls } from './flags.js';

const daemonSet = fileURLToPath(new URL('../../../deploy/41-virt-handler.yaml', import.meta.url));

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
  it('the deployed DaemonSet (deploy/41-virt-handler.yaml): migrations over mutual TLS with the mounted Secrets, names checked both ways', () => {
    const yaml = readFileSync(daemonSet, 'utf8');
    const args = [...yaml.matchAll(/^\s+- (--[a-z-]+=\S+)$/gm)].map((m) => m[1]!);
    const f = parseHandlerFlags(args, { NODE_NAME: 'node01', MY_POD_IP: '10.0.0.7' });
    const t = f.migrationFlags.tls!;
    expect(t).toEqual({
      certFile: '/etc/virt-handler/subresource-certs/tls.crt',
      keyFile: '/etc/virt-handler/subresource-certs/tls.key',
      caFile: '/etc/virt-handler/subresource-certs/ca.crt',
      clientCertFile: '/etc/virt-handler/client-certs/tls.crt',
      clientKeyFile: '/etc/virt-handler/client-certs/tls.key',
      clientName: 'virt-handler-client',
      serverName: 'virt-handler',
    });
    expect(f.migrationFlags.address).toBe('10.0.0.7');
    expect(f.subresource?.clientNames).toEqual(['virt-controller']);
    // the launcher Pods' seccomp profile goes into kubelet's dir, mounted at the same path
    expect(f.seccompProfileDir).toBe('/var/lib/kubelet/seccomp');
    expect(f.seccompBaseProfile).toBeUndefined();
    expect(yaml).toMatch(/mountPath: \/var\/lib\/kubelet\/seccomp\n/);
    // every file is in a Secret volume the DaemonSet mounts
    const mounts = [...yaml.matchAll(/mountPath: (\/etc\/virt-handler\/[a-z-]+)/g)].map((m) => m[1]!);
    for (const file of [t.certFile, t.keyFile, t.caFile, t.clientCertFile!, t.clientKeyFile!])
      expect(mounts).toContain(file.slice(0, file.lastIndexOf('/')));
    expect(yaml).toMatch(/secretName: virt-handler-client-certs/);
    // what the proxy gets: the contents of those files, both names
    const opts = readMigrationTls(t, (file) => Buffer.from(`pem of ${file}`));
    expect(Object.fromEntries(Object.entries(opts).map(([k, v]) => [k, String(v)]))).toEqual({
      cert: 'pem of /etc/virt-handler/subresource-certs/tls.crt',
      key: 'pem of /etc/virt-handler/subresource-certs/tls.key',
      ca: 'pem of /etc/virt-handler/subresource-certs/ca.crt',
      clientCert: 'pem of /etc/virt-handler/client-certs/tls.crt',
      clientKey: 'pem of /etc/virt-handler/client-certs/tls.key',
      clientName: 'virt-handler-client',
      serverName: 'virt-handler',
    });
  });
  it('migration client certificate and names: together and with the TLS files', () => {
    const tls = ['--migration-cert-file=c', '--migration-key-file=k', '--migration-ca-file=ca'];
    expect(() => parseHandlerFlags(['--node-name=x', ...tls, '--migration-client-cert-file=cc'], {})).toThrow(
      /--migration-client-cert-file and --migration-client-key-file go together/,
    );
    expect(() => parseHandlerFlags(['--node-name=x', '--migration-server-name=virt-handler'], {})).toThrow(
      /--migration-server-name: needs --migration-cert-file/,
    );
    expect(() =>
      parseHandlerFlags(['--node-name=x', '--subresource-client-names=virt-controller'], {}),
    ).toThrow(/--subresource-client-names: .*with the --subresource-\*-file flags/);
  });
  it('seccomp: off unless a dir is given; absolute paths; the base only with the dir', () => {
    expect(parseHandlerFlags(['--node-name=x'], {}).seccompProfileDir).toBeUndefined();
    expect(
      parseHandlerFlags(['--node-name=x', '--seccomp-profile-dir=/s', '--seccomp-base-profile=/b.json'], {}),
    ).toMatchObject({ seccompProfileDir: '/s', seccompBaseProfile: '/b.json' });
    expect(() => parseHandlerFlags(['--node-name=x', '--seccomp-profile-dir=seccomp'], {})).toThrow(
      '--seccomp-profile-dir: must be an absolute path, got "seccomp"',
    );
    expect(() => parseHandlerFlags(['--node-name=x', '--seccomp-base-profile=/b.json'], {})).toThrow(
      '--seccomp-base-profile: only with --seccomp-profile-dir',
    );
  });
  it("healthz: off unless a port is given; upstream's CR by default; needs the subresource certificate", () => {
    const sub = [
      '--subresource-cert-file=/c',
      '--subresource-key-file=/k',
      '--subresource-client-ca-file=/ca',
    ];
    expect(parseHandlerFlags(['--node-name=x', ...sub], {}).healthz).toBeUndefined();
    expect(parseHandlerFlags(['--node-name=x', ...sub, '--healthz-port=8443'], {}).healthz).toEqual({
      port: 8443,
      kubeVirt: { namespace: 'kubevirt-ts', name: 'kubevirt' },
    });
    expect(
      parseHandlerFlags(
        ['--node-name=x', ...sub, '--healthz-port=0', '--kubevirt-namespace=kv', '--kubevirt-name=cr'],
        {},
      ).healthz,
    ).toEqual({ port: 0, kubeVirt: { namespace: 'kv', name: 'cr' } });
    expect(() => parseHandlerFlags(['--node-name=x', '--healthz-port=8443'], {})).toThrow(
      '--healthz-port: serves HTTPS with the --subresource-*-file certificate, which is missing',
    );
    expect(() => parseHandlerFlags(['--node-name=x', ...sub, '--healthz-port=web'], {})).toThrow(
      '--healthz-port: must be an integer >= 0, got "web"',
    );
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
