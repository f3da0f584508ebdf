// virt-operator installs the common instance types and preferences (the VirtualMachineClusterInstancetypes and
// VirtualMachineClusterPreferences of @kubevirt-ts/api's common-instancetypes tables, the objects of
// deploy/addons/common-instancetypes/), as upstream's virt-operator does, unless the KubeVirt CR says
// `spec.configuration.commonInstancetypesDeployment.enabled: false`; then it deletes the ones it manages.
//
// The objects it manages carry upstream's operator labels, app.kubernetes.io/managed-by=virt-operator and
// app.kubernetes.io/component=kubevirt, and the install-strategy-version annotation. Two informers list and watch
// only those (label selector), so a managed object that is deleted, edited, or loses its labels is an event, and one
// sync puts it back; nothing is polled. An object of a bundle name that is not in the cache (a user's own, or one
// the watch has not shown yet) is created; when it exists, it is read and, like upstream, overwritten with the
// bundle's labels, annotations and spec: from then on the operator manages it. Objects of other names are never
// touched, labelled ones only (a managed one that is no longer in the bundle, e.g. after an upgrade, is deleted).
import {
  Informer,
  KubeClient,
  WorkQueue,
  deepEqual,
  isAlreadyExists,
  isConflict,
  isNotFound,
  runWorkers,
  type KubeObject,
  type Resource,
} from '@kubevirt-ts/controller-runtime';
import {
  commonClusterInstancetypes,
  commonClusterPreferences,
  commonInstancetypesDeploymentEnabled,
  type KubeVirtConfiguration,
} from '@kubevirt-ts/api';
import type { Logger } from '@kubevirt-ts/log';

/** upstream's operator label: who manages an object */
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
/** {@link MANAGED_BY_LABEL}'s value on the objects virt-operator manages */
export const MANAGED_BY_OPERATOR = 'virt-operator';
/** upstream's operator label: of which product an object is a component */
export const COMPONENT_LABEL = 'app.kubernetes.io/component';
/** {@link COMPONENT_LABEL}'s value (upstream's default; its CR's `productComponent` is not implemented) */
export const COMPONENT = 'kubevirt';
/** upstream's annotation of the version that installed an object */
export const INSTALL_STRATEGY_VERSION_ANNOTATION = 'kubevirt.io/install-strategy-version';
/** the label selector of the objects virt-operator manages (upstream deletes by the same selector) */
export const MANAGED_SELECTOR = `${COMPONENT_LABEL}=${COMPONENT},${MANAGED_BY_LABEL}=${MANAGED_BY_OPERATOR}`;

const res = (plural: string): Resource => ({
  group: 'instancetype.kubevirt.io',
  version: 'v1beta1',
  plural,
  namespaced: false,
});
/** instancetype.kubevirt.io/v1beta1 VirtualMachineClusterInstancetypes */
export const CLUSTER_INSTANCETYPES = res('virtualmachineclusterinstancetypes');
/** instancetype.kubevirt.io/v1beta1 VirtualMachineClusterPreferences */
export const CLUSTER_PREFERENCES = res('virtualmachineclusterpreferences');

/** A cluster instance type or preference: the fields compared and written. */
export interface BundleObject extends KubeObject {
  metadata: NonNullable<KubeObject['metadata']> & { name: string };
  spec?: unknown;
}

/** One kind of the bundle: its resource, its kind's name (for logs and errors) and its objects. */
export interface BundlePart {
  resource: Resource;
  kind: string;
  objects: BundleObject[];
}

/**
 * The objects virt-operator keeps: the common instance types and preferences, with the operator's labels and the
 * install-strategy-version annotation added to the bundle's own.
 */
export function commonInstancetypesBundle(version: string): BundlePart[] {
  const withMeta = (o: { apiVersion?: string; kind?: string; metadata: object; spec?: unknown }) => {
    const m = o.metadata as BundleObject['metadata'];
    return {
      apiVersion: o.apiVersion,
      kind: o.kind,
      metadata: {
        name: m.name,
        labels: { ...m.labels, [COMPONENT_LABEL]: COMPONENT, [MANAGED_BY_LABEL]: MANAGED_BY_OPERATOR },
        annotations: { ...m.annotations, [INSTALL_STRATEGY_VERSION_ANNOTATION]: version },
      },
      spec: o.spec,
    } satisfies BundleObject;
  };
  return [
    {
      resource: CLUSTER_INSTANCETYPES,
      kind: 'VirtualMachineClusterInstancetype',
      objects: commonClusterInstancetypes().map(withMeta),
    },
    {
      resource: CLUSTER_PREFERENCES,
      kind: 'VirtualMachineClusterPreference',
      objects: commonClusterPreferences().map(withMeta),
    },
  ];
}

/** Whether `cur` has what `want` says (labels, annotations and spec, as upstream compares them). */
export function upToDate(cur: BundleObject, want: BundleObject): boolean {
  return (
    deepEqual(cur.metadata.labels ?? {}, want.metadata.labels ?? {}) &&
    deepEqual(cur.metadata.annotations ?? {}, want.metadata.annotations ?? {}) &&
    deepEqual(cur.spec, want.spec)
  );
}

/**
 * The KubeVirt CR's configuration as the operator sees it: `undefined` when the CR does not exist (then nothing is
 * installed or deleted; the operator creates the default CR).
 */
export type ConfigurationSource = () => { configuration: KubeVirtConfiguration | undefined } | undefined;

export interface CommonInstancetypesOptions {
  client: KubeClient;
  log: Logger;
  /** the version written in the install-strategy-version annotation */
  version: string;
  /** the KubeVirt CR (the one virt-controller reads) */
  kubevirt: ConfigurationSource;
  /** called when the error of the last sync changes (the CR's status reports it) */
  onErrorChange?: (error: string | undefined) => void;
}

