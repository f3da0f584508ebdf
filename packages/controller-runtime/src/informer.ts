// An informer on @kubernetes/client-node's ListWatch: list, then watch from the list's
// resourceVersion, a cache of the objects, and add/update/delete handlers (which typically feed a
// work queue). ListWatch stops on a watch error; this one starts it again after a backoff (1 s doubling
// to 30 s), relisting when the server says the resourceVersion is too old (410).
import { ListWatch, Watch, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from '@kubevirt-ts/log';
import { resourcePath, type KubeClient, type KubeObject, type Resource } from './client.js';

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

/** client-node's Watch, with each event's object trimmed before the ListWatch caches it */
class TrimmingWatch extends Watch {
  override watch(
    path: string,
    queryParams: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, apiObj: unknown, watchObj?: unknown) => void,
    done: (err: unknown) => void,
  ): Promise<AbortController> {
    return super.watch(
      path,
      queryParams,
      (phase, apiObj, watchObj) => {
        trim(apiObj);
        callback(phase, apiObj, watchObj);
      },
      done,
    );
  }
}

export interface InformerOptions {
  resource: Resource;
  /** only this namespace (default: all) */
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  log?: Logger;
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
  // client-node types objects with Date timestamps; on the wire (and here) they are JSON strings
  private readonly lw: ListWatch<KubernetesObject>;
  private stopped = true;
  private retryMs = 1000;
  private retryTimer: NodeJS.Timeout | undefined;
  private synced = false;
  readonly resource: Resource;

  constructor(
    kc: KubeConfig,
    client: KubeClient,
    private readonly opts: InformerOptions,
  ) {
    this.resource = opts.resource;
    const path = resourcePath(opts.resource, opts.namespace);
    const listFn = async () => {
      const l = await client.list<T>(opts.resource, opts.namespace, {
        labelSelector: opts.labelSelector,
        fieldSelector: opts.fieldSelector,
      });
      for (const o of l.items) trim(o);
      return { ...l, metadata: l.metadata ?? {} } as never;
    };
    this.lw = new ListWatch<KubernetesObject>(
      path,
      new TrimmingWatch(kc),
      listFn,
      false,
      opts.labelSelector,
      opts.fieldSelector,
    );
    this.lw.on('connect', () => {
      this.retryMs = 1000;
    });
    this.lw.on('error', (err: unknown) => {
      if (this.stopped) return;
      opts.log?.warn('watch ended with an error, restarting', {
        resource: opts.resource.plural,
        reason: err instanceof Error ? err.message : String(err),
        retryMs: this.retryMs,
      });
      this.retryTimer = setTimeout(() => {
        this.retryTimer = undefined;
        if (!this.stopped) void this.lw.start();
      }, this.retryMs);
      this.retryMs = Math.min(this.retryMs * 2, 30000);
    });
  }

  onAdd(h: Handler<T>): this {
    this.lw.on('add', h as unknown as Handler<KubernetesObject>);
    return this;
  }
  onUpdate(h: Handler<T>): this {
    this.lw.on('update', h as unknown as Handler<KubernetesObject>);
    return this;
  }
  onDelete(h: Handler<T>): this {
    this.lw.on('delete', h as unknown as Handler<KubernetesObject>);
    return this;
  }
  /** add, update and delete */
  onChange(h: Handler<T>): this {
    return this.onAdd(h).onUpdate(h).onDelete(h);
  }

  /** Lists (filling the cache and calling the add handlers) and starts watching; resolves once synced. */
  async start(): Promise<void> {
    this.stopped = false;
    const ok = new Promise<void>((resolve, reject) => {
      const onConnectErr = (e: unknown) => {
        this.lw.off('error', onConnectErr);
        reject(e instanceof Error ? e : new Error(String(e)));
      };
      this.lw.on('error', onConnectErr);
      this.lw
        .start()
        .then(() => {
          this.lw.off('error', onConnectErr);
          resolve();
        })
        .catch(reject);
    });
    await ok;
    this.synced = true;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    await this.lw.stop();
  }

  hasSynced(): boolean {
    return this.synced;
  }

  get(namespace: string | undefined, name: string): T | undefined {
    return this.lw.get(name, namespace) as T | undefined;
  }
  getByKey(key: string): T | undefined {
    const { namespace, name } = splitKey(key);
    return this.get(namespace, name);
  }
  list(namespace?: string): readonly T[] {
    return this.lw.list(namespace) as readonly T[];
  }
}
