import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import type { DomainModel } from '@kubevirt-ts/cmd-protocol';
import {
  checkVolumesForMigration,
  computeStatus,
  liveMigratable,
  liveMigration,
  phaseFor,
  sameStatus,
  type LauncherObservation,
} from './status.js';

const NOW = '2026-01-01T00:00:00Z';
const LATER = '2026-01-01T00:01:00Z';

function vmi(
  status: VirtualMachineInstance['status'] = { phase: 'Scheduled' },
  extra: Record<string, unknown> = {},
) {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: 'a', namespace: 'ns', uid: 'u1' },
    spec: {
      domain: { devices: { interfaces: [{ name: 'default', masquerade: {} }] }, ...extra },
      networks: [{ name: 'default', pod: {} }],
    },
    status,
  } as unknown as VirtualMachineInstance;
}
function dom(status: string, reason: string, more: Partial<DomainModel['status']> = {}): DomainModel {
  return {
    metadata: { name: 'a', namespace: 'ns', uid: 'u1' },
    domainName: 'ns_a',
    status: { status, reason, ...more },
  };
}
const ready: LauncherObservation = { ready: true, gone: false };

describe('phaseFor (upstream rules)', () => {
  it.each([
    ['Running', 'Booted', 'Running', undefined],
    ['Paused', 'User', 'Running', undefined],
    ['Shutoff', 'Shutdown', 'Succeeded', undefined],
    ['Shutoff', 'Crashed', 'Failed', 'DomainCrashed'],
    ['Crashed', 'Unknown', 'Failed', 'DomainCrashed'],
    ['Shutoff', 'Destroyed', 'Failed', 'DomainDestroyed'],
  ])('domain %s/%s -> %s', (st, reason, phase, why) => {
    const r = phaseFor(vmi({ phase: 'Running' }), dom(st, reason), ready);
    expect(r.phase).toBe(phase);
    expect(r.reason).toBe(why);
  });
  it('Destroyed without ACPI is a clean end', () => {
    expect(
      phaseFor(
        vmi({ phase: 'Running' }, { features: { acpi: { enabled: false } } }),
        dom('Shutoff', 'Destroyed'),
        ready,
      ).phase,
    ).toBe('Succeeded');
  });
  it('no domain: Scheduled stays, Running without domain or with the launcher gone fails', () => {
    expect(phaseFor(vmi(), undefined, { ready: false, gone: false }).phase).toBe('Scheduled');
    expect(phaseFor(vmi({ phase: 'Running' }), undefined, ready)).toEqual({
      phase: 'Failed',
      reason: 'DomainGone',
    });
    expect(phaseFor(vmi({ phase: 'Running' }), undefined, { ready: true, gone: true })).toEqual({
      phase: 'Failed',
      reason: 'LauncherGone',
    });
    expect(phaseFor(vmi(), undefined, { ready: false, gone: false, notReadyTimeout: 'x' })).toEqual({
      phase: 'Failed',
      reason: 'LauncherNotReady',
    });
  });
  it('a final phase never changes', () => {
    expect(phaseFor(vmi({ phase: 'Succeeded' }), dom('Running', 'Booted'), ready).phase).toBe('Succeeded');
    expect(phaseFor(vmi({ phase: 'Failed', reason: 'X' }), undefined, ready)).toEqual({
      phase: 'Failed',
      reason: 'X',
    });
  });
});

