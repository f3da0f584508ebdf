// DHCPv6 (RFC 8415, stateful: one IA_NA address) for the one guest of a masquerade bridge, with DNS servers
// (option 23, RFC 3646) and the domain search list (option 24). Pure: no sockets here (phase2.ts owns them), so
// every byte sequence can be fed to `dhcp6Reply` in a test.
import { isIPv6 } from 'node:net';
import { DhcpPacketError, encodeDomainSearch } from './dhcp.js';

export const DHCP6_SERVER_PORT = 547;
export const DHCP6_CLIENT_PORT = 546;
/** All_DHCP_Relay_Agents_and_Servers: where clients send (link-scoped multicast) */
export const ALL_DHCP_SERVERS = 'ff02::1:2';
/** lifetimes of the address: infinity (RFC 8415 7.7), as the DHCPv4 lease is */
export const INFINITY = 0xffffffff;

export enum Msg6 {
  SOLICIT = 1,
  ADVERTISE = 2,
  REQUEST = 3,
  CONFIRM = 4,
  RENEW = 5,
  REBIND = 6,
  REPLY = 7,
  RELEASE = 8,
  DECLINE = 9,
  RECONFIGURE = 10,
  INFORMATION_REQUEST = 11,
  RELAY_FORW = 12,
  RELAY_REPL = 13,
}
const MSG_NAMES = [
  '',
  'SOLICIT',
  'ADVERTISE',
  'REQUEST',
  'CONFIRM',
  'RENEW',
  'REBIND',
  'REPLY',
  'RELEASE',
  'DECLINE',
  'RECONFIGURE',
  'INFORMATION-REQUEST',
  'RELAY-FORW',
  'RELAY-REPL',
];
export const msg6Name = (t: number): string => MSG_NAMES[t] ?? `type ${t}`;

/** Option codes used here (RFC 8415 21, RFC 3646). */
export enum Opt6 {
  CLIENTID = 1,
  SERVERID = 2,
  IA_NA = 3,
  IA_TA = 4,
  IAADDR = 5,
  ORO = 6,
  PREFERENCE = 7,
  ELAPSED_TIME = 8,
  STATUS_CODE = 13,
  RAPID_COMMIT = 14,
  DNS_SERVERS = 23,
  DOMAIN_LIST = 24,
  IA_PD = 25,
}

export enum Status6 {
  Success = 0,
  UnspecFail = 1,
  NoAddrsAvail = 2,
  NoBinding = 3,
  NotOnLink = 4,
  UseMulticast = 5,
  NoPrefixAvail = 6,
}

export interface Option6 {
  code: number;
  data: Buffer;
}

export interface Dhcp6Message {
  type: number;
  /** 24-bit transaction id */
  xid: number;
  options: Option6[];
}

/** An IA_NA or IA_TA of a request: its IAID and the addresses the client named in it. */
export interface IaRequest {
  code: Opt6.IA_NA | Opt6.IA_TA | Opt6.IA_PD;
  iaid: number;
  addresses: string[];
}

export interface Dhcp6Request extends Dhcp6Message {
  clientId: Buffer;
  serverId?: Buffer;
  ias: IaRequest[];
  rapidCommit: boolean;
}

/** What the server hands out (validated by `lease6Config`). */
export interface Dhcp6LeaseConfig {
  /** the server's DUID (DUID-LL of the bridge's MAC, `duidLL`) */
  serverDuid: Buffer;
  /** the guest's address (fd10:0:2::2) */
  address: string;
  /** IPv6 name servers of the Pod's resolv.conf */
  dnsServers: string[];
  searchDomains: string[];
}

export type Dhcp6Action =
  | { kind: 'reply'; type: Msg6; packet: Buffer; request: Dhcp6Request; leased: boolean }
  | { kind: 'ignored'; reason: string; request: Dhcp6Request };

