// Integration tests against the real etcd + kube-apiserver (no mocks).
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api } from '@kubernetes/client-node';
import { baseDir, findBinaries, startTestEnv, withTestEnv, pinnedKubeVersion } from './index.js';

const cli = fileURLToPath(new URL('./cli.js', import.meta.url));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitGone(pids: number[], ms = 15000): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (pids.every((p) => !alive(p))) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return pids.every((p) => !alive(p));
}

/** Runs the CLI; collects the pids it logs; optional hook when the command has started. */
function runCli(
  args: string[],
  onRunning?: (child: ReturnType<typeof spawn>, pids: number[]) => void,
  env: NodeJS.ProcessEnv = process.env,
): Promise<{
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  pids: number[];
  childPid: number;
}> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [cli, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
    let stdout = '';
    let stderr = '';
    const pids: number[] = [];
    child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr!.on('data', (d: Buffer) => {
      stderr += d.toString();
      for (const line of d.toString().split('\n')) {
        if (!line.startsWith('{')) continue;
        const rec = JSON.parse(line) as { msg?: string; pid?: number };
        if (typeof rec.pid === 'number') pids.push(rec.pid);
        if (rec.msg === 'running command') setTimeout(() => onRunning?.(child, pids), 300);
      }
    });
    child.on('exit', (code, signal) => resolve({ code, signal, stdout, stderr, pids, childPid: child.pid! }));
  });
}

