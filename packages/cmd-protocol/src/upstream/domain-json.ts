// The one place that maps a domain between our typed model and upstream's wire shape: the JSON Go's
// encoding/json writes for upstream's api.Domain (pkg/virt-launcher/virtwrap/api). That JSON is what
// travels in GetDomain answers and notify domain events, so upstream's virt-handler can read our launcher
// and our handler can read upstream's launcher.
//
// Upstream builds api.DomainSpec by decoding libvirt's domain XML with encoding/xml and sends it with
// encoding/json. This module does the same, driven by the struct table in go-structs.ts: our model ->
// XML (the converter's writer) -> Go-shaped JSON, and back: Go-shaped JSON -> XML -> our model (the
// converter's reader). Every Go field is written, zero values included, as Go writes them.

import { XMLBuilder, XMLParser } from 'fast-xml-parser';
import { parseDomainXml, toDomainXml, type Domain as DomainSpec } from '@kubevirt-ts/converter';
import { GO_STRUCTS } from './go-structs.js';

/** What our launcher knows of a domain (libvirt-manager's KubevirtDomain has this shape). */
export interface DomainModel {
  kind?: 'Domain';
  apiVersion?: string;
  metadata: { name: string; namespace: string; uid?: string; deletionTimestamp?: string };
  /** libvirt's domain name, `<namespace>_<name>` */
  domainName: string;
  domainUUID?: string;
  spec?: DomainSpec;
  status: DomainStatusModel;
  migration?: MigrationModel;
}

export interface DomainStatusModel {
  status: string;
  reason: string;
  interfaces?: { name?: string; mac?: string; ip?: string; ips?: string[]; interfaceName?: string }[];
  osInfo?: Partial<Record<(typeof OS_INFO_FIELDS)[number][1], string>>;
  fsFreezeStatus?: { status: string };
}

export interface MigrationModel {
  uid?: string;
  startTimestamp?: string;
  endTimestamp?: string;
  completed?: boolean;
  failed?: boolean;
  failureReason?: string;
  abortStatus?: string;
  mode?: string;
  /** ours only (not in upstream's metadata): where the migration went */
  targetURI?: string;
  migrationURI?: string;
}

/** Go's encoding/json view of a value of upstream's types. */
export type GoJson = Record<string, unknown>;

const OS_INFO_FIELDS = [
  ['Name', 'name'],
  ['KernelRelease', 'kernelRelease'],
  ['Version', 'version'],
  ['PrettyName', 'prettyName'],
  ['VersionId', 'versionId'],
  ['KernelVersion', 'kernelVersion'],
  ['Machine', 'machine'],
  ['Id', 'id'],
] as const;

const MIGRATION_FIELDS = [
  ['UID', 'uid', 'string'],
  ['StartTimestamp', 'startTimestamp', 'time'],
  ['EndTimestamp', 'endTimestamp', 'time'],
  ['Completed', 'completed', 'bool'],
  ['Failed', 'failed', 'bool'],
  ['FailureReason', 'failureReason', 'string'],
  ['AbortStatus', 'abortStatus', 'string'],
  ['Mode', 'mode', 'string'],
] as const;

// ---------------------------------------------------------------- XML trees

interface XNode {
  name: string;
  attrs: Record<string, string>;
  children: XNode[];
  text: string;
}

const parser = new XMLParser({
  preserveOrder: true,
  ignoreAttributes: false,
  attributeNamePrefix: '',
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: false,
  processEntities: true,
  htmlEntities: false,
});
const builder = new XMLBuilder({
  preserveOrder: true,
  ignoreAttributes: false,
  attributeNamePrefix: '',
  suppressEmptyNode: true,
  processEntities: true,
  format: false,
});

type ONode = Record<string, unknown>;

function toXNode(o: ONode): XNode | undefined {
  const name = Object.keys(o).find((k) => k !== ':@' && k !== '#text');
  if (!name) return undefined;
  const n: XNode = { name, attrs: (o[':@'] as Record<string, string>) ?? {}, children: [], text: '' };
  for (const c of o[name] as ONode[]) {
    if ('#text' in c) n.text += String(c['#text']);
    else {
      const x = toXNode(c);
      if (x) n.children.push(x);
    }
  }
  return n;
}

function parseXml(xml: string): XNode {
  const root = (parser.parse(xml) as ONode[]).map(toXNode).find((n) => n !== undefined);
  if (!root) throw new Error('domain XML: no root element');
  return root;
}

