// virt-handler's subresource endpoint: where the aggregated API (subresources.kubevirt.io, served by
// virt-controller) forwards the VMI verbs that need the node. HTTPS with mutual TLS on a port of its own
// (upstream: 8186), paths as upstream's virt-handler serves them:
//   PUT /v1/namespaces/NS/virtualmachineinstances/NAME/{pause,unpause,softreboot,freeze,unfreeze}
//   GET /v1/namespaces/NS/virtualmachineinstances/NAME/{guestosinfo,userlist,filesystemlist}
//   GET /v1/namespaces/NS/virtualmachineinstances/NAME/{console,vnc}   (websocket)
// Each verb is one call on the VMI's launcher (cmd socket); console and vnc bridge a websocket to the serial
// console / VNC unix socket in the launcher Pod. Only clients whose certificate the given CA signed get an
// answer: the TLS handshake refuses anyone else.
import { createServer, type Server } from 'node:https';
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { Duplex } from 'node:stream';
import { WebSocketServer, createWebSocketStream, type WebSocket } from 'ws';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import type { CmdClient } from '@kubevirt-ts/cmd-protocol';
import { closeServer } from '@kubevirt-ts/controller-runtime';
import type { Logger } from '@kubevirt-ts/log';
import { connectLauncherSocket } from './launcher-socket.js';

export const HANDLER_SUBRESOURCE_PORT = 8186;

export interface HandlerEndpointOptions {
  /** serving certificate and key (PEM) */
  cert: string | Buffer;
  key: string | Buffer;
  /** CA whose client certificates may call (virt-controller's) */
  clientCA: string | Buffer;
  /**
   * common names a client certificate must carry (e.g. `['virt-controller']`); unset: any client certificate of
   * `clientCA`. Needed when that CA also signs other clients (virt-handler's own client certificate, for migrations).
   */
  clientNames?: string[];
  host?: string;
  /** default 8186; 0: a free port */
  port?: number;
  log?: Logger;
  /** the VMI and its live launcher's client, when this node runs it; `privateDir`: where the node sees the
   * launcher Pod's /var/run/kubevirt-private (console and vnc need it) */
  lookup(
    namespace: string,
    name: string,
  ): { vmi: VirtualMachineInstance; client: CmdClient; privateDir?: string } | undefined;
  /** owner of the launchers' console/VNC sockets (default 107) */
  launcherUid?: number;
  /** websocket pings to the client (default every 10 s), so idle consoles are not dropped by proxies */
  pingIntervalMs?: number;
  /** a client that answered no ping for this long is cut off (default 60 s, upstream's keep-alive timeout) */
  keepAliveTimeoutMs?: number;
}

/** the websocket subprotocol upstream's virtctl asks for (kubevirt.io/client-go/subresources) */
export const PLAIN_STREAM_PROTOCOL = 'plain.kubevirt.io';
/** the launcher's sockets each stream opens (upstream's names; converter: PodLayout.serialSocket/vncSocket) */
export const STREAM_SOCKETS = { console: 'virt-serial0', vnc: 'virt-vnc' } as const;
export type StreamKind = keyof typeof STREAM_SOCKETS;

export interface HandlerEndpoint {
  port: number;
  server: Server;
  /**
   * a renewed serving certificate or client CA bundle (certificate rotation): new connections use them, open ones
   * (a console, a pooled connection) keep what they were made with
   */
  setCredentials(c: { cert: string | Buffer; key: string | Buffer; clientCA: string | Buffer }): void;
  close(): Promise<void>;
}

/** upstream's default unfreeze timeout (freeze without a body): 5 minutes */
const DEFAULT_UNFREEZE_SECONDS = 300;
const RPC_TIMEOUT = { timeoutMs: 60_000 };

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = '';
    req.setEncoding('utf8');
    req.on('data', (d: string) => {
      text += d;
      if (text.length > 65536) req.destroy(new Error('request body too large'));
    });
    req.on('end', () => resolve(text));
    req.on('error', reject);
  });
}

/** `{"unfreezeTimeout":"30s"}` (a Go duration: s, m, h) to seconds */
function unfreezeSeconds(body: string): number {
  if (!body.trim()) return DEFAULT_UNFREEZE_SECONDS;
  const v = (JSON.parse(body) as { unfreezeTimeout?: unknown }).unfreezeTimeout;
  if (v === undefined) return DEFAULT_UNFREEZE_SECONDS;
  const m = typeof v === 'string' ? /^(\d+)(s|m|h)$/.exec(v) : null;
  if (!m)
    throw new Error(
      `unfreezeTimeout: expected a duration like "30s", "5m" or "1h", got ${JSON.stringify(v)}`,
    );
  return Number(m[1]) * { s: 1, m: 60, h: 3600 }[m[2] as 's' | 'm' | 'h'];
}

