// The launcher Pod that @kubevirt-ts/renderer writes must start this launcher: its compute command parses
// with the in-Pod flags (the launcher refuses unknown flags), means what the renderer intended, and every
// directory the launcher uses inside the Pod is on one of the compute container's volume mounts.
import path from 'node:path';
import type { KubeVirtConfiguration, VirtualMachineInstance } from '@kubevirt-ts/api';
import { setVirtualMachineInstanceDefaults } from '@kubevirt-ts/api';
import { resolveClaimImageOptions } from '@kubevirt-ts/disks';
import {
  CLAIM_IMAGE_DEFAULTS,
  renderLaunchPod,
  rendererConfigFromKubeVirt,
  type RendererConfig,
} from '@kubevirt-ts/renderer';
import { parseLauncherFlags } from './flags.js';
import { podConfig } from './pod-config.js';

function vmi(grace?: number): VirtualMachineInstance {
  return setVirtualMachineInstanceDefaults({
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: 'contract', namespace: 'ns1', uid: 'c0ffee00-0000-4000-8000-000000000001' },
    spec: {
      ...(grace !== undefined ? { terminationGracePeriodSeconds: grace } : {}),
      domain: {
        resources: { requests: { memory: '64Mi' } },
        devices: { disks: [{ name: 'root', disk: { bus: 'virtio' } }] },
      },
      volumes: [{ name: 'root', containerDisk: { image: 'example.org/disk:1' } }],
    },
  } as unknown as VirtualMachineInstance);
}

function compute(v: VirtualMachineInstance, config: RendererConfig) {
  const c = renderLaunchPod(v, config).spec!.containers.find((x) => x.name === 'compute')!;
  return { argv: [...(c.command ?? []), ...(c.args ?? [])], mounts: c.volumeMounts ?? [] };
}

const under = (dir: string, mount: string): boolean =>
  dir === mount || !path.relative(mount, dir).startsWith('..');

describe('renderer -> launcher contract', () => {
  it.each([
    ['defaults', undefined, { launcherImage: 'x' }],
    [
      'emulation, keep after failure, grace 90 s',
      90,
      { launcherImage: 'x', useEmulation: true, keepAfterFailure: true },
    ],
  ] as const)('the rendered compute command parses as in-Pod flags (%s)', (_what, grace, config) => {
    const v = vmi(grace);
    const { argv } = compute(v, config as RendererConfig);
    // tini as PID 1 (it reaps), then the wrapper, like upstream's virt-launcher-monitor
    expect(argv.slice(0, 5)).toEqual(['/usr/bin/tini', '-g', '--', '/usr/bin/virt-launcher', 'monitor']);
    const flags = parseLauncherFlags(argv.slice(5));
    expect(flags).toMatchObject({
      name: 'contract',
      namespace: 'ns1',
      uid: v.metadata!.uid,
      gracePeriodSeconds: v.spec.terminationGracePeriodSeconds ?? 30, // the renderer's default when unset
      qemuTimeoutMs: 240_000,
      allowEmulation: Boolean((config as RendererConfig).useEmulation),
      keepAfterFailure: Boolean((config as RendererConfig).keepAfterFailure),
      hookSidecars: 0,
    });
    // podConfig checks the disk dirs against the converter's pod layout (throws when they differ)
    expect(() => podConfig(flags)).not.toThrow();
  });

  it("the KubeVirt CR's lessPVCSpaceToleration and minimumReservePVCBytes reach the disks options; unset, both sides' defaults agree", () => {
    const claimImage = (configuration: KubeVirtConfiguration) => {
      const { argv } = compute(vmi(), rendererConfigFromKubeVirt(configuration, { launcherImage: 'x' }));
      return podConfig(parseLauncherFlags(argv.slice(argv.indexOf('monitor') + 1))).claimImage;
    };
    expect(
      claimImage({ developerConfiguration: { lessPVCSpaceToleration: 0, minimumReservePVCBytes: 4194304 } }),
    ).toEqual({ lessPVCSpaceToleration: 0, minimumReservePVCBytes: 4194304 });
    expect(claimImage({ developerConfiguration: { lessPVCSpaceToleration: 55 } })).toEqual({
      lessPVCSpaceToleration: 55,
    });
    // no flags: the disks package's defaults, which are the renderer's (and upstream's)
    expect(claimImage({})).toEqual({});
    expect(resolveClaimImageOptions({})).toEqual(CLAIM_IMAGE_DEFAULTS);
  });

  it('every directory the launcher uses in the Pod is on a volume mount of the compute container', () => {
    const { argv, mounts } = compute(vmi(), { launcherImage: 'x' });
    const flags = parseLauncherFlags(argv.slice(argv.indexOf('monitor') + 1));
    const cfg = podConfig(flags);
    const dirs = {
      sockets: cfg.socketsDir,
      notify: cfg.notifyDir,
      libvirt: cfg.libvirtBaseDir,
      private: flags.privateDir,
      ephemeralDisks: flags.ephemeralDiskDir,
      containerDisks: flags.containerDiskDir,
    };
    const missing = Object.entries(dirs).filter(([, d]) => !mounts.some((m) => under(d, m.mountPath)));
    expect(missing).toEqual([]);
  });
});
