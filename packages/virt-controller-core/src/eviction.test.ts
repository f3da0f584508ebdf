// The node-drain decisions without an API server: the eviction strategy x migratable table of the pod-eviction
// webhook, the cluster default, which VMIs migrate on eviction, the evacuation migration and its backoff.
import { describe, expect, it } from '@jest/globals';
import type { Vmi } from './common.js';
import {
  evacuationMessage,
  evictionStrategyOf,
  migratableOnEviction,
  strategyDecision,
  type EvictionStrategy,
} from './eviction.js';
import {
  EVACUATION_BACKOFF_MS,
  EVACUATION_MIGRATION_ANNOTATION,
  evacuationBackoffMs,
  evacuationMigration,
  isVmiMigrating,
} from './evacuation.js';
import type { Vmim } from './migration.js';

function vmi(strategy: EvictionStrategy | undefined, migratable: boolean | undefined): Vmi {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: 'v', namespace: 'ns', uid: 'u1' },
    spec: { domain: { devices: {} }, ...(strategy ? { evictionStrategy: strategy } : {}) },
    status: {
      phase: 'Running',
      nodeName: 'n1',
      conditions:
        migratable === undefined
          ? []
          : [{ type: 'LiveMigratable', status: migratable ? 'True' : 'False', reason: 'X' }],
    },
  } as unknown as Vmi;
}

describe('pod eviction decision (strategy x migratable)', () => {
  const notLiveMigratable = {
    action: 'deny',
    message: 'VMI v is configured with an eviction strategy but is not live-migratable',
  };
  it.each([
    // strategy, LiveMigratable condition, decision
    [undefined, true, { action: 'allow' }],
    [undefined, false, { action: 'allow' }],
    ['None', true, { action: 'allow' }],
    ['None', false, { action: 'allow' }],
    ['LiveMigrate', true, { action: 'mark' }],
    ['LiveMigrate', false, notLiveMigratable],
    ['LiveMigrate', undefined, notLiveMigratable],
    ['LiveMigrateIfPossible', true, { action: 'mark' }],
    ['LiveMigrateIfPossible', false, { action: 'allow' }],
    ['LiveMigrateIfPossible', undefined, { action: 'allow' }],
    ['External', true, { action: 'mark' }],
    ['External', false, { action: 'mark' }],
  ] as const)('%s, LiveMigratable %s -> %j', (strategy, migratable, want) => {
    expect(strategyDecision(vmi(strategy, migratable))).toEqual(want);
  });

  it("the cluster's strategy applies to a VMI without one; the VMI's own wins", () => {
    expect(evictionStrategyOf(vmi(undefined, true), 'LiveMigrate')).toBe('LiveMigrate');
    expect(strategyDecision(vmi(undefined, true), 'LiveMigrate')).toEqual({ action: 'mark' });
    expect(strategyDecision(vmi(undefined, false), 'LiveMigrateIfPossible')).toEqual({ action: 'allow' });
    expect(strategyDecision(vmi('None', true), 'LiveMigrate')).toEqual({ action: 'allow' });
    expect(evictionStrategyOf(vmi('External', true), 'LiveMigrate')).toBe('External');
  });

  it("upstream's message of a refused, marking eviction", () => {
    expect(evacuationMessage(vmi('LiveMigrate', true))).toBe('Eviction triggered evacuation of VMI "ns/v"');
  });

  it('migrates on eviction: LiveMigrate always, LiveMigrateIfPossible when migratable, never External or None', () => {
    expect(migratableOnEviction(vmi('LiveMigrate', false))).toBe(true);
    expect(migratableOnEviction(vmi('LiveMigrateIfPossible', true))).toBe(true);
    expect(migratableOnEviction(vmi('LiveMigrateIfPossible', false))).toBe(false);
    expect(migratableOnEviction(vmi('External', true))).toBe(false);
    expect(migratableOnEviction(vmi('None', true))).toBe(false);
    expect(migratableOnEviction(vmi(undefined, true))).toBe(false);
    expect(migratableOnEviction(vmi(undefined, true), 'LiveMigrate')).toBe(true);
  });
});

describe('evacuation migrations', () => {
  it('kubevirt-evacuation-<random>, annotated with the node, for the VMI', () => {
    expect(evacuationMigration(vmi('LiveMigrate', true), 'n1')).toEqual({
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstanceMigration',
      metadata: {
        generateName: 'kubevirt-evacuation-',
        namespace: 'ns',
        annotations: { [EVACUATION_MIGRATION_ANNOTATION]: 'n1' },
      },
      spec: { vmiName: 'v' },
    });
  });

  it('a VMI migrates between its migration state start and end', () => {
    const v = vmi('LiveMigrate', true);
    expect(isVmiMigrating(v)).toBe(false);
    v.status!.migrationState = { startTimestamp: '2025-01-01T00:00:00Z' } as never;
    expect(isVmiMigrating(v)).toBe(true);
    v.status!.migrationState = { startTimestamp: 'x', endTimestamp: 'y' } as never;
    expect(isVmiMigrating(v)).toBe(false);
  });

  const t0 = Date.parse('2025-01-01T00:00:00Z');
  const at = (ms: number) => new Date(t0 + ms).toISOString();
  const mig = (n: number, phase: string, evacuation = true): Vmim =>
    ({
      metadata: {
        name: `m${n}`,
        creationTimestamp: at(n * 1000),
        annotations: evacuation ? { [EVACUATION_MIGRATION_ANNOTATION]: 'n1' } : {},
      },
      spec: { vmiName: 'v' },
      status: {
        phase,
        phaseTransitionTimestamps:
          phase === 'Failed' ? [{ phase, phaseTransitionTimestamp: at(n * 1000 + 500) }] : [],
      },
    }) as unknown as Vmim;

  it('backoff: none without failures; 20 s after one failure, doubled per failure since the last success', () => {
    expect(evacuationBackoffMs([], t0)).toBe(0);
    expect(evacuationBackoffMs([mig(1, 'Succeeded')], t0)).toBe(0);
    // one failure at 1.5 s: 20 s from then
    expect(evacuationBackoffMs([mig(1, 'Failed')], t0 + 1500)).toBe(EVACUATION_BACKOFF_MS);
    expect(evacuationBackoffMs([mig(1, 'Failed')], t0 + 11_500)).toBe(10_000);
    expect(evacuationBackoffMs([mig(1, 'Failed')], t0 + 30_000)).toBe(0);
    // two failures, the newest at 2.5 s: 40 s from then
    expect(evacuationBackoffMs([mig(1, 'Failed'), mig(2, 'Failed')], t0 + 2500)).toBe(40_000);
    // a success between: only the failure after it counts
    expect(evacuationBackoffMs([mig(1, 'Failed'), mig(2, 'Succeeded'), mig(3, 'Failed')], t0 + 3500)).toBe(
      20_000,
    );
    // migrations not created by the evacuation controller do not count
    expect(evacuationBackoffMs([mig(1, 'Failed', false)], t0 + 1500)).toBe(0);
  });
});
