// Validation of spec.domain's compute parts: resources and memory, CPU, firmware, clock and features.
import { sub } from './paths.js';
import type { DomainSpec } from './schemas.js';
import { Errs, SERIAL_RE, UUID_RE, checkAbsolutePath, qty } from './validate-common.js';
import { type Checked, describe } from './validate-schema.js';

type Domain = Checked<DomainSpec>;

export function validateResourcesAndMemory(
  domain: Domain,
  base: string,
  e: Errs,
  o: { memoryFromInstancetype?: boolean } = {},
) {
  const requests = domain.resources?.requests ?? {};
  const limits = domain.resources?.limits ?? {};
  const memory = domain.memory ?? {};
  const resPath = sub(base, 'resources');

  for (const [kind, map] of [
    ['requests', requests],
    ['limits', limits],
  ] as const) {
    for (const [k, v] of Object.entries(map)) {
      const n = qty(v);
      if (n !== undefined && n < 0)
        e.add(sub(sub(resPath, kind), k), `must not be negative, got ${describe(v)}`);
    }
  }

  const reqMem = qty(requests['memory']);
  const limMem = qty(limits['memory']);
  const guest = qty(memory.guest);
  const pageSizeRaw = memory.hugepages?.pageSize;

  if (
    !o.memoryFromInstancetype &&
    !e.given(requests['memory'], sub(sub(resPath, 'requests'), 'memory')) &&
    !e.given(limits['memory'], sub(sub(resPath, 'limits'), 'memory')) &&
    !e.given(memory.guest, sub(sub(base, 'memory'), 'guest'))
  ) {
    e.add(
      sub(sub(resPath, 'requests'), 'memory'),
      `no memory requested: set ${resPath}.requests.memory, ${resPath}.limits.memory or ${base}.memory.guest`,
    );
  }
  if (reqMem !== undefined && reqMem > 0 && reqMem < 1e6) {
    e.add(
      sub(sub(resPath, 'requests'), 'memory'),
      `must be at least 1M, got ${describe(requests['memory'])}`,
    );
  }
  if (reqMem !== undefined && limMem !== undefined && reqMem > limMem) {
    e.add(
      sub(sub(resPath, 'requests'), 'memory'),
      `request ${describe(requests['memory'])} is greater than limit ${describe(limits['memory'])}`,
    );
  }
  if (guest !== undefined) {
    if (guest <= 0)
      e.add(sub(sub(base, 'memory'), 'guest'), `must be positive, got ${describe(memory.guest)}`);
    if (limMem !== undefined && guest > limMem) {
      e.add(
        sub(sub(base, 'memory'), 'guest'),
        `guest memory ${describe(memory.guest)} is greater than the memory limit ${describe(limits['memory'])}`,
      );
    }
  }
  const maxGuest = qty(memory.maxGuest);
  if (maxGuest !== undefined && guest !== undefined && maxGuest < guest) {
    e.add(sub(sub(base, 'memory'), 'maxGuest'), `must not be less than spec.domain.memory.guest`);
  }

  if (pageSizeRaw !== undefined) {
    const pPath = sub(sub(sub(base, 'memory'), 'hugepages'), 'pageSize');
    const page = qty(pageSizeRaw);
    if (page === undefined || page <= 0)
      e.add(pPath, `invalid page size ${describe(pageSizeRaw)}: expected a quantity like 2Mi or 1Gi`);
    else {
      // upstream checks the memory request (the guest memory when no request is given: it becomes the request)
      const [vmMem, memPath, memRaw] =
        reqMem !== undefined
          ? [reqMem, sub(sub(resPath, 'requests'), 'memory'), requests['memory']]
          : guest !== undefined
            ? [guest, sub(sub(base, 'memory'), 'guest'), memory.guest]
            : [undefined, '', undefined];
      if (vmMem !== undefined) {
        if (page > vmMem)
          e.add(
            memPath,
            `${describe(memRaw)} is smaller than the hugepage size ${describe(pageSizeRaw)} (spec.domain.memory.hugepages.pageSize)`,
          );
        else if (vmMem % page !== 0)
          e.add(
            memPath,
            `${describe(memRaw)} is not a multiple of the hugepage size ${describe(pageSizeRaw)} (spec.domain.memory.hugepages.pageSize)`,
          );
      }
    }
  }

  const reqCpu = qty(requests['cpu']);
  const limCpu = qty(limits['cpu']);
  if (reqCpu !== undefined && limCpu !== undefined && reqCpu > limCpu) {
    e.add(
      sub(sub(resPath, 'requests'), 'cpu'),
      `request ${describe(requests['cpu'])} is greater than limit ${describe(limits['cpu'])}`,
    );
  }
}

