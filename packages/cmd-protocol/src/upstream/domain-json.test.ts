// The domain's wire shape against samples of upstream's own encoding: testdata/upstream-domain/NAME.json is
// what upstream KubeVirt v1.1.0's code writes (encoding/xml of NAME.xml into its api.DomainSpec, then
// encoding/json of the api.Domain) for the domain our converter made from reference vector NAME.
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseDomainXml } from '@kubevirt-ts/converter';
import {
  domainSpecGoToXml,
  domainSpecXmlToGo,
  fromUpstreamDomain,
  toUpstreamDomain,
  type DomainModel,
} from './domain-json.js';

const dir = fileURLToPath(new URL('../../testdata/upstream-domain/', import.meta.url));
const samples = readdirSync(dir)
  .filter((f) => f.endsWith('.json'))
  .map((f) => {
    const name = f.replace(/\.json$/, '');
    return {
      name,
      xml: readFileSync(`${dir}${name}.xml`, 'utf8'),
      json: JSON.parse(readFileSync(`${dir}${f}`, 'utf8')) as Record<string, unknown>,
    };
  });

const ours = (s: (typeof samples)[number]): DomainModel => {
  const spec = parseDomainXml(s.xml);
  const meta = s.json['ObjectMeta'] as { name: string; namespace: string; uid: string };
  return {
    metadata: { name: meta.name, namespace: meta.namespace, uid: meta.uid },
    domainName: spec.name,
    domainUUID: spec.uuid,
    spec,
    status: { status: 'Running', reason: 'Booted' },
  };
};

test('there are samples', () => {
  expect(samples.length).toBeGreaterThanOrEqual(4);
});

test.each(samples.map((s) => [s.name, s] as const))(
  '%s: our JSON equals upstream encoding field for field, zero values included',
  (_n, s) => {
    expect(toUpstreamDomain(ours(s))).toEqual(s.json);
  },
);

test.each(samples.map((s) => [s.name, s] as const))(
  '%s: upstream JSON decodes to the same domain',
  (_n, s) => {
    const d = fromUpstreamDomain(s.json);
    const o = ours(s);
    expect(d).toEqual({ kind: 'Domain', apiVersion: 'kubevirt.io/v1', ...o });
    // and the XML written back from Go's shape reads as the same model
    expect(parseDomainXml(domainSpecGoToXml(domainSpecXmlToGo(s.xml)))).toEqual(o.spec);
  },
);

test('status, migration, deletion and guest info travel in upstream field names', () => {
  const d: DomainModel = {
    metadata: { name: 'vm', namespace: 'ns', uid: 'u', deletionTimestamp: '2026-11-23T10:00:00.123Z' },
    domainName: 'ns_vm',
    status: {
      status: 'Paused',
      reason: 'User',
      interfaces: [
        { mac: '02:00:00:00:00:01', ip: '10.0.2.2', ips: ['10.0.2.2', 'fd10::2'], interfaceName: 'eth0' },
      ],
      osInfo: { name: 'Fedora', prettyName: 'Fedora 39', id: 'fedora', kernelRelease: '6.5' },
      fsFreezeStatus: { status: 'frozen' },
    },
    migration: {
      uid: 'm-1',
      startTimestamp: '2026-11-23T09:00:00Z',
      completed: true,
      failed: false,
      mode: 'PreCopy',
    },
  };
  const up = toUpstreamDomain(d);
  expect(up['ObjectMeta']).toEqual({
    name: 'vm',
    namespace: 'ns',
    uid: 'u',
    creationTimestamp: null,
    deletionTimestamp: '2026-11-23T10:00:00Z',
  });
  expect(up['Status']).toEqual({
    Status: 'Paused',
    Reason: 'User',
    Interfaces: [
      { Mac: '02:00:00:00:00:01', Ip: '10.0.2.2', IPs: ['10.0.2.2', 'fd10::2'], InterfaceName: 'eth0' },
    ],
    OSInfo: {
      Name: 'Fedora',
      KernelRelease: '6.5',
      Version: '',
      PrettyName: 'Fedora 39',
      VersionId: '',
      KernelVersion: '',
      Machine: '',
      Id: 'fedora',
    },
    FSFreezeStatus: { Status: 'frozen' },
  });
  const spec = up['Spec'] as {
    Name: string;
    XMLName: unknown;
    Metadata: { KubeVirt: Record<string, unknown> };
  };
  expect(spec.Name).toBe('ns_vm');
  expect(spec.XMLName).toEqual({ Space: '', Local: '' }); // no spec: Go's zero DomainSpec
  expect(spec.Metadata.KubeVirt).toEqual({
    UID: 'u',
    GracePeriod: null,
    Migration: {
      UID: 'm-1',
      StartTimestamp: '2026-11-23T09:00:00Z',
      EndTimestamp: null,
      Completed: true,
      Failed: false,
      FailureReason: '',
      AbortStatus: '',
      Mode: 'PreCopy',
    },
    AccessCredential: null,
    MemoryDump: null,
  });
  const back = fromUpstreamDomain(JSON.parse(JSON.stringify(up)));
  expect(back).toEqual({
    kind: 'Domain',
    apiVersion: 'kubevirt.io/v1',
    metadata: { name: 'vm', namespace: 'ns', uid: 'u', deletionTimestamp: '2026-11-23T10:00:00Z' },
    domainName: 'ns_vm',
    status: d.status,
    migration: d.migration,
  });
});

test("Go's decoder matches field names case-insensitively; so does ours", () => {
  const d = fromUpstreamDomain({
    objectmeta: { name: 'a', namespace: 'b' },
    spec: { name: 'b_a' },
    status: { status: 'Running', reason: 'Booted' },
  });
  expect(d).toMatchObject({
    metadata: { name: 'a', namespace: 'b' },
    domainName: 'b_a',
    status: { status: 'Running' },
  });
});

test('what is not a domain is refused with a reason', () => {
  expect(() => fromUpstreamDomain({ kind: 'Domain' })).toThrow(
    'neither ObjectMeta.name nor Spec.Name is set',
  );
  expect(() => fromUpstreamDomain('x')).toThrow('neither ObjectMeta.name nor Spec.Name is set');
});
