// Property-based: >= 10,000 random valid VMIs convert, serialize (byte-identical to fast-xml-parser's
// builder output for the same element tree), parse back to the same model; a sample is checked by
// libvirt (virt-xml-validate and virsh define on a private libvirtd).
import { expect, test } from '@jest/globals';
import fc from 'fast-check';
import { isDeepStrictEqual } from 'node:util';
import { setVirtualMachineInstanceDefaults, validateVirtualMachineInstance } from '@kubevirt-ts/api';
import { toDomain } from './convert.js';
import { domainElement, parseDomainXml, toDomainXml } from './xml.js';
import { libraryXml } from './test-xml-oracle.js';
import { contextFor, vmiArb } from './test-arbitrary.js';
import { sessionDaemonForSuite, xmlValidate } from './test-libvirtd.js';

const RUNS = Number(process.env.KVTS_CONVERTER_PROPERTY_RUNS ?? 10_000);
const SAMPLE_EVERY = Math.max(1, Math.floor(RUNS / 40));

const daemon = sessionDaemonForSuite();

const normalize = (x: unknown) => JSON.parse(JSON.stringify(x)) as unknown;

test(`${RUNS} random valid VMIs: XML is what fast-xml-parser's builder writes, parses and re-parses to the same model; a sample is accepted by libvirt`, () => {
  const sample: { xml: string; vmi: unknown }[] = [];
  let n = 0;
  fc.assert(
    fc.property(vmiArb, (vmi) => {
      // valid as given and once defaulted (upstream's admission validates after mutation)
      const defaulted = setVirtualMachineInstanceDefaults(vmi);
      const errors = [...validateVirtualMachineInstance(vmi), ...validateVirtualMachineInstance(defaulted)];
      if (errors.length) throw new Error(`generator made an invalid VMI: ${JSON.stringify(errors)}`);
      const domain = toDomain(defaulted, contextFor(vmi, { allowEmulation: true, kvmAvailable: false }));
      const xml = toDomainXml(domain);
      // the renderer writes byte for byte what fast-xml-parser's builder writes for the same tree
      const lib = libraryXml(domainElement(domain));
      if (xml !== lib) expect(xml).toBe(lib);
      const back = parseDomainXml(xml);
      if (!isDeepStrictEqual(normalize(back), normalize(domain)))
        expect(normalize(back)).toEqual(normalize(domain));
      if (n++ % SAMPLE_EVERY === 0) {
        // serializing the parsed model gives the same document
        expect(toDomainXml(back)).toBe(xml);
        sample.push({ xml, vmi });
      }
    }),
    { numRuns: RUNS },
  );
  expect(n).toBeGreaterThanOrEqual(RUNS);
  const failures: unknown[] = [];
  for (const s of sample) {
    const v = xmlValidate(s.xml);
    if (!v.ok)
      failures.push({
        schema: v.output
          .split('\n')
          .filter((l) => /error/i.test(l))
          .join('\n'),
        vmi: JSON.stringify(s.vmi),
      });
    const d = daemon().define(s.xml);
    if (!d.ok) failures.push({ define: d.output.trim(), vmi: JSON.stringify(s.vmi) });
  }
  expect(failures).toEqual([]);
  expect(sample.length).toBeGreaterThanOrEqual(40);
}, 600_000);
