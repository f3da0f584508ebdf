import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { kubeVirtNotImplemented, parseManifests, type KubeVirtConfiguration } from '@kubevirt-ts/api';
import {
  CLAIM_IMAGE_DEFAULTS,
  gateEnabled,
  migrationConfiguration,
  MIGRATION_DEFAULTS,
  rendererConfigFromKubeVirt,
  renderLaunchPod,
  RenderError,
  type RendererConfig,
} from './index.js';

const deployOperator = fileURLToPath(new URL('../../../deploy/39-virt-operator.yaml', import.meta.url));
const base: RendererConfig = { launcherImage: 'x:1' };

function pathOf(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(RenderError);
    return (e as RenderError).path;
  }
  throw new Error('expected a RenderError');
}

describe('rendererConfigFromKubeVirt', () => {
  it("reads the default KubeVirt CR deploy/'s virt-operator creates, every field of which kubevirt-ts implements", () => {
    const [dep] = parseManifests(readFileSync(deployOperator, 'utf8')) as {
      spec: { template: { spec: { containers: { args: string[] }[] } } };
    }[];
    const arg = dep!.spec.template.spec.containers[0]!.args.find((a) =>
      a.startsWith('--default-configuration='),
    );
    const kv = {
      spec: { configuration: JSON.parse(arg!.slice(arg!.indexOf('=') + 1)) as KubeVirtConfiguration },
    };
    expect(kubeVirtNotImplemented(kv)).toEqual([]);
    const c = rendererConfigFromKubeVirt(kv.spec.configuration, { launcherImage: 'reg/virt-launcher:1' });
    expect(c.useEmulation).toBe(false);
    const pod = renderLaunchPod(
      {
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachineInstance',
        metadata: { name: 'a', namespace: 'b', uid: 'c' },
        spec: { domain: { resources: { requests: { memory: '64Mi' } } } },
      },
      c,
    );
    expect(pod.spec!.containers[0]!.image).toBe('reg/virt-launcher:1');
    // the profile virt-handler installs on each node (deploy/41-virt-handler.yaml: --seccomp-profile-dir)
    expect(pod.spec!.securityContext!.seccompProfile).toEqual({
      type: 'Localhost',
      localhostProfile: 'kubevirt-ts/kubevirt.json',
    });
  });

  it("maps upstream's fields onto the renderer's, over the flags' base", () => {
    expect(
      rendererConfigFromKubeVirt(
        {
          developerConfiguration: {
            useEmulation: true,
            featureGates: ['HostDisk'],
            cpuAllocationRatio: 4,
            memoryOvercommit: 150,
          },
          imagePullPolicy: 'Never',
          additionalGuestMemoryOverheadRatio: '1.5',
          seccompConfiguration: {
            virtualMachineInstanceProfile: { customProfile: { runtimeDefaultProfile: true } },
          },
        },
        { ...base, qemuTimeoutSeconds: 60 },
      ),
    ).toEqual({
      launcherImage: 'x:1',
      qemuTimeoutSeconds: 60,
      useEmulation: true,
      featureGates: ['HostDisk'],
      cpuAllocationRatio: 4,
      memoryOvercommit: 150,
      imagePullPolicy: 'Never',
      additionalOverheadRatio: 1.5,
      launcherSeccompProfile: 'RuntimeDefault',
    });
    expect(rendererConfigFromKubeVirt(undefined, base)).toEqual(base);
    expect(rendererConfigFromKubeVirt({}, base)).toEqual(base);
  });

  it("keeps feature gates it does not act on, as upstream does (upstream's e2e configuration turns on many)", () => {
    const gates = ['CPUManager', 'Sidecar', 'HostDisk', 'DecentralizedLiveMigration', 'Hostdisk'];
    const c = rendererConfigFromKubeVirt({ developerConfiguration: { featureGates: gates } }, base);
    expect(c.featureGates).toEqual(gates);
    expect(gateEnabled(c, 'HostDisk')).toBe(true);
    expect(
      gateEnabled(
        rendererConfigFromKubeVirt({ developerConfiguration: { featureGates: ['Hostdisk'] } }, base),
        'HostDisk',
      ),
    ).toBe(false);
  });

  const custom = (customProfile: object) => ({
    seccompConfiguration: { virtualMachineInstanceProfile: { customProfile } },
  });
  it.each([
    [
      { developerConfiguration: { featureGates: ['HostDisk', ''] } },
      'spec.configuration.developerConfiguration.featureGates[1]',
    ],
    [
      { developerConfiguration: { featureGates: ['HostDisk', 7] } },
      'spec.configuration.developerConfiguration.featureGates[1]',
    ],
    [
      { developerConfiguration: { memoryOvercommit: -5 } },
      'spec.configuration.developerConfiguration.memoryOvercommit',
    ],
    [
      { developerConfiguration: { lessPVCSpaceToleration: 101 } },
      'spec.configuration.developerConfiguration.lessPVCSpaceToleration',
    ],
    [
      { developerConfiguration: { lessPVCSpaceToleration: -1 } },
      'spec.configuration.developerConfiguration.lessPVCSpaceToleration',
    ],
    [
      { developerConfiguration: { lessPVCSpaceToleration: 2.5 } },
      'spec.configuration.developerConfiguration.lessPVCSpaceToleration',
    ],
    [
      { developerConfiguration: { minimumReservePVCBytes: -1 } },
      'spec.configuration.developerConfiguration.minimumReservePVCBytes',
    ],
    [
      { developerConfiguration: { minimumReservePVCBytes: '1Mi' } },
      'spec.configuration.developerConfiguration.minimumReservePVCBytes',
    ],
    [{ additionalGuestMemoryOverheadRatio: 'lots' }, 'spec.configuration.additionalGuestMemoryOverheadRatio'],
    [{ additionalGuestMemoryOverheadRatio: '0.5' }, 'spec.configuration.additionalGuestMemoryOverheadRatio'],
    [
      { migrations: { bandwidthPerMigration: 'fast' } },
      'spec.configuration.migrations.bandwidthPerMigration',
    ],
    [
      { migrations: { bandwidthPerMigration: '-1Mi' } },
      'spec.configuration.migrations.bandwidthPerMigration',
    ],
    [{ migrations: { progressTimeout: 0 } }, 'spec.configuration.migrations.progressTimeout'],
    [
      { migrations: { completionTimeoutPerGiB: 1.5 } },
      'spec.configuration.migrations.completionTimeoutPerGiB',
    ],
    [
      custom({ localhostProfile: '' }),
      'spec.configuration.seccompConfiguration.virtualMachineInstanceProfile.customProfile',
    ],
    [
      custom({ localhostProfile: '/etc/seccomp.json' }),
      'spec.configuration.seccompConfiguration.virtualMachineInstanceProfile.customProfile',
    ],
    [
      custom({ localhostProfile: '../../etc/x.json' }),
      'spec.configuration.seccompConfiguration.virtualMachineInstanceProfile.customProfile',
    ],
    [
      custom({ localhostProfile: 'a.json', runtimeDefaultProfile: true }),
      'spec.configuration.seccompConfiguration.virtualMachineInstanceProfile.customProfile',
    ],
  ])('rejects %j naming %s', (configuration, path) => {
    expect(pathOf(() => rendererConfigFromKubeVirt(configuration as never, base))).toBe(path);
  });

  it('needs the launcher image from the flags', () => {
    expect(pathOf(() => rendererConfigFromKubeVirt({}, { launcherImage: '' }))).toBe('config.launcherImage');
  });

  describe('lessPVCSpaceToleration and minimumReservePVCBytes: from the CR into the launcher Pod', () => {
    const computeArgs = (c: RendererConfig) => {
      const pod = renderLaunchPod(
        {
          apiVersion: 'kubevirt.io/v1',
          kind: 'VirtualMachineInstance',
          metadata: { name: 'a', namespace: 'b', uid: 'c' },
          spec: { domain: { resources: { requests: { memory: '64Mi' } } } },
        },
        c,
      );
      const compute = pod.spec!.containers.find((x) => x.name === 'compute')!;
      return [...(compute.command ?? []), ...(compute.args ?? [])];
    };
    const flag = (argv: string[], name: string) => {
      const i = argv.indexOf(name);
      return i < 0 ? undefined : argv[i + 1];
    };

    it('the CR values become the compute container flags', () => {
      const c = rendererConfigFromKubeVirt(
        { developerConfiguration: { lessPVCSpaceToleration: 25, minimumReservePVCBytes: 1048576 } },
        base,
      );
      expect(c).toMatchObject({ lessPVCSpaceToleration: 25, minimumReservePVCBytes: 1048576 });
      const argv = computeArgs(c);
      expect(flag(argv, '--less-pvc-space-toleration')).toBe('25');
      expect(flag(argv, '--minimum-reserve-pvc-bytes')).toBe('1048576');
      // 0 is a value, not "unset": no toleration, no reserve
      const zero = computeArgs(
        rendererConfigFromKubeVirt(
          { developerConfiguration: { lessPVCSpaceToleration: 0, minimumReservePVCBytes: 0 } },
          base,
        ),
      );
      expect(flag(zero, '--less-pvc-space-toleration')).toBe('0');
      expect(flag(zero, '--minimum-reserve-pvc-bytes')).toBe('0');
    });

    it("unset or upstream's defaults (10 %, 131072 bytes): no flags, the launcher's defaults are the same", () => {
      for (const dev of [{}, { lessPVCSpaceToleration: 10, minimumReservePVCBytes: 131072 }]) {
        const argv = computeArgs(rendererConfigFromKubeVirt({ developerConfiguration: dev }, base));
        expect(argv).not.toContain('--less-pvc-space-toleration');
        expect(argv).not.toContain('--minimum-reserve-pvc-bytes');
      }
      expect(CLAIM_IMAGE_DEFAULTS).toEqual({ lessPVCSpaceToleration: 10, minimumReservePVCBytes: 131072 });
    });

    it('a bad value set on the renderer config directly names the config field', () => {
      expect(pathOf(() => renderLaunchPod({} as never, { ...base, lessPVCSpaceToleration: 100.5 }))).toBe(
        'config.lessPVCSpaceToleration',
      );
      expect(pathOf(() => renderLaunchPod({} as never, { ...base, minimumReservePVCBytes: NaN }))).toBe(
        'config.minimumReservePVCBytes',
      );
    });
  });

  it("reads upstream's migration options (spec.configuration.migrations) with upstream's defaults", () => {
    expect(migrationConfiguration(rendererConfigFromKubeVirt({}, base))).toEqual({
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
    const migrations = {
      bandwidthPerMigration: '64Mi',
      completionTimeoutPerGiB: 30,
      progressTimeout: 60,
      allowAutoConverge: true,
      allowPostCopy: true,
      unsafeMigrationOverride: true,
      parallelMigrationsPerCluster: 3,
      parallelOutboundMigrationsPerNode: 1,
    };
    expect(migrationConfiguration(rendererConfigFromKubeVirt({ migrations }, base))).toEqual(migrations);
  });
});

describe('kubeVirtNotImplemented', () => {
  it("lists the set fields kubevirt-ts does not implement, not the empty ones of upstream's own CR", () => {
    expect(
      kubeVirtNotImplemented({
        spec: {
          certificateRotateStrategy: {},
          customizeComponents: {},
          workloadUpdateStrategy: {},
          imagePullPolicy: 'IfNotPresent',
          configuration: {
            developerConfiguration: {
              featureGates: ['HostDisk', 'CPUManager'],
              useEmulation: true,
              logVerbosity: { virtLauncher: 4 },
            },
            network: { defaultNetworkInterface: 'bridge', binding: { sidecar: { sidecarImage: 'x' } } },
            migrations: { allowPostCopy: true, nodeDrainTaintKey: 'x' },
            vmRolloutStrategy: 'LiveUpdate',
            evictionStrategy: 'LiveMigrate',
          },
          infra: { replicas: 3 },
        },
      }),
    ).toEqual([
      'spec.configuration.developerConfiguration.logVerbosity',
      'spec.configuration.network.binding',
      'spec.configuration.migrations.nodeDrainTaintKey',
      'spec.configuration.vmRolloutStrategy=LiveUpdate',
      'spec.infra',
      'spec.configuration.developerConfiguration.featureGates[1]=CPUManager',
    ]);
    expect(kubeVirtNotImplemented({ spec: { imagePullPolicy: 'Always' } })).toEqual(['spec.imagePullPolicy']);
    expect(kubeVirtNotImplemented({})).toEqual([]);
  });
});
