// virt-handler's subresource endpoint: where the aggregated API (subresources.kubevirt.io, served by
// virt-controller) forwards the VMI verbs that need the node. HTTPS with mutual TLS on a port of its own
// (upstream: 8186), paths as upstream's virt-handler serves them:
//   PUT /v1/namespaces/NS/virtualmachineinstances/NAME/{pause,unpause,softreboot,freeze,unfreeze}
//   GET /v1/namespaces/NS/virtualmachineinstances/NAME/{guestosinfo,userlist,filesystemlist}
// Each is one call on the VMI's launcher (cmd socket). Only clients whose certificate the given CA signed
// get an answer: the TLS handshake refuses anyone else.
import { createServer, type Server } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import type { CmdClient } from '@kubevirt-ts/cmd-protocol';
import type { Logger } from '@kubevirt-ts/log';

export const HANDLER_SUBRESOURCE_PORT = 8186;

export interface HandlerEndpointOptions {
  /** serving certificate and key (PEM) */
  cert: string | Buffer;
  key: string | Buffer;
  /** CA whose client certificates may call (virt-controller's) */
  clientCA: string | Buffer;
  host?: string;
  /** default 8186; 0: a free port */
  port?: number;
  log?: Logger;
  /** the VMI and its live launcher's client, when this node runs it */
  lookup(namespace: string, name: string): { vmi: VirtualMachineInstance; client: CmdClient } | undefined;
}

export interface HandlerEndpoint {
  port: number;
  server: Server;
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
  const server = createServer({
    cert: o.cert,
    key: o.key,
    ca: o.clientCA,
    requestCert: true,
    rejectUnauthorized: true,
    minVersion: 'TLSv1.2',
  });
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
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port ?? HANDLER_SUBRESOURCE_PORT, o.host ?? '0.0.0.0', () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    server,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
