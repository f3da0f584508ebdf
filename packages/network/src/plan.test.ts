import { planPodNetwork, guestAddresses, guestAddresses6, netmask, NetworkConfigError } from './plan.js';
import { masqueradeRuleset, parsePodNetworkConfig } from './phase1.js';
import { parseResolvConf } from './resolv.js';
import { withGuestMac } from './phase2.js';
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
      vmIpv6Cidr: 'fd10:0:2::/120',
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
  test('vmIPv6NetworkCIDR moves the guest IPv6 subnet; a bad one is refused with its path', () => {
    const net = (c: string) => ({ name: 'default', pod: { vmIPv6NetworkCIDR: c } });
    expect(planPodNetwork(vmi({ masquerade: {} }, net('fd20:1::/64')))!.vmIpv6Cidr).toBe('fd20:1::/64');
    for (const bad of ['fd20::/127', '10.0.0.0/24', 'fd20::', 'zz::/64', '::ffff:1.2.3.4/120'])
      expect(() => planPodNetwork(vmi({ masquerade: {} }, net(bad)))).toThrow(
        `spec.networks[0].pod.vmIPv6NetworkCIDR: ${JSON.stringify(bad)} is not an IPv6 CIDR with room for two hosts`,
      );
    // only masquerade uses it
    expect(planPodNetwork(vmi({ bridge: {} }, net('bad')))!.binding).toBe('bridge');
  });
});

test('guestAddresses and netmask', () => {
  expect(guestAddresses('10.0.2.0/24')).toEqual({ gateway: '10.0.2.1', guest: '10.0.2.2', prefix: 24 });
  expect(guestAddresses('10.9.3.7/16')).toEqual({ gateway: '10.9.0.1', guest: '10.9.0.2', prefix: 16 });
  expect(netmask(24)).toBe('255.255.255.0');
  expect(guestAddresses6('fd10:0:2::/120')).toEqual({
    gateway: 'fd10:0:2::1',
    guest: 'fd10:0:2::2',
    prefix: 120,
  });
  // host bits cleared; RFC 5952 text (lowercase, the longest zero run compressed)
  expect(guestAddresses6('FD20:1:0:0:abcd::7/64')).toEqual({
    gateway: 'fd20:1::1',
    guest: 'fd20:1::2',
    prefix: 64,
  });
  expect(guestAddresses6('2001:db8:0:1:0:0:0:0/112')).toEqual({
    gateway: '2001:db8:0:1::1',
    guest: '2001:db8:0:1::2',
    prefix: 112,
  });
  expect(guestAddresses6('::/0')).toEqual({ gateway: '::1', guest: '::2', prefix: 0 });
  expect(netmask(20)).toBe('255.255.240.0');
});

test('parseResolvConf: IPv4 servers, IPv6 servers apart (DHCPv6), the last search line, comments', () => {
  expect(
    parseResolvConf(
      '# x\nnameserver 10.96.0.10\nnameserver fd00::10\nsearch a.svc.cluster.local svc.cluster.local\noptions ndots:5\n',
    ),
  ).toEqual({
    nameservers: ['10.96.0.10'],
    nameservers6: ['fd00::10'],
    searchDomains: ['a.svc.cluster.local', 'svc.cluster.local'],
  });
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
  // IPv6: its own table in the ip6 family, the guest's IPv6 source masqueraded
  const v6 = JSON.stringify(masqueradeRuleset(plan, 'fd10:0:2::2', 'ip6'));
  expect(v6).toContain('{"table":{"family":"ip6","name":"kubevirt"}}');
  expect(v6).toContain('{"payload":{"protocol":"ip6","field":"saddr"}},"right":"fd10:0:2::2"');
  expect(v6).not.toContain('"family":"ip"');
});

