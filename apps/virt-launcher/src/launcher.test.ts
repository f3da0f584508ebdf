// Lifecycle logic of the Launcher over an in-memory domain layer (fast unit tests); the real
// libvirtd/QEMU paths are covered by e2e/src/launcher. The cmd server is real (temp unix socket).
import { execFile } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, stat, statfs, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { PassThrough } from 'node:stream';
import os from 'node:os';
import path from 'node:path';
import { CmdClient, launcherSocketPath } from '@kubevirt-ts/cmd-protocol';
import { ExitCode, LauncherError } from './errors.js';
import { parseLauncherFlags } from './flags.js';
import { createLayout } from './layout.js';
import { podConfig } from './pod-config.js';
import { Launcher, type LauncherConfig } from './launcher.js';
import { createLogger } from '@kubevirt-ts/log';
import { openDomainLayer, type DomainEventLike, type DomainLayer } from './wiring.js';

const real = { ...openDomainLayer };
const execFileP = promisify(execFile);
let root: string;
let emit: (ev: DomainEventLike) => void;
let calls: string[];
let onSync: () => void;

function fakeLayer(): DomainLayer {
  let listener: (ev: DomainEventLike) => void = () => undefined;
  emit = (ev) => listener(ev);
  const manager = {
    syncVMI: async () => {
      calls.push('sync');
      onSync();
    },
    shutdownVMI: async (_vmi: unknown, o: { gracePeriodSeconds?: number; wait?: boolean }) => {
      calls.push(`shutdown:${o?.gracePeriodSeconds}:${o?.wait}`);
      setTimeout(() => emit(ev('MODIFIED', 'Shutoff', 'Shutdown')), 20);
      return 'shutdown';
    },
    killVMI: async () => void calls.push('kill'),
    prepareMigrationTarget: async () => void calls.push('prepare-target'),
    getDomain: async () => ({ domainName: 'ns_vm' }),
    getUsers: async () => ({ items: [{ userName: 'root', loginTime: 1 }] }),
    getFilesystems: async () => ({ items: [{ diskName: 'vda1', mountPoint: '/', fileSystemType: 'ext4' }] }),
    exec: async (name: string, cmd: string, args: string[], timeout: number) => {
      calls.push(`exec:${name}:${cmd}:${args.join(',')}:${timeout}`);
      return { exitCode: 3, stdout: 'out' };
    },
  };
  return {
    manager: manager as never,
    onEvent: (fn) => (listener = fn),
    startWatching: async () => undefined,
    libvirtVersion: async () => '9.0.0',
    alive: async () => true,
    close: async () => void calls.push('close'),
  };
}

function ev(type: DomainEventLike['type'], status: string, reason: string): DomainEventLike {
  return {
    type,
    domain: {
      kind: 'Domain',
      apiVersion: 'kubevirt.io/v1',
      metadata: { name: 'vm', namespace: 'ns' },
      domainName: 'ns_vm',
      status: { status, reason } as never,
    },
    status: { status, reason },
  };
}

const vmi = {
  apiVersion: 'kubevirt.io/v1',
  kind: 'VirtualMachineInstance',
  metadata: { name: 'vm', namespace: 'ns', uid: 'u1' },
  spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } } },
};

beforeEach(async () => {
  root = await mkdtemp(path.join(os.tmpdir(), 'kvts-launcher-'));
  calls = [];
  onSync = () => undefined;
  openDomainLayer.startDaemon = async () => ({
    uri: 'fake://',
    pid: process.pid,
    stop: async () => void calls.push('stop-daemon'),
  });
  openDomainLayer.connect = async () => fakeLayer();
});
afterEach(async () => {
  Object.assign(openDomainLayer, real);
  await rm(root, { recursive: true, force: true });
});

function config(over: Partial<LauncherConfig> = {}): LauncherConfig {
  return {
    name: 'vm',
    namespace: 'ns',
    uid: 'u1',
    gracePeriodSeconds: 7,
    qemuTimeoutMs: 60_000,
    allowEmulation: true,
    root,
    socketsDir: path.join(root, 'sockets'),
    libvirtBaseDir: path.join(root, 'lv'),
    keepAfterFailure: false,
    logger: createLogger({ component: 'virt-launcher', silent: true }),
    ...over,
  };
}

