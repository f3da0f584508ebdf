// Domain model -> libvirt domain XML: the model becomes a tree of elements whose tag and attribute names
// are constants of this file, rendered by `renderXml`; every value (attribute value or text, all of them
// possibly user strings) goes through `escapeXml`, the one escaping path, never spliced into markup raw.
import { ConversionError } from './errors.js';
import { HYPERV_KEYS } from './model.js';
import type {
  Clock,
  CPU,
  Devices,
  Disk,
  Domain,
  DomainOS,
  Features,
  Hyperv,
  Interface,
  MemBalloon,
  MemoryBacking,
  SysInfo,
  SysInfoEntry,
  Timer,
} from './model.js';

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

/** libvirt's XML namespace of the QEMU passthrough elements (`<qemu:commandline>`). */
const QEMU_NS = 'http://libvirt.org/schemas/domain/qemu/1.0';

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
  if (f.tcg) c.push(el('tcg', undefined, [txt('tb-cache', String(f.tcg.tbCache / 1024), { unit: 'KiB' })]));
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
  c.push(el('model', { type: i.model }));
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
  if (d.qemuArgs?.length) {
    // libvirt's QEMU namespace passthrough: each argument one <qemu:arg value=.../>, escaped as any value
    c.push(
      el(
        'qemu:commandline',
        undefined,
        d.qemuArgs.map((a) => el('qemu:arg', { value: a })),
      ),
    );
    return el('domain', { type: d.type, 'xmlns:qemu': QEMU_NS }, c);
  }
  return el('domain', { type: d.type }, c);
}
