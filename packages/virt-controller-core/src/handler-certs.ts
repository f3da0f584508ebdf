// Certificates for the mutual TLS between virt-controller (serving subresources.kubevirt.io) and every
// virt-handler (port 8186: pause, guest agent calls, console, VNC), made and rotated by virt-controller like the
// webhook certificates, so the deployed system needs no operator step:
//   Secret `kubevirt-ts-handler-ca`  {ca.crt, ca.key}          the CA that signs (only virt-controller reads it)
//                                    {next.crt, next.key}       during a CA rotation: the new CA, trusted but not
//                                                               signing yet
//                                    {bundle.crt}               every CA to trust: signing, next, older unexpired
//   Secret `virt-handler-certs`      {tls.crt, tls.key, ca.crt} virt-handler's serving certificate (name
//                                    `virt-handler`, TLS server only) and the bundle its clients must chain to;
//                                    the virt-handler DaemonSet mounts it (virt-handler re-reads the files)
//   Secret `virt-handler-client-certs` {tls.crt, tls.key, ca.crt} virt-handler's client certificate (name
//                                    `virt-handler-client`, TLS client only), upstream's handler client
//                                    certificate: the source handler's side of the migration proxy's mutual TLS
//                                    (the target serves `virt-handler-certs`); the DaemonSet mounts it too
// virt-controller's client certificate (TLS client only, name `virt-controller`) lives in memory, signed by the CA,
// renewed like the others. One CA signs every end: a handler's serving certificate cannot act as a client (TLS
// checks the extended key usage of a client certificate); a handler's client certificate is signed by the same CA
// but carries its own name, which the subresource endpoint refuses (`--subresource-client-names`), so only
// virt-controller can call a handler's endpoint and only a handler can open a migration connection.
//
// Rotation (as upstream's certificate manager, at 80% of a lifetime): a certificate is renewed once less than 20% of
// its configured validity is left. A CA is rotated in two steps, so nobody is ever handed a certificate its peer
// does not trust yet: (1) the new CA is published in both bundles (virt-handler's ca.crt, virt-controller's trust)
// while the old one still signs; (2) once it has been published for `caPropagationMs` (the time a kubelet takes to
// update a mounted Secret and virt-handler to re-read it), it becomes the signing CA and every leaf is re-issued.
// Old CAs stay in the bundles until they expire. Every replica runs this; writes carry the resourceVersion, so
// replicas that race converge on one Secret. Secrets without the managed-by annotation are the operator's: they are
// used as they are and never written.
import { X509Certificate } from 'node:crypto';
import {
  isAlreadyExists,
  isConflict,
  type KubeClient,
  type KubeObject,
} from '@kubevirt-ts/controller-runtime';
import type { Logger } from '@kubevirt-ts/log';
import { createCA, createServingCert, splitPem, type KeyPair } from './certs.js';
import { errorMessage } from './common.js';
import { MANAGED_BY, MANAGED_BY_ANNOTATION, SECRETS } from './webhook-certs.js';

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
/** on the CA Secret while a rotation is under way: when the next CA was published */
export const NEXT_CA_PUBLISHED_ANNOTATION = 'kubevirt-ts.io/next-ca-published';

const DAY = 24 * 3600 * 1000;
/** upstream KubeVirt's defaults: a CA for 7 days, leaf certificates for 1 day */
export const DEFAULT_HANDLER_CA_VALIDITY_MS = 7 * DAY;
export const DEFAULT_HANDLER_CERT_VALIDITY_MS = DAY;
export const DEFAULT_HANDLER_RENEW_AFTER = 0.8;
/** a kubelet updates mounted Secrets within its sync period (1 min) plus its cache TTL; virt-handler polls every 10 s */
export const DEFAULT_CA_PROPAGATION_MS = 5 * 60_000;

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
const unb64 = (s: string | undefined) => (s ? Buffer.from(s, 'base64').toString('utf8') : '');

