// Unit tests: one block per rendering rule (README.md lists the rules).
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { setVirtualMachineInstanceDefaults, type VirtualMachineInstance } from '@kubevirt-ts/api';
import { toDomain } from '@kubevirt-ts/converter';
type V1Networks = NonNullable<VirtualMachineInstance['spec']['networks']>;
import {
  renderLaunchPod,
  renderProvisioningPod,
  rendererConfigFromKubeVirt,
  memoryOverhead,
  RenderError,
  OVERHEAD,
  DEVICE_KVM,
  DEVICE_TUN,
  DEVICE_VHOST_NET,
  DEVICE_VHOST_VSOCK,
  type RendererConfig,
} from './index.js';

const Mi = 1024 * 1024;
const IMAGE = 'registry.example.com/kubevirt-ts/virt-launcher:0.1.0';
const cfg = (c: Partial<RendererConfig> = {}): RendererConfig => ({ launcherImage: IMAGE, ...c });

type Spec = Partial<VirtualMachineInstance['spec']>;
function vmi(
  spec: Spec = {},
  meta: Partial<VirtualMachineInstance['metadata']> = {},
): VirtualMachineInstance {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: 'testvm', namespace: 'ns1', uid: 'uid-1234', ...meta },
    spec: {
      ...spec,
      domain: { resources: { requests: { memory: '128Mi' } }, ...(spec.domain ?? {}) },
    },
  };
}

const compute = (p: V1Pod): V1Container => p.spec!.containers.find((c) => c.name === 'compute')!;
const render = (v: VirtualMachineInstance, c: Partial<RendererConfig> = {}): V1Pod =>
  renderLaunchPod(v, cfg(c));
const flagValue = (cmd: string[], flag: string): string | undefined => {
  const i = cmd.indexOf(flag);
  return i < 0 ? undefined : cmd[i + 1];
};
const bytes = (q: string): number => {
  const m = /^(\d+)(Mi)?$/.exec(q);
  if (!m) throw new Error(`unexpected quantity ${q}`);
  return Number(m[1]) * (m[2] ? Mi : 1);
};
function renderError(fn: () => unknown): RenderError {
  try {
    fn();
  } catch (e) {
    if (e instanceof RenderError) return e;
    throw e;
  }
  throw new Error('expected a RenderError');
}

describe('compute container and launcher command', () => {
  it('runs the launcher wrapper with upstream-style flags', () => {
    const c = compute(render(vmi()));
    expect(c.image).toBe(IMAGE);
    expect(c.command!.slice(0, 5)).toEqual([
      '/usr/bin/tini',
      '-g',
      '--',
      '/usr/bin/virt-launcher',
      'monitor',
    ]);
    expect(flagValue(c.command!, '--name')).toBe('testvm');
    expect(flagValue(c.command!, '--namespace')).toBe('ns1');
    expect(flagValue(c.command!, '--uid')).toBe('uid-1234');
    expect(flagValue(c.command!, '--qemu-timeout')).toBe('240s');
    expect(flagValue(c.command!, '--kubevirt-share-dir')).toBe('/var/run/kubevirt');
    expect(flagValue(c.command!, '--ephemeral-disk-dir')).toBe('/var/run/kubevirt-ephemeral-disks');
    expect(flagValue(c.command!, '--container-disk-dir')).toBe('/var/run/kubevirt/container-disks');
    expect(flagValue(c.command!, '--hook-sidecars')).toBe('0');
    expect(c.command).not.toContain('--allow-emulation');
    expect(c.command).not.toContain('--keep-after-failure');
  });

  it('passes --allow-emulation and --keep-after-failure when configured', () => {
    const c = compute(render(vmi(), { useEmulation: true, keepAfterFailure: true, qemuTimeoutSeconds: 90 }));
    expect(c.command).toContain('--allow-emulation');
    expect(c.command).toContain('--keep-after-failure');
    expect(flagValue(c.command!, '--qemu-timeout')).toBe('90s');
  });

  it('is deterministic (no jitter, no random names)', () => {
    expect(render(vmi())).toEqual(render(vmi()));
  });
});

