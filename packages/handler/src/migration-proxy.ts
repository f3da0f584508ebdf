// virt-handler's migration proxy, as upstream's (pkg/virt-handler/migration-proxy, v1.1.0): the
// launchers never talk to each other's node directly.
//
//   source Pod (unix socket) -> source handler (TCP client) ---TCP---> target handler (TCP server)
//     -> target Pod (unix socket: the target launcher's libvirtd, or the incoming QEMU's stream socket)
//
// Target side: `startTargetListener(uid, [libvirtSocket, qemuStreamSocket(, nbdSocket)])` opens one TCP listener
// per target socket on a free port; `targetListenerPorts(uid)` gives `{tcpPort: launcherPort}` (0 for the
// libvirt connection, 49152 for QEMU's stream, 49153 for the disks of a block migration: the target QEMU's
// NBD server), which the target handler publishes in the VMI's migrationState (targetDirectMigrationNodePorts,
// with targetNodeAddress).
// Source side: `startSourceListener(uid, targetAddress, ports, shareDir)` opens one unix socket per
// entry at upstream's path `<shareDir>/migrationproxy/<uid>[-<port>]-source.sock`, where the source
// launcher's libvirtd and QEMU connect (cmd-protocol's upstreamMigrationTarget), each connection piped
// to `targetAddress:<tcpPort>`. Bytes are copied both ways; when one side closes, the other is closed.
// The TCP leg is mutual TLS with `tls` (as upstream's unless `migrations.disableTLS`): the target
// listener requires a client certificate signed by `tls.ca`, the source verifies the target's chain
// against the same CA (no host name check: nodes are dialled by address, upstream's client config too);
// with `clientName`/`serverName` each side also checks the other's common name (upstream's CN types).
// The unix legs stay plain (they are inside the node, in 0700 dirs).
import { chown, mkdir, open, rm } from 'node:fs/promises';
import net from 'node:net';
import tls from 'node:tls';
import path from 'node:path';
import {
  LIBVIRT_BLOCK_MIGRATION_PORT,
  LIBVIRT_DIRECT_MIGRATION_PORT,
  MAX_SOCKET_PATH_BYTES,
  migrationProxyKey,
  migrationProxySocketPath,
} from '@kubevirt-ts/cmd-protocol';
import type { Logger } from '@kubevirt-ts/log';

/**
 * upstream's migration port range: the libvirt connection (key without port), QEMU's direct stream and the
 * disks' stream of a block migration (the target QEMU's NBD server)
 */
export const MIGRATION_PORTS = [0, LIBVIRT_DIRECT_MIGRATION_PORT, LIBVIRT_BLOCK_MIGRATION_PORT] as const;

export interface MigrationProxyOptions {
  logger: Logger;
  /** address the target listeners bind (default 0.0.0.0; tests use 127.0.0.1) */
  bindAddress?: string;
  /** owner of the source unix sockets and their dir: the launcher's QEMU/libvirtd user (default: unchanged) */
  socketOwner?: { uid: number; gid: number };
  /** mutual TLS on the TCP leg: this handler's certificate and key (server and client) and the CA both trust */
  tls?: MigrationTls;
}

/** PEM contents (not paths). */
export interface MigrationTls {
  /** this handler's certificate (extended key usage serverAuth, and clientAuth unless clientCert is given) */
  cert: string | Buffer;
  key: string | Buffer;
  /** the CA the other handlers' certificates are signed by */
  ca: string | Buffer;
  /** a separate client certificate for the source's outbound leg (upstream has one per role) */
  clientCert?: string | Buffer;
  clientKey?: string | Buffer;
  /**
   * the common name a source handler's client certificate must carry (target side; upstream's
   * `--migration-cn-types`); unset: any client certificate of `ca`
   */
  clientName?: string;
  /** the common name the target handler's certificate must carry (source side); unset: any of `ca` */
  serverName?: string;
}

interface Proxy {
  server: net.Server;
  /** the launcher socket a target proxy forwards to, or the unix path a source proxy listens on */
  path: string;
  /** target: the TCP port it listens on; source: the TCP address it forwards to */
  tcp: string;
  conns: Set<net.Socket>;
}

