// Validation: structural checks derived from the TypeBox schemas, then the semantic rules
// upstream's admission webhooks apply. Every error is returned at once, each with its field path.
import type { TSchema } from '@sinclair/typebox';
import { TypeCompiler, type TypeCheck } from '@sinclair/typebox/compiler';
import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors';
import { isIP } from 'node:net';
import { pointerToPath, sub } from './paths.js';
import { isQuantity, parseQuantity } from './quantity.js';
import {
  API_VERSION,
  DISK_BUSES,
  INTERFACE_BINDINGS,
  INTERFACE_MODELS,
  VOLUME_SOURCES,
  VirtualMachineInstanceMigrationSchema,
  VirtualMachineInstanceSchema,
  VirtualMachineSchema,
} from './schemas.js';

/** One problem found by validation: the field's path and the reason (`${path}: ${reason}` is the
 * message the CLI and the admission webhook print). */
export interface FieldError {
  /** Field path, e.g. `spec.domain.devices.disks[2].name` ('' for the whole document). */
  path: string;
  /** Plain-language reason. */
  reason: string;
}

/** The kinds {@link validateObject} accepts (all of apiVersion kubevirt.io/v1). */
export const KINDS = ['VirtualMachine', 'VirtualMachineInstance', 'VirtualMachineInstanceMigration'] as const;

// ------------------------------------------------------------------ helpers

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const obj = (v: unknown): Obj => (isObj(v) ? v : {});
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/** Quantity value or undefined when absent or invalid (invalid ones are reported by the schema check). */
function qty(v: unknown): number | undefined {
  if (!isQuantity(v)) return undefined;
  try {
    return parseQuantity(v);
  } catch {
    return undefined;
  }
}

/** Deep copy (of JSON-like data: plain objects, arrays, primitives) without null-valued object fields:
 * the API server treats `field: null` as absent. */