describe('memory overhead formula', () => {
  it('adds up launcher, monitor, libvirtd, QEMU, per-vCPU, IOThread, interface, video and page tables (no virtlogd)', () => {
    const o = memoryOverhead(vmi(), { arch: 'amd64', additionalOverheadRatio: 1 });
    expect(o.parts).toEqual({
      launcher: 45 * Mi,
      launcherMonitor: 2 * Mi,
      libvirtd: 16 * Mi,
      qemu: 30 * Mi,
      pageTables: (128 * Mi) / 512,
      vcpus: 8 * Mi,
      ioThreads: 8 * Mi,
      disks: 0,
      interfaces: 1 * Mi, // the auto-attached pod interface
      video: 32 * Mi,
    });
    // 142 MiB + 256 KiB, rounded up to a whole MiB
    expect(o.bytes).toBe(143 * Mi);
  });

  it('adds the TCG translation cache when emulating: the size the converter caps it at', () => {
    const kvm = memoryOverhead(vmi(), { arch: 'amd64', additionalOverheadRatio: 1, useEmulation: false });
    const tcg = memoryOverhead(vmi(), { arch: 'amd64', additionalOverheadRatio: 1, useEmulation: true });
    expect(kvm.parts.tcgTranslationCache).toBeUndefined();
    // an eighth of the guest's memory, at least 16 MiB, at most 1 GiB
    expect(tcg.parts.tcgTranslationCache).toBe(16 * Mi);
    expect(tcg.bytes - kvm.bytes).toBe(16 * Mi);
    const sized = (memory: string) =>
      memoryOverhead(vmi({ domain: { resources: { requests: { memory } } } }), {
        arch: 'amd64',
        additionalOverheadRatio: 1,
        useEmulation: true,
      }).parts.tcgTranslationCache;
    expect(sized('2Gi')).toBe(256 * Mi);
    expect(sized('1001Mi')).toBe(126 * Mi);
    expect(sized('16Gi')).toBe(1024 * Mi);
    // and the converter writes that cap into the emulated domain
    const domain = toDomain(vmi({ domain: { resources: { requests: { memory: '2Gi' } } } }) as never, {
      allowEmulation: true,
      kvmAvailable: false,
    });
    expect(domain.features?.tcg).toEqual({ tbCache: sized('2Gi') });
  });

  it('grows with vCPUs, disks, interfaces, dedicated IOThreads, TPM; drops video when graphics are off', () => {
    const base = memoryOverhead(vmi(), { arch: 'amd64', additionalOverheadRatio: 1 }).parts;
    const big = memoryOverhead(
      vmi({
        domain: {
          resources: { requests: { memory: '1Gi' } },
          cpu: { cores: 2, sockets: 2, threads: 1 },
          devices: {
            autoattachGraphicsDevice: false,
            tpm: {},
            disks: [{ name: 'a', dedicatedIOThread: true }, { name: 'b' }, { name: 'c' }],
            interfaces: [
              { name: 'default', masquerade: {} },
              { name: 'second', bridge: {} },
            ],
          },
        },
      }),
      { arch: 'amd64', additionalOverheadRatio: 1 },
    ).parts;
    expect(big.vcpus).toBe(4 * OVERHEAD.perVcpu);
    expect(big.ioThreads).toBe(2 * OVERHEAD.perIOThread); // the shared one + one dedicated
    expect(big.disks).toBe(3 * OVERHEAD.perDisk);
    expect(big.interfaces).toBe(2 * OVERHEAD.perInterface);
    expect(big.tpm).toBe(OVERHEAD.tpm);
    expect(big.video).toBeUndefined();
    expect(big.pageTables).toBe((1024 * Mi) / 512);
    expect(base.tpm).toBeUndefined();
  });

  it('counts auto IOThreads per disk, capped at twice the vCPUs', () => {
    const disks = Array.from({ length: 5 }, (_, i) => ({ name: `d${i}` }));
    const o = memoryOverhead(vmi({ domain: { ioThreadsPolicy: 'auto', devices: { disks } } }), {
      arch: 'amd64',
      additionalOverheadRatio: 1,
    });
    expect(o.parts.ioThreads).toBe(2 * OVERHEAD.perIOThread); // 1 vCPU -> at most 2
  });

  it('adds arm64 pflash, VFIO and Guaranteed-QoS headroom, then applies the ratio', () => {
    const v = vmi({
      domain: {
        resources: { requests: { memory: '1Gi', cpu: '1' }, limits: { memory: '1Gi', cpu: '1' } },
        devices: { gpus: [{ name: 'gpu1', deviceName: 'nvidia.com/GP100' }] },
      },
    });
    const o = memoryOverhead(v, { arch: 'arm64', additionalOverheadRatio: 1 });
    expect(o.parts.arm64Pflash).toBe(128 * Mi);
    expect(o.parts.vfio).toBe(1024 * Mi);
    expect(o.parts.guaranteedHeadroom).toBe(100 * Mi);
    const scaled = memoryOverhead(v, { arch: 'arm64', additionalOverheadRatio: 2 });
    expect(scaled.bytes).toBe(Math.ceil((2 * Object.values(o.parts).reduce((a, b) => a + b)) / Mi) * Mi);
  });
});

