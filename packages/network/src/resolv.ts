// The Pod's resolv.conf: what the guest learns as its DNS servers and search domains.
import { readFileSync } from 'node:fs';
import { isIPv6 } from 'node:net';

export interface DnsConfig {
  /** IPv4 name servers (DHCPv4 carries only these) */
  nameservers: string[];
  /** IPv6 name servers (DHCPv6 option 23; link-local ones with a zone are left out: meaningless to the guest) */
  nameservers6?: string[];
  searchDomains: string[];
}

const IPV4 = /^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}$/;
/** A DNS name as DHCP option 119 can carry it (labels of letters, digits, '-', '_'). */
const DOMAIN =
  /^(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?$/;

export function isIPv4(s: string): boolean {
  return IPV4.test(s);
}

/** Parses resolv.conf text: `nameserver` lines (IPv4, and IPv6 apart), the last `search`/`domain` line wins (as in glibc). */
export function parseResolvConf(text: string): DnsConfig {
  const nameservers: string[] = [];
  const nameservers6: string[] = [];
  let searchDomains: string[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.replace(/[#;].*$/, '').trim();
    if (!line) continue;
    const [key, ...vals] = line.split(/\s+/);
    if (key === 'nameserver' && vals[0] && isIPv4(vals[0])) nameservers.push(vals[0]);
    else if (key === 'nameserver' && vals[0] && isIPv6(vals[0]) && !vals[0].includes('%'))
      nameservers6.push(vals[0]);
    else if (key === 'search' || key === 'domain')
      searchDomains = vals.filter((d) => DOMAIN.test(d)).map((d) => d.replace(/\.$/, ''));
  }
  return { nameservers, searchDomains, ...(nameservers6.length ? { nameservers6 } : {}) };
}

export function readResolvConf(file = '/etc/resolv.conf'): DnsConfig {
  return parseResolvConf(readFileSync(file, 'utf8'));
}
