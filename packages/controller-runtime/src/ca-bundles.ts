// The objects through which the API server trusts kubevirt-ts's serving certificate: the mutating and validating
// webhook configurations and the subresource APIService. virt-operator writes their caBundle (publishes the CA);
// virt-controller reads it before it serves a certificate signed by a new CA. Both name them and read them here.
import {
  API_SERVICES,
  MUTATING_WEBHOOKS,
  VALIDATING_WEBHOOKS,
  type KubeObject,
  type Resource,
} from './client.js';

/** The names of the objects that carry the CA (deploy/'s; no `apiService`: none served). */
export interface CaBundleNames {
  mutatingWebhook: string;
  validatingWebhook: string;
  apiService?: string;
}

/** Each object that carries the CA: its resource and name. */
export function caBundleTargets(n: CaBundleNames): { resource: Resource; name: string }[] {
  const all: [Resource, string | undefined][] = [
    [MUTATING_WEBHOOKS, n.mutatingWebhook],
    [VALIDATING_WEBHOOKS, n.validatingWebhook],
    [API_SERVICES, n.apiService],
  ];
  return all.filter((t): t is [Resource, string] => !!t[1]).map(([resource, name]) => ({ resource, name }));
}

/** A webhook configuration or an APIService, as far as its caBundle goes. */
export interface CaBundleCarrier extends KubeObject {
  webhooks?: { name: string; clientConfig?: { caBundle?: string } }[];
  spec?: { caBundle?: string };
}

/** The caBundle(s) (base64) an object carries: each webhook's, or an APIService's `spec.caBundle`. */
export function caBundlesOf(resource: Resource, o: CaBundleCarrier): (string | undefined)[] {
  return resource === API_SERVICES
    ? [o.spec?.caBundle]
    : (o.webhooks ?? []).map((w) => w.clientConfig?.caBundle);
}

/**
 * The JSON patch that sets every caBundle of the object to `want` (base64); empty when all have it. A webhook's patch
 * first tests that its index still names it (a concurrent edit fails the patch instead of landing elsewhere).
 */
export function caBundlePatch(resource: Resource, o: CaBundleCarrier, want: string): object[] {
  if (resource === API_SERVICES)
    return o.spec?.caBundle === want ? [] : [{ op: 'add', path: '/spec/caBundle', value: want }];
  return (o.webhooks ?? []).flatMap((w, i) =>
    w.clientConfig?.caBundle === want
      ? []
      : [
          { op: 'test', path: `/webhooks/${i}/name`, value: w.name },
          { op: 'add', path: `/webhooks/${i}/clientConfig/caBundle`, value: want },
        ],
  );
}