test('parsePodNetworkConfig: phase 1 output accepted; untrusted fields checked against the plan, each named', () => {
  const plan = planPodNetwork(vmi({ masquerade: {} }))!;
  const good = {
    binding: 'masquerade',
    podInterface: 'eth0',
    bridge: 'k6t-eth0',
    tap: 'tap0',
    mtu: 1400,
    serverAddress: '10.0.2.1',
    guest: { address: '10.0.2.2', prefix: 24, gateway: '10.0.2.1', routes: [] },
    podAddress: '192.168.1.2',
  };
  expect(parsePodNetworkConfig(JSON.stringify(good), plan)).toEqual(good);
  const bad = (patch: object, msg: string) =>
    expect(() => parsePodNetworkConfig(JSON.stringify({ ...good, ...patch }), plan, 'f.json')).toThrow(msg);
  bad({ binding: 'bridge' }, 'f.json: binding: "bridge" is not "masquerade"');
  bad({ tap: 'eth0' }, 'f.json: tap: "eth0" is not "tap0"');
  bad({ mtu: 70000 }, 'f.json: mtu: 70000 is not an integer in [68, 65535]');
  bad({ serverAddress: '10.0.2.1; rm -rf /' }, 'f.json: serverAddress:');
  bad({ guest: { ...good.guest, prefix: 33 } }, 'f.json: guest.prefix: 33');
  bad(
    { guest: { ...good.guest, routes: [{ dst: 'x' }] } },
    'f.json: guest.routes[0].dst: "x" is not an IPv4 CIDR',
  );
  bad({ guest: 'x' }, 'f.json: guest: must be an object');
  const ipv6 = { podAddress: 'fd00::2', guest: 'fd10:0:2::2', gateway: 'fd10:0:2::1', prefix: 120 };
  expect(parsePodNetworkConfig(JSON.stringify({ ...good, ipv6 }), plan)).toEqual({ ...good, ipv6 });
  bad({ ipv6: { ...ipv6, guest: '10.0.2.2' } }, 'f.json: ipv6.guest: "10.0.2.2" is not an IPv6 address');
  bad({ ipv6: { ...ipv6, prefix: 129 } }, 'f.json: ipv6.prefix: 129');
  expect(() => parsePodNetworkConfig('{', plan, 'f.json')).toThrow('f.json: not JSON');
});

test("the bridge binding's MAC swap: moved.mac checked; withGuestMac gives the pod interface that MAC unless it has its own", () => {
  const plan = planPodNetwork(vmi({ bridge: {} }))!;
  const good = {
    binding: 'bridge',
    podInterface: 'eth0',
    bridge: 'k6t-eth0',
    tap: 'tap0',
    mtu: 1500,
    serverAddress: '169.254.75.10',
    guest: { address: '10.244.0.7', prefix: 24, gateway: '10.244.0.1', routes: [] },
    podAddress: '10.244.0.7',
    moved: { address: '10.244.0.7', prefix: 24, routes: [], mac: '0a:58:0a:f4:00:07' },
  };
  expect(parsePodNetworkConfig(JSON.stringify(good), plan)).toEqual(good);
  expect(() =>
    parsePodNetworkConfig(
      JSON.stringify({ ...good, moved: { ...good.moved, mac: 'ff:ff' } }),
      plan,
      'f.json',
    ),
  ).toThrow('f.json: moved.mac: "ff:ff" is not aa:bb:cc:dd:ee:ff');

  const server = { guestNic: { interfaceName: 'default', mac: '0a:58:0a:f4:00:07' } };
  const v = vmi({ bridge: {} });
  const swapped = withGuestMac(v, server);
  expect(swapped.spec.domain.devices!.interfaces![0]!.macAddress).toBe('0a:58:0a:f4:00:07');
  expect(v.spec.domain.devices!.interfaces![0]!.macAddress).toBeUndefined(); // a copy: the VMI is unchanged
  const own = vmi({ bridge: {}, macAddress: '02:00:00:00:00:01' });
  expect(withGuestMac(own, server)).toBe(own);
  expect(withGuestMac(v, undefined)).toBe(v);
  expect(withGuestMac(v, { guestNic: { interfaceName: 'other', mac: '0a:58:0a:f4:00:07' } })).toBe(v);
});
