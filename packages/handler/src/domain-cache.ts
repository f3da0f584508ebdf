/**
 * The node's domain cache (upstream's domain informer): the latest domain each launcher reported,
 * keyed by the VMI key `namespace/name`, fed by notify events and by GetDomain at start. The
 * domain's `metadata.uid` is the VMI uid: readers ask for a key *and* a uid, so a recreated VMI
 * of the same name never sees the old VMI's domain.
 */
import type { DomainModel } from '@kubevirt-ts/cmd-protocol';

export interface CachedDomain {
  domain: DomainModel;
  /** the domain's last event was DELETED: it is gone from libvirt */
  deleted: boolean;
}

export function domainKey(d: Pick<DomainModel, 'metadata'>): string {
  return `${d.metadata.namespace}/${d.metadata.name}`;
}

export class DomainCache {
  /** key -> uid -> entry (two launchers of the same name can overlap for a moment) */
  private entries = new Map<string, Map<string, CachedDomain>>();

  constructor(private readonly onChange: (key: string) => void = () => undefined) {}

  /** Applies an event (ADDED/MODIFIED/DELETED). Domains without a uid are dropped: they cannot be tied to a VMI. */
  apply(eventType: string, domain: DomainModel | undefined): void {
    if (!domain?.metadata?.name || !domain.metadata.namespace || !domain.metadata.uid) return;
    const key = domainKey(domain);
    let byUid = this.entries.get(key);
    if (!byUid) this.entries.set(key, (byUid = new Map()));
    byUid.set(domain.metadata.uid, { domain, deleted: eventType === 'DELETED' });
    this.onChange(key);
  }

  /** The domain of VMI `key` with this uid, undefined when none or when it was deleted. */
  get(key: string, uid: string): DomainModel | undefined {
    const e = this.entries.get(key)?.get(uid);
    return e && !e.deleted ? e.domain : undefined;
  }
  /** Including deleted ones (the last state a launcher reported). */
  last(key: string, uid: string): CachedDomain | undefined {
    return this.entries.get(key)?.get(uid);
  }
  /** Every (key, uid) the cache knows. */
  all(): Array<{ key: string; uid: string; entry: CachedDomain }> {
    const out: Array<{ key: string; uid: string; entry: CachedDomain }> = [];
    for (const [key, m] of this.entries) for (const [uid, entry] of m) out.push({ key, uid, entry });
    return out;
  }
  forget(key: string, uid: string): void {
    const m = this.entries.get(key);
    m?.delete(uid);
    if (m && m.size === 0) this.entries.delete(key);
  }
}
