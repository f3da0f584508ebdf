// The subresource endpoint's client names (real TLS on loopback, openssl certificates of one CA): with
// `clientNames`, only a client certificate carrying one of them gets an HTTP answer; another client of the same CA
// (a handler's client certificate, which deploy/ issues for migrations) is cut off before any request is read.
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { startHandlerEndpoint, type HandlerEndpoint } from './subresource-endpoint.js';
import { openSslPki } from './test-pki.js';

let dir: string;
let endpoint: HandlerEndpoint | undefined;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kvts-endpoint-'));
});
afterEach(async () => {
  await endpoint?.close();
  endpoint = undefined;
  await rm(dir, { recursive: true, force: true });
});

/** a GET as the holder of `client`: the status code, or the error that ended the connection */
function get(port: number, ca: string, client: { cert: string; key: string }): Promise<string> {
  return new Promise((resolve) => {
    const req = request(
      {
        host: '127.0.0.1',
        port,
        path: '/v1/namespaces/ns/virtualmachineinstances/vm/guestosinfo',
        ca,
        ...client,
        // the chain is checked against the CA; the openssl certificate has no subjectAltName to match
        checkServerIdentity: () => undefined,
      },
      (res) => {
        res.resume();
        resolve(String(res.statusCode));
      },
    );
    req.on('error', (e) => resolve(`error: ${e.message}`));
    req.end();
  });
}

test('clientNames: virt-controller gets answers, a handler client certificate of the same CA is refused', async () => {
  const pki = await openSslPki(dir);
  const server = await pki.issue('virt-handler', 'serverAuth');
  const controller = await pki.issue('virt-controller', 'clientAuth');
  const handlerClient = await pki.issue('virt-handler-client', 'clientAuth');
  const warned: string[] = [];
  const log = {
    info: () => undefined,
    debug: () => undefined,
    error: () => undefined,
    warn: (_m: string, meta: { reason: string }) => void warned.push(meta.reason),
  };
  endpoint = await startHandlerEndpoint({
    ...server,
    clientCA: pki.ca,
    clientNames: ['virt-controller'],
    host: '127.0.0.1',
    port: 0,
    log: log as never,
    lookup: () => undefined,
  });
  // reached the HTTP handler: 404, no launcher for that VMI here
  expect(await get(endpoint.port, pki.ca, controller)).toBe('404');
  expect(await get(endpoint.port, pki.ca, handlerClient)).toMatch(/^error: /);
  expect(warned).toEqual(['ClientNameRefused']);
  await endpoint.close();

  // without clientNames, any client certificate of the CA is answered (the previous behaviour)
  endpoint = await startHandlerEndpoint({
    ...server,
    clientCA: pki.ca,
    host: '127.0.0.1',
    port: 0,
    lookup: () => undefined,
  });
  expect(await get(endpoint.port, pki.ca, handlerClient)).toBe('404');
});
