// Informer, client, updateIfChanged and leader election against a real kube-apiserver (tools/testenv).
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeClient, LEASES, resourcePath, type KubeObject, type Resource } from './client.js';
import { Informer } from './informer.js';
import { LeaderElector, type Lease } from './leader.js';
import { updateIfChanged } from './status.js';
import { startTestEnv, type TestEnv } from '@kubevirt-ts/testenv';

const CM: Resource = { group: '', version: 'v1', plural: 'configmaps', namespaced: true };
const NS_R: Resource = { group: '', version: 'v1', plural: 'namespaces', namespaced: false };
type ConfigMap = KubeObject & { data?: Record<string, string> };
const NS = 'cr-test';
let finished = false;
async function until<T>(fn: () => Promise<T | undefined | false> | T | undefined | false): Promise<T> {
  while (!finished) {
    const v = await fn();
    if (v !== undefined && v !== false) return v;
    await sleep(20);
  }
  throw new Error('suite finished');
}

let env: TestEnv;
let client: KubeClient;
beforeAll(async () => {
  env = await startTestEnv();
  client = new KubeClient(env.kubeConfig());
  await client.create(NS_R, undefined, { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
}, 120000);
afterAll(async () => {
  finished = true;
  client?.close();
  await env?.stop();
});

describe('KubeClient', () => {
  it('builds paths and counts writes only', async () => {
    expect(resourcePath(CM, 'a', 'b', 'status')).toBe('/api/v1/namespaces/a/configmaps/b/status');
    expect(resourcePath(LEASES, 'x')).toBe('/apis/coordination.k8s.io/v1/namespaces/x/leases');
    const before = client.writes;
    await client.create<ConfigMap>(CM, NS, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'w' } });
    await client.get(CM, NS, 'w');
    expect(client.writes).toBe(before + 1);
    await expect(client.get(CM, NS, 'missing')).rejects.toMatchObject({ status: 404 });
    expect(await client.getOrUndefined(CM, NS, 'missing')).toBeUndefined();
  });
});

describe('Informer', () => {
  it('fills its cache from the list, then follows adds, updates and deletes', async () => {
    await client.create<ConfigMap>(CM, NS, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'pre', labels: { t: 'i' } },
    });
    const inf = new Informer<ConfigMap>(client, {
      resource: CM,
      namespace: NS,
      labelSelector: 't=i',
    });
    const events: string[] = [];
    inf.onAdd((o) => events.push(`add ${o.metadata?.name}`));
    inf.onUpdate((o) => events.push(`update ${o.metadata?.name} ${o.data?.['k']}`));
    inf.onDelete((o) => events.push(`delete ${o.metadata?.name}`));
    await inf.start();
    expect(inf.hasSynced()).toBe(true);
    expect(inf.get(NS, 'pre')?.metadata?.name).toBe('pre');
    expect(inf.get(NS, 'w')).toBeUndefined(); // not selected
    await client.create<ConfigMap>(CM, NS, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'new', labels: { t: 'i' } },
    });
    await client.patch(CM, NS, 'new', { data: { k: 'v' } });
    await client.delete(CM, NS, 'pre');
    await until(() => events.length >= 4);
    expect(events).toEqual(['add pre', 'add new', 'update new v', 'delete pre']);
    expect(inf.getByKey(`${NS}/new`)?.data).toEqual({ k: 'v' });
    expect(inf.list(NS).map((o) => o.metadata?.name)).toEqual(['new']);
    // the API server stores managedFields; the cache (from list and from watch) does not keep them
    expect(
      ((await client.get(CM, NS, 'new')).metadata as { managedFields?: unknown[] }).managedFields?.length,
    ).toBeGreaterThan(0);
    expect(inf.getByKey(`${NS}/new`)?.metadata).not.toHaveProperty('managedFields');
    await inf.stop();
    const again = new Informer<ConfigMap>(client, { resource: CM, namespace: NS });
    await again.start();
    expect(again.list(NS).length).toBeGreaterThan(0);
    for (const o of again.list(NS)) expect(o.metadata).not.toHaveProperty('managedFields');
    await again.stop();
  });
});

describe('Informer lists in pages and caches what transform keeps', () => {
  it('5 objects in pages of 2, each cached as transformed; a watched change is transformed too', async () => {
    for (let i = 0; i < 5; i++)
      await client.create<ConfigMap>(CM, NS, {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: `pg${i}`, labels: { t: 'pg' } },
        data: { big: 'x'.repeat(100), k: String(i) },
      });
    const before = client.writes;
    const inf = new Informer<ConfigMap>(client, {
      resource: CM,
      namespace: NS,
      labelSelector: 't=pg',
      pageSize: 2,
      transform: (o) => ({ metadata: o.metadata, data: { k: o.data?.['k'] ?? '' } }),
    });
    await inf.start();
    expect(client.writes).toBe(before);
    expect(
      inf
        .list(NS)
        .map((o) => o.data)
        .sort((a, b) => a!['k']!.localeCompare(b!['k']!)),
    ).toEqual([0, 1, 2, 3, 4].map((i) => ({ k: String(i) })));
    const seen: string[] = [];
    inf.onUpdate((o) => seen.push(JSON.stringify(o.data)));
    await client.patch(CM, NS, 'pg3', { data: { k: 'changed' } });
    await until(() => seen.length > 0);
    expect(seen).toEqual(['{"k":"changed"}']);
    await inf.stop();
  });
});