async function started(c: LauncherConfig): Promise<{ l: Launcher; client: CmdClient }> {
  const l = new Launcher(c);
  const stages: string[] = [];
  l.on('stage', (s: string) => stages.push(s));
  await l.start();
  expect(stages).toEqual(['dirs', 'libvirtd', 'connect', 'cmd-server', 'notify', 'ready']);
  const client = await CmdClient.connect(launcherSocketPath(c.socketsDir));
  return { l, client };
}

describe('Launcher lifecycle', () => {
  it('guest shutdown after running: exit 0, everything stopped', async () => {
    const { l, client } = await started(config());
    onSync = () => setTimeout(() => emit(ev('MODIFIED', 'Running', 'Booted')), 10);
    await client.syncVMI(vmi as never);
    await new Promise((r) => setTimeout(r, 50));
    emit(ev('MODIFIED', 'Shutoff', 'Shutdown'));
    const res = await l.ended();
    client.close();
    expect(res).toMatchObject({ exitCode: 0, reason: 'DomainEnded' });
    expect(calls).toEqual(['sync', 'close', 'stop-daemon']);
  });

  it("logs QEMU's pid from libvirt's pid file once the domain runs, in upstream's words", async () => {
    const lines: string[] = [];
    const stream = new PassThrough();
    stream.on('data', (b: Buffer) => lines.push(...b.toString().split('\n').filter(Boolean)));
    const c = config({ logger: createLogger({ component: 'virt-launcher', stream }) });
    // where the session libvirtd writes it: <base>/.../qemu/run/<namespace>_<name>.pid
    const run = path.join(c.libvirtBaseDir, 'run', 'libvirt', 'qemu', 'run');
    await mkdir(run, { recursive: true });
    await writeFile(path.join(run, 'ns_vm.pid'), '4242\n');
    await writeFile(path.join(run, 'other_vm.pid'), '4343\n');
    const { l, client } = await started(c);
    emit(ev('MODIFIED', 'Running', 'Booted'));
    const msgs = () => lines.map((x) => (JSON.parse(x) as { msg: string }).msg);
    for (let i = 0; i < 100 && !msgs().some((m) => m.startsWith('Found PID')); i++)
      await new Promise((r) => setTimeout(r, 10));
    expect(msgs()).toContain('Found PID for ns_vm: 4242');
    emit(ev('MODIFIED', 'Shutoff', 'Shutdown'));
    const res = await l.ended();
    client.close();
    expect(res).toMatchObject({ exitCode: 0, reason: 'DomainEnded' });
  });

  it('a crash: exit 5', async () => {
    const { l, client } = await started(config());
    await client.syncVMI(vmi as never);
    emit(ev('MODIFIED', 'Running', 'Booted'));
    emit(ev('MODIFIED', 'Shutoff', 'Crashed'));
    expect(await l.ended()).toMatchObject({ exitCode: ExitCode.DOMAIN_FAILED, reason: 'DomainFailed' });
    client.close();
  });

  it('not Running within --qemu-timeout: exit 4', async () => {
    const { l, client } = await started(config({ qemuTimeoutMs: 300 }));
    await client.syncVMI(vmi as never);
    const res = await l.ended();
    client.close();
    expect(res.exitCode).toBe(ExitCode.QEMU_TIMEOUT);
    expect(res.message).toMatch(/did not reach Running within --qemu-timeout/);
  });

  it('SIGTERM: ACPI shutdown with the grace period, waits for it, exit 0', async () => {
    const { l, client } = await started(config());
    await client.syncVMI(vmi as never);
    emit(ev('MODIFIED', 'Running', 'Booted'));
    const res = await l.terminate('SIGTERM');
    client.close();
    expect(res).toMatchObject({ exitCode: 0, reason: 'GuestShutdown' });
    expect(calls).toContain('shutdown:7:true');
  });

  it('SIGTERM on a migration target once the migrated domain runs there: ACPI shutdown with the grace period', async () => {
    const { l, client } = await started(config());
    await client.prepareMigrationTarget(vmi as never);
    emit(ev('MODIFIED', 'Running', 'Migrated'));
    const res = await l.terminate('SIGTERM');
    client.close();
    expect(res).toMatchObject({ exitCode: 0, reason: 'GuestShutdown' });
    expect(calls).toEqual(['prepare-target', 'shutdown:7:true', 'close', 'stop-daemon']);
  });

  it('SIGTERM on a migration target before any domain arrived: exit 0 at once', async () => {
    const { l, client } = await started(config());
    await client.prepareMigrationTarget(vmi as never);
    client.close();
    expect(await l.terminate('SIGTERM')).toMatchObject({ exitCode: 0, reason: 'Terminated' });
    expect(calls).not.toContain('shutdown:7:true');
  });

  it('SIGTERM before any domain: exit 0 at once', async () => {
    const { l, client } = await started(config());
    client.close();
    expect(await l.terminate('SIGTERM')).toMatchObject({ exitCode: 0, reason: 'Terminated' });
  });

  it('a VMI of another launcher is refused; unsupported rpcs say so', async () => {
    const { l, client } = await started(config());
    await expect(
      client.syncVMI({ ...vmi, metadata: { name: 'other', namespace: 'ns' } } as never),
    ).rejects.toThrow(/this launcher runs ns\/vm, not ns\/other/);
    await expect(client.hotplugHostDevices(vmi as never)).rejects.toThrow(/not supported/);
    expect(calls).not.toContain('sync');
    client.close();
    await l.terminate();
  });

  it('guest agent rpcs (GetUsers, GetFilesystems, Exec) reach the DomainManager over the cmd socket', async () => {
    const { l, client } = await started(config());
    // upstream's wire shape: bare arrays (the manager's lists are unwrapped by the cmd server)
    expect(await client.getUsers()).toEqual([{ userName: 'root', loginTime: 1 }]);
    expect(await client.getFilesystems()).toEqual([
      { diskName: 'vda1', mountPoint: '/', fileSystemType: 'ext4' },
    ]);
    expect(await client.exec('ns_vm', '/bin/true', ['a', 'b'], 5)).toEqual({ exitCode: 3, stdout: 'out' });
    expect(calls).toContain('exec:ns_vm:/bin/true:a,b:5');
    client.close();
    await l.terminate();
  });

  it("SignalTargetPodCleanup (upstream's early exit): the migration target Pod ends, any other launcher carries on", async () => {
    const migrating = (targetPod: string) =>
      ({ ...vmi, status: { migrationState: { migrationUid: 'm1', targetPod } } }) as never;
    // no domain yet (the incoming one never came): the target ends at once, a failure
    const t = await started(config({ podName: 'virt-launcher-vm-target' }));
    await t.client.signalTargetPodCleanup(migrating('virt-launcher-vm-other'));
    await t.client.ping(); // not this Pod: still serving
    await t.client.signalTargetPodCleanup(migrating('virt-launcher-vm-target'));
    expect(await t.l.ended()).toMatchObject({ exitCode: ExitCode.FAILURE, reason: 'TargetPodCleanup' });
    t.client.close();
    await rm(path.join(root, 'sockets'), { recursive: true, force: true });
    await rm(path.join(root, 'lv'), { recursive: true, force: true });

    // an incoming domain is there (paused, migrating in): the launcher ends when it has gone, not before
    const u = await started(config({ podName: 'virt-launcher-vm-target' }));
    emit(ev('ADDED', 'Paused', 'Migration'));
    await u.client.signalTargetPodCleanup(migrating('virt-launcher-vm-target'));
    let done = false;
    void u.l.ended().then(() => (done = true));
    await new Promise((r) => setTimeout(r, 100));
    expect(done).toBe(false);
    emit(ev('DELETED', 'Shutoff', 'Destroyed'));
    expect(await u.l.ended()).toMatchObject({ exitCode: ExitCode.FAILURE, reason: 'TargetPodCleanup' });
    u.client.close();

    // a launcher without POD_NAME (standalone) ignores it
    const n = await started(
      config({ socketsDir: path.join(root, 'sockets2'), libvirtBaseDir: path.join(root, 'lv2') }),
    );
    await n.client.signalTargetPodCleanup(migrating('virt-launcher-vm-target'));
    await n.client.ping();
    n.client.close();
    expect(await n.l.terminate()).toMatchObject({ exitCode: 0 });
  });

  it('--keep-after-failure: stays up after a failure until terminated', async () => {
    const { l, client } = await started(config({ keepAfterFailure: true }));
    await client.syncVMI(vmi as never);
    emit(ev('MODIFIED', 'Running', 'Booted'));
    const failed = new Promise((r) => l.once('failed', r));
    emit(ev('MODIFIED', 'Crashed', 'Unknown'));
    await failed;
    await client.ping(); // still serving
    client.close();
    expect(await l.terminate()).toMatchObject({ exitCode: 0 });
  });

  it('a failing stage names itself', async () => {
    openDomainLayer.startDaemon = async () => {
      throw new Error('libvirtd exited before answering (1)');
    };
    const l = new Launcher(config());
    await expect(l.start()).rejects.toMatchObject({
      stage: 'libvirtd',
      message: 'libvirtd: libvirtd exited before answering (1)',
    });
  });

  it('uses a libvirtd started early (config.daemon) instead of starting one, and stops it', async () => {
    openDomainLayer.startDaemon = async () => {
      throw new Error('must not start a second libvirtd');
    };
    const daemon = Promise.resolve({
      uri: 'fake://',
      pid: process.pid,
      stop: async () => void calls.push('stop-early-daemon'),
    });
    const { l, client } = await started(config({ daemon }));
    client.close();
    await l.terminate();
    expect(calls).toContain('stop-early-daemon');
  });

  it("the dirs stage makes EFI's variable store dir under the root (standalone; a Pod mounts an emptyDir there)", async () => {
    const { l, client } = await started(config());
    const nvramDir = path.dirname(l.paths.nvramFile('vm'));
    expect(nvramDir.startsWith(root + '/')).toBe(true);
    expect((await stat(nvramDir)).isDirectory()).toBe(true);
    client.close();
    await l.abort(new LauncherError('test over', 0, 'ready'));
  });

  it('a start that fails before the libvirtd stage still stops the early daemon (nothing left)', async () => {
    const daemon = Promise.resolve({
      uri: 'fake://',
      pid: process.pid,
      stop: async () => void calls.push('stop-early-daemon'),
    });
    const l = new Launcher(config({ daemon }));
    const priv = l.paths.vmiPrivateDir('u1');
    await mkdir(priv, { recursive: true });
    await chmod(priv, 0o755);
    const err = await l.start().then(
      () => undefined,
      (e: LauncherError) => e,
    );
    expect(err).toMatchObject({ stage: 'dirs' });
    await l.abort(err!);
    expect(calls).toEqual(['stop-early-daemon']);
  });

  it('an early daemon that failed fails the libvirtd stage with its message', async () => {
    const daemon = Promise.reject(new Error('libvirtd exited before answering (1)'));
    daemon.catch(() => undefined);
    const l = new Launcher(config({ daemon }));
    await expect(l.start()).rejects.toMatchObject({
      stage: 'libvirtd',
      message: 'libvirtd: libvirtd exited before answering (1)',
    });
  });

  it('never changes the mode of a dir it did not create: an existing socket dir keeps its mode, a loose private dir is refused', async () => {
    const sockets = path.join(root, 'given-sockets');
    await mkdir(sockets, { mode: 0o755 });
    await chmod(sockets, 0o755);
    const { l, client } = await started(config({ socketsDir: sockets }));
    expect((await stat(sockets)).mode & 0o777).toBe(0o755);
    expect((await stat(launcherSocketPath(sockets))).mode & 0o777).toBe(0o600);
    // the private dir it made is 0700
    expect((await stat(l.paths.vmiPrivateDir('u1'))).mode & 0o777).toBe(0o700);
    client.close();
    await l.terminate();

    const root2 = await mkdtemp(path.join(os.tmpdir(), 'kvts-launcher-'));
    try {
      const l2 = new Launcher(config({ root: root2, socketsDir: path.join(root2, 'sockets') }));
      const priv = l2.paths.vmiPrivateDir('u1');
      await mkdir(priv, { recursive: true });
      await chmod(priv, 0o755);
      await expect(l2.start()).rejects.toMatchObject({
        stage: 'dirs',
        message: expect.stringContaining(`dirs: ${priv} exists and other users can enter it (mode 755)`),
      });
      expect((await stat(priv)).mode & 0o777).toBe(0o755);
    } finally {
      await rm(root2, { recursive: true, force: true });
    }
  });

  // the KubeVirt CR's lessPVCSpaceToleration / minimumReservePVCBytes as the renderer passes them: the flags, through
  // podConfig, decide whether the launcher's syncVMI accepts a filesystem claim whose volume is smaller than the claim
  // (a real 32 MiB ext4 loop-mounted as the claim's dir: root and loop devices needed; the disks are prepared for real)
  const loopIt = process.getuid?.() === 0 ? it : it.skip;
  loopIt(
    '--less-pvc-space-toleration / --minimum-reserve-pvc-bytes decide whether a too small claim volume is accepted',
    async () => {
      const MIB = 1024 * 1024;
      const run = (cmd: string, args: string[]) => execFileP(cmd, args);
      const layout = createLayout(root);
      const dir = path.dirname(layout.filesystemVolumeImage('data'));
      const fsImage = path.join(root, 'fs.img');
      const claimImageOf = (flags: string[]) =>
        podConfig(
          parseLauncherFlags(['--name', 'vm', '--namespace', 'ns', '--uid', 'u1', '--root', root, ...flags]),
        ).claimImage;
      const pvcVmi = (storage: number) => ({
        ...vmi,
        spec: {
          ...vmi.spec,
          domain: { ...vmi.spec.domain, devices: { disks: [{ name: 'data', disk: { bus: 'virtio' } }] } },
          volumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'small' } }],
        },
        status: {
          volumeStatus: [
            { name: 'data', persistentVolumeClaimInfo: { capacity: { storage: String(storage) } } },
          ],
        },
      });
      const syncWith = async (flags: string[], storage: number) => {
        const { l, client } = await started(config({ claimImage: claimImageOf(flags) }));
        try {
          return await client.syncVMI(pvcVmi(storage) as never).then(
            () => 'accepted',
            (e: unknown) => String(e),
          );
        } finally {
          client.close();
          await l.terminate();
        }
      };
      await writeFile(fsImage, Buffer.alloc(0));
      await run('truncate', ['-s', '32M', fsImage]);
      await run('mkfs.ext4', ['-q', '-F', '-m', '0', fsImage]);
      await mkdir(dir, { recursive: true });
      await run('mount', ['-o', 'loop', fsImage, dir]);
      try {
        const st = await statfs(dir);
        const free = st.bavail * st.bsize - 131072; // less the default reserve
        // a claim 1 MiB above the free space (rounded up): short by less than 10 %, more than 0 %
        const claim = (Math.floor(free / MIB) + 1) * MIB;
        expect(claim * 0.9).toBeLessThanOrEqual(free);
        const refused = new RegExp(
          `spec\\.volumes\\[0\\]\\.persistentVolumeClaim: volume "data": not enough space for disk\\.img: ${claim} bytes needed`,
        );
        // no toleration: refused
        expect(await syncWith(['--less-pvc-space-toleration', '0'], claim)).toMatch(refused);
        expect(await syncWith(['--less-pvc-space-toleration', '0'], claim)).toContain(
          'also with lessPVCSpaceToleration 0%',
        );
        // the default toleration, but a reserve of a fifth of the claim: short by more than 10 %, refused
        expect(await syncWith(['--minimum-reserve-pvc-bytes', String(Math.ceil(claim / 5))], claim)).toMatch(
          refused,
        );
        expect(calls).not.toContain('sync');
        await expect(stat(layout.filesystemVolumeImage('data'))).rejects.toThrow('ENOENT');
        // a toleration of 10 % (the default, here given as the renderer does for another value): the free space
        expect(await syncWith(['--less-pvc-space-toleration', '10'], claim)).toBe('accepted');
        expect(calls).toContain('sync');
        expect((await stat(layout.filesystemVolumeImage('data'))).size).toBe(free - (free % MIB));
      } finally {
        await run('umount', [dir]);
      }
    },
  );
});
