// DHCPv4 (RFC 2131/2132) for one guest: parsing requests defensively and building replies. Pure:
// no sockets here (phase2.ts owns them), so every byte sequence can be fed to `dhcpReply` in a test.

/** Why a packet was dropped (malformed, truncated, not a request we serve). */
export class DhcpPacketError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DhcpPacketError';
  }
}

export const DHCP_SERVER_PORT = 67;
export const DHCP_CLIENT_PORT = 68;
const MAGIC = 0x63825363;
const HEADER = 236; // fixed BOOTP fields, before the magic cookie
const MIN_REPLY = 300; // BOOTP's minimum message size; some clients drop shorter replies

export enum MessageType {
  DISCOVER = 1,
  OFFER = 2,
  REQUEST = 3,
  DECLINE = 4,
  ACK = 5,
  NAK = 6,
  RELEASE = 7,
  INFORM = 8,
}
const TYPE_NAMES = ['', 'DISCOVER', 'OFFER', 'REQUEST', 'DECLINE', 'ACK', 'NAK', 'RELEASE', 'INFORM'];
export const messageTypeName = (t: number): string => TYPE_NAMES[t] ?? `type ${t}`;

/** Option codes used here (RFC 2132, 3397, 3442). */
export enum Opt {
  PAD = 0,
  SUBNET_MASK = 1,
  ROUTER = 3,
  DNS = 6,
  HOSTNAME = 12,
  DOMAIN_NAME = 15,
  MTU = 26,
  REQUESTED_IP = 50,
  LEASE_TIME = 51,
  OVERLOAD = 52,
  MESSAGE_TYPE = 53,
  SERVER_ID = 54,
  MESSAGE = 56,
  DOMAIN_SEARCH = 119,
  CLASSLESS_ROUTES = 121,
  END = 255,
}

export interface DhcpRequest {
  op: number;
  xid: number;
  flags: number;
  ciaddr: string;
  giaddr: string;
  /** the client's hardware address, aa:bb:cc:dd:ee:ff */
  mac: string;
  /** raw 16-byte chaddr, echoed in replies */
  chaddr: Buffer;
  type: number;
  /** option 50 */
  requestedIp?: string;
  /** option 54 */
  serverId?: string;
  /** every option, concatenated per code (RFC 3396) */
  options: Map<number, Buffer>;
}

const ipString = (b: Buffer, at: number) => `${b[at]}.${b[at + 1]}.${b[at + 2]}.${b[at + 3]}`;

function ipBytes(ip: string): number[] {
  const parts = ip.split('.').map(Number);
  if (parts.length !== 4 || parts.some((p) => !Number.isInteger(p) || p < 0 || p > 255))
    throw new Error(`${JSON.stringify(ip)} is not an IPv4 address`);
  return parts;
}

/** Reads options from `buf[start..end)` into `into` (repeated codes are concatenated, RFC 3396). */
function readOptions(buf: Buffer, start: number, end: number, into: Map<number, Buffer>, where: string) {
  let i = start;
  while (i < end) {
    const code = buf[i]!;
    if (code === Opt.END) return;
    if (code === Opt.PAD) {
      i++;
      continue;
    }
    if (i + 1 >= end) throw new DhcpPacketError(`option ${code} in ${where} is truncated (no length)`);
    const len = buf[i + 1]!;
    if (i + 2 + len > end)
      throw new DhcpPacketError(`option ${code} in ${where} is truncated (${len} bytes announced)`);
    const value = buf.subarray(i + 2, i + 2 + len);
    const prev = into.get(code);
    into.set(code, prev ? Buffer.concat([prev, value]) : Buffer.from(value));
    i += 2 + len;
  }
}