/** Pipes two half-open sockets both ways (an end is passed on); either closing or failing closes the other. */
function splice(a: net.Socket, b: net.Socket, onBytes: (n: number) => void): void {
  a.pipe(b);
  b.pipe(a);
  a.on('data', (d: Buffer) => onBytes(d.length));
  const end = () => {
    a.destroy();
    b.destroy();
  };
  a.on('close', end).on('error', end);
  b.on('close', end).on('error', end);
}

/** What went through the proxies of a key (both roles, all connections so far). */
export interface MigrationProxyStats {
  connections: number;
  /** bytes from the connecting side (source launcher / source handler) */
  bytesIn: number;
  /** bytes back to it */
  bytesOut: number;
}

export class MigrationProxyManager {
  private readonly stats = new Map<string, MigrationProxyStats>();
  private readonly targets = new Map<string, Proxy[]>();
  private readonly sources = new Map<string, Proxy[]>();
  private shuttingDown = false;

  constructor(private readonly opts: MigrationProxyOptions) {}

  /** Connections and bytes proxied for a key (kept after the listeners stop). */
  proxyStats(key: string): MigrationProxyStats {
    return { ...(this.stats.get(key) ?? { connections: 0, bytesIn: 0, bytesOut: 0 }) };
  }

  /** Number of open listeners (upstream's OpenListenerCount). */
  openListenerCount(): number {
    let n = 0;
    for (const l of [...this.targets.values(), ...this.sources.values()]) n += l.length;
    return n;
  }

  /**
   * Target side: a TCP listener (free port) per launcher socket. Idempotent for the same sockets;
   * other sockets replace the listeners of the key.
   */
  async startTargetListener(key: string, targetUnixFiles: string[]): Promise<void> {
    if (this.shuttingDown) throw new Error('migration proxy: shutting down, no new listeners');
    const cur = this.targets.get(key);
    if (cur) {
      const same =
        cur.length === targetUnixFiles.length && cur.every((p) => targetUnixFiles.includes(p.path));
      if (same) return;
      await this.stopTargetListener(key);
    }
    const list: Proxy[] = [];
    try {
      for (const file of targetUnixFiles) {
        const conns = new Set<net.Socket>();
        const t = this.opts.tls;
        const onConn = (inbound: net.Socket) => {
          if (t?.clientName !== undefined) {
            const cn = (inbound as tls.TLSSocket).getPeerCertificate()?.subject?.CN;
            if (cn !== t.clientName) {
              this.opts.logger.warn('migration proxy: a client certificate with another name was refused', {
                uid: key,
                peer: `${inbound.remoteAddress ?? ''}:${inbound.remotePort ?? ''}`,
                reason: 'ClientNameRefused',
                name: String(cn),
              });
              inbound.destroy();
              return;
            }
          }
          this.forward(key, inbound, { path: file }, conns);
        };
        const server = t
          ? tls.createServer(
              {
                cert: t.cert,
                key: t.key,
                ca: t.ca,
                requestCert: true,
                rejectUnauthorized: true,
                allowHalfOpen: true,
                minVersion: 'TLSv1.2',
              },
              onConn,
            )
          : net.createServer({ allowHalfOpen: true }, onConn);
        if (t)
          server.on('tlsClientError', (err: Error, sock: tls.TLSSocket) => {
            this.opts.logger.warn('migration proxy: a TLS client was refused', {
              uid: key,
              peer: `${sock.remoteAddress ?? ''}:${sock.remotePort ?? ''}`,
              reason: err.message,
            });
          });
        await listen(server, { port: 0, host: this.opts.bindAddress ?? '0.0.0.0' });
        const port = (server.address() as net.AddressInfo).port;
        list.push({ server, path: file, tcp: String(port), conns });
        this.opts.logger.info('migration proxy listening on the target', { uid: key, port, outbound: file });
      }
    } catch (e) {
      for (const p of list) closeProxy(p);
      throw e;
    }
    this.targets.set(key, list);
  }

