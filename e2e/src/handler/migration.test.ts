// Live migration of the real test guest between two in-Pod launchers (apps/virt-launcher, each with
// its private session libvirtd), through virt-handler's migration proxy (@kubevirt-ts/handler's
// MigrationProxyManager) over TCP on loopback: the launcher's derived target (upstream's: the proxy
// sockets under its share dir, named from the VMI uid) is what carries libvirt's and QEMU's streams.
//
// Each "Pod" is a mount namespace (unshare + nsenter, root only) in which the Pod's root dir on the host
// is bind-mounted at the same path, /run/kvts-migr-<pid>, as two Pods see the same paths in a cluster:
// the incoming QEMU listens on the same socket path as the one the source QEMU connects to, and the
// domain's files (serial log, kernel) keep their paths on the target. The test plays both handlers'
// migration roles over the cmd sockets: target prepares (SyncMigrationTarget) and opens the TCP listeners,
// source opens the unix listeners and calls MigrateVirtualMachine with upstream's MigrationOptions JSON.
import { setTimeout as sleep } from 'node:timers/promises';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readlink, rm, rmdir } from 'node:fs/promises';
import path from 'node:path';
import { CmdClient } from '@kubevirt-ts/cmd-protocol';
import { MigrationProxyManager } from '@kubevirt-ts/handler';
import {
  connectLauncher,
  LAUNCHER_MAIN,
  guestBeating,
  lastBeat,
  waitForBeat,
  launcherNodeFlags,
  processesInMountNs,
  launcherPodFlags,
  readText,
  READY,
  requireGuest,
  shortTmp,
  stageTestGuest,
  tinyVmi,
  waitFor,
} from '../launcher/helpers.js';

// per run: two runs at once (a developer's and CI's) do not share the mount point
const POD_ROOT = `/run/kvts-migr-${process.pid}`;
const SHARE = `${POD_ROOT}/share`;
const isRoot = process.getuid?.() === 0;
const quiet = {
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  debug: () => undefined,
};
/** what upstream's virt-handler sends (json.Marshal of cmdclient.MigrationOptions) */
const OPTIONS = {
  Bandwidth: '0',
  ProgressTimeout: 150,
  CompletionTimeoutPerGiB: 800,
  UnsafeMigration: false,
  AllowAutoConverge: false,
  AllowPostCopy: false,
  ParallelMigrationThreads: null,
};

interface MigrPod {
  name: string;
  hostRoot: string;
  holder: ChildProcess;
  launcher: ChildProcess;
  stderr(): string;
  client: CmdClient;
  serialLog: string;
  /** host path of the Pod's $POD_ROOT/share */
  share: string;
  libvirtSocket: string;
  kill(): Promise<void>;
}
const pods = new Set<MigrPod>();

function run(cmd: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const c = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    c.stderr!.on('data', (d) => (err += d));
    c.on('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`${cmd} ${args.join(' ')}: ${code} ${err}`)),
    );
  });
}

async function findFile(dir: string, name: string): Promise<string | undefined> {
  for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const p = path.join(dir, e.name);
    if (e.name === name) return p;
    if (e.isDirectory()) {
      const f = await findFile(p, name);
      if (f) return f;
    }
  }
  return undefined;
}