describe('testenv', () => {
  it('pins a Kubernetes version', () => {
    expect(pinnedKubeVersion()).toMatch(/^v1\.\d+\.\d+$/);
  });

  it('starts a real API server that serves the core API with the admin kubeconfig, and stops cleanly', async () => {
    const env = await startTestEnv();
    try {
      expect(env.server).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
      const core = env.kubeConfig().makeApiClient(CoreV1Api);
      const nss = await core.listNamespace();
      expect(nss.items.map((n) => n.metadata?.name)).toContain('default');
      // a write that goes through etcd
      await core.createNamespace({ body: { metadata: { name: 'testenv-write' } } });
      const ns = await core.readNamespace({ name: 'testenv-write' });
      expect(ns.metadata?.uid).toBeTruthy();
      expect(alive(env.pids.etcd) && alive(env.pids.apiserver)).toBe(true);
    } finally {
      await env.stop();
    }
    expect(alive(env.pids.etcd)).toBe(false);
    expect(alive(env.pids.apiserver)).toBe(false);
    expect(existsSync(env.dir)).toBe(false);
    await env.stop(); // idempotent
  });

  it('withTestEnv stops the control plane when the body throws', async () => {
    let pids: number[] = [];
    await expect(
      withTestEnv(async (env) => {
        pids = [env.pids.etcd, env.pids.apiserver];
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(pids.length).toBe(2);
    expect(await waitGone(pids)).toBe(true);
  });

  it('honors KUBEBUILDER_ASSETS and names a missing binary', () => {
    const real = findBinaries();
    const dir = mkdtempSync(join(tmpdir(), 'kvts-assets-'));
    const saved = process.env.KUBEBUILDER_ASSETS;
    try {
      process.env.KUBEBUILDER_ASSETS = dir;
      expect(() => findBinaries()).toThrow(`${join(dir, 'kube-apiserver')} is missing`);
      symlinkSync(real.kubeApiserver, join(dir, 'kube-apiserver'));
      symlinkSync(real.etcd, join(dir, 'etcd'));
      symlinkSync(real.kubectl!, join(dir, 'kubectl'));
      expect(findBinaries()).toEqual({
        kubeApiserver: join(dir, 'kube-apiserver'),
        etcd: join(dir, 'etcd'),
        kubectl: join(dir, 'kubectl'),
        source: 'KUBEBUILDER_ASSETS',
      });
    } finally {
      if (saved === undefined) delete process.env.KUBEBUILDER_ASSETS;
      else process.env.KUBEBUILDER_ASSETS = saved;
      rmSync(dir, { recursive: true });
    }
  });

  it('CLI runs the command with KUBECONFIG, returns its exit status and leaves no process behind', async () => {
    const script =
      'const fs=require("fs");const k=JSON.parse(fs.readFileSync(process.env.KUBECONFIG,"utf8"));' +
      'console.log(k.clusters[0].cluster.server===process.env.KVTS_TESTENV_SERVER?"same-server":"different");process.exit(3)';
    const r = await runCli(['--', process.execPath, '-e', script]);
    expect(r.stdout.trim()).toBe('same-server');
    expect(r.code).toBe(3);
    expect(r.pids.length).toBe(2);
    expect(await waitGone(r.pids)).toBe(true);
  });

  it('starts with the binaries KUBEBUILDER_ASSETS names', async () => {
    const real = findBinaries();
    const dir = mkdtempSync(join(tmpdir(), 'kvts-assets-'));
    const saved = process.env.KUBEBUILDER_ASSETS;
    try {
      symlinkSync(real.kubeApiserver, join(dir, 'kube-apiserver'));
      symlinkSync(real.etcd, join(dir, 'etcd'));
      process.env.KUBEBUILDER_ASSETS = dir;
      await withTestEnv(async (env) => {
        expect(env.binaries.source).toBe('KUBEBUILDER_ASSETS');
        const nss = await env.kubeConfig().makeApiClient(CoreV1Api).listNamespace();
        expect(nss.items.length).toBeGreaterThan(0);
      });
    } finally {
      if (saved === undefined) delete process.env.KUBEBUILDER_ASSETS;
      else process.env.KUBEBUILDER_ASSETS = saved;
      rmSync(dir, { recursive: true });
    }
  });

  it('tools/testenv.sh runs kubectl against the control plane (the built kubectl is on PATH)', () => {
    const script = fileURLToPath(new URL('../../testenv.sh', import.meta.url));
    const r = spawnSync('bash', [script, '--', 'kubectl', 'get', 'namespace', 'kube-system', '-o', 'name'], {
      encoding: 'utf8',
      timeout: 120000,
    });
    expect({ status: r.status, out: r.stdout.trim() }).toEqual({ status: 0, out: 'namespace/kube-system' });
  });

  it('CLI rejects a missing command or an unknown option with usage, naming the problem', async () => {
    const r = await runCli([]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('usage:');
    expect(r.stderr).toContain('a COMMAND after -- is required');
    const bad = await runCli(['--bogus', '--', 'true']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('unknown option --bogus');
  });

  it('CLI stops everything on SIGINT (Ctrl-C) while the command runs', async () => {
    const r = await runCli(['--', 'sleep', '60'], (child) => child.kill('SIGINT'));
    expect(r.code).toBe(130);
    expect(r.pids.length).toBe(2);
    expect(await waitGone(r.pids)).toBe(true);
  });

  it('servers die with the CLI even when it is SIGKILLed (parent-death signal)', async () => {
    let sleepPid = 0;
    // a private base dir: other runs on this machine clean up dead owners' dirs in the shared one
    const base = mkdtempSync(join(tmpdir(), 'kvts-base-'));
    const r = await runCli(['--', 'sh', '-c', 'echo $$; exec sleep 60'], (child) => child.kill('SIGKILL'), {
      ...process.env,
      KVTS_TESTENV_DIR: base,
    });
    const savedBase = process.env.KVTS_TESTENV_DIR;
    sleepPid = Number(r.stdout.trim());
    try {
      expect(r.signal).toBe('SIGKILL');
      expect(await waitGone(r.pids)).toBe(true);
      // its data dir is left behind; the next start removes it
      const left = readdirSync(base).filter(
        (n) =>
          n.startsWith('kvts-testenv-') &&
          readFileSync(join(base, n, 'owner.pid'), 'utf8') === String(r.childPid),
      );
      expect(left.length).toBe(1);
      process.env.KVTS_TESTENV_DIR = base;
      expect(baseDir()).toBe(base);
      const env = await startTestEnv();
      await env.stop();
      expect(existsSync(join(base, left[0]!))).toBe(false);
      expect(readdirSync(base)).toEqual([]);
    } finally {
      if (savedBase === undefined) delete process.env.KVTS_TESTENV_DIR;
      else process.env.KVTS_TESTENV_DIR = savedBase;
      rmSync(base, { recursive: true, force: true });
      if (sleepPid > 0 && alive(sleepPid)) process.kill(sleepPid, 'SIGKILL'); // the user's command is not ours to reap
    }
  });
});

describe('jest global setup/teardown', () => {
  it('exports KUBECONFIG for the run and stops the control plane afterwards', async () => {
    const { default: setup } = await import('@kubevirt-ts/testenv/jest-global-setup');
    const { default: teardown } = await import('@kubevirt-ts/testenv/jest-global-teardown');
    const saved = { k: process.env.KUBECONFIG, s: process.env.KVTS_TESTENV_SERVER };
    try {
      await setup();
      expect(process.env.KUBECONFIG).toMatch(/kvts-testenv-.*\/kubeconfig$/);
      const { KubeConfig } = await import('@kubernetes/client-node');
      const kc = new KubeConfig();
      kc.loadFromFile(process.env.KUBECONFIG!);
      const nss = await kc.makeApiClient(CoreV1Api).listNamespace();
      expect(nss.items.length).toBeGreaterThan(0);
      const dir = process.env.KUBECONFIG!.replace(/\/kubeconfig$/, '');
      await teardown();
      expect(existsSync(dir)).toBe(false);
    } finally {
      process.env.KUBECONFIG = saved.k;
      process.env.KVTS_TESTENV_SERVER = saved.s;
      if (saved.k === undefined) delete process.env.KUBECONFIG;
      if (saved.s === undefined) delete process.env.KVTS_TESTENV_SERVER;
    }
  });
});
