// GetDomainStats' JSON in upstream's shape: Go's encoding/json of upstream v1.1.0's stats.DomainStats
// (pkg/virt-launcher/virtwrap/stats). No json tags there, so every field is written under its Go name,
// each value with its `<Field>Set` flag, zero values included. Our stats (libvirt-manager) already use the Go
// names for what libvirt reported; this fills in the rest as Go would.

type Section = Record<string, unknown>;

/** [field, zero] pairs of each stats struct, in Go's order; a value field `X` has its flag `XSet` before it. */
const flagged = (fields: [string, unknown][]): [string, unknown][] =>
  fields.flatMap(([f, z]) => [[`${f}Set`, false] as [string, unknown], [f, z] as [string, unknown]]);

const CPU = flagged([
  ['Time', 0],
  ['User', 0],
  ['System', 0],
]);
const VCPU = flagged([
  ['State', 0],
  ['Time', 0],
  ['Wait', 0],
  ['Delay', 0],
]);
const NET = flagged([
  ['Name', ''],
  ['Alias', ''],
  ['RxBytes', 0],
  ['RxPkts', 0],
  ['RxErrs', 0],
  ['RxDrop', 0],
  ['TxBytes', 0],
  ['TxPkts', 0],
  ['TxErrs', 0],
  ['TxDrop', 0],
]);
// Block's Alias has no flag upstream
const BLOCK: [string, unknown][] = [
  ['NameSet', false],
  ['Name', ''],
  ['Alias', ''],
  ...flagged([
    ['BackingIndex', 0],
    ['Path', ''],
    ['RdReqs', 0],
    ['RdBytes', 0],
    ['RdTimes', 0],
    ['WrReqs', 0],
    ['WrBytes', 0],
    ['WrTimes', 0],
    ['FlReqs', 0],
    ['FlTimes', 0],
    ['Errors', 0],
    ['Allocation', 0],
    ['Capacity', 0],
    ['Physical', 0],
  ]),
];
const MEMORY = flagged([
  ['Unused', 0],
  ['Cached', 0],
  ['Available', 0],
  ['ActualBalloon', 0],
  ['RSS', 0],
  ['SwapIn', 0],
  ['SwapOut', 0],
  ['MajorFault', 0],
  ['MinorFault', 0],
  ['Usable', 0],
  ['Total', 0],
]);
const JOB = flagged([
  ['DataProcessed', 0],
  ['MemoryBps', 0],
  ['DiskBps', 0],
  ['DataRemaining', 0],
  ['MemDirtyRate', 0],
]);

function fill(layout: [string, unknown][], s: unknown): Section {
  const src = (typeof s === 'object' && s !== null ? s : {}) as Section;
  const out: Section = {};
  for (const [k, z] of layout) out[k] = src[k] ?? z;
  return out;
}
const list = (layout: [string, unknown][], v: unknown) =>
  Array.isArray(v) && v.length ? v.map((x) => fill(layout, x)) : null;
const ptr = (layout: [string, unknown][], v: unknown) => (v ? fill(layout, v) : null);

/** Our stats (Go names for what libvirt reported) -> upstream's stats.DomainStats as Go's JSON writes it. */
export function toUpstreamDomainStats(stats: Record<string, unknown>): Section {
  return {
    Name: stats['Name'] ?? '',
    UUID: stats['UUID'] ?? '',
    Cpu: ptr(CPU, stats['Cpu']),
    Memory: ptr(MEMORY, stats['Memory']),
    MigrateDomainJobInfo: ptr(JOB, stats['MigrateDomainJobInfo']),
    Vcpu: list(VCPU, stats['Vcpu']),
    Net: list(NET, stats['Net']),
    Block: list(BLOCK, stats['Block']),
    CPUMapSet: stats['CPUMapSet'] ?? false,
    CPUMap: stats['CPUMap'] ?? null,
    NrVirtCpu: stats['NrVirtCpu'] ?? 0,
  };
}
