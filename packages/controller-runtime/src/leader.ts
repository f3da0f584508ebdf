// Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection: the leader renews
// the Lease every retry period; another candidate takes it over once it was not renewed for the lease
// duration. Defaults are client-go's (and KubeVirt's): lease 15 s, renew deadline 10 s, retry 2 s.
import type { Logger } from '@kubevirt-ts/log';
import { LEASES, isAlreadyExists, isConflict, type KubeClient, type KubeObject } from './client.js';

export interface Lease extends KubeObject {
  spec?: {
    holderIdentity?: string;
    leaseDurationSeconds?: number;
    acquireTime?: string;
    renewTime?: string;
    leaseTransitions?: number;
  };
}

export interface LeaderElectorOptions {
  client: KubeClient;
  namespace: string;
  name: string;
  /** this candidate (e.g. the Pod name) */
  identity: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  onStartedLeading: () => void | Promise<void>;
  onStoppedLeading: () => void | Promise<void>;
  log?: Logger;
}

/** a Kubernetes MicroTime: RFC 3339 with microseconds */
const microTime = (ms: number): string => new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');

export class LeaderElector {
  private stopped = false;
  private leading = false;
  private lastRenew = 0;
  private timer: NodeJS.Timeout | undefined;
  private wake: (() => void) | undefined;
  private loop: Promise<void> | undefined;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;

  constructor(private readonly o: LeaderElectorOptions) {
    this.leaseDurationMs = o.leaseDurationMs ?? 15000;
    this.renewDeadlineMs = o.renewDeadlineMs ?? 10000;
    this.retryPeriodMs = o.retryPeriodMs ?? 2000;
  }

  isLeader(): boolean {
    return this.leading;
  }

  /** Starts campaigning (returns at once). */
  start(): void {
    this.loop ??= this.run();
  }

  /** Stops campaigning; a leader gives the Lease up so another candidate need not wait for it to expire. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.wake?.();
    await this.loop;
    if (this.leading) {
      this.leading = false;
      await this.release().catch(() => undefined);
      await this.o.onStoppedLeading();
    }
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      let ok = false;
      try {
        ok = await this.tryAcquireOrRenew();
      } catch (e) {
        this.o.log?.warn('leader election: lease request failed', {
          reason: e instanceof Error ? e.message : String(e),
        });
      }
      if (this.stopped) break;
      const now = Date.now();
      if (ok) {
        this.lastRenew = now;
        if (!this.leading) {
          this.leading = true;
          this.o.log?.info('leader election: became the leader', {
            lease: this.o.name,
            identity: this.o.identity,
          });
          await this.o.onStartedLeading();
        }
      } else if (this.leading && now - this.lastRenew > this.renewDeadlineMs) {
        this.leading = false;
        this.o.log?.warn('leader election: lost the lease', {
          lease: this.o.name,
          identity: this.o.identity,
        });
        await this.o.onStoppedLeading();
      }
      await new Promise<void>((r) => {
        this.wake = r;
        this.timer = setTimeout(r, this.retryPeriodMs);
      });
    }
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const { client, namespace, name, identity } = this.o;
    const now = Date.now();
    const durationSeconds = Math.ceil(this.leaseDurationMs / 1000);
    const lease = await client.getOrUndefined<Lease>(LEASES, namespace, name);
    if (!lease) {
      try {
        await client.create<Lease>(LEASES, namespace, {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name, namespace },
          spec: {
            holderIdentity: identity,
            leaseDurationSeconds: durationSeconds,
            acquireTime: microTime(now),
            renewTime: microTime(now),
            leaseTransitions: 0,
          },
        });
        return true;
      } catch (e) {
        if (isAlreadyExists(e)) return false;
        throw e;
      }
    }
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity ?? '';
    const renewed = spec.renewTime ? Date.parse(spec.renewTime) : 0;
    const expired = now > renewed + (spec.leaseDurationSeconds ?? durationSeconds) * 1000;
    if (holder && holder !== identity && !expired) return false;
    const takeover = holder !== identity;
    try {
      await client.update<Lease>(LEASES, {
        ...lease,
        spec: {
          ...spec,
          holderIdentity: identity,
          leaseDurationSeconds: durationSeconds,
          renewTime: microTime(now),
          acquireTime: takeover ? microTime(now) : spec.acquireTime,
          leaseTransitions: (spec.leaseTransitions ?? 0) + (takeover && holder ? 1 : 0),
        },
      });
      return true;
    } catch (e) {
      if (isConflict(e)) return false;
      throw e;
    }
  }

  private async release(): Promise<void> {
    const { client, namespace, name, identity } = this.o;
    const lease = await client.getOrUndefined<Lease>(LEASES, namespace, name);
    if (!lease || lease.spec?.holderIdentity !== identity) return;
    await client.update<Lease>(LEASES, {
      ...lease,
      spec: { ...lease.spec, holderIdentity: '', renewTime: microTime(Date.now()), leaseDurationSeconds: 1 },
    });
  }
}
