// launcherContext: the converter context of one sync from the handler's VirtualMachineOptions, the VMI
// and what disk preparation found (as upstream's launcher builds it).
import { describe, expect, test } from '@jest/globals';
import type { DomainSpec, ObjectMeta } from '@kubevirt-ts/api';
import { launcherContext } from './wiring.js';

const base = { allowEmulation: true, kvmAvailable: false };
/** A VMI's metadata and spec with this domain (all launcherContext reads). */
const vmiWith = (domain: DomainSpec, metadata: ObjectMeta = {}) => ({ metadata, spec: { domain } });

describe('launcherContext', () => {
  test('without options: free page reporting and the serial console log on, no disksInfo', () => {
    const c = launcherContext(base, vmiWith({}), undefined);
    expect(c.freePageReporting).toBe(true);
    expect(c.serialConsoleLog).toBe(true);
    expect(c.disksInfo).toBeUndefined();
    expect(c.allowEmulation).toBe(true);
  });

  test('the handler options are honoured: SMBIOS, stats period, preallocated volumes, disksInfo, cluster config', () => {
    const c = launcherContext(base, vmiWith({}), {
      VirtualMachineSMBios: { manufacturer: 'KubeVirt', product: 'None', family: 'KubeVirt', sku: '' },
      MemBalloonStatsPeriod: 10,
      PreallocatedVolumes: ['thick'],
      DisksInfo: { root: { format: 'raw', virtualSize: '1048576' }, odd: { format: 'vmdk' } },
      clusterConfig: { FreePageReportingDisabled: true, SerialConsoleLogDisabled: true },
    });
    expect(c.smbios).toEqual({ manufacturer: 'KubeVirt', product: 'None', family: 'KubeVirt' });
    expect(c.memBalloonStatsPeriod).toBe(10);
    expect(c.volumesDiscardIgnore).toEqual(['thick']);
    expect(c.disksInfo).toEqual({ root: { format: 'raw', virtualSize: 1048576 } });
    expect(c.freePageReporting).toBe(false);
    expect(c.serialConsoleLog).toBe(false);
  });

  test('what preparation found wins over the handler disksInfo', () => {
    const c = launcherContext(
      base,
      undefined,
      { DisksInfo: { root: { format: 'qcow2' }, other: { format: 'qcow2' } } },
      { root: { format: 'raw', virtualSize: 4096 } },
    );
    expect(c.disksInfo).toEqual({ root: { format: 'raw', virtualSize: 4096 }, other: { format: 'qcow2' } });
  });

  test.each([
    ['no balloon', vmiWith({ devices: { autoattachMemBalloon: false } })],
    ['dedicated CPUs', vmiWith({ cpu: { dedicatedCpuPlacement: true } })],
    ['realtime', vmiWith({ cpu: { realtime: {} } })],
    ['hugepages', vmiWith({ memory: { hugepages: { pageSize: '2Mi' } } })],
    ['the annotation', vmiWith({}, { annotations: { 'kubevirt.io/free-page-reporting-disabled': 'true' } })],
  ])('free page reporting off for %s', (_n, vmi) => {
    expect(launcherContext(base, vmi, undefined).freePageReporting).toBe(false);
  });

  test("the VMI's logSerialConsole wins over the cluster config", () => {
    const on = vmiWith({ devices: { logSerialConsole: true } });
    const off = vmiWith({ devices: { logSerialConsole: false } });
    const disabled = { clusterConfig: { SerialConsoleLogDisabled: true } };
    expect(launcherContext(base, on, disabled).serialConsoleLog).toBe(true);
    expect(launcherContext(base, off, undefined).serialConsoleLog).toBe(false);
  });
});