describe('resources', () => {
  it('requests the VMI memory plus the overhead, and 1/10 CPU per vCPU by default', () => {
    const r = compute(render(vmi())).resources!;
    expect(r.requests!.memory).toBe(`${128 + 143}Mi`);
    expect(compute(render(vmi(), { useEmulation: true })).resources!.requests!.memory).toBe(
      `${128 + 143 + 16}Mi`,
    );
    expect(r.requests!.cpu).toBe('100m');
    expect(r.requests!['ephemeral-storage']).toBe('50M');
    expect(r.limits!.memory).toBeUndefined();
    expect(r.limits!.cpu).toBeUndefined();
  });

  it('takes CPU from the topology and the allocation ratio', () => {
    const r = compute(
      render(vmi({ domain: { cpu: { cores: 3, sockets: 2 } } }), { cpuAllocationRatio: 4 }),
    ).resources!;
    expect(r.requests!.cpu).toBe('1500m');
  });

  it('passes CPU requests and limits through and adds the overhead to the memory limit', () => {
    const v = vmi({
      domain: {
        resources: { requests: { memory: '1Gi', cpu: '500m' }, limits: { memory: '2Gi', cpu: '2' } },
      },
    });
    const r = compute(render(v)).resources!;
    const ov = memoryOverhead(v, { arch: 'amd64', additionalOverheadRatio: 1 }).bytes;
    expect(r.requests!.cpu).toBe('500m');
    expect(r.limits!.cpu).toBe('2');
    expect(bytes(r.requests!.memory!)).toBe(1024 * Mi + ov);
    expect(bytes(r.limits!.memory!)).toBe(2048 * Mi + ov);
  });

  it('leaves the overhead out of the request with overcommitGuestOverhead, not out of the limit', () => {
    const v = vmi({
      domain: {
        resources: { requests: { memory: '1Gi' }, limits: { memory: '1Gi' }, overcommitGuestOverhead: true },
      },
    });
    const r = compute(render(v)).resources!;
    expect(r.requests!.memory).toBe('1024Mi');
    expect(bytes(r.limits!.memory!)).toBeGreaterThan(1024 * Mi);
  });

  it('uses the memory limit as request when only a limit is given', () => {
    const v = vmi({ domain: { resources: { limits: { memory: '512Mi' } } } });
    const r = compute(render(v)).resources!;
    expect(r.requests!.memory).toBe(r.limits!.memory);
  });

  it('applies memory overcommit to the guest memory when no request is given', () => {
    const v = vmi({ domain: { resources: {}, memory: { guest: '1500Mi' } } });
    const ov = memoryOverhead(v, { arch: 'amd64', additionalOverheadRatio: 1 }).bytes;
    const r = compute(render(v, { memoryOvercommit: 150 })).resources!;
    expect(bytes(r.requests!.memory!)).toBe(1000 * Mi + ov);
  });

  it('dedicated CPUs: requests == limits == vCPUs (+1 isolated emulator thread), memory limit == request', () => {
    const v = vmi({
      domain: { cpu: { cores: 2, dedicatedCpuPlacement: true, isolateEmulatorThread: true } },
    });
    const r = compute(render(v)).resources!;
    expect(r.requests!.cpu).toBe('3');
    expect(r.limits!.cpu).toBe('3');
    expect(r.limits!.memory).toBe(r.requests!.memory);
  });

  it('hugepages: guest RAM from hugepages-<size>, memory covers only the overhead', () => {
    const v = vmi({
      domain: { resources: { requests: { memory: '1Gi' } }, memory: { hugepages: { pageSize: '2Mi' } } },
    });
    const r = compute(render(v)).resources!;
    const ov = memoryOverhead(v, { arch: 'amd64', additionalOverheadRatio: 1 }).bytes;
    expect(r.requests!['hugepages-2Mi']).toBe('1024Mi');
    expect(r.limits!['hugepages-2Mi']).toBe('1024Mi');
    expect(bytes(r.requests!.memory!)).toBe(ov);
  });

  it('passes other requested resources through and adds the launcher ephemeral storage', () => {
    const v = vmi({
      domain: {
        resources: { requests: { memory: '128Mi', 'ephemeral-storage': '1G', 'example.com/foo': '2' } },
      },
    });
    const r = compute(render(v)).resources!;
    expect(r.requests!['ephemeral-storage']).toBe(String(1e9 + 50e6));
    expect(r.requests!['example.com/foo']).toBe('2');
  });

  it('names the field of a bad quantity', () => {
    const e = renderError(() =>
      render(vmi({ domain: { resources: { requests: { memory: '12 apples' } } } })),
    );
    expect(e.path).toBe('spec.domain.resources.requests.memory');
  });

  it('says where the guest memory is missing', () => {
    const e = renderError(() => render(vmi({ domain: { resources: {} } })));
    expect(e.path).toBe('spec.domain.resources.requests.memory');
  });
});

describe('device-plugin resources', () => {
  it('asks for kvm unless emulation is allowed', () => {
    expect(compute(render(vmi())).resources!.limits![DEVICE_KVM]).toBe('1');
    expect(compute(render(vmi(), { useEmulation: true })).resources!.limits![DEVICE_KVM]).toBeUndefined();
  });

  it('asks for tun for a masquerade/bridge pod interface, vhost-net for virtio without emulation', () => {
    const v = vmi({
      domain: { devices: { interfaces: [{ name: 'default', masquerade: {} }] } },
      networks: [{ name: 'default', pod: {} }],
    });
    const l = compute(render(v)).resources!.limits!;
    expect(l[DEVICE_TUN]).toBe('1');
    expect(l[DEVICE_VHOST_NET]).toBe('1');
    const e = compute(render(v, { useEmulation: true })).resources!.limits!;
    expect(e[DEVICE_VHOST_NET]).toBeUndefined();
    expect(e[DEVICE_TUN]).toBe('1');
  });

  it('auto-attached pod interface counts as masquerade virtio', () => {
    const l = compute(render(vmi())).resources!.limits!;
    expect(l[DEVICE_TUN]).toBe('1');
    expect(l[DEVICE_VHOST_NET]).toBe('1');
  });

  it('no network devices when the VMI has no interface; no vhost-net for e1000 only', () => {
    const none = compute(render(vmi({ domain: { devices: { autoattachPodInterface: false } } }))).resources!
      .limits!;
    expect(none[DEVICE_TUN]).toBeUndefined();
    expect(none[DEVICE_VHOST_NET]).toBeUndefined();
    const e1000 = vmi({
      domain: { devices: { interfaces: [{ name: 'default', bridge: {}, model: 'e1000' }] } },
      networks: [{ name: 'default', pod: {} }],
    });
    expect(compute(render(e1000)).resources!.limits![DEVICE_VHOST_NET]).toBeUndefined();
  });

  it('asks for vhost-vsock and for each GPU / host device', () => {
    const v = vmi({
      domain: {
        devices: {
          autoattachVSOCK: true,
          gpus: [
            { name: 'g1', deviceName: 'nvidia.com/GP100' },
            { name: 'g2', deviceName: 'nvidia.com/GP100' },
          ],
          hostDevices: [{ name: 'h1', deviceName: 'intel.com/qat' }],
        },
      },
    });
    const l = compute(render(v)).resources!.limits!;
    expect(l[DEVICE_VHOST_VSOCK]).toBe('1');
    expect(l['nvidia.com/GP100']).toBe('2');
    expect(l['intel.com/qat']).toBe('1');
  });
});

