/**
 * Prometheus text format for the domain stats launchers report (GetDomainStats), under upstream's
 * kubevirt_vmi_* names and labels (node, namespace, name, plus interface / drive / id). libvirt's
 * units are converted: CPU times ns -> s, balloon sizes KiB -> bytes, block times ns -> s.
 */

type Section = Record<string, unknown>;
export interface StatsLike {
  Cpu?: Section;
  Memory?: Section;
  Vcpu?: Section[];
  Net?: Section[];
  Block?: Section[];
}

interface Metric {
  help: string;
  type: 'counter' | 'gauge';
  samples: Array<{ labels: Record<string, string>; value: number }>;
}

function esc(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
}

export class MetricsText {
  private metrics = new Map<string, Metric>();

  add(
    name: string,
    type: Metric['type'],
    help: string,
    labels: Record<string, string>,
    value: unknown,
  ): void {
    if (typeof value !== 'number' || !Number.isFinite(value)) return;
    let m = this.metrics.get(name);
    if (!m) this.metrics.set(name, (m = { help, type, samples: [] }));
    m.samples.push({ labels, value });
  }

  toString(): string {
    const out: string[] = [];
    for (const [name, m] of this.metrics) {
      out.push(`# HELP ${name} ${m.help}`, `# TYPE ${name} ${m.type}`);
      for (const s of m.samples) {
        const l = Object.entries(s.labels)
          .map(([k, v]) => `${k}="${esc(v)}"`)
          .join(',');
        out.push(`${name}{${l}} ${s.value}`);
      }
    }
    return out.join('\n') + '\n';
  }
}

const num = (s: Section | undefined, f: string): number | undefined =>
  s && s[`${f}Set`] !== false && typeof s[f] === 'number' ? (s[f] as number) : undefined;
const scale = (v: number | undefined, k: number) => (v === undefined ? undefined : v * k);

