// The admission webhooks' TLS: a Secret holding a CA and a serving certificate, made by virt-controller
// when absent and renewed before they expire. Every replica runs this (each serves the webhooks); writes are
// conditional on the resourceVersion, so replicas that race converge on one Secret. A Secret without the managed-by
// annotation is the operator's: it is served as it is and never written.
//
// virt-controller does not write the caBundle of the webhook configurations or of the APIService: virt-operator
// publishes the Secret's `ca.crt` there (@kubevirt-ts/operator's CaBundlePublisher), so the component serving these
// requests cannot change which requests reach it. A replica only reads them: it hands over a certificate signed by a
// new CA once every one of them trusts that CA (or once the certificate it serves is about to expire anyway).
import { X509Certificate } from 'node:crypto';
import { isIP } from 'node:net';
import {
  API_SERVICES,
  MUTATING_WEBHOOKS,
  SECRETS,
  VALIDATING_WEBHOOKS,
  caBundleTargets,
  caBundlesOf,
  isAlreadyExists,
  isConflict,
  type CaBundleCarrier,
  type CaBundleNames,
  type KubeClient,
  type KubeObject,
} from '@kubevirt-ts/controller-runtime';
import type { Logger } from '@kubevirt-ts/log';
import { createCA, createServingCert, splitPem, type KeyPair } from './certs.js';
import { errorMessage } from './common.js';
import { startWebhookServer, type WebhookServer } from './webhook.js';

export { SECRETS, MUTATING_WEBHOOKS, VALIDATING_WEBHOOKS, API_SERVICES };
/** on a Secret virt-controller made: it may renew it */
export const MANAGED_BY_ANNOTATION = 'kubevirt-ts.io/managed-by';
export const MANAGED_BY = 'virt-controller';

const DAY = 24 * 3600 * 1000;
export const DEFAULT_CA_VALIDITY_MS = 7 * DAY;
export const DEFAULT_CERT_VALIDITY_MS = DAY;
/** renewed once this fraction of the validity has passed */
export const DEFAULT_RENEW_AFTER = 0.8;

interface Secret extends KubeObject {
  type?: string;
  data?: Record<string, string>;
}
export interface WebhookCertOptions extends CaBundleNames {
  client: KubeClient;
  namespace: string;
  secretName: string;
  /**
   * names of the MutatingWebhookConfiguration and ValidatingWebhookConfiguration whose caBundle (published by
   * virt-operator) must trust a new CA before a certificate it signed is served; read, never written
   */
  mutatingWebhook: string;
  validatingWebhook: string;
  /**
   * name of an APIService served with the same certificate (deploy/'s `v1.subresources.kubevirt.io`), whose
   * `spec.caBundle` must trust it too
   */
  apiService?: string;
  /** subject alternative names of the serving certificate (DNS names and IPs) */
  sans: string[];
  caValidityMs?: number;
  certValidityMs?: number;
  /** fraction of a certificate's validity after which it is renewed (0.8) */
  renewAfter?: number;
  /** how often the Secret is read again (rotation by another replica, renewal due); default 60 s */
  checkIntervalMs?: number;
  /** called with the serving certificate whenever it is new (first time and after each rotation) */
  onCertificate: (cert: string, key: string) => void;
  log?: Logger;
  now?: () => Date;
}

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
const unb64 = (s: string | undefined) => (s ? Buffer.from(s, 'base64').toString('utf8') : '');

/** the DNS names a Service is reached by from the API server */
export function serviceDnsNames(service: string, namespace: string): string[] {
  return [
    service,
    `${service}.${namespace}`,
    `${service}.${namespace}.svc`,
    `${service}.${namespace}.svc.cluster.local`,
  ];
}

export class WebhookCertManager {
  private timer: NodeJS.Timeout | undefined;
  private served = '';
  private servedCert = '';
  private waitingFor = '';
  private running: Promise<void> | undefined;
  private readonly now: () => Date;

  constructor(private readonly o: WebhookCertOptions) {
    this.now = o.now ?? (() => new Date());
  }

