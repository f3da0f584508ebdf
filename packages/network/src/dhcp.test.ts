// The DHCP logic without sockets: requests built byte by byte as a client sends them, replies decoded
// field by field, and random/truncated bytes that must be dropped with a DhcpPacketError, never a crash.
import { randomBytes } from 'node:crypto';
import {
  dhcpReply,
  parseDhcpRequest,
  encodeDomainSearch,
  encodeClasslessRoutes,
  DhcpPacketError,
  MessageType,
  type DhcpLeaseConfig,
} from './dhcp.js';
import { leaseConfig } from './phase2.js';

const MAC = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
const lc: DhcpLeaseConfig = {
  serverAddress: '10.0.2.1',
  address: '10.0.2.2',
  prefix: 24,
  router: '10.0.2.1',
  routes: [],
  mtu: 1400,
  dnsServers: ['10.96.0.10', '10.96.0.11'],
  searchDomains: ['ns1.svc.cluster.local', 'cluster.local'],
  hostname: 'vm1',
};

/** A BOOTREQUEST as a client builds it. */
function request(type: number, opts: { ciaddr?: number[]; options?: number[]; mac?: number[] } = {}) {
  const b = Buffer.alloc(240);
  b[0] = 1;
  b[1] = 1;
  b[2] = 6;
  b.writeUInt32BE(0xdeadbeef, 4);
  b.writeUInt16BE(0x8000, 10);
  if (opts.ciaddr) b.set(opts.ciaddr, 12);
  b.set(opts.mac ?? MAC, 28);
  b.writeUInt32BE(0x63825363, 236);
  return Buffer.concat([b, Buffer.from([53, 1, type, ...(opts.options ?? []), 255])]);
}

/** Decodes a reply: header fields and options (code -> bytes). */
function decode(p: Buffer) {
  const options = new Map<number, Buffer>();
  let i = 240;
  while (i < p.length && p[i] !== 255) {
    if (p[i] === 0) {
      i++;
      continue;
    }
    const prev = options.get(p[i]!);
    const v = p.subarray(i + 2, i + 2 + p[i + 1]!);
    options.set(p[i]!, prev ? Buffer.concat([prev, v]) : v);
    i += 2 + p[i + 1]!;
  }
  const ip = (at: number) => [...p.subarray(at, at + 4)].join('.');
  return {
    op: p[0],
    xid: p.readUInt32BE(4),
    flags: p.readUInt16BE(10),
    ciaddr: ip(12),
    yiaddr: ip(16),
    chaddr: [...p.subarray(28, 34)],
    type: options.get(53)?.[0],
    opt: (c: number) => options.get(c),
    ipsOf: (c: number) => {
      const v = options.get(c)!;
      return Array.from({ length: v.length / 4 }, (_, k) => [...v.subarray(4 * k, 4 * k + 4)].join('.'));
    },
    length: p.length,
  };
}

const replyOf = (buf: Buffer, c = lc) => {
  const a = dhcpReply(buf, c);
  if (a.kind !== 'reply') throw new Error(`expected a reply, got ${a.kind}`);
  return decode(a.packet);
};

test('DISCOVER -> OFFER with every option: mask, router, DNS, domain, search (RFC 3397), hostname, MTU, infinite lease, server id', () => {
  const r = replyOf(request(MessageType.DISCOVER));
  expect(r).toMatchObject({ op: 2, xid: 0xdeadbeef, flags: 0x8000, yiaddr: '10.0.2.2', ciaddr: '0.0.0.0' });
  expect(r.chaddr).toEqual(MAC);
  expect(r.type).toBe(MessageType.OFFER);
  expect(r.ipsOf(1)).toEqual(['255.255.255.0']);
  expect(r.ipsOf(3)).toEqual(['10.0.2.1']);
  expect(r.ipsOf(6)).toEqual(['10.96.0.10', '10.96.0.11']);
  expect(r.ipsOf(54)).toEqual(['10.0.2.1']);
  expect(r.opt(15)!.toString()).toBe('ns1.svc.cluster.local');
  expect(r.opt(12)!.toString()).toBe('vm1');
  expect(r.opt(26)!.readUInt16BE(0)).toBe(1400);
  expect(r.opt(51)!.readUInt32BE(0)).toBe(0xffffffff);
  expect(r.opt(119)).toEqual(
    Buffer.from('\x03ns1\x03svc\x07cluster\x05local\x00\x07cluster\x05local\x00', 'latin1'),
  );
  expect(r.opt(121)).toBeUndefined(); // masquerade: no extra routes
  expect(r.length).toBeGreaterThanOrEqual(300);
});