describe('volumes', () => {
  const mountOf = (p: V1Pod, name: string) => compute(p).volumeMounts!.find((m) => m.name === name);
  const volOf = (p: V1Pod, name: string) => p.spec!.volumes!.find((v) => v.name === name);

  it('always has the launcher emptyDirs, mounted at upstream paths', () => {
    const p = render(vmi());
    for (const n of [
      'private',
      'public',
      'sockets',
      'virt-bin-share-dir',
      'libvirt-runtime',
      'ephemeral-disks',
      'container-disks',
      'hotplug-disks',
    ]) {
      expect(volOf(p, n)).toEqual({ name: n, emptyDir: {} });
    }
    expect(mountOf(p, 'private')!.mountPath).toBe('/var/run/kubevirt-private');
    expect(mountOf(p, 'public')!.mountPath).toBe('/var/run/kubevirt');
    expect(mountOf(p, 'sockets')!.mountPath).toBe('/var/run/kubevirt/sockets');
    expect(mountOf(p, 'libvirt-runtime')!.mountPath).toBe('/var/run/libvirt');
    expect(mountOf(p, 'ephemeral-disks')!.mountPath).toBe('/var/run/kubevirt-ephemeral-disks');
    expect(mountOf(p, 'container-disks')).toEqual({
      name: 'container-disks',
      mountPath: '/var/run/kubevirt/container-disks',
      mountPropagation: 'HostToContainer',
    });
    expect(mountOf(p, 'hotplug-disks')!.mountPropagation).toBe('HostToContainer');
    expect(volOf(p, 'nvram')).toBeUndefined();
  });

  it('mounts PVCs where the converter expects disk.img; Block claims become devices', () => {
    const v = vmi({
      volumes: [
        { name: 'fs', persistentVolumeClaim: { claimName: 'claim-fs' } },
        { name: 'blk', persistentVolumeClaim: { claimName: 'claim-blk', readOnly: true } },
        { name: 'dv', dataVolume: { name: 'my-dv' } },
        { name: 'eph', ephemeral: { persistentVolumeClaim: { claimName: 'golden' } } },
        { name: 'hot', persistentVolumeClaim: { claimName: 'later', hotpluggable: true } },
      ],
    });
    // the volume modes virt-controller read of the claims (a DataVolume's claim has its name)
    const p = renderLaunchPod(v, cfg(), {
      'claim-blk': { volumeMode: 'Block' },
      'claim-fs': { volumeMode: 'Filesystem' },
      'my-dv': { volumeMode: 'Block' },
      later: { volumeMode: 'Block' },
    });
    expect(volOf(p, 'fs')).toEqual({ name: 'fs', persistentVolumeClaim: { claimName: 'claim-fs' } });
    expect(mountOf(p, 'fs')!.mountPath).toBe('/var/run/kubevirt-private/vmi-disks/fs');
    expect(compute(p).volumeDevices).toEqual([
      { name: 'blk', devicePath: '/dev/blk' },
      { name: 'dv', devicePath: '/dev/dv' },
    ]);
    expect(mountOf(p, 'blk')).toBeUndefined();
    expect(mountOf(p, 'dv')).toBeUndefined();
    expect(volOf(p, 'dv')!.persistentVolumeClaim!.claimName).toBe('my-dv');
    // claims the caller says nothing of (no API server: tools, benchmarks) are mounted as filesystems
    const bare = render(v);
    expect(compute(bare).volumeDevices ?? []).toEqual([]);
    expect(mountOf(bare, 'blk')!.mountPath).toBe('/var/run/kubevirt-private/vmi-disks/blk');
    expect(volOf(p, 'eph')!.persistentVolumeClaim).toEqual({ claimName: 'golden', readOnly: true });
    expect(volOf(p, 'hot')).toBeUndefined(); // hotplugged volumes come through hotplug-disks
  });

  it('hostDisk: the image folder from the host, created for DiskOrCreate (HostDisk gate on)', () => {
    const p = render(
      vmi({
        volumes: [
          { name: 'host', hostDisk: { path: '/data/disk.img', type: 'DiskOrCreate', capacity: '1Gi' } },
        ],
      }),
      { featureGates: ['HostDisk'] },
    );
    expect(volOf(p, 'host')!.hostPath).toEqual({ path: '/data', type: 'DirectoryOrCreate' });
    expect(mountOf(p, 'host')!.mountPath).toBe('/var/run/kubevirt-private/vmi-disks/host');
  });

  it('hostDisk: refused while the HostDisk gate is off (the default), naming the field and the gate', () => {
    const v = vmi();
    v.spec.volumes = [
      { name: 'cd', containerDisk: { image: 'x:1' } },
      { name: 'host', hostDisk: { path: '/data/disk.img', type: 'Disk' } },
    ];
    const e = renderError(() => render(v));
    expect(e.path).toBe('spec.volumes[1].hostDisk');
    expect(e.message).toMatch(/HostDisk feature gate/);
    expect(renderError(() => render(v, { featureGates: [] })).path).toBe('spec.volumes[1].hostDisk');
  });

  it.each(['/data/../etc/disk.img', '/data/./disk.img', '/', 'data/disk.img'])(
    'hostDisk: path %s is refused even with the gate on',
    (hp) => {
      const v = vmi({ volumes: [{ name: 'host', hostDisk: { path: hp, type: 'Disk' } }] });
      expect(renderError(() => render(v, { featureGates: ['HostDisk'] })).path).toBe(
        'spec.volumes[0].hostDisk.path',
      );
    },
  );

  it('a feature gate it does not know is kept and acts on nothing (as upstream; virt-operator reports it)', () => {
    // a misspelt HostDisk does not turn hostDisk volumes on
    const v = vmi({ volumes: [{ name: 'host', hostDisk: { path: '/data/disk.img', type: 'Disk' } }] });
    expect(renderError(() => render(v, { featureGates: ['Hostdisk'] })).path).toBe(
      'spec.volumes[0].hostDisk',
    );
    expect(render(vmi(), { featureGates: ['CPUManager'] }).kind).toBe('Pod');
    expect(
      rendererConfigFromKubeVirt(
        { developerConfiguration: { featureGates: ['HostDisk'] } },
        { launcherImage: 'x:1' },
      ).featureGates,
    ).toEqual(['HostDisk']);
  });

  it('config volumes are mounted read-only where the launcher builds their ISOs from', () => {
    const p = render(
      vmi({
        volumes: [
          { name: 'cm', configMap: { name: 'app-config' } },
          { name: 'sec', secret: { secretName: 'app-secret', optional: true } },
          {
            name: 'dapi',
            downwardAPI: { fields: [{ path: 'labels', fieldRef: { fieldPath: 'metadata.labels' } }] },
          },
        ],
      }),
    );
    expect(volOf(p, 'cm')!.configMap).toEqual({ name: 'app-config' });
    expect(mountOf(p, 'cm')).toEqual({
      name: 'cm',
      mountPath: '/var/run/kubevirt-private/config-map/cm',
      readOnly: true,
    });
    expect(volOf(p, 'sec')!.secret).toEqual({ secretName: 'app-secret', optional: true });
    expect(mountOf(p, 'sec')!.mountPath).toBe('/var/run/kubevirt-private/secret/sec');
    expect(volOf(p, 'dapi')!.downwardAPI!.items![0]!.path).toBe('labels');
    expect(mountOf(p, 'dapi')!.mountPath).toBe('/var/run/kubevirt-private/downwardapi/dapi');
  });

  it('serviceAccount volume: the Pod runs as that account with its token mounted; otherwise no token', () => {
    expect(render(vmi()).spec!.automountServiceAccountToken).toBe(false);
    const p = render(vmi({ volumes: [{ name: 'sa', serviceAccount: { serviceAccountName: 'robot' } }] }));
    expect(p.spec!.serviceAccountName).toBe('robot');
    expect(p.spec!.automountServiceAccountToken).toBe(true);
  });

  it('cloud-init secret references are projected into the volume secret dir; inline data needs no volume', () => {
    const p = render(
      vmi({
        volumes: [
          {
            name: 'ci',
            cloudInitNoCloud: { secretRef: { name: 'ud' }, networkDataSecretRef: { name: 'nd' } },
          },
          { name: 'inline', cloudInitConfigDrive: { userData: '#cloud-config\n' } },
        ],
      }),
    );
    expect(volOf(p, 'ci')!.projected!.sources).toEqual([
      { secret: { name: 'ud' } },
      { secret: { name: 'nd' } },
    ]);
    expect(mountOf(p, 'ci')!.mountPath).toBe('/var/run/kubevirt-private/secret/ci');
    expect(volOf(p, 'inline')).toBeUndefined();
  });

  it('EFI firmware gets a writable nvram folder', () => {
    const p = render(vmi({ domain: { firmware: { bootloader: { efi: { secureBoot: false } } } } }));
    expect(volOf(p, 'nvram')).toEqual({ name: 'nvram', emptyDir: {} });
    expect(mountOf(p, 'nvram')!.mountPath).toBe('/var/lib/libvirt/qemu/nvram');
  });

  it('rejects reserved volume names, non-DNS names and unsupported sources, naming the field', () => {
    expect(
      renderError(() => render(vmi({ volumes: [{ name: 'private', emptyDisk: { capacity: '1Gi' } }] }))).path,
    ).toBe('spec.volumes[0].name');
    expect(
      renderError(() => render(vmi({ volumes: [{ name: 'Bad_Name', emptyDisk: { capacity: '1Gi' } }] })))
        .path,
    ).toBe('spec.volumes[0].name');
    const e = renderError(() =>
      render(
        vmi({
          volumes: [
            { name: 'ok', emptyDisk: { capacity: '1Gi' } },
            { name: 'm', downwardMetrics: {} },
          ],
        }),
      ),
    );
    expect(e.path).toBe('spec.volumes[1].downwardMetrics');
    expect(e.message).toContain('not supported');
  });
});

