// libvirt domain XML -> domain model, with fast-xml-parser: ours, or libvirt's own getXMLDesc output.
import { XMLParser } from 'fast-xml-parser';
import { HYPERV_KEYS } from './model.js';
import type {
  Channel,
  Clock,
  Controller,
  CPU,
  Devices,
  Disk,
  Domain,
  DomainOS,
  Features,
  Hyperv,
  Input,
  Interface,
  MemBalloon,
  MemoryBacking,
  Rng,
  Serial,
  SysInfoEntry,
  Sound,
  Timer,
  Tpm,
  Video,
  Watchdog,
} from './model.js';

const A = '@_';
type XNode = Record<string, unknown>;

const parserOptions = {
  ignoreAttributes: false,
  attributeNamePrefix: A,
  textNodeName: '#text',
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: false,
  processEntities: true,
  htmlEntities: false,
  ignoreDeclaration: true,
  ignorePiTags: true,
  removeNSPrefix: false,
  // no isArray: list() takes one element or several alike; jPath: false spares a path string per node
  jPath: false,
};
const parser = new XMLParser(parserOptions);

class ParseError extends Error {}

function fail(path: string, msg: string): never {
  throw new ParseError(`domain XML: ${path}: ${msg}`);
}

function isObj(v: unknown): v is XNode {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function node(parent: XNode | undefined, key: string): XNode | undefined {
  const v = parent?.[key];
  if (v === undefined) return undefined;
  if (isObj(v)) return v;
  if (typeof v === 'string') return { '#text': v };
  return undefined;
}

function list(parent: XNode | undefined, key: string): XNode[] {
  const v = parent?.[key];
  if (v === undefined) return [];
  const arr = Array.isArray(v) ? v : [v];
  return arr.map((x) => (isObj(x) ? x : { '#text': String(x) }));
}

function text(n: XNode | undefined): string | undefined {
  if (!n) return undefined;
  const t = n['#text'];
  return t === undefined ? '' : String(t);
}

function reqText(parent: XNode, key: string, path: string): string {
  const n = node(parent, key);
  if (!n) fail(path, 'missing');
  return text(n) as string;
}

function attr(n: XNode | undefined, name: string): string | undefined {
  const v = n?.[A + name];
  return v === undefined ? undefined : String(v);
}

function reqAttr(n: XNode, name: string, path: string): string {
  const v = attr(n, name);
  if (v === undefined) fail(`${path}/@${name}`, 'missing');
  return v;
}

function num(v: string | undefined, path: string): number | undefined {
  if (v === undefined) return undefined;
  const t = v.trim();
  if (!/^\d+$/.test(t)) fail(path, `not a number: ${JSON.stringify(v)}`);
  return Number(t);
}

function reqNum(v: string | undefined, path: string): number {
  const n = num(v, path);
  if (n === undefined) fail(path, 'missing');
  return n;
}

const UNIT: Record<string, number> = {
  b: 1,
  bytes: 1,
  k: 1024,
  kib: 1024,
  kb: 1000,
  m: 1024 ** 2,
  mib: 1024 ** 2,
  mb: 1000 ** 2,
  g: 1024 ** 3,
  gib: 1024 ** 3,
  gb: 1000 ** 3,
  t: 1024 ** 4,
  tib: 1024 ** 4,
  tb: 1000 ** 4,
};

function bytes(n: XNode, path: string): number {
  const unit = (attr(n, 'unit') ?? 'KiB').toLowerCase();
  const mult = UNIT[unit];
  if (mult === undefined) fail(path, `unknown unit ${unit}`);
  return reqNum(text(n), path) * mult;
}

/** Sets key only when the value is defined, so the model keeps no `undefined` fields. */
function put<T extends object, K extends keyof T>(o: T, k: K, v: T[K] | undefined): void {
  if (v !== undefined) o[k] = v;
}

function cleanAttrs<T>(n: XNode | undefined, names: string[], numeric: string[] = []): T | undefined {
  if (!n) return undefined;
  const out: Record<string, unknown> = {};
  for (const name of names) {
    const v = attr(n, name);
    if (v === undefined) continue;
    out[name] = numeric.includes(name) ? num(v, name) : v;
  }
  return out as T;
}

function parseEntries(n: XNode | undefined): SysInfoEntry[] | undefined {
  if (!n) return undefined;
  const es = list(n, 'entry').map((e) => ({
    name: reqAttr(e, 'name', 'sysinfo entry'),
    value: text(e) ?? '',
  }));
  return es.length ? es : undefined;
}

function parseOS(n: XNode): DomainOS {
  const t = node(n, 'type');
  if (!t) fail('os/type', 'missing');
  const os: DomainOS = {
    type: {
      arch: attr(t, 'arch') ?? '',
      machine: attr(t, 'machine') ?? '',
      value: (text(t)?.trim() ?? 'hvm') as 'hvm',
    },
  };
  const loader = node(n, 'loader');
  if (loader) {
    os.loader = { path: text(loader) ?? '' };
    put(os.loader, 'readonly', attr(loader, 'readonly') as 'yes' | 'no' | undefined);
    put(os.loader, 'secure', attr(loader, 'secure') as 'yes' | 'no' | undefined);
    put(os.loader, 'type', attr(loader, 'type') as 'pflash' | 'rom' | undefined);
  }
  const nvram = node(n, 'nvram');
  if (nvram) {
    os.nvram = { path: text(nvram) ?? '' };
    put(os.nvram, 'template', attr(nvram, 'template'));
  }
  put(os, 'kernel', text(node(n, 'kernel')));
  put(os, 'initrd', text(node(n, 'initrd')));
  put(os, 'cmdline', text(node(n, 'cmdline')));
  const boots = list(n, 'boot');
  if (boots.length) os.boot = boots.map((b) => ({ dev: reqAttr(b, 'dev', 'os/boot') as 'hd' }));
  const bm = node(n, 'bootmenu');
  if (bm) os.bootmenu = cleanAttrs(bm, ['enable', 'timeout'], ['timeout']) as DomainOS['bootmenu'];
  const smbios = node(n, 'smbios');
  if (smbios) os.smbios = { mode: reqAttr(smbios, 'mode', 'os/smbios') as 'sysinfo' };
  const bios = node(n, 'bios');
  if (bios) os.bios = { useserial: reqAttr(bios, 'useserial', 'os/bios') as 'yes' };
  return os;
}

function parseHyperv(n: XNode): Hyperv {
  const h: Hyperv = {};
  put(h, 'mode', attr(n, 'mode') as Hyperv['mode']);
  for (const k of HYPERV_KEYS) {
    const f = node(n, k);
    if (!f) continue;
    const state = (attr(f, 'state') ?? 'on') as 'on' | 'off';
    if (k === 'spinlocks') {
      h.spinlocks = { state };
      put(h.spinlocks, 'retries', num(attr(f, 'retries'), 'hyperv/spinlocks/@retries'));
    } else if (k === 'vendor_id') {
      h.vendor_id = { state };
      put(h.vendor_id, 'value', attr(f, 'value'));
    } else if (k === 'stimer') {
      h.stimer = { state };
      const direct = node(f, 'direct');
      if (direct) h.stimer.direct = { state: (attr(direct, 'state') ?? 'on') as 'on' };
    } else {
      (h as Record<string, unknown>)[k] = { state };
    }
  }
  return h;
}

function parseFeatures(n: XNode): Features {
  const f: Features = {};
  if (node(n, 'acpi')) f.acpi = true;
  const apic = node(n, 'apic');
  if (apic) f.apic = cleanAttrs(apic, ['eoi']) as Features['apic'];
  const hv = node(n, 'hyperv');
  if (hv) f.hyperv = parseHyperv(hv);
  const kvm = node(n, 'kvm');
  if (kvm) {
    f.kvm = {};
    const hidden = node(kvm, 'hidden');
    if (hidden) f.kvm.hidden = { state: (attr(hidden, 'state') ?? 'on') as 'on' };
  }
  for (const k of ['pvspinlock', 'pmu', 'vmport'] as const) {
    const x = node(n, k);
    if (x) f[k] = { state: (attr(x, 'state') ?? 'on') as 'on' };
  }
  if (node(n, 'smm')) f.smm = true;
  const tb = node(node(n, 'tcg'), 'tb-cache');
  if (tb) f.tcg = { tbCache: bytes(tb, 'features/tcg/tb-cache') };
  return f;
}

function parseCPU(n: XNode): CPU {
  const c: CPU = { mode: (attr(n, 'mode') ?? 'custom') as CPU['mode'] };
  put(c, 'model', text(node(n, 'model')));
  const topo = node(n, 'topology');
  if (topo)
    c.topology = {
      sockets: reqNum(attr(topo, 'sockets'), 'cpu/topology/@sockets'),
      cores: reqNum(attr(topo, 'cores'), 'cpu/topology/@cores'),
      threads: reqNum(attr(topo, 'threads'), 'cpu/topology/@threads'),
    };
  const feats = list(n, 'feature');
  if (feats.length)
    c.features = feats.map((f) => ({
      name: reqAttr(f, 'name', 'cpu/feature'),
      policy: (attr(f, 'policy') ?? 'require') as 'require',
    }));
  const numa = node(n, 'numa');
  if (numa)
    c.numa = {
      cells: list(numa, 'cell').map((x) => ({
        id: reqNum(attr(x, 'id'), 'cpu/numa/cell/@id'),
        cpus: attr(x, 'cpus') ?? '',
        memory: reqNum(attr(x, 'memory'), 'cpu/numa/cell/@memory'),
        unit: attr(x, 'unit') ?? 'KiB',
      })),
    };
  return c;
}

function parseClock(n: XNode): Clock {
  const c = cleanAttrs(n, ['offset', 'timezone', 'adjustment', 'basis']) as Clock;
  if (!c.offset) c.offset = 'utc'; // libvirt's default
  const timers = list(n, 'timer');
  if (timers.length)
    c.timers = timers.map(
      (t) => cleanAttrs(t, ['name', 'tickpolicy', 'present', 'track', 'frequency'], ['frequency']) as Timer,
    );
  return c;
}

function parseMemoryBacking(n: XNode): MemoryBacking {
  const m: MemoryBacking = {};
  const hp = node(n, 'hugepages');
  if (hp) {
    const pages = list(hp, 'page');
    m.hugepages = pages.length
      ? {
          pages: pages.map((p) => ({
            size: reqNum(attr(p, 'size'), 'hugepages/page/@size'),
            unit: attr(p, 'unit') ?? 'KiB',
          })),
        }
      : {};
  }
  const src = node(n, 'source');
  if (src) m.source = { type: reqAttr(src, 'type', 'memoryBacking/source') as 'memfd' };
  const acc = node(n, 'access');
  if (acc) m.access = { mode: reqAttr(acc, 'mode', 'memoryBacking/access') as 'shared' };
  return m;
}

function parseAddress(n: XNode | undefined): Disk['address'] | undefined {
  if (!n) return undefined;
  if (attr(n, 'type') === 'drive')
    return {
      type: 'drive',
      controller: reqNum(attr(n, 'controller') ?? '0', 'address/@controller'),
      bus: reqNum(attr(n, 'bus') ?? '0', 'address/@bus'),
      unit: reqNum(attr(n, 'unit') ?? '0', 'address/@unit'),
    };
  if (attr(n, 'type') === 'pci')
    return {
      type: 'pci',
      domain: attr(n, 'domain') ?? '0x0000',
      bus: attr(n, 'bus') ?? '0x00',
      slot: attr(n, 'slot') ?? '0x00',
      function: attr(n, 'function') ?? '0x0',
    };
  return undefined;
}

function parseDisk(n: XNode, i: number): Disk {
  const p = `devices/disk[${i}]`;
  const target = node(n, 'target');
  if (!target) fail(`${p}/target`, 'missing');
  const drv = node(n, 'driver');
  const d: Disk = {
    type: (attr(n, 'type') ?? 'file') as Disk['type'],
    device: (attr(n, 'device') ?? 'disk') as Disk['device'],
    target: {
      dev: reqAttr(target, 'dev', `${p}/target`),
      bus: (attr(target, 'bus') ?? 'virtio') as 'virtio',
    },
    driver: {
      name: 'qemu',
      type: (attr(drv, 'type') ?? 'raw') as 'raw',
      ...(cleanAttrs(
        drv,
        ['cache', 'io', 'discard', 'error_policy', 'iothread', 'queues'],
        ['iothread', 'queues'],
      ) ?? {}),
    },
  };
  put(d, 'model', attr(n, 'model') as Disk['model']);
  const src = node(n, 'source');
  if (src) d.source = cleanAttrs(src, ['file', 'dev']);
  put(d.target, 'tray', attr(target, 'tray') as 'open' | undefined);
  const bs = node(n, 'backingStore');
  if (bs && (node(bs, 'format') || node(bs, 'source')))
    d.backingStore = {
      type: (attr(bs, 'type') ?? 'file') as 'file',
      format: attr(node(bs, 'format'), 'type') ?? 'raw',
      source: cleanAttrs(node(bs, 'source'), ['file', 'dev']) ?? {},
      ...(node(bs, 'backingStore') ? { terminated: true } : {}),
    };
  if (node(n, 'readonly')) d.readonly = true;
  if (node(n, 'shareable')) d.shareable = true;
  put(d, 'serial', text(node(n, 'serial')));
  const boot = node(n, 'boot');
  if (boot) d.boot = { order: reqNum(attr(boot, 'order'), `${p}/boot/@order`) };
  const blockio = node(n, 'blockio');
  if (blockio)
    d.blockio = {
      logical_block_size: reqNum(attr(blockio, 'logical_block_size'), `${p}/blockio/@logical_block_size`),
      physical_block_size: reqNum(attr(blockio, 'physical_block_size'), `${p}/blockio/@physical_block_size`),
    };
  put(d, 'alias', attr(node(n, 'alias'), 'name'));
  put(d, 'address', parseAddress(node(n, 'address')));
  return d;
}

function parseInterface(n: XNode, i: number): Interface {
  const p = `devices/interface[${i}]`;
  const it: Interface = {
    type: (attr(n, 'type') ?? 'ethernet') as Interface['type'],
    model: attr(node(n, 'model'), 'type') ?? '',
  };
  put(it, 'mac', attr(node(n, 'mac'), 'address'));
  const target = node(n, 'target');
  if (target) it.target = cleanAttrs(target, ['dev', 'managed']);
  const drv = node(n, 'driver');
  if (drv) it.driver = cleanAttrs(drv, ['name', 'queues'], ['queues']);
  put(it, 'mtu', num(attr(node(n, 'mtu'), 'size'), `${p}/mtu/@size`));
  const boot = node(n, 'boot');
  if (boot) it.boot = { order: reqNum(attr(boot, 'order'), `${p}/boot/@order`) };
  const rom = node(n, 'rom');
  if (rom) it.rom = { enabled: (attr(rom, 'enabled') ?? 'yes') as 'yes' };
  const acpi = node(n, 'acpi');
  if (acpi) it.acpi = { index: reqNum(attr(acpi, 'index'), `${p}/acpi/@index`) };
  put(it, 'alias', attr(node(n, 'alias'), 'name'));
  put(it, 'address', parseAddress(node(n, 'address')) as Interface['address']);
  return it;
}

function parseDevices(n: XNode): Devices {
  const d: Devices = {};
  put(d, 'emulator', text(node(n, 'emulator')));
  const disks = list(n, 'disk');
  if (disks.length) d.disks = disks.map(parseDisk);
  const ctrls = list(n, 'controller');
  if (ctrls.length)
    d.controllers = ctrls.map((c, i) => {
      const out: Controller = {
        type: reqAttr(c, 'type', `devices/controller[${i}]`) as Controller['type'],
        index: reqNum(attr(c, 'index') ?? '0', `devices/controller[${i}]/@index`),
      };
      put(out, 'model', attr(c, 'model'));
      const drv = node(c, 'driver');
      if (drv) out.driver = cleanAttrs(drv, ['iothread', 'queues'], ['iothread', 'queues']);
      return out;
    });
  const ifaces = list(n, 'interface');
  if (ifaces.length) d.interfaces = ifaces.map(parseInterface);
  const serials = list(n, 'serial');
  if (serials.length)
    d.serials = serials.map((s, i) => {
      const out: Serial = {
        type: (attr(s, 'type') ?? 'pty') as Serial['type'],
        target: { port: reqNum(attr(node(s, 'target'), 'port') ?? '0', `devices/serial[${i}]/target/@port`) },
      };
      const src = node(s, 'source');
      if (src && attr(src, 'path') !== undefined)
        out.source = { mode: (attr(src, 'mode') ?? 'bind') as 'bind', path: attr(src, 'path') as string };
      const log = node(s, 'log');
      if (log) out.log = cleanAttrs(log, ['file', 'append']) as Serial['log'];
      return out;
    });
  const consoles = list(n, 'console');
  if (consoles.length)
    d.consoles = consoles.map((c, i) => ({
      type: 'pty',
      target: {
        type: (attr(node(c, 'target'), 'type') ?? 'serial') as 'serial',
        port: reqNum(attr(node(c, 'target'), 'port') ?? '0', `devices/console[${i}]/target/@port`),
      },
    }));
  const channels = list(n, 'channel');
  if (channels.length)
    d.channels = channels.map((c) => {
      const out: Channel = {
        type: 'unix',
        target: { type: 'virtio', name: attr(node(c, 'target'), 'name') ?? '' },
      };
      const src = node(c, 'source');
      if (src) out.source = cleanAttrs(src, ['mode', 'path']) as Channel['source'];
      return out;
    });
  const inputs = list(n, 'input');
  if (inputs.length)
    d.inputs = inputs.map((x) => {
      const out = cleanAttrs(x, ['type', 'bus', 'model']) as Input;
      put(out, 'alias', attr(node(x, 'alias'), 'name'));
      return out;
    });
  const tpms = list(n, 'tpm');
  if (tpms.length)
    d.tpm = tpms.map((t) => ({
      model: (attr(t, 'model') ?? 'tpm-tis') as Tpm['model'],
      backend: cleanAttrs(node(t, 'backend'), ['type', 'version', 'persistent_state']) as Tpm['backend'],
    }));
  const graphics = list(n, 'graphics');
  if (graphics.length)
    d.graphics = graphics.map((g) => ({
      type: 'vnc',
      listen: { type: 'socket', socket: attr(node(g, 'listen'), 'socket') ?? '' },
    }));
  const sound = list(n, 'sound');
  if (sound.length)
    d.sound = sound.map((s) => {
      const out: Sound = { model: (attr(s, 'model') ?? 'ich9') as Sound['model'] };
      put(out, 'alias', attr(node(s, 'alias'), 'name'));
      return out;
    });
  const video = list(n, 'video');
  if (video.length)
    d.video = video.map((v) => ({
      model: cleanAttrs(node(v, 'model'), ['type', 'heads', 'vram'], ['heads', 'vram']) as Video['model'],
    }));
  const wd = list(n, 'watchdog');
  if (wd.length)
    d.watchdog = wd.map((w) => {
      const out = cleanAttrs(w, ['model', 'action']) as Watchdog;
      put(out, 'alias', attr(node(w, 'alias'), 'name'));
      return out;
    });
  const mb = node(n, 'memballoon');
  if (mb) {
    d.memballoon = cleanAttrs(mb, ['model', 'freePageReporting']) as MemBalloon;
    const stats = node(mb, 'stats');
    if (stats) d.memballoon.stats = { period: reqNum(attr(stats, 'period'), 'memballoon/stats/@period') };
  }
  const rng = list(n, 'rng');
  if (rng.length)
    d.rng = rng.map((r) => ({
      model: (attr(r, 'model') ?? 'virtio') as Rng['model'],
      backend: { model: 'random', path: text(node(r, 'backend')) ?? '' },
    }));
  return d;
}

/** Parses libvirt domain XML (ours, or libvirt's own getXMLDesc output) into the domain model.
 * Elements the model does not cover are ignored. Throws on malformed XML or a DOCTYPE. */
export function parseDomainXml(xml: string): Domain {
  if (/<!DOCTYPE|<!ENTITY/i.test(xml)) fail('/', 'DOCTYPE and entity declarations are not accepted');
  let doc: XNode;
  try {
    doc = parser.parse(xml, true) as XNode;
  } catch (e) {
    fail('/', `malformed XML: ${(e as Error).message}`);
  }
  const root = node(doc, 'domain');
  if (!root) fail('/', 'no <domain> root element');
  const memory = node(root, 'memory');
  if (!memory) fail('memory', 'missing');
  const vcpu = node(root, 'vcpu');
  const os = node(root, 'os');
  if (!os) fail('os', 'missing');
  const d: Domain = {
    type: (attr(root, 'type') ?? 'kvm') as Domain['type'],
    name: reqText(root, 'name', 'name'),
    memory: bytes(memory, 'memory'),
    vcpu: { count: vcpu ? reqNum(text(vcpu), 'vcpu') : 1 },
    os: parseOS(os),
    devices: {},
  };
  put(d, 'uuid', text(node(root, 'uuid')));
  const kv = node(node(root, 'metadata'), 'kubevirt');
  if (kv) {
    d.metadata = { uid: text(node(kv, 'uid')) ?? '' };
    put(
      d.metadata,
      'gracePeriodSeconds',
      num(text(node(node(kv, 'graceperiod'), 'deletionGracePeriodSeconds')), 'metadata/kubevirt/graceperiod'),
    );
  }
  const cur = node(root, 'currentMemory');
  if (cur) d.currentMemory = bytes(cur, 'currentMemory');
  const mb = node(root, 'memoryBacking');
  if (mb) d.memoryBacking = parseMemoryBacking(mb);
  put(d.vcpu, 'placement', attr(vcpu, 'placement') as 'static' | undefined);
  put(d, 'iothreads', num(text(node(root, 'iothreads')), 'iothreads'));
  const tune = node(root, 'cputune');
  if (tune) {
    d.cputune = {
      vcpupin: list(tune, 'vcpupin').map((p) => ({
        vcpu: reqNum(attr(p, 'vcpu'), 'cputune/vcpupin/@vcpu'),
        cpuset: reqAttr(p, 'cpuset', 'cputune/vcpupin'),
      })),
    };
    const emu = node(tune, 'emulatorpin');
    if (emu) d.cputune.emulatorpin = { cpuset: reqAttr(emu, 'cpuset', 'cputune/emulatorpin') };
    const iop = list(tune, 'iothreadpin');
    if (iop.length)
      d.cputune.iothreadpin = iop.map((p) => ({
        iothread: reqNum(attr(p, 'iothread'), 'cputune/iothreadpin/@iothread'),
        cpuset: reqAttr(p, 'cpuset', 'cputune/iothreadpin'),
      }));
  }
  const sys = node(root, 'sysinfo');
  if (sys) {
    d.sysinfo = { type: 'smbios' };
    put(d.sysinfo, 'bios', parseEntries(node(sys, 'bios')));
    put(d.sysinfo, 'system', parseEntries(node(sys, 'system')));
    put(d.sysinfo, 'baseBoard', parseEntries(node(sys, 'baseBoard')));
    put(d.sysinfo, 'chassis', parseEntries(node(sys, 'chassis')));
  }
  const feats = node(root, 'features');
  if (feats) d.features = parseFeatures(feats);
  const cpu = node(root, 'cpu');
  if (cpu) d.cpu = parseCPU(cpu);
  const clock = node(root, 'clock');
  if (clock) d.clock = parseClock(clock);
  const devices = node(root, 'devices');
  if (devices) d.devices = parseDevices(devices);
  // libvirt's QEMU passthrough; libvirt writes the namespace with the prefix qemu
  const args = list(node(root, 'qemu:commandline'), 'qemu:arg').map((a) =>
    reqAttr(a, 'value', 'qemu:commandline/qemu:arg'),
  );
  if (args.length) d.qemuArgs = args;
  return d;
}
