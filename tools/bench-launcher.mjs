#!/usr/bin/env node
// npm run bench:launcher — prints:
//   1. launcher start -> guest ready line: `virt-launcher standalone` spawned until KUBEVIRT-TS-GUEST-READY
//      appears on its console (includes its own libvirtd start-up, disk preparation, sync over the cmd socket);
//   2. the same domain XML (converter output for the same VMI and layout) started with `virsh create` on an
//      already-running session libvirtd, until the ready line appears in the serial log; and the ratio 1/2;
//   3. the RSS of every process of the run 2 s after the ready line (the native monitor, as root also its PID 1
//      in the run's PID namespace, the launcher's Node process, libvirtd, virtlogd, QEMU) and the sum of all
//      but QEMU (issue 12's per-VM overhead); the launcher's VmHWM (peak) at exit.
//   4. for the launcher's Node process: PSS and the anonymous / file-backed split (/proc/<pid>/smaps_rollup).
//   5. the launcher's start-up phases (its --trace-start marks: each process's Node start, modules loaded,
//      libvirtd spawned / answering, ready, sync, disks prepared, domain defined / running), as ms since the
//      spawn (medians) and the step from the phase before: less sensitive to a loaded machine than the total.
//   6. PSS of every process (smaps_rollup: a shared page counted once per sharer), and its non-QEMU sum.
// The launcher runs as its image runs it: the node flags of its shebang and the environment of
// apps/virt-launcher/Containerfile's ENV line (all but PATH, e.g. LD_PRELOAD/MALLOC_CONF).
// Usage: [KVTS_BENCH_LAUNCHER=path/to/main.js] node tools/bench-launcher.mjs [--runs N] [--quick] [--node-flags "FLAGS"]
//        [--env "K=V ..."] [--idle-seconds S]
//   --quick: only the launcher runs (no cold-probe run, no virsh runs): for comparing memory settings;
//   --node-flags: run the launcher with these Node/V8 flags instead of those of its shebang;
//   --env: this environment instead of the Containerfile's (`--env ""`: none);
//   --idle-seconds: read the memory S seconds after the ready line instead of 2 (the guest idles meanwhile).
// (needs the test guest: bash tools/guest/build.sh)
import { setTimeout as sleep } from 'node:timers/promises';
import { spawn } from 'node:child_process';
import { chmod, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setVirtualMachineInstanceDefaults } from '@kubevirt-ts/api';
import { LAUNCHER_GID, LAUNCHER_UID, toDomain, toDomainXml } from '@kubevirt-ts/converter';
import { startSessionLibvirtd } from '@kubevirt-ts/node-libvirt';
import { stageLocalImages } from '@kubevirt-ts/disks';
import { createLayout } from '@kubevirt-ts/virt-launcher';

const repo = path.resolve(fileURLToPath(new URL('..', import.meta.url)));
// KVTS_BENCH_LAUNCHER: another build's main.js to measure (e.g. an older commit's, for before/after)
const main = process.env.KVTS_BENCH_LAUNCHER
  ? path.resolve(process.env.KVTS_BENCH_LAUNCHER)
  : path.join(repo, 'apps/virt-launcher/dist/main.js');
const cache =
  process.env.KVTS_CACHE ??
  path.join(process.env.XDG_CACHE_HOME ?? path.join(process.env.HOME ?? '/root', '.cache'), 'kubevirt-ts');
