import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseManifests } from '@kubevirt-ts/api';
import {
  migrationConfiguration,
  MIGRATION_DEFAULTS,
  rendererConfigFromData,
  renderLaunchPod,
  RenderError,
} from './index.js';

const deployConfig = fileURLToPath(new URL('../../../deploy/30-config.yaml', import.meta.url));

describe('rendererConfigFromData', () => {
  it('reads the committed config object in deploy/', () => {
    const [cm] = parseManifests(readFileSync(deployConfig, 'utf8')) as {
      kind: string;
      data: Record<string, string>;
    }[];
    expect(cm!.kind).toBe('ConfigMap');
    const c = rendererConfigFromData(cm!.data);
    expect(c.launcherImage).toMatch(/virt-launcher:/);
    expect(c.useEmulation).toBe(false);
    expect(c.cpuAllocationRatio).toBe(10);
    const pod = renderLaunchPod(
      {
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachineInstance',
        metadata: { name: 'a', namespace: 'b', uid: 'c' },
        spec: { domain: { resources: { requests: { memory: '64Mi' } } } },
      },
      c,
    );
    expect(pod.spec!.containers[0]!.image).toBe(c.launcherImage);
    // the profile virt-handler installs on each node (deploy/41-virt-handler.yaml: --seccomp-profile-dir)
    expect(pod.spec!.securityContext!.seccompProfile).toEqual({
      type: 'Localhost',
      localhostProfile: 'kubevirt-ts/kubevirt.json',
    });
  });

  it('converts types and parses JSON arrays', () => {
    expect(
      rendererConfigFromData({
        launcherImage: 'x:1',
        useEmulation: 'true',
        memoryOvercommit: '150',
        launcherCommand: '["/bin/launcher","--v"]',
      }),
    ).toEqual({
      launcherImage: 'x:1',
      useEmulation: true,
      memoryOvercommit: 150,
      launcherCommand: ['/bin/launcher', '--v'],
    });
  });

  it.each([
    [{ launcherImage: 'x', useEmulation: 'yes' }, 'data.useEmulation'],
    [{ launcherImage: 'x', cpuAllocationRatio: 'ten' }, 'data.cpuAllocationRatio'],
    [{ launcherImage: 'x', launcherCommand: '/bin/sh' }, 'data.launcherCommand'],
    [{ launcherImage: 'x', colour: 'blue' }, 'data.colour'],
    [{}, 'config.launcherImage'],
    [{ launcherImage: 'x', memoryOvercommit: '-5' }, 'config.memoryOvercommit'],
    [{ launcherImage: 'x', bandwidthPerMigration: 'fast' }, 'config.bandwidthPerMigration'],
    [{ launcherImage: 'x', bandwidthPerMigration: '-1Mi' }, 'config.bandwidthPerMigration'],
    [{ launcherImage: 'x', progressTimeout: '0' }, 'config.progressTimeout'],
    [{ launcherImage: 'x', completionTimeoutPerGiB: '1.5' }, 'config.completionTimeoutPerGiB'],
    [{ launcherImage: 'x', allowPostCopy: 'maybe' }, 'data.allowPostCopy'],
    [{ launcherImage: 'x', launcherSeccompProfile: '' }, 'config.launcherSeccompProfile'],
    [{ launcherImage: 'x', launcherSeccompProfile: '/etc/seccomp.json' }, 'config.launcherSeccompProfile'],
    [{ launcherImage: 'x', launcherSeccompProfile: '../../etc/x.json' }, 'config.launcherSeccompProfile'],
    [{ launcherImage: 'x', launcherSeccompProfile: 'a//b.json' }, 'config.launcherSeccompProfile'],
  ])('rejects %j naming %s', (data, path) => {
    try {
      rendererConfigFromData(data as Record<string, string>);
    } catch (e) {
      expect(e).toBeInstanceOf(RenderError);
      expect((e as RenderError).path).toBe(path);
      return;
    }
    throw new Error('expected an error');
  });

  it("reads upstream's migration options (spec.configuration.migrations) with upstream's defaults", () => {
    expect(migrationConfiguration(rendererConfigFromData({ launcherImage: 'x' }))).toEqual({
      bandwidthPerMigration: '0Mi',
      completionTimeoutPerGiB: 150,
      progressTimeout: 150,
      allowAutoConverge: false,
      allowPostCopy: false,
      unsafeMigrationOverride: false,
      parallelMigrationsPerCluster: 5,
      parallelOutboundMigrationsPerNode: 2,
    });
    expect(migrationConfiguration(undefined)).toEqual(MIGRATION_DEFAULTS);
    const c = rendererConfigFromData({
      launcherImage: 'x',
      bandwidthPerMigration: '64Mi',
      completionTimeoutPerGiB: '30',
      progressTimeout: '60',
      allowAutoConverge: 'true',
      allowPostCopy: 'true',
      unsafeMigrationOverride: 'true',
      parallelMigrationsPerCluster: '3',
      parallelOutboundMigrationsPerNode: '1',
    });
    expect(migrationConfiguration(c)).toEqual({
      bandwidthPerMigration: '64Mi',
      completionTimeoutPerGiB: 30,
      progressTimeout: 60,
      allowAutoConverge: true,
      allowPostCopy: true,
      unsafeMigrationOverride: true,
      parallelMigrationsPerCluster: 3,
      parallelOutboundMigrationsPerNode: 1,
    });
  });
});
