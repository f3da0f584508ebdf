// Domain model <-> libvirt domain XML. Serializing: the model becomes a tree of elements whose
// tag and attribute names are constants of this file, rendered by `renderXml`; every value (attribute
// value or text, all of them possibly user strings) goes through `escapeXml`, the one escaping path,
// never spliced into markup raw. Parsing: fast-xml-parser.
import { XMLParser } from 'fast-xml-parser';
import { ConversionError } from './errors.js';
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
  SysInfo,
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

/** XML 1.0 cannot carry these characters at all (not even escaped). */
const NON_XML_CHARS =
  // eslint-disable-next-line no-control-regex
  /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Throws when `value` holds a character that XML 1.0 cannot represent, or a carriage return
 * (XML parsers normalize it to a newline, so it would not read back as given). */
export function assertXmlSafe(path: string, value: string): void {
  if (NON_XML_CHARS.test(value) || value.includes('\r')) {
    throw new ConversionError(path, 'contains a character that cannot be represented in XML');
  }
}

// ---------------------------------------------------------------- serialization

const XML_ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  "'": '&apos;',
  '"': '&quot;',
};
const XML_META = /[&<>'"]/g;
/** Anything escapeXml must look at: a metacharacter, a character XML cannot carry, CR, a surrogate. */
// eslint-disable-next-line no-control-regex
const NEEDS_CARE = /[&<>'"\u0000-\u0008\u000B-\u001F\uD800-\uDFFF\uFFFE\uFFFF]/;

/**
 * The one escaping path of the serializer: `value` as the content of an attribute value (in double
 * quotes) or of a text node. The five XML metacharacters become entities (`&amp; &lt; &gt; &apos;
 * &quot;`, the escapes fast-xml-parser's builder wrote before); characters XML cannot carry and CR
 * are refused (ConversionError naming the element and attribute, e.g. `domain XML serial` or
 * `domain XML source/@file`).
 */
export function escapeXml(value: string, tag: string, attr?: string): string {
  if (!NEEDS_CARE.test(value)) return value; // the common case: nothing to do
  assertXmlSafe(`domain XML ${tag}${attr === undefined ? '' : `/@${attr}`}`, value);
  return value.replace(XML_META, (ch) => XML_ESCAPES[ch]!);
}

type Attrs = Record<string, string | number | undefined>;

/** An element: constant tag and attribute names; attribute values and text are model values. */
export class XEl {
  constructor(
    readonly tag: string,
    readonly attrs: Attrs | undefined,
    readonly children: XEl[] | undefined,
    readonly text: string | undefined,
  ) {}
}
type ONode = XEl;

function el(tag: string, a?: Attrs, children?: ONode[]): ONode {
  return new XEl(tag, a, children, undefined);
}

function txt(tag: string, text: string, a?: Attrs): ONode {
  return new XEl(tag, a, undefined, text);
}

/** `<tag a="v">`... with two spaces of indentation per level, as fast-xml-parser's formatted output:
 * an element without content is `<tag/>`, text stays on the element's line. `ind` is "\n" plus the
 * element's indentation. Attributes whose value is undefined are left out. */
function render(n: XEl, ind: string): string {
  let s = ind + '<' + n.tag;
  const a = n.attrs;
  if (a !== undefined)
    for (const k in a) {
      const v = a[k];
      if (v === undefined) continue;
      s += ' ' + k + '="' + escapeXml(typeof v === 'string' ? v : String(v), n.tag, k) + '"';
    }
  if (n.text !== undefined && n.text !== '') return s + '>' + escapeXml(n.text, n.tag) + '</' + n.tag + '>';
  const c = n.children;
  if (c === undefined || c.length === 0) return s + '/>';
  s += '>';
  const ci = ind + '  ';
  for (let i = 0; i < c.length; i++) s += render(c[i]!, ci);
  return s + ind + '</' + n.tag + '>';
}

/** The element tree `toDomainXml` renders (for tests comparing renderers). @internal */
export function renderXml(root: XEl): string {
  return render(root, '\n').slice(1);
}

function entries(tag: string, list: SysInfoEntry[] | undefined, out: ONode[]): void {
  if (list && list.length)
    out.push(
      el(
        tag,
        undefined,
        list.map((e) => txt('entry', e.value, { name: e.name })),
      ),
    );
}

function osToXml(os: DomainOS): ONode {
  const c: ONode[] = [txt('type', os.type.value, { arch: os.type.arch, machine: os.type.machine })];
  if (os.loader)
    c.push(
      txt('loader', os.loader.path, {
        readonly: os.loader.readonly,
        secure: os.loader.secure,
        type: os.loader.type,
      }),
    );
  if (os.nvram) c.push(txt('nvram', os.nvram.path, { template: os.nvram.template }));
  if (os.kernel !== undefined) c.push(txt('kernel', os.kernel));
  if (os.initrd !== undefined) c.push(txt('initrd', os.initrd));
  if (os.cmdline !== undefined) c.push(txt('cmdline', os.cmdline));
  if (os.boot) for (const b of os.boot) c.push(el('boot', { dev: b.dev }));
  if (os.bootmenu) c.push(el('bootmenu', { enable: os.bootmenu.enable, timeout: os.bootmenu.timeout }));
  if (os.smbios) c.push(el('smbios', { mode: os.smbios.mode }));
  if (os.bios) c.push(el('bios', { useserial: os.bios.useserial }));
  return el('os', undefined, c);
}

function sysinfoToXml(s: SysInfo): ONode {
  const c: ONode[] = [];
  entries('bios', s.bios, c);
  entries('system', s.system, c);
  entries('baseBoard', s.baseBoard, c);
  entries('chassis', s.chassis, c);
  return el('sysinfo', { type: s.type }, c);
}

function hypervToXml(h: Hyperv): ONode {
  const c: ONode[] = [];
  for (const k of HYPERV_KEYS) {
    const f = h[k];
    if (!f || typeof f === 'string') continue;
    if (k === 'spinlocks') {
      const s = f as NonNullable<Hyperv['spinlocks']>;
      c.push(el(k, { state: s.state, retries: s.retries }));
    } else if (k === 'vendor_id') {
      const v = f as NonNullable<Hyperv['vendor_id']>;
      c.push(el(k, { state: v.state, value: v.value }));
    } else if (k === 'stimer') {
      const s = f as NonNullable<Hyperv['stimer']>;
      c.push(el(k, { state: s.state }, s.direct ? [el('direct', { state: s.direct.state })] : []));
    } else {
      c.push(el(k, { state: (f as { state: string }).state }));
    }
  }
  return el('hyperv', { mode: h.mode }, c);
}

function featuresToXml(f: Features): ONode {
  const c: ONode[] = [];
  if (f.acpi) c.push(el('acpi'));
  if (f.apic) c.push(el('apic', { eoi: f.apic.eoi }));
  if (f.hyperv) c.push(hypervToXml(f.hyperv));
  if (f.kvm) c.push(el('kvm', undefined, f.kvm.hidden ? [el('hidden', { state: f.kvm.hidden.state })] : []));
  if (f.pvspinlock) c.push(el('pvspinlock', { state: f.pvspinlock.state }));
  if (f.pmu) c.push(el('pmu', { state: f.pmu.state }));
  if (f.vmport) c.push(el('vmport', { state: f.vmport.state }));
  if (f.smm) c.push(el('smm'));
  return el('features', undefined, c);
}

function cpuToXml(cpu: CPU): ONode {
  const c: ONode[] = [];
  if (cpu.model !== undefined) c.push(txt('model', cpu.model));
  if (cpu.topology)
    c.push(
      el('topology', {
        sockets: cpu.topology.sockets,
        cores: cpu.topology.cores,
        threads: cpu.topology.threads,
      }),
    );
  if (cpu.features) for (const f of cpu.features) c.push(el('feature', { policy: f.policy, name: f.name }));
  if (cpu.numa)
    c.push(
      el(
        'numa',
        undefined,
        cpu.numa.cells.map((x) => el('cell', { id: x.id, cpus: x.cpus, memory: x.memory, unit: x.unit })),
      ),
    );
  return el('cpu', { mode: cpu.mode }, c);
}

function clockToXml(c: Clock): ONode {
  const timers = (c.timers ?? []).map((t: Timer) =>
    el('timer', {
      name: t.name,
      tickpolicy: t.tickpolicy,
      present: t.present,
      track: t.track,
      frequency: t.frequency,
    }),
  );
  return el(
    'clock',
    { offset: c.offset, timezone: c.timezone, adjustment: c.adjustment, basis: c.basis },
    timers,
  );
}

function memoryBackingToXml(m: MemoryBacking): ONode {
  const c: ONode[] = [];
  if (m.hugepages)
    c.push(
      el(
        'hugepages',
        undefined,
        (m.hugepages.pages ?? []).map((p) => el('page', { size: p.size, unit: p.unit })),
      ),
    );
  if (m.source) c.push(el('source', { type: m.source.type }));
  if (m.access) c.push(el('access', { mode: m.access.mode }));
  return el('memoryBacking', undefined, c);
}

function addressToXml(a: NonNullable<Disk['address']>): ONode {
  return a.type === 'drive'
    ? el('address', { type: a.type, controller: a.controller, bus: a.bus, unit: a.unit })
    : el('address', { type: a.type, domain: a.domain, bus: a.bus, slot: a.slot, function: a.function });
}

function diskToXml(d: Disk): ONode {
  const v = d.driver;
  const c: ONode[] = [
    el('driver', {
      name: v.name,
      type: v.type,
      cache: v.cache,
      io: v.io,
      discard: v.discard,
      error_policy: v.error_policy,
      iothread: v.iothread,
      queues: v.queues,
    }),
  ];
  if (d.source) c.push(el('source', { file: d.source.file, dev: d.source.dev }));
  if (d.backingStore)
    c.push(
      el('backingStore', { type: d.backingStore.type }, [
        el('format', { type: d.backingStore.format }),
        el('source', { file: d.backingStore.source.file, dev: d.backingStore.source.dev }),
        ...(d.backingStore.terminated ? [el('backingStore')] : []),
      ]),
    );
  c.push(el('target', { dev: d.target.dev, bus: d.target.bus, tray: d.target.tray }));
  if (d.readonly) c.push(el('readonly'));
  if (d.shareable) c.push(el('shareable'));
  if (d.serial !== undefined) c.push(txt('serial', d.serial));
  if (d.boot) c.push(el('boot', { order: d.boot.order }));
  if (d.blockio)
    c.push(
      el('blockio', {
        logical_block_size: d.blockio.logical_block_size,
        physical_block_size: d.blockio.physical_block_size,
      }),
    );
  if (d.alias !== undefined) c.push(el('alias', { name: d.alias }));
  if (d.address) c.push(addressToXml(d.address));
  return el('disk', { type: d.type, device: d.device, model: d.model }, c);
}

function interfaceToXml(i: Interface): ONode {
  const c: ONode[] = [];
  if (i.mac !== undefined) c.push(el('mac', { address: i.mac }));
  if (i.target) c.push(el('target', { dev: i.target.dev, managed: i.target.managed }));
  for (const pf of i.portForward ?? [])
    c.push(
      el(
        'portForward',
        { proto: pf.proto },
        pf.ranges.map((r) => el('range', { start: r.start })),
      ),
    );
  c.push(el('model', { type: i.model }));
  if (i.backend) c.push(el('backend', { type: i.backend.type }));
  if (i.driver) c.push(el('driver', { name: i.driver.name, queues: i.driver.queues }));
  if (i.mtu !== undefined) c.push(el('mtu', { size: i.mtu }));
  if (i.boot) c.push(el('boot', { order: i.boot.order }));
  if (i.rom) c.push(el('rom', { enabled: i.rom.enabled }));
  if (i.acpi) c.push(el('acpi', { index: i.acpi.index }));
  if (i.alias !== undefined) c.push(el('alias', { name: i.alias }));
  if (i.address) c.push(addressToXml(i.address));
  return el('interface', { type: i.type }, c);
}

const alias = (name: string | undefined): ONode[] => (name !== undefined ? [el('alias', { name })] : []);

function devicesToXml(d: Devices): ONode {
  const c: ONode[] = [];
  if (d.emulator !== undefined) c.push(txt('emulator', d.emulator));
  for (const x of d.disks ?? []) c.push(diskToXml(x));
  for (const x of d.controllers ?? [])
    c.push(
      el(
        'controller',
        { type: x.type, index: x.index, model: x.model },
        x.driver ? [el('driver', { iothread: x.driver.iothread, queues: x.driver.queues })] : [],
      ),
    );
  for (const x of d.interfaces ?? []) c.push(interfaceToXml(x));
  for (const s of d.serials ?? []) {
    const sc: ONode[] = [];
    if (s.source) sc.push(el('source', { mode: s.source.mode, path: s.source.path }));
    sc.push(el('target', { port: s.target.port }));
    if (s.log) sc.push(el('log', { file: s.log.file, append: s.log.append }));
    c.push(el('serial', { type: s.type }, sc));
  }
  for (const x of d.consoles ?? [])
    c.push(el('console', { type: x.type }, [el('target', { type: x.target.type, port: x.target.port })]));
  for (const x of d.channels ?? []) {
    const cc: ONode[] = [];
    if (x.source) cc.push(el('source', { mode: x.source.mode, path: x.source.path }));
    cc.push(el('target', { type: x.target.type, name: x.target.name }));
    c.push(el('channel', { type: x.type }, cc));
  }
  for (const x of d.inputs ?? [])
    c.push(el('input', { type: x.type, bus: x.bus, model: x.model }, alias(x.alias)));
  for (const t of d.tpm ?? [])
    c.push(
      el('tpm', { model: t.model }, [
        el('backend', {
          type: t.backend.type,
          version: t.backend.version,
          persistent_state: t.backend.persistent_state,
        }),
      ]),
    );
  for (const g of d.graphics ?? [])
    c.push(
      el('graphics', { type: g.type }, [el('listen', { type: g.listen.type, socket: g.listen.socket })]),
    );
  for (const s of d.sound ?? []) c.push(el('sound', { model: s.model }, alias(s.alias)));
  for (const v of d.video ?? [])
    c.push(
      el('video', undefined, [el('model', { type: v.model.type, heads: v.model.heads, vram: v.model.vram })]),
    );
  for (const w of d.watchdog ?? [])
    c.push(el('watchdog', { model: w.model, action: w.action }, alias(w.alias)));
  if (d.memballoon) {
    const m: MemBalloon = d.memballoon;
    c.push(
      el(
        'memballoon',
        { model: m.model, freePageReporting: m.freePageReporting },
        m.stats ? [el('stats', { period: m.stats.period })] : [],
      ),
    );
  }
  for (const r of d.rng ?? [])
    c.push(el('rng', { model: r.model }, [txt('backend', r.backend.path, { model: r.backend.model })]));
  return el('devices', undefined, c);
}

/** Serializes a domain model to libvirt domain XML. */
export function toDomainXml(d: Domain): string {
  return renderXml(domainElement(d));
}

/** The element tree of a domain model. @internal */
export function domainElement(d: Domain): XEl {
  const c: ONode[] = [txt('name', d.name)];
  if (d.uuid !== undefined) c.push(txt('uuid', d.uuid));
  if (d.metadata) {
    const k: ONode[] = [txt('uid', d.metadata.uid)];
    if (d.metadata.gracePeriodSeconds !== undefined)
      k.push(
        el('graceperiod', undefined, [
          txt('deletionGracePeriodSeconds', String(d.metadata.gracePeriodSeconds)),
        ]),
      );
    c.push(el('metadata', undefined, [el('kubevirt', { xmlns: 'http://kubevirt.io' }, k)]));
  }
  c.push(txt('memory', String(d.memory), { unit: 'b' }));
  if (d.currentMemory !== undefined) c.push(txt('currentMemory', String(d.currentMemory), { unit: 'b' }));
  if (d.memoryBacking) c.push(memoryBackingToXml(d.memoryBacking));
  c.push(txt('vcpu', String(d.vcpu.count), { placement: d.vcpu.placement }));
  if (d.iothreads !== undefined) c.push(txt('iothreads', String(d.iothreads)));
  if (d.cputune) {
    const t = d.cputune;
    const tc = t.vcpupin.map((p) => el('vcpupin', { vcpu: p.vcpu, cpuset: p.cpuset }));
    if (t.emulatorpin) tc.push(el('emulatorpin', { cpuset: t.emulatorpin.cpuset }));
    for (const p of t.iothreadpin ?? [])
      tc.push(el('iothreadpin', { iothread: p.iothread, cpuset: p.cpuset }));
    c.push(el('cputune', undefined, tc));
  }
  if (d.sysinfo) c.push(sysinfoToXml(d.sysinfo));
  c.push(osToXml(d.os));
  if (d.features) c.push(featuresToXml(d.features));
  if (d.cpu) c.push(cpuToXml(d.cpu));
  if (d.clock) c.push(clockToXml(d.clock));
  c.push(devicesToXml(d.devices));
  return el('domain', { type: d.type }, c);
}

// ---------------------------------------------------------------- parsing

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
  const backend = attr(node(n, 'backend'), 'type');
  if (backend === 'passt') it.backend = { type: 'passt' };
  const pfs = list(n, 'portForward');
  if (pfs.length)
    it.portForward = pfs.map((pf, j) => ({
      proto: (attr(pf, 'proto') ?? 'tcp') as 'tcp' | 'udp',
      ranges: list(pf, 'range').map((r) => ({
        start: reqNum(attr(r, 'start'), `${p}/portForward[${j}]/range/@start`),
      })),
    }));
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
  return d;
}
