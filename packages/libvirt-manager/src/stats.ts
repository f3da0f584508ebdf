// virConnectGetAllDomainStats record -> upstream's DomainStats (virtwrap/stats: Go field names,
// each value with its `<Field>Set` flag), what GetDomainStats answers as JSON.

type Params = Record<string, number | string | boolean | string[]>;
type Section = Record<string, number | string | boolean>;

export interface DomainStats {
  Name: string;
  UUID: string;
  Cpu?: Section;
  Memory?: Section;
  Vcpu: Section[];
  Net: Section[];
  Block: Section[];
  NrVirtCpu: number;
}

/** Copies params[prefix+key] to out[field] and sets out[field+'Set'] when present. */
function pick(out: Section, params: Params, prefix: string, map: Record<string, string>): boolean {
  let any = false;
  for (const [key, field] of Object.entries(map)) {
    const v = params[prefix + key];
    if (v === undefined || Array.isArray(v)) continue;
    out[field] = v;
    out[`${field}Set`] = true;
    any = true;
  }
  return any;
}

function list(params: Params, kind: string, map: Record<string, string>): Section[] {
  const count = params[`${kind}.count`];
  const n = typeof count === 'number' ? count : 0;
  const out: Section[] = [];
  for (let i = 0; i < n; i++) {
    const s: Section = {};
    pick(s, params, `${kind}.${i}.`, map);
    out.push(s);
  }
  return out;
}

const NET = {
  name: 'Name',
  'rx.bytes': 'RxBytes',
  'rx.pkts': 'RxPkts',
  'rx.errs': 'RxErrs',
  'rx.drop': 'RxDrop',
  'tx.bytes': 'TxBytes',
  'tx.pkts': 'TxPkts',
  'tx.errs': 'TxErrs',
  'tx.drop': 'TxDrop',
};
const BLOCK = {
  name: 'Name',
  backingIndex: 'BackingIndex',
  path: 'Path',
  'rd.reqs': 'RdReqs',
  'rd.bytes': 'RdBytes',
  'rd.times': 'RdTimes',
  'wr.reqs': 'WrReqs',
  'wr.bytes': 'WrBytes',
  'wr.times': 'WrTimes',
  'fl.reqs': 'FlReqs',
  'fl.times': 'FlTimes',
  errors: 'Errors',
  allocation: 'Allocation',
  capacity: 'Capacity',
  physical: 'Physical',
};
const MEMORY = {
  unused: 'Unused',
  available: 'Available',
  current: 'ActualBalloon',
  rss: 'RSS',
  swap_in: 'SwapIn',
  swap_out: 'SwapOut',
  major_fault: 'MajorFault',
  minor_fault: 'MinorFault',
  usable: 'Usable',
  maximum: 'Total',
};

export function convertDomainStats(record: unknown): DomainStats {
  const r = record as { domain?: { name?: string; uuid?: string }; stats?: Params; params?: Params };
  const params: Params = r.stats ?? r.params ?? {};
  const out: DomainStats = {
    Name: r.domain?.name ?? '',
    UUID: r.domain?.uuid ?? '',
    Vcpu: [],
    Net: list(params, 'net', NET),
    Block: list(params, 'block', BLOCK),
    NrVirtCpu: 0,
  };
  const cpu: Section = {};
  if (pick(cpu, params, 'cpu.', { time: 'Time', user: 'User', system: 'System' })) out.Cpu = cpu;
  const mem: Section = {};
  if (pick(mem, params, 'balloon.', MEMORY)) out.Memory = mem;
  const vcpus = params['vcpu.current'];
  const nv = typeof vcpus === 'number' ? vcpus : 0;
  out.NrVirtCpu = nv;
  for (let i = 0; i < nv; i++) {
    const s: Section = {};
    pick(s, params, `vcpu.${i}.`, { state: 'State', time: 'Time', wait: 'Wait', delay: 'Delay' });
    out.Vcpu.push(s);
  }
  return out;
}