const CRDS: Resource = {
  group: 'apiextensions.k8s.io',
  version: 'v1',
  plural: 'customresourcedefinitions',
  namespaced: false,
};
const WIDGETS: Resource = { group: 'late.kvts.test', version: 'v1', plural: 'widgets', namespaced: true };

describe('Informer on an optional resource', () => {
  it('starts empty while the resource is not served, and fills once its CRD is created', async () => {
    const inf = new Informer<KubeObject>(client, { resource: WIDGETS, optional: true });
    const strict = new Informer<KubeObject>(client, { resource: WIDGETS });
    await expect(strict.start()).rejects.toMatchObject({ status: 404 });
    await strict.stop();
    const added: string[] = [];
    inf.onAdd((o) => added.push(o.metadata!.name!));
    await inf.start();
    expect(inf.hasSynced()).toBe(true);
    expect(inf.list()).toEqual([]);
    await client.create(CRDS, undefined, {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: 'widgets.late.kvts.test' },
      spec: {
        group: 'late.kvts.test',
        scope: 'Namespaced',
        names: { plural: 'widgets', singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
        versions: [
          {
            name: 'v1',
            served: true,
            storage: true,
            schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
          },
        ],
      },
    });
    const w = { apiVersion: 'late.kvts.test/v1', kind: 'Widget', metadata: { name: 'w1', namespace: NS } };
    await until(async () => {
      try {
        return await client.create(WIDGETS, NS, w);
      } catch (e) {
        // the CRD is not established yet
        if ((e as { status?: number }).status === 404) return undefined;
        throw e;
      }
    });
    await until(() => inf.get(NS, 'w1'));
    expect(added).toEqual(['w1']);
    await inf.stop();
  });
});

describe('updateIfChanged', () => {
  it('sends nothing when unchanged, and retries a resourceVersion conflict on a fresh copy', async () => {
    const cm = await client.create<ConfigMap>(CM, NS, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'u' },
      data: { a: '1' },
    });
    const before = client.writes;
    const same = await updateIfChanged<ConfigMap>({ client, resource: CM, current: cm, mutate: (l) => l });
    expect(same.written).toBe(false);
    expect(client.writes).toBe(before);
    // someone else writes meanwhile: the cached copy is stale
    await client.patch(CM, NS, 'u', { data: { other: 'x' } });
    let calls = 0;
    const r = await updateIfChanged<ConfigMap>({
      client,
      resource: CM,
      current: cm,
      mutate: (l) => {
        calls++;
        l.data = { ...l.data, a: '2' };
        return l;
      },
    });
    expect(r.written).toBe(true);
    expect(calls).toBe(2);
    expect((await client.get<ConfigMap>(CM, NS, 'u')).data).toEqual({ a: '2', other: 'x' });
  });
});

describe('LeaderElector', () => {
  const opts = { leaseDurationMs: 2000, renewDeadlineMs: 1500, retryPeriodMs: 200 };
  it('one leader among two candidates; the other takes over when it stops', async () => {
    const state: Record<string, boolean> = { a: false, b: false };
    const mk = (id: string) =>
      new LeaderElector({
        client,
        namespace: NS,
        name: 'lead',
        identity: id,
        ...opts,
        onStartedLeading: () => void (state[id] = true),
        onStoppedLeading: () => void (state[id] = false),
      });
    const a = mk('a');
    a.start();
    await until(() => state['a']);
    const b = mk('b');
    b.start();
    await sleep(1000); // several retry periods
    expect(state).toEqual({ a: true, b: false });
    await a.stop(); // releases the lease
    expect(state['a']).toBe(false);
    await until(() => state['b']);
    const lease = await client.get<Lease>(LEASES, NS, 'lead');
    expect(lease.spec?.holderIdentity).toBe('b');
    expect(lease.spec?.leaseTransitions).toBe(0); // a released it: no takeover of a live holder
    await b.stop();
  });

  it('a lease held by a dead candidate is taken over once it expires, not before', async () => {
    const t0 = Date.now();
    const micro = new Date(t0).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
    await client.create<Lease>(LEASES, NS, {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: 'dead' },
      spec: {
        holderIdentity: 'crashed',
        leaseDurationSeconds: 2,
        renewTime: micro,
        acquireTime: micro,
        leaseTransitions: 0,
      },
    });
    let startedAt = 0;
    const c = new LeaderElector({
      client,
      namespace: NS,
      name: 'dead',
      identity: 'c',
      ...opts,
      onStartedLeading: () => void (startedAt = Date.now()),
      onStoppedLeading: () => undefined,
    });
    c.start();
    await until(() => startedAt > 0);
    expect(startedAt - t0).toBeGreaterThanOrEqual(2000);
    const lease = await client.get<Lease>(LEASES, NS, 'dead');
    expect(lease.spec).toMatchObject({ holderIdentity: 'c', leaseTransitions: 1 });
    await c.stop();
  });
});
