// Test topology with real network namespaces: a "node" netns, a "Pod" netns joined to it by a veth
// (the Pod's eth0), and optionally a "guest" netns whose eth0 is a veth port of the Pod's bridge,
// standing in for the guest's NIC so DHCP and NAT can be exercised without a VM.
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, chmodSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const isRoot = process.getuid?.() === 0;
export const NODE_IP = '192.168.77.1';
export const POD_IP = '192.168.77.2';
export const POD_MTU = 1400;
/** with createTopology({ ipv6: true }): the node's and the Pod's IPv6 addresses (dual stack) */
export const NODE_IP6 = 'fd00:77::1';
export const POD_IP6 = 'fd00:77::2';
let counter = 0;

const sh = (argv: string[]) => execFileSync(argv[0]!, argv.slice(1), { encoding: 'utf8' });
const inNs = (ns: string, argv: string[]) => ['ip', 'netns', 'exec', ns, ...argv];

export interface Topology {
  node: string;
  pod: string;
  nodePath: string;
  podPath: string;
  tmp: string;
  exec(ns: string, argv: string[]): string;
  /** adds a guest netns whose eth0 is plugged into `bridge` in the Pod netns */
  addGuest(bridge: string): string;
  /** runs busybox udhcpc in the guest netns; resolves with what it was given (udhcpc's variables) */
  dhcp(guest: string): Record<string, string>;
  /**
   * runs ISC dhclient -6 (stateful: an IA_NA address) once in the guest netns; resolves with what it was given
   * (its script's variables: new_ip6_address, new_dhcp6_name_servers, ...); the address is applied (nodad)
   */
  dhcp6(guest: string): Record<string, string>;
  /** busybox udhcpc left running in the guest netns (SIGUSR1 renews); its hook writes OUT.<event> */
  dhcpClient(guest: string, out: string): ChildProcess;
  links(ns: string): string[];
  destroy(): void;
}

/**
 * `hairpinBridge`: the node side is a bridge (`nodebr`, holding NODE_IP) with the veth as a hairpin port, as the
 * CNI bridge plugin's `hairpinMode` makes it: broadcasts from the Pod come back in through the Pod's interface.
 */
