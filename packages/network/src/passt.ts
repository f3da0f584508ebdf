// passt for the standalone launcher: one passt process per NIC, the launcher's own child (foreground, no
// daemon, no pid file), listening on a unix socket in the VMI's private (0700) dir; QEMU connects to it with
// `-netdev stream` (the converter's qemuArgs). passt gives the guest the host's addresses by DHCP (and
// NDP/DHCPv6 when the host has IPv6), forwards the interface's `ports:` from the host, and maps the gateway
// address to the host's loopback. Spawned with an argument array, never a shell.
import { spawn } from 'node:child_process';
import { lstat, unlink } from 'node:fs/promises';
import type { PasstNic } from '@kubevirt-ts/converter';
import type { Logger } from '@kubevirt-ts/log';

/** A passt that could not be started (missing binary, bad option, bind failure, ...). */
export class PasstError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PasstError';
  }
}

/** Options of {@link startPasst}. */
export interface PasstOptions {
  /** the passt binary (default `passt`, looked up in PATH) */
  binary?: string;
  /** uid:gid passt runs as (the launcher's QEMU user when the launcher is root); default: the caller's */
  user?: { uid: number; gid: number };
  log?: Pick<Logger, 'info' | 'warn' | 'error' | 'debug'>;
  /** how long passt may take to bind its socket (default 10 s) */
  readyTimeoutMs?: number;
}

/** A running passt (one per NIC). */
export interface PasstProcess {
  pid: number;
  nic: PasstNic;
  /** resolves when the process has ended (by stop() or by itself) */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM (SIGKILL after 3 s), then removes the socket; idempotent */
  stop(): Promise<void>;
}

/** passt's arguments for one NIC: foreground, log to stderr, its socket, the MTU, the forwarded ports. */
export function passtArgs(nic: PasstNic): string[] {
  return [
    '--foreground', // the launcher's own child: its pid is the one spawn returned (no daemon, no pid file)
    '--stderr',
    '--socket',
    nic.socket,
    '--mtu',
    String(nic.mtu),
    // the guest's ports forwarded from the host (all its addresses, as passt and podman do); none: none
    '--tcp-ports',
    nic.tcpPorts.length ? nic.tcpPorts.join(',') : 'none',
    '--udp-ports',
    nic.udpPorts.length ? nic.udpPorts.join(',') : 'none',
    // not --no-map-gw: the guest reaches the host's loopback through the gateway address
  ];
}

async function removeSocket(p: string): Promise<void> {
  try {
    if ((await lstat(p)).isSocket()) await unlink(p);
  } catch {
    /* absent */
  }
}

/** Debian's passt (2023-03), run unprivileged, sandboxes itself in a new user namespace and exits when it cannot. */
const USERNS_HINT =
  " (passt run as a non-root user needs to create a user namespace: a container runtime's default seccomp" +
  " profile (a Pod's RuntimeDefault) or the node (user.max_user_namespaces, kernel.unprivileged_userns_clone)" +
  ' forbids it here)';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function startOne(nic: PasstNic, o: PasstOptions): Promise<PasstProcess> {
  const binary = o.binary ?? 'passt';
  const log = o.log;
  // the socket dir is the launcher's private one: a socket left there by an earlier run is stale
  await removeSocket(nic.socket);
  const args = passtArgs(nic);
  const child = spawn(binary, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(o.user ? { uid: o.user.uid, gid: o.user.gid } : {}),
  });
  const tail: string[] = [];
  const onLine = (line: string) => {
    // passt also tries syslog, which a launcher (in a Pod, or in standalone's PID namespace) does not have
    if (!line.trim() || /^Failed to send \d+ bytes to syslog$/.test(line.trim())) return;
    tail.push(line.trim());
    if (tail.length > 20) tail.shift();
    log?.debug(`passt: ${line.trim()}`, { component: 'passt', iface: nic.name, pid: child.pid });
  };
  for (const s of [child.stdout, child.stderr]) {
    let buf = '';
    s.setEncoding('utf8');
    s.on('data', (d: string) => {
      buf += d;
      let i: number;
      while ((i = buf.indexOf('\n')) >= 0) {
        onLine(buf.slice(0, i));
        buf = buf.slice(i + 1);
      }
    });
    s.on('end', () => onLine(buf));
  }
  let spawnError: NodeJS.ErrnoException | undefined;
  let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.on('error', (e: NodeJS.ErrnoException) => {
      spawnError = e;
      exit ??= { code: null, signal: null };
      resolve(exit);
    });
    child.on('exit', (code, signal) => {
      exit = { code, signal };
      // stderr may still be draining
      setTimeout(() => resolve(exit!), 50);
    });
  });
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      if (exit === undefined) {
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 3000);
        await exited;
        clearTimeout(t);
      }
      await removeSocket(nic.socket);
    })());

  const deadline = Date.now() + (o.readyTimeoutMs ?? 10_000);
  for (;;) {
    if (exit !== undefined) {
      await exited;
      await removeSocket(nic.socket);
      if (spawnError)
        throw new PasstError(
          spawnError.code === 'ENOENT'
            ? `passt: ${binary} not found: install passt (Debian's passt package), or run standalone with --pod-network slirp`
            : `passt: cannot run ${binary}: ${spawnError.message}`,
        );
      const how = exit.signal ? `by signal ${exit.signal}` : `with code ${exit.code}`;
      throw new PasstError(
        `passt (interface ${nic.name}) exited ${how} before its socket was ready` +
          (tail.length ? `: ${tail.slice(-5).join(' | ')}` : '') +
          (tail.some((l) => l.startsWith("Couldn't create user namespace")) ? USERNS_HINT : ''),
      );
    }
    try {
      if ((await lstat(nic.socket)).isSocket()) break;
    } catch {
      /* not yet */
    }
    if (Date.now() > deadline) {
      await stop();
      throw new PasstError(
        `passt (interface ${nic.name}) did not bind ${nic.socket} within ${o.readyTimeoutMs ?? 10_000} ms`,
      );
    }
    await sleep(20);
  }
  log?.info('passt listening', {
    component: 'passt',
    iface: nic.name,
    pid: child.pid,
    socket: nic.socket,
    tcpPorts: nic.tcpPorts,
    udpPorts: nic.udpPorts,
  });
  return { pid: child.pid!, nic, exited, stop };
}

/**
 * Starts one passt per NIC (the converter's {@link PasstNic}s) and resolves when each has bound its
 * socket. A passt that cannot be started rejects with a PasstError naming the cause (binary missing, its
 * exit code and last messages); the ones already started are stopped first, so nothing is left behind.
 */
export async function startPasst(nics: PasstNic[], o: PasstOptions = {}): Promise<PasstProcess[]> {
  const started: PasstProcess[] = [];
  try {
    for (const nic of nics) started.push(await startOne(nic, o));
  } catch (e) {
    await Promise.all(started.map((p) => p.stop()));
    throw e;
  }
  return started;
}
