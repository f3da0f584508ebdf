import { planPodNetwork, guestAddresses, netmask, NetworkConfigError } from './plan.js';
import { masqueradeRuleset } from './phase1.js';
import { parseResolvConf } from './resolv.js';
import { dnsmasqArgs } from './phase2.js';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';

const vmi = (iface: object, network: object = { name: 'default', pod: {} }) =>
  ({
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: 'v' },
    spec: { domain: { devices: { interfaces: [{ name: 'default', ...iface }] } }, networks: [network] },
  }) as unknown as VirtualMachineInstance;

describe('planPodNetwork', () => {
  test('masquerade with ports: names from the converter (tap0) and the pod interface (k6t-eth0)', () => {
    const p = planPodNetwork(vmi({ masquerade: {}, ports: [{ port: 80 }, { port: 53, protocol: 'UDP' }] }))!;
    expect(p).toMatchObject({
      binding: 'masquerade',
      tap: 'tap0',
      bridge: 'k6t-eth0',
      vmCidr: '10.0.2.0/24',
    });
    expect(p.ports).toEqual([
      { protocol: 'tcp', port: 80 },
      { protocol: 'udp', port: 53 },
    ]);
  });
  test('bridge is the binding when none is named; passt by binding name', () => {
    expect(planPodNetwork(vmi({}))!.binding).toBe('bridge');
    expect(planPodNetwork(vmi({ binding: { name: 'passt' } }))!.binding).toBe('passt');
    expect(planPodNetwork(vmi({ passt: {} }))!.binding).toBe('passt');
  });
  test('no pod network: no plan', () => {
    const v = vmi({ masquerade: {} });
    v.spec.networks = [];
    expect(planPodNetwork(v)).toBeUndefined();
  });
  test('Multus networks are refused with their path', () => {
    expect(() =>
      planPodNetwork(vmi({ bridge: {} }, { name: 'default', multus: { networkName: 'x' } })),
    ).toThrow('spec.networks[0].multus: Multus secondary networks are not supported yet');
  });
  test('duplicate and out-of-range ports are refused with their path', () => {
    expect(() =>
      planPodNetwork(vmi({ masquerade: {}, ports: [{ port: 80 }, { port: 80, protocol: 'TCP' }] })),
    ).toThrow('spec.domain.devices.interfaces[0].ports[1].port: duplicate port tcp/80');
    expect(() => planPodNetwork(vmi({ masquerade: {}, ports: [{ port: 0 }] }))).toThrow(NetworkConfigError);
  });
  test('vmNetworkCIDR moves the guest subnet; a bad one is refused with its path', () => {
    expect(
      planPodNetwork(vmi({ masquerade: {} }, { name: 'default', pod: { vmNetworkCIDR: '10.9.0.0/16' } }))!
        .vmCidr,
    ).toBe('10.9.0.0/16');
    expect(() =>
      planPodNetwork(vmi({ masquerade: {} }, { name: 'default', pod: { vmNetworkCIDR: '10.9.0.0/31' } })),
    ).toThrow('spec.networks[0].pod.vmNetworkCIDR');
  });
});

test('guestAddresses and netmask', () => {
  expect(guestAddresses('10.0.2.0/24')).toEqual({ gateway: '10.0.2.1', guest: '10.0.2.2', prefix: 24 });
  expect(guestAddresses('10.9.3.7/16')).toEqual({ gateway: '10.9.0.1', guest: '10.9.0.2', prefix: 16 });
  expect(netmask(24)).toBe('255.255.255.0');
  expect(netmask(20)).toBe('255.255.240.0');
});

test('parseResolvConf: IPv4 servers, the last search line, comments', () => {
  expect(
    parseResolvConf(
      '# x\nnameserver 10.96.0.10\nnameserver fd00::10\nsearch a.svc.cluster.local svc.cluster.local\noptions ndots:5\n',
    ),
  ).toEqual({ nameservers: ['10.96.0.10'], searchDomains: ['a.svc.cluster.local', 'svc.cluster.local'] });
  expect(parseResolvConf('domain x.y\nsearch b.c ;bad\n')).toEqual({
    nameservers: [],
    searchDomains: ['b.c'],
  });
});

test('masquerade ruleset: only listed ports are forwarded; outbound masqueraded', () => {
  const plan = planPodNetwork(vmi({ masquerade: {}, ports: [{ port: 80 }, { port: 443 }] }))!;
  const rs = JSON.stringify(masqueradeRuleset(plan, '10.0.2.2'));
  expect(rs).toContain('{"set":[80,443]}');
  expect(rs).toContain('"masquerade":null');
  const all = JSON.stringify(masqueradeRuleset(planPodNetwork(vmi({ masquerade: {} }))!, '10.0.2.2'));
  expect(all).not.toContain('dport');
});

test('dnsmasqArgs: bridge only, no DNS service, a hostname that cannot be sent is refused', () => {
  const config = {
    binding: 'masquerade' as const,
    podInterface: 'eth0',
    bridge: 'k6t-eth0',
    tap: 'tap0',
    mtu: 1400,
    serverAddress: '10.0.2.1',
    guest: { address: '10.0.2.2', prefix: 24, gateway: '10.0.2.1', routes: [] },
    podAddress: '192.168.1.2',
  };
  const dns = { nameservers: ['10.96.0.10'], searchDomains: ['ns.svc.cluster.local'] };
  const args = dnsmasqArgs({ config, dns, hostname: 'vm1', runDir: '/x' }, '/x/l');
  expect(args).toEqual(
    expect.arrayContaining([
      '--interface=k6t-eth0',
      '--bind-interfaces',
      '--port=0',
      '--dhcp-range=10.0.2.2,10.0.2.2,255.255.255.0,infinite',
      '--dhcp-option=option:dns-server,10.96.0.10',
      '--dhcp-option=option:domain-search,ns.svc.cluster.local',
      '--dhcp-option=option:mtu,1400',
    ]),
  );
  expect(() => dnsmasqArgs({ config, dns, hostname: 'a b,--x', runDir: '/x' }, '/x/l')).toThrow(
    'cannot be sent',
  );
});
