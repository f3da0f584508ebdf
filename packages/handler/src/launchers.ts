/**
 * Where the handler finds launchers on its node, and the records it keeps of them.
 *
 * Layout (upstream's): kubelet's pod dir, seen by the handler at `podsDir` (the host's
 * /var/lib/kubelet/pods), holds each launcher Pod's emptyDirs:
 *
 *   <podsDir>/<podUID>/volumes/kubernetes.io~empty-dir/sockets/launcher-sock   the launcher's cmd socket
 *   <podsDir>/<podUID>/volumes/kubernetes.io~empty-dir/public/                 /var/run/kubevirt in the Pod:
 *        domain-notify-pipe.sock                                               served by the handler (a pipe
 *                                                                              to its own notify socket)
 *
 * The VMI names its Pod in status.activePods (pod uid -> node), so the handler goes VMI -> Pod dir ->
 * socket. Ghost records (`<handlerDir>/ghost-records/<vmi uid>`, JSON) remember which socket served
 * which VMI, so a restarted handler re-attaches to launchers whose VMI it can no longer see.
 */
import { lstat, mkdir, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { LAUNCHER_SOCKET_NAME, NOTIFY_SOCKET_NAME } from '@kubevirt-ts/cmd-protocol';
import type { Logger } from '@kubevirt-ts/log';

export const EMPTY_DIR = path.join('volumes', 'kubernetes.io~empty-dir');

export function podSocketsDir(podsDir: string, podUid: string): string {
  return path.join(podsDir, podUid, EMPTY_DIR, 'sockets');
}
export function podSocketPath(podsDir: string, podUid: string): string {
  return path.join(podSocketsDir(podsDir, podUid), LAUNCHER_SOCKET_NAME);
}
/** The Pod's /var/run/kubevirt, where the handler puts the notify pipe. */
export function podPublicDir(podsDir: string, podUid: string): string {
  return path.join(podsDir, podUid, EMPTY_DIR, 'public');
}
/** The Pod's /var/run/kubevirt-private (the VMI's console and VNC sockets are under `<vmi uid>/`). */
export function podPrivateDir(podsDir: string, podUid: string): string {
  return path.join(podsDir, podUid, EMPTY_DIR, 'private');
}
export function podNotifyPipePath(podsDir: string, podUid: string): string {
  return path.join(podPublicDir(podsDir, podUid), NOTIFY_SOCKET_NAME);
}

export type SocketCheck =
  { ok: true } | { ok: false; reason: 'missing' | 'not-a-socket' | 'wrong-owner'; message: string };

/**
 * A launcher socket is used only when it is a unix socket owned by the launcher's uid
 * (`expectedUid`); a regular file, a symlink or another user's socket is refused: whoever can put
 * it there must not get the handler (root) to talk to it.
 */
export async function checkLauncherSocket(socketPath: string, expectedUid: number): Promise<SocketCheck> {
  let st;
  try {
    st = await lstat(socketPath);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT')
      return { ok: false, reason: 'missing', message: `${socketPath}: no such socket` };
    throw err;
  }
  if (!st.isSocket())
    return { ok: false, reason: 'not-a-socket', message: `${socketPath}: not a unix socket, ignored` };
  if (st.uid !== expectedUid)
    return {
      ok: false,
      reason: 'wrong-owner',
      message: `${socketPath}: owned by uid ${st.uid}, launchers run as uid ${expectedUid}, ignored`,
    };
  return { ok: true };
}

export interface FoundLauncher {
  podUid: string;
  socketPath: string;
}

/**
 * Every usable launcher socket under `podsDir`. Paths that exist but are not usable sockets are
 * skipped with one warning line each (logged once per path per `warned` set).
 */
export async function discoverLaunchers(
  podsDir: string,
  expectedUid: number,
  log: Logger,
  warned: Set<string> = new Set(),
): Promise<FoundLauncher[]> {
  let pods: string[];
  try {
    pods = await readdir(podsDir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const out: FoundLauncher[] = [];
  for (const podUid of pods.sort()) {
    const socketPath = podSocketPath(podsDir, podUid);
    const check = await checkLauncherSocket(socketPath, expectedUid);
    if (check.ok) out.push({ podUid, socketPath });
    else if (check.reason !== 'missing' && !warned.has(socketPath + check.reason)) {
      warned.add(socketPath + check.reason);
      log.warn(check.message, {
        reason: check.reason === 'not-a-socket' ? 'NotASocket' : 'WrongOwner',
        path: socketPath,
      });
    }
  }
  return out;
}

/** What the handler writes before it first syncs a VMI to a launcher (upstream's ghost record). */
export interface GhostRecord {
  name: string;
  namespace: string;
  uid: string;
  socketFile: string;
  podUid: string;
  /** when the handler sent the first ACPI shutdown (ms since epoch): the grace period runs from here */
  shutdownStartedAt?: number;
}

const UID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export class GhostRecords {
  readonly dir: string;
  private records = new Map<string, GhostRecord>();

  constructor(handlerDir: string) {
    this.dir = path.join(handlerDir, 'ghost-records');
  }

  /** Reads every record from disk (a malformed file is logged and skipped). */
  async load(log: Logger): Promise<GhostRecord[]> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    this.records.clear();
    for (const f of (await readdir(this.dir)).filter((f) => !f.endsWith('.tmp'))) {
      try {
        const r = JSON.parse(await readFile(path.join(this.dir, f), 'utf8')) as GhostRecord;
        if (!r.uid || r.uid !== f || !r.name || !r.namespace || !r.socketFile)
          throw new Error('missing fields');
        this.records.set(r.uid, r);
      } catch (err) {
        log.warn(`ghost record ${f} ignored: ${(err as Error).message}`, { reason: 'BadGhostRecord' });
      }
    }
    return [...this.records.values()];
  }

  get(uid: string): GhostRecord | undefined {
    return this.records.get(uid);
  }
  byKey(key: string): GhostRecord[] {
    return [...this.records.values()].filter((r) => `${r.namespace}/${r.name}` === key);
  }
  all(): GhostRecord[] {
    return [...this.records.values()];
  }

  /** Writes atomically (tmp + rename). Idempotent. */
  async put(r: GhostRecord): Promise<void> {
    if (!UID_RE.test(r.uid))
      throw new Error(`ghost record: uid ${JSON.stringify(r.uid)} is not a valid file name`);
    const prev = this.records.get(r.uid);
    if (prev && JSON.stringify(prev) === JSON.stringify(r)) return;
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    const file = path.join(this.dir, r.uid);
    await writeFile(`${file}.tmp`, JSON.stringify(r), { mode: 0o600 });
    await rename(`${file}.tmp`, file);
    this.records.set(r.uid, r);
  }

  async delete(uid: string): Promise<void> {
    if (!this.records.has(uid)) return;
    if (UID_RE.test(uid)) await rm(path.join(this.dir, uid), { force: true });
    this.records.delete(uid);
  }
}