describe('computeStatus', () => {
  it("before the domain runs, virt-controller's Ready condition is kept as it is (nothing to rewrite)", () => {
    const controllers = {
      type: 'Ready',
      status: 'False',
      reason: 'GuestNotRunning',
      message: 'Guest VM is not reported as running',
      lastProbeTime: null,
      lastTransitionTime: NOW,
    };
    const old = { phase: 'Scheduled', nodeName: 'n1', conditions: [controllers] };
    const { status } = computeStatus({
      vmi: vmi(old as VirtualMachineInstance['status']),
      domain: undefined,
      launcher: { ready: false, gone: false },
      nodeName: 'n1',
      now: LATER,
    });
    expect(status.conditions).toEqual([controllers]);
    expect(sameStatus(status, old as VirtualMachineInstance['status'])).toBe(true);
  });
  it('Scheduled -> Running: phase, nodeName, Ready, LiveMigratable, interfaces, guestOSInfo, a Started event', () => {
    const d = dom('Running', 'Booted', {
      interfaces: [
        {
          name: 'default',
          mac: '02:00:00:00:00:01',
          ip: '10.0.2.2',
          ips: ['10.0.2.2'],
          interfaceName: 'eth0',
        },
      ],
      osInfo: { name: 'Debian', id: 'debian', prettyName: 'Debian 12' },
    });
    const { status, events } = computeStatus({
      vmi: vmi(),
      domain: d,
      launcher: ready,
      nodeName: 'n1',
      now: NOW,
      launcherImageVersion: 'img:1',
    });
    expect(status.phase).toBe('Running');
    expect(status.nodeName).toBe('n1');
    expect(status.launcherContainerImageVersion).toBe('img:1');
    expect(status.conditions!.map((c) => [c.type, c.status])).toEqual([
      ['Ready', 'True'],
      ['LiveMigratable', 'True'],
    ]);
    expect(status.interfaces).toEqual([
      {
        name: 'default',
        mac: '02:00:00:00:00:01',
        ipAddress: '10.0.2.2',
        ipAddresses: ['10.0.2.2'],
        interfaceName: 'eth0',
        infoSource: 'domain, guest-agent',
      },
    ]);
    expect(status.guestOSInfo).toEqual({ name: 'Debian', id: 'debian', prettyName: 'Debian 12' });
    expect(events).toEqual([
      { type: 'Normal', reason: 'Started', message: 'VirtualMachineInstance started.' },
    ]);
    // with phase 1's addresses: a masquerade interface reports the Pod's (the guest's 10.0.2.2 is behind NAT)
    const withPod = computeStatus({
      vmi: vmi(),
      domain: d,
      launcher: ready,
      podInterface: { name: 'default', addresses: ['10.244.0.7', 'fd00:10:244::7'] },
      nodeName: 'n1',
      now: NOW,
    }).status;
    expect(withPod.interfaces![0]).toMatchObject({
      name: 'default',
      ipAddress: '10.244.0.7',
      ipAddresses: ['10.244.0.7', 'fd00:10:244::7'],
    });
    // no guest agent: still the Pod's address, from the domain alone
    const noAgent = computeStatus({
      vmi: vmi(),
      domain: dom('Running', 'Booted', { interfaces: [{ name: 'default', mac: '02:00:00:00:00:01' }] }),
      launcher: ready,
      podInterface: { name: 'default', addresses: ['10.244.0.7'] },
      nodeName: 'n1',
      now: NOW,
    }).status;
    expect(noAgent.interfaces).toEqual([
      {
        name: 'default',
        mac: '02:00:00:00:00:01',
        ipAddress: '10.244.0.7',
        ipAddresses: ['10.244.0.7'],
        infoSource: 'domain',
      },
    ]);
    expect(status.phaseTransitionTimestamps).toEqual([{ phase: 'Running', phaseTransitionTimestamp: NOW }]);
  });

  it('is stable: computing again from its own output changes nothing (no second write)', () => {
    const d = dom('Running', 'Booted');
    const first = computeStatus({ vmi: vmi(), domain: d, launcher: ready, nodeName: 'n1', now: NOW });
    const again = computeStatus({
      vmi: vmi(first.status),
      domain: d,
      launcher: ready,
      nodeName: 'n1',
      now: LATER,
    });
    expect(sameStatus(again.status, first.status)).toBe(true);
    expect(again.events).toEqual([]);
  });

  it('paused by the user: Paused condition (PausedByUser), Ready False; unpaused: Paused removed', () => {
    const running = computeStatus({
      vmi: vmi(),
      domain: dom('Running', 'Booted'),
      launcher: ready,
      nodeName: 'n',
      now: NOW,
    }).status;
    const paused = computeStatus({
      vmi: vmi(running),
      domain: dom('Paused', 'User'),
      launcher: ready,
      nodeName: 'n',
      now: LATER,
    }).status;
    const p = paused.conditions!.find((c) => c.type === 'Paused')!;
    expect(p).toMatchObject({ status: 'True', reason: 'PausedByUser', message: 'VMI was paused by user' });
    expect(paused.conditions!.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      lastTransitionTime: LATER,
    });
    const again = computeStatus({
      vmi: vmi(paused),
      domain: dom('Running', 'Unpaused'),
      launcher: ready,
      nodeName: 'n',
      now: LATER,
    }).status;
    expect(again.conditions!.map((c) => c.type)).toEqual(['Ready', 'LiveMigratable']);
  });

  it("leaves the controller's Pod-derived Ready False as it is (no rewriting in turn while the Pod terminates)", () => {
    const running = computeStatus({
      vmi: vmi(),
      domain: dom('Running', 'Booted'),
      launcher: ready,
      nodeName: 'n',
      now: NOW,
    }).status;
    const terminating = {
      ...running,
      conditions: running.conditions!.map((c) =>
        c.type === 'Ready'
          ? { ...c, status: 'False', reason: 'PodTerminating', message: 'virt-launcher pod is terminating' }
          : c,
      ),
    };
    for (const domain of [dom('Running', 'Booted'), dom('Paused', 'User')]) {
      const s = computeStatus({
        vmi: vmi(terminating),
        domain,
        launcher: ready,
        nodeName: 'n',
        now: LATER,
      }).status;
      expect(s.conditions!.find((c) => c.type === 'Ready')).toEqual(
        terminating.conditions.find((c) => c.type === 'Ready'),
      );
    }
    // its own False (paused) it does change back to True
    const paused = computeStatus({
      vmi: vmi(running),
      domain: dom('Paused', 'User'),
      launcher: ready,
      nodeName: 'n',
      now: LATER,
    }).status;
    expect(paused.conditions!.find((c) => c.type === 'Ready')?.reason).toBe('Paused');
    const unpaused = computeStatus({
      vmi: vmi(paused),
      domain: dom('Running', 'Unpaused'),
      launcher: ready,
      nodeName: 'n',
      now: LATER,
    }).status;
    expect(unpaused.conditions!.find((c) => c.type === 'Ready')?.status).toBe('True');
    // the controller's GuestNotRunning it answers with the write that says Running (no extra controller write)
    const scheduled = {
      phase: 'Scheduled',
      nodeName: 'n',
      conditions: [{ type: 'Ready', status: 'False', reason: 'GuestNotRunning', lastTransitionTime: NOW }],
    } as VirtualMachineInstance['status'];
    const started = computeStatus({
      vmi: vmi(scheduled),
      domain: dom('Running', 'Booted'),
      launcher: ready,
      nodeName: 'n',
      now: LATER,
    }).status;
    expect(started.phase).toBe('Running');
    expect(started.conditions!.find((c) => c.type === 'Ready')?.status).toBe('True');
  });

  it('a sync error becomes a Synchronized=False condition with the launcher message', () => {
    const { status } = computeStatus({
      vmi: vmi(),
      domain: undefined,
      launcher: { ...ready, syncError: 'spec.x: bad' },
      nodeName: 'n',
      now: NOW,
    });
    expect(status.phase).toBe('Scheduled');
    expect(status.conditions!.find((c) => c.type === 'Synchronized')).toMatchObject({
      status: 'False',
      message: 'spec.x: bad',
    });
  });

  it('keeps conditions it does not own', () => {
    const { status } = computeStatus({
      vmi: vmi({ phase: 'Scheduled', conditions: [{ type: 'PodScheduled', status: 'True' }] }),
      domain: undefined,
      launcher: ready,
      nodeName: 'n',
      now: NOW,
    });
    expect(status.conditions![0]).toEqual({ type: 'PodScheduled', status: 'True' });
  });

  it('a crash: Failed with a Warning event', () => {
    const r = computeStatus({
      vmi: vmi({ phase: 'Running' }),
      domain: dom('Crashed', 'Unknown'),
      launcher: ready,
      nodeName: 'n',
      now: NOW,
    });
    expect(r.status.phase).toBe('Failed');
    expect(r.status.reason).toBe('DomainCrashed');
    expect(r.events[0]).toMatchObject({ type: 'Warning', reason: 'Stopped' });
  });
});