  /** `{tcpPort: launcherPort}` of the key's target listeners (upstream's GetTargetListenerPorts). */
  targetListenerPorts(key: string): Record<string, number> {
    const out: Record<string, number> = {};
    for (const p of this.targets.get(key) ?? []) {
      // which launcher socket: the one named with the QEMU stream port, else the libvirt connection
      const port = MIGRATION_PORTS.find((x) => x !== 0 && p.path.includes(migrationProxyKey(key, x))) ?? 0;
      out[p.tcp] = port;
    }
    return out;
  }

  async stopTargetListener(key: string): Promise<void> {
    const list = this.targets.get(key);
    if (!list) return;
    this.targets.delete(key);
    for (const p of list) closeProxy(p);
    this.opts.logger.info('migration proxy stopped on the target', { uid: key });
  }

  /**
   * Source side: a unix socket per `{tcpPort: launcherPort}` entry, at
   * `<shareDir>/migrationproxy/<key>[-<launcherPort>]-source.sock`, piped to `targetAddress:tcpPort`.
   */
  async startSourceListener(
    key: string,
    targetAddress: string,
    ports: Record<string, number>,
    shareDir: string,
  ): Promise<void> {
    if (this.shuttingDown) throw new Error('migration proxy: shutting down, no new listeners');
    const entries = Object.entries(ports);
    if (entries.length === 0) throw new Error('migrationState.targetDirectMigrationNodePorts: empty');
    const cur = this.sources.get(key);
    if (cur) {
      const want = new Set(entries.map(([tcp]) => `${targetAddress}:${tcp}`));
      if (cur.length === entries.length && cur.every((p) => want.has(p.tcp))) return;
      await this.stopSourceListener(key);
    }
    const dir = path.join(shareDir, 'migrationproxy');
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const owner = this.opts.socketOwner;
    if (owner) await chown(dir, owner.uid, owner.gid);
    const list: Proxy[] = [];
    try {
      for (const [tcpPort, launcherPort] of entries) {
        const file = migrationProxySocketPath(shareDir, migrationProxyKey(key, launcherPort));
        await rm(file, { force: true });
        const conns = new Set<net.Socket>();
        const port = Number(tcpPort);
        const server = net.createServer({ allowHalfOpen: true }, (inbound) =>
          this.forward(key, inbound, { host: targetAddress, port }, conns),
        );
        const short = await shortUnixPath(file);
        try {
          await listen(server, { path: short.path });
        } finally {
          short.release();
        }
        if (owner) await chown(file, owner.uid, owner.gid);
        list.push({ server, path: file, tcp: `${targetAddress}:${tcpPort}`, conns });
        this.opts.logger.info('migration proxy listening on the source', {
          uid: key,
          socket: file,
          outbound: `${targetAddress}:${tcpPort}`,
        });
      }
    } catch (e) {
      for (const p of list) closeProxy(p);
      throw e;
    }
    this.sources.set(key, list);
  }

  /** The unix sockets of the key's source listeners (upstream's GetSourceListenerFiles). */
  sourceListenerFiles(key: string): string[] {
    return (this.sources.get(key) ?? []).map((p) => p.path);
  }

  async stopSourceListener(key: string): Promise<void> {
    const list = this.sources.get(key);
    if (!list) return;
    this.sources.delete(key);
    for (const p of list) {
      closeProxy(p);
      await rm(p.path, { force: true });
    }
    this.opts.logger.info('migration proxy stopped on the source', { uid: key });
  }

  /** No new listeners; closes all (upstream: graceful shutdown of virt-handler). */
  async close(): Promise<void> {
    this.shuttingDown = true;
    for (const k of [...this.targets.keys()]) await this.stopTargetListener(k);
    for (const k of [...this.sources.keys()]) await this.stopSourceListener(k);
  }

