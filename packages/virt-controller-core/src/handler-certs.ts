// Certificates for the mutual TLS between virt-controller (serving subresources.kubevirt.io) and every
// virt-handler (port 8186: pause, guest agent calls, console, VNC), made by virt-controller like the webhook
// certificates, so the deployed system needs no operator step:
//   Secret `kubevirt-ts-handler-ca`  {ca.crt, ca.key}           the CA; only virt-controller reads it
//   Secret `virt-handler-certs`      {tls.crt, tls.key, ca.crt} virt-handler's serving certificate (name
//                                    `virt-handler`, TLS server only) and the CA its clients must chain to;
//                                    the virt-handler DaemonSet mounts it
//   Secret `virt-handler-client-certs` {tls.crt, tls.key, ca.crt} virt-handler's client certificate (name
//                                    `virt-handler-client`, TLS client only), upstream's handler client
//                                    certificate: the source handler's side of the migration proxy's mutual TLS
//                                    (the target serves `virt-handler-certs`); the DaemonSet mounts it too
// virt-controller's client certificate (TLS client only) is made in memory at each start from the CA and never
// stored. One CA signs both ends: a handler's serving certificate cannot act as a client (TLS checks the
// extended key usage of a client certificate); a handler's client certificate is signed by the same CA but
// carries its own name, which the subresource endpoint refuses (`--subresource-client-names`), so only
// virt-controller can call a handler's endpoint and only a handler can open a migration connection.
// Every replica runs this at start; the first to create a Secret wins (409: read what the other wrote).
import { X509Certificate } from 'node:crypto';
import { isAlreadyExists, isNotFound, type KubeClient } from '@kubevirt-ts/controller-runtime';
import { createCA, createServingCert, type KeyPair } from './certs.js';

export const HANDLER_CA_SECRET = 'kubevirt-ts-handler-ca';
export const HANDLER_CERTS_SECRET = 'virt-handler-certs';
/** the name virt-handler's serving certificate carries (the subresources package checks it) */
export const HANDLER_SERVER_NAME = 'virt-handler';
/** virt-handler's client certificate Secret (the source side of the migration proxy's mutual TLS) */
export const HANDLER_CLIENT_CERTS_SECRET = 'virt-handler-client-certs';
/** the name virt-handler's client certificate carries (the migration proxy's target checks it) */
export const HANDLER_CLIENT_NAME = 'virt-handler-client';
/** the name of virt-controller's client certificate (the subresource endpoint accepts only it) */
export const CONTROLLER_CLIENT_NAME = 'virt-controller';

const YEAR_MS = 365 * 24 * 3600 * 1000;
const b64 = (s: string) => Buffer.from(s).toString('base64');
const unb64 = (s: string | undefined) => (s ? Buffer.from(s, 'base64').toString('utf8') : undefined);

interface Secret {
  metadata?: { name?: string; namespace?: string };
  data?: Record<string, string>;
}
const SECRETS = { group: '', version: 'v1', plural: 'secrets', namespaced: true } as const;

/** reads `name`, or creates it with `make()`; when another replica created it first, its Secret is used */
async function getOrCreate(
  client: KubeClient,
  namespace: string,
  name: string,
  make: () => Record<string, string>,
): Promise<Record<string, string>> {
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      const s = await client.get<Secret>(SECRETS, namespace, name);
      const data: Record<string, string> = {};
      for (const [k, v] of Object.entries(s.data ?? {})) data[k] = unb64(v)!;
      return data;
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
    const data = make();
    try {
      await client.create(SECRETS, namespace, {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name, namespace, labels: { 'app.kubernetes.io/part-of': 'kubevirt-ts' } },
        type: 'Opaque',
        data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, b64(v)])),
      } as never);
      return data;
    } catch (e) {
      if (!isAlreadyExists(e)) throw e;
    }
  }
  throw new Error(`secret ${namespace}/${name}: could not read or create it`);
}

export interface HandlerClientTls {
  /** virt-controller's client certificate and key */
  cert: string;
  key: string;
  /** the CA virt-handler's serving certificate chains to */
  ca: string;
}

/**
 * Makes sure the three Secrets exist (creating the CA, virt-handler's serving and client certificates the first time) and
 * returns a fresh client certificate for virt-controller.
 */
export async function ensureHandlerCertificates(
  client: KubeClient,
  namespace: string,
  o: { validityMs?: number; now?: Date } = {},
): Promise<HandlerClientTls> {
  const validityMs = o.validityMs ?? 10 * YEAR_MS;
  const caData = await getOrCreate(client, namespace, HANDLER_CA_SECRET, () => {
    const ca = createCA('kubevirt-ts-handler-ca', validityMs, o.now);
    return { 'ca.crt': ca.cert, 'ca.key': ca.key };
  });
  const ca: KeyPair = { cert: caData['ca.crt'] ?? '', key: caData['ca.key'] ?? '' };
  if (!ca.cert || !ca.key)
    throw new Error(`secret ${namespace}/${HANDLER_CA_SECRET}: data ca.crt and ca.key are required`);
  const served = await getOrCreate(client, namespace, HANDLER_CERTS_SECRET, () => {
    const s = createServingCert(ca, {
      cn: HANDLER_SERVER_NAME,
      dnsNames: [HANDLER_SERVER_NAME],
      ips: [],
      validityMs,
      now: o.now,
    });
    return { 'tls.crt': s.cert, 'tls.key': s.key, 'ca.crt': ca.cert };
  });
  // a Secret from another CA (an operator's) is theirs to keep consistent; ours must match the CA we sign with
  if (served['ca.crt'] && served['ca.crt'].trim() !== ca.cert.trim())
    throw new Error(
      `secret ${namespace}/${HANDLER_CERTS_SECRET}: its ca.crt is not the CA in ${HANDLER_CA_SECRET}; ` +
        'delete both Secrets to have them made again, or give virt-controller --handler-client-* files',
    );
  const clientOfHandler = await getOrCreate(client, namespace, HANDLER_CLIENT_CERTS_SECRET, () => {
    const c = createServingCert(ca, {
      cn: HANDLER_CLIENT_NAME,
      dnsNames: [],
      ips: [],
      validityMs,
      now: o.now,
      usage: 'client',
    });
    return { 'tls.crt': c.cert, 'tls.key': c.key, 'ca.crt': ca.cert };
  });
  if (clientOfHandler['ca.crt'] && clientOfHandler['ca.crt'].trim() !== ca.cert.trim())
    throw new Error(
      `secret ${namespace}/${HANDLER_CLIENT_CERTS_SECRET}: its ca.crt is not the CA in ${HANDLER_CA_SECRET}; ` +
        'delete the three Secrets to have them made again',
    );
  const mine = createServingCert(ca, {
    cn: CONTROLLER_CLIENT_NAME,
    dnsNames: [],
    ips: [],
    validityMs: Math.min(validityMs, Date.parse(new X509Certificate(ca.cert).validTo) - Date.now()),
    now: o.now,
    usage: 'client',
  });
  return { cert: mine.cert, key: mine.key, ca: ca.cert };
}