test('REQUEST for the offered address -> ACK; for another address -> NAK; for another server -> ignored', () => {
  const ack = replyOf(request(MessageType.REQUEST, { options: [50, 4, 10, 0, 2, 2, 54, 4, 10, 0, 2, 1] }));
  expect(ack.type).toBe(MessageType.ACK);
  expect(ack.yiaddr).toBe('10.0.2.2');
  const nak = replyOf(request(MessageType.REQUEST, { options: [50, 4, 10, 0, 2, 9] }));
  expect(nak.type).toBe(MessageType.NAK);
  expect(nak.yiaddr).toBe('0.0.0.0');
  expect(nak.opt(51)).toBeUndefined();
  expect(nak.opt(56)!.toString()).toContain('10.0.2.2');
  const other = dhcpReply(
    request(MessageType.REQUEST, { options: [50, 4, 10, 0, 2, 2, 54, 4, 10, 0, 2, 7] }),
    lc,
  );
  expect(other).toMatchObject({ kind: 'ignored', reason: expect.stringContaining('10.0.2.7') });
});

test('a renewal (ciaddr, no option 50) -> ACK echoing ciaddr; INFORM -> ACK without an address or lease time', () => {
  const renew = replyOf(request(MessageType.REQUEST, { ciaddr: [10, 0, 2, 2] }));
  expect(renew).toMatchObject({ type: MessageType.ACK, ciaddr: '10.0.2.2', yiaddr: '10.0.2.2' });
  const inform = replyOf(request(MessageType.INFORM, { ciaddr: [10, 0, 2, 2] }));
  expect(inform).toMatchObject({ type: MessageType.ACK, ciaddr: '10.0.2.2', yiaddr: '0.0.0.0' });
  expect(inform.opt(51)).toBeUndefined();
  expect(inform.ipsOf(6)).toEqual(['10.96.0.10', '10.96.0.11']);
});

test('RELEASE and DECLINE are recorded, server messages ignored, a foreign MAC ignored when the guest MAC is known', () => {
  expect(dhcpReply(request(MessageType.RELEASE, { ciaddr: [10, 0, 2, 2] }), lc).kind).toBe('released');
  expect(dhcpReply(request(MessageType.DECLINE, { options: [50, 4, 10, 0, 2, 2] }), lc).kind).toBe(
    'declined',
  );
  expect(dhcpReply(request(MessageType.OFFER), lc).kind).toBe('ignored');
  const only = { ...lc, mac: '52:54:00:12:34:56' };
  expect(dhcpReply(request(MessageType.DISCOVER), only).kind).toBe('reply');
  expect(dhcpReply(request(MessageType.DISCOVER, { mac: [2, 0, 0, 0, 0, 1] }), only)).toMatchObject({
    kind: 'ignored',
    reason: expect.stringContaining('02:00:00:00:00:01'),
  });
});

test('bridge binding: classless static routes (121) carry the other routes and the default route', () => {
  const c: DhcpLeaseConfig = {
    ...lc,
    serverAddress: '169.254.75.10',
    address: '192.168.77.2',
    router: '192.168.77.1',
    routes: [{ dst: '10.128.0.0/9', gateway: '192.168.77.254' }],
  };
  const r = replyOf(request(MessageType.DISCOVER), c);
  expect(r.opt(121)).toEqual(Buffer.from([9, 10, 128, 192, 168, 77, 254, 0, 192, 168, 77, 1]));
  expect(r.ipsOf(54)).toEqual(['169.254.75.10']);
  expect(encodeClasslessRoutes([{ dst: '10.1.2.0/24', gateway: '10.0.0.1' }])).toEqual(
    Buffer.from([24, 10, 1, 2, 10, 0, 0, 1]),
  );
});

test('options longer than 255 bytes are split (RFC 3396) and read back whole', () => {
  const many = Array.from({ length: 30 }, (_, i) => `domain-number-${i}.example.org`);
  const r = replyOf(request(MessageType.DISCOVER), { ...lc, searchDomains: many });
  expect(r.opt(119)).toEqual(encodeDomainSearch(many));
  expect(encodeDomainSearch(many).length).toBeGreaterThan(255);
  // and a request whose option arrives in two pieces is read whole
  const req = parseDhcpRequest(request(MessageType.DISCOVER, { options: [12, 2, 0x61, 0x62, 12, 1, 0x63] }));
  expect(req.options.get(12)!.toString()).toBe('abc');
});

test('option overload (52): options in the file field are read', () => {
  const b = request(MessageType.REQUEST, { options: [52, 1, 1] });
  b.set([50, 4, 10, 0, 2, 2, 255], 108); // file field
  expect(parseDhcpRequest(b).requestedIp).toBe('10.0.2.2');
});

