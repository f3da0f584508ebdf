// KubeVirt's view of one libvirt domain (upstream api.Domain): metadata naming the VMI,
// the live domain spec (parsed from libvirt's XML with @kubevirt-ts/converter's model) and
// the KubeVirt-style status. This is what the watcher emits and getDomain returns, as JSON.

import type { Domain as DomainSpec } from '@kubevirt-ts/converter';
import type { MigrationState } from './migration.js';
import type { DomainStatus } from './status.js';

export type { DomainSpec };

export interface KubevirtDomain {
  kind: 'Domain';
  apiVersion: 'kubevirt.io/v1';
  metadata: {
    /** the VMI's name */
    name: string;
    /** the VMI's namespace */
    namespace: string;
    /** the VMI's uid (from the domain's kubevirt metadata), when known */
    uid?: string;
    /** set on DELETED events (RFC 3339) */
    deletionTimestamp?: string;
  };
  /** libvirt's domain name (`<namespace>_<name>`) and UUID */
  domainName: string;
  domainUUID?: string;
  spec?: DomainSpec;
  status: DomainStatus;
  /** the latest outgoing migration started here (upstream keeps it in the domain's kubevirt metadata) */
  migration?: MigrationState;
}

/** `<namespace>_<name>`: the libvirt domain name of a VMI (upstream's VMINamespaceKeyFunc). */
export function domainNameOf(vmi: { metadata?: { name?: string; namespace?: string } }): string {
  const name = vmi.metadata?.name;
  if (!name) throw new Error('metadata.name: required to name the domain');
  const namespace = vmi.metadata?.namespace || 'default';
  return `${namespace}_${name}`;
}

/** Splits a domain name `<namespace>_<name>` (namespaces and names never contain `_`). */
export function splitDomainName(domainName: string): { namespace: string; name: string } {
  const i = domainName.indexOf('_');
  if (i < 0) return { namespace: '', name: domainName };
  return { namespace: domainName.slice(0, i), name: domainName.slice(i + 1) };
}

export function newDomain(
  domainName: string,
  status: DomainStatus,
  spec?: DomainSpec,
  uuid?: string,
): KubevirtDomain {
  const { namespace, name } = splitDomainName(domainName);
  const d: KubevirtDomain = {
    kind: 'Domain',
    apiVersion: 'kubevirt.io/v1',
    metadata: { name, namespace },
    domainName,
    status: { ...status },
  };
  const uid = spec?.metadata?.uid;
  if (uid) d.metadata.uid = uid;
  if (uuid) d.domainUUID = uuid;
  if (spec) d.spec = spec;
  return d;
}