interface Secret extends KubeObject {
  type?: string;
  data?: Record<string, string>;
}

export interface HandlerClientTls {
  /** virt-controller's client certificate and key */
  cert: string;
  key: string;
  /** the CAs virt-handler's serving certificate may chain to (PEM bundle) */
  ca: string;
}

export interface HandlerCertOptions {
  client: KubeClient;
  namespace: string;
  caValidityMs?: number;
  certValidityMs?: number;
  /** fraction of a validity after which a certificate is renewed (0.8) */
  renewAfter?: number;
  /** how long a new CA is trusted before it signs (default 5 min; at most a tenth of the CA validity) */
  caPropagationMs?: number;
  /** how often the Secrets are looked at again (default 60 s; at most a tenth of the leaf validity) */
  checkIntervalMs?: number;
  /** called with virt-controller's client TLS whenever it is new (first sync and after each renewal) */
  onClientTls?: (tls: HandlerClientTls) => void;
  log?: Logger;
  now?: () => Date;
}

const notAfter = (pem: string) => Date.parse(new X509Certificate(pem).validTo);

export class HandlerCertManager {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private clientTls: HandlerClientTls | undefined;
  private clientSigner = '';
  private readonly now: () => Date;
  private readonly caValidity: number;
  private readonly certValidity: number;
  private readonly renewAfter: number;

  constructor(private readonly o: HandlerCertOptions) {
    this.now = o.now ?? (() => new Date());
    this.caValidity = o.caValidityMs ?? DEFAULT_HANDLER_CA_VALIDITY_MS;
    this.certValidity = Math.min(o.certValidityMs ?? DEFAULT_HANDLER_CERT_VALIDITY_MS, this.caValidity);
    this.renewAfter = o.renewAfter ?? DEFAULT_HANDLER_RENEW_AFTER;
  }

  /** the client TLS of the last sync */
  get current(): HandlerClientTls | undefined {
    return this.clientTls;
  }

