import { DomainStateReasons } from '@kubevirt-ts/node-libvirt';
import { convReason, convState, isDomainDown, statusFromLibvirt, VirDomainState } from './status.js';

describe('convState', () => {
  test.each([
    [0, 'NoState'],
    [1, 'Running'],
    [2, 'Blocked'],
    [3, 'Paused'],
    [4, 'ShuttingDown'],
    [5, 'Shutoff'],
    [6, 'Crashed'],
    [7, 'PMSuspended'],
    [8, 'NoState'],
    [-1, 'NoState'],
  ])('libvirt state %i -> %s', (state, want) => {
    expect(convState(state)).toBe(want);
  });
});

describe('convReason', () => {
  test.each([
    [VirDomainState.RUNNING, 1, 'Booted'],
    [VirDomainState.RUNNING, 2, 'Migrated'],
    [VirDomainState.RUNNING, 5, 'Unpaused'],
    [VirDomainState.RUNNING, 6, 'MigrationCanceled'],
    [VirDomainState.PAUSED, 1, 'User'],
    [VirDomainState.PAUSED, 2, 'Migration'],
    [VirDomainState.PAUSED, 5, 'IOError'],
    [VirDomainState.PAUSED, 11, 'StartingUp'],
    [VirDomainState.PAUSED, 14, 'APIError'],
    [VirDomainState.SHUTDOWN, 1, 'User'],
    [VirDomainState.SHUTOFF, 1, 'Shutdown'],
    [VirDomainState.SHUTOFF, 2, 'Destroyed'],
    [VirDomainState.SHUTOFF, 3, 'Crashed'],
    [VirDomainState.SHUTOFF, 4, 'Migrated'],
    [VirDomainState.SHUTOFF, 6, 'Failed'],
    [VirDomainState.CRASHED, 1, 'Panicked'],
    [VirDomainState.SHUTOFF, 99, 'Unknown'],
    [42, 1, 'Unknown'],
  ])('state %i reason %i -> %s', (state, reason, want) => {
    expect(convReason(state, reason)).toBe(want);
  });

  // libvirt's own reason names (node-libvirt's table, from libvirt-domain.h) must line up with ours:
  // e.g. SHUTOFF reason 4 is MIGRATED there and 'Migrated' here.
  test('every libvirt reason code maps to the KubeVirt reason of the same meaning', () => {
    const special: Record<string, string> = {
      IOERROR: 'IOError',
      SHUTTING_DOWN: 'ShuttingDown',
      API_ERROR: 'APIError',
    };
    for (const [state, names] of Object.entries(DomainStateReasons)) {
      names.forEach((libvirtName, code) => {
        const camel =
          special[libvirtName] ??
          libvirtName
            .toLowerCase()
            .split('_')
            .map((w) => w[0]!.toUpperCase() + w.slice(1))
            .join('');
        const shutdownUser = Number(state) === VirDomainState.SHUTDOWN && libvirtName === 'USER';
        expect([state, code, convReason(Number(state), code)]).toEqual([
          state,
          code,
          shutdownUser ? 'User' : camel,
        ]);
      });
    }
  });
});

test('statusFromLibvirt and isDomainDown', () => {
  expect(statusFromLibvirt(5, 4)).toEqual({ status: 'Shutoff', reason: 'Migrated' });
  expect(isDomainDown(statusFromLibvirt(5, 1))).toBe(true);
  expect(isDomainDown(statusFromLibvirt(6, 1))).toBe(true);
  expect(isDomainDown(statusFromLibvirt(3, 1))).toBe(false);
  expect(isDomainDown(statusFromLibvirt(1, 1))).toBe(false);
});
