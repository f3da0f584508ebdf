// Network namespaces for the e2e suites (root): a "node" netns and a "Pod" netns joined by a veth,
// the Pod's resolv.conf, TCP servers and clients inside them, and the launcher's own tun device.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export const isRoot = process.getuid?.() === 0;
export const NODE_IP = '192.168.79.1';
export const POD_IP = '192.168.79.2';
export const POD_MTU = 1400;
/** the dual-stack "Pod" (createNet with ipv6): its IPv6 address and the node's */
export const NODE_IP6 = 'fd00:79::1';
export const POD_IP6 = 'fd00:79::2';
/** the IPv6 name server in the dual-stack Pod's resolv.conf */
export const POD_DNS6 = 'fd00:10:96::a';
export const sh = (argv: string[]) => {
  const r = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${argv.join(' ')}: ${r.stderr}`);
  return r.stdout;
};

export interface Net {
  node: string;
  pod: string;
  podPath: string;
  destroy(): void;
}

/**
 * node netns <-veth-> Pod netns (eth0 with POD_IP, MTU 1400, default route via the node), and the Pod's resolv.conf;
 * with `ipv6` a dual-stack Pod (POD_IP6 too, an IPv6 name server in its resolv.conf).
 */
export function createNet(tag: string, o: { ipv6?: boolean } = {}): Net {
  const id = `kvtsnet${process.pid % 100000}${tag}`;
  const node = `${id}n`;
  const pod = `${id}p`;
  sh(['ip', 'netns', 'add', node]);
  sh(['ip', 'netns', 'add', pod]);
  // `ip netns exec` bind-mounts /etc/netns/<name>/resolv.conf over /etc/resolv.conf: the Pod's DNS config
  const etc = `/etc/netns/${pod}`;
  mkdirSync(etc, { recursive: true });
  writeFileSync(
    path.join(etc, 'resolv.conf'),
    `nameserver 10.96.0.10\n${o.ipv6 ? `nameserver ${POD_DNS6}\n` : ''}search e2e.svc.cluster.local svc.cluster.local\n`,
  );
  sh(['ip', '-n', node, 'link', 'add', 'node0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', pod]);
  sh(['ip', '-n', node, 'addr', 'add', `${NODE_IP}/24`, 'dev', 'node0']);
  sh(['ip', '-n', node, 'link', 'set', 'node0', 'mtu', String(POD_MTU), 'up']);
  sh(['ip', '-n', node, 'link', 'set', 'lo', 'up']);
  sh(['ip', '-n', pod, 'addr', 'add', `${POD_IP}/24`, 'dev', 'eth0']);
  sh(['ip', '-n', pod, 'link', 'set', 'eth0', 'mtu', String(POD_MTU), 'up']);
  sh(['ip', '-n', pod, 'link', 'set', 'lo', 'up']);
  sh(['ip', '-n', pod, 'route', 'add', 'default', 'via', NODE_IP]);
  if (o.ipv6) {
    // nodad: usable at once
    sh(['ip', '-n', node, '-6', 'addr', 'add', `${NODE_IP6}/64`, 'dev', 'node0', 'nodad']);
    sh(['ip', '-n', pod, '-6', 'addr', 'add', `${POD_IP6}/64`, 'dev', 'eth0', 'nodad']);
    sh(['ip', '-n', pod, '-6', 'route', 'add', 'default', 'via', NODE_IP6]);
  }
  return {
    node,
    pod,
    podPath: `/run/netns/${pod}`,
    destroy() {
      spawnSync('ip', ['netns', 'del', pod]);
      spawnSync('ip', ['netns', 'del', node]);
      rmSync(etc, { recursive: true, force: true });
      try {
        rmdirSync('/etc/netns'); // only when empty: other namespaces' files stay
      } catch {
        /* not empty, or gone */
      }
    },
  };
}

/**
 * A TCP server in `ns` answering each connection with `reply` (or the peer's address), then closing;
 * `closeAfterPeer`: the close only after the peer's FIN (Debian's passt 2023-03 can drop its FIN to the
 * guest when the host side closes before the guest's data and FIN are through).
 */
export function tcpServer(
  ns: string,
  port: number,
  reply?: string,
  host = '0.0.0.0',
  closeAfterPeer = false,
): { ready: Promise<void>; child: ChildProcess } {
  const answer = reply === undefined ? 'c.remoteAddress' : JSON.stringify(reply);
  const handler = closeAfterPeer
    ? `c=>{c.write(${answer}+'\\n');c.on('end',()=>c.end());c.on('error',()=>{});c.resume()}`
    : `c=>{c.end(${answer}+'\\n')}`;
  const code = `require('net').createServer({allowHalfOpen:${closeAfterPeer}},${handler}).listen(${port},${JSON.stringify(host)},()=>console.log('up'))`;
  const child = spawn('ip', ['netns', 'exec', ns, process.execPath, '-e', code], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (c) => reject(new Error(`tcp server in ${ns} exited ${c}`)));
  });
  return { ready, child };
}

/**
 * Connects from `ns` to host:port and returns what it was sent (or throws with the error code); `send`:
 * written first (a client that speaks first, for Debian's passt 2023-03, see packages/network's README).
 */
export function tcpGet(ns: string, host: string, port: number, send?: string): string {
  const write = send === undefined ? '' : `,()=>c.write(${JSON.stringify(send)})`;
  const code = `const c=require('net').connect(${port},${JSON.stringify(host)}${write});let d='';c.setTimeout(30000,()=>{console.error('timeout');process.exit(3)});c.on('data',x=>d+=x);c.on('end',()=>process.stdout.write(d));c.on('error',e=>{console.error(e.code);process.exit(2)})`;
  const r = spawnSync('ip', ['netns', 'exec', ns, process.execPath, '-e', code], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`connect ${host}:${port} from ${ns}: ${r.stderr.trim()}`);
  return r.stdout.trim();
}

/**
 * The wrapper that runs a launcher inside `net`'s Pod netns with a 0666 tun node of its own
 * bind-mounted at /dev/net/tun in a private mount namespace (this machine's /dev/net/tun is 0600
 * root; most distributions make it 0666, as a Pod's device plugin passes it on). `dir`: where the
 * node is made (removed with it). The script is fixed; the paths are positional arguments.
 */
export function launcherInNetns(net: Net, dir: string): string[] {
  const tun = path.join(dir, 'tun');
  sh(['mknod', '-m', '0666', tun, 'c', '10', '200']);
  return [
    'ip',
    'netns',
    'exec',
    net.pod,
    'unshare',
    '--mount',
    '--propagation',
    'private',
    'sh',
    '-c',
    'mount --bind "$0" /dev/net/tun && exec "$@"',
    tun,
  ];
}