export function validateCpu(domain: Domain, base: string, e: Errs) {
  const cpu = domain.cpu;
  if (cpu === undefined) return;
  const path = sub(base, 'cpu');
  const { sockets, cores, threads, maxSockets } = cpu;
  // no upper bound on the topology, as upstream: a VMI no node can hold is admitted and stays unschedulable
  const vcpus = (sockets || 1) * (cores || 1) * (threads || 1);
  if (maxSockets !== undefined && maxSockets > 0 && sockets !== undefined && sockets > maxSockets) {
    e.add(sub(path, 'sockets'), `${sockets} sockets is more than maxSockets ${maxSockets}`);
  }
  const reqCpu = qty(domain.resources?.requests?.['cpu']);
  const limCpu = qty(domain.resources?.limits?.['cpu']);
  const dedicated = cpu.dedicatedCpuPlacement === true;
  const dPath = sub(path, 'dedicatedCpuPlacement');
  if (dedicated) {
    // upstream validateCpuPinning
    const topologyVcpus = sockets || cores || threads ? vcpus : 0;
    const req = reqCpu !== undefined ? Math.ceil(reqCpu) : 0;
    const lim = limCpu !== undefined ? Math.ceil(limCpu) : 0;
    if (req === 0 && lim === 0 && topologyVcpus === 0) {
      e.add(
        dPath,
        'dedicatedCpuPlacement needs resources.requests.cpu, resources.limits.cpu or a CPU topology (cores/sockets/threads)',
      );
    }
    for (const [k, v] of [
      ['requests', reqCpu],
      ['limits', limCpu],
    ] as const) {
      if (v !== undefined && v > 0 && !Number.isInteger(v)) {
        e.add(
          sub(sub(sub(base, 'resources'), k), 'cpu'),
          `dedicatedCpuPlacement needs a whole number of CPUs, got ${v}`,
        );
      }
    }
    if (req > 0 && lim > 0 && req !== lim)
      e.add(
        dPath,
        `resources.requests.cpu (${req}) and resources.limits.cpu (${lim}) must be equal with dedicatedCpuPlacement`,
      );
    if ((req > 0 || lim > 0) && topologyVcpus > 0 && req !== topologyVcpus && lim !== topologyVcpus) {
      e.add(
        dPath,
        `the CPU topology gives ${topologyVcpus} vCPUs but the CPU ${req > 0 ? `request is ${req}` : `limit is ${lim}`}; with dedicatedCpuPlacement they must match`,
      );
    }
    if (threads !== undefined && threads > 2)
      e.add(dPath, `at most 2 threads per core with dedicatedCpuPlacement, got ${threads}`);
    // the admission defaults derive a missing memory request from memory.guest (or the hugepage size)
    const memReq =
      qty(domain.resources?.requests?.['memory']) ??
      qty(domain.memory?.guest) ??
      qty(domain.memory?.hugepages?.pageSize);
    const memLim = qty(domain.resources?.limits?.['memory']);
    if (memReq === undefined && memLim === undefined) {
      e.add(
        sub(sub(sub(base, 'resources'), 'limits'), 'memory'),
        'dedicatedCpuPlacement needs memory.guest, resources.requests.memory or resources.limits.memory',
      );
    } else if (
      memReq !== undefined &&
      memLim !== undefined &&
      memReq > 0 &&
      memLim > 0 &&
      memReq !== memLim
    ) {
      e.add(
        sub(sub(sub(base, 'resources'), 'requests'), 'memory'),
        'must equal resources.limits.memory with dedicatedCpuPlacement (guaranteed QoS)',
      );
    }
  } else if (cpu.isolateEmulatorThread === true) {
    e.add(sub(path, 'isolateEmulatorThread'), 'only allowed together with dedicatedCpuPlacement');
  }
  const numaPassthrough = cpu.numa?.guestMappingPassthrough !== undefined;
  const gmpPath = sub(sub(path, 'numa'), 'guestMappingPassthrough');
  if (numaPassthrough) {
    if (!dedicated) e.add(gmpPath, 'NUMA guestMappingPassthrough needs dedicatedCpuPlacement: true');
    if (domain.memory?.hugepages === undefined)
      e.add(gmpPath, 'NUMA guestMappingPassthrough needs spec.domain.memory.hugepages');
  }
  if (cpu.realtime !== undefined) {
    if (!dedicated) e.add(dPath, 'realtime needs dedicatedCpuPlacement: true');
    if (!numaPassthrough) e.add(gmpPath, 'realtime needs numa.guestMappingPassthrough');
  }
  cpu.features?.forEach((f, i) => {
    if (f.name === '') e.add(sub(sub(sub(path, 'features'), i), 'name'), 'must not be empty');
  });
}