/** Parses a BOOTREQUEST; throws DhcpPacketError for anything malformed or not a DHCP request. */
export function parseDhcpRequest(buf: Buffer): DhcpRequest {
  if (buf.length < HEADER + 4) throw new DhcpPacketError(`packet of ${buf.length} bytes is too short`);
  const op = buf[0]!;
  if (op !== 1) throw new DhcpPacketError(`op ${op} is not a BOOTREQUEST`);
  if (buf[1] !== 1 || buf[2] !== 6)
    throw new DhcpPacketError(`hardware type ${buf[1]}/length ${buf[2]} is not Ethernet`);
  if (buf.readUInt32BE(HEADER) !== MAGIC) throw new DhcpPacketError('no DHCP magic cookie');
  const options = new Map<number, Buffer>();
  readOptions(buf, HEADER + 4, buf.length, options, 'options');
  // option overload (52): sname and/or file carry more options
  const overload = options.get(Opt.OVERLOAD)?.[0] ?? 0;
  if (overload & 1) readOptions(buf, 108, 236, options, 'file');
  if (overload & 2) readOptions(buf, 44, 108, options, 'sname');
  const typeOpt = options.get(Opt.MESSAGE_TYPE);
  if (!typeOpt || typeOpt.length !== 1) throw new DhcpPacketError('no DHCP message type (option 53)');
  const type = typeOpt[0]!;
  const ipOpt = (code: number) => {
    const v = options.get(code);
    if (v === undefined) return undefined;
    if (v.length !== 4) throw new DhcpPacketError(`option ${code} has ${v.length} bytes, not 4`);
    return ipString(v, 0);
  };
  const chaddr = Buffer.from(buf.subarray(28, 44));
  return {
    op,
    xid: buf.readUInt32BE(4),
    flags: buf.readUInt16BE(10),
    ciaddr: ipString(buf, 12),
    giaddr: ipString(buf, 24),
    mac: [...chaddr.subarray(0, 6)].map((x) => x.toString(16).padStart(2, '0')).join(':'),
    chaddr,
    type,
    requestedIp: ipOpt(Opt.REQUESTED_IP),
    serverId: ipOpt(Opt.SERVER_ID),
    options,
  };
}

/** A DNS name list in RFC 1035 wire format (option 119, RFC 3397; no compression, which is optional). */
export function encodeDomainSearch(domains: readonly string[]): Buffer {
  const out: number[] = [];
  for (const d of domains) {
    for (const label of d.replace(/\.$/, '').split('.')) {
      const b = Buffer.from(label, 'ascii');
      if (b.length === 0 || b.length > 63) throw new Error(`domain ${JSON.stringify(d)} has a bad label`);
      out.push(b.length, ...b);
    }
    out.push(0);
  }
  return Buffer.from(out);
}

export interface Route4 {
  /** CIDR ("10.1.0.0/16") or "default" */
  dst: string;
  gateway: string;
}

/** Classless static routes (option 121, RFC 3442): prefix length, significant octets, router. */
export function encodeClasslessRoutes(routes: readonly Route4[]): Buffer {
  const out: number[] = [];
  for (const r of routes) {
    const [net, len] = r.dst === 'default' ? ['0.0.0.0', '0'] : r.dst.split('/');
    const prefix = len === undefined ? 32 : Number(len);
    if (!Number.isInteger(prefix) || prefix < 0 || prefix > 32) throw new Error(`bad route ${r.dst}`);
    out.push(prefix, ...ipBytes(net!).slice(0, Math.ceil(prefix / 8)), ...ipBytes(r.gateway));
  }
  return Buffer.from(out);
}

/** What the server hands out: one address to one guest. */
export interface DhcpLeaseConfig {
  serverAddress: string;
  address: string;
  prefix: number;
  router?: string;
  /** other routes (option 121; the default route is added to them when there is a router) */
  routes: Route4[];
  mtu: number;
  dnsServers: string[];
  searchDomains: string[];
  hostname?: string;
  /** answer only this client (aa:bb:cc:dd:ee:ff); absent: whoever asks */
  mac?: string;
}

export type DhcpAction =
  | { kind: 'reply'; type: MessageType; packet: Buffer; request: DhcpRequest }
  | { kind: 'released' | 'declined'; request: DhcpRequest }
  | { kind: 'ignored'; reason: string; request: DhcpRequest };

function netmaskBytes(prefix: number): number[] {
  const m = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  return [m >>> 24, (m >>> 16) & 255, (m >>> 8) & 255, m & 255];
}

/** Appends option `code`, split into 255-byte pieces when longer (RFC 3396). */
function pushOption(out: number[], code: number, value: Buffer | number[]) {
  const v = [...value];
  if (v.length === 0) {
    out.push(code, 0);
    return;
  }
  for (let i = 0; i < v.length; i += 255) {
    const part = v.slice(i, i + 255);
    out.push(code, part.length, ...part);
  }
}

