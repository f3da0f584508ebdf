import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { DEFAULT_MIGRATION_OPTIONS, migrationOptions } from './migration-roles.js';

const vmi = (migrationConfiguration?: object, annotations?: Record<string, string>): VirtualMachineInstance =>
  ({
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: 'vm', namespace: 'ns', uid: 'u1', annotations },
    spec: { domain: { devices: {} } },
    status: {
      migrationState: { migrationUid: 'm1', ...(migrationConfiguration && { migrationConfiguration }) },
    },
  }) as VirtualMachineInstance;

describe('migrationOptions (MigrateVirtualMachine options from the migration state)', () => {
  it("upstream's defaults without a migrationConfiguration", () => {
    expect(migrationOptions(vmi())).toEqual({
      Bandwidth: '0',
      ProgressTimeout: 150,
      CompletionTimeoutPerGiB: 150,
      UnsafeMigration: false,
      AllowAutoConverge: false,
      AllowPostCopy: false,
      ParallelMigrationThreads: null,
    });
    expect(migrationOptions(vmi())).toEqual(DEFAULT_MIGRATION_OPTIONS);
  });

  it('the cluster config virt-controller wrote at the hand-off (the renderer config shape), the threads annotation', () => {
    const cfg = {
      bandwidthPerMigration: '64Mi',
      completionTimeoutPerGiB: 30,
      progressTimeout: 60,
      allowAutoConverge: true,
      allowPostCopy: true,
      unsafeMigrationOverride: true,
      parallelMigrationsPerCluster: 5,
      parallelOutboundMigrationsPerNode: 2,
    };
    expect(migrationOptions(vmi(cfg, { 'kubevirt.io/multiThreadedQemuMigration': '4' }))).toEqual({
      Bandwidth: '64Mi',
      ProgressTimeout: 60,
      CompletionTimeoutPerGiB: 30,
      UnsafeMigration: true,
      AllowAutoConverge: true,
      AllowPostCopy: true,
      ParallelMigrationThreads: 4,
    });
  });
});
