// X.509 certificates for the admission webhooks, made in-process with node:crypto (the controller image
// has no openssl): a self-signed CA and a serving certificate it signs, both ECDSA P-256 / SHA-256.
// The DER is written by the small encoder below; node's X509Certificate (and the API server) read it back.
import {
  X509Certificate,
  createHash,
  createPrivateKey,
  generateKeyPairSync,
  randomBytes,
  sign,
  type KeyObject,
} from 'node:crypto';
import { isIP } from 'node:net';

// --- DER ---------------------------------------------------------------------------------------
function tlv(tag: number, content: Buffer): Buffer {
  const n = content.length;
  let len: Buffer;
  if (n < 0x80) len = Buffer.from([n]);
  else {
    const bytes: number[] = [];
    for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
    len = Buffer.from([0x80 | bytes.length, ...bytes]);
  }
  return Buffer.concat([Buffer.from([tag]), len, content]);
}
const seq = (...items: Buffer[]) => tlv(0x30, Buffer.concat(items));
const set = (...items: Buffer[]) => tlv(0x31, Buffer.concat(items));
const octets = (b: Buffer) => tlv(0x04, b);
const bitString = (b: Buffer, unused = 0) => tlv(0x03, Buffer.concat([Buffer.from([unused]), b]));
const bool = (v: boolean) => tlv(0x01, Buffer.from([v ? 0xff : 0]));
const utf8 = (s: string) => tlv(0x0c, Buffer.from(s, 'utf8'));
const explicit = (n: number, inner: Buffer) => tlv(0xa0 | n, inner);
function integer(b: Buffer): Buffer {
  let i = 0;
  while (i < b.length - 1 && b[i] === 0 && (b[i + 1]! & 0x80) === 0) i++;
  b = b.subarray(i);
  return tlv(0x02, b[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), b]) : b);
}
function oid(dotted: string): Buffer {
  const parts = dotted.split('.').map(Number);
  const out: number[] = [40 * parts[0]! + parts[1]!];
  for (const p of parts.slice(2)) {
    const enc = [p & 0x7f];
    for (let v = Math.floor(p / 128); v > 0; v = Math.floor(v / 128)) enc.unshift(0x80 | (v & 0x7f));
    out.push(...enc);
  }
  return tlv(0x06, Buffer.from(out));
}
function time(d: Date): Buffer {
  const iso = d.toISOString(); // YYYY-MM-DDTHH:MM:SS.sssZ
  const digits = iso.slice(0, 19).replace(/[-:T]/g, '') + 'Z'; // YYYYMMDDHHMMSSZ
  const y = d.getUTCFullYear();
  // RFC 5280: UTCTime through 2049, GeneralizedTime from 2050
  return y < 2050 ? tlv(0x17, Buffer.from(digits.slice(2))) : tlv(0x18, Buffer.from(digits));
}
function ipBytes(ip: string): Buffer {
  if (isIP(ip) === 4) return Buffer.from(ip.split('.').map(Number));
  // IPv6: expand "::"
  const [head, tail] = ip.includes('::') ? ip.split('::') : [ip, undefined];
  const h = head ? head.split(':') : [];
  const t = tail !== undefined && tail !== '' ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  const b = Buffer.alloc(16);
  groups.forEach((g: string, i: number) => b.writeUInt16BE(parseInt(g, 16), 2 * i));
  return b;
}

const OID = {
  commonName: '2.5.4.3',
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  basicConstraints: '2.5.29.19',
  keyUsage: '2.5.29.15',
  extKeyUsage: '2.5.29.37',
  serverAuth: '1.3.6.1.5.5.7.3.1',
  clientAuth: '1.3.6.1.5.5.7.3.2',
  subjectAltName: '2.5.29.17',
  subjectKeyId: '2.5.29.14',
  authorityKeyId: '2.5.29.35',
};
const extension = (id: string, critical: boolean, value: Buffer) =>
  seq(oid(id), ...(critical ? [bool(true)] : []), octets(value));
const name = (cn: string) => seq(set(seq(oid(OID.commonName), utf8(cn))));

// --- certificates ---------------------------------------------------------------------------------
export interface KeyPair {
  /** PEM certificate */
  cert: string;
  /** PEM PKCS#8 private key */
  key: string;
}

interface Signer {
  key: KeyObject;
  name: Buffer;
  keyId: Buffer;
}

function keyId(spki: Buffer): Buffer {
  // RFC 5280 4.2.1.2 method 1: SHA-1 of the subjectPublicKey BIT STRING's value. The SPKI of a P-256 key
  // ends with that BIT STRING: 0x03 0x42 0x00 + 65 bytes of the uncompressed point.
  return createHash('sha1')
    .update(spki.subarray(spki.length - 65))
    .digest();
}