describe('container-disk and kernel-boot containers', () => {
  it('none without container disks', () => {
    const p = render(vmi());
    expect(p.spec!.initContainers).toBeUndefined();
    expect(p.spec!.containers.map((c) => c.name)).toEqual(['compute']);
  });

  it('per containerDisk: an init container (pre-pull, --no-op) and a sidecar serving disk_<index>', () => {
    const v = vmi({
      volumes: [
        { name: 'scratch', emptyDisk: { capacity: '1Gi' } },
        {
          name: 'root',
          containerDisk: {
            image: 'quay.io/containerdisks/fedora:40',
            imagePullSecret: 'pull',
            imagePullPolicy: 'Always',
          },
        },
      ],
      domain: {
        firmware: {
          kernelBoot: { container: { image: 'example.com/kernel:1', kernelPath: '/boot/vmlinuz' } },
        },
      },
    });
    const p = render(v);
    expect(p.spec!.initContainers!.map((c) => c.name)).toEqual([
      'container-disk-binary',
      'volumeroot-init',
      'kernel-boot-init',
    ]);
    const bin = p.spec!.initContainers![0]!;
    expect(bin.image).toBe(IMAGE);
    expect(bin.command).toEqual(['/usr/bin/cp', '/usr/bin/container-disk', '/init/usr/bin/container-disk']);
    const init = p.spec!.initContainers![1]!;
    expect(init.image).toBe('quay.io/containerdisks/fedora:40');
    expect(init.imagePullPolicy).toBe('Always');
    expect(init.args).toEqual(['--no-op']);
    const side = p.spec!.containers.find((c) => c.name === 'volumeroot')!;
    expect(side.args).toEqual([
      '--copy-path',
      '/var/run/kubevirt-ephemeral-disks/container-disk-data/uid-1234/disk_1',
    ]);
    expect(side.volumeMounts).toContainEqual({
      name: 'container-disks',
      mountPath: '/var/run/kubevirt-ephemeral-disks/container-disk-data/uid-1234',
    });
    const kb = p.spec!.containers.find((c) => c.name === 'kernel-boot')!;
    expect(kb.image).toBe('example.com/kernel:1');
    expect(kb.args).toEqual([
      '--copy-path',
      '/var/run/kubevirt-ephemeral-disks/container-disk-data/uid-1234/kernel-boot',
    ]);
    expect(p.spec!.imagePullSecrets).toEqual([{ name: 'pull' }]);
  });
});

