// npm run bench:memory — memory of a VM's private daemons: libvirtd and virtlogd (session mode, uid 107,
// as virt-launcher starts them) with the tiny test guest running, at steady state. Prints VmRSS (what
// issue 12 budgets; shared library pages count in full), PSS (shared pages divided among the processes
// mapping them: varies with what else runs on the machine), anonymous memory and threads, for libvirt's
// own defaults and for startSessionLibvirtd's defaults; `--each` also measures each setting left out.
//   node bench/daemon-memory.mjs [--runs N] [--each]   (after npm run build; root, libvirtd, test guest)
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Connection } from '../dist/index.js';
import { guestXml, READY_LINE, startTestEnv, waitForLine } from '../dist/test-guest.js';

const runsArg = process.argv.indexOf('--runs');
const RUNS = runsArg > 0 ? Number(process.argv[runsArg + 1]) : 2;
const SETTLE_MS = 5000;

// libvirt's and glibc's own defaults, spelled out (MALLOC_ARENA_MAX=0: glibc's default, 8 per core)
const LIBVIRT_WORKERS = { min_workers: 5, prio_workers: 5 };
const variants = [
  [
    'libvirt defaults (all drivers, 5+5 workers, glibc arenas)',
    { drivers: 'all', libvirtdConf: LIBVIRT_WORKERS, env: { MALLOC_ARENA_MAX: '0' } },
  ],
  ['startSessionLibvirtd defaults (qemu driver, 1+1 workers, 1 arena)', {}],
];
if (process.argv.includes('--each'))
  variants.push(
    ['  ... but all drivers', { drivers: 'all' }],
    ['  ... but 5+5 workers', { libvirtdConf: LIBVIRT_WORKERS }],
    ['  ... but glibc arenas', { env: { MALLOC_ARENA_MAX: '0' } }],
  );

async function mem(pid) {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const rollup = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kb = (s, f) => Number(new RegExp(`^${f}:\\s+(\\d+) kB`, 'm').exec(s)?.[1] ?? NaN);
  return {
    rss: kb(status, 'VmRSS'),
    pss: kb(rollup, 'Pss'),
    anon: kb(status, 'RssAnon'),
    threads: Number(/^Threads:\s+(\d+)/m.exec(status)?.[1]),
  };
}

async function once(opts) {
  const env = await startTestEnv({ virtlogd: true, ...opts });
  try {
    const conn = await Connection.open(env.daemon.uri);
    try {
      const serialLog = path.join(env.baseDir, 'serial.log');
      const dom = await conn.createXML(
        guestXml({ name: 'kvts-mem', kernel: env.kernel, initrd: env.initrd, serialLog }),
      );
      await waitForLine(serialLog, READY_LINE, 180_000);
      // what a handler's sync loop asks for
      for (let i = 0; i < 50; i++) {
        await dom.getState();
        await dom.getXMLDesc(0);
      }
      await new Promise((r) => setTimeout(r, SETTLE_MS));
      return { libvirtd: await mem(env.daemon.pid), virtlogd: await mem(env.daemon.virtlogdPid) };
    } finally {
      await conn.close();
    }
  } finally {
    await env.cleanup();
  }
}

const mib = (k) => (k / 1024).toFixed(1).padStart(5);
const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
console.log(
  `runs: ${RUNS} per variant (medians), test guest running, ${SETTLE_MS / 1000} s after its ready line; MiB`,
);
console.log(`${'variant'.padEnd(66)} libvirtd RSS (PSS, anon, threads) | virtlogd RSS (PSS, anon) | RSS sum`);
for (const [label, opts] of variants) {
  const rs = [];
  for (let i = 0; i < RUNS; i++) rs.push(await once(opts));
  const m = (p, f) => median(rs.map((r) => r[p][f]));
  console.log(
    `${label.padEnd(66)} ${mib(m('libvirtd', 'rss'))} (${mib(m('libvirtd', 'pss'))}, ${mib(m('libvirtd', 'anon'))}, ${String(m('libvirtd', 'threads')).padStart(2)})` +
      `        | ${mib(m('virtlogd', 'rss'))} (${mib(m('virtlogd', 'pss'))}, ${mib(m('virtlogd', 'anon'))})      | ${mib(median(rs.map((r) => r.libvirtd.rss + r.virtlogd.rss)))}`,
  );
}