/** A launcher "Pod" in its own mount namespace with its root at POD_ROOT. */
async function startPod(name: string, vmi: ReturnType<typeof tinyVmi>): Promise<MigrPod> {
  const hostRoot = await shortTmp();
  const layout = await stageTestGuest(vmi, hostRoot);
  const share = path.join(hostRoot, 'share');
  await mkdir(share, { recursive: true, mode: 0o755 });
  // the namespace holder: a private mount namespace with the Pod root bound at POD_ROOT
  const holder = spawn('unshare', ['--mount', '--propagation', 'private', 'sleep', 'infinity'], {
    stdio: 'ignore',
  });
  await waitFor('mount namespace', async () => {
    try {
      return (await readlink(`/proc/${holder.pid}/ns/mnt`)) !== (await readlink('/proc/self/ns/mnt'));
    } catch {
      return false;
    }
  });
  await run('nsenter', ['-t', String(holder.pid), '-m', 'mount', '--bind', hostRoot, POD_ROOT]);
  const launcher = spawn(
    'nsenter',
    [
      '-t',
      String(holder.pid),
      '-m',
      '--',
      process.execPath,
      ...launcherNodeFlags(),
      LAUNCHER_MAIN,
      ...launcherPodFlags(vmi, POD_ROOT, SHARE, { grace: 10, logLevel: 'info' }),
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let err = '';
  launcher.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  const pod: MigrPod = {
    name,
    hostRoot,
    holder,
    launcher,
    stderr: () => err,
    client: undefined as never,
    serialLog: layout.serialLogFile(vmi.metadata!.uid!),
    share,
    libvirtSocket: '',
    async kill() {
      pod.client?.close();
      for (const pid of await processesInMountNs(holder.pid!)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          /* gone */
        }
      }
      await waitFor(
        'pod processes gone',
        async () => (await processesInMountNs(holder.pid!)).length === 0,
        30_000,
      );
    },
  };
  pods.add(pod);
  pod.client = await connectLauncher(share, { exitCode: () => launcher.exitCode, stderr: () => err }, 90_000);
  pod.libvirtSocket = (await findFile(path.join(hostRoot, 'lv'), 'libvirt-sock')) ?? '';
  if (!pod.libvirtSocket) throw new Error(`no libvirt-sock under ${hostRoot}/lv`);
  return pod;
}

async function cleanupPod(pod: MigrPod): Promise<void> {
  pods.delete(pod);
  await pod.kill();
  await rm(pod.hostRoot, { recursive: true, force: true });
}

const domainStatus = async (pod: MigrPod) => {
  const d = (await pod.client.getDomain()) as { status?: { status?: string; reason?: string } } | undefined;
  return d ? `${d.status?.status}/${d.status?.reason}` : 'absent';
};

/** both handlers' parts before MigrateVirtualMachine: target prepared and listening, source listening */
async function prepareProxies(src: MigrPod, dst: MigrPod, vmi: ReturnType<typeof tinyVmi>) {
  const uid = vmi.metadata!.uid!;
  const targetHandler = new MigrationProxyManager({ logger: quiet as never, bindAddress: '127.0.0.1' });
  const sourceHandler = new MigrationProxyManager({
    logger: quiet as never,
    socketOwner: { uid: 107, gid: 107 },
  });
  await dst.client.prepareMigrationTarget(vmi);
  // the target launcher made its share dir's migrationproxy/ for the incoming QEMU's stream socket
  expect(existsSync(path.join(dst.share, 'migrationproxy'))).toBe(true);
  await targetHandler.startTargetListener(uid, [
    dst.libvirtSocket,
    path.join(dst.share, 'migrationproxy', `${uid}-49152-source.sock`),
  ]);
  const ports = targetHandler.targetListenerPorts(uid);
  await sourceHandler.startSourceListener(uid, '127.0.0.1', ports, src.share);
  return {
    ports,
    stats: () => ({ source: sourceHandler.proxyStats(uid), target: targetHandler.proxyStats(uid) }),
    async stop() {
      await sourceHandler.close();
      await targetHandler.close();
    },
  };
}

const d = isRoot ? describe : describe.skip;
d(
  `live migration through the handlers' proxies${isRoot ? '' : " (skipped: needs root for the Pods' mount namespaces)"}`,
  () => {
    const vmi = tinyVmi('migr', { uid: '0d5c5d36-6c8e-4a43-9d1b-1a2b3c4d5e6f', grace: 10 });
    let src: MigrPod;
    let dst: MigrPod;

    beforeAll(async () => {
      requireGuest();
      await mkdir(POD_ROOT, { recursive: true, mode: 0o755 });
      src = await startPod('src', vmi);
      dst = await startPod('dst', vmi);
    }, 300_000);

    afterAll(async () => {
      for (const p of [...pods]) await cleanupPod(p).catch(() => undefined);
      await rmdir(POD_ROOT).catch(() => undefined);
    }, 120_000);

    test('the running guest moves to the target and keeps running there; the source domain ends', async () => {
      await src.client.syncVMI(vmi);
      await guestBeating(src.serialLog, 'the source', 150_000, 60_000);
      const proxies = await prepareProxies(src, dst, vmi);
      expect(Object.values(proxies.ports).sort()).toEqual([0, 49152]);
      try {
        await src.client.migrateVMI(vmi, OPTIONS);
        await waitFor(
          'the migration completes',
          async () => {
            const s = await domainStatus(src);
            if (s === 'Running/Booted' || s === 'Paused/Migration' || s === 'Running/Migrated') return false;
            return s;
          },
          180_000,
          250,
        );
        expect(await domainStatus(src)).toBe('Shutoff/Migrated');
        const beatAtSwitch = lastBeat(await readText(src.serialLog));
        await waitFor(
          'domain running on the target',
          async () => (await domainStatus(dst)) === 'Running/Migrated',
          60_000,
        );
        await dst.client.finalizeMigration(vmi);
        // everything went through the proxies: libvirt's connection and QEMU's stream (the guest's RAM)
        const { source, target } = proxies.stats();
        console.log(`proxied: source ${JSON.stringify(source)}, target ${JSON.stringify(target)}`);
        expect(source.connections).toBeGreaterThanOrEqual(2);
        expect(source.bytesIn).toBeGreaterThan(4 * 1024 * 1024);
        expect(target.bytesIn).toBeGreaterThan(4 * 1024 * 1024);
        // the same guest (no new boot) goes on printing its heartbeat on the target's console
        await waitForBeat(dst.serialLog, 'the target', beatAtSwitch + 3, 90_000);
        const dstText = await readText(dst.serialLog);
        expect(dstText).not.toContain(READY);
        const first = Number(/KUBEVIRT-TS-GUEST-HEARTBEAT (\d+)/.exec(dstText)?.[1]);
        expect(first).toBeGreaterThan(1);
        expect(first).toBeLessThanOrEqual(beatAtSwitch + 2);
        // the source's QEMU is gone; the source handler's cleanup removes the domain
        await src.client.deleteVMI(vmi);
        expect(await src.client.getDomain()).toBeUndefined();
        const srcBeats = lastBeat(await readText(src.serialLog));
        await sleep(3000);
        expect(lastBeat(await readText(src.serialLog))).toBe(srcBeats);
      } finally {
        await proxies.stop();
      }
    }, 420_000);

    test('a target killed during the migration fails it; the guest keeps running on the source', async () => {
      // the guest now runs on dst; a fresh target Pod, throttled so the migration is still in flight when it dies
      const third = await startPod('third', vmi);
      const proxies = await prepareProxies(dst, third, vmi);
      try {
        await dst.client.migrateVMI(vmi, { ...OPTIONS, Bandwidth: '1Mi' });
        await waitFor(
          'migration in flight',
          async () => ((await dst.client.getDomain()) as { migration?: object } | undefined)?.migration,
          30_000,
        );
        await sleep(3000);
        await third.kill();
        const st = await waitFor(
          'the source gives up',
          async () => {
            const dom = (await dst.client.getDomain()) as {
              migration?: { completed?: boolean; failed?: boolean; failureReason?: string };
            };
            return dom?.migration?.completed ? dom.migration : undefined;
          },
          120_000,
          250,
        );
        expect(st.failed).toBe(true);
        console.log(`failed migration: ${st.failureReason}`);
        expect(st.failureReason).toBeTruthy();
        expect(await domainStatus(dst)).toMatch(/^Running\//);
        await waitForBeat(dst.serialLog, 'the source', lastBeat(await readText(dst.serialLog)) + 2, 60_000);
      } finally {
        await proxies.stop();
        await cleanupPod(third);
      }
    }, 300_000);
  },
);
