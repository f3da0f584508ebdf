// The XML of one device of a domain model, for attachDevice / detachDevice. The converter
// renders the domain; this picks the one device element out with the XML library.

import { toDomainXml } from '@kubevirt-ts/converter';
import { XMLBuilder, XMLParser } from 'fast-xml-parser';
import type { DomainSpec } from './domain.js';

const options = {
  ignoreAttributes: false,
  attributeNamePrefix: '@_',
  preserveOrder: true,
  trimValues: false,
} as const;
const parser = new XMLParser(options);
const builder = new XMLBuilder({ ...options, suppressEmptyNode: true });

type OrderedNode = Record<string, unknown> & { ':@'?: Record<string, string> };

/** `<disk ...>...</disk>` of the disk with target dev `targetDev` in `domain`. */
export function deviceXml(domain: DomainSpec, kind: 'disk', targetDev: string): string {
  const disk = (domain.devices.disks ?? []).find((d) => d.target.dev === targetDev);
  if (!disk) throw new Error(`spec.devices.disks: no disk with target ${targetDev}`);
  const only: DomainSpec = { ...domain, devices: { disks: [disk] } };
  const doc = parser.parse(toDomainXml(only)) as OrderedNode[];
  const dom = doc.find((n) => 'domain' in n)?.domain as OrderedNode[] | undefined;
  const devices = dom?.find((n) => 'devices' in n)?.devices as OrderedNode[] | undefined;
  const el = devices?.find((n) => kind in n);
  if (!el) throw new Error(`converter output has no <${kind}> element for target ${targetDev}`);
  return String(builder.build([el]));
}
