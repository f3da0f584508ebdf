// Test support: a private libvirtd in session mode (own XDG dirs under a temp dir, no TCP) and
// `virsh define`/`undefine` against it, plus virt-xml-validate. Run as root, the daemon runs as
// uid/gid 107 (user qemu, tools/setup.d/10-qemu-user.sh): root's libvirtd would be the system daemon.
import { spawn, spawnSync } from 'node:child_process';
import { chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll } from '@jest/globals';
import { LAUNCHER_GID, LAUNCHER_UID } from './layout.js';

export interface SessionDaemon {
  uri: string;
  /** uid/gid the daemon (and QEMU) run as; undefined: the current user */
  uid?: number;
  gid?: number;
  /** runs virsh against the daemon */
  virsh(args: string[]): { status: number | null; stdout: string; stderr: string };
  define(xml: string): { ok: boolean; output: string };
  /** defines, returns libvirt's own XML of the domain (virsh dumpxml --inactive), undefines */
  defineAndDump(xml: string): string;
  stop(): Promise<void>;
}

function ids(): { uid?: number; gid?: number } {
  return process.getuid?.() === 0 ? { uid: LAUNCHER_UID, gid: LAUNCHER_GID } : {};
}

export async function startSessionDaemon(): Promise<SessionDaemon> {
  const base = mkdtempSync(path.join(tmpdir(), 'kvts-conv-libvirt-'));
  const { uid, gid } = ids();
  const dirs: Record<string, string> = {};
  for (const d of ['home', 'config', 'runtime', 'cache', 'data', 'xml']) {
    dirs[d] = path.join(base, d);
    mkdirSync(dirs[d]!, { recursive: true, mode: 0o700 });
    if (uid !== undefined) chownSync(dirs[d]!, uid, gid!);
  }
  if (uid !== undefined) chownSync(base, uid, gid!);
  const env = {
    PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
    HOME: dirs.home!,
    XDG_CONFIG_HOME: dirs.config!,
    XDG_RUNTIME_DIR: dirs.runtime!,
    XDG_CACHE_HOME: dirs.cache!,
    XDG_DATA_HOME: dirs.data!,
  };
  const conf = path.join(dirs.config!, 'libvirtd.conf');
  writeFileSync(conf, 'log_outputs = "3:stderr"\n');
  if (uid !== undefined) chownSync(conf, uid, gid!);
  const child = spawn('/usr/sbin/libvirtd', ['-f', conf], {
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
    uid,
    gid,
  });
  let stderr = '';
  child.stderr!.on('data', (b: Buffer) => (stderr = (stderr + b.toString()).slice(-4000)));
  const sock = path.join(dirs.runtime!, 'libvirt', 'libvirt-sock');
  const uri = `qemu+unix:///session?socket=${sock}`;
  const virsh = (args: string[]) =>
    spawnSync('virsh', ['-q', '-c', uri, ...args], { env, uid, gid, encoding: 'utf8', timeout: 60_000 });
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`libvirtd exited: ${stderr}`);
    if (existsSync(sock) && virsh(['version']).status === 0) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`libvirtd did not answer within 30s: ${stderr}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  let n = 0;
  const defineThen = <T>(
    xml: string,
    then: (uuid: string) => T,
  ): { result: { ok: boolean; output: string }; value?: T } => {
    const file = path.join(dirs.xml!, `d${n++}.xml`);
    writeFileSync(file, xml);
    if (uid !== undefined) chownSync(file, uid, gid!);
    const r = virsh(['define', file]);
    const output = `${r.stdout ?? ''}${r.stderr ?? ''}`;
    if (r.status !== 0) return { result: { ok: false, output } };
    // every domain this daemon knows is ours: undefine them all (by UUID, names may hold any character)
    const uuids = (virsh(['list', '--all', '--uuid']).stdout ?? '')
      .split('\n')
      .map((s) => s.trim())
      .filter(Boolean);
    const value = uuids.length === 1 ? then(uuids[0]!) : undefined;
    for (const u of uuids) virsh(['undefine', '--nvram', u]);
    return { result: { ok: true, output }, value };
  };
  return {
    uri,
    uid,
    gid,
    virsh: (args: string[]) => {
      const r = virsh(args);
      return { status: r.status, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
    },
    define(xml: string) {
      return defineThen(xml, () => undefined).result;
    },
    defineAndDump(xml: string) {
      const { result, value } = defineThen(
        xml,
        (uuid) => virsh(['dumpxml', '--inactive', uuid]).stdout ?? '',
      );
      if (!result.ok || value === undefined) throw new Error(`define failed: ${result.output}`);
      return value;
    },
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await new Promise<void>((r) => {
          const t = setTimeout(() => {
            child.kill('SIGKILL');
            r();
          }, 5000);
          child.once('exit', () => {
            clearTimeout(t);
            r();
          });
        });
      }
      rmSync(base, { recursive: true, force: true });
    },
  };
}

/** A session daemon for the calling suite: started before its tests, stopped after them; `daemon()` in a test. */
export function sessionDaemonForSuite(): () => SessionDaemon {
  let daemon: SessionDaemon | undefined;
  beforeAll(async () => {
    daemon = await startSessionDaemon();
  }, 60_000);
  afterAll(async () => {
    await daemon?.stop();
  });
  return () => {
    if (!daemon) throw new Error('sessionDaemonForSuite: the daemon is not running');
    return daemon;
  };
}

/** libvirt's own schema check: `virt-xml-validate FILE domain`. */
export function xmlValidate(xml: string): { ok: boolean; output: string } {
  const dir = mkdtempSync(path.join(tmpdir(), 'kvts-conv-validate-'));
  try {
    const file = path.join(dir, 'domain.xml');
    writeFileSync(file, xml);
    const r = spawnSync('virt-xml-validate', [file, 'domain'], { encoding: 'utf8', timeout: 60_000 });
    return { ok: r.status === 0, output: `${r.stdout ?? ''}${r.stderr ?? ''}` };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