const SYNC = 'sync';

/** Keeps the common instance types and preferences as the bundle gives them, or deletes them when disabled. */
export class CommonInstancetypes {
  readonly queue = new WorkQueue<string>();
  private readonly parts: (BundlePart & { informer: Informer<BundleObject> })[];
  private workers: Promise<void> | undefined;
  private lastError: string | undefined;

  constructor(private readonly o: CommonInstancetypesOptions) {
    this.parts = commonInstancetypesBundle(o.version).map((p) => {
      const informer = new Informer<BundleObject>(o.client, {
        resource: p.resource,
        labelSelector: MANAGED_SELECTOR,
        log: o.log,
      });
      informer.onChange(() => this.queue.add(SYNC));
      return { ...p, informer };
    });
  }

  /** the error of the last sync (undefined: it succeeded), upstream's "An error occurred during deployment" */
  get error(): string | undefined {
    return this.lastError;
  }

  /** Queues a sync (the KubeVirt CR changed). */
  trigger(): void {
    this.queue.add(SYNC);
  }

  async start(): Promise<void> {
    await Promise.all(this.parts.map((p) => p.informer.start()));
    this.queue.add(SYNC);
    this.workers = runWorkers(this.queue, 1, () => this.sync(), this.o.log);
  }

  async stop(): Promise<void> {
    this.queue.shutDown();
    await Promise.all(this.parts.map((p) => p.informer.stop()));
    await this.workers;
  }

  /** How many managed objects of each kind the cache holds (tests, logs). */
  managed(): Record<string, number> {
    return Object.fromEntries(this.parts.map((p) => [p.kind, p.informer.list().length]));
  }

  /** One pass: create or update what differs (enabled), delete what it manages (disabled). Throws to retry. */
  async sync(): Promise<void> {
    const kv = this.o.kubevirt();
    if (!kv) return;
    const enabled = commonInstancetypesDeploymentEnabled(kv.configuration);
    const errors: string[] = [];
    const counts = { created: 0, updated: 0, deleted: 0 };
    for (const part of this.parts) {
      const want = new Set(enabled ? part.objects.map((o) => o.metadata.name) : []);
      if (enabled)
        for (const obj of part.objects) {
          try {
            const done = await this.apply(part, obj);
            if (done) counts[done]++;
          } catch (e) {
            errors.push(this.failed(part, obj.metadata.name, 'create or update', e));
          }
        }
      for (const cur of part.informer.list()) {
        if (want.has(cur.metadata.name) || cur.metadata.deletionTimestamp) continue;
        try {
          await this.o.client.delete(part.resource, undefined, cur.metadata.name, {
            preconditionUid: cur.metadata.uid,
          });
          counts.deleted++;
        } catch (e) {
          if (isNotFound(e) || isConflict(e)) continue; // gone, or another incarnation: its own event follows
          errors.push(this.failed(part, cur.metadata.name, 'delete', e));
        }
      }
    }
    if (counts.created || counts.updated || counts.deleted)
      this.o.log.info(
        enabled
          ? 'common instance types and preferences synchronized'
          : 'common instance types and preferences removed (commonInstancetypesDeployment.enabled is false)',
        { ...counts, enabled },
      );
    const error = errors.length
      ? errors.length > 1
        ? `${errors[0]} (and ${errors.length - 1} more)`
        : errors[0]
      : undefined;
    if (error !== this.lastError) {
      this.lastError = error;
      this.o.onErrorChange?.(error);
    }
    if (error) throw new Error(error);
  }

  /** Creates or updates one object; what it did, or undefined when it was up to date. */
  private async apply(part: BundlePart & { informer: Informer<BundleObject> }, want: BundleObject) {
    const { resource, kind } = part;
    const name = want.metadata.name;
    let cur = part.informer.get(undefined, name);
    if (!cur) {
      try {
        await this.o.client.create(resource, undefined, want);
        this.o.log.debug('created', { kind, name });
        return 'created' as const;
      } catch (e) {
        if (!isAlreadyExists(e)) throw e;
      }
      // not in the cache, yet there: the watch has not shown it yet, or it is not labelled as ours (a user's own)
      cur = await this.o.client.get<BundleObject>(resource, undefined, name);
      const labels = cur.metadata.labels ?? {};
      if (labels[MANAGED_BY_LABEL] !== MANAGED_BY_OPERATOR || labels[COMPONENT_LABEL] !== COMPONENT)
        this.o.log.warn(
          `${kind} ${name} exists without virt-operator's labels: taking it over, as upstream`,
          {
            kind,
            name,
          },
        );
    }
    if (upToDate(cur, want)) return undefined;
    try {
      await this.o.client.update(resource, {
        ...cur,
        metadata: { ...cur.metadata, labels: want.metadata.labels, annotations: want.metadata.annotations },
        spec: want.spec,
      });
    } catch (e) {
      if (!isConflict(e) && !isNotFound(e)) throw e;
      this.queue.addAfter(SYNC, 500); // changed or deleted meanwhile: another pass, once the cache has caught up
      return undefined;
    }
    this.o.log.info(`${kind} ${name} restored to the bundle's`, { kind, name });
    return 'updated' as const;
  }

  private failed(part: BundlePart, name: string, what: string, e: unknown): string {
    const reason = e instanceof Error ? e.message : String(e);
    this.o.log.error(`unable to ${what} ${part.kind} ${name}`, { kind: part.kind, name, reason });
    return `unable to ${what} ${part.kind} ${name}: ${reason}`;
  }
}
