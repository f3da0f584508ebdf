// An informer: list, then watch from the list's resourceVersion (with bookmarks), a cache of the objects,
// and add/update/delete handlers (which typically feed a work queue). A watch that ends is started again
// from the last resourceVersion seen; after an error, after a backoff (1 s doubling to 30 s); when the
// server says that resourceVersion is too old (410 Gone), by a new list, whose differences from the cache
// are delivered as adds, updates and deletes. Plain JSON over `KubeClient` (no client-node models).
import type { Logger } from '@kubevirt-ts/log';
import { KubeApiError, type KubeClient, type KubeObject, type Resource, type WatchEvent } from './client.js';

export type Handler<T> = (obj: T) => void;

/**
 * What the cache keeps of each object: `metadata.managedFields` is dropped (server-side apply bookkeeping,
 * often the largest part of an object, read by no controller here), as client-go users do with a
 * TransformFunc.
 */
function trim(o: unknown): void {
  const m = (o as { metadata?: { managedFields?: unknown } } | undefined)?.metadata;
  if (m && 'managedFields' in m) delete m.managedFields;
}

export interface InformerOptions<T extends KubeObject = KubeObject> {
  resource: Resource;
  /** only this namespace (default: all) */
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  log?: Logger;
  /**
   * What the cache keeps of each object (client-go's TransformFunc), applied to every listed and watched object
   * before it is cached and handed to the handlers: e.g. only the fields a controller reads. Default: all but
   * `metadata.managedFields`.
   */
  transform?: (o: T) => T;
  /** objects per list request (`limit`, then `continue`; client-go's pager uses 500); default 250 */
  pageSize?: number;
  /**
   * The resource may not be served (the CRD of an add-on, e.g. CDI's DataVolumes): a first list answered 404 leaves
   * the cache empty and `start()` resolves; the list is retried in the background with the usual backoff (up to
   * 30 s) until the resource appears.
   */
  optional?: boolean;
}

/** The key of an object in queues and caches: "namespace/name" ("name" when cluster-scoped). */
export function keyOf(o: KubeObject): string {
  const m = o.metadata ?? {};
  return m.namespace ? `${m.namespace}/${m.name}` : `${m.name}`;
}
export function splitKey(key: string): { namespace: string | undefined; name: string } {
  const i = key.indexOf('/');
  return i < 0 ? { namespace: undefined, name: key } : { namespace: key.slice(0, i), name: key.slice(i + 1) };
}

export class Informer<T extends KubeObject> {
  /** namespace ('' when cluster-scoped) -> name -> object */
  private readonly cache = new Map<string, Map<string, T>>();
  private readonly handlers = {
    add: [] as Handler<T>[],
    update: [] as Handler<T>[],
    delete: [] as Handler<T>[],
  };
  private stopped = true;
  private retryMs = 1000;
  private retryTimer: NodeJS.Timeout | undefined;
  private abort: AbortController | undefined;
  private resourceVersion = '';
  private synced = false;
  readonly resource: Resource;

  constructor(
    private readonly client: KubeClient,
    private readonly opts: InformerOptions<T>,
  ) {
    this.resource = opts.resource;
  }

  onAdd(h: Handler<T>): this {
    this.handlers.add.push(h);
    return this;
  }
  onUpdate(h: Handler<T>): this {
    this.handlers.update.push(h);
    return this;
  }
  onDelete(h: Handler<T>): this {
    this.handlers.delete.push(h);
    return this;
  }
  /** add, update and delete */
  onChange(h: Handler<T>): this {
    return this.onAdd(h).onUpdate(h).onDelete(h);
  }

  /** Lists (filling the cache and calling the add handlers) and starts watching; resolves once synced. */
  async start(): Promise<void> {
    this.stopped = false;
    try {
      await this.relist(true);
    } catch (e) {
      if (!(this.opts.optional && e instanceof KubeApiError && e.status === 404)) throw e;
      this.opts.log?.info('resource not served (yet): the cache stays empty, listing again later', {
        resource: this.opts.resource.plural,
        retryMs: this.retryMs,
      });
      this.synced = true;
      this.retryTimer = setTimeout(() => void this.relistThenWatch(), this.retryMs);
      this.retryMs = Math.min(this.retryMs * 2, 30000);
      return;
    }
    this.synced = true;
    this.watchLoop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.abort?.abort();
    return Promise.resolve();
  }

  hasSynced(): boolean {
    return this.synced;
  }

  get(namespace: string | undefined, name: string): T | undefined {
    return this.cache.get(namespace ?? '')?.get(name);
  }
  getByKey(key: string): T | undefined {
    const { namespace, name } = splitKey(key);
    return this.get(namespace, name);
  }
  list(namespace?: string): readonly T[] {
    if (namespace !== undefined) return [...(this.cache.get(namespace)?.values() ?? [])];
    const out: T[] = [];
    for (const m of this.cache.values()) for (const o of m.values()) out.push(o);
    return out;
  }