export function createTopology(opts: { ipv6?: boolean; hairpinBridge?: boolean } = {}): Topology {
  const id = `kvts${process.pid}x${counter++}`;
  const node = `${id}n`;
  const pod = `${id}p`;
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'kvts-net-'));
  const nss = [node, pod];
  sh(['ip', 'netns', 'add', node]);
  sh(['ip', 'netns', 'add', pod]);
  sh(['ip', '-n', node, 'link', 'add', 'node0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', pod]);
  if (opts.hairpinBridge) {
    sh(['ip', '-n', node, 'link', 'add', 'nodebr', 'type', 'bridge']);
    sh(['ip', '-n', node, 'link', 'set', 'node0', 'master', 'nodebr']);
    sh(['ip', '-n', node, 'link', 'set', 'dev', 'node0', 'type', 'bridge_slave', 'hairpin', 'on']);
    sh(['ip', '-n', node, 'addr', 'add', `${NODE_IP}/24`, 'dev', 'nodebr']);
    sh(['ip', '-n', node, 'link', 'set', 'nodebr', 'up']);
  } else sh(['ip', '-n', node, 'addr', 'add', `${NODE_IP}/24`, 'dev', 'node0']);
  sh(['ip', '-n', node, 'link', 'set', 'node0', 'mtu', String(POD_MTU), 'up']);
  sh(['ip', '-n', node, 'link', 'set', 'lo', 'up']);
  sh(['ip', '-n', pod, 'addr', 'add', `${POD_IP}/24`, 'dev', 'eth0']);
  sh(['ip', '-n', pod, 'link', 'set', 'eth0', 'mtu', String(POD_MTU), 'up']);
  sh(['ip', '-n', pod, 'link', 'set', 'lo', 'up']);
  sh(['ip', '-n', pod, 'route', 'add', 'default', 'via', NODE_IP]);
  if (opts.ipv6) {
    // dual stack, as a Pod of a dual-stack cluster (nodad: usable at once)
    sh(['ip', '-n', node, '-6', 'addr', 'add', `${NODE_IP6}/64`, 'dev', 'node0', 'nodad']);
    sh(['ip', '-n', pod, '-6', 'addr', 'add', `${POD_IP6}/64`, 'dev', 'eth0', 'nodad']);
    sh(['ip', '-n', pod, '-6', 'route', 'add', 'default', 'via', NODE_IP6]);
  }
  const script = path.join(tmp, 'udhcpc.sh');
  // udhcpc's hook: apply the lease like a guest would and record every variable it got
  writeFileSync(
    script,
    [
      '#!/bin/sh',
      'env > "$UDHCPC_OUT.$1"',
      '[ "$1" = bound ] || exit 0',
      'ip addr add "$ip/$mask" dev "$interface"',
      '[ -n "$mtu" ] && ip link set dev "$interface" mtu "$mtu"',
      '[ -n "$router" ] && ip route add default via "$router"',
      'exit 0',
      '',
    ].join('\n'),
  );
  chmodSync(script, 0o755);
  const script6 = path.join(tmp, 'dhclient6.sh');
  // dhclient's script (the variable reason, no arguments): apply the address and record the variables
  writeFileSync(
    script6,
    [
      '#!/bin/sh',
      'case "$reason" in BOUND6 | RENEW6 | REBIND6 | REBOOT6) ;; *) exit 0 ;; esac',
      'ip -6 addr add "$new_ip6_address/$new_ip6_prefixlen" dev "$interface" nodad',
      'env > "$DHCLIENT_OUT.tmp" && mv "$DHCLIENT_OUT.tmp" "$DHCLIENT_OUT"',
      'exit 0',
      '',
    ].join('\n'),
  );
  chmodSync(script6, 0o755);
  const pidFiles: string[] = [];
  return {
    node,
    pod,
    nodePath: `/run/netns/${node}`,
    podPath: `/run/netns/${pod}`,
    tmp,
    exec: (ns, argv) => sh(inNs(ns, argv)),
    addGuest(bridge) {
      const guest = `${id}g${nss.length}`;
      sh(['ip', 'netns', 'add', guest]);
      nss.push(guest);
      sh([
        'ip',
        '-n',
        pod,
        'link',
        'add',
        `gst${nss.length}`,
        'type',
        'veth',
        'peer',
        'name',
        'eth0',
        'netns',
        guest,
      ]);
      sh(['ip', '-n', pod, 'link', 'set', `gst${nss.length}`, 'master', bridge, 'up']);
      sh(['ip', '-n', guest, 'link', 'set', 'eth0', 'up']);
      sh(['ip', '-n', guest, 'link', 'set', 'lo', 'up']);
      return guest;
    },
    dhcp(guest) {
      const out = path.join(tmp, `lease-${guest}`);
      const r = spawnSync(
        'ip',
        inNs(guest, [
          'busybox',
          'udhcpc',
          '-i',
          'eth0',
          '-f',
          '-q',
          '-n',
          '-t',
          '10',
          '-T',
          '2',
          '-O',
          'search',
          '-O',
          'hostname',
          '-O',
          'mtu',
          '-s',
          script,
        ]).slice(1),
        { encoding: 'utf8', env: { ...process.env, UDHCPC_OUT: out } },
      );
      if (r.status !== 0 || !existsSync(`${out}.bound`))
        throw new Error(`udhcpc got no lease (exit ${r.status}): ${r.stderr}`);
      return Object.fromEntries(
        readFileSync(`${out}.bound`, 'utf8')
          .split('\n')
          .filter((l) => l.includes('='))
          .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
      );
    },
    dhcp6(guest) {
      const out = path.join(tmp, `lease6-${guest}`);
      const pid = path.join(tmp, `dhclient6-${guest}.pid`);
      pidFiles.push(pid);
      // dhclient binds to the link-local address: wait until it has one that passed DAD
      for (let i = 0; i < 100; i++) {
        const ll = sh(inNs(guest, ['ip', '-6', 'addr', 'show', 'dev', 'eth0', 'scope', 'link']));
        if (ll.includes('inet6') && !ll.includes('tentative')) break;
        spawnSync('sleep', ['0.1']);
      }
      // -1: one try (exits non-zero without a lease); then it goes to the background: its pid file ends it
      const r = spawnSync(
        'ip',
        inNs(guest, [
          'dhclient',
          '-6',
          '-1',
          '-v',
          '--dad-wait-time',
          '5',
          '-cf',
          '/dev/null',
          '-lf',
          path.join(tmp, `dhclient6-${guest}.leases`),
          '-pf',
          pid,
          '-sf',
          script6,
          '-e', // dhclient passes its script a clean environment: this variable explicitly
          `DHCLIENT_OUT=${out}`,
          'eth0',
        ]).slice(1),
        { encoding: 'utf8', timeout: 90_000 },
      );
      if (r.status !== 0 || !existsSync(out))
        throw new Error(`dhclient -6 got no lease (exit ${r.status}): ${r.stderr}`);
      return Object.fromEntries(
        readFileSync(out, 'utf8')
          .split('\n')
          .filter((l) => l.includes('='))
          .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
      );
    },
    dhcpClient(guest, out) {
      const argv = inNs(guest, [
        'busybox',
        'udhcpc',
        '-i',
        'eth0',
        '-f',
        '-t',
        '10',
        '-T',
        '2',
        '-s',
        script,
      ]);
      return spawn(argv[0]!, argv.slice(1), {
        stdio: 'ignore',
        env: { ...process.env, UDHCPC_OUT: out },
      });
    },
    links: (ns) =>
      (JSON.parse(sh(['ip', '-n', ns, '-json', 'link', 'show'])) as { ifname: string }[]).map(
        (l) => l.ifname,
      ),
    destroy() {
      for (const f of pidFiles) {
        const pid = existsSync(f) ? Number(readFileSync(f, 'utf8').trim()) : NaN;
        if (pid > 0) spawnSync('kill', [String(pid)]);
      }
      for (const ns of nss.reverse()) spawnSync('ip', ['netns', 'del', ns]);
      rmSync(tmp, { recursive: true, force: true });
    },
  };
}