const guest = path.join(cache, 'guest');
const IMAGE = 'kubevirt-ts/test-guest:latest';
const READY = 'KUBEVIRT-TS-GUEST-READY';
const runsArg = process.argv.indexOf('--runs');
const RUNS = runsArg > 0 ? Number(process.argv[runsArg + 1]) : 3;
const QUICK = process.argv.includes('--quick');
const flagsArg = process.argv.indexOf('--node-flags');
const NODE_FLAGS = flagsArg > 0 ? process.argv[flagsArg + 1].split(/\s+/).filter(Boolean) : undefined;
const envArg = process.argv.indexOf('--env');
const idleArg = process.argv.indexOf('--idle-seconds');
const IDLE_MS = idleArg > 0 ? Number(process.argv[idleArg + 1]) * 1000 : 2000;
const QEMU = { uid: LAUNCHER_UID, gid: LAUNCHER_GID };
/** the image's environment (apps/virt-launcher/Containerfile's ENV line, but PATH), or --env's */
function imageEnv() {
  const text =
    envArg > 0
      ? `ENV ${process.argv[envArg + 1]}`
      : readFileSync(path.join(repo, 'apps/virt-launcher/Containerfile'), 'utf8');
  const line = /^ENV (.*)$/m.exec(text)?.[1] ?? '';
  const env = Object.fromEntries(
    line
      .split(/\s+/)
      .filter((kv) => kv.includes('='))
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)])
      .filter(([k]) => k !== 'PATH'),
  );
  // a preloaded library that is not there is skipped by the dynamic loader: measure what the image runs
  for (const lib of env.LD_PRELOAD?.split(/[\s:]+/).filter(Boolean) ?? [])
    if (!existsSync(lib)) throw new Error(`${lib} (LD_PRELOAD) is missing: bash tools/setup.sh`);
  return env;
}
const IMAGE_ENV = imageEnv();
const TRACES = (await readFile(path.join(path.dirname(main), 'flags.js'), 'utf8')).includes('trace-start');

const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];

function vmi(name, poweroff) {
  return setVirtualMachineInstanceDefaults({
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name, namespace: 'bench', uid: `uid-${name}` },
    spec: {
      terminationGracePeriodSeconds: 30,
      domain: {
        resources: { requests: { memory: '128Mi' } },
        firmware: {
          kernelBoot: {
            kernelArgs: `console=ttyS0 quiet${poweroff ? ' kvts.poweroff' : ''}`,
            container: { image: IMAGE, kernelPath: '/vmlinuz', initrdPath: '/initramfs.img' },
          },
        },
        devices: {
          autoattachGraphicsDevice: false,
          autoattachMemBalloon: false,
          autoattachPodInterface: false,
          disks: [],
        },
      },
      networks: [],
      volumes: [],
    },
  });
}

async function tmp() {
  const d = await mkdtemp('/tmp/kv-');
  await chmod(d, 0o755);
  return d;
}

function rssKiB(pid, field) {
  return readFile(`/proc/${pid}/status`, 'utf8')
    .then((s) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(s)?.[1] ?? NaN))
    .catch(() => NaN);
}

/** Rss, Pss, Pss_Anon, Pss_File, Anonymous (KiB) of a process, from /proc/<pid>/smaps_rollup */
async function rollup(pid) {
  const text = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8').catch(() => '');
  const out = {};
  for (const m of text.matchAll(/^(\w+):\s+(\d+) kB$/gm)) out[m[1]] = Number(m[2]);
  return out;
}

/** every descendant of pid, from /proc/<pid>/task/<tid>/children */
async function descendants(pid) {
  const out = [];
  const tasks = await readdir(`/proc/${pid}/task`).catch(() => []);
  for (const t of tasks) {
    const kids = (await readFile(`/proc/${pid}/task/${t}/children`, 'utf8').catch(() => ''))
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
    for (const k of kids) out.push(k, ...(await descendants(k)));
  }
  return out;
}

/** what a process of the run is, from its command line */
async function kindOf(pid, monitorPid) {
  const argv = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0');
  if (pid === monitorPid) return 'monitor';
  if (argv[0].endsWith('virt-launcher-monitor')) return 'monitor (PID 1 of the PID namespace)';
  if (argv.includes(main)) return 'launcher (Node)';
  if (/qemu-system|qemu-kvm/.test(argv[0])) return 'qemu';
  if (/libvirtd$/.test(argv[0])) return 'libvirtd';
  if (/virtlogd$/.test(argv[0])) return 'virtlogd';
  return path.basename(argv[0] || `pid ${pid}`);
}