test('malformed packets: a clear DhcpPacketError each', () => {
  const ok = request(MessageType.DISCOVER);
  const bad = (b: Buffer, msg: string) => expect(() => dhcpReply(b, lc)).toThrow(msg);
  bad(ok.subarray(0, 100), 'too short');
  bad(Buffer.concat([Buffer.from([2]), ok.subarray(1)]), 'not a BOOTREQUEST');
  bad(Buffer.concat([ok.subarray(0, 1), Buffer.from([6]), ok.subarray(2)]), 'not Ethernet');
  const noMagic = Buffer.from(ok);
  noMagic.writeUInt32BE(0, 236);
  bad(noMagic, 'magic cookie');
  bad(Buffer.concat([ok.subarray(0, 240), Buffer.from([55, 10, 1, 2])]), 'truncated');
  bad(Buffer.concat([ok.subarray(0, 240), Buffer.from([12])]), 'truncated');
  bad(Buffer.concat([ok.subarray(0, 240), Buffer.from([255])]), 'no DHCP message type');
  bad(request(MessageType.REQUEST, { options: [50, 3, 10, 0, 2] }), 'option 50 has 3 bytes');
});

test('fuzz: random bytes, random truncations and byte flips of real requests never throw anything but DhcpPacketError', () => {
  const seeds = [
    request(MessageType.DISCOVER, { options: [55, 4, 1, 3, 6, 119, 12, 3, 0x76, 0x6d, 0x31] }),
    request(MessageType.REQUEST, { options: [50, 4, 10, 0, 2, 2, 54, 4, 10, 0, 2, 1, 52, 1, 3] }),
    request(MessageType.INFORM, { ciaddr: [10, 0, 2, 2] }),
  ];
  let replies = 0;
  let dropped = 0;
  const feed = (b: Buffer) => {
    try {
      const a = dhcpReply(b, lc);
      if (a.kind === 'reply') {
        replies++;
        expect(a.packet.length).toBeGreaterThanOrEqual(300);
      }
    } catch (e) {
      if (!(e instanceof DhcpPacketError)) throw e;
      dropped++;
    }
  };
  for (let i = 0; i < 20000; i++) {
    const r = randomBytes(2);
    if (i % 4 === 0) {
      feed(randomBytes(r[0]! * 3));
      continue;
    }
    const b = Buffer.from(seeds[i % seeds.length]!);
    // flip a few bytes past the fixed header, where the options are, or anywhere
    for (let k = 0; k < 1 + (r[1]! % 4); k++) {
      const at =
        i % 2 ? 236 + (randomBytes(1)[0]! % (b.length - 236)) : randomBytes(2).readUInt16BE(0) % b.length;
      b[at] = randomBytes(1)[0]!;
    }
    feed(i % 3 === 0 ? b.subarray(0, randomBytes(2).readUInt16BE(0) % (b.length + 1)) : b);
  }
  expect(dropped).toBeGreaterThan(1000);
  expect(replies).toBeGreaterThan(100);
});

test('leaseConfig: from phase 1 and resolv.conf; a hostname or MAC that cannot be sent is refused', () => {
  const config = {
    binding: 'bridge' as const,
    podInterface: 'eth0',
    bridge: 'k6t-eth0',
    tap: 'tap0',
    mtu: 1400,
    serverAddress: '169.254.75.10',
    guest: {
      address: '192.168.1.2',
      prefix: 24,
      gateway: '192.168.1.1',
      routes: [{ dst: '10.0.0.0/8', gateway: '192.168.1.254' }, { dst: '192.168.2.0/24' }],
    },
    podAddress: '192.168.1.2',
  };
  const dns = { nameservers: ['10.96.0.10'], searchDomains: ['ns.svc.cluster.local'] };
  expect(leaseConfig({ config, dns, hostname: 'vm1', mac: '52:54:00:AA:BB:CC' })).toEqual({
    serverAddress: '169.254.75.10',
    address: '192.168.1.2',
    prefix: 24,
    router: '192.168.1.1',
    routes: [{ dst: '10.0.0.0/8', gateway: '192.168.1.254' }],
    mtu: 1400,
    dnsServers: ['10.96.0.10'],
    searchDomains: ['ns.svc.cluster.local'],
    hostname: 'vm1',
    mac: '52:54:00:aa:bb:cc',
  });
  expect(() => leaseConfig({ config, dns, hostname: 'a b,--x' })).toThrow('cannot be sent');
  expect(() => leaseConfig({ config, dns, mac: 'nope' })).toThrow('MAC address "nope"');
});
