// Forwards VMI verbs to the virt-handler of the VMI's node over mutual TLS (upstream virt-api's
// VirtHandlerConn): https://<virt-handler Pod IP>:8186/v1/namespaces/NS/virtualmachineinstances/NAME/VERB.
// The handler's certificate must be signed by `ca` and name HANDLER_TLS_NAME (a Pod IP is no stable name);
// we present `cert`, which the handler checks against its client CA.
import { checkServerIdentity, type PeerCertificate } from 'node:tls';
import { request } from 'node:https';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import type { KubeClient } from '@kubevirt-ts/controller-runtime';
import { internalError } from './status.js';
import type { NodeConnector, StreamKind, StreamRequest, UpgradedStream, VmiVerb } from './verbs.js';

/** the DNS name virt-handler's serving certificate carries */
export const HANDLER_TLS_NAME = 'virt-handler';

export interface HandlerConnectorOptions {
  /** finds the virt-handler Pod of a node (pods list in handlerNamespace) */
  client: KubeClient;
  /** our client certificate and key, and the CA that signed virt-handler's serving certificate */
  cert: string | Buffer;
  key: string | Buffer;
  ca: string | Buffer;
  port?: number;
  handlerNamespace?: string;
  /** where the handler of a node listens; default: the IP of the Running virt-handler Pod on that node */
  address?: (nodeName: string) => Promise<string>;
  timeoutMs?: number;
}

/** a NodeConnector whose client certificate and trusted CAs can be replaced (certificate rotation) */
export interface HandlerConnector extends NodeConnector {
  /** new calls and streams use these; open ones keep what they were made with */
  setTls(t: { cert: string | Buffer; key: string | Buffer; ca: string | Buffer }): void;
}

export function handlerConnector(o: HandlerConnectorOptions): HandlerConnector {
  const port = o.port ?? 8186;
  const ns = o.handlerNamespace ?? 'kubevirt-ts';
  const address =
    o.address ??
    (async (node: string) => {
      const pods = await o.client.list<{ metadata?: object; status?: { podIP?: string; phase?: string } }>(
        { group: '', version: 'v1', plural: 'pods', namespaced: true },
        ns,
        { labelSelector: 'kubevirt.io=virt-handler', fieldSelector: `spec.nodeName=${node}` },
      );
      const ip = pods.items.find((p) => p.status?.phase === 'Running' && p.status.podIP)?.status?.podIP;
      if (!ip) throw new Error(`no running virt-handler Pod on node ${node} (namespace ${ns})`);
      return ip;
    });

  /** the handler of the VMI's node and the path of `verb` there */
  const target = async (vmi: VirtualMachineInstance, verb: string) => {
    const node = vmi.status?.nodeName;
    if (!node) throw internalError(`virtualmachineinstance ${vmi.metadata?.name} has no node`);
    let host: string;
    try {
      host = await address(node);
    } catch (e) {
      throw internalError((e as Error).message);
    }
    const path = `/v1/namespaces/${encodeURIComponent(vmi.metadata!.namespace!)}/virtualmachineinstances/${encodeURIComponent(vmi.metadata!.name!)}/${verb}`;
    return { node, host, path };
  };
  let tls = {
    cert: o.cert,
    key: o.key,
    ca: o.ca,
    servername: HANDLER_TLS_NAME,
    checkServerIdentity: (_h: string, c: PeerCertificate) => checkServerIdentity(HANDLER_TLS_NAME, c),
  };

  const call = async (vmi: VirtualMachineInstance, verb: VmiVerb, method: string, body?: string) => {
    const { node, host, path } = await target(vmi, verb);
    return new Promise<string>((resolve, reject) => {
      const req = request(
        {
          host,
          port,
          method,
          path,
          ...tls,
          timeout: o.timeoutMs ?? 70_000,
          headers: body
            ? { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) }
            : {},
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => (text += d));
          res.on('end', () => {
            const code = res.statusCode ?? 0;
            if (code >= 200 && code < 300) resolve(text);
            else reject(internalError(`virt-handler on node ${node} answered ${code}: ${text.trim()}`));
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error(`virt-handler on node ${node} did not answer in time`)));
      req.on('error', (e) =>
        reject(internalError(`cannot reach virt-handler on node ${node}: ${e.message}`)),
      );
      if (body) req.write(body);
      req.end();
    });
  };

  /** the websocket handshake on the handler, with the client's key and subprotocols (the handler answers them) */
  const stream = async (
    vmi: VirtualMachineInstance,
    kind: StreamKind,
    sr: StreamRequest,
  ): Promise<UpgradedStream> => {
    const { node, host, path } = await target(vmi, kind);
    return new Promise<UpgradedStream>((resolve, reject) => {
      const req = request({
        host,
        port,
        method: 'GET',
        path: path + sr.search,
        ...tls,
        timeout: o.timeoutMs ?? 70_000,
        headers: { ...sr.headers, Connection: 'Upgrade', Upgrade: 'websocket' },
      });
      req.on('upgrade', (res, socket, head) => {
        socket.setTimeout(0);
        const lines = [`HTTP/1.1 101 ${res.statusMessage || 'Switching Protocols'}`];
        for (let i = 0; i + 1 < res.rawHeaders.length; i += 2)
          lines.push(`${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}`);
        resolve({ socket, head, responseHead: `${lines.join('\r\n')}\r\n\r\n` });
      });
      req.on('response', (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () =>
          reject(internalError(`virt-handler on node ${node} answered ${res.statusCode}: ${text.trim()}`)),
        );
      });
      req.on('timeout', () => req.destroy(new Error(`virt-handler on node ${node} did not answer in time`)));
      req.on('error', (e) =>
        reject(internalError(`cannot reach virt-handler on node ${node}: ${e.message}`)),
      );
      req.end();
    });
  };

  return {
    setTls(t) {
      tls = { ...tls, cert: t.cert, key: t.key, ca: t.ca };
    },
    stream,
    async put(vmi, verb, body) {
      await call(vmi, verb, 'PUT', body);
    },
    async get(vmi, verb) {
      const text = await call(vmi, verb, 'GET');
      try {
        return JSON.parse(text) as unknown;
      } catch {
        throw internalError(`virt-handler answered ${verb} with something that is not JSON`);
      }
    },
  };
}