/** VmRSS (KiB) of each process of the standalone run under the monitor `pid`, by kind; launcher pid */
async function runRss(pid) {
  const rss = {};
  const pss = {};
  let launcher;
  for (const p of [pid, ...(await descendants(pid))]) {
    const kind = await kindOf(p, pid);
    if (kind === 'launcher (Node)') launcher = p;
    rss[kind] = (rss[kind] ?? 0) + (await rssKiB(p, 'VmRSS'));
    pss[kind] = (pss[kind] ?? 0) + ((await rollup(p)).Pss ?? NaN);
  }
  return { rss, pss, launcher };
}

async function launcherRun(i, env = {}) {
  const dir = await tmp();
  const file = path.join(dir, 'vmi.json');
  await writeFile(file, JSON.stringify(vmi(`l${i}`, false)));
  const t0 = performance.now();
  const t0Epoch = performance.timeOrigin + t0;
  // as shipped: with the node flags of its shebang (#!/usr/bin/env -S node FLAGS)
  const shebang = /^#!\/usr\/bin\/env -S node(.*)$/.exec((await readFile(main, 'utf8')).split('\n', 1)[0]);
  const nodeFlags = NODE_FLAGS ?? (shebang ? shebang[1].trim().split(/\s+/).filter(Boolean) : []);
  const child = spawn(
    process.execPath,
    [
      ...nodeFlags,
      main,
      'standalone',
      '--vmi',
      file,
      '--image',
      `${IMAGE}=${guest}`,
      '--console',
      '--allow-emulation',
      '--work-dir',
      path.join(dir, 'w'),
      // older builds have no start-up trace
      ...(TRACES ? ['--trace-start'] : []),
    ],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...IMAGE_ENV, ...env },
    },
  );
  let out = '';
  let err = '';
  let readyMs;
  let rssAtReady;
  let perProcess;
  let perProcessPss;
  let lpid;
  let smaps;
  const exited = new Promise((r) => child.on('exit', (code) => r(code)));
  let hwm = NaN;
  const ready = new Promise((resolve) => {
    child.stdout.setEncoding('utf8').on('data', async (d) => {
      out += d;
      if (readyMs === undefined && out.includes(READY)) {
        readyMs = performance.now() - t0;
        await sleep(IDLE_MS); // steady state: the guest is idle
        const r = await runRss(child.pid);
        lpid = r.launcher;
        perProcess = r.rss;
        perProcessPss = r.pss;
        rssAtReady = r.rss['launcher (Node)'];
        smaps = await rollup(r.launcher);
        resolve();
      }
    });
  });
  child.stderr.setEncoding('utf8').on('data', (d) => (err += d));
  const phases = () => {
    const out = [];
    for (const line of err.split('\n')) {
      if (!line.startsWith('{"trace":"start"')) continue;
      const m = JSON.parse(line);
      out.push({ name: `${m.proc} ${m.phase}`, ms: m.at - t0Epoch });
    }
    out.push({ name: 'guest ready line', ms: readyMs });
    return out;
  };
  const timeout = sleep(180_000).then(() => 'timeout');
  if ((await Promise.race([ready, exited, timeout])) !== undefined || readyMs === undefined) {
    child.kill('SIGKILL');
    throw new Error(`launcher run ${i}: no ready line\n${err}`);
  }
  await sleep(500);
  hwm = await rssKiB(lpid, 'VmHWM');
  child.kill('SIGINT');
  const code = await exited;
  await rm(dir, { recursive: true, force: true });
  if (code !== 0) throw new Error(`launcher run ${i} exited ${code}\n${err}`);
  return { readyMs, rssAtReady, hwm, perProcess, perProcessPss, smaps, phases: phases() };
}