/** A TCP server in `ns` on `port` that answers each connection with the peer's address, then closes. */
export function tcpEcho(ns: string, host: string, port: number): { ready: Promise<void>; stop(): void } {
  const code = `const s=require('net').createServer(c=>{c.end(c.remoteAddress+'\\n')});s.listen(${port},${JSON.stringify(host)},()=>console.log('up'))`;
  const child = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', code], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout.once('data', () => resolve());
    child.once('exit', (c) => reject(new Error(`tcp server exited ${c}`)));
  });
  return { ready, stop: () => child.kill() };
}

/** Connects from `ns` to host:port; resolves with what the server said, rejects with the error. */
export function tcpGet(ns: string, host: string, port: number): string {
  const code = `const c=require('net').connect(${port},${JSON.stringify(host)});let d='';c.setTimeout(20000,()=>{console.error('timeout');process.exit(3)});c.on('data',x=>d+=x);c.on('end',()=>{process.stdout.write(d)});c.on('error',e=>{console.error(e.code);process.exit(2)})`;
  const r = spawnSync('ip', ['netns', 'exec', ns, process.execPath, '-e', code], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`connect ${host}:${port} from ${ns}: ${r.stderr.trim()}`);
  return r.stdout.trim();
}

export const CLI = fileURLToPath(new URL('../bin/kvts-pod-network.js', import.meta.url));

export interface NetnsDhcp {
  pid: number;
  /** resolves with "IP MAC [HOSTNAME]" once the server acknowledged a lease */
  waitForLease(): Promise<string>;
  /** resolves with "IP CLIENT-DUID" once the DHCPv6 server replied with the address */
  waitForLease6(): Promise<string>;
  /** what it logged so far */
  stderr(): string;
  /** SIGTERM, resolves with the exit code */
  stop(): Promise<number | null>;
}

/**
 * Runs the phase-2 DHCP server (the CLI) inside the netns `ns`, optionally as uid/gid 107 with only
 * the capabilities `caps` (setpriv); resolves once it prints "ready", rejects with its stderr when it
 * exits first. setpriv --pdeathsig: the server ends with this test process.
 */
export async function startDhcpInNetns(
  t: Topology,
  config: object,
  opts: { args?: string[]; caps?: string[]; env?: Record<string, string> } = {},
): Promise<NetnsDhcp> {
  chmodSync(t.tmp, 0o755); // readable by uid 107
  const dir = mkdtempSync(path.join(t.tmp, 'dhcp-'));
  chmodSync(dir, 0o755);
  const cfg = path.join(dir, 'net.json');
  writeFileSync(cfg, JSON.stringify(config), { mode: 0o644 });
  const resolv = path.join(dir, 'resolv.conf');
  writeFileSync(
    resolv,
    'nameserver 10.96.0.10\nnameserver 10.96.0.11\nnameserver fd00:10:96::a\nsearch ns1.svc.cluster.local cluster.local\n',
    {
      mode: 0o644,
    },
  );
  const caps = opts.caps?.map((c) => `,+${c}`).join('') ?? '';
  const priv = opts.caps
    ? ['--reuid=107', '--regid=107', '--clear-groups', `--inh-caps=-all${caps}`, `--ambient-caps=-all${caps}`]
    : [];
  const child = spawn(
    'ip',
    [
      'netns',
      'exec',
      t.pod,
      'setpriv',
      '--pdeathsig',
      'SIGTERM',
      ...priv,
      process.execPath,
      CLI,
      'dhcp',
      '--config',
      cfg,
      '--resolv-conf',
      resolv,
      ...(opts.args ?? []),
    ],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...opts.env } },
  );
  let out = '';
  let err = '';
  const waiters: (() => void)[] = [];
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    for (const w of waiters.splice(0)) w();
  });
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const closed = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  const until = (what: RegExp) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const check = () => {
        const m = what.exec(out);
        if (m) resolve(m);
        else waiters.push(check);
      };
      check();
      void closed.then((code) => reject(new Error(`DHCP server exited ${code}: ${err.trim()}`)));
    });
  await until(/^ready$/m);
  return {
    pid: child.pid!,
    stderr: () => err,
    waitForLease: async () => (await until(/^lease (.*)$/m))[1]!,
    waitForLease6: async () => (await until(/^lease6 (.*)$/m))[1]!,
    stop: () => {
      child.kill('SIGTERM');
      return closed;
    },
  };
}