describe('placement', () => {
  it('requires kubevirt.io/schedulable=true and keeps the VMI nodeSelector, affinity, tolerations', () => {
    const affinity = {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [{ matchExpressions: [{ key: 'zone', operator: 'In', values: ['a'] }] }],
        },
      },
    };
    const tolerations = [
      { key: 'dedicated', operator: 'Equal' as const, value: 'vms', effect: 'NoSchedule' as const },
    ];
    const p = render(
      vmi({
        nodeSelector: { disk: 'ssd', 'kubevirt.io/schedulable': 'false' },
        affinity,
        tolerations,
        schedulerName: 'sched',
        priorityClassName: 'high',
      }),
    );
    expect(p.spec!.nodeSelector).toEqual({ disk: 'ssd', 'kubevirt.io/schedulable': 'true' });
    expect(p.spec!.affinity).toEqual(affinity);
    expect(p.spec!.tolerations).toEqual(tolerations);
    expect(p.spec!.schedulerName).toBe('sched');
    expect(p.spec!.priorityClassName).toBe('high');
  });

  it('spec.architecture selects nodes of that architecture', () => {
    expect(render(vmi({ architecture: 'arm64' })).spec!.nodeSelector).toEqual({
      'kubernetes.io/arch': 'arm64',
      'kubevirt.io/schedulable': 'true',
    });
    expect(render(vmi()).spec!.nodeSelector!['kubernetes.io/arch']).toBeUndefined();
  });
});

