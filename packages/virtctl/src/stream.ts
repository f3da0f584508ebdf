// virtctl console and vnc: websockets to subresources.kubevirt.io through the API server, with the
// kubeconfig's credentials, asking for upstream's subprotocol (plain.kubevirt.io): binary frames carry the
// serial console's / VNC server's bytes as they are.
import { createServer, type AddressInfo, type Socket } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import type { KubeConfig } from '@kubernetes/client-node';
import WebSocket, { createWebSocketStream } from 'ws';

export const PLAIN_STREAM_PROTOCOL = 'plain.kubevirt.io';
/** Ctrl+] (and Ctrl+5 on most terminals): leaves the console, as upstream's virtctl */
export const ESCAPE = 0x1d;

/** A refusal of the websocket handshake, with the server's message. */
export class StreamError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Opens the websocket of `kind` (console, vnc) of VMI `name`; rejects with the server's message. */
export async function openStream(
  kc: KubeConfig,
  namespace: string,
  name: string,
  kind: 'console' | 'vnc',
  search = '',
): Promise<WebSocket> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('the kubeconfig has no current cluster');
  const base = cluster.server.replace(/\/+$/, '').replace(/^http/, 'ws');
  const url =
    `${base}/apis/subresources.kubevirt.io/v1/namespaces/${encodeURIComponent(namespace)}` +
    `/virtualmachineinstances/${encodeURIComponent(name)}/${kind}${search}`;
  const opts: WebSocket.ClientOptions = { perMessageDeflate: false, handshakeTimeout: 30_000 };
  await kc.applyToHTTPSOptions(opts);
  return new Promise<WebSocket>((resolve, reject) => {
    const ws = new WebSocket(url, [PLAIN_STREAM_PROTOCOL], opts);
    ws.once('open', () => {
      ws.on('error', () => undefined); // from here on, errors end the session through 'close'
      resolve(ws);
    });
    ws.once('unexpected-response', (_req, res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => {
        let msg = text.trim();
        try {
          msg = (JSON.parse(text) as { message?: string }).message ?? msg;
        } catch {
          /* plain text */
        }
        reject(new StreamError(res.statusCode ?? 0, msg || `the server answered HTTP ${res.statusCode}`));
        ws.terminate();
      });
    });
    ws.once('error', (e) => reject(e));
  });
}

/** whether another attempt may succeed: the VMI is not there or not running yet, or its launcher not ready */
export function worthRetrying(e: unknown): boolean {
  if (!(e instanceof StreamError)) return false;
  return e.status === 404 || e.status === 500 || (e.status === 400 && e.message === 'VMI is not running');
}

export interface Terminal {
  stdin: Readable & { isTTY?: boolean; setRawMode?(raw: boolean): unknown };
  stdout: Writable;
  stderr: (s: string) => void;
}

/**
 * The console session: stdin (raw when a terminal) to the guest's serial port, its output to stdout,
 * until Ctrl+] (or the end of stdin) — resolves 'escaped' — or until the server closes — resolves with
 * the close reason.
 */
export function attachConsole(ws: WebSocket, t: Terminal): Promise<{ escaped: boolean; reason: string }> {
  const stream = createWebSocketStream(ws);
  const raw = Boolean(t.stdin.isTTY && t.stdin.setRawMode);
  if (raw) t.stdin.setRawMode!(true);
  let closeReason = '';
  ws.on('close', (_code, reason) => (closeReason = reason.toString()));
  return new Promise((resolve) => {
    let done = false;
    const finish = (escaped: boolean) => {
      if (done) return;
      done = true;
      t.stdin.removeListener('data', onData);
      t.stdin.removeListener('end', onEnd);
      t.stdin.pause();
      if (raw) t.stdin.setRawMode!(false);
      stream.unpipe(t.stdout);
      if (ws.readyState === ws.OPEN) ws.close(1000, escaped ? 'the user left the console' : '');
      resolve({ escaped, reason: closeReason });
    };
    const onData = (chunk: Buffer) => {
      const at = chunk.indexOf(ESCAPE);
      const part = at < 0 ? chunk : chunk.subarray(0, at);
      if (part.length && !stream.write(part)) {
        t.stdin.pause();
        stream.once('drain', () => t.stdin.resume());
      }
      if (at >= 0) finish(true);
    };
    const onEnd = () => stream.end(() => finish(true));
    t.stdin.on('data', onData);
    t.stdin.on('end', onEnd);
    stream.pipe(t.stdout, { end: false });
    stream.on('error', () => finish(false));
    ws.on('close', () => finish(false));
    t.stdin.resume();
  });
}

/**
 * The VNC proxy: listens on `address:port` (0: any free port), calls `listening(port)`, takes one viewer
 * connection and relays it to the open websocket until either side closes (as upstream's virtctl vnc).
 */
export async function proxyVnc(
  ws: WebSocket,
  address: string,
  port: number,
  listening: (port: number) => void,
): Promise<void> {
  const stream = createWebSocketStream(ws);
  stream.pause();
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, address, () => resolve());
  });
  listening((server.address() as AddressInfo).port);
  const closed = new Promise<void>((resolve) => {
    ws.on('close', () => resolve());
  });
  const conn = await Promise.race([
    new Promise<Socket>((resolve) => server.once('connection', resolve)),
    closed.then(() => undefined),
  ]);
  server.close();
  if (!conn) throw new Error('the server closed the VNC connection before a viewer connected');
  stream.pipe(conn);
  conn.pipe(stream);
  await new Promise<void>((resolve) => {
    const end = () => {
      conn.destroy();
      ws.terminate();
      resolve();
    };
    conn.on('close', end);
    conn.on('error', end);
    stream.on('error', end);
    ws.on('close', end);
  });
}