/** the launcher answers bare arrays (upstream's); upstream's API wraps them in `{items}` */
const items = (v: unknown): unknown[] =>
  Array.isArray(v) ? v : ((v as { items?: unknown[] } | undefined)?.items ?? []);

export async function startHandlerEndpoint(o: HandlerEndpointOptions): Promise<HandlerEndpoint> {
  const tlsOptions = (c: { cert: string | Buffer; key: string | Buffer; clientCA: string | Buffer }) => ({
    cert: c.cert,
    key: c.key,
    ca: c.clientCA,
    requestCert: true,
    rejectUnauthorized: true,
    minVersion: 'TLSv1.2' as const,
  });
  const server = createServer(tlsOptions(o));
  if (o.clientNames) {
    const names = o.clientNames;
    // before any request is read: a client of the right CA but another name gets nothing
    server.prependListener('secureConnection', (sock: TLSSocket) => {
      const cn = sock.getPeerCertificate()?.subject?.CN;
      if (typeof cn === 'string' && names.includes(cn)) return;
      o.log?.warn('subresource endpoint: a client certificate with another name was refused', {
        reason: 'ClientNameRefused',
        name: String(cn),
        peer: `${sock.remoteAddress ?? ''}:${sock.remotePort ?? ''}`,
      });
      sock.destroy();
    });
  }
  const send = (res: ServerResponse, code: number, text: string, json = false) => {
    res.writeHead(code, { 'Content-Type': json ? 'application/json' : 'text/plain' }).end(text);
  };
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = new URL(req.url ?? '/', 'https://x').pathname;
    const m = /^\/v1\/namespaces\/([^/]+)\/virtualmachineinstances\/([^/]+)\/([a-z]+)$/.exec(path);
    if (!m) return send(res, 404, `no such endpoint: ${path}`);
    const [namespace, name, verb] = [decodeURIComponent(m[1]!), decodeURIComponent(m[2]!), m[3]!];
    const puts = ['pause', 'unpause', 'softreboot', 'freeze', 'unfreeze'];
    const gets = ['guestosinfo', 'userlist', 'filesystemlist'];
    if (verb in STREAM_SOCKETS)
      return send(res, 400, `${verb} is a websocket stream: connect with Upgrade: websocket`);
    if (!puts.includes(verb) && !gets.includes(verb)) return send(res, 404, `no such subresource: ${verb}`);
    const method = puts.includes(verb) ? 'PUT' : 'GET';
    if (req.method !== method) return send(res, 405, `${verb} takes ${method}`);
    const found = o.lookup(namespace, name);
    if (!found)
      return send(
        res,
        404,
        `virtualmachineinstance ${namespace}/${name} has no running launcher on this node`,
      );
    const { vmi, client } = found;
    o.log?.info('subresource', { namespace, name, kind: 'VirtualMachineInstance', subresource: verb });
    switch (verb) {
      case 'pause':
        await client.pauseVMI(vmi, RPC_TIMEOUT);
        break;
      case 'unpause':
        await client.unpauseVMI(vmi, RPC_TIMEOUT);
        break;
      case 'softreboot':
        await client.softRebootVMI(vmi, RPC_TIMEOUT);
        break;
      case 'freeze': {
        let seconds: number;
        try {
          seconds = unfreezeSeconds(await readBody(req));
        } catch (e) {
          return send(res, 400, (e as Error).message);
        }
        await client.freezeVMI(vmi, seconds, RPC_TIMEOUT);
        break;
      }
      case 'unfreeze':
        await client.unfreezeVMI(vmi, RPC_TIMEOUT);
        break;
      case 'guestosinfo':
        return send(res, 200, JSON.stringify((await client.getGuestInfo(RPC_TIMEOUT)) ?? {}), true);
      case 'userlist':
        return send(res, 200, JSON.stringify({ items: items(await client.getUsers(RPC_TIMEOUT)) }), true);
      case 'filesystemlist':
        return send(
          res,
          200,
          JSON.stringify({ items: items(await client.getFilesystems(RPC_TIMEOUT)) }),
          true,
        );
    }
    send(res, 200, '');
  };
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    handle(req, res).catch((e: unknown) => {
      const msg = e instanceof Error ? e.message : String(e);
      o.log?.warn(`subresource failed: ${msg}`, { reason: 'SubresourceFailed' });
      if (!res.headersSent) send(res, 500, msg);
      else res.end();
    });
  });
  const streams = new StreamBridge(o);
  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    streams.upgrade(req, socket, head).catch((e: unknown) => {
      const msg = e instanceof Error ? e.message : String(e);
      o.log?.warn(`stream failed: ${msg}`, { reason: 'StreamFailed' });
      rejectUpgrade(socket, 500, msg);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port ?? HANDLER_SUBRESOURCE_PORT, o.host ?? '0.0.0.0', () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    server,
    setCredentials: (c) => server.setSecureContext(tlsOptions(c)),
    close: () => {
      streams.close();
      return closeServer(server);
    },
  };
}

