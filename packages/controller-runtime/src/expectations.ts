// Expectations as KubeVirt's pkg/controller/expectations.go (after Kubernetes' controller_utils):
// before creating (or deleting) objects for a key the controller records how many adds (deletes) it
// expects to see; the informer's add (delete) events lower the count; while a count is pending the key
// must not create (delete) again, since the cache may simply not show the controller's own writes
// yet. A record older than the timeout counts as satisfied, so a lost event cannot wedge a key.

/** Upstream's ExpectationsTimeout: 5 minutes. */
export const EXPECTATIONS_TIMEOUT_MS = 5 * 60 * 1000;

export interface Expectation {
  add: number;
  del: number;
  /** when the record was (re)set, ms since the epoch */
  timestamp: number;
}

export class ControllerExpectations {
  private readonly records = new Map<string, Expectation>();
  constructor(
    readonly timeoutMs = EXPECTATIONS_TIMEOUT_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** Replace the record of `key` with `add` expected adds and `del` expected deletes. */
  setExpectations(key: string, add: number, del: number): void {
    this.records.set(key, { add, del, timestamp: this.now() });
  }
  expectCreations(key: string, n: number): void {
    this.setExpectations(key, n, 0);
  }
  expectDeletions(key: string, n: number): void {
    this.setExpectations(key, 0, n);
  }
  /** Add to the counts of an existing record (or create one). */
  raiseExpectations(key: string, add: number, del: number): void {
    const r = this.records.get(key);
    if (!r) return this.setExpectations(key, add, del);
    r.add += add;
    r.del += del;
  }
  lowerExpectations(key: string, add: number, del: number): void {
    const r = this.records.get(key);
    if (!r) return;
    r.add -= add;
    r.del -= del;
  }
  /** The informer saw an add for `key` (or a create failed, so none will come). */
  creationObserved(key: string): void {
    this.lowerExpectations(key, 1, 0);
  }
  deletionObserved(key: string): void {
    this.lowerExpectations(key, 0, 1);
  }
  getExpectations(key: string): Expectation | undefined {
    const r = this.records.get(key);
    return r ? { ...r } : undefined;
  }
  /** Adds still expected (0 when fulfilled, expired, or unknown). */
  pendingAdds(key: string): number {
    const r = this.records.get(key);
    return r && !this.expired(r) ? Math.max(0, r.add) : 0;
  }
  pendingDeletes(key: string): number {
    const r = this.records.get(key);
    return r && !this.expired(r) ? Math.max(0, r.del) : 0;
  }
  /** True when the controller may act on `key`: no record, all seen, or the record timed out. */
  satisfiedExpectations(key: string): boolean {
    const r = this.records.get(key);
    if (!r) return true;
    if (r.add <= 0 && r.del <= 0) return true;
    return this.expired(r);
  }
  deleteExpectations(key: string): void {
    this.records.delete(key);
  }
  private expired(r: Expectation): boolean {
    return this.now() - r.timestamp > this.timeoutMs;
  }
}
