// Writes only when something changed, with resourceVersion conflicts retried: the new object is
// computed from the cached one; if it equals it nothing is sent; otherwise a conditional PUT (the
// resourceVersion of what it was computed from) is sent, and on 409 Conflict the object is read
// again and the computation repeated on the fresh copy.
import { isConflict, isNotFound, type KubeClient, type KubeObject, type Resource } from './client.js';
import { clone, deepEqual } from './equal.js';

export interface UpdateIfChangedOptions<T> {
  client: KubeClient;
  resource: Resource;
  /** the object as the cache has it */
  current: T;
  /** the wanted object, computed from (a copy of) the latest one; undefined: nothing to do */
  mutate: (latest: T) => T | undefined;
  /** 'status' writes the status subresource */
  subresource?: 'status';
  /** attempts before giving up on conflicts (default 5) */
  attempts?: number;
}

export interface UpdateResult<T> {
  written: boolean;
  object: T | undefined;
}

export async function updateIfChanged<T extends KubeObject>(
  o: UpdateIfChangedOptions<T>,
): Promise<UpdateResult<T>> {
  let cur: T = o.current;
  const attempts = o.attempts ?? 5;
  for (let i = 0; ; i++) {
    const next = o.mutate(clone(cur));
    if (!next || deepEqual(next, cur)) return { written: false, object: cur };
    try {
      const res = await o.client.update<T>(o.resource, next, o.subresource);
      return { written: true, object: res };
    } catch (e) {
      if (!isConflict(e) || i + 1 >= attempts) throw e;
      const m = cur.metadata ?? {};
      try {
        cur = await o.client.get<T>(o.resource, m.namespace, m.name!);
      } catch (e2) {
        if (isNotFound(e2)) return { written: false, object: undefined };
        throw e2;
      }
      if (m.uid && cur.metadata?.uid !== m.uid) return { written: false, object: undefined };
    }
  }
}