describe('LiveMigratable', () => {
  it('bridge on the pod network is not migratable (InterfaceNotLiveMigratable)', () => {
    const v = vmi();
    v.spec.domain.devices!.interfaces = [{ name: 'default', bridge: {} } as never];
    expect(liveMigratable(v, NOW)).toMatchObject({ status: 'False', reason: 'InterfaceNotLiveMigratable' });
  });
  it('a hostDisk is not migratable (DisksNotLiveMigratable)', () => {
    const v = vmi();
    v.spec.volumes = [{ name: 'h', hostDisk: { path: '/x', type: 'Disk' } } as never];
    expect(liveMigratable(v, NOW)).toMatchObject({ status: 'False', reason: 'DisksNotLiveMigratable' });
  });
  it('masquerade and no host disks: True', () => {
    expect(liveMigratable(vmi(), NOW).status).toBe('True');
  });
});

describe('migration method and disks (upstream checkVolumesForMigration)', () => {
  type Vol = Record<string, unknown> & { name: string };
  const withVolumes = (
    volumes: Vol[],
    opts: { volumeStatus?: unknown[]; disks?: unknown[]; migrationMethod?: string } = {},
  ) => {
    const v = vmi({
      phase: 'Running',
      ...(opts.volumeStatus ? { volumeStatus: opts.volumeStatus } : {}),
    } as never);
    v.spec.volumes = volumes as never;
    v.spec.domain.devices!.disks = (opts.disks ?? volumes.map((x) => ({ name: x.name, disk: {} }))) as never;
    return v;
  };
  const pvcInfo = (name: string, claimName: string, accessModes: string[]) => ({
    name,
    target: 'vda',
    persistentVolumeClaimInfo: {
      claimName,
      accessModes,
      volumeMode: 'Filesystem',
      capacity: { storage: '1Gi' },
    },
  });

  it('no volumes at all: LiveMigration', () => {
    expect(liveMigration(vmi(), NOW)).toMatchObject({
      method: 'LiveMigration',
      condition: { status: 'True' },
    });
  });
  it.each([
    ['containerDisk', { containerDisk: { image: 'x' } }],
    ['emptyDisk', { emptyDisk: { capacity: '1Gi' } }],
    ['ephemeral', { ephemeral: { persistentVolumeClaim: { claimName: 'c' } } }],
    ['cloudInitNoCloud', { cloudInitNoCloud: { userData: '#cloud-config' } }],
    ['cloudInitConfigDrive', { cloudInitConfigDrive: { userData: '#cloud-config' } }],
    ['configMap', { configMap: { name: 'cm' } }],
    ['secret', { secret: { secretName: 's' } }],
    ['serviceAccount', { serviceAccount: { serviceAccountName: 'sa' } }],
    ['downwardAPI', { downwardAPI: { fields: [] } }],
  ])('a %s volume is node-local: BlockMigration, still migratable', (_k, src) => {
    const r = liveMigration(withVolumes([{ name: 'd', ...src }]), NOW);
    expect(r).toMatchObject({ method: 'BlockMigration', condition: { status: 'True' } });
  });
  it('a PVC with ReadWriteMany is shared: LiveMigration', () => {
    const v = withVolumes([{ name: 'd', persistentVolumeClaim: { claimName: 'rwx' } }], {
      volumeStatus: [pvcInfo('d', 'rwx', ['ReadWriteMany'])],
    });
    expect(liveMigration(v, NOW)).toMatchObject({ method: 'LiveMigration', condition: { status: 'True' } });
  });
  it('a DataVolume with ReadWriteMany next to a containerDisk: BlockMigration', () => {
    const v = withVolumes(
      [
        { name: 'root', dataVolume: { name: 'dv' } },
        { name: 'scratch', containerDisk: { image: 'x' } },
      ],
      { volumeStatus: [pvcInfo('root', 'dv', ['ReadWriteOnce', 'ReadWriteMany'])] },
    );
    expect(liveMigration(v, NOW)).toMatchObject({ method: 'BlockMigration', condition: { status: 'True' } });
  });
  it('a ReadWriteOnce PVC is refused with upstream’s message', () => {
    const v = withVolumes([{ name: 'd', persistentVolumeClaim: { claimName: 'rwo' } }], {
      volumeStatus: [pvcInfo('d', 'rwo', ['ReadWriteOnce'])],
    });
    const r = liveMigration(v, NOW);
    expect(r.method).toBe('BlockMigration');
    expect(r.condition).toMatchObject({
      status: 'False',
      reason: 'DisksNotLiveMigratable',
      message:
        'cannot migrate VMI: PVC rwo is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)',
    });
  });
  it('a DataVolume without persistentVolumeClaimInfo: upstream’s “Unable to determine”', () => {
    const v = withVolumes([{ name: 'd', dataVolume: { name: 'dv1' } }], {
      volumeStatus: [{ name: 'd', target: 'vda' }],
    });
    expect(liveMigratable(v, NOW)).toMatchObject({
      status: 'False',
      reason: 'DisksNotLiveMigratable',
      message:
        'cannot migrate VMI: Unable to determine if PVC dv1 is shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)',
    });
    // no volumeStatus at all: the same
    expect(liveMigratable(withVolumes([{ name: 'd', dataVolume: { name: 'dv1' } }]), NOW).message).toMatch(
      /Unable to determine if PVC dv1 is shared/,
    );
  });
  it('a non-shared hostDisk is refused; a shared one is not', () => {
    const hd = (shared?: boolean) =>
      withVolumes([
        { name: 'h', hostDisk: { path: '/x/disk.img', type: 'Disk', ...(shared ? { shared } : {}) } },
      ]);
    expect(liveMigratable(hd(), NOW)).toMatchObject({
      status: 'False',
      reason: 'DisksNotLiveMigratable',
      message: 'cannot migrate VMI with non-shared HostDisk',
    });
    expect(liveMigration(hd(true), NOW)).toMatchObject({
      method: 'LiveMigration',
      condition: { status: 'True' },
    });
  });
  it('a hostDisk translated from a PVC is judged by the claim’s access modes', () => {
    const v = withVolumes([{ name: 'h', hostDisk: { path: '/x/disk.img', type: 'Disk' } }], {
      volumeStatus: [pvcInfo('h', 'claim-h', ['ReadWriteOnce'])],
    });
    expect(liveMigratable(v, NOW).message).toMatch(/PVC claim-h is not shared/);
    const rwx = withVolumes([{ name: 'h', hostDisk: { path: '/x/disk.img', type: 'Disk' } }], {
      volumeStatus: [pvcInfo('h', 'claim-h', ['ReadWriteMany'])],
    });
    expect(liveMigration(rwx, NOW)).toMatchObject({ method: 'LiveMigration', condition: { status: 'True' } });
  });
  it('a volume used only by a read-only cdrom is not copied (no block migration); a writable cdrom is', () => {
    const vols = [{ name: 'iso', containerDisk: { image: 'x' } }];
    expect(checkVolumesForMigration(withVolumes(vols, { disks: [{ name: 'iso', cdrom: {} }] }))).toEqual({
      blockMigration: false,
    });
    expect(
      checkVolumesForMigration(withVolumes(vols, { disks: [{ name: 'iso', cdrom: { readonly: false } }] })),
    ).toEqual({ blockMigration: true });
  });
  it('status.migratedVolumes makes any migration a block migration (upstream IsBlockMigration)', () => {
    const v = withVolumes([{ name: 'd', persistentVolumeClaim: { claimName: 'rwo' } }], {
      volumeStatus: [pvcInfo('d', 'rwo', ['ReadWriteOnce'])],
    });
    (v.status as Record<string, unknown>).migratedVolumes = [{ volumeName: 'd' }];
    expect(liveMigration(v, NOW)).toMatchObject({ method: 'BlockMigration', condition: { status: 'True' } });
  });
  it('the interface check comes first; the disk error is reported last (upstream’s order)', () => {
    const v = withVolumes([{ name: 'h', hostDisk: { path: '/x', type: 'Disk' } }]);
    v.spec.domain.devices!.interfaces = [{ name: 'default', bridge: {} } as never];
    expect(liveMigratable(v, NOW).reason).toBe('InterfaceNotLiveMigratable');
  });
  it('computeStatus writes status.migrationMethod with the condition while the domain runs', () => {
    const v = withVolumes([{ name: 'root', containerDisk: { image: 'x' } }]);
    const { status } = computeStatus({
      vmi: v,
      domain: dom('Running', 'Booted'),
      launcher: ready,
      nodeName: 'n',
      now: NOW,
    });
    expect(status.migrationMethod).toBe('BlockMigration');
    expect(status.conditions!.find((c) => c.type === 'LiveMigratable')?.status).toBe('True');
    const shared = withVolumes([{ name: 'root', persistentVolumeClaim: { claimName: 'c' } }], {
      volumeStatus: [pvcInfo('root', 'c', ['ReadWriteMany'])],
    });
    const r2 = computeStatus({
      vmi: shared,
      domain: dom('Running', 'Booted'),
      launcher: ready,
      nodeName: 'n',
      now: NOW,
    });
    expect(r2.status.migrationMethod).toBe('LiveMigration');
  });
});

