// The mutual-TLS certificates between virt-controller and virt-handler (ensureHandlerCertificates, what
// virt-controller runs with --manage-handler-certs) on a real kube-apiserver (tools/testenv): the Secrets are made
// once and reused by every replica, and real TLS handshakes show who may talk to whom: virt-controller's client
// certificate reaches a server with virt-handler's certificate (verified by the name virt-handler), and
// virt-handler's own certificate is refused as a client (it is a TLS server certificate only).
import { X509Certificate } from 'node:crypto';
import { createServer, connect, type TLSSocket } from 'node:tls';
import type { AddressInfo } from 'node:net';
import { KubeClient, type Resource } from '@kubevirt-ts/controller-runtime';
import { startTestEnv, type TestEnv } from '@kubevirt-ts/testenv';
import {
  HANDLER_CA_SECRET,
  HANDLER_CERTS_SECRET,
  HANDLER_CLIENT_CERTS_SECRET,
  ensureHandlerCertificates,
} from './handler-certs.js';

const NS = 'kubevirt-ts';
const SECRETS: Resource = { group: '', version: 'v1', plural: 'secrets', namespaced: true };
let env: TestEnv;
let client: KubeClient;

beforeAll(async () => {
  env = await startTestEnv();
  client = new KubeClient(env.kubeConfig());
  await env.createNamespace(NS);
}, 300000);
afterAll(async () => {
  client?.close();
  await env?.stop();
});

const unb64 = (s: string) => Buffer.from(s, 'base64').toString('utf8');
/** the data (base64) of the Secret `name` in NS */
const secretData = async (name: string) =>
  (await client.get<{ metadata?: object; data: Record<string, string> }>(SECRETS, NS, name)).data;
const decoded = (data: Record<string, string>) =>
  Object.fromEntries(Object.entries(data).map(([k, v]) => [k, unb64(v)]));

/** a TLS server with virt-handler's Secret, as the endpoint is configured; resolves whether `client` got through */
async function handshake(
  served: Record<string, string>,
  client: { cert: string; key: string; ca: string },
): Promise<{ ok: boolean; error?: string }> {
  const server = createServer({
    cert: served['tls.crt'],
    key: served['tls.key'],
    ca: served['ca.crt'],
    requestCert: true,
    rejectUnauthorized: true,
  });
  server.on('secureConnection', (s: TLSSocket) => s.end('hello'));
  server.on('tlsClientError', () => undefined);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  try {
    return await new Promise((resolve) => {
      const s = connect({
        host: '127.0.0.1',
        port: (server.address() as AddressInfo).port,
        servername: 'virt-handler',
        ...client,
      });
      let data = '';
      s.on('data', (d: Buffer) => (data += d.toString()));
      s.on('end', () => resolve({ ok: data === 'hello' }));
      s.on('error', (e) => resolve({ ok: false, error: e.message }));
    });
  } finally {
    server.close();
  }
}

test('the Secrets are made once; every replica reuses them; only virt-controller is a client virt-handler accepts', async () => {
  const first = await ensureHandlerCertificates(client, NS);
  const secret = await secretData(HANDLER_CERTS_SECRET);
  const served = decoded(secret);
  expect(Object.keys(served).sort()).toEqual(['ca.crt', 'tls.crt', 'tls.key']);
  const caSecret = await secretData(HANDLER_CA_SECRET);
  expect(unb64(caSecret['ca.crt']!)).toBe(first.ca);
  expect(served['ca.crt']).toBe(first.ca);
  const handlerCert = new X509Certificate(served['tls.crt']!);
  expect(handlerCert.checkHost('virt-handler')).toBe('virt-handler');
  expect(handlerCert.verify(new X509Certificate(first.ca).publicKey)).toBe(true);

  // another replica (or a restart): same Secrets, a new client certificate of the same CA
  const second = await ensureHandlerCertificates(client, NS);
  expect(second.ca).toBe(first.ca);
  expect(second.cert).not.toBe(first.cert);
  const again = await secretData(HANDLER_CERTS_SECRET);
  expect(again).toEqual(secret);

  expect(await handshake(served, first)).toEqual({ ok: true });
  expect(await handshake(served, second)).toEqual({ ok: true });
  // virt-handler's serving certificate, signed by the same CA, is not a client certificate
  const asClient = await handshake(served, {
    cert: served['tls.crt']!,
    key: served['tls.key']!,
    ca: first.ca,
  });
  expect(asClient.ok).toBe(false);

  // virt-handler's client certificate (the migration proxy's source side): same CA, TLS client only, its own name
  const hc = await secretData(HANDLER_CLIENT_CERTS_SECRET);
  const handlerClient = decoded(hc);
  expect(Object.keys(handlerClient).sort()).toEqual(['ca.crt', 'tls.crt', 'tls.key']);
  expect(handlerClient['ca.crt']).toBe(first.ca);
  const hcCert = new X509Certificate(handlerClient['tls.crt']!);
  expect(hcCert.subject).toBe('CN=virt-handler-client');
  expect(hcCert.verify(new X509Certificate(first.ca).publicKey)).toBe(true);
  expect(
    await handshake(served, {
      cert: handlerClient['tls.crt']!,
      key: handlerClient['tls.key']!,
      ca: first.ca,
    }),
  ).toEqual({
    ok: true,
  });
  expect(await secretData(HANDLER_CLIENT_CERTS_SECRET)).toEqual(hc);
}, 300000);