function fromXNode(n: XNode): ONode {
  const kids: ONode[] = n.children.map(fromXNode);
  if (n.text) kids.unshift({ '#text': n.text });
  const o: ONode = { [n.name]: kids };
  if (Object.keys(n.attrs).length) o[':@'] = n.attrs;
  return o;
}

// ---------------------------------------------------------------- Go tags

interface Tag {
  skip: boolean;
  attr: boolean;
  chardata: boolean;
  /** element path ("a>b" -> ["a", "b"]), local names */
  path: string[];
}

const tagCache = new Map<string, Tag>();
function parseTag(tag: string, goName: string): Tag {
  const key = `${goName}\u0000${tag}`;
  let t = tagCache.get(key);
  if (!t) {
    const [name0 = '', ...flags] = tag.split(',');
    // "http://kubevirt.io kubevirt": namespace, then the local name
    const name = name0.includes(' ') ? name0.slice(name0.lastIndexOf(' ') + 1) : name0;
    t = {
      skip: name0 === '-' || flags.includes('innerxml') || flags.includes('any') || flags.includes('comment'),
      attr: flags.includes('attr'),
      chardata: flags.includes('chardata'),
      path: (name || goName).split('>'),
    };
    tagCache.set(key, t);
  }
  return t;
}

const localName = (n: string) => n.slice(n.indexOf(':') + 1);
function childrenAt(node: XNode | undefined, path: string[]): XNode[] {
  let level = node ? [node] : [];
  for (const p of path) {
    // "qemu:commandline" is matched with its prefix, everything else by local name (as Go does)
    const match = (c: XNode) => (p.includes(':') ? c.name === p : localName(c.name) === p);
    level = level.flatMap((n) => n.children.filter(match));
  }
  return level;
}

// ---------------------------------------------------------------- XML -> Go JSON

const isStruct = (elem: string) => elem in GO_STRUCTS;

function scalar(elem: string, s: string | undefined): unknown {
  switch (elem) {
    case 'number': {
      const n = s === undefined || s.trim() === '' ? 0 : Number(s.trim());
      return Number.isFinite(n) ? n : 0;
    }
    case 'bool':
      return s !== undefined && ['true', '1'].includes(s.trim());
    case 'metav1.Time':
      return s ? goTime(s) : null;
    default:
      return s ?? '';
  }
}