export function dropNulls<T>(v: T): T {
  if (typeof v !== 'object' || v === null) return v;
  if (Array.isArray(v)) {
    const arr: unknown[] = new Array(v.length);
    for (let i = 0; i < v.length; i++) arr[i] = dropNulls(v[i] as unknown);
    return arr as T;
  }
  const src = v as Obj;
  const out: Obj = {};
  for (const k in src) {
    if (!Object.hasOwn(src, k)) continue;
    const x = src[k];
    if (x === null || x === undefined) continue;
    // a JSON key "__proto__" stays a plain field of the copy (assignment would set its prototype)
    if (k === '__proto__')
      Object.defineProperty(out, k, {
        value: dropNulls(x),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    else out[k] = dropNulls(x);
  }
  return out as T;
}

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const MAC_RE = /^[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(\1[0-9A-Fa-f]{2}){4}$/;
const PCI_RE = /^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$/;
const SERIAL_RE = /^[A-Za-z0-9_.+-]+$/;
const UUID_RE = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;

/** upstream validatePath: absolute, no relative components, not "/". */
function checkAbsolutePath(p: string | undefined): string | undefined {
  if (p === undefined || p === '') return undefined;
  if (p === '/') return 'must not point to the root directory';
  const parts = p.split('/');
  if (
    !p.startsWith('/') ||
    parts.some((x, i) => x === '.' || x === '..' || (x === '' && i > 0 && i < parts.length - 1))
  ) {
    return `${JSON.stringify(p)} must be an absolute path to a file without relative components`;
  }
  return undefined;
}

/** Checks a Kubernetes DNS-1123 label (at most 63 characters of a-z, 0-9 and '-', starting and ending
 * with a letter or digit). Returns the reason it is invalid, or undefined when it is valid. */
export function checkDns1123Label(v: string): string | undefined {
  if (v.length > 63) return `must be no more than 63 characters (is ${v.length})`;
  if (!DNS1123_LABEL.test(v))
    return `"${v}" is not a valid DNS-1123 label: lower case letters, digits and '-', starting and ending with a letter or digit`;
  return undefined;
}

/** Checks a Kubernetes DNS-1123 subdomain (at most 253 characters of a-z, 0-9, '-' and '.', starting and
 * ending with a letter or digit), e.g. an object name. Returns the reason it is invalid, or undefined. */
export function checkDns1123Subdomain(v: string): string | undefined {
  if (v.length > 253) return `must be no more than 253 characters (is ${v.length})`;
  if (!DNS1123_SUBDOMAIN.test(v))
    return `"${v}" is not a valid DNS-1123 subdomain: lower case letters, digits, '-' and '.', starting and ending with a letter or digit`;
  return undefined;
}

// ------------------------------------------------------------------ structural (schema) checks

const compiled = new Map<TSchema, TypeCheck<TSchema>>();
function checker(schema: TSchema): TypeCheck<TSchema> {
  let c = compiled.get(schema);
  if (!c) {
    c = TypeCompiler.Compile(schema);
    compiled.set(schema, c);
  }
  return c;
}

function describe(v: unknown): string {
  if (v === undefined) return 'nothing';
  const s = JSON.stringify(v);
  return s === undefined ? String(v) : s.length > 40 ? `${s.slice(0, 40)}...` : s;
}

function reasonFor(e: ValueError): string {
  const s = e.schema as TSchema & Record<string, unknown>;
  switch (e.type) {
    case ValueErrorType.ObjectRequiredProperty:
      return 'required field is missing';
    case ValueErrorType.ObjectAdditionalProperties:
      return 'unknown field';
    case ValueErrorType.String:
      return `must be a string, got ${describe(e.value)}`;
    case ValueErrorType.Boolean:
      return `must be true or false, got ${describe(e.value)}`;
    case ValueErrorType.Integer:
      return `must be an integer, got ${describe(e.value)}`;
    case ValueErrorType.Number:
      return `must be a number, got ${describe(e.value)}`;
    case ValueErrorType.IntegerMinimum:
    case ValueErrorType.NumberMinimum:
      return `must be >= ${String(s['minimum'])}, got ${describe(e.value)}`;
    case ValueErrorType.Object:
      return `must be an object, got ${describe(e.value)}`;
    case ValueErrorType.Array:
      return `must be a list, got ${describe(e.value)}`;
    case ValueErrorType.Literal:
      return `must be ${JSON.stringify(s['const'])}, got ${describe(e.value)}`;
    case ValueErrorType.StringFormat:
      if (s['format'] === 'quantity') return `invalid quantity ${describe(e.value)}`;
      return `${describe(e.value)} is not a valid ${String(s['format'])}`;
    case ValueErrorType.Union: {
      if (s['x-kubernetes-int-or-string']) {
        return `invalid quantity ${describe(e.value)}: expected a number with an optional suffix (e.g. 128Mi, 2Gi, 500m, 1G)`;
      }
      const anyOf = (s['anyOf'] as Record<string, unknown>[] | undefined) ?? [];
      if (anyOf.length > 0 && anyOf.every((x) => 'const' in x)) {
        return `unsupported value ${describe(e.value)}: must be one of ${anyOf
          .map((x) => String(x['const']))
          .filter((x) => x !== '')
          .join(', ')}`;
      }
      return e.message;
    }
    default:
      return e.message;
  }
}

function schemaErrors(schema: TSchema, value: unknown): FieldError[] {
  const out: FieldError[] = [];
  const seen = new Set<string>();
  for (const e of checker(schema).Errors(value)) {
    const path = pointerToPath(e.path);
    if (seen.has(path)) continue;
    // an error inside a field already reported as wrong (e.g. `must be an object`) adds nothing
    if ([...seen].some((p) => p !== '' && (path.startsWith(p + '.') || path.startsWith(p + '[')))) continue;
    seen.add(path);
    out.push({ path, reason: reasonFor(e) });
  }
  return out;
}

// ------------------------------------------------------------------ semantic checks

class Errs {
  list: FieldError[] = [];
  add(path: string, reason: string) {
    this.list.push({ path, reason });
  }
}

function validateMetadata(
  meta: unknown,
  base: string,
  e: Errs,
  opts: { nameRequired: boolean; label?: boolean },
) {
  const m = obj(meta);
  const name = str(m['name']);
  if (name === undefined || name === '') {
    if (opts.nameRequired && !str(m['generateName']))
      e.add(sub(base, 'name'), 'required: a name (or generateName) must be given');
  } else {
    const bad = opts.label ? checkDns1123Label(name) : checkDns1123Subdomain(name);
    if (bad) e.add(sub(base, 'name'), bad);
  }
  const ns = str(m['namespace']);
  if (ns !== undefined && ns !== '') {
    const bad = checkDns1123Label(ns);
    if (bad) e.add(sub(base, 'namespace'), bad);
  }
  validateAnnotations(m, base, e);
  if (isObj(m['labels'])) {
    for (const [k, v] of Object.entries(m['labels'])) {
      const p = sub(sub(base, 'labels'), k);
      const badKey = checkQualifiedName(k);
      if (badKey) e.add(p, `label key ${badKey}`);
      if (typeof v === 'string' && v !== '' && (v.length > 63 || !LABEL_VALUE_RE.test(v))) {
        e.add(
          p,
          `label value ${JSON.stringify(v)} must be at most 63 characters of [A-Za-z0-9-_.], starting and ending with a letter or digit`,
        );
      }
    }
  }
}

function validateAnnotations(m: Obj, base: string, e: Errs) {
  if (!isObj(m['annotations'])) return;
  for (const k of Object.keys(m['annotations'])) {
    const bad = checkQualifiedName(k);
    if (bad) e.add(sub(sub(base, 'annotations'), k), `annotation key ${bad}`);
  }
}

const LABEL_VALUE_RE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** Kubernetes qualified name (label and annotation keys): [prefix/]name. */
export function checkQualifiedName(k: string): string | undefined {
  const parts = k.split('/');
  if (parts.length > 2) return `${JSON.stringify(k)} has more than one '/'`;
  const name = parts[parts.length - 1]!;
  if (parts.length === 2) {
    const bad = checkDns1123Subdomain(parts[0]!);
    if (parts[0] === '' || bad)
      return `${JSON.stringify(k)} has an invalid prefix: must be a DNS-1123 subdomain`;
  }
  if (name === '' || name.length > 63 || !LABEL_VALUE_RE.test(name)) {
    return `${JSON.stringify(k)}: the name part must be 1-63 characters of [A-Za-z0-9-_.], starting and ending with a letter or digit`;
  }
  return undefined;
}

/** Unique non-empty names in a list; reports duplicates at `<list>[i].name`. Returns the names. */
function uniqueNames(list: unknown[], base: string, e: Errs, what: string): Map<string, number> {
  const names = new Map<string, number>();
  list.forEach((item, i) => {
    const n = str(obj(item)['name']);
    if (n === undefined) return;
    if (n === '') {
      e.add(sub(sub(base, i), 'name'), `${what} name must not be empty`);
      return;
    }
    const first = names.get(n);
    if (first !== undefined)
      e.add(sub(sub(base, i), 'name'), `duplicate ${what} name "${n}" (also ${sub(base, first)})`);
    else names.set(n, i);
  });
  return names;
}

function validateResourcesAndMemory(domain: Obj, base: string, e: Errs) {
  const res = obj(domain['resources']);
  const requests = obj(res['requests']);
  const limits = obj(res['limits']);
  const memory = obj(domain['memory']);
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
  const guest = qty(memory['guest']);
  const hugepages = obj(memory['hugepages']);
  const pageSizeRaw = hugepages['pageSize'];

  if (requests['memory'] === undefined && limits['memory'] === undefined && memory['guest'] === undefined) {
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
      e.add(sub(sub(base, 'memory'), 'guest'), `must be positive, got ${describe(memory['guest'])}`);
    if (limMem !== undefined && guest > limMem) {
      e.add(
        sub(sub(base, 'memory'), 'guest'),
        `guest memory ${describe(memory['guest'])} is greater than the memory limit ${describe(limits['memory'])}`,
      );
    }
  }
  const maxGuest = qty(memory['maxGuest']);
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
            ? [guest, sub(sub(base, 'memory'), 'guest'), memory['guest']]
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

function validateCpu(domain: Obj, base: string, e: Errs) {
  if (domain['cpu'] === undefined) return;
  const cpu = obj(domain['cpu']);
  const path = sub(base, 'cpu');
  const sockets = num(cpu['sockets']);
  const cores = num(cpu['cores']);
  const threads = num(cpu['threads']);
  const maxSockets = num(cpu['maxSockets']);
  for (const [k, v] of [
    ['sockets', sockets],
    ['cores', cores],
    ['threads', threads],
  ] as const) {
    // 0 means "unset" upstream; negatives are schema errors already
    if (v !== undefined && v > 512) e.add(sub(path, k), `must be at most 512, got ${v}`);
  }
  const vcpus = (sockets || 1) * (cores || 1) * (threads || 1);
  if (vcpus > 512)
    e.add(path, `topology gives ${vcpus} vCPUs (sockets*cores*threads), more than the maximum of 512`);
  if (maxSockets !== undefined && maxSockets > 0 && sockets !== undefined && sockets > maxSockets) {
    e.add(sub(path, 'sockets'), `${sockets} sockets is more than maxSockets ${maxSockets}`);
  }
  const res = obj(domain['resources']);
  const reqCpu = qty(obj(res['requests'])['cpu']);
  const limCpu = qty(obj(res['limits'])['cpu']);
  const dedicated = cpu['dedicatedCpuPlacement'] === true;
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
    const memory = obj(domain['memory']);
    const memReq =
      qty(obj(res['requests'])['memory']) ??
      qty(memory['guest']) ??
      qty(obj(memory['hugepages'])['pageSize']);
    const memLim = qty(obj(res['limits'])['memory']);
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
  } else if (cpu['isolateEmulatorThread'] === true) {
    e.add(sub(path, 'isolateEmulatorThread'), 'only allowed together with dedicatedCpuPlacement');
  }
  const numaPassthrough = obj(cpu['numa'])['guestMappingPassthrough'] !== undefined;
  const gmpPath = sub(sub(path, 'numa'), 'guestMappingPassthrough');
  if (numaPassthrough) {
    if (!dedicated) e.add(gmpPath, 'NUMA guestMappingPassthrough needs dedicatedCpuPlacement: true');
    if (obj(domain['memory'])['hugepages'] === undefined)
      e.add(gmpPath, 'NUMA guestMappingPassthrough needs spec.domain.memory.hugepages');
  }
  if (cpu['realtime'] !== undefined) {
    if (!dedicated) e.add(dPath, 'realtime needs dedicatedCpuPlacement: true');
    if (!numaPassthrough) e.add(gmpPath, 'realtime needs numa.guestMappingPassthrough');
  }
  arr(cpu['features']).forEach((f, i) => {
    const n = str(obj(f)['name']);
    if (n === '') e.add(sub(sub(sub(path, 'features'), i), 'name'), 'must not be empty');
  });
}

function validateFirmware(domain: Obj, base: string, e: Errs) {
  if (domain['firmware'] === undefined) return;
  const fw = obj(domain['firmware']);
  const path = sub(base, 'firmware');
  const uuid = str(fw['uuid']);
  if (uuid !== undefined && uuid !== '' && !UUID_RE.test(uuid))
    e.add(sub(path, 'uuid'), `"${uuid}" is not a UUID (expected 8-4-4-4-12 hex digits)`);
  const serial = str(fw['serial']);
  if (serial !== undefined && serial !== '') {
    if (!SERIAL_RE.test(serial))
      e.add(sub(path, 'serial'), `${describe(serial)} must be made of the characters [A-Za-z0-9_.+-]`);
    if (serial.length > 256) e.add(sub(path, 'serial'), 'must be at most 256 characters');
  }
  const bl = obj(fw['bootloader']);
  if (bl['bios'] !== undefined && bl['efi'] !== undefined)
    e.add(sub(path, 'bootloader'), 'bios and efi are mutually exclusive: choose one');
  if (bl['efi'] !== undefined) {
    const efi = obj(bl['efi']);
    const secureBoot = efi['secureBoot'] !== false; // upstream default: true
    const smm = obj(domain['features'])['smm'];
    const smmEnabled = smm !== undefined && obj(smm)['enabled'] !== false;
    if (secureBoot && !smmEnabled) {
      e.add(
        sub(sub(sub(path, 'bootloader'), 'efi'), 'secureBoot'),
        'EFI secure boot (enabled unless secureBoot: false) requires SMM: set spec.domain.features.smm.enabled: true',
      );
    }
  }
  if (fw['kernelBoot'] !== undefined) {
    const kb = obj(fw['kernelBoot']);
    const kbPath = sub(path, 'kernelBoot');
    if (kb['container'] === undefined) {
      if (kb['kernelArgs'] !== undefined)
        e.add(sub(kbPath, 'kernelArgs'), 'kernelArgs need kernelBoot.container (a kernel to boot)');
    } else {
      const c = obj(kb['container']);
      if (!str(c['kernelPath']) && !str(c['initrdPath']))
        e.add(sub(kbPath, 'container'), 'at least one of kernelPath and initrdPath must be set');
      if (c['image'] === '') e.add(sub(sub(kbPath, 'container'), 'image'), 'must not be empty');
      for (const k of ['kernelPath', 'initrdPath']) {
        const bad = checkAbsolutePath(str(c[k]));
        if (bad) e.add(sub(sub(kbPath, 'container'), k), bad);
      }
      if (str(c['kernelPath']) === undefined && kb['kernelArgs'] !== undefined) {
        e.add(sub(kbPath, 'kernelArgs'), 'kernelArgs need container.kernelPath');
      }
    }
  }
}

/** Upstream's hyperv feature dependencies (pkg/virt-api/webhooks/hyperv.go): [feature, required feature], leaves first. */
export const HYPERV_REQUIRES: readonly (readonly [string, string])[] = [
  ['evmcs', 'vapic'],
  ['ipi', 'vpindex'],
  ['tlbflush', 'vpindex'],
  ['synictimer', 'synic'],
  ['synic', 'vpindex'],
];

function validateClockAndFeatures(domain: Obj, base: string, e: Errs) {
  if (domain['clock'] !== undefined) {
    const clock = obj(domain['clock']);
    const path = sub(base, 'clock');
    if (clock['utc'] !== undefined && clock['timezone'] !== undefined)
      e.add(path, 'utc and timezone are mutually exclusive: choose one');
    const tz = str(clock['timezone']);
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
  const hv = obj(obj(domain['features'])['hyperv']);
  const sl = obj(hv['spinlocks']);
  const n = num(sl['spinlocks']);
  if (n !== undefined && n < 4096)
    e.add(
      sub(sub(sub(sub(base, 'features'), 'hyperv'), 'spinlocks'), 'spinlocks'),
      `must be at least 4096, got ${n}`,
    );
  // upstream ValidateVirtualMachineInstanceHypervFeatureDependencies (a given feature is on unless enabled: false;
  // a missing requirement is added by the defaults, an explicitly disabled one is an error)
  const on = (f: unknown) => f !== undefined && obj(f)['enabled'] !== false;
  const hvPath = sub(sub(base, 'features'), 'hyperv');
  for (const [feat, req] of HYPERV_REQUIRES)
    if (on(hv[feat]) && hv[req] !== undefined && !on(hv[req]))
      e.add(sub(hvPath, feat), `requires ${sub(hvPath, req)}, which is disabled`);
  if (on(hv['evmcs']))
    arr(obj(domain['cpu'])['features']).forEach((f0, i) => {
      const f = obj(f0);
      if (f['name'] === 'vmx' && f['policy'] !== undefined && f['policy'] !== 'require')
        e.add(
          `${sub(sub(base, 'cpu'), 'features')}[${i}].policy`,
          'the vmx CPU feature must have policy require when hyperv evmcs is enabled',
        );
    });
  const vid = str(obj(hv['vendorid'])['vendorid']);
  if (vid !== undefined && (vid.length === 0 || vid.length > 12)) {
    e.add(
      sub(sub(sub(sub(base, 'features'), 'hyperv'), 'vendorid'), 'vendorid'),
      'must be 1 to 12 characters',
    );
  }
}

interface BootOrderUse {
  path: string;
  order: number;
}

function validateDisks(
  devices: Obj,
  dpath: string,
  volumes: Map<string, number> | undefined,
  volList: unknown[],
  boot: BootOrderUse[],
  e: Errs,
) {
  const disks = arr(devices['disks']);
  const base = sub(dpath, 'disks');
  uniqueNames(disks, base, e, 'disk');
  disks.forEach((d0, i) => {
    const d = obj(d0);
    const p = sub(base, i);
    const name = str(d['name']);
    if (name) {
      const bad = checkDns1123Label(name);
      if (bad) e.add(sub(p, 'name'), `${bad} (disk names become container names)`);
    }
    if (name && volumes) {
      const vi = volumes.get(name);
      if (vi === undefined) e.add(sub(p, 'name'), `no volume named "${name}" in spec.volumes`);
      else if (d['lun'] !== undefined) {
        const vol = obj(volList[vi]);
        if (vol['persistentVolumeClaim'] === undefined && vol['dataVolume'] === undefined) {
          e.add(sub(p, 'lun'), 'a lun can only use a persistentVolumeClaim or dataVolume volume');
        }
      }
    }
    const targets = (['disk', 'cdrom', 'lun'] as const).filter((t) => d[t] !== undefined);
    if (targets.length > 1)
      e.add(p, `a disk can be only one of disk, cdrom or lun; got ${targets.join(' and ')}`);
    for (const t of targets) {
      const bus = str(obj(d[t])['bus']);
      if (bus === undefined) continue;
      const bPath = sub(sub(p, t), 'bus');
      if (bus === 'ide') e.add(bPath, 'IDE bus is not supported');
      else if (!(DISK_BUSES as readonly string[]).includes(bus))
        e.add(bPath, `unknown bus "${bus}": must be one of ${DISK_BUSES.join(', ')}`);
      else if (t === 'cdrom' && bus === 'virtio')
        e.add(bPath, 'bus virtio is not valid for a cdrom: use sata or scsi');
      else if (t === 'lun' && bus !== 'scsi')
        // upstream's amd64 defaults give a busless lun sata too; libvirt passes SCSI commands through scsi only
        e.add(
          bPath,
          `a lun needs bus scsi, got ${bus} (a lun without a bus gets sata from the defaults: set scsi)`,
        );
      else if (t === 'disk' && bus === 'sata' && obj(d['disk'])['readonly'] === true)
        e.add(bPath, 'sata hard disks do not support readonly');
    }
    const bo = num(d['bootOrder']);
    if (bo !== undefined) {
      if (bo < 1) e.add(sub(p, 'bootOrder'), `must be 1 or more, got ${bo}`);
      else boot.push({ path: sub(p, 'bootOrder'), order: bo });
    }
    const serial = str(d['serial']);
    if (serial !== undefined) {
      if (!SERIAL_RE.test(serial))
        e.add(sub(p, 'serial'), `"${serial}" must be made of the characters [A-Za-z0-9_.+-]`);
      else if (serial.length > 256) e.add(sub(p, 'serial'), 'must be at most 256 characters');
    }
    if (d['dedicatedIOThread'] === true) {
      const t = targets[0];
      const bus = t ? str(obj(d[t])['bus']) : undefined;
      if (bus !== undefined && bus !== 'virtio') {
        e.add(sub(p, 'dedicatedIOThread'), `IOThreads are only supported for virtio disks, not bus ${bus}`);
      }
    }
    const bs = obj(d['blockSize']);
    if (bs['custom'] !== undefined) {
      const bsPath = sub(p, 'blockSize');
      const mv = bs['matchVolume'];
      if (mv !== undefined && obj(mv)['enabled'] !== false)
        e.add(bsPath, 'custom block sizes and matchVolume are mutually exclusive');
      else {
        const c = obj(bs['custom']);
        const logical = num(c['logical']);
        const physical = num(c['physical']);
        if (logical !== undefined && physical !== undefined && logical > physical) {
          e.add(
            sub(sub(bsPath, 'custom'), 'logical'),
            `logical size ${logical} must not exceed the physical size ${physical}`,
          );
        } else {
          for (const [k, v] of [
            ['logical', logical],
            ['physical', physical],
          ] as const) {
            if (v === undefined) continue;
            if (v < 512 || v > 2097152 || (v & (v - 1)) !== 0)
              e.add(sub(sub(bsPath, 'custom'), k), `must be a power of 2 from 512 to 2097152, got ${v}`);
          }
        }
      }
    }
    const pci = str(obj(d['disk'])['pciAddress']);
    if (pci !== undefined && !PCI_RE.test(pci))
      e.add(sub(sub(p, 'disk'), 'pciAddress'), `"${pci}" is not a PCI address (expected dddd:bb:ss.f)`);
    if (
      pci !== undefined &&
      str(obj(d['disk'])['bus']) !== undefined &&
      str(obj(d['disk'])['bus']) !== 'virtio'
    ) {
      e.add(sub(sub(p, 'disk'), 'pciAddress'), 'pciAddress is only supported on the virtio bus');
    }
  });
}

function validateVolumes(spec: Obj, base: string, e: Errs): Map<string, number> {
  const vols = arr(spec['volumes']);
  const vpath = sub(base, 'volumes');
  const names = uniqueNames(vols, vpath, e, 'volume');
  vols.forEach((v0, i) => {
    const v = obj(v0);
    const p = sub(vpath, i);
    const sources = VOLUME_SOURCES.filter((s) => v[s] !== undefined);
    if (sources.length === 0) e.add(p, `volume has no source: set one of ${VOLUME_SOURCES.join(', ')}`);
    else if (sources.length > 1)
      e.add(p, `volume has ${sources.length} sources (${sources.join(', ')}); exactly one is allowed`);
    const name = str(v['name']);
    if (name) {
      const bad = checkDns1123Label(name);
      if (bad) e.add(sub(p, 'name'), bad);
    }
    const ed = obj(v['emptyDisk']);
    if (v['emptyDisk'] !== undefined) {
      const c = qty(ed['capacity']);
      if (c !== undefined && c <= 0)
        e.add(sub(sub(p, 'emptyDisk'), 'capacity'), `must be positive, got ${describe(ed['capacity'])}`);
    }
    if (v['hostDisk'] !== undefined) {
      const hd = obj(v['hostDisk']);
      const hp = sub(p, 'hostDisk');
      const path = str(hd['path']);
      const badPath = checkAbsolutePath(path);
      if (badPath) e.add(sub(hp, 'path'), badPath);
      if (hd['type'] === 'DiskOrCreate' && hd['capacity'] === undefined)
        e.add(sub(hp, 'capacity'), 'required when type is DiskOrCreate');
      if (hd['type'] === 'Disk' && hd['capacity'] !== undefined)
        e.add(sub(hp, 'capacity'), 'only allowed when type is DiskOrCreate');
    }
    if (v['containerDisk'] !== undefined) {
      const cd = obj(v['containerDisk']);
      if (str(cd['image']) === '') e.add(sub(sub(p, 'containerDisk'), 'image'), 'must not be empty');
      const bad = checkAbsolutePath(str(cd['path']));
      if (bad) e.add(sub(sub(p, 'containerDisk'), 'path'), bad);
    }
    for (const [src, field] of [
      ['configMap', 'name'],
      ['secret', 'secretName'],
      ['serviceAccount', 'serviceAccountName'],
      ['dataVolume', 'name'],
      ['persistentVolumeClaim', 'claimName'],
    ] as const) {
      if (v[src] !== undefined && !str(obj(v[src])[field]))
        e.add(sub(sub(p, src), field), 'required: must not be empty');
    }
    for (const ci of ['cloudInitNoCloud', 'cloudInitConfigDrive'] as const) {
      if (v[ci] === undefined) continue;
      const c = obj(v[ci]);
      const cp = sub(p, ci);
      // upstream's JSON name of the user-data secret is `secretRef`
      const userSources = ['userData', 'userDataBase64', 'secretRef'].filter(
        (k) => c[k] !== undefined && c[k] !== '',
      );
      const netSources = ['networkData', 'networkDataBase64', 'networkDataSecretRef'].filter(
        (k) => c[k] !== undefined && c[k] !== '',
      );
      if (userSources.length === 0 && netSources.length === 0) {
        e.add(
          cp,
          'needs user data or network data: set userData, userDataBase64, secretRef, networkData, networkDataBase64 or networkDataSecretRef',
        );
      }
      if (userSources.length > 1)
        e.add(cp, `only one user data source allowed, got ${userSources.join(', ')}`);
      if (netSources.length > 1)
        e.add(cp, `only one network data source allowed, got ${netSources.join(', ')}`);
      for (const [plain, b64, what] of [
        ['userData', 'userDataBase64', 'user data'],
        ['networkData', 'networkDataBase64', 'network data'],
      ] as const) {
        const enc = str(c[b64]);
        let len = Buffer.byteLength(str(c[plain]) ?? '');
        if (enc !== undefined) {
          if (
            !/^[A-Za-z0-9+/]*={0,2}$/.test(enc.replace(/\s/g, '')) ||
            enc.replace(/\s/g, '').length % 4 !== 0
          )
            e.add(sub(cp, b64), 'is not valid base64');
          else len = Math.max(len, Buffer.from(enc, 'base64').length);
        }
        if (len > 2048)
          e.add(
            cp,
            `${what} is ${len} bytes, more than the 2048-byte limit: use ${plain}SecretRef for larger data`,
          );
      }
    }
  });
  for (const src of ['serviceAccount', 'downwardMetrics', 'memoryDump'] as const) {
    const n = vols.filter((v) => obj(v)[src] !== undefined).length;
    if (n > 1) e.add(vpath, `at most one ${src} volume is allowed, got ${n}`);
  }
  return names;
}

function validateNetworks(spec: Obj, base: string, boot: BootOrderUse[], e: Errs) {
  const domain = obj(spec['domain']);
  const devices = obj(domain['devices']);
  const dpath = sub(sub(base, 'domain'), 'devices');
  const nets = arr(spec['networks']);
  const npath = sub(base, 'networks');
  const netNames = uniqueNames(nets, npath, e, 'network');
  let podNets = 0;
  nets.forEach((n0, i) => {
    const n = obj(n0);
    const p = sub(npath, i);
    const kinds = (['pod', 'multus'] as const).filter((k) => n[k] !== undefined);
    if (kinds.length === 0) e.add(p, 'network has no source: set pod or multus');
    if (kinds.length > 1) e.add(p, 'pod and multus are mutually exclusive');
    if (n['pod'] !== undefined) {
      podNets++;
      if (podNets > 1) e.add(sub(p, 'pod'), 'only one pod network is allowed');
    }
    if (n['multus'] !== undefined && str(obj(n['multus'])['networkName']) === '')
      e.add(sub(sub(p, 'multus'), 'networkName'), 'must not be empty');
  });
  const multusDefaults = nets
    .map((n, i) => [obj(obj(n)['multus'])['default'] === true, i] as const)
    .filter(([d]) => d);
  if (multusDefaults.length > 1)
    e.add(
      sub(sub(sub(npath, multusDefaults[1]![1]), 'multus'), 'default'),
      'only one multus network can be the default',
    );
  if (multusDefaults.length > 0 && podNets > 0) {
    e.add(
      sub(sub(sub(npath, multusDefaults[0]![1]), 'multus'), 'default'),
      'a default multus network replaces the pod network: remove the pod network',
    );
  }

  const ifaces = arr(devices['interfaces']);
  const ipath = sub(dpath, 'interfaces');
  const ifNames = uniqueNames(ifaces, ipath, e, 'interface');
  const macs = new Map<string, number>();
  ifaces.forEach((f0, i) => {
    const f = obj(f0);
    const p = sub(ipath, i);
    const name = str(f['name']);
    let net: Obj | undefined;
    if (name && (spec['networks'] === undefined || Array.isArray(spec['networks']))) {
      const ni = netNames.get(name);
      if (ni === undefined) e.add(sub(p, 'name'), `no network named "${name}" in spec.networks`);
      else net = obj(nets[ni]);
    }
    const bindings = INTERFACE_BINDINGS.filter((b) => f[b] !== undefined);
    if (bindings.length === 0)
      e.add(p, `interface has no binding: set one of ${INTERFACE_BINDINGS.join(', ')}`);
    else if (bindings.length > 1)
      e.add(p, `interface has ${bindings.length} bindings (${bindings.join(', ')}); exactly one is allowed`);
    if (net && bindings.length === 1) {
      const b = bindings[0]!;
      if (b === 'masquerade' && net['pod'] === undefined)
        e.add(sub(p, 'masquerade'), 'masquerade is only allowed on the pod network');
      if ((b === 'slirp' || b === 'passt') && net['pod'] === undefined)
        e.add(sub(p, b), `${b} is only allowed on the pod network`);
      if (b === 'sriov' && net['pod'] !== undefined)
        e.add(sub(p, 'sriov'), 'sriov is only allowed on a multus network');
      if (b === 'macvtap' && net['pod'] !== undefined)
        e.add(sub(p, 'macvtap'), 'macvtap is only allowed on a multus network');
    }
    const model = str(f['model']);
    if (model !== undefined && !(INTERFACE_MODELS as readonly string[]).includes(model)) {
      e.add(
        sub(p, 'model'),
        `unknown interface model "${model}": must be one of ${INTERFACE_MODELS.join(', ')}`,
      );
    }
    if (model !== undefined && f['sriov'] !== undefined)
      e.add(sub(p, 'model'), 'a model cannot be set for an sriov interface');
    const mac = str(f['macAddress']);
    if (mac !== undefined) {
      if (!MAC_RE.test(mac))
        e.add(
          sub(p, 'macAddress'),
          `"${mac}" is not a MAC address (expected six hex pairs like 02:00:00:aa:bb:cc)`,
        );
      else {
        const norm = mac.toLowerCase().replace(/-/g, ':');
        if (parseInt(norm.slice(0, 2), 16) & 1)
          e.add(sub(p, 'macAddress'), `"${mac}" is a multicast address; a NIC needs a unicast address`);
        const first = macs.get(norm);
        if (first !== undefined)
          e.add(sub(p, 'macAddress'), `duplicate MAC address (also ${sub(ipath, first)}.macAddress)`);
        else macs.set(norm, i);
      }
    }
    const pci = str(f['pciAddress']);
    if (pci !== undefined && !PCI_RE.test(pci))
      e.add(sub(p, 'pciAddress'), `"${pci}" is not a PCI address (expected dddd:bb:ss.f)`);
    const bo = num(f['bootOrder']);
    if (bo !== undefined) {
      if (bo < 1) e.add(sub(p, 'bootOrder'), `must be 1 or more, got ${bo}`);
      else boot.push({ path: sub(p, 'bootOrder'), order: bo });
    }
    const ports = arr(f['ports']);
    if (
      ports.length > 0 &&
      f['masquerade'] === undefined &&
      f['slirp'] === undefined &&
      f['passt'] === undefined
    ) {
      e.add(sub(p, 'ports'), 'port forwarding is only supported with masquerade, slirp or passt');
    }
    const portNames = new Set<string>();
    const portKeys = new Set<string>();
    ports.forEach((pt0, j) => {
      const pt = obj(pt0);
      const pp = sub(sub(p, 'ports'), j);
      const port = num(pt['port']);
      if (port !== undefined && (port < 1 || port > 65535))
        e.add(sub(pp, 'port'), `must be between 1 and 65535, got ${port}`);
      else if (port !== undefined) {
        // the same port and protocol twice would be two NAT rules for one port
        const key = `${str(pt['protocol']) ?? 'TCP'}/${port}`;
        if (portKeys.has(key)) e.add(sub(pp, 'port'), `duplicate port ${key}`);
        portKeys.add(key);
      }
      const pn = str(pt['name']);
      if (pn) {
        if (portNames.has(pn)) e.add(sub(pp, 'name'), `duplicate port name "${pn}"`);
        portNames.add(pn);
        if (pn.length > 15 || !DNS1123_LABEL.test(pn))
          e.add(
            sub(pp, 'name'),
            `"${pn}" is not a valid port name (DNS-1123 label of at most 15 characters)`,
          );
      }
    });
  });

  // every network needs an interface (upstream: "every network needs a matching interface")
  const ifacesKnown = devices['interfaces'] === undefined || Array.isArray(devices['interfaces']);
  nets.forEach((n0, i) => {
    const name = str(obj(n0)['name']);
    if (ifacesKnown && name && !ifNames.has(name))
      e.add(
        sub(sub(npath, i), 'name'),
        `no interface in spec.domain.devices.interfaces uses network "${name}"`,
      );
  });
}

function validateDevices(
  spec: Obj,
  base: string,
  volumes: Map<string, number> | undefined,
  boot: BootOrderUse[],
  e: Errs,
) {
  const domain = obj(spec['domain']);
  const devices = obj(domain['devices']);
  const dpath = sub(sub(base, 'domain'), 'devices');
  validateDisks(devices, dpath, volumes, arr(spec['volumes']), boot, e);

  const inputs = arr(devices['inputs']);
  uniqueNames(inputs, sub(dpath, 'inputs'), e, 'input');
  inputs.forEach((in0, i) => {
    const inp = obj(in0);
    const p = sub(sub(dpath, 'inputs'), i);
    const t = str(inp['type']);
    if (t !== undefined && t !== 'tablet')
      e.add(sub(p, 'type'), `unsupported input type "${t}": only tablet is supported`);
    const bus = str(inp['bus']);
    if (bus !== undefined && bus !== 'usb' && bus !== 'virtio')
      e.add(sub(p, 'bus'), `unsupported input bus "${bus}": must be usb or virtio`);
  });

  const seen = new Map<number, string>();
  for (const b of boot) {
    const first = seen.get(b.order);
    if (first !== undefined) e.add(b.path, `boot order ${b.order} is already used by ${first}`);
    else seen.set(b.order, b.path);
  }
}

function validateProbesAndDns(spec: Obj, base: string, e: Errs) {
  const hasPodNetwork = arr(spec['networks']).some((n) => obj(n)['pod'] !== undefined);
  for (const k of ['readinessProbe', 'livenessProbe'] as const) {
    if (spec[k] === undefined) continue;
    const probe = obj(spec[k]);
    const p = sub(base, k);
    const handlers = ['httpGet', 'tcpSocket', 'exec', 'guestAgentPing'].filter((h) => probe[h] !== undefined);
    if (handlers.length === 0) e.add(p, 'a probe needs one of httpGet, tcpSocket, exec or guestAgentPing');
    if (handlers.length > 1) e.add(p, `a probe can have only one handler, got ${handlers.join(', ')}`);
    if (!hasPodNetwork) {
      for (const h of ['httpGet', 'tcpSocket'])
        if (probe[h] !== undefined) e.add(sub(p, h), `${h} probes need the pod network`);
    }
  }
  if (spec['startStrategy'] === 'Paused' && spec['livenessProbe'] !== undefined) {
    e.add(sub(base, 'startStrategy'), 'a VMI started paused cannot have a livenessProbe');
  }
  const dnsPolicy = str(spec['dnsPolicy']);
  const dnsConfig = spec['dnsConfig'];
  if (dnsPolicy === 'None' && dnsConfig === undefined)
    e.add(sub(base, 'dnsConfig'), 'required when dnsPolicy is None');
  if (isObj(dnsConfig)) {
    const dp = sub(base, 'dnsConfig');
    const ns = arr(dnsConfig['nameservers']);
    if (dnsPolicy === 'None' && ns.length === 0)
      e.add(sub(dp, 'nameservers'), 'at least one nameserver is required when dnsPolicy is None');
    if (ns.length > 3) e.add(sub(dp, 'nameservers'), `at most 3 nameservers, got ${ns.length}`);
    ns.forEach((x, i) => {
      if (typeof x !== 'string' || !isIP(x))
        e.add(sub(sub(dp, 'nameservers'), i), `${describe(x)} is not an IP address`);
    });
    const searches = arr(dnsConfig['searches']);
    if (searches.length > 6) e.add(sub(dp, 'searches'), `at most 6 search domains, got ${searches.length}`);
    searches.forEach((x, i) => {
      const bad = typeof x === 'string' ? checkDns1123Subdomain(x) : 'must be a string';
      if (bad) e.add(sub(sub(dp, 'searches'), i), bad);
    });
  }
}

function validateAccessCredentials(spec: Obj, base: string, e: Errs) {
  const creds = arr(spec['accessCredentials']);
  const vols = arr(spec['volumes']).map(obj);
  const hasNoCloud = vols.some((v) => v['cloudInitNoCloud'] !== undefined);
  const hasConfigDrive = vols.some((v) => v['cloudInitConfigDrive'] !== undefined);
  creds.forEach((c0, i) => {
    const c = obj(c0);
    const p = sub(sub(base, 'accessCredentials'), i);
    const kinds = ['sshPublicKey', 'userPassword'].filter((k) => c[k] !== undefined);
    if (kinds.length !== 1) {
      e.add(p, 'exactly one of sshPublicKey and userPassword must be set');
      return;
    }
    const k = kinds[0]!;
    const cred = obj(c[k]);
    if (obj(obj(cred['source'])['secret'])['secretName'] === undefined)
      e.add(sub(sub(p, k), 'source'), 'needs source.secret.secretName');
    const pm = obj(cred['propagationMethod']);
    const methods = Object.keys(pm);
    if (methods.length !== 1)
      e.add(sub(sub(p, k), 'propagationMethod'), 'exactly one propagation method must be set');
    if (pm['noCloud'] !== undefined && !hasNoCloud)
      e.add(sub(sub(p, k), 'propagationMethod'), 'noCloud propagation needs a cloudInitNoCloud volume');
    if (pm['configDrive'] !== undefined && !hasConfigDrive)
      e.add(
        sub(sub(p, k), 'propagationMethod'),
        'configDrive propagation needs a cloudInitConfigDrive volume',
      );
    if (k === 'userPassword' && methods.some((m) => m !== 'qemuGuestAgent'))
      e.add(sub(sub(p, k), 'propagationMethod'), 'userPassword only supports qemuGuestAgent');
    if (
      pm['qemuGuestAgent'] !== undefined &&
      k === 'sshPublicKey' &&
      arr(obj(pm['qemuGuestAgent'])['users']).length === 0
    ) {
      e.add(
        sub(sub(sub(sub(p, k), 'propagationMethod'), 'qemuGuestAgent'), 'users'),
        'at least one user is required',
      );
    }
  });
}

/** Semantic rules for a VMI spec at `base` (e.g. `spec` or `spec.template.spec`). */
function validateVmiSpec(spec0: unknown, base: string, e: Errs) {
  if (!isObj(spec0)) return;
  const spec = spec0;
  if (!isObj(spec['domain'])) {
    // without a domain, cross-checks (disk -> volume, memory, ...) would only repeat that error
    validateVolumes(spec, base, e);
    return;
  }
  const domain = spec['domain'];
  const dbase = sub(base, 'domain');
  validateResourcesAndMemory(domain, dbase, e);
  validateCpu(domain, dbase, e);
  validateFirmware(domain, dbase, e);
  validateClockAndFeatures(domain, dbase, e);
  const volumeNames = validateVolumes(spec, base, e);
  // a volumes field of the wrong type is a schema error; don't also report every disk as volume-less
  const volumes = spec['volumes'] === undefined || Array.isArray(spec['volumes']) ? volumeNames : undefined;
  const boot: BootOrderUse[] = [];
  validateNetworks(spec, base, boot, e);
  validateDevices(spec, base, volumes, boot, e);
  const hostname = str(spec['hostname']);
  if (hostname) {
    const bad = checkDns1123Label(hostname);
    if (bad) e.add(sub(base, 'hostname'), bad);
  }
  const subdomain = str(spec['subdomain']);
  if (subdomain) {
    const bad = checkDns1123Subdomain(subdomain);
    if (bad) e.add(sub(base, 'subdomain'), bad);
  }
  validateProbesAndDns(spec, base, e);
  validateAccessCredentials(spec, base, e);
  const arch = str(spec['architecture']);
  if (arch !== undefined && arch !== '' && !['amd64', 'arm64', 's390x', 'ppc64le'].includes(arch)) {
    e.add(
      sub(base, 'architecture'),
      `unsupported architecture "${arch}": must be amd64, arm64, s390x or ppc64le`,
    );
  }
  arr(spec['tolerations']).forEach((t0, i) => {
    const t = obj(t0);
    if (t['operator'] === 'Exists' && t['value'] !== undefined && t['value'] !== '') {
      e.add(sub(sub(sub(base, 'tolerations'), i), 'value'), 'must be empty when operator is Exists');
    }
  });
}

// ------------------------------------------------------------------ entry points

function merge(structural: FieldError[], semantic: FieldError[]): FieldError[] {
  const out = [...structural];
  const key = (f: FieldError) => `${f.path}\u0000${f.reason}`;
  const have = new Set(out.map(key));
  // A field the schema already rejected is not re-reported by the semantic rules.
  const badPaths = new Set(structural.map((f) => f.path));
  for (const f of semantic) {
    if (have.has(key(f)) || badPaths.has(f.path)) continue;
    have.add(key(f));
    out.push(f);
  }
  return out;
}

function preamble(o: unknown, kind: string): FieldError[] | undefined {
  if (!isObj(o)) return [{ path: '', reason: `must be an object (a ${kind} manifest), got ${describe(o)}` }];
  return undefined;
}

/** Validates a VirtualMachineInstance manifest as upstream's admission webhook does (schema, names,
 * disk/volume and interface/network pairing, ...). Returns every problem found, [] when valid;
 * never throws. Null-valued fields count as absent. */
export function validateVirtualMachineInstance(o: unknown): FieldError[] {
  const pre = preamble(o, 'VirtualMachineInstance');
  if (pre) return pre;
  const v = dropNulls(o as Obj);
  const e = new Errs();
  validateMetadata(v['metadata'], 'metadata', e, { nameRequired: true });
  validateVmiSpec(v['spec'], 'spec', e);
  return merge(schemaErrors(VirtualMachineInstanceSchema, v), e.list);
}

/** Validates a VirtualMachine manifest: its metadata, `running` vs `runStrategy`, the VMI template (as
 * {@link validateVirtualMachineInstance}) and dataVolumeTemplates. Returns every problem, [] when valid. */
export function validateVirtualMachine(o: unknown): FieldError[] {
  const pre = preamble(o, 'VirtualMachine');
  if (pre) return pre;
  const v = dropNulls(o as Obj);
  const e = new Errs();
  validateMetadata(v['metadata'], 'metadata', e, { nameRequired: true });
  const spec = obj(v['spec']);
  if (spec['running'] !== undefined && spec['runStrategy'] !== undefined) {
    e.add('spec.running', 'running and runStrategy are mutually exclusive: set only runStrategy');
  }
  for (const f of ['instancetype', 'preference']) {
    if (spec[f] !== undefined)
      e.add(
        `spec.${f}`,
        `${f === 'instancetype' ? 'instancetypes' : 'preferences'} are not implemented by kubevirt-ts: set the CPU, memory and devices in spec.template.spec.domain`,
      );
  }
  const tmpl = obj(spec['template']);
  validateMetadata(tmpl['metadata'], 'spec.template.metadata', e, { nameRequired: false });
  validateVmiSpec(tmpl['spec'], 'spec.template.spec', e);
  const dvNames = new Set(
    arr(obj(tmpl['spec'])['volumes'])
      .map((v) => str(obj(obj(v)['dataVolume'])['name']))
      .filter((n): n is string => !!n),
  );
  arr(spec['dataVolumeTemplates']).forEach((t, i) => {
    const p = sub('spec.dataVolumeTemplates', i);
    const name = str(obj(obj(t)['metadata'])['name']);
    if (!name) e.add(sub(sub(p, 'metadata'), 'name'), 'required: a data volume template needs a name');
    else if (!dvNames.has(name))
      e.add(
        p,
        `data volume template "${name}" is not used by any dataVolume volume in spec.template.spec.volumes`,
      );
  });
  return merge(schemaErrors(VirtualMachineSchema, v), e.list);
}

/** Validates a VirtualMachineInstanceMigration manifest (metadata, `spec.vmiName` a DNS-1123 subdomain).
 * Returns every problem found, [] when valid. */
export function validateVirtualMachineInstanceMigration(o: unknown): FieldError[] {
  const pre = preamble(o, 'VirtualMachineInstanceMigration');
  if (pre) return pre;
  const v = dropNulls(o as Obj);
  const e = new Errs();
  validateMetadata(v['metadata'], 'metadata', e, { nameRequired: true });
  const vmiName = str(obj(v['spec'])['vmiName']);
  if (vmiName === '') e.add('spec.vmiName', 'must not be empty');
  else if (vmiName !== undefined) {
    const bad = checkDns1123Subdomain(vmiName);
    if (bad) e.add('spec.vmiName', bad);
  }
  return merge(schemaErrors(VirtualMachineInstanceMigrationSchema, v), e.list);
}

/** Validate any of the three kinds, dispatching on `kind`. */
export function validateObject(o: unknown): FieldError[] {
  if (!isObj(o))
    return [{ path: '', reason: `must be an object (a Kubernetes manifest), got ${describe(o)}` }];
  const kind = o['kind'];
  const errs: FieldError[] = [];
  if (o['apiVersion'] !== API_VERSION) {
    errs.push({ path: 'apiVersion', reason: `must be "${API_VERSION}", got ${describe(o['apiVersion'])}` });
  }
  let rest: FieldError[];
  switch (kind) {
    case 'VirtualMachineInstance':
      rest = validateVirtualMachineInstance(o);
      break;
    case 'VirtualMachine':
      rest = validateVirtualMachine(o);
      break;
    case 'VirtualMachineInstanceMigration':
      rest = validateVirtualMachineInstanceMigration(o);
      break;
    default:
      return [
        ...errs,
        { path: 'kind', reason: `unsupported kind ${describe(kind)}: must be one of ${KINDS.join(', ')}` },
      ];
  }
  return merge(errs, rest);
}