/** an HTTP answer on a socket that asked for an upgrade (nothing was upgraded) */
export function rejectUpgrade(socket: Duplex, code: number, text: string, contentType = 'text/plain'): void {
  if (socket.destroyed) return;
  const body = Buffer.from(text);
  socket.end(
    `HTTP/1.1 ${code} ${STATUS_CODES[code] ?? ''}\r\nContent-Type: ${contentType}\r\n` +
      `Content-Length: ${body.length}\r\nConnection: close\r\n\r\n${body.toString()}`,
  );
}

/**
 * console and vnc: a websocket bridged to the launcher's unix socket. One connection per VMI and kind: a
 * new one closes the one before (upstream's), except a VNC request with `preserveSession=true`, which is
 * refused while one is open. Data flows with backpressure both ways (a stream that cannot take more pauses
 * the other side); the client gets a ping every `pingIntervalMs` and is cut off after `keepAliveTimeoutMs`
 * without a pong.
 */
class StreamBridge {
  private readonly wss = new WebSocketServer({
    noServer: true,
    perMessageDeflate: false,
    handleProtocols: (offered) => (offered.has(PLAIN_STREAM_PROTOCOL) ? PLAIN_STREAM_PROTOCOL : false),
  });
  /** `${kind}/${vmi uid}` -> the open connection */
  private readonly open = new Map<string, WebSocket>();

  constructor(private readonly o: HandlerEndpointOptions) {}

  async upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const url = new URL(req.url ?? '/', 'https://x');
    const m = /^\/v1\/namespaces\/([^/]+)\/virtualmachineinstances\/([^/]+)\/([a-z]+)$/.exec(url.pathname);
    if (!m || !(m[3]! in STREAM_SOCKETS))
      return rejectUpgrade(socket, 404, `no websocket endpoint at ${url.pathname}`);
    if (req.method !== 'GET') return rejectUpgrade(socket, 405, `${m[3]} takes GET`);
    const [namespace, name, kind] = [
      decodeURIComponent(m[1]!),
      decodeURIComponent(m[2]!),
      m[3] as StreamKind,
    ];
    const found = this.o.lookup(namespace, name);
    if (!found)
      return rejectUpgrade(
        socket,
        404,
        `virtualmachineinstance ${namespace}/${name} has no running launcher on this node`,
      );
    if (!found.privateDir)
      return rejectUpgrade(
        socket,
        500,
        `the launcher Pod of ${namespace}/${name} has no private dir on this node`,
      );
    const uid = found.vmi.metadata?.uid ?? '';
    const key = `${kind}/${uid}`;
    if (kind === 'vnc' && url.searchParams.get('preserveSession') === 'true' && this.open.has(key))
      return rejectUpgrade(socket, 503, 'Active VNC connection. Request denied.');
    const log = { namespace, name, uid, kind: 'VirtualMachineInstance', subresource: kind };
    // the launcher's socket first: a VMI without one gets an HTTP error, not an upgraded connection that closes
    let unix: Socket;
    try {
      unix = await connectLauncherSocket(
        found.privateDir,
        uid,
        STREAM_SOCKETS[kind],
        this.o.launcherUid ?? 107,
      );
    } catch (e) {
      return rejectUpgrade(socket, 400, (e as Error).message);
    }
    if (socket.destroyed) return void unix.destroy();
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      const before = this.open.get(key);
      this.open.set(key, ws);
      if (before) {
        this.o.log?.info(`a new ${kind} connection replaces the open one`, log);
        before.close(1000, `another ${kind} connection to this VMI was opened`);
      }
      this.o.log?.info(`${kind} connected`, log);
      this.bridge(ws, unix, () => {
        if (this.open.get(key) === ws) this.open.delete(key);
        this.o.log?.info(`${kind} disconnected`, log);
      });
    });
  }

  private bridge(ws: WebSocket, unix: Socket, done: () => void): void {
    const stream = createWebSocketStream(ws);
    let alive = Date.now();
    ws.on('pong', () => (alive = Date.now()));
    const timer = setInterval(() => {
      if (Date.now() - alive > (this.o.keepAliveTimeoutMs ?? 60_000)) return ws.terminate();
      ws.ping();
    }, this.o.pingIntervalMs ?? 10_000);
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      clearInterval(timer);
      unix.destroy();
      // a close frame when the socket still takes one; terminate() if the peer never answers it
      if (ws.readyState === ws.OPEN) ws.close(1000, 'the VMI closed the stream');
      setTimeout(() => ws.terminate(), 5000).unref();
      done();
    };
    unix.pipe(stream);
    stream.pipe(unix);
    unix.on('close', finish);
    unix.on('error', finish);
    ws.on('close', finish);
    stream.on('error', finish);
  }

  close(): void {
    for (const ws of this.open.values()) ws.terminate();
    this.open.clear();
  }
}