  private emit(kind: 'add' | 'update' | 'delete', o: T): void {
    for (const h of this.handlers[kind]) h(o);
  }

  private put(obj: T): void {
    trim(obj);
    const o = this.opts.transform ? this.opts.transform(obj) : obj;
    const ns = o.metadata?.namespace ?? '';
    const name = o.metadata?.name ?? '';
    let m = this.cache.get(ns);
    if (!m) this.cache.set(ns, (m = new Map()));
    const old = m.get(name);
    m.set(name, o);
    if (!old) this.emit('add', o);
    else if (old.metadata?.resourceVersion !== o.metadata?.resourceVersion) this.emit('update', o);
  }

  private remove(o: T): void {
    const ns = o.metadata?.namespace ?? '';
    const m = this.cache.get(ns);
    const name = o.metadata?.name ?? '';
    const old = m?.get(name);
    if (!m || !old) return;
    m.delete(name);
    if (m.size === 0) this.cache.delete(ns);
    trim(o);
    this.emit('delete', this.opts.transform ? this.opts.transform(o) : o);
  }

  /**
   * A list (in pages) replaces the cache: what it lacks is deleted, the rest added or updated. `fromCache` (the
   * first list only): from the API server's watch cache (resourceVersion 0, as client-go's reflector lists), no
   * consistent read from etcd (which, with a label selector, reads every object of the resource); the watch that
   * follows starts at the list's version, so nothing after it is missed, and the cache may answer in one page. Later
   * lists (after 410 Gone or an error) read consistently: they never go back behind what the cache already saw.
   */
  private async relist(fromCache = false): Promise<void> {
    const { opts } = this;
    const seen = new Set<string>();
    let cont: string | undefined;
    let rv = '';
    do {
      const l = await this.client.list<T>(opts.resource, opts.namespace, {
        labelSelector: opts.labelSelector,
        fieldSelector: opts.fieldSelector,
        limit: opts.pageSize ?? 250,
        continue: cont,
        resourceVersion: cont || !fromCache ? undefined : '0',
      });
      for (const o of l.items) {
        seen.add(keyOf(o));
        this.put(o);
      }
      cont = l.metadata?.continue || undefined;
      rv = l.metadata?.resourceVersion ?? '';
    } while (cont);
    for (const o of this.list()) if (!seen.has(keyOf(o))) this.remove(o);
    this.resourceVersion = rv;
  }

  private watchLoop(): void {
    if (this.stopped) return;
    const { opts } = this;
    const abort = (this.abort = new AbortController());
    let gone = false;
    const onEvent = (e: WatchEvent) => {
      if (e.type === 'ERROR') {
        if (e.object.code === 410) gone = true;
        else
          throw new KubeApiError(e.object.code ?? 0, JSON.stringify(e.object), 'WATCH', opts.resource.plural);
        return;
      }
      this.retryMs = 1000;
      const rv = e.object.metadata?.resourceVersion;
      if (rv) this.resourceVersion = rv;
      if (e.type === 'ADDED' || e.type === 'MODIFIED') this.put(e.object as T);
      else if (e.type === 'DELETED') this.remove(e.object as T);
    };
    this.client
      .watch(
        opts.resource,
        opts.namespace,
        {
          labelSelector: opts.labelSelector,
          fieldSelector: opts.fieldSelector,
          resourceVersion: this.resourceVersion,
          // the server ends a watch after this (plus jitter); it is started again from where it was
          timeoutSeconds: 300 + Math.floor(Math.random() * 300),
        },
        onEvent,
        abort.signal,
      )
      .then(async () => {
        if (gone && !this.stopped) await this.relist();
        this.watchLoop();
      })
      .catch(async (err: unknown) => {
        if (this.stopped) return;
        if (err instanceof KubeApiError && err.status === 410) {
          try {
            await this.relist();
            return this.watchLoop();
          } catch (e) {
            err = e;
          }
        }
        opts.log?.warn('watch ended with an error, restarting', {
          resource: opts.resource.plural,
          reason: err instanceof Error ? err.message : String(err),
          retryMs: this.retryMs,
        });
        this.retryTimer = setTimeout(() => {
          this.retryTimer = undefined;
          void this.relistThenWatch();
        }, this.retryMs);
        this.retryMs = Math.min(this.retryMs * 2, 30000);
      });
  }

  private async relistThenWatch(): Promise<void> {
    if (this.stopped) return;
    try {
      await this.relist();
    } catch (e) {
      const notServed = this.opts.optional && e instanceof KubeApiError && e.status === 404;
      this.opts.log?.[notServed ? 'debug' : 'warn']('list failed, retrying', {
        resource: this.opts.resource.plural,
        reason: e instanceof Error ? e.message : String(e),
        retryMs: this.retryMs,
      });
      this.retryTimer = setTimeout(() => void this.relistThenWatch(), this.retryMs);
      this.retryMs = Math.min(this.retryMs * 2, 30000);
      return;
    }
    this.watchLoop();
  }
}