/** A session libvirtd for `virsh create` runs; run(i) starts domain i and resolves with ms to its ready line. */
async function virshSetup() {
  const dir = await tmp();
  const base = path.join(dir, 'lv');
  // as the launcher starts its libvirtd (no virtlogd: QEMU writes the serial log itself)
  const daemon = await startSessionLibvirtd({ baseDir: base, uid: QEMU.uid, gid: QEMU.gid, virtlogd: false });
  return {
    async stop() {
      await daemon.stop();
      await rm(dir, { recursive: true, force: true });
    },
    async run(i) {
      const v = vmi(`v${i}`, false);
      const root = path.join(dir, `r${i}`);
      const layout = createLayout(root);
      await mkdir(layout.vmiPrivateDir(v.metadata.uid), { recursive: true });
      await chmod(path.join(root), 0o755);
      await stageLocalImages(v, new Map([[IMAGE, guest]]), layout, { owner: QEMU });
      const { chown } = await import('node:fs/promises');
      await chown(layout.vmiPrivateDir(v.metadata.uid), QEMU.uid, QEMU.gid);
      const xml = toDomainXml(
        toDomain(v, { allowEmulation: true, kvmAvailable: false, layout, serialConsoleLog: true }),
      );
      const xmlFile = path.join(dir, `d${i}.xml`);
      await writeFile(xmlFile, xml);
      const log = layout.serialLogFile(v.metadata.uid);
      const t0 = performance.now();
      const virsh = spawn('virsh', ['-q', '-c', daemon.uri, 'create', xmlFile], {
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let verr = '';
      virsh.stderr.setEncoding('utf8').on('data', (d) => (verr += d));
      const vcode = new Promise((r) => virsh.on('exit', r));
      let ms;
      const deadline = Date.now() + 180_000;
      while (ms === undefined) {
        const text = existsSync(log) ? await readFile(log, 'utf8') : '';
        if (text.includes(READY)) ms = performance.now() - t0;
        else if (Date.now() > deadline) throw new Error(`virsh run ${i}: no ready line (${verr})`);
        else await sleep(20);
      }
      if ((await vcode) !== 0) throw new Error(`virsh create failed: ${verr}`);
      await new Promise((r) =>
        spawn('virsh', ['-q', '-c', daemon.uri, 'destroy', `bench_v${i}`], { stdio: 'ignore' }).on('exit', r),
      );
      return ms;
    },
  };
}

async function benchMain() {
  for (const f of ['vmlinuz', 'initramfs.img']) {
    if (!existsSync(path.join(guest, f)))
      throw new Error(`test guest missing (${path.join(guest, f)}): bash tools/guest/build.sh`);
  }
  const launcher = [];
  const virsh = [];
  // launcher and virsh runs alternate, so that the load of a shared machine weighs on both alike
  const vs = QUICK ? undefined : await virshSetup();
  try {
    for (let i = 0; i < RUNS; i++) {
      launcher.push(await launcherRun(i));
      if (vs) virsh.push(await vs.run(i));
    }
  } finally {
    await vs?.stop();
  }
  const fmt = (x) => `${(x / 1000).toFixed(2)} s`;
  const lMs = median(launcher.map((r) => r.readyMs));
  if (QUICK) {
    console.log(`runs: ${RUNS} (medians; TCG emulation; --quick: no virsh runs)`);
    console.log(`node flags: ${NODE_FLAGS ? NODE_FLAGS.join(' ') : "(the shebang's)"}`);
    console.log(
      `environment: ${
        Object.entries(IMAGE_ENV)
          .map(([k, v]) => `${k}=${v}`)
          .join(' ') || '(none)'
      }`,
    );
    console.log(
      `launcher start -> guest ready line:   ${fmt(lMs)}   [${launcher.map((r) => fmt(r.readyMs)).join(', ')}]`,
    );
    printMemory(launcher);
    printPhases(launcher);
    return;
  }
  // without the host-wide cache of QEMU capability probes (what a fresh Pod without the cache pays)
  const emptyCaps = await tmp();
  const cold = await launcherRun(RUNS, { KVTS_QEMU_CAPS_CACHE: emptyCaps });
  await rm(emptyCaps, { recursive: true, force: true });
  const vMs = median(virsh);
  const pairRatio = median(launcher.map((r, i) => r.readyMs / virsh[i]));
  console.log(`runs: ${RUNS} (medians; TCG emulation)`);
  console.log(
    `launcher start -> guest ready line:   ${fmt(lMs)}   [${launcher.map((r) => fmt(r.readyMs)).join(', ')}]`,
  );
  console.log(
    `virsh create -> guest ready line:      ${fmt(vMs)}   [${virsh.map(fmt).join(', ')}]  (libvirtd already running)`,
  );
  console.log(
    `ratio launcher / virsh:               ${(lMs / vMs).toFixed(2)}   (median of the alternating pairs' ratios: ${pairRatio.toFixed(2)})`,
  );
  console.log(
    `launcher, cold QEMU capability probe:  ${fmt(cold.readyMs)}   (no host-wide capability cache; ratio ${(cold.readyMs / vMs).toFixed(2)})`,
  );
  printMemory(launcher);
  printPhases(launcher);
}

/** the --trace-start phases: median ms since the spawn, and the step from the phase before */
function printPhases(launcher) {
  if (!TRACES) return;
  const names = [...new Set(launcher.flatMap((r) => r.phases.map((p) => p.name)))];
  const rows = names
    .map((n) => ({ n, at: median(launcher.map((r) => r.phases.find((p) => p.name === n)?.ms ?? NaN)) }))
    .sort((a, b) => a.at - b.at);
  console.log(`launcher start-up phases (ms since the spawn, medians; step from the phase before):`);
  let prev = 0;
  for (const { n, at } of rows) {
    console.log(`  ${n.padEnd(38)} ${at.toFixed(0).padStart(6)}   +${(at - prev).toFixed(0)}`);
    prev = at;
  }
}

function printMemory(launcher) {
  const mib = (k) => `${(k / 1024).toFixed(1)} MiB`;
  const sm = (f) => median(launcher.map((r) => r.smaps?.[f] ?? NaN));
  console.log(
    `launcher (Node) smaps_rollup:          Rss ${mib(sm('Rss'))}, Pss ${mib(sm('Pss'))} (anon ${mib(sm('Pss_Anon'))}, file ${mib(sm('Pss_File'))}), Anonymous ${mib(sm('Anonymous'))}`,
  );
  console.log(
    `launcher peak RSS (VmHWM, Node only):  ${(median(launcher.map((r) => r.hwm)) / 1024).toFixed(1)} MiB`,
  );
  console.log(
    `RSS / PSS per process, ${IDLE_MS / 1000} s after the ready line (medians; ${process.getuid?.() === 0 ? 'root: the run is in a PID namespace' : 'not root'}):`,
  );
  const kinds = [...new Set(launcher.flatMap((r) => Object.keys(r.perProcess)))];
  let sum = 0;
  let pssSum = 0;
  for (const k of kinds) {
    const m = median(launcher.map((r) => r.perProcess[k] ?? 0));
    const p = median(launcher.map((r) => r.perProcessPss[k] ?? 0));
    if (k !== 'qemu') {
      sum += m;
      pssSum += p;
    }
    console.log(`  ${k.padEnd(38)} ${(m / 1024).toFixed(1)} MiB / ${(p / 1024).toFixed(1)} MiB`);
  }
  console.log(
    `non-QEMU sum (every process but QEMU): RSS ${(sum / 1024).toFixed(1)} MiB (issue 12 goal: <= 110 MiB), PSS ${(pssSum / 1024).toFixed(1)} MiB`,
  );
  const nonQemuPss = launcher.map(
    (r) => Object.entries(r.perProcessPss).reduce((a, [k, v]) => a + (k === 'qemu' ? 0 : v), 0) / 1024,
  );
  console.log(`non-QEMU PSS per run: ${nonQemuPss.map((x) => x.toFixed(1)).join(', ')} MiB`);
}

benchMain().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