function issue(o: {
  subject: string;
  notBefore: Date;
  notAfter: Date;
  ca: boolean;
  /** extended key usage of a leaf: TLS server (default) or TLS client */
  usage?: 'server' | 'client';
  dnsNames?: string[];
  ips?: string[];
  issuer?: Signer;
}): KeyPair & { signer: Signer } {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  const ski = keyId(spki);
  const subject = name(o.subject);
  const issuer = o.issuer ?? { key: privateKey, name: subject, keyId: ski };
  const exts: Buffer[] = [];
  if (o.ca) {
    exts.push(extension(OID.basicConstraints, true, seq(bool(true))));
    // keyCertSign | cRLSign (bits 5 and 6)
    exts.push(extension(OID.keyUsage, true, bitString(Buffer.from([0x06]), 1)));
  } else {
    exts.push(extension(OID.basicConstraints, true, seq()));
    // digitalSignature (bit 0): ECDHE-ECDSA key exchange
    exts.push(extension(OID.keyUsage, true, bitString(Buffer.from([0x80]), 7)));
    exts.push(
      extension(OID.extKeyUsage, false, seq(oid(o.usage === 'client' ? OID.clientAuth : OID.serverAuth))),
    );
    const names = [
      ...(o.dnsNames ?? []).map((d) => tlv(0x82, Buffer.from(d, 'ascii'))),
      ...(o.ips ?? []).map((ip) => tlv(0x87, ipBytes(ip))),
    ];
    if (names.length) exts.push(extension(OID.subjectAltName, false, seq(...names)));
  }
  exts.push(extension(OID.subjectKeyId, false, octets(ski)));
  exts.push(extension(OID.authorityKeyId, false, seq(tlv(0x80, issuer.keyId))));
  const serial = randomBytes(16);
  serial[0]! &= 0x7f;
  const algorithm = seq(oid(OID.ecdsaWithSha256));
  const tbs = seq(
    explicit(0, integer(Buffer.from([2]))), // v3
    integer(serial),
    algorithm,
    issuer.name,
    seq(time(o.notBefore), time(o.notAfter)),
    subject,
    spki,
    explicit(3, seq(...exts)),
  );
  const signature = sign('sha256', tbs, issuer.key); // DER ECDSA-Sig-Value, as X.509 wants
  const der = seq(tbs, algorithm, bitString(signature));
  const b64 = der.toString('base64').replace(/.{64}/g, '$&\n');
  const cert = `-----BEGIN CERTIFICATE-----\n${b64}${b64.endsWith('\n') ? '' : '\n'}-----END CERTIFICATE-----\n`;
  const key = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  return { cert, key, signer: { key: privateKey, name: subject, keyId: ski } };
}

/** clock skew allowance: certificates are valid from a minute before they are made */
const SKEW_MS = 60_000;

/** A self-signed CA (CN `<cn>@<unix seconds>`, as Kubernetes names its self-signed CAs). */
export function createCA(cn: string, validityMs: number, now = new Date()): KeyPair {
  const { cert, key } = issue({
    subject: `${cn}@${Math.floor(now.getTime() / 1000)}`,
    notBefore: new Date(now.getTime() - SKEW_MS),
    notAfter: new Date(now.getTime() + validityMs),
    ca: true,
  });
  return { cert, key };
}

/** A serving certificate for `dnsNames` and `ips` (or, with `usage: 'client'`, a TLS client certificate), signed by `ca`. */
export function createServingCert(
  ca: KeyPair,
  o: {
    cn: string;
    dnsNames: string[];
    ips: string[];
    validityMs: number;
    now?: Date;
    usage?: 'server' | 'client';
  },
): KeyPair {
  const now = o.now ?? new Date();
  const caCert = new X509Certificate(ca.cert);
  const caKey = createPrivateKey(ca.key);
  const caSpki = caCert.publicKey.export({ type: 'spki', format: 'der' });
  // the issuer name is copied from the CA certificate's DER (subject field), so it matches byte for byte
  const issuerName = subjectDer(caCert.raw);
  const notAfter = new Date(Math.min(now.getTime() + o.validityMs, Date.parse(caCert.validTo)));
  const { cert, key } = issue({
    subject: o.cn,
    notBefore: new Date(now.getTime() - SKEW_MS),
    notAfter,
    ca: false,
    usage: o.usage ?? 'server',
    dnsNames: o.dnsNames,
    ips: o.ips,
    issuer: { key: caKey, name: issuerName, keyId: keyId(caSpki) },
  });
  return { cert, key };
}

/** the raw subject Name of a DER certificate */
function subjectDer(der: Buffer): Buffer {
  // Certificate ::= SEQUENCE { tbs SEQUENCE { [0] version, serial, sigAlg, issuer, validity, subject, ...
  const read = (b: Buffer, at: number): { start: number; end: number; tag: number } => {
    const tag = b[at]!;
    let len = b[at + 1]!;
    let start = at + 2;
    if (len & 0x80) {
      const n = len & 0x7f;
      len = 0;
      for (let i = 0; i < n; i++) len = len * 256 + b[start + i]!;
      start += n;
    }
    return { start, end: start + len, tag };
  };
  const certSeq = read(der, 0);
  const tbs = read(der, certSeq.start);
  let at = tbs.start;
  const fields: { at: number; end: number }[] = [];
  while (at < tbs.end && fields.length < 6) {
    const f = read(der, at);
    fields.push({ at, end: f.end });
    at = f.end;
  }
  const s = fields[5]!; // version, serial, signature, issuer, validity, subject
  return der.subarray(s.at, s.end);
}

/** the certificates of a PEM bundle, in order */
export function splitPem(pem: string): string[] {
  return pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n?/g) ?? [];
}