describe('identity: labels, annotations, owner', () => {
  it('labels the Pod as a launcher of this VMI, owned by it', () => {
    const p = render(vmi({}, { labels: { app: 'web', 'kubevirt.io': 'spoofed' } }));
    expect(p.metadata!.generateName).toBe('virt-launcher-testvm-');
    expect(p.metadata!.namespace).toBe('ns1');
    expect(p.metadata!.labels).toEqual({
      app: 'web',
      'kubevirt.io': 'virt-launcher',
      'kubevirt.io/created-by': 'uid-1234',
      'vm.kubevirt.io/name': 'testvm',
    });
    expect(p.metadata!.annotations!['kubevirt.io/domain']).toBe('testvm');
    expect(p.metadata!.ownerReferences).toEqual([
      {
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachineInstance',
        name: 'testvm',
        uid: 'uid-1234',
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
  });

  it("carries the VMI's annotations, except kubectl's and the API version bookkeeping; the Pod's own win", () => {
    const annotations = {
      'kubevirt.io/test': 'x',
      'kubernetes.io/test': 'x',
      'example.com/owner': 'team-a',
      'kubevirt.io/vm-generation': '3',
      'kubectl.kubernetes.io/last-applied-configuration': '{}',
      'kubectl.kubernetes.io/restartedAt': 'now',
      'kubevirt.io/latest-observed-api-version': 'v1',
      'kubevirt.io/storage-observed-api-version': 'v1',
      'kubevirt.io/domain': 'spoofed',
    };
    const p = render(vmi({}, { annotations }));
    expect(p.metadata!.annotations).toEqual({
      'kubevirt.io/test': 'x',
      'kubernetes.io/test': 'x',
      'example.com/owner': 'team-a',
      'kubevirt.io/vm-generation': '3',
      'kubevirt.io/domain': 'testvm',
      'kubectl.kubernetes.io/default-container': 'compute',
    });
    expect(annotations['kubevirt.io/domain']).toBe('spoofed'); // the VMI is not changed
  });

  it('needs name, namespace and uid', () => {
    expect(renderError(() => render(vmi({}, { uid: undefined }))).path).toBe('metadata.uid');
    expect(renderError(() => render(vmi({}, { namespace: '' }))).path).toBe('metadata.namespace');
  });
});

describe('termination grace period', () => {
  it('VMI grace (default 30 s) for the launcher, plus a 15 s buffer for the Pod', () => {
    const p = render(vmi());
    expect(p.spec!.terminationGracePeriodSeconds).toBe(45);
    expect(flagValue(compute(p).command!, '--grace-period-seconds')).toBe('30');
    const q = render(vmi({ terminationGracePeriodSeconds: 0 }), { gracePeriodBufferSeconds: 5 });
    expect(q.spec!.terminationGracePeriodSeconds).toBe(5);
    expect(flagValue(compute(q).command!, '--grace-period-seconds')).toBe('0');
  });
});

describe('security context', () => {
  it('runs everything as uid 107, non-root, no privilege, all capabilities dropped', () => {
    const p = render(vmi({ volumes: [{ name: 'root', containerDisk: { image: 'example.com/disk:1' } }] }));
    expect(p.spec!.securityContext).toEqual({
      runAsUser: 107,
      runAsGroup: 107,
      fsGroup: 107,
      runAsNonRoot: true,
      seccompProfile: { type: 'RuntimeDefault' },
      // the auto-attached masquerade interface: DHCP on port 67 (below)
      sysctls: [{ name: 'net.ipv4.ip_unprivileged_port_start', value: '67' }],
    });
    for (const c of [...p.spec!.containers, ...(p.spec!.initContainers ?? [])]) {
      expect(c.securityContext).toMatchObject({
        runAsUser: 107,
        runAsNonRoot: true,
        privileged: false,
        allowPrivilegeEscalation: false,
      });
      expect(c.securityContext!.capabilities!.drop).toEqual(['ALL']);
    }
    // the auto-attached masquerade interface: the launcher's DHCP server binds port 67, by the Pod's sysctl
    expect(compute(p).securityContext!.capabilities!.add).toBeUndefined();
    expect(p.spec!.securityContext!.sysctls).toEqual([
      { name: 'net.ipv4.ip_unprivileged_port_start', value: '67' },
    ]);
    // a Localhost profile from the cluster config (deploy/ names the one virt-handler installs)
    const local = render(vmi(), { launcherSeccompProfile: 'kubevirt-ts/kubevirt.json' });
    expect(local.spec!.securityContext!.seccompProfile).toEqual({
      type: 'Localhost',
      localhostProfile: 'kubevirt-ts/kubevirt.json',
    });
    expect(
      render(vmi(), { launcherSeccompProfile: 'RuntimeDefault' }).spec!.securityContext!.seccompProfile,
    ).toEqual({ type: 'RuntimeDefault' });
    const noNet = render(vmi({ domain: { devices: { autoattachPodInterface: false } } }));
    expect(compute(noNet).securityContext!.capabilities!.add).toBeUndefined();
    expect(noNet.spec!.securityContext!.sysctls).toBeUndefined();
    expect(p.spec!.hostNetwork ?? false).toBe(false);
  });

  it('opens ports from 67 (DHCP) for a masquerade/bridge pod interface, from the lowest forwarded port < 1024 for passt/slirp, and adds SYS_NICE only for realtime vCPUs', () => {
    const pod = (iface: object, networks: V1Networks = [{ name: 'default', pod: {} }]) =>
      render(vmi({ domain: { devices: { interfaces: [{ name: 'default', ...iface }] } }, networks }));
    const start = (iface: object, networks?: V1Networks) =>
      pod(iface, networks).spec!.securityContext!.sysctls?.find(
        (s) => s.name === 'net.ipv4.ip_unprivileged_port_start',
      )?.value;
    expect(start({ masquerade: {} })).toBe('67');
    expect(start({ bridge: {} })).toBe('67');
    expect(start({ masquerade: {}, ports: [{ port: 22 }, { port: 8080 }] })).toBe('67');
    expect(start({ passt: {} })).toBeUndefined();
    expect(start({ passt: {}, ports: [{ port: 8080 }] })).toBeUndefined();
    expect(start({ passt: {}, ports: [{ port: 8080 }, { port: 22 }] })).toBe('22');
    expect(start({ slirp: {}, ports: [{ port: 80 }] })).toBe('80');
    // a bridge on a Multus network is no pod interface: no DHCP server in the launcher
    expect(start({ bridge: {} }, [{ name: 'default', multus: { networkName: 'n1' } }])).toBeUndefined();
    // no capability for any of them: uid 107 could not use it after exec
    for (const iface of [{ masquerade: {} }, { bridge: {} }, { passt: {}, ports: [{ port: 22 }] }])
      expect(compute(pod(iface)).securityContext!.capabilities!.add).toBeUndefined();
    const rt = vmi({
      domain: {
        cpu: { cores: 1, dedicatedCpuPlacement: true, realtime: {} },
        devices: { autoattachPodInterface: false },
      },
    });
    expect(compute(render(rt)).securityContext!.capabilities!.add).toEqual(['SYS_NICE']);
  });
});

describe('hostname and subdomain', () => {
  it('uses spec.hostname, else the VMI name; keeps spec.subdomain', () => {
    expect(render(vmi()).spec!.hostname).toBe('testvm');
    const p = render(vmi({ hostname: 'web-1', subdomain: 'svc' }));
    expect(p.spec!.hostname).toBe('web-1');
    expect(p.spec!.subdomain).toBe('svc');
    expect(renderError(() => render(vmi({ hostname: 'Not_A_Label' }))).path).toBe('spec.hostname');
  });

  it('shortens a long VMI name to a 63-character label', () => {
    const long = 'a'.repeat(62) + '.b-c';
    const h = render(vmi({}, { name: long })).spec!.hostname!;
    expect(h.length).toBeLessThanOrEqual(63);
    expect(h).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
  });
});

describe('config', () => {
  it('requires the launcher image and positive ratios', () => {
    expect(renderError(() => renderLaunchPod(vmi(), { launcherImage: '' })).path).toBe(
      'config.launcherImage',
    );
    expect(renderError(() => render(vmi(), { cpuAllocationRatio: 0 })).path).toBe(
      'config.cpuAllocationRatio',
    );
  });

  it('renders a VMI with the API defaults applied', () => {
    const v = setVirtualMachineInstanceDefaults(vmi());
    const p = render(v, { useEmulation: true });
    expect(compute(p).resources!.requests!.memory).toMatch(/Mi$/);
  });
});

describe('QoS of helper containers', () => {
  it('helper containers get requests == limits when the VMI wants dedicated CPUs or Guaranteed QoS', () => {
    const volumes = [{ name: 'root', containerDisk: { image: 'example.com/disk:1' } }];
    const burstable = render(vmi({ volumes }));
    const side = burstable.spec!.containers.find((c) => c.name === 'volumeroot')!;
    expect(side.resources!.requests).not.toEqual(side.resources!.limits);
    const guaranteed = render(
      vmi({
        volumes,
        domain: { resources: { requests: { memory: '1Gi', cpu: '1' }, limits: { memory: '1Gi', cpu: '1' } } },
      }),
    );
    for (const c of [...guaranteed.spec!.containers, ...guaranteed.spec!.initContainers!]) {
      expect(c.resources!.requests!.cpu).toBe(c.resources!.limits!.cpu);
      expect(c.resources!.requests!.memory).toBe(c.resources!.limits!.memory);
    }
  });
});

describe('multus networks', () => {
  it('secondary networks become the multus networks annotation with hashed Pod interface names', () => {
    const p = render(
      vmi({
        networks: [
          { name: 'default', pod: {} },
          { name: 'blue', multus: { networkName: 'blue-net' } },
          { name: 'red', multus: { networkName: 'other-ns/red-net' } },
        ],
      }),
    );
    const nets = JSON.parse(p.metadata!.annotations!['k8s.v1.cni.cncf.io/networks']!);
    expect(nets).toEqual([
      { name: 'blue-net', namespace: 'ns1', interface: expect.stringMatching(/^pod[0-9a-f]{11}$/) },
      { name: 'red-net', namespace: 'other-ns', interface: expect.stringMatching(/^pod[0-9a-f]{11}$/) },
    ]);
    // sha256("blue") = 16477688c0e00699...: the same name upstream gives that interface
    expect(nets[0].interface).toBe('pod16477688c0e');
  });

  it('a default multus network replaces the cluster network; no annotation without multus', () => {
    const p = render(
      vmi({ networks: [{ name: 'main', multus: { networkName: 'ns1/main-net', default: true } }] }),
    );
    expect(p.metadata!.annotations!['v1.multus-cni.io/default-network']).toBe('ns1/main-net');
    expect(p.metadata!.annotations!['k8s.v1.cni.cncf.io/networks']).toBeUndefined();
    expect(render(vmi()).metadata!.annotations!['k8s.v1.cni.cncf.io/networks']).toBeUndefined();
  });

  it('names a malformed network reference', () => {
    const e = renderError(() => render(vmi({ networks: [{ name: 'x', multus: { networkName: 'a/b/c' } }] })));
    expect(e.path).toBe('spec.networks[0].multus.networkName');
  });
});

describe('container names', () => {
  it('a containerDisk volume name too long for its container names is named in the error', () => {
    const name = 'd'.repeat(55); // volume<55> fits in 63, volume<55>-init does not
    const e = renderError(() =>
      render(vmi({ volumes: [{ name, containerDisk: { image: 'example.com/d:1' } }] })),
    );
    expect(e.path).toBe('spec.volumes[0].name');
    expect(e.message).toContain('init container name');
  });
});

describe('probes', () => {
  it('httpGet / tcpSocket probes become the compute container probes with the same timing', () => {
    const p = render(
      vmi({
        readinessProbe: {
          httpGet: { port: 8080, path: '/healthz' },
          initialDelaySeconds: 10,
          periodSeconds: 5,
        },
        livenessProbe: { tcpSocket: { port: 22 }, failureThreshold: 3 },
      }),
    );
    expect(compute(p).readinessProbe).toEqual({
      httpGet: { port: 8080, path: '/healthz' },
      initialDelaySeconds: 10,
      periodSeconds: 5,
    });
    expect(compute(p).livenessProbe).toEqual({ tcpSocket: { port: 22 }, failureThreshold: 3 });
  });

  it('guest-agent probes (exec, guestAgentPing) are not put on the Pod', () => {
    const p = render(
      vmi({ readinessProbe: { guestAgentPing: {} }, livenessProbe: { exec: { command: ['true'] } } }),
    );
    expect(compute(p).readinessProbe).toBeUndefined();
    expect(compute(p).livenessProbe).toBeUndefined();
  });
});

describe('the temporary provisioning Pod (a DataVolume waiting for its first consumer)', () => {
  it('names every claim of the VMI once (not hotplugged ones), runs a no-op as an unprivileged user, is owned by the VMI', () => {
    const v = vmi({
      nodeSelector: { zone: 'a' },
      tolerations: [{ key: 'k', operator: 'Exists' }],
      priorityClassName: 'vms',
      volumes: [
        { name: 'root', dataVolume: { name: 'root-dv' } },
        { name: 'data', persistentVolumeClaim: { claimName: 'data-pvc' } },
        { name: 'again', persistentVolumeClaim: { claimName: 'data-pvc', readOnly: true } },
        { name: 'scratch', ephemeral: { persistentVolumeClaim: { claimName: 'golden' } } },
        { name: 'hot', persistentVolumeClaim: { claimName: 'hot-pvc', hotpluggable: true } },
        { name: 'cd', containerDisk: { image: 'x' } },
      ],
    });
    const p = renderProvisioningPod(v, cfg({ imagePullPolicy: 'Never' }));
    expect(p.metadata).toEqual({
      name: 'virt-provision-testvm-uid-1',
      namespace: 'ns1',
      labels: { 'kubevirt.io/provisioning-for': 'uid-1234' },
      annotations: { 'kubevirt.io/ephemeral-provisioning': 'true' },
      ownerReferences: [
        {
          apiVersion: 'kubevirt.io/v1',
          kind: 'VirtualMachineInstance',
          name: 'testvm',
          uid: 'uid-1234',
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    });
    expect(p.spec!.volumes).toEqual([
      { name: 'root', persistentVolumeClaim: { claimName: 'root-dv' } },
      { name: 'data', persistentVolumeClaim: { claimName: 'data-pvc' } },
      { name: 'scratch', persistentVolumeClaim: { claimName: 'golden' } },
    ]);
    expect(p.spec!.nodeSelector).toEqual({ zone: 'a', 'kubevirt.io/schedulable': 'true' });
    expect(p.spec!.tolerations).toEqual([{ key: 'k', operator: 'Exists' }]);
    expect(p.spec!.priorityClassName).toBe('vms');
    expect(p.spec!.restartPolicy).toBe('Never');
    expect(p.spec!.automountServiceAccountToken).toBe(false);
    const [c, ...rest] = p.spec!.containers;
    expect(rest).toEqual([]);
    expect(c).toMatchObject({
      image: IMAGE,
      imagePullPolicy: 'Never',
      command: ['/usr/bin/container-disk', '--no-op'],
      securityContext: {
        runAsNonRoot: true,
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
      },
    });
    // no label of a launcher Pod: the controllers' Pod informer and the VMI's Pod list never see it
    expect(p.metadata!.labels!['kubevirt.io']).toBeUndefined();
    expect(p.metadata!.labels!['kubevirt.io/created-by']).toBeUndefined();
  });
});