/** Reads `buf[start..end)` as options (code, length, data); throws DhcpPacketError when they do not fit. */
export function parseOptions6(buf: Buffer, start = 0, end = buf.length, where = 'message'): Option6[] {
  const out: Option6[] = [];
  let i = start;
  while (i < end) {
    if (i + 4 > end) throw new DhcpPacketError(`option header at ${i} in ${where} is truncated`);
    const code = buf.readUInt16BE(i);
    const len = buf.readUInt16BE(i + 2);
    if (i + 4 + len > end)
      throw new DhcpPacketError(`option ${code} in ${where} is truncated (${len} bytes announced)`);
    out.push({ code, data: Buffer.from(buf.subarray(i + 4, i + 4 + len)) });
    i += 4 + len;
  }
  return out;
}

export function encodeOption6(code: number, data: Buffer | readonly number[]): Buffer {
  const d = Buffer.isBuffer(data) ? data : Buffer.from(data);
  if (d.length > 0xffff) throw new Error(`option ${code} is longer than 65535 bytes`);
  const h = Buffer.alloc(4);
  h.writeUInt16BE(code, 0);
  h.writeUInt16BE(d.length, 2);
  return Buffer.concat([h, d]);
}

/** The 16 bytes of an IPv6 address (any textual form Node accepts, no zone). */
export function ipv6Bytes(ip: string): Buffer {
  if (!isIPv6(ip) || ip.includes('%')) throw new Error(`${JSON.stringify(ip)} is not an IPv6 address`);
  let s = ip;
  // an embedded IPv4 tail (::ffff:1.2.3.4) becomes two groups
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(s);
  if (v4) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    s = `${s.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = s.includes('::') ? s.split('::') : [s, undefined];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2));
  return out;
}

/** The canonical text (RFC 5952) of 16 address bytes. */
export function ipv6String(b: Buffer): string {
  const g = Array.from({ length: 8 }, (_, i) => b.readUInt16BE(i * 2));
  // the longest run of two or more zero groups becomes ::
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j;
  }
  const hex = (xs: number[]) => xs.map((x) => x.toString(16)).join(':');
  return best < 0 ? hex(g) : `${hex(g.slice(0, best))}::${hex(g.slice(best + bestLen))}`;
}

/** DUID-LL (RFC 8415 11.4): type 3, hardware type 1 (Ethernet), the MAC. */
export function duidLL(mac: string): Buffer {
  const m = /^([0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}$/.test(mac)
    ? mac.split(':').map((x) => parseInt(x, 16))
    : null;
  if (!m) throw new Error(`MAC address ${JSON.stringify(mac)} is not aa:bb:cc:dd:ee:ff`);
  return Buffer.from([0, 3, 0, 1, ...m]);
}

/** Parses a client message; throws DhcpPacketError for anything malformed or not a client-to-server message. */
export function parseDhcp6Request(buf: Buffer): Dhcp6Request {
  if (buf.length < 4) throw new DhcpPacketError(`packet of ${buf.length} bytes is too short`);
  const type = buf[0]!;
  const clientTypes = [
    Msg6.SOLICIT,
    Msg6.REQUEST,
    Msg6.CONFIRM,
    Msg6.RENEW,
    Msg6.REBIND,
    Msg6.RELEASE,
    Msg6.DECLINE,
    Msg6.INFORMATION_REQUEST,
  ];
  if (!clientTypes.includes(type))
    throw new DhcpPacketError(`message type ${msg6Name(type)} is not one a client sends to a server`);
  const xid = buf.readUIntBE(1, 3);
  const options = parseOptions6(buf, 4);
  const one = (code: number) => {
    const all = options.filter((o) => o.code === code);
    if (all.length > 1) throw new DhcpPacketError(`option ${code} appears ${all.length} times`);
    return all[0]?.data;
  };
  const clientId = one(Opt6.CLIENTID);
  const serverId = one(Opt6.SERVERID);
  const ias: IaRequest[] = [];
  for (const o of options) {
    if (o.code !== Opt6.IA_NA && o.code !== Opt6.IA_TA && o.code !== Opt6.IA_PD) continue;
    const fixed = o.code === Opt6.IA_TA ? 4 : 12; // IAID (+ T1, T2 for IA_NA and IA_PD)
    if (o.data.length < fixed)
      throw new DhcpPacketError(`option ${o.code} has ${o.data.length} bytes, fewer than ${fixed}`);
    const addresses: string[] = [];
    for (const sub of parseOptions6(o.data, fixed, o.data.length, `option ${o.code}`)) {
      if (sub.code !== Opt6.IAADDR) continue;
      if (sub.data.length < 24)
        throw new DhcpPacketError(`IA address option has ${sub.data.length} bytes, fewer than 24`);
      parseOptions6(sub.data, 24, sub.data.length, 'IA address option'); // well-formed, contents unused
      addresses.push(ipv6String(sub.data.subarray(0, 16)));
    }
    ias.push({ code: o.code, iaid: o.data.readUInt32BE(0), addresses });
  }
  const rapidCommit = options.some((o) => o.code === Opt6.RAPID_COMMIT);
  // RFC 8415 16: which messages must (not) carry a client/server identifier
  if (!clientId && type !== Msg6.INFORMATION_REQUEST)
    throw new DhcpPacketError(`${msg6Name(type)} without a client identifier (option 1)`);
  if (clientId && (clientId.length < 2 || clientId.length > 130))
    throw new DhcpPacketError(`client identifier of ${clientId.length} bytes`);
  if (serverId && [Msg6.SOLICIT, Msg6.CONFIRM, Msg6.REBIND].includes(type))
    throw new DhcpPacketError(`${msg6Name(type)} with a server identifier (option 2)`);
  if (!serverId && [Msg6.REQUEST, Msg6.RENEW, Msg6.RELEASE, Msg6.DECLINE].includes(type))
    throw new DhcpPacketError(`${msg6Name(type)} without a server identifier (option 2)`);
  return {
    type,
    xid,
    options,
    clientId: clientId ?? Buffer.alloc(0),
    ...(serverId ? { serverId } : {}),
    ias,
    rapidCommit,
  };
}

/** Parses any DHCPv6 message (a server's too): for tests and logs. */
export function parseDhcp6Message(buf: Buffer): Dhcp6Message {
  if (buf.length < 4) throw new DhcpPacketError(`packet of ${buf.length} bytes is too short`);
  return { type: buf[0]!, xid: buf.readUIntBE(1, 3), options: parseOptions6(buf, 4) };
}

function statusCode(code: Status6, message: string): Buffer {
  const d = Buffer.alloc(2);
  d.writeUInt16BE(code, 0);
  return encodeOption6(Opt6.STATUS_CODE, Buffer.concat([d, Buffer.from(message, 'utf8')]));
}

function u32s(...xs: number[]): Buffer {
  const b = Buffer.alloc(xs.length * 4);
  xs.forEach((x, i) => b.writeUInt32BE(x >>> 0, i * 4));
  return b;
}

/** An IAADDR option (RFC 8415 21.6) with `lifetime` as both the preferred and the valid lifetime. */
function iaAddress(address: string, lifetime: number): Buffer {
  return encodeOption6(Opt6.IAADDR, Buffer.concat([ipv6Bytes(address), u32s(lifetime, lifetime)]));
}

/** The IA option of a reply for one IA of the request. */
function iaReply(ia: IaRequest, c: Dhcp6LeaseConfig, type: Msg6, request: Msg6): Buffer {
  const id = u32s(ia.iaid);
  if (ia.code === Opt6.IA_PD)
    return encodeOption6(
      Opt6.IA_PD,
      Buffer.concat([id, u32s(0, 0), statusCode(Status6.NoPrefixAvail, 'no prefix delegation here')]),
    );
  if (ia.code === Opt6.IA_TA)
    return encodeOption6(
      Opt6.IA_TA,
      Buffer.concat([
        id,
        statusCode(Status6.NoAddrsAvail, 'only one non-temporary address (IA_NA) is served'),
      ]),
    );
  if (request === Msg6.RELEASE || request === Msg6.DECLINE)
    return encodeOption6(Opt6.IA_NA, Buffer.concat([id, u32s(0, 0), statusCode(Status6.Success, 'ok')]));
  // T1 = T2 = infinity: the address never has to be renewed (RFC 8415 7.7, 21.4)
  const parts = [id, u32s(INFINITY, INFINITY), iaAddress(c.address, INFINITY)];
  // a renewal naming another address: that one is no longer valid (lifetimes 0, RFC 8415 18.3.4)
  if (type === Msg6.REPLY && (request === Msg6.RENEW || request === Msg6.REBIND))
    for (const a of ia.addresses) if (a !== ipv6String(ipv6Bytes(c.address))) parts.push(iaAddress(a, 0));
  return encodeOption6(Opt6.IA_NA, Buffer.concat(parts));
}

/**
 * The server's answer to one client message (RFC 8415 18.3), or why it is ignored. SOLICIT -> ADVERTISE (or
 * REPLY under rapid commit, RFC 8415 18.3.1), REQUEST/RENEW/REBIND -> REPLY with the address, CONFIRM -> REPLY
 * Success or NotOnLink, RELEASE/DECLINE -> REPLY Success, INFORMATION-REQUEST -> REPLY with DNS only. Messages
 * naming another server are ignored. Every reply echoes the client identifier and carries ours, the DNS servers
 * and the search list.
 */
export function dhcp6Reply(buf: Buffer, c: Dhcp6LeaseConfig): Dhcp6Action {
  const req = parseDhcp6Request(buf);
  if (req.serverId && !req.serverId.equals(c.serverDuid))
    return { kind: 'ignored', reason: 'addressed to another server', request: req };
  const type = req.type === Msg6.SOLICIT && !req.rapidCommit ? Msg6.ADVERTISE : Msg6.REPLY;
  const parts: Buffer[] = [];
  const head = Buffer.alloc(4);
  head[0] = type;
  head.writeUIntBE(req.xid, 1, 3);
  parts.push(head);
  if (req.clientId.length) parts.push(encodeOption6(Opt6.CLIENTID, req.clientId));
  parts.push(encodeOption6(Opt6.SERVERID, c.serverDuid));
  let leased = false;
  switch (req.type) {
    case Msg6.SOLICIT:
    case Msg6.REQUEST:
    case Msg6.RENEW:
    case Msg6.REBIND:
      if (req.type === Msg6.SOLICIT && req.rapidCommit) parts.push(encodeOption6(Opt6.RAPID_COMMIT, []));
      if (!req.ias.length) parts.push(statusCode(Status6.NoAddrsAvail, 'ask for an IA_NA'));
      for (const ia of req.ias) parts.push(iaReply(ia, c, type, req.type));
      leased = type === Msg6.REPLY && req.ias.some((ia) => ia.code === Opt6.IA_NA);
      break;
    case Msg6.CONFIRM: {
      // the addresses are on this link only when they are the guest's (RFC 8415 18.3.3)
      const named = req.ias.flatMap((ia) => ia.addresses);
      if (!named.length) return { kind: 'ignored', reason: 'CONFIRM without addresses', request: req };
      const mine = ipv6String(ipv6Bytes(c.address));
      parts.push(
        named.every((a) => a === mine)
          ? statusCode(Status6.Success, 'on link')
          : statusCode(Status6.NotOnLink, `only ${mine} is served here`),
      );
      break;
    }
    case Msg6.RELEASE:
    case Msg6.DECLINE:
      parts.push(statusCode(Status6.Success, 'ok'));
      for (const ia of req.ias) parts.push(iaReply(ia, c, type, req.type));
      break;
    case Msg6.INFORMATION_REQUEST:
      break;
  }
  if (c.dnsServers.length)
    parts.push(encodeOption6(Opt6.DNS_SERVERS, Buffer.concat(c.dnsServers.map((d) => ipv6Bytes(d)))));
  if (c.searchDomains.length)
    parts.push(encodeOption6(Opt6.DOMAIN_LIST, encodeDomainSearch(c.searchDomains)));
  return { kind: 'reply', type, packet: Buffer.concat(parts), request: req, leased };
}
