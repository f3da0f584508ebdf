// The DHCPv6 logic without sockets (RFC 8415): client messages built byte by byte as a client sends them,
// replies decoded field by field, and random/truncated bytes that must be dropped with a DhcpPacketError.
import { randomBytes } from 'node:crypto';
import { DhcpPacketError } from './dhcp.js';
import {
  dhcp6Reply,
  duidLL,
  ipv6Bytes,
  ipv6String,
  parseDhcp6Message,
  parseDhcp6Request,
  parseOptions6,
  INFINITY,
  Msg6,
  Opt6,
  Status6,
  type Dhcp6LeaseConfig,
  type Option6,
} from './dhcp6.js';
import { lease6Config } from './phase2.js';
import type { PodNetworkConfig } from './phase1.js';
import { parseResolvConf } from './resolv.js';

const SERVER_DUID = Buffer.from([0, 3, 0, 1, 0x02, 0x42, 0xac, 0x11, 0x00, 0x02]);
// a DUID-LLT as dhclient makes it: type 1, hw type 1, time, MAC
const CLIENT_DUID = Buffer.from([0, 1, 0, 1, 0x2c, 0x1f, 0x00, 0x01, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56]);
const lc: Dhcp6LeaseConfig = {
  serverDuid: SERVER_DUID,
  address: 'fd10:0:2::2',
  dnsServers: ['fd00:10:96::a'],
  searchDomains: ['ns1.svc.cluster.local', 'cluster.local'],
};

const opt = (code: number, data: number[] | Buffer): number[] => [
  code >> 8,
  code & 255,
  data.length >> 8,
  data.length & 255,
  ...data,
];
const u32 = (x: number) => [(x >>> 24) & 255, (x >>> 16) & 255, (x >>> 8) & 255, x & 255];
/** IA_NA with IAID, T1 = T2 = 0 (the client's preference), and optionally addresses it names */
const iaNa = (iaid: number, addrs: string[] = []) =>
  opt(Opt6.IA_NA, [
    ...u32(iaid),
    ...u32(0),
    ...u32(0),
    ...addrs.flatMap((a) => opt(Opt6.IAADDR, [...ipv6Bytes(a), ...u32(0), ...u32(0)])),
  ]);
/** A client message: type, transaction id 0xabcdef, options */
const msg = (type: number, ...options: number[][]) =>
  Buffer.from([type, 0xab, 0xcd, 0xef, ...options.flat()]);

const find = (os: Option6[], code: number) => os.filter((o) => o.code === code);
function status(data: Buffer): [number, string] {
  return [data.readUInt16BE(0), data.subarray(2).toString('utf8')];
}
/** The IA_NA of a reply: IAID, T1, T2, addresses with lifetimes, status */
function decodeIaNa(o: Option6) {
  const subs = parseOptions6(o.data, 12);
  return {
    iaid: o.data.readUInt32BE(0),
    t1: o.data.readUInt32BE(4),
    t2: o.data.readUInt32BE(8),
    addresses: find(subs, Opt6.IAADDR).map((a) => ({
      address: ipv6String(a.data.subarray(0, 16)),
      preferred: a.data.readUInt32BE(16),
      valid: a.data.readUInt32BE(20),
    })),
    status: find(subs, Opt6.STATUS_CODE).map((s) => status(s.data)),
  };
}
function reply(buf: Buffer) {
  const a = dhcp6Reply(buf, lc);
  if (a.kind !== 'reply') throw new Error(`expected a reply, got ${a.kind}: ${a.reason}`);
  const m = parseDhcp6Message(a.packet);
  return { action: a, ...m };
}