/** Adds one VMI's stats to `m`. */
export function addDomainStats(
  m: MetricsText,
  base: { node: string; namespace: string; name: string },
  st: StatsLike,
): void {
  const NS = 1e-9;
  const KIB = 1024;
  m.add(
    'kubevirt_vmi_cpu_usage_seconds_total',
    'counter',
    'Total CPU time spent in all modes.',
    base,
    scale(num(st.Cpu, 'Time'), NS),
  );
  m.add(
    'kubevirt_vmi_cpu_user_usage_seconds_total',
    'counter',
    'Total CPU time spent in user mode.',
    base,
    scale(num(st.Cpu, 'User'), NS),
  );
  m.add(
    'kubevirt_vmi_cpu_system_usage_seconds_total',
    'counter',
    'Total CPU time spent in system mode.',
    base,
    scale(num(st.Cpu, 'System'), NS),
  );
  (st.Vcpu ?? []).forEach((v, i) => {
    const state =
      ({ 0: 'offline', 1: 'running', 2: 'blocked' } as Record<number, string>)[num(v, 'State') ?? -1] ??
      'unknown';
    m.add(
      'kubevirt_vmi_vcpu_seconds_total',
      'counter',
      'Total amount of time spent in each state by each vcpu.',
      { ...base, id: String(i), state },
      scale(num(v, 'Time'), NS),
    );
    m.add(
      'kubevirt_vmi_vcpu_wait_seconds_total',
      'counter',
      'Amount of time spent by each vcpu while waiting on I/O.',
      { ...base, id: String(i) },
      scale(num(v, 'Wait'), NS),
    );
    m.add(
      'kubevirt_vmi_vcpu_delay_seconds_total',
      'counter',
      'Amount of time spent by each vcpu waiting in the queue instead of running.',
      { ...base, id: String(i) },
      scale(num(v, 'Delay'), NS),
    );
  });
  const mem = st.Memory;
  m.add(
    'kubevirt_vmi_memory_resident_bytes',
    'gauge',
    'Resident set size of the process running the domain.',
    base,
    scale(num(mem, 'RSS'), KIB),
  );
  m.add(
    'kubevirt_vmi_memory_available_bytes',
    'gauge',
    'Amount of usable memory as seen by the domain.',
    base,
    scale(num(mem, 'Available'), KIB),
  );
  m.add(
    'kubevirt_vmi_memory_unused_bytes',
    'gauge',
    'The amount of memory left completely unused by the system.',
    base,
    scale(num(mem, 'Unused'), KIB),
  );
  m.add(
    'kubevirt_vmi_memory_usable_bytes',
    'gauge',
    'The amount of memory which can be reclaimed by balloon without pushing the guest system to swap.',
    base,
    scale(num(mem, 'Usable'), KIB),
  );
  m.add(
    'kubevirt_vmi_memory_actual_balloon_bytes',
    'gauge',
    'Current balloon size in bytes.',
    base,
    scale(num(mem, 'ActualBalloon'), KIB),
  );
  m.add(
    'kubevirt_vmi_memory_domain_bytes',
    'gauge',
    'The amount of memory allocated to the domain.',
    base,
    scale(num(mem, 'Total'), KIB),
  );
  m.add(
    'kubevirt_vmi_memory_swap_in_traffic_bytes',
    'gauge',
    'The total amount of data read from swap space of the guest in bytes.',
    base,
    scale(num(mem, 'SwapIn'), KIB),
  );
  m.add(
    'kubevirt_vmi_memory_swap_out_traffic_bytes',
    'gauge',
    'The total amount of memory written out to swap space of the guest in bytes.',
    base,
    scale(num(mem, 'SwapOut'), KIB),
  );
  m.add(
    'kubevirt_vmi_memory_pgmajfault_total',
    'counter',
    'The number of page faults when disk IO was required.',
    base,
    num(mem, 'MajorFault'),
  );
  m.add(
    'kubevirt_vmi_memory_pgminfault_total',
    'counter',
    'The number of other page faults, when disk IO was not required.',
    base,
    num(mem, 'MinorFault'),
  );
  for (const n of st.Net ?? []) {
    const l = { ...base, interface: String(n.Name ?? '') };
    m.add(
      'kubevirt_vmi_network_receive_bytes_total',
      'counter',
      'Total network traffic received in bytes.',
      l,
      num(n, 'RxBytes'),
    );
    m.add(
      'kubevirt_vmi_network_transmit_bytes_total',
      'counter',
      'Total network traffic transmitted in bytes.',
      l,
      num(n, 'TxBytes'),
    );
    m.add(
      'kubevirt_vmi_network_receive_packets_total',
      'counter',
      'Total network traffic received packets.',
      l,
      num(n, 'RxPkts'),
    );
    m.add(
      'kubevirt_vmi_network_transmit_packets_total',
      'counter',
      'Total network traffic transmitted packets.',
      l,
      num(n, 'TxPkts'),
    );
    m.add(
      'kubevirt_vmi_network_receive_errors_total',
      'counter',
      'Total network received error packets.',
      l,
      num(n, 'RxErrs'),
    );
    m.add(
      'kubevirt_vmi_network_transmit_errors_total',
      'counter',
      'Total network transmitted error packets.',
      l,
      num(n, 'TxErrs'),
    );
    m.add(
      'kubevirt_vmi_network_receive_packets_dropped_total',
      'counter',
      'The total number of rx packets dropped on vNIC interfaces.',
      l,
      num(n, 'RxDrop'),
    );
    m.add(
      'kubevirt_vmi_network_transmit_packets_dropped_total',
      'counter',
      'The total number of tx packets dropped on vNIC interfaces.',
      l,
      num(n, 'TxDrop'),
    );
  }
  for (const b of st.Block ?? []) {
    const l = { ...base, drive: String(b.Name ?? '') };
    m.add(
      'kubevirt_vmi_storage_read_traffic_bytes_total',
      'counter',
      'Total number of bytes read from storage.',
      l,
      num(b, 'RdBytes'),
    );
    m.add(
      'kubevirt_vmi_storage_write_traffic_bytes_total',
      'counter',
      'Total number of written bytes.',
      l,
      num(b, 'WrBytes'),
    );
    m.add(
      'kubevirt_vmi_storage_iops_read_total',
      'counter',
      'Total number of I/O read operations.',
      l,
      num(b, 'RdReqs'),
    );
    m.add(
      'kubevirt_vmi_storage_iops_write_total',
      'counter',
      'Total number of I/O write operations.',
      l,
      num(b, 'WrReqs'),
    );
    m.add(
      'kubevirt_vmi_storage_read_times_seconds_total',
      'counter',
      'Total time spent on read operations.',
      l,
      scale(num(b, 'RdTimes'), NS),
    );
    m.add(
      'kubevirt_vmi_storage_write_times_seconds_total',
      'counter',
      'Total time spent on write operations.',
      l,
      scale(num(b, 'WrTimes'), NS),
    );
    m.add(
      'kubevirt_vmi_storage_flush_requests_total',
      'counter',
      'Total storage flush requests.',
      l,
      num(b, 'FlReqs'),
    );
  }
}
