import { MetricsRegistry } from './metrics.js';

describe('MetricsRegistry', () => {
  it('renders counters, gauges and histograms in the Prometheus text format', () => {
    const r = new MetricsRegistry();
    const c = r.counter('reconciles_total', 'Reconciles.');
    c.inc({ controller: 'vm', result: 'ok' });
    c.inc({ controller: 'vm', result: 'ok' });
    c.inc({ controller: 'vmi', result: 'error' });
    r.gauge('queue_depth', 'Keys waiting.', () => [[{ controller: 'vm' }, 3]]);
    const g = r.gauge('phase', 'VMIs per phase.');
    g.set({ phase: 'Run"ning' }, 2);
    const h = r.histogram('latency_seconds', 'Latency.', [0.1, 1]);
    h.observe({}, 0.05);
    h.observe({}, 0.5);
    h.observe({}, 5);
    expect(r.render()).toBe(
      [
        '# HELP reconciles_total Reconciles.',
        '# TYPE reconciles_total counter',
        'reconciles_total{controller="vm",result="ok"} 2',
        'reconciles_total{controller="vmi",result="error"} 1',
        '# HELP queue_depth Keys waiting.',
        '# TYPE queue_depth gauge',
        'queue_depth{controller="vm"} 3',
        '# HELP phase VMIs per phase.',
        '# TYPE phase gauge',
        'phase{phase="Run\\"ning"} 2',
        '# HELP latency_seconds Latency.',
        '# TYPE latency_seconds histogram',
        'latency_seconds_bucket{le="0.1"} 1',
        'latency_seconds_bucket{le="1"} 2',
        'latency_seconds_bucket{le="+Inf"} 3',
        'latency_seconds_sum 5.55',
        'latency_seconds_count 3',
        '',
      ].join('\n'),
    );
    expect(c.get({ controller: 'vm', result: 'ok' })).toBe(2);
    expect(h.count()).toBe(3);
  });
});
