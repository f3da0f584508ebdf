// certs.ts: the DER it writes is read back by node's X509Certificate and checked by openssl.
import { spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCA, createServingCert, splitPem } from './certs.js';

const HOUR = 3600_000;

describe('certs', () => {
  it('a CA and a serving certificate it signs, with DNS and IPv4/IPv6 SANs, as openssl reads them', () => {
    const now = new Date('2030-06-01T12:00:00Z');
    const ca = createCA('test-ca', 48 * HOUR, now);
    const srv = createServingCert(ca, {
      cn: 'svc.ns.svc',
      dnsNames: ['svc', 'svc.ns.svc'],
      ips: ['127.0.0.1', 'fd00::1:2'],
      validityMs: 24 * HOUR,
      now,
    });
    const c = new X509Certificate(ca.cert);
    const s = new X509Certificate(srv.cert);
    expect(c.ca).toBe(true);
    expect(c.subject).toBe(`CN=test-ca@${now.getTime() / 1000}`);
    expect(s.ca).toBe(false);
    expect(s.checkIssued(c)).toBe(true);
    expect(s.verify(c.publicKey)).toBe(true);
    expect(s.subjectAltName).toBe(
      'DNS:svc, DNS:svc.ns.svc, IP Address:127.0.0.1, IP Address:FD00:0:0:0:0:0:1:2',
    );
    expect(s.checkIP('fd00::1:2')).toBe('fd00::1:2');
    expect(s.checkHost('other')).toBeUndefined();
    // valid from a minute before "now" (clock skew), for its validity
    expect(new Date(s.validFrom).toISOString()).toBe('2030-06-01T11:59:00.000Z');
    expect(new Date(s.validTo).toISOString()).toBe('2030-06-02T12:00:00.000Z');
    expect(s.keyUsage).toEqual(['1.3.6.1.5.5.7.3.1']);
    const dir = mkdtempSync(join(tmpdir(), 'kvts-ctrl-certs-'));
    try {
      writeFileSync(join(dir, 'ca.pem'), ca.cert);
      writeFileSync(join(dir, 'srv.pem'), srv.cert);
      const r = spawnSync(
        'openssl',
        [
          'verify',
          '-attime',
          String(now.getTime() / 1000 + 60),
          '-purpose',
          'sslserver',
          '-CAfile',
          'ca.pem',
          'srv.pem',
        ],
        { cwd: dir, encoding: 'utf8' },
      );
      expect(r.stdout.trim()).toBe('srv.pem: OK');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a serving certificate never outlives its CA; times from 2050 are GeneralizedTime', () => {
    const now = new Date('2049-12-31T20:00:00Z');
    const ca = createCA('late-ca', 10 * HOUR, now); // to 2050-01-01T06:00Z
    const srv = createServingCert(ca, { cn: 'x', dnsNames: ['x'], ips: [], validityMs: 100 * HOUR, now });
    const s = new X509Certificate(srv.cert);
    expect(new Date(s.validTo).toISOString()).toBe('2050-01-01T06:00:00.000Z');
    expect(s.verify(new X509Certificate(ca.cert).publicKey)).toBe(true);
  });

  it('splitPem returns the certificates of a bundle in order', () => {
    const a = createCA('a', HOUR).cert;
    const b = createCA('b', HOUR).cert;
    expect(splitPem(a + b)).toEqual([a, b]);
    expect(splitPem('')).toEqual([]);
  });
});