/** metav1.Time as Go's JSON writes it: RFC 3339, seconds, UTC. */
function goTime(s: string): string | null {
  const d = new Date(s);
  return Number.isNaN(d.getTime()) ? null : d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** The zero value of a field, as Go's JSON writes it. */
function zero(kind: string, elem: string): unknown {
  if (kind === 'ptr' || kind === 'slice' || kind === 'map') return null;
  if (kind === 'struct') return value(elem, undefined);
  return scalar(elem === 'bool' || elem === 'number' ? elem : kind === 'bool' ? 'bool' : kind, undefined);
}

/** A value of type `elem` decoded from element `n` (undefined: the zero value). */
function value(elem: string, n: XNode | undefined): unknown {
  if (elem === 'xml.Name') return { Space: '', Local: n ? localName(n.name) : '' };
  if (elem === 'Alias') {
    // upstream's Alias: user-defined aliases carry the "ua-" prefix in XML, not in JSON
    const name = n?.attrs['name'] ?? '';
    const user = name.startsWith('ua-');
    return { Name: user ? name.slice(3) : name, UserDefined: user };
  }
  if (!isStruct(elem)) return scalar(elem, n?.text);
  const out: GoJson = {};
  for (const [go, tag, kind, fe] of GO_STRUCTS[elem]!) {
    const t = parseTag(tag, go);
    if (go === 'XMLName') out[go] = value('xml.Name', n);
    else if (t.skip || !n) out[go] = zero(kind, fe);
    else if (t.attr) {
      const a = n.attrs[t.path[0]!];
      out[go] =
        kind === 'ptr' ? (a === undefined ? null : scalar(fe, a)) : scalar(kind === 'bool' ? 'bool' : fe, a);
    } else if (t.chardata) out[go] = scalar(kind === 'number' ? 'number' : fe, n.text);
    else {
      const kids = childrenAt(n, t.path);
      if (kind === 'slice') out[go] = kids.length ? kids.map((k) => value(fe, k)) : null;
      else if (kind === 'ptr') out[go] = kids.length ? value(fe, kids[0]) : null;
      else if (kind === 'struct') out[go] = value(fe, kids[0]);
      else
        out[go] = kids.length
          ? scalar(kind === 'number' || kind === 'bool' ? kind : fe, kids[0]!.text)
          : zero(kind, fe);
    }
  }
  return out;
}

/** libvirt domain XML -> upstream's api.DomainSpec as Go's JSON writes it. */
export function domainSpecXmlToGo(xml: string): GoJson {
  return value('DomainSpec', parseXml(xml)) as GoJson;
}

// ---------------------------------------------------------------- Go JSON -> XML

const isZero = (v: unknown) =>
  v === undefined || v === null || v === '' || v === 0 || v === false || (Array.isArray(v) && v.length === 0);

function text(v: unknown): string {
  return typeof v === 'string' ? v : typeof v === 'boolean' ? String(v) : String(v ?? '');
}

/** Go field `go` of `o`, matched case-insensitively as Go's decoder does. */
function get(o: GoJson, go: string): unknown {
  if (go in o) return o[go];
  const lower = go.toLowerCase();
  const k = Object.keys(o).find((x) => x.toLowerCase() === lower);
  return k === undefined ? undefined : o[k];
}

/** Children elements for a value of type `elem` (an object, or a scalar) under `name`. */
function encode(elem: string, name: string, v: unknown): XNode | undefined {
  if (elem === 'Alias') {
    const a = (v ?? {}) as GoJson;
    const n = text(get(a, 'Name'));
    if (!n) return undefined;
    return { name, attrs: { name: get(a, 'UserDefined') ? `ua-${n}` : n }, children: [], text: '' };
  }
  if (!isStruct(elem)) return isZero(v) ? undefined : { name, attrs: {}, children: [], text: text(v) };
  const o = (v ?? {}) as GoJson;
  const n: XNode = { name, attrs: {}, children: [], text: '' };
  for (const [go, tag, kind, fe] of GO_STRUCTS[elem]!) {
    const t = parseTag(tag, go);
    const fv = get(o, go);
    if (go === 'XMLName' || t.skip || isZero(fv)) continue;
    if (t.attr) n.attrs[t.path[0]!] = text(fv);
    else if (t.chardata) n.text = text(fv);
    else {
      // "a>b": the items go under one <a>
      let parent = n;
      for (const p of t.path.slice(0, -1)) {
        const c: XNode = { name: p, attrs: {}, children: [], text: '' };
        parent.children.push(c);
        parent = c;
      }
      const last = t.path[t.path.length - 1]!;
      const items = kind === 'slice' && Array.isArray(fv) ? fv : [fv];
      for (const item of items) {
        const c = encode(fe, last, item);
        if (c) parent.children.push(c);
        else if (isStruct(fe) && fe !== 'Alias' && !isZero(item))
          parent.children.push({ name: last, attrs: {}, children: [], text: '' });
      }
    }
  }
  return n;
}

/** upstream's api.DomainSpec (Go's JSON) -> libvirt domain XML. */
export function domainSpecGoToXml(spec: GoJson): string {
  const root = encode('DomainSpec', 'domain', spec)!;
  // the kubevirt metadata element lives in its own XML namespace
  const kv = childrenAt(root, ['metadata', 'kubevirt'])[0];
  if (kv) kv.attrs['xmlns'] = 'http://kubevirt.io';
  return builder.build([fromXNode(root)]) as string;
}

// ---------------------------------------------------------------- the Domain envelope

const nonEmpty = <T>(v: T | undefined | null | ''): v is T => v !== undefined && v !== null && v !== '';

/** Our domain -> upstream's api.Domain as Go's encoding/json writes it. */
export function toUpstreamDomain(d: DomainModel): GoJson {
  const spec = d.spec ? domainSpecXmlToGo(toDomainXml(d.spec)) : (value('DomainSpec', undefined) as GoJson);
  if (!d.spec) (spec['XMLName'] as GoJson)['Local'] = '';
  spec['Name'] ||= d.domainName;
  spec['UUID'] ||= d.domainUUID ?? '';
  const kubevirt = (spec['Metadata'] as GoJson)['KubeVirt'] as GoJson;
  kubevirt['UID'] ||= d.metadata.uid ?? '';
  if (d.migration) {
    const m: GoJson = {};
    for (const [go, ours, kind] of MIGRATION_FIELDS) {
      const v = d.migration[ours];
      m[go] = kind === 'time' ? (v ? goTime(String(v)) : null) : kind === 'bool' ? v === true : (v ?? '');
    }
    kubevirt['Migration'] = m;
  }
  const meta: GoJson = { name: d.metadata.name, namespace: d.metadata.namespace };
  if (d.metadata.uid) meta['uid'] = d.metadata.uid;
  meta['creationTimestamp'] = null;
  if (d.metadata.deletionTimestamp) meta['deletionTimestamp'] = goTime(d.metadata.deletionTimestamp);
  const s = d.status;
  const osInfo: GoJson = {};
  for (const [go, ours] of OS_INFO_FIELDS) osInfo[go] = s.osInfo?.[ours] ?? '';
  return {
    kind: 'Domain',
    apiVersion: 'kubevirt.io/v1',
    ObjectMeta: meta,
    Spec: spec,
    Status: {
      Status: s.status,
      Reason: s.reason,
      Interfaces: s.interfaces?.length
        ? s.interfaces.map((i) => ({
            Mac: i.mac ?? '',
            Ip: i.ip ?? '',
            IPs: i.ips?.length ? i.ips : null,
            InterfaceName: i.interfaceName ?? '',
          }))
        : null,
      OSInfo: osInfo,
      FSFreezeStatus: { Status: s.fsFreezeStatus?.status ?? '' },
    },
  };
}

const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
const obj = (v: unknown): GoJson =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as GoJson) : {};