  /** one sync, then one every checkIntervalMs */
  async start(): Promise<HandlerClientTls> {
    const tls = await this.sync();
    const every = Math.min(this.o.checkIntervalMs ?? 60_000, this.certValidity / 10);
    this.timer = setInterval(() => {
      this.running ??= this.sync()
        .then(() => undefined)
        .catch((e: unknown) => {
          this.o.log?.error('handler certificate sync failed', { reason: errorMessage(e) });
        })
        .finally(() => (this.running = undefined));
    }, every);
    return tls;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** the Secrets exist and are current (CA rotation step by step), and virt-controller's client TLS is current */
  async sync(): Promise<HandlerClientTls> {
    for (let attempt = 0; ; attempt++) {
      try {
        const { signing, bundle } = await this.ensureCa();
        await this.ensureLeaf(signing, bundle, HANDLER_CERTS_SECRET, HANDLER_SERVER_NAME, 'server');
        await this.ensureLeaf(signing, bundle, HANDLER_CLIENT_CERTS_SECRET, HANDLER_CLIENT_NAME, 'client');
        return this.ensureClient(signing, bundle);
      } catch (e) {
        // another replica wrote first: start again from what it wrote
        if (attempt < 5 && (isConflict(e) || isAlreadyExists(e))) continue;
        throw e;
      }
    }
  }

  /** renewal is due once less than (1 - renewAfter) of `validityMs` is left */
  private due(pem: string, validityMs: number): boolean {
    try {
      return notAfter(pem) - this.now().getTime() <= validityMs * (1 - this.renewAfter);
    } catch {
      return true; // unreadable: make a new one
    }
  }

  private async write(cur: Secret | undefined, name: string, data: Record<string, string>, annotations = {}) {
    const encoded = Object.fromEntries(Object.entries(data).map(([k, v]) => [k, b64(v)]));
    const { client, namespace } = this.o;
    if (!cur)
      return client.create<Secret>(SECRETS, namespace, {
        apiVersion: 'v1',
        kind: 'Secret',
        type: 'Opaque',
        metadata: {
          name,
          namespace,
          annotations: { [MANAGED_BY_ANNOTATION]: MANAGED_BY, ...annotations },
          labels: {
            'app.kubernetes.io/part-of': 'kubevirt-ts',
            'app.kubernetes.io/component': 'virt-controller',
          },
        },
        data: encoded,
      });
    const kept = { ...cur.metadata?.annotations };
    delete kept[NEXT_CA_PUBLISHED_ANNOTATION];
    return client.update<Secret>(SECRETS, {
      ...cur,
      metadata: { ...cur.metadata, annotations: { ...kept, ...annotations } },
      data: encoded,
    });
  }

  private async ensureCa(): Promise<{ signing: KeyPair; bundle: string }> {
    const { client, namespace } = this.o;
    const cur = await client.getOrUndefined<Secret>(SECRETS, namespace, HANDLER_CA_SECRET);
    const d = (k: string) => unb64(cur?.data?.[k]);
    let signing: KeyPair = { cert: d('ca.crt'), key: d('ca.key') };
    if (cur && cur.metadata?.annotations?.[MANAGED_BY_ANNOTATION] !== MANAGED_BY) {
      // the operator's (or made before rotation existed): used as it is
      if (!signing.cert || !signing.key)
        throw new Error(`secret ${namespace}/${HANDLER_CA_SECRET}: data ca.crt and ca.key are required`);
      return { signing, bundle: d('bundle.crt') || signing.cert };
    }
    const now = this.now().getTime();
    let next: KeyPair | undefined = d('next.crt') ? { cert: d('next.crt'), key: d('next.key') } : undefined;
    const published = Date.parse(cur?.metadata?.annotations?.[NEXT_CA_PUBLISHED_ANNOTATION] ?? '');
    let older = splitPem(d('bundle.crt'));
    let reason = '';
    let annotations: Record<string, string> = {};
    const propagation = Math.min(this.o.caPropagationMs ?? DEFAULT_CA_PROPAGATION_MS, this.caValidity / 10);
    if (!signing.cert || !signing.key) {
      reason = cur ? 'CA missing' : 'no secret';
      signing = createCA('kubevirt-ts-handler-ca', this.caValidity, this.now());
      next = undefined;
      older = [];
    } else if (next && (published <= now - propagation || notAfter(signing.cert) <= now)) {
      // step 2: the next CA has been trusted long enough (or the signing one ended): it signs from now on
      reason = 'CA rotation: the new CA signs';
      older = [signing.cert, ...older];
      signing = next;
      next = undefined;
    } else if (!next && this.due(signing.cert, this.caValidity)) {
      // step 1: publish the next CA; the current one keeps signing until it has propagated
      reason = 'CA rotation: the new CA is published';
      next = createCA('kubevirt-ts-handler-ca', this.caValidity, this.now());
      annotations = { [NEXT_CA_PUBLISHED_ANNOTATION]: new Date(now).toISOString() };
    } else if (next) {
      if (!Number.isFinite(published)) reason = 'CA rotation: publication time recorded';
      annotations = {
        [NEXT_CA_PUBLISHED_ANNOTATION]: new Date(Number.isFinite(published) ? published : now).toISOString(),
      };
    }
    const keep = [...new Set(older)].filter(
      (c) => c !== signing.cert && c !== next?.cert && notAfter(c) > now,
    );
    const bundle = [signing.cert, ...(next ? [next.cert] : []), ...keep].join('');
    if (!reason && bundle === d('bundle.crt')) return { signing, bundle };
    if (!reason) reason = 'expired CA dropped from the bundle';
    this.o.log?.info('writing the handler CA secret', {
      secret: `${namespace}/${HANDLER_CA_SECRET}`,
      reason,
    });
    await this.write(
      cur,
      HANDLER_CA_SECRET,
      {
        'ca.crt': signing.cert,
        'ca.key': signing.key,
        ...(next ? { 'next.crt': next.cert, 'next.key': next.key } : {}),
        'bundle.crt': bundle,
      },
      annotations,
    );
    return { signing, bundle };
  }

  /** virt-handler's serving (`server`) or client (`client`) certificate Secret `secret`, named `cn` */
  private async ensureLeaf(
    signing: KeyPair,
    bundle: string,
    secret: string,
    cn: string,
    usage: 'server' | 'client',
  ): Promise<void> {
    const { client, namespace } = this.o;
    const cur = await client.getOrUndefined<Secret>(SECRETS, namespace, secret);
    const d = (k: string) => unb64(cur?.data?.[k]);
    if (cur && cur.metadata?.annotations?.[MANAGED_BY_ANNOTATION] !== MANAGED_BY) {
      // a Secret from another CA (an operator's) is theirs to keep consistent; ours must match the CA we sign with
      if (d('ca.crt') && !splitPem(d('ca.crt')).some((c) => c.trim() === signing.cert.trim()))
        throw new Error(
          `secret ${namespace}/${secret}: its ca.crt is not the CA in ${HANDLER_CA_SECRET}; ` +
            'delete both Secrets to have them made again, or give virt-controller --handler-client-* files',
        );
      return;
    }
    let tls: KeyPair = { cert: d('tls.crt'), key: d('tls.key') };
    let reason = '';
    if (!tls.cert || !tls.key) reason = cur ? 'certificate missing' : 'no secret';
    else if (this.due(tls.cert, this.certValidity)) reason = 'renewal';
    else if (!signedBy(tls.cert, signing.cert)) reason = 'new signing CA';
    if (reason)
      tls = createServingCert(signing, {
        cn,
        dnsNames: usage === 'server' ? [cn] : [],
        ips: [],
        validityMs: this.certValidity,
        now: this.now(),
        usage,
      });
    else if (d('ca.crt') === bundle) return;
    else reason = 'CA bundle changed';
    this.o.log?.info('writing the handler certificate secret', {
      secret: `${namespace}/${secret}`,
      reason,
    });
    await this.write(cur, secret, {
      'tls.crt': tls.cert,
      'tls.key': tls.key,
      'ca.crt': bundle,
    });
  }

  private ensureClient(signing: KeyPair, bundle: string): HandlerClientTls {
    const c = this.clientTls;
    if (c && c.ca === bundle && this.clientSigner === signing.cert && !this.due(c.cert, this.certValidity))
      return c;
    const mine = createServingCert(signing, {
      cn: CONTROLLER_CLIENT_NAME,
      dnsNames: [],
      ips: [],
      validityMs: this.certValidity,
      now: this.now(),
      usage: 'client',
    });
    this.clientTls = { cert: mine.cert, key: mine.key, ca: bundle };
    this.clientSigner = signing.cert;
    const x = new X509Certificate(mine.cert);
    this.o.log?.info('virt-controller handler client certificate', {
      serial: x.serialNumber,
      validTo: new Date(x.validTo).toISOString(),
    });
    this.o.onClientTls?.(this.clientTls);
    return this.clientTls;
  }
}

function signedBy(pem: string, caPem: string): boolean {
  try {
    return new X509Certificate(pem).verify(new X509Certificate(caPem).publicKey);
  } catch {
    return false;
  }
}

/**
 * One sync of a HandlerCertManager: makes sure the three Secrets exist and are current, and returns a fresh client
 * certificate for virt-controller (what a replica without the periodic manager would use).
 */
export async function ensureHandlerCertificates(
  client: KubeClient,
  namespace: string,
  o: { validityMs?: number; now?: Date } = {},
): Promise<HandlerClientTls> {
  const m = new HandlerCertManager({
    client,
    namespace,
    caValidityMs: o.validityMs,
    certValidityMs: o.validityMs,
    now: o.now ? () => o.now! : undefined,
  });
  return m.sync();
}