  /** one sync (the Secret exists and is current, the certificate handed over), then every checkIntervalMs */
  async start(): Promise<void> {
    await this.sync();
    this.timer = setInterval(() => {
      this.running ??= this.sync()
        .catch((e: unknown) => {
          this.o.log?.error('webhook certificate sync failed', { reason: errorMessage(e) });
        })
        .finally(() => (this.running = undefined));
    }, this.o.checkIntervalMs ?? 60_000);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** read (create, renew) the Secret, hand over a new serving certificate once the API server trusts it */
  async sync(): Promise<void> {
    let secret: Secret | undefined;
    for (let attempt = 0; ; attempt++) {
      try {
        secret = await this.ensureSecret();
        break;
      } catch (e) {
        // another replica wrote first: start again from what it wrote
        if (attempt < 5 && (isConflict(e) || isAlreadyExists(e))) continue;
        throw e;
      }
    }
    const cert = unb64(secret.data?.['tls.crt']);
    const key = unb64(secret.data?.['tls.key']);
    if (!cert || !key)
      throw new Error(
        `secret ${this.o.namespace}/${this.o.secretName}: data.tls.crt and data.tls.key are required`,
      );
    const ca = unb64(secret.data?.['ca.crt']);
    if (cert + key !== this.served) {
      if (this.served && !this.expiring(this.servedCert) && !(await this.trusted(cert, ca))) {
        if (this.waitingFor !== cert)
          this.o.log?.info('waiting for virt-operator to publish the CA of the new webhook certificate', {
            secret: `${this.o.namespace}/${this.o.secretName}`,
          });
        this.waitingFor = cert;
        return;
      }
      this.o.onCertificate(cert, key);
      this.servedCert = cert;
      this.served = cert + key;
      const x = new X509Certificate(cert);
      this.o.log?.info('serving the webhook certificate', {
        secret: `${this.o.namespace}/${this.o.secretName}`,
        serial: x.serialNumber,
        validTo: new Date(x.validTo).toISOString(),
        managed: secret.metadata?.annotations?.[MANAGED_BY_ANNOTATION] === MANAGED_BY,
      });
    }
  }

  /**
   * Renewal is due once less than (1 - renewAfter) of the configured validity is left (measured from
   * notAfter, so the minute of clock-skew allowance before "now" does not count).
   */
  private due(pem: string, validityMs: number): boolean {
    try {
      const left = Date.parse(new X509Certificate(pem).validTo) - this.now().getTime();
      return left <= validityMs * (1 - (this.o.renewAfter ?? DEFAULT_RENEW_AFTER));
    } catch {
      return true; // unreadable: make a new one
    }
  }

  private serving(ca: KeyPair): KeyPair {
    return createServingCert(ca, {
      cn: this.o.sans[0] ?? 'virt-controller-webhook',
      dnsNames: this.o.sans.filter((s) => !isIP(s)),
      ips: this.o.sans.filter((s) => isIP(s)),
      validityMs: this.o.certValidityMs ?? DEFAULT_CERT_VALIDITY_MS,
      now: this.now(),
    });
  }

  private coversSans(pem: string, caPem: string): boolean {
    try {
      const x = new X509Certificate(pem);
      if (!x.verify(new X509Certificate(caPem).publicKey)) return false;
      return this.o.sans.every((s) => (isIP(s) ? x.checkIP(s) : x.checkHost(s)));
    } catch {
      return false;
    }
  }

  private async ensureSecret(): Promise<Secret> {
    const { client, namespace, secretName } = this.o;
    const cur = await client.getOrUndefined<Secret>(SECRETS, namespace, secretName);
    if (cur && cur.metadata?.annotations?.[MANAGED_BY_ANNOTATION] !== MANAGED_BY) return cur; // the operator's
    const caValidity = this.o.caValidityMs ?? DEFAULT_CA_VALIDITY_MS;
    const certValidity = this.o.certValidityMs ?? DEFAULT_CERT_VALIDITY_MS;
    const bundle = splitPem(unb64(cur?.data?.['ca.crt']));
    let ca: KeyPair = { cert: bundle[0] ?? '', key: unb64(cur?.data?.['ca.key']) };
    let tls: KeyPair = { cert: unb64(cur?.data?.['tls.crt']), key: unb64(cur?.data?.['tls.key']) };
    const reasons: string[] = [];
    // (a CA too close to its end to sign a certificate that would not be due at once is renewed as well)
    if (!ca.cert || !ca.key || this.due(ca.cert, caValidity) || this.due(ca.cert, certValidity)) {
      reasons.push(cur ? 'CA renewal' : 'no secret');
      ca = createCA('kubevirt-ts-webhook-ca', caValidity, this.now());
    }
    if (!tls.cert || !tls.key || this.due(tls.cert, certValidity) || !this.coversSans(tls.cert, ca.cert)) {
      if (!reasons.length) reasons.push('serving certificate renewal');
      tls = this.serving(ca);
    }
    if (!reasons.length) return cur!;
    // the bundle keeps older CAs until they expire, so a replica still serving a certificate they signed
    // stays trusted until it has read the new Secret
    const now = this.now().getTime();
    const keep = bundle.filter((c) => c !== ca.cert && Date.parse(new X509Certificate(c).validTo) > now);
    const data = {
      'ca.crt': b64([ca.cert, ...keep].join('')),
      'ca.key': b64(ca.key),
      'tls.crt': b64(tls.cert),
      'tls.key': b64(tls.key),
    };
    this.o.log?.info('writing the webhook certificate secret', {
      secret: `${namespace}/${secretName}`,
      reason: reasons.join(', '),
    });
    if (!cur)
      return client.create<Secret>(SECRETS, namespace, {
        apiVersion: 'v1',
        kind: 'Secret',
        type: 'kubernetes.io/tls',
        metadata: {
          name: secretName,
          namespace,
          annotations: { [MANAGED_BY_ANNOTATION]: MANAGED_BY },
          labels: {
            'app.kubernetes.io/part-of': 'kubevirt-ts',
            'app.kubernetes.io/component': 'virt-controller',
          },
        },
        data,
      });
    return client.update<Secret>(SECRETS, { ...cur, data });
  }

  /** the served certificate ends before the next two checks: a new one is served whoever trusts it */
  private expiring(pem: string): boolean {
    try {
      const left = Date.parse(new X509Certificate(pem).validTo) - this.now().getTime();
      return left <= 2 * (this.o.checkIntervalMs ?? 60_000);
    } catch {
      return true;
    }
  }

  /**
   * Whether each webhook configuration and the APIService (those installed) trust the CA in `bundle` that signed
   * `cert`: their caBundle holds it. When no CA of the bundle signed it, their caBundle must be the whole bundle.
   */
  private async trusted(cert: string, bundle: string): Promise<boolean> {
    const norm = (pem: string) => splitPem(pem).map((c) => c.trim());
    let issuer: string | undefined;
    try {
      const x = new X509Certificate(cert);
      issuer = norm(bundle).find((c) => x.verify(new X509Certificate(c).publicKey));
    } catch {
      issuer = undefined;
    }
    const wanted = issuer ? [issuer] : norm(bundle);
    for (const { resource, name } of caBundleTargets(this.o)) {
      const o = await this.o.client.getOrUndefined<CaBundleCarrier>(resource, undefined, name);
      if (!o) continue; // not installed: nothing to wait for
      for (const b of caBundlesOf(resource, o)) {
        const have = norm(unb64(b));
        if (!wanted.every((c) => have.includes(c))) return false;
      }
    }
    return true;
  }
}

export interface ManagedWebhooksOptions extends Omit<WebhookCertOptions, 'onCertificate'> {
  host?: string;
  port?: number;
  /** the KubeVirt CR the webhooks read the cluster's defaults from (see WebhookServerOptions.kubeVirt) */
  kubeVirt?: { namespace: string; name: string };
  /** also called with each new serving certificate (another server using it, e.g. the subresource API) */
  onCertificate?: (cert: string, key: string) => void;
}

/**
 * The webhook server with its certificate from the Secret (made when absent) and rotated in place: what
 * every virt-controller replica runs.
 */
export async function startManagedWebhooks(
  o: ManagedWebhooksOptions,
): Promise<{ server: WebhookServer; certs: WebhookCertManager; close(graceMs?: number): Promise<void> }> {
  let server: WebhookServer | undefined;
  let first: { cert: string; key: string } | undefined;
  const certs = new WebhookCertManager({
    ...o,
    onCertificate: (cert, key) => {
      if (server) server.setCertificate(cert, key);
      else first = { cert, key };
      o.onCertificate?.(cert, key);
    },
  });
  await certs.start();
  try {
    server = await startWebhookServer({
      ...first!,
      host: o.host,
      port: o.port,
      log: o.log,
      client: o.client,
      namespace: o.namespace,
      kubeVirt: o.kubeVirt,
    });
  } catch (e) {
    await certs.stop();
    throw e;
  }
  const s = server;
  return {
    server: s,
    certs,
    close: async (graceMs?: number) => {
      await certs.stop();
      await s.close(graceMs);
    },
  };
}
