// Phase 2, in the launcher (unprivileged but for NET_BIND_SERVICE): DHCP for the guest, served by
// dnsmasq bound to the bridge phase 1 created, and to nothing else. The guest learns its address,
// gateway, routes, MTU, the Pod's DNS servers and search domains, and its hostname.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from '@kubevirt-ts/log';
import { inNetns, run, NetworkSetupError, type NetnsOption } from './exec.js';
import { netmask } from './plan.js';
import type { PodNetworkConfig } from './phase1.js';
import type { DnsConfig } from './resolv.js';

export interface DhcpOptions extends NetnsOption {
  config: PodNetworkConfig;
  dns: DnsConfig;
  /** the guest's hostname (the VMI's name, or spec.hostname) */
  hostname?: string;
  /** directory for the lease file (created; 0700) */
  runDir: string;
  log?: Logger;
  /** the dnsmasq program (default "dnsmasq" from PATH) */
  dnsmasq?: string;
}

export interface DhcpServer {
  readonly pid: number;
  readonly leaseFile: string;
  /** resolves with "ip mac [hostname]" of the first lease dnsmasq acknowledges */
  waitForLease(): Promise<string>;
  stop(): Promise<void>;
}

/** A hostname DHCP option 12 can carry: labels of letters, digits and '-'. */
const HOSTNAME =
  /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

/** dnsmasq's argument list for `o` (no DNS service, no config files, DHCP on the bridge only). */
export function dnsmasqArgs(o: DhcpOptions, leaseFile: string): string[] {
  const c = o.config;
  const g = c.guest;
  const args = [
    '--keep-in-foreground',
    '--log-facility=-',
    '--conf-file=/dev/null',
    '--no-hosts',
    '--no-resolv',
    '--port=0',
    `--interface=${c.bridge}`,
    '--except-interface=lo',
    '--bind-interfaces',
    '--dhcp-authoritative',
    '--pid-file=',
    `--dhcp-leasefile=${leaseFile}`,
    // one address, whoever asks: the only client on this bridge is the guest
    `--dhcp-range=${g.address},${g.address},${netmask(g.prefix)},infinite`,
    `--dhcp-option=option:mtu,${c.mtu}`,
  ];
  // bridge binding: the guest's subnet is not the bridge's own (it only holds a link-local address)
  if (c.serverAddress !== g.gateway && c.binding === 'bridge')
    args.push(`--shared-network=${c.bridge},${g.address}`);
  args.push(g.gateway ? `--dhcp-option=option:router,${g.gateway}` : '--dhcp-option=option:router');
  const routes = g.routes.filter((r) => r.gateway && r.dst !== 'default');
  if (routes.length)
    args.push(
      `--dhcp-option=option:classless-static-route,${routes.map((r) => `${r.dst},${r.gateway}`).join(',')}`,
    );
  args.push(
    o.dns.nameservers.length
      ? `--dhcp-option=option:dns-server,${o.dns.nameservers.join(',')}`
      : '--dhcp-option=option:dns-server',
  );
  if (o.dns.searchDomains.length) {
    args.push(`--dhcp-option=option:domain-search,${o.dns.searchDomains.join(',')}`);
    args.push(`--dhcp-option=option:domain-name,${o.dns.searchDomains[0]}`);
  }
  if (o.hostname !== undefined) {
    if (!HOSTNAME.test(o.hostname) || o.hostname.length > 253)
      throw new NetworkSetupError(`hostname ${JSON.stringify(o.hostname)} cannot be sent by DHCP`);
    args.push(`--dhcp-host=*:*:*:*:*:*,${g.address},${o.hostname},infinite`);
  }
  if (process.getuid?.() === 0) args.push('--user=root', '--group=root'); // keep access to runDir
  return args;
}

/**
 * Starts dnsmasq for the guest and resolves once it serves DHCP on the bridge; rejects with a
 * NetworkSetupError (dnsmasq's own reason) when it cannot, leaving no process or file behind.
 */
export async function startDhcpServer(o: DhcpOptions): Promise<DhcpServer> {
  const c = o.config;
  // a missing bridge/tap means phase 1 did not run (dnsmasq would only warn and wait for it)
  for (const dev of [c.bridge, c.tap])
    await run('ip', ['link', 'show', 'dev', dev], o).catch((e: Error) => {
      throw new NetworkSetupError(`${dev} does not exist: the Pod network is not set up (${e.message})`);
    });
  mkdirSync(o.runDir, { recursive: true, mode: 0o700 });
  const leaseFile = path.join(o.runDir, 'dnsmasq.leases');
  // setpriv --pdeathsig: dnsmasq ends with its parent even when that is SIGKILLed (no orphan server)
  const argv = inNetns(o.netns, 'setpriv', [
    '--pdeathsig',
    'SIGTERM',
    '--',
    o.dnsmasq ?? 'dnsmasq',
    ...dnsmasqArgs(o, leaseFile),
  ]);
  const child: ChildProcess = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  const lines: string[] = [];
  const leaseWaiters: ((line: string) => void)[] = [];
  let lease: string | undefined;
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const ready = new Promise<void>((resolve, reject) => {
    child.on('error', (e) => reject(new NetworkSetupError(`dnsmasq: cannot run (${e.message})`)));
    child.stderr!.on('data', (d: Buffer) => {
      stderr += d.toString();
      let nl: number;
      while ((nl = stderr.indexOf('\n')) >= 0) {
        const line = stderr.slice(0, nl);
        stderr = stderr.slice(nl + 1);
        lines.push(line);
        if (lines.length > 50) lines.shift();
        if (/DHCP, IP range/.test(line)) resolve();
        const m = /DHCPACK\(\S+\) (\S+) (\S+)(?: (\S+))?/.exec(line);
        if (m && lease === undefined) {
          lease = `${m[1]} ${m[2]}${m[3] ? ` ${m[3]}` : ''}`;
          for (const w of leaseWaiters.splice(0)) w(lease);
        }
        o.log?.debug('dnsmasq', { line });
      }
    });
    void exited.then((code) =>
      reject(
        new NetworkSetupError(
          `DHCP server for ${c.bridge} failed to start (dnsmasq exit ${code}): ${
            [...lines, stderr]
              .map((l) => l.replace(/^dnsmasq: /, '').trim())
              .filter(Boolean)
              .join('; ') || 'no reason given'
          }`,
        ),
      ),
    );
  });
  try {
    await ready;
  } catch (e) {
    rmSync(leaseFile, { force: true });
    o.log?.error('DHCP server failed', { reason: (e as Error).message });
    throw e;
  }
  o.log?.info('DHCP server started', { bridge: c.bridge, guest: c.guest.address, pid: child.pid });
  let stopped: Promise<void> | undefined;
  return {
    pid: child.pid!,
    leaseFile,
    waitForLease: () =>
      lease !== undefined ? Promise.resolve(lease) : new Promise((resolve) => leaseWaiters.push(resolve)),
    stop: () =>
      (stopped ??= (async () => {
        if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
        await exited;
        rmSync(leaseFile, { force: true });
      })()),
  };
}