function buildReply(req: DhcpRequest, type: MessageType, c: DhcpLeaseConfig): Buffer {
  const head = Buffer.alloc(HEADER + 4);
  head[0] = 2; // BOOTREPLY
  head[1] = 1;
  head[2] = 6;
  head.writeUInt32BE(req.xid, 4);
  head.writeUInt16BE(req.flags & 0x8000, 10);
  if (type === MessageType.ACK) head.set(ipBytes(req.ciaddr), 12);
  if (type === MessageType.OFFER || (type === MessageType.ACK && req.type === MessageType.REQUEST))
    head.set(ipBytes(c.address), 16);
  head.set(ipBytes(req.giaddr), 24);
  req.chaddr.copy(head, 28);
  head.writeUInt32BE(MAGIC, HEADER);
  const o: number[] = [];
  pushOption(o, Opt.MESSAGE_TYPE, [type]);
  pushOption(o, Opt.SERVER_ID, ipBytes(c.serverAddress));
  if (type === MessageType.NAK) {
    pushOption(o, Opt.MESSAGE, Buffer.from(`only ${c.address} is served here`));
  } else {
    // INFORM's ACK carries configuration only: no lease time (RFC 2131 4.3.5)
    if (req.type !== MessageType.INFORM) pushOption(o, Opt.LEASE_TIME, [255, 255, 255, 255]); // infinite
    pushOption(o, Opt.SUBNET_MASK, netmaskBytes(c.prefix));
    if (c.router) pushOption(o, Opt.ROUTER, ipBytes(c.router));
    if (c.routes.length) {
      // a client that takes option 121 ignores option 3 (RFC 3442): the default route goes in it too
      const all = c.router ? [...c.routes, { dst: 'default', gateway: c.router }] : c.routes;
      pushOption(o, Opt.CLASSLESS_ROUTES, encodeClasslessRoutes(all));
    }
    if (c.dnsServers.length) pushOption(o, Opt.DNS, c.dnsServers.flatMap(ipBytes));
    if (c.searchDomains.length) {
      pushOption(o, Opt.DOMAIN_NAME, Buffer.from(c.searchDomains[0]!, 'ascii'));
      pushOption(o, Opt.DOMAIN_SEARCH, encodeDomainSearch(c.searchDomains));
    }
    if (c.hostname) pushOption(o, Opt.HOSTNAME, Buffer.from(c.hostname, 'ascii'));
    pushOption(o, Opt.MTU, [(c.mtu >> 8) & 255, c.mtu & 255]);
  }
  o.push(Opt.END);
  const packet = Buffer.concat([head, Buffer.from(o)]);
  return packet.length >= MIN_REPLY
    ? packet
    : Buffer.concat([packet, Buffer.alloc(MIN_REPLY - packet.length)]);
}

/**
 * What the server does with the bytes `buf`: a reply to send (OFFER, ACK, NAK), a release or decline
 * to record, or a reason to ignore the request. Throws DhcpPacketError for a malformed packet and
 * never anything else.
 */
export function dhcpReply(buf: Buffer, c: DhcpLeaseConfig): DhcpAction {
  const req = parseDhcpRequest(buf);
  const reply = (type: MessageType): DhcpAction => ({
    kind: 'reply',
    type,
    packet: buildReply(req, type, c),
    request: req,
  });
  if (c.mac && req.mac !== c.mac.toLowerCase())
    return { kind: 'ignored', reason: `client ${req.mac} is not the guest (${c.mac})`, request: req };
  switch (req.type) {
    case MessageType.DISCOVER:
      return reply(MessageType.OFFER);
    case MessageType.REQUEST: {
      // SELECTING names its server; a client that chose another server is not ours to answer
      if (req.serverId !== undefined && req.serverId !== c.serverAddress)
        return { kind: 'ignored', reason: `the client chose server ${req.serverId}`, request: req };
      const asked = req.requestedIp ?? (req.ciaddr !== '0.0.0.0' ? req.ciaddr : undefined);
      if (asked === undefined)
        return { kind: 'ignored', reason: 'REQUEST without an address (option 50 or ciaddr)', request: req };
      return reply(asked === c.address ? MessageType.ACK : MessageType.NAK);
    }
    case MessageType.INFORM:
      return reply(MessageType.ACK);
    case MessageType.RELEASE:
      return { kind: 'released', request: req };
    case MessageType.DECLINE:
      return { kind: 'declined', request: req };
    default:
      return {
        kind: 'ignored',
        reason: `${messageTypeName(req.type)} is not a client message`,
        request: req,
      };
  }
}
