// A small Prometheus metrics registry with the text exposition format (version 0.0.4): counters,
// gauges (set, or collected when scraped) and histograms, each with labels.

type Labels = Record<string, string>;
const esc = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
const fmtLabels = (l: Labels, extra?: [string, string]): string => {
  const parts = Object.entries(l).map(([k, v]) => `${k}="${esc(v)}"`);
  if (extra) parts.push(`${extra[0]}="${esc(extra[1])}"`);
  return parts.length ? `{${parts.join(',')}}` : '';
};
const keyOf = (l: Labels) => JSON.stringify(Object.entries(l).sort());
const num = (n: number) => (Number.isFinite(n) ? String(n) : n > 0 ? '+Inf' : n < 0 ? '-Inf' : 'NaN');

interface Metric {
  render(): string;
}

export class Counter implements Metric {
  private readonly values = new Map<string, { labels: Labels; v: number }>();
  constructor(
    readonly name: string,
    readonly help: string,
  ) {}
  inc(labels: Labels = {}, by = 1): void {
    const k = keyOf(labels);
    const e = this.values.get(k) ?? { labels, v: 0 };
    e.v += by;
    this.values.set(k, e);
  }
  get(labels: Labels = {}): number {
    return this.values.get(keyOf(labels))?.v ?? 0;
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} counter`];
    for (const { labels, v } of this.values.values())
      lines.push(`${this.name}${fmtLabels(labels)} ${num(v)}`);
    return lines.join('\n');
  }
}

export class Gauge implements Metric {
  private readonly values = new Map<string, { labels: Labels; v: number }>();
  constructor(
    readonly name: string,
    readonly help: string,
    /** computed at scrape time instead of set() */
    private readonly collect?: () => [Labels, number][],
  ) {}
  set(labels: Labels, v: number): void {
    this.values.set(keyOf(labels), { labels, v });
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} gauge`];
    const entries = this.collect
      ? this.collect().map(([labels, v]) => ({ labels, v }))
      : [...this.values.values()];
    for (const { labels, v } of entries) lines.push(`${this.name}${fmtLabels(labels)} ${num(v)}`);
    return lines.join('\n');
  }
}

export class Histogram implements Metric {
  private readonly series = new Map<
    string,
    { labels: Labels; counts: number[]; sum: number; count: number }
  >();
  constructor(
    readonly name: string,
    readonly help: string,
    readonly buckets: number[],
  ) {}
  observe(labels: Labels, v: number): void {
    const k = keyOf(labels);
    let s = this.series.get(k);
    if (!s) this.series.set(k, (s = { labels, counts: this.buckets.map(() => 0), sum: 0, count: 0 }));
    this.buckets.forEach((b, i) => {
      if (v <= b) s.counts[i]!++;
    });
    s.sum += v;
    s.count++;
  }
  count(labels: Labels = {}): number {
    return this.series.get(keyOf(labels))?.count ?? 0;
  }
  render(): string {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const s of this.series.values()) {
      this.buckets.forEach((b, i) =>
        lines.push(`${this.name}_bucket${fmtLabels(s.labels, ['le', num(b)])} ${s.counts[i]}`),
      );
      lines.push(`${this.name}_bucket${fmtLabels(s.labels, ['le', '+Inf'])} ${s.count}`);
      lines.push(`${this.name}_sum${fmtLabels(s.labels)} ${num(s.sum)}`);
      lines.push(`${this.name}_count${fmtLabels(s.labels)} ${s.count}`);
    }
    return lines.join('\n');
  }
}

export class MetricsRegistry {
  private readonly metrics: Metric[] = [];
  counter(name: string, help: string): Counter {
    return this.add(new Counter(name, help));
  }
  gauge(name: string, help: string, collect?: () => [Labels, number][]): Gauge {
    return this.add(new Gauge(name, help, collect));
  }
  histogram(name: string, help: string, buckets: number[]): Histogram {
    return this.add(new Histogram(name, help, buckets));
  }
  /** The Prometheus text format (Content-Type text/plain; version=0.0.4). */
  render(): string {
    return this.metrics.map((m) => m.render()).join('\n') + '\n';
  }
  private add<M extends Metric>(m: M): M {
    this.metrics.push(m);
    return m;
  }
}

export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';
