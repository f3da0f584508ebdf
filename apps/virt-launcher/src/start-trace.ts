// Start-up trace: one mark per phase of this process's start (Node start, modules loaded, libvirtd spawned and
// answering, disk preparation, define, first vCPU...), each with its wall-clock time (`at`, epoch ms, comparable
// across processes) and the time since this process started (`ms`). Marks go to the JSON log at debug level,
// or, with `--trace-start`, as one JSON line each on stderr (`{"trace":"start",...}`) whatever the log level:
// tools/bench-launcher.mjs reads them. Kept small on purpose: it is loaded before anything else.

/** One phase of the start-up. */
export interface TraceMark {
  /** which process: 'wrapper' (the `monitor`/`standalone` command that becomes the native monitor) or 'launcher' */
  proc: string;
  phase: string;
  /** wall clock, epoch milliseconds */
  at: number;
  /** milliseconds since this process started (performance.timeOrigin) */
  ms: number;
}

let proc = 'launcher';
const pending: TraceMark[] = [];
let sink: ((m: TraceMark) => void) | undefined;

function mark(phase: string, now: number): TraceMark {
  return {
    proc,
    phase,
    at: Math.round((performance.timeOrigin + now) * 10) / 10,
    ms: Math.round(now * 10) / 10,
  };
}

/** Records a phase; kept until a sink is set (then each mark goes straight to it). */
export function traceMark(phase: string): void {
  const m = mark(phase, performance.now());
  if (sink) sink(m);
  else if (pending.length < 100) pending.push(m);
}

/** Names this process in its marks and records when it started ('node-start', at performance.timeOrigin). */
export function traceProcess(name: string): void {
  proc = name;
  if (!pending.some((m) => m.phase === 'node-start')) pending.unshift(mark('node-start', 0));
  for (const m of pending) m.proc = name;
}

/** Sends the marks so far, and every later one, to `fn`. */
export function traceTo(fn: (m: TraceMark) => void): void {
  sink = fn;
  for (const m of pending.splice(0)) fn(m);
}

/** The `--trace-start` line of a mark. */
export function traceLine(m: TraceMark): string {
  return `${JSON.stringify({ trace: 'start', ...m })}\n`;
}

/** `--trace-start`: marks as JSON lines on stderr. */
export function traceToStderr(): void {
  traceTo((m) => {
    process.stderr.write(traceLine(m));
  });
}

/** Without `--trace-start`: marks at debug level in the JSON log. */
export function traceToLog(log: { debug(msg: string, meta?: Record<string, unknown>): void }): void {
  traceTo((m) =>
    log.debug('start phase', { stage: 'trace', phase: m.phase, at: m.at, ms: m.ms, proc: m.proc }),
  );
}