export function validateFirmware(domain: Domain, base: string, e: Errs) {
  const fw = domain.firmware;
  if (fw === undefined) return;
  const path = sub(base, 'firmware');
  const uuid = fw.uuid;
  if (uuid !== undefined && uuid !== '' && !UUID_RE.test(uuid))
    e.add(sub(path, 'uuid'), `"${uuid}" is not a UUID (expected 8-4-4-4-12 hex digits)`);
  const serial = fw.serial;
  if (serial !== undefined && serial !== '') {
    if (!SERIAL_RE.test(serial))
      e.add(sub(path, 'serial'), `${describe(serial)} must be made of the characters [A-Za-z0-9_.+-]`);
    if (serial.length > 256) e.add(sub(path, 'serial'), 'must be at most 256 characters');
  }
  const bl = fw.bootloader ?? {};
  if (bl.bios !== undefined && bl.efi !== undefined)
    e.add(sub(path, 'bootloader'), 'bios and efi are mutually exclusive: choose one');
  if (bl.efi !== undefined) {
    const secureBoot = bl.efi.secureBoot !== false; // upstream default: true
    const smm = domain.features?.smm;
    const smmEnabled = smm !== undefined && smm.enabled !== false;
    if (secureBoot && !smmEnabled) {
      e.add(
        sub(sub(sub(path, 'bootloader'), 'efi'), 'secureBoot'),
        'EFI secure boot (enabled unless secureBoot: false) requires SMM: set spec.domain.features.smm.enabled: true',
      );
    }
  }
  const kb = fw.kernelBoot;
  if (kb !== undefined) {
    const kbPath = sub(path, 'kernelBoot');
    const c = kb.container;
    if (c === undefined) {
      if (kb.kernelArgs !== undefined)
        e.add(sub(kbPath, 'kernelArgs'), 'kernelArgs need kernelBoot.container (a kernel to boot)');
    } else {
      // a path the schema rejected (a control character) was given
      const given = (k: 'kernelPath' | 'initrdPath') =>
        !!c[k] || e.reported(sub(sub(kbPath, 'container'), k));
      if (!given('kernelPath') && !given('initrdPath'))
        e.add(sub(kbPath, 'container'), 'at least one of kernelPath and initrdPath must be set');
      if (c.image === '') e.add(sub(sub(kbPath, 'container'), 'image'), 'must not be empty');
      for (const k of ['kernelPath', 'initrdPath'] as const) {
        const bad = checkAbsolutePath(c[k]);
        if (bad) e.add(sub(sub(kbPath, 'container'), k), bad);
      }
      if (!given('kernelPath') && kb.kernelArgs !== undefined) {
        e.add(sub(kbPath, 'kernelArgs'), 'kernelArgs need container.kernelPath');
      }
    }
  }
}

/** A Hyper-V enlightenment of `spec.domain.features.hyperv` that others depend on or that depends on one. */
export type HypervFeature = 'evmcs' | 'vapic' | 'ipi' | 'vpindex' | 'tlbflush' | 'synictimer' | 'synic';

/** Upstream's hyperv feature dependencies (pkg/virt-api/webhooks/hyperv.go): [feature, required feature], leaves first. */
export const HYPERV_REQUIRES: readonly (readonly [HypervFeature, HypervFeature])[] = [
  ['evmcs', 'vapic'],
  ['ipi', 'vpindex'],
  ['tlbflush', 'vpindex'],
  ['synictimer', 'synic'],
  ['synic', 'vpindex'],
];

export function validateClockAndFeatures(domain: Domain, base: string, e: Errs) {
  const clock = domain.clock;
  if (clock !== undefined) {
    const path = sub(base, 'clock');
    if (clock.utc !== undefined && clock.timezone !== undefined)
      e.add(path, 'utc and timezone are mutually exclusive: choose one');
    const tz = clock.timezone;
    if (tz !== undefined) {
      let ok = tz !== '';
      try {
        if (ok) new Intl.DateTimeFormat('en-US', { timeZone: tz });
      } catch {
        ok = false;
      }
      if (!ok)
        e.add(sub(path, 'timezone'), `unknown time zone "${tz}" (expected an IANA name like Europe/Berlin)`);
    }
  }
  const hv = domain.features?.hyperv ?? {};
  const n = hv.spinlocks?.spinlocks;
  if (n !== undefined && n < 4096)
    e.add(
      sub(sub(sub(sub(base, 'features'), 'hyperv'), 'spinlocks'), 'spinlocks'),
      `must be at least 4096, got ${n}`,
    );
  // upstream ValidateVirtualMachineInstanceHypervFeatureDependencies (a given feature is on unless enabled: false;
  // a missing requirement is added by the defaults, an explicitly disabled one is an error)
  const on = (f: { enabled?: boolean } | undefined) => f !== undefined && f.enabled !== false;
  const hvPath = sub(sub(base, 'features'), 'hyperv');
  for (const [feat, req] of HYPERV_REQUIRES)
    if (on(hv[feat]) && hv[req] !== undefined && !on(hv[req]))
      e.add(sub(hvPath, feat), `requires ${sub(hvPath, req)}, which is disabled`);
  if (on(hv.evmcs))
    domain.cpu?.features?.forEach((f, i) => {
      if (f.name === 'vmx' && f.policy !== undefined && f.policy !== 'require')
        e.add(
          `${sub(sub(base, 'cpu'), 'features')}[${i}].policy`,
          'the vmx CPU feature must have policy require when hyperv evmcs is enabled',
        );
    });
  const vid = hv.vendorid?.vendorid;
  if (vid !== undefined && (vid.length === 0 || vid.length > 12)) {
    e.add(
      sub(sub(sub(sub(base, 'features'), 'hyperv'), 'vendorid'), 'vendorid'),
      'must be 1 to 12 characters',
    );
  }
}
