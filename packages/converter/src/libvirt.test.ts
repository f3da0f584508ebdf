// Validity against libvirt itself: virt-xml-validate (libvirt's RelaxNG schema) and virDomainDefineXML
// (virsh define) on a real private libvirtd with the qemu driver, for every reference vector and
// every hand-written case.
import { describe, expect, test } from '@jest/globals';
import { setVirtualMachineInstanceDefaults, validateVirtualMachineInstance } from '@kubevirt-ts/api';
import { toDomain } from './convert.js';
import { parseDomainXml, toDomainXml } from './xml.js';
import { sessionDaemonForSuite, xmlValidate } from './test-libvirtd.js';
import { vectors } from './test-util.js';
import { CASES } from './test-cases.js';
import type { ConverterContext } from './context.js';

// the daemon runs unprivileged, where /dev/kvm is not usable: the emulation path (domain type qemu)
const CTX: ConverterContext = {
  allowEmulation: true,
  kvmAvailable: false,
  memBalloonStatsPeriod: 10,
  serialConsoleLog: true,
  isBlockPVC: { pvcblock: true, lunblock: true },
  cpuSet: [0, 1],
  isBlockDV: {},
};

const daemon = sessionDaemonForSuite();

const inputs = [
  // 15-xml-metachars' disk serial is refused by API validation and libvirt alike (parity.test.ts): drop it here
  ...vectors().map((v) => {
    const vmi = structuredClone(v.vmi);
    if (v.name === '15-xml-metachars') delete vmi.spec.domain.devices!.disks![0]!.serial;
    return [`vector ${v.name}`, vmi, false] as const;
  }),
  ...Object.entries(CASES).map(([n, vmi]) => [`case ${n}`, vmi, true] as const),
];

describe('libvirt accepts every output', () => {
  test.each(inputs)('%s: virt-xml-validate and virsh define', (name, vmi, mustValidate) => {
    if (mustValidate) expect(validateVirtualMachineInstance(vmi)).toEqual([]);
    const xml = toDomainXml(toDomain(setVirtualMachineInstanceDefaults(vmi), CTX));
    const v = xmlValidate(xml);
    expect([name, v.ok ? 'valid' : v.output]).toEqual([name, 'valid']);
    const d = daemon().define(xml);
    expect([name, d.ok ? 'defined' : d.output]).toEqual([name, 'defined']);
  });

  test.each(inputs.filter(([n]) => !n.includes('15-')).map(([n, v]) => [n, v] as const))(
    "%s: parseDomainXml reads libvirt's own XML back to the same devices",
    (_n, vmi) => {
      const ours = toDomain(setVirtualMachineInstanceDefaults(vmi), CTX);
      const back = parseDomainXml(daemon().defineAndDump(toDomainXml(ours)));
      expect(back.name).toBe(ours.name);
      expect(back.type).toBe(ours.type);
      expect(back.memory).toBe(ours.memory);
      expect(back.vcpu.count).toBe(ours.vcpu.count);
      expect(back.cpu?.topology).toEqual(ours.cpu?.topology);
      const disk = (d: NonNullable<typeof ours.devices.disks>[number]) => [
        d.alias,
        d.device,
        d.target.dev,
        d.target.bus,
        d.source,
        d.serial,
        d.boot?.order,
        d.readonly ?? false,
      ];
      // libvirt lists disks ordered by bus and target; compare by alias
      const byAlias = (a: unknown[], b: unknown[]) => String(a[0]).localeCompare(String(b[0]));
      expect((back.devices.disks ?? []).map(disk).sort(byAlias)).toEqual(
        (ours.devices.disks ?? []).map(disk).sort(byAlias),
      );
      const nic = (i: NonNullable<typeof ours.devices.interfaces>[number]) => [
        i.alias,
        i.type,
        i.model,
        i.boot?.order,
      ];
      expect((back.devices.interfaces ?? []).map(nic)).toEqual((ours.devices.interfaces ?? []).map(nic));
      for (const [i, iface] of (ours.devices.interfaces ?? []).entries())
        if (iface.mac) expect(back.devices.interfaces![i]!.mac).toBe(iface.mac);
      expect(back.devices.serials?.map((x) => x.source?.path)).toEqual(
        ours.devices.serials?.map((x) => x.source?.path),
      );
      expect(back.devices.graphics).toEqual(ours.devices.graphics);
    },
  );

  test('hotplugged volumes (file and block) are accepted too', () => {
    const xml = toDomainXml(
      toDomain(setVirtualMachineInstanceDefaults(CASES['storage-all-kinds']!), {
        ...CTX,
        hotplugVolumes: { pvcfile: {}, dv: { isBlock: true }, pvcblock: { ready: false } },
      }),
    );
    const v = xmlValidate(xml);
    expect(v.ok ? 'valid' : v.output).toBe('valid');
    const d = daemon().define(xml);
    expect(d.ok ? 'defined' : d.output).toBe('defined');
  });

  test("the standalone passt NIC (QEMU passthrough): valid, defined, and libvirt's XML reads back to the same arguments", () => {
    const vmi = setVirtualMachineInstanceDefaults({
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstance',
      metadata: { name: 'passt', namespace: 'ns', uid: 'u-passt' },
      spec: {
        domain: {
          resources: { requests: { memory: '64Mi' } },
          devices: { interfaces: [{ name: 'default', masquerade: {}, ports: [{ port: 8080 }] }] },
        },
        networks: [{ name: 'default', pod: {} }],
      },
    });
    const ours = toDomain(vmi, { ...CTX, podNetworkBinding: 'passt' });
    expect(ours.qemuArgs).toHaveLength(4);
    const xml = toDomainXml(ours);
    const v = xmlValidate(xml);
    expect(v.ok ? 'valid' : v.output).toBe('valid');
    const dumped = daemon().defineAndDump(xml);
    expect(dumped).toContain('<qemu:commandline>');
    expect(parseDomainXml(dumped).qemuArgs).toEqual(ours.qemuArgs);
  });

  test('libvirt reads back the serials and SMBIOS strings with metacharacters exactly', () => {
    const vec = vectors().find((v) => v.name === '15-xml-metachars')!;
    const vmi = structuredClone(vec.vmi);
    vmi.spec.domain.devices!.disks![0]!.serial = 'x_.+- 1';
    vmi.spec.domain.chassis = { manufacturer: '</chassis><qemu:commandline>&amp;\'"' };
    const xml = toDomainXml(toDomain(setVirtualMachineInstanceDefaults(vmi), CTX));
    const back = daemon().defineAndDump(xml);
    const d = parseDomainXml(back);
    expect(d.devices.disks?.[0]?.serial).toBe('x_.+- 1');
    expect(d.sysinfo?.system?.find((e) => e.name === 'serial')?.value).toBe('a<b>&\'"c');
    expect(d.sysinfo?.chassis?.find((e) => e.name === 'manufacturer')?.value).toBe(
      '</chassis><qemu:commandline>&amp;\'"',
    );
    expect(back).not.toContain('<qemu:commandline');
  });
});