test('IPv6 address text <-> bytes (RFC 5952 canonical form)', () => {
  expect([...ipv6Bytes('fd10:0:2::2')]).toEqual([0xfd, 0x10, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
  expect(ipv6String(ipv6Bytes('fd10:0000:0002:0:0:0:0:0002'))).toBe('fd10:0:2::2');
  expect(ipv6String(ipv6Bytes('::'))).toBe('::');
  expect(ipv6String(ipv6Bytes('::1'))).toBe('::1');
  expect(ipv6String(ipv6Bytes('fe80::'))).toBe('fe80::');
  expect(ipv6String(ipv6Bytes('2001:db8:0:1:0:0:0:1'))).toBe('2001:db8:0:1::1'); // the longer zero run
  expect(ipv6String(ipv6Bytes('2001:db8::1:0:0:1'))).toBe('2001:db8::1:0:0:1'); // the first of equal runs
  expect(ipv6String(ipv6Bytes('2001:db8:1:2:3:4:0:5'))).toBe('2001:db8:1:2:3:4:0:5'); // one zero: no ::
  expect(ipv6String(ipv6Bytes('::ffff:10.0.2.2'))).toBe('::ffff:a00:202');
  expect(() => ipv6Bytes('10.0.2.2')).toThrow(/not an IPv6 address/);
  expect(() => ipv6Bytes('fe80::1%eth0')).toThrow(/not an IPv6 address/);
  expect([...duidLL('02:42:AC:11:00:02')]).toEqual([...SERVER_DUID]);
  expect(() => duidLL('02:42')).toThrow(/MAC address/);
});

test('SOLICIT -> ADVERTISE: same transaction, client id echoed, our DUID-LL, IA_NA (same IAID) with fd10:0:2::2 for ever, DNS (23), search list (24)', () => {
  const r = reply(
    msg(Msg6.SOLICIT, opt(Opt6.CLIENTID, CLIENT_DUID), opt(Opt6.ELAPSED_TIME, [0, 0]), iaNa(0x1234)),
  );
  expect(r.type).toBe(Msg6.ADVERTISE);
  expect(r.xid).toBe(0xabcdef);
  expect(r.action.leased).toBe(false); // an offer, not yet an address in use
  expect(find(r.options, Opt6.CLIENTID)[0]!.data).toEqual(CLIENT_DUID);
  expect(find(r.options, Opt6.SERVERID)[0]!.data).toEqual(SERVER_DUID);
  const ias = find(r.options, Opt6.IA_NA).map(decodeIaNa);
  expect(ias).toEqual([
    {
      iaid: 0x1234,
      t1: INFINITY,
      t2: INFINITY,
      addresses: [{ address: 'fd10:0:2::2', preferred: INFINITY, valid: INFINITY }],
      status: [],
    },
  ]);
  const dns = find(r.options, Opt6.DNS_SERVERS)[0]!.data;
  expect(dns.length).toBe(16);
  expect(ipv6String(dns)).toBe('fd00:10:96::a');
  // RFC 1035 names, uncompressed (RFC 8415 10, RFC 3646)
  expect(find(r.options, Opt6.DOMAIN_LIST)[0]!.data).toEqual(
    Buffer.from('\x03ns1\x03svc\x07cluster\x05local\x00\x07cluster\x05local\x00', 'latin1'),
  );
  expect(find(r.options, Opt6.RAPID_COMMIT)).toEqual([]);
});

test('SOLICIT with rapid commit -> REPLY with rapid commit and the address (a lease)', () => {
  const r = reply(msg(Msg6.SOLICIT, opt(Opt6.CLIENTID, CLIENT_DUID), opt(Opt6.RAPID_COMMIT, []), iaNa(7)));
  expect(r.type).toBe(Msg6.REPLY);
  expect(r.action.leased).toBe(true);
  expect(find(r.options, Opt6.RAPID_COMMIT)).toHaveLength(1);
  expect(decodeIaNa(find(r.options, Opt6.IA_NA)[0]!).addresses[0]!.address).toBe('fd10:0:2::2');
});

test('REQUEST / RENEW for our server -> REPLY with the address; REBIND (no server id) too; another server -> ignored', () => {
  const sid = opt(Opt6.SERVERID, SERVER_DUID);
  const cid = opt(Opt6.CLIENTID, CLIENT_DUID);
  for (const type of [Msg6.REQUEST, Msg6.RENEW]) {
    const r = reply(msg(type, cid, sid, iaNa(1, ['fd10:0:2::2'])));
    expect(r.type).toBe(Msg6.REPLY);
    expect(r.action.leased).toBe(true);
    expect(decodeIaNa(find(r.options, Opt6.IA_NA)[0]!).addresses).toEqual([
      { address: 'fd10:0:2::2', preferred: INFINITY, valid: INFINITY },
    ]);
  }
  // a rebind naming a stale address: ours, and the stale one with lifetimes 0 (RFC 8415 18.3.5)
  const rb = reply(msg(Msg6.REBIND, cid, iaNa(1, ['fd10:0:2::9'])));
  expect(rb.type).toBe(Msg6.REPLY);
  expect(decodeIaNa(find(rb.options, Opt6.IA_NA)[0]!).addresses).toEqual([
    { address: 'fd10:0:2::2', preferred: INFINITY, valid: INFINITY },
    { address: 'fd10:0:2::9', preferred: 0, valid: 0 },
  ]);
  const other = dhcp6Reply(
    msg(Msg6.REQUEST, cid, opt(Opt6.SERVERID, [0, 3, 0, 1, 1, 2, 3, 4, 5, 6]), iaNa(1)),
    lc,
  );
  expect(other).toMatchObject({ kind: 'ignored', reason: 'addressed to another server' });
});

test('CONFIRM: Success for the guest address, NotOnLink for another; RELEASE / DECLINE: Success, no address; INFORMATION-REQUEST: DNS only', () => {
  const cid = opt(Opt6.CLIENTID, CLIENT_DUID);
  const ok = reply(msg(Msg6.CONFIRM, cid, iaNa(1, ['fd10:0:2:0::2'])));
  expect(ok.type).toBe(Msg6.REPLY);
  expect(status(find(ok.options, Opt6.STATUS_CODE)[0]!.data)[0]).toBe(Status6.Success);
  const moved = reply(msg(Msg6.CONFIRM, cid, iaNa(1, ['2001:db8::5'])));
  expect(status(find(moved.options, Opt6.STATUS_CODE)[0]!.data)).toEqual([
    Status6.NotOnLink,
    'only fd10:0:2::2 is served here',
  ]);
  expect(dhcp6Reply(msg(Msg6.CONFIRM, cid, iaNa(1)), lc).kind).toBe('ignored');
  for (const type of [Msg6.RELEASE, Msg6.DECLINE]) {
    const r = reply(msg(type, cid, opt(Opt6.SERVERID, SERVER_DUID), iaNa(3, ['fd10:0:2::2'])));
    expect(r.type).toBe(Msg6.REPLY);
    expect(r.action.leased).toBe(false);
    expect(status(find(r.options, Opt6.STATUS_CODE)[0]!.data)[0]).toBe(Status6.Success);
    expect(decodeIaNa(find(r.options, Opt6.IA_NA)[0]!).addresses).toEqual([]);
  }
  const info = reply(msg(Msg6.INFORMATION_REQUEST, opt(Opt6.ORO, [0, 23, 0, 24])));
  expect(info.type).toBe(Msg6.REPLY);
  expect(info.options.map((o) => o.code)).toEqual([Opt6.SERVERID, Opt6.DNS_SERVERS, Opt6.DOMAIN_LIST]);
});

test('IA_TA and IA_PD are answered with NoAddrsAvail / NoPrefixAvail; a SOLICIT without any IA gets NoAddrsAvail', () => {
  const cid = opt(Opt6.CLIENTID, CLIENT_DUID);
  const r = reply(
    msg(Msg6.SOLICIT, cid, opt(Opt6.IA_TA, u32(9)), opt(Opt6.IA_PD, [...u32(10), ...u32(0), ...u32(0)])),
  );
  const ta = find(r.options, Opt6.IA_TA)[0]!;
  expect(ta.data.readUInt32BE(0)).toBe(9);
  expect(status(parseOptions6(ta.data, 4)[0]!.data)[0]).toBe(Status6.NoAddrsAvail);
  const pd = find(r.options, Opt6.IA_PD)[0]!;
  expect(pd.data.readUInt32BE(0)).toBe(10);
  expect(status(parseOptions6(pd.data, 12)[0]!.data)[0]).toBe(Status6.NoPrefixAvail);
  const none = reply(msg(Msg6.SOLICIT, cid));
  expect(status(find(none.options, Opt6.STATUS_CODE)[0]!.data)[0]).toBe(Status6.NoAddrsAvail);
  // no DNS servers, no search list: neither option
  const bare = dhcp6Reply(msg(Msg6.SOLICIT, cid, iaNa(1)), { ...lc, dnsServers: [], searchDomains: [] });
  if (bare.kind !== 'reply') throw new Error('no reply');
  expect(parseDhcp6Message(bare.packet).options.map((o) => o.code)).toEqual([
    Opt6.CLIENTID,
    Opt6.SERVERID,
    Opt6.IA_NA,
  ]);
});

test('malformed and out-of-place messages are DhcpPacketErrors with the reason', () => {
  const cid = opt(Opt6.CLIENTID, CLIENT_DUID);
  const sid = opt(Opt6.SERVERID, SERVER_DUID);
  const bad: [Buffer, RegExp][] = [
    [Buffer.from([1, 0, 0]), /too short/],
    [msg(Msg6.ADVERTISE, cid, sid), /not one a client sends/],
    [msg(Msg6.RELAY_FORW), /not one a client sends/],
    [msg(Msg6.SOLICIT, iaNa(1)), /without a client identifier/],
    [msg(Msg6.SOLICIT, cid, sid, iaNa(1)), /SOLICIT with a server identifier/],
    [msg(Msg6.REQUEST, cid, iaNa(1)), /REQUEST without a server identifier/],
    [msg(Msg6.SOLICIT, cid, cid), /option 1 appears 2 times/],
    [msg(Msg6.SOLICIT, cid, [0, 3, 0, 20, 1, 2]), /option 3 in message is truncated/],
    [msg(Msg6.SOLICIT, cid, [0, 3]), /option header at \d+ in message is truncated/],
    [msg(Msg6.SOLICIT, cid, opt(Opt6.IA_NA, [1, 2, 3])), /option 3 has 3 bytes/],
    [
      msg(Msg6.SOLICIT, cid, opt(Opt6.IA_NA, [...u32(1), ...u32(0), ...u32(0), ...opt(Opt6.IAADDR, [1, 2])])),
      /IA address option has 2 bytes/,
    ],
    [msg(Msg6.SOLICIT, opt(Opt6.CLIENTID, [1])), /client identifier of 1 bytes/],
  ];
  for (const [b, why] of bad) {
    expect(() => dhcp6Reply(b, lc)).toThrow(DhcpPacketError);
    expect(() => parseDhcp6Request(b)).toThrow(why);
  }
});

test('fuzz: random and mutated client messages give a reply, an ignore or a DhcpPacketError, nothing else', () => {
  const seeds = [
    msg(Msg6.SOLICIT, opt(Opt6.CLIENTID, CLIENT_DUID), opt(Opt6.RAPID_COMMIT, []), iaNa(1, ['fd10:0:2::2'])),
    msg(
      Msg6.RENEW,
      opt(Opt6.CLIENTID, CLIENT_DUID),
      opt(Opt6.SERVERID, SERVER_DUID),
      iaNa(1, ['fd10:0:2::2']),
    ),
  ];
  let replies = 0;
  for (let i = 0; i < 20_000; i++) {
    let b: Buffer;
    if (i % 2) b = randomBytes(i % 200);
    else {
      b = Buffer.from(seeds[i % 4 === 0 ? 0 : 1]!);
      for (let k = 0; k < 1 + (i % 4); k++)
        b[Math.floor(Math.random() * b.length)] = Math.floor(Math.random() * 256);
      if (i % 3 === 0) b = b.subarray(0, Math.floor(Math.random() * b.length));
    }
    try {
      if (dhcp6Reply(b, lc).kind === 'reply') replies++;
    } catch (e) {
      if (!(e instanceof DhcpPacketError))
        throw new Error(`${(e as Error).message} for ${b.toString('hex')}`);
    }
  }
  expect(replies).toBeGreaterThan(0);
});

test('lease6Config: the IPv6 side of phase 1, the IPv6 name servers of resolv.conf; refused without an IPv6 side', () => {
  const config: PodNetworkConfig = {
    binding: 'masquerade',
    podInterface: 'eth0',
    bridge: 'k6t-eth0',
    tap: 'tap0',
    mtu: 1400,
    serverAddress: '10.0.2.1',
    guest: { address: '10.0.2.2', prefix: 24, gateway: '10.0.2.1', routes: [] },
    podAddress: '10.244.0.5',
    ipv6: { podAddress: 'fd00:77::2', guest: 'fd10:0:2::2', gateway: 'fd10:0:2::1', prefix: 120 },
  };
  const dns = parseResolvConf(
    'nameserver 10.96.0.10\nnameserver fd00:10:96::a\nnameserver fe80::1%eth0\nsearch a.svc.cluster.local cluster.local\n',
  );
  expect(dns).toEqual({
    nameservers: ['10.96.0.10'],
    nameservers6: ['fd00:10:96::a'],
    searchDomains: ['a.svc.cluster.local', 'cluster.local'],
  });
  expect(lease6Config({ config, dns }, '02:42:ac:11:00:02')).toEqual({
    serverDuid: SERVER_DUID,
    address: 'fd10:0:2::2',
    dnsServers: ['fd00:10:96::a'],
    searchDomains: ['a.svc.cluster.local', 'cluster.local'],
  });
  const { ipv6: _v6, ...v4only } = config;
  expect(() => lease6Config({ config: v4only, dns }, '02:42:ac:11:00:02')).toThrow(/has no IPv6 side/);
});