describe('no write while nothing happened', () => {
  it('a Scheduled VMI whose launcher has no domain yet keeps its status as virt-controller wrote it', () => {
    const old = { phase: 'Scheduled' as const, nodeName: 'n', activePods: { p: 'n' } };
    const { status, events } = computeStatus({
      vmi: vmi(old),
      domain: undefined,
      launcher: ready,
      nodeName: 'n',
      now: NOW,
    });
    expect(sameStatus(status, old)).toBe(true);
    expect(events).toEqual([]);
  });
});

describe('start-up pause', () => {
  it('a domain defined but not started yet (Shutoff, Unknown) writes nothing to a Scheduled VMI: no interfaces before Running', () => {
    const scheduled = vmi({ phase: 'Scheduled', nodeName: 'n' });
    const { status, events } = computeStatus({
      vmi: scheduled,
      domain: dom('Shutoff', 'Unknown'),
      launcher: ready,
      nodeName: 'n',
      now: NOW,
      podInterface: { name: 'default', addresses: ['10.244.0.9'] },
    });
    expect(sameStatus(status, scheduled.status)).toBe(true);
    expect(events).toEqual([]);
  });

  it('libvirt’s StartingUp pause: a Scheduled VMI stays Scheduled (no write until the CPUs run), then Running and Ready in one write', () => {
    const scheduled = vmi({ phase: 'Scheduled', nodeName: 'n' });
    const starting = computeStatus({
      vmi: scheduled,
      domain: dom('Paused', 'StartingUp'),
      launcher: ready,
      nodeName: 'n',
      now: NOW,
    });
    expect(starting.status.phase).toBe('Scheduled');
    expect(sameStatus(starting.status, scheduled.status)).toBe(true);
    expect(starting.events).toEqual([]);
    const running = computeStatus({
      vmi: scheduled,
      domain: dom('Running', 'Booted'),
      launcher: ready,
      nodeName: 'n',
      now: NOW,
    });
    expect(running.status.phase).toBe('Running');
    expect(running.status.conditions!.find((c) => c.type === 'Ready')).toMatchObject({ status: 'True' });
  });

  it('libvirt’s StartingUp pause of a Running VMI is not Ready, and no Paused condition', () => {
    const { status } = computeStatus({
      vmi: vmi({ phase: 'Running', nodeName: 'n' }),
      domain: dom('Paused', 'StartingUp'),
      launcher: ready,
      nodeName: 'n',
      now: NOW,
    });
    expect(status.phase).toBe('Running');
    expect(status.conditions!.find((c) => c.type === 'Ready')).toMatchObject({
      status: 'False',
      reason: 'StartingUp',
    });
    expect(status.conditions!.find((c) => c.type === 'Paused')).toBeUndefined();
  });
});

describe('migration pause', () => {
  const migrating = (mode: 'Paused' | 'LiveMigration', sourceNode: string) => {
    const v = vmi();
    v.status = {
      ...v.status,
      nodeName: 'n',
      migrationState: { migrationUid: 'm1', sourceNode, targetNode: 'other', mode },
    };
    return v;
  };
  const paused = (v: ReturnType<typeof vmi>) =>
    computeStatus({
      vmi: v,
      domain: dom('Paused', 'Migration'),
      launcher: ready,
      nodeName: 'n',
      now: NOW,
    }).status.conditions!.find((c) => c.type === 'Paused');

  it('the source paused for a migration in mode Paused: PausedByMigrationMonitor, as upstream', () => {
    expect(paused(migrating('Paused', 'n'))).toMatchObject({
      status: 'True',
      reason: 'PausedByMigrationMonitor',
      message: 'VMI was paused by the migration monitor',
    });
  });

  it('a Migration pause otherwise (a live migration switching over, or not the source): no Paused condition', () => {
    expect(paused(migrating('LiveMigration', 'n'))).toBeUndefined();
    expect(paused(migrating('Paused', 'elsewhere'))).toBeUndefined();
  });
});
