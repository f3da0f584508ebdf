// The native monitor (build/virt-launcher-monitor) with real processes: bash and sleep play the launcher,
// QEMU (argv[0] qemu-system-x86_64 through bash's exec -a) and the daemons.
import { setTimeout as sleep } from 'node:timers/promises';
import { jest } from '@jest/globals';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { NATIVE_MONITOR, nativeMonitorArgs } from './native-monitor.js';

jest.setTimeout(60_000);

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'kvts-nmon-'));
});
afterEach(async () => {
  for (const pid of pidsMentioning(dir)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  await rm(dir, { recursive: true, force: true });
});

function pidsMentioning(needle: string): number[] {
  const out: number[] = [];
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e) || Number(e) === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
      if (/\) Z /.test(stat)) continue;
      if (readFileSync(`/proc/${e}/cmdline`, 'utf8').split('\0').join(' ').includes(needle))
        out.push(Number(e));
    } catch {
      /* gone */
    }
  }
  return out;
}

function run(args: string[]) {
  const child = spawn(NATIVE_MONITOR, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  child.stdout.resume();
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    // 'close': stderr is read to its end too
    child.on('close', (code, signal) => resolve({ code, signal })),
  );
  return { child, exited, stderr: () => err };
}

async function waitFor(what: string, fn: () => boolean, ms = 30_000) {
  const deadline = Date.now() + ms;
  while (!fn()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

describe('virt-launcher-monitor (native)', () => {
  it('builds its argv from options', () => {
    expect(nativeMonitorArgs({ command: ['l', '--x'], gracePeriodSeconds: 3 })).toEqual([
      '--grace-period-seconds',
      '3',
      '--',
      'l',
      '--x',
    ]);
    expect(
      nativeMonitorArgs({
        command: ['l'],
        gracePeriodSeconds: 0,
        removeDir: '/tmp/x',
        keepDirOnFailure: true,
        pidNamespace: true,
        progress: true,
      }),
    ).toEqual([
      '--grace-period-seconds',
      '0',
      '--remove-dir',
      '/tmp/x',
      '--keep-dir-on-failure',
      '--pid-namespace',
      '--progress',
      '--',
      'l',
    ]);
    expect(() => nativeMonitorArgs({ command: [], gracePeriodSeconds: 1 })).toThrow(/no launcher command/);
    expect(() => nativeMonitorArgs({ command: ['l'], gracePeriodSeconds: 1.5 })).toThrow(/grace-period/);
  });

  it('execNativeMonitor gives the launcher MALLOC_ARENA_MAX=1 unless the environment sets it', async () => {
    const mod = fileURLToPath(new URL('./native-monitor.js', import.meta.url));
    const launcherEnv = async (env: NodeJS.ProcessEnv) => {
      // a Node process that becomes the monitor (execve), whose "launcher" prints its environment
      const script = `import(${JSON.stringify(mod)}).then((m) => m.execNativeMonitor({ command: ['bash', '-c', 'echo arena=$MALLOC_ARENA_MAX'], gracePeriodSeconds: 1 }))`;
      const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'pipe'], env });
      let out = '';
      child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
      const code = await new Promise((r) => child.on('close', r));
      expect(code).toBe(0);
      return out.trim();
    };
    expect(await launcherEnv({ PATH: process.env.PATH })).toBe('arena=1');
    expect(await launcherEnv({ PATH: process.env.PATH, MALLOC_ARENA_MAX: '4' })).toBe('arena=4');
  });

  it('passes the launcher exit code through and ends at once when nothing is left', async () => {
    // a grace period far beyond the test's timeout: waiting for it would fail the test
    const m = run(['--grace-period-seconds', '3600', '--', 'bash', '-c', 'exit 7']);
    expect(await m.exited).toEqual({ code: 7, signal: null });
    expect(m.stderr()).toContain('"msg":"launcher exited (code 7)"');
    expect(m.stderr()).toMatch(/^\{"component":"virt-launcher-monitor","level":"info","timestamp":"[^"]+Z"/);
  });

  it('forwards SIGTERM to the launcher; a launcher ended by it means exit 0', async () => {
    const m = run(['--', 'bash', '-c', `trap 'echo term > ${dir}/got; exit 0' TERM; sleep 300 & wait`]);
    await sleep(500);
    m.child.kill('SIGTERM');
    expect(await m.exited).toEqual({ code: 0, signal: null });
    expect(await readFile(path.join(dir, 'got'), 'utf8')).toBe('term\n');
    expect(m.stderr()).toContain('forwarding SIGTERM to the launcher');
  });

  it('QEMU left behind (its own child by re-parenting) gets the grace period, then SIGKILL; daemons SIGTERM', async () => {
    const tag = path.join(dir, 'left');
    const m = run([
      '--grace-period-seconds',
      '1',
      '--',
      'bash',
      '-c',
      // daemonized like libvirtd does it with QEMU: the intermediate process exits, the grandchild stays
      `(exec -a 'qemu-system-x86_64 ${tag}' sleep 300 &); (exec -a 'libvirtd ${tag}' sleep 300 &); sleep 0.5; exit 3`,
    ]);
    const t0 = Date.now();
    expect(await m.exited).toEqual({ code: 3, signal: null });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1000); // the grace period was given
    expect(m.stderr()).toContain('QEMU still running after the launcher ended; waiting up to 1s');
    expect(m.stderr()).toContain('killed QEMU after the grace period');
    expect(pidsMentioning(tag)).toEqual([]);
  });

  it('reaps orphans while the launcher runs (no zombie under it)', async () => {
    const m = run(['--', 'bash', '-c', '(sleep 0.1 &); sleep 2']);
    await sleep(1200);
    const me = m.child.pid!;
    const zombies = readdirSync('/proc')
      .filter((e) => /^\d+$/.test(e))
      .map((e) => {
        try {
          return readFileSync(`/proc/${e}/stat`, 'utf8');
        } catch {
          return '';
        }
      })
      .filter((s) => {
        const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
        return f[0] === 'Z' && Number(f[1]) === me;
      });
    expect(zombies).toEqual([]);
    expect(await m.exited).toEqual({ code: 0, signal: null });
  });

  it('--remove-dir removes the dir at the end, but not after a failure with --keep-dir-on-failure', async () => {
    const a = path.join(dir, 'a');
    await mkdir(path.join(a, 'sub'), { recursive: true });
    expect(await run(['--remove-dir', a, '--', 'true']).exited).toEqual({ code: 0, signal: null });
    expect(existsSync(a)).toBe(false);
    const b = path.join(dir, 'b');
    await mkdir(b);
    const m = run(['--remove-dir', b, '--keep-dir-on-failure', '--', 'false']);
    expect((await m.exited).code).toBe(1);
    expect(existsSync(b)).toBe(true);
  });

  it('bad flags and a missing command: exit 2 with the flag named; an unstartable launcher: 127', async () => {
    const a = run(['--grace-period-seconds', 'x', '--', 'true']);
    expect((await a.exited).code).toBe(2);
    expect(a.stderr()).toContain('--grace-period-seconds: not a number of seconds: x');
    const b = run(['--remove-dir', 'relative', '--', 'true']);
    expect((await b.exited).code).toBe(2);
    expect(b.stderr()).toContain('--remove-dir: must be an absolute path');
    const c = run(['--grace-period-seconds', '1']);
    expect((await c.exited).code).toBe(2);
    expect(c.stderr()).toContain('no launcher command');
    const d = run(['--', '/nonexistent/launcher']);
    expect((await d.exited).code).toBe(127);
    expect(d.stderr()).toContain('cannot run /nonexistent/launcher');
  });

  const asRoot = process.getuid?.() === 0;
  (asRoot ? it : it.skip)(
    `${asRoot ? '' : '[skipped: needs root] '}--pid-namespace: killed with SIGKILL, the run ends with it and the dir is removed`,
    async () => {
      const work = path.join(dir, 'w');
      await mkdir(work);
      const m = run([
        '--pid-namespace',
        '--remove-dir',
        work,
        '--',
        'bash',
        '-c',
        `exec -a '${work}' sleep 300`,
      ]);
      // the outer monitor, its PID 1 in the namespace, the launcher
      await waitFor('the launcher', () => pidsMentioning(work).length === 3);
      m.child.kill('SIGKILL');
      await m.exited;
      await waitFor('the run gone', () => pidsMentioning(work).length === 0);
      await waitFor('the dir removed', () => !existsSync(work));
      expect(m.stderr()).toContain('launcher started (pid 2)'); // PID 1 is the monitor in the namespace
    },
  );
});