  private forward(
    key: string,
    inbound: net.Socket,
    to: net.NetConnectOpts,
    conns: Set<net.Socket>,
    onDialled: () => void = () => undefined,
  ): void {
    // half-open: one direction may end (FIN passed on) while the other still carries data
    if ('path' in to && Buffer.byteLength(to.path) > MAX_SOCKET_PATH_BYTES) {
      // a long launcher socket path (the target Pod's share dir): dial through its directory's descriptor
      void shortUnixPath(to.path).then(
        (short) => {
          // the inbound socket buffers meanwhile: nothing reads it before the outbound leg is spliced on
          this.forward(key, inbound, { path: short.path }, conns, short.release);
        },
        (e: Error) => {
          this.opts.logger.warn('migration proxy: the outbound leg failed', {
            uid: key,
            outbound: to.path,
            reason: e.message,
          });
          inbound.destroy();
        },
      );
      return;
    }
    const t = this.opts.tls;
    const outbound =
      t && !('path' in to)
        ? tls.connect({
            host: (to as net.TcpNetConnectOpts).host,
            port: (to as net.TcpNetConnectOpts).port,
            cert: t.clientCert ?? t.cert,
            key: t.clientKey ?? t.key,
            ca: t.ca,
            // the chain is checked against the CA; nodes are dialled by address, so the name checked is the
            // certificate's common name (upstream's client config), not the address
            checkServerIdentity: (_host, cert) =>
              t.serverName !== undefined && cert.subject?.CN !== t.serverName
                ? new Error(
                    `the target's certificate is for ${String(cert.subject?.CN)}, not ${t.serverName}`,
                  )
                : undefined,
            minVersion: 'TLSv1.2',
            // passed on to the TLSSocket (not in the typings): one direction may end while the other carries data
            ...({ allowHalfOpen: true } as object),
          })
        : net.connect({ ...to, allowHalfOpen: true });
    conns.add(inbound).add(outbound);
    outbound.once('connect', onDialled).once('error', onDialled).once('close', onDialled);
    let inBytes = 0;
    let outBytes = 0;
    let st = this.stats.get(key);
    if (!st) this.stats.set(key, (st = { connections: 0, bytesIn: 0, bytesOut: 0 }));
    const stats = st;
    stats.connections++;
    outbound.once(t && !('path' in to) ? 'secureConnect' : 'connect', () => {
      splice(inbound, outbound, (n) => {
        inBytes += n;
        stats.bytesIn += n;
      });
      outbound.on('data', (d: Buffer) => {
        outBytes += d.length;
        stats.bytesOut += d.length;
      });
    });
    outbound.once('error', (e) => {
      this.opts.logger.warn('migration proxy: the outbound leg failed', {
        uid: key,
        outbound: 'path' in to ? to.path : `${to.host}:${to.port}`,
        reason: e.message,
      });
      inbound.destroy();
    });
    inbound.once('close', () => {
      conns.delete(inbound);
      conns.delete(outbound);
      this.opts.logger.info('migration proxy connection closed', { uid: key, inBytes, outBytes });
    });
  }
}

/**
 * A unix socket path short enough to bind or dial. The Pod's share dir as the handler sees it
 * (`<pods dir>/<pod uid>/volumes/kubernetes.io~empty-dir/public/migrationproxy/<vmi uid>-49152-source.sock`)
 * is longer than the 107 bytes of sun_path; the launcher sees a short one. A long path goes through an
 * open descriptor of its directory: `/proc/self/fd/<fd>/<name>`, closed by `release()` once bound or connected.
 */
async function shortUnixPath(file: string): Promise<{ path: string; release(): void }> {
  if (Buffer.byteLength(file) <= MAX_SOCKET_PATH_BYTES) return { path: file, release: () => undefined };
  const dir = await open(path.dirname(file), 'r');
  const p = `/proc/self/fd/${dir.fd}/${path.basename(file)}`;
  if (Buffer.byteLength(p) > MAX_SOCKET_PATH_BYTES)
    throw new Error(`${file}: the socket name alone is too long for a unix socket`);
  let open_ = true;
  const release = () => {
    if (open_) void dir.close().catch(() => undefined);
    open_ = false;
  };
  return { path: p, release };
}

function listen(server: net.Server, opts: net.ListenOptions): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

function closeProxy(p: Proxy): void {
  p.server.close();
  for (const c of p.conns) c.destroy();
  p.conns.clear();
}