/**
 * upstream's api.Domain (Go's JSON, field names matched case-insensitively as Go's decoder does) -> our
 * domain. Throws when the JSON is not a domain (no spec name and no metadata name).
 */
export function fromUpstreamDomain(json: unknown): DomainModel {
  const o = obj(json);
  const meta = obj(get(o, 'ObjectMeta'));
  const spec = obj(get(o, 'Spec'));
  const status = obj(get(o, 'Status'));
  const domainName = str(get(spec, 'Name')) ?? '';
  const [ns0, ...rest] = domainName.split('_');
  const name = str(meta['name']) ?? (rest.length ? rest.join('_') : undefined);
  if (!name) throw new Error('domain JSON: neither ObjectMeta.name nor Spec.Name is set');
  const d: DomainModel = {
    kind: 'Domain',
    apiVersion: 'kubevirt.io/v1',
    metadata: { name, namespace: str(meta['namespace']) ?? (rest.length ? ns0! : '') },
    domainName,
    status: {
      status: str(get(status, 'Status')) ?? 'NoState',
      reason: str(get(status, 'Reason')) ?? 'Unknown',
    },
  };
  const kubevirt = obj(get(obj(get(spec, 'Metadata')), 'KubeVirt'));
  const uid = str(meta['uid']) ?? str(get(kubevirt, 'UID'));
  if (uid) d.metadata.uid = uid;
  const del = str(meta['deletionTimestamp']);
  if (del) d.metadata.deletionTimestamp = del;
  const uuid = str(get(spec, 'UUID'));
  if (uuid) d.domainUUID = uuid;
  // a spec with a type and memory is a full domain (a minimal one carries only names)
  if (str(get(spec, 'Type')) && obj(get(spec, 'Memory'))['Value'])
    d.spec = parseDomainXml(domainSpecGoToXml(spec));
  const mig = obj(get(kubevirt, 'Migration'));
  if (Object.keys(mig).length) {
    const m: MigrationModel = {};
    for (const [go, ours, kind] of MIGRATION_FIELDS) {
      const v = get(mig, go);
      if (kind === 'bool') (m as Record<string, unknown>)[ours] = v === true;
      else if (nonEmpty(v)) (m as Record<string, unknown>)[ours] = String(v);
    }
    d.migration = m;
  }
  const ifaces = get(status, 'Interfaces');
  if (Array.isArray(ifaces) && ifaces.length)
    d.status.interfaces = ifaces.map((i0) => {
      const i = obj(i0);
      const out: NonNullable<DomainStatusModel['interfaces']>[number] = {};
      const mac = str(get(i, 'Mac'));
      const ip = str(get(i, 'Ip'));
      const ips = get(i, 'IPs');
      const ifn = str(get(i, 'InterfaceName'));
      if (mac) out.mac = mac;
      if (ip) out.ip = ip;
      if (Array.isArray(ips) && ips.length) out.ips = ips.map(String);
      if (ifn) out.interfaceName = ifn;
      return out;
    });
  const os = obj(get(status, 'OSInfo'));
  const osInfo: NonNullable<DomainStatusModel['osInfo']> = {};
  for (const [go, ours] of OS_INFO_FIELDS) {
    const v = str(get(os, go));
    if (v) osInfo[ours] = v;
  }
  if (Object.keys(osInfo).length) d.status.osInfo = osInfo;
  const fs = str(get(obj(get(status, 'FSFreezeStatus')), 'Status'));
  if (fs) d.status.fsFreezeStatus = { status: fs };
  return d;
}
