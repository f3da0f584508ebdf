// The start-up trace: marks in order with wall-clock and per-process times, buffered until a sink is set.
import { traceLine, traceMark, traceProcess, traceTo, type TraceMark } from './start-trace.js';

describe('start-up trace', () => {
  it('keeps marks until a sink is set, names the process, and records its Node start first', () => {
    traceMark('early');
    traceProcess('wrapper');
    const got: TraceMark[] = [];
    traceTo((m) => got.push(m));
    traceMark('later');
    expect(got.map((m) => m.phase)).toEqual(['node-start', 'early', 'later']);
    expect(got.every((m) => m.proc === 'wrapper')).toBe(true);
    expect(got[0]!.ms).toBe(0);
    expect(got[0]!.at).toBeCloseTo(performance.timeOrigin, 0);
    // wall clock and time since the process started agree, and never go back
    for (const m of got) expect(m.at - m.ms).toBeCloseTo(performance.timeOrigin, 0);
    expect(got[2]!.ms).toBeGreaterThanOrEqual(got[1]!.ms);
    expect(Math.abs(got[2]!.at - Date.now())).toBeLessThan(60_000);
  });

  it('writes one JSON line per mark for --trace-start', () => {
    const line = traceLine({ proc: 'launcher', phase: 'ready', at: 1.5, ms: 2 });
    expect(line.endsWith('\n')).toBe(true);
    expect(JSON.parse(line)).toEqual({ trace: 'start', proc: 'launcher', phase: 'ready', at: 1.5, ms: 2 });
  });
});
