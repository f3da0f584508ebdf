import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import type { DomainModel } from '@kubevirt-ts/cmd-protocol';
import { computeStatus, liveMigratable, phaseFor, sameStatus, type LauncherObservation } from './status.js';

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
  it('libvirt’s StartingUp pause is Running, not Ready, and no Paused condition', () => {
    const { status } = computeStatus({
      vmi: vmi(),
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
