// virt-launcher standalone as a user runs it: a real process, real session libvirtd, QEMU under TCG.
import { setTimeout as sleep } from 'node:timers/promises';
import { existsSync, readFileSync, readdirSync, readlinkSync, statSync } from 'node:fs';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { CmdClient, launcherSocketPath } from '@kubevirt-ts/cmd-protocol';
import { loadVmi } from '@kubevirt-ts/virt-launcher';
import { setVirtualMachineInstanceDefaults } from '@kubevirt-ts/api';
import {
  GUEST_DIR,
  GUEST_IMAGE,
  READY,
  REPO,
  heartbeats,
  processesMentioning,
  requireGuest,
  startLauncher,
  tinyVmi,
  standaloneLauncher,
  descendants,
  waitFor,
  writeVmiFile,
  standaloneArgs,
  spawnStandalone,
  tmpDirPerTest,
} from './helpers.js';

beforeAll(() => requireGuest());

const imageArg = `${GUEST_IMAGE}=${GUEST_DIR}`;

describe('virt-launcher standalone', () => {
  const dir = tmpDirPerTest();

  it('boots the tiny guest to its ready line and exits 0 when it powers off (kvts.poweroff)', async () => {
    const p = await spawnStandalone(dir(), tinyVmi('sa-poweroff', { poweroff: true }));
    const { work } = p;
    const res = await p.exited;
    expect(p.stdout()).toContain(READY);
    expect(p.stdout()).toContain('KUBEVIRT-TS-GUEST-POWEROFF kvts.poweroff');
    // progress, stage by stage
    for (const stage of [
      'dirs:',
      'libvirtd:',
      'connect:',
      'cmd-server:',
      'notify:',
      'ready:',
      'domain: Running (Booted)',
      'domain: Shutoff (Shutdown)',
    ]) {
      expect(p.stderr()).toContain(`[virt-launcher] ${stage}`);
    }
    expect(res).toEqual({ code: 0, signal: null });
    expect(await processesMentioning(work)).toEqual([]);
    expect(existsSync(work)).toBe(true); // a given --work-dir is kept
  });

  it('--pod-network slirp: the default pod network (masquerade interface) boots on QEMU user-mode networking, no tap needed', async () => {
    const vmi = tinyVmi('sa-podnet', { poweroff: true });
    delete vmi.spec.domain.devices!.autoattachPodInterface;
    const p = await spawnStandalone(
      dir(),
      setVirtualMachineInstanceDefaults({ ...vmi, spec: { ...vmi.spec, networks: undefined } } as never),
      ['--pod-network', 'slirp'],
    );
    const { work } = p;
    expect(JSON.parse(readFileSync(p.file, 'utf8')).spec.domain.devices.interfaces).toEqual([
      { name: 'default', masquerade: {} }, // as upstream's defaults: the model (virtio) is the converter's
    ]);
    const res = await p.exited;
    expect(p.stdout()).toContain(READY);
    expect(p.stderr()).not.toContain("specified dev doesn't exist");
    expect(res).toEqual({ code: 0, signal: null });
    // QEMU's command line (libvirt's domain log): the NIC is user-mode networking
    const logs = readdirSync(work, { recursive: true, encoding: 'utf8' }).filter((f) =>
      f.endsWith('sa-podnet.log'),
    );
    const qemuLog = logs.map((f) => readFileSync(path.join(work, f), 'utf8')).join('');
    expect(qemuLog).toMatch(/-netdev '?\{"type":"user"|-netdev user,/);
  });

  it('Ctrl-C (SIGINT to the whole foreground process group) shuts the guest down through ACPI and exits 0', async () => {
    const p = await spawnStandalone(dir(), tinyVmi('sa-sigterm'), ['--grace-period-seconds', '60'], {
      processGroup: true,
    });
    const { work } = p;
    await waitFor('two heartbeats', () => heartbeats(p.stdout()) >= 2, 120_000);
    // what a terminal's Ctrl-C does: every process of the job's group gets SIGINT, so the private
    // libvirtd and QEMU must not be in it (they would die before the ACPI shutdown)
    process.kill(-p.child.pid!, 'SIGINT');
    const res = await p.exited;
    expect(p.stdout()).toContain('KUBEVIRT-TS-GUEST-POWER-BUTTON');
    expect(p.stdout()).toContain('KUBEVIRT-TS-GUEST-POWEROFF acpi-power-button');
    expect(p.stderr()).toContain('the guest shut down cleanly');
    // the monitor and the launcher both get SIGINT (and the monitor forwards it): one shutdown
    expect(p.stderr().split('SIGINT: shutting the guest down').length).toBe(2);
    expect(res.code).toBe(0);
    expect(await processesMentioning(work)).toEqual([]);
  });

  // the terminal closing (SIGHUP), and its reader dying first (EPIPE on stdout/stderr), must end in an
  // ACPI shutdown with nothing left behind, never in a QEMU that outlives the launcher
  it.each([
    ['SIGHUP to the whole process group (the terminal closed)', 'SIGHUP', false],
    ['stdout and stderr readers gone (EPIPE), then SIGINT', 'SIGINT', true],
  ] as const)('%s: ACPI shutdown, exit 0, nothing left', async (_what, sig, breakPipes) => {
    const p = await spawnStandalone(dir(), tinyVmi(`sa-${sig.toLowerCase()}`), [], { processGroup: true });
    const { work } = p;
    await waitFor('two heartbeats', () => heartbeats(p.stdout()) >= 2, 120_000);
    if (breakPipes) {
      // the reader goes away (as `| tee` killed by Ctrl-C): the next writes fail with EPIPE
      p.child.stdout!.destroy();
      p.child.stderr!.destroy();
      await sleep(1500); // heartbeats keep coming: the console writes hit the broken pipe meanwhile
    }
    process.kill(-p.child.pid!, sig);
    const res = await p.exited;
    expect(res.code).toBe(0);
    // the guest powered off through ACPI: its serial log (kept in the given work dir) says so
    const logs = readdirSync(work, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('-log'));
    const serial = logs.map((f) => readFileSync(path.join(work, f), 'utf8')).join('');
    expect(serial).toContain('KUBEVIRT-TS-GUEST-POWEROFF acpi-power-button');
    expect(await processesMentioning(work)).toEqual([]);
    expect(existsSync(work)).toBe(true); // a given --work-dir is kept (only a temp one is removed)
  });

  it('the launcher killed with SIGKILL: its monitor stops QEMU within the grace period, removes its temp work dir, exits non-zero', async () => {
    const file = await writeVmiFile(dir(), tinyVmi('sa-kill9'));
    const grace = 5;
    const p = startLauncher(
      [
        'standalone',
        '--vmi',
        file,
        '--image',
        imageArg,
        '--console',
        '--allow-emulation',
        '--grace-period-seconds',
        String(grace),
      ],
      {},
      true,
    );
    try {
      await waitFor('two heartbeats', () => heartbeats(p.stdout()) >= 2, 120_000);
      // the monitor is p.child (as root, the launcher runs in a PID namespace under the monitor's PID 1 there)
      const { pid: launcherPid, work } = standaloneLauncher(p.child.pid!);
      expect(work).toMatch(/^\/tmp\/kv-/);
      const qemu = (await processesMentioning(work)).filter((x) => x.cmd.includes('qemu-system'));
      expect(qemu).toHaveLength(1);
      process.kill(launcherPid, 'SIGKILL');
      // the monitor gives QEMU the grace period, then kills it (waitFor fails the test if it never goes)
      await waitFor(
        'QEMU gone',
        async () => (await processesMentioning(work)).length === 0,
        (grace + 10) * 1000,
      );
      const res = await p.exited;
      expect(res.code).not.toBe(0);
      expect(res.code).not.toBeNull();
      expect(p.stderr()).toContain('[virt-launcher] monitor: launcher exited (SIGKILL)');
      expect(p.stderr()).toContain('killed QEMU after the grace period');
      expect(existsSync(work)).toBe(false);
    } finally {
      if (p.child.exitCode === null && p.child.signalCode === null) {
        process.kill(-p.child.pid!, 'SIGKILL');
        await p.exited;
      }
    }
  });

  const asRoot = process.getuid?.() === 0;
  (asRoot ? it : it.skip)(
    `${asRoot ? '' : '[skipped: needs root, the PID namespace is made as root only] '}the monitor itself killed with SIGKILL: the kernel ends the run's PID namespace (no QEMU, libvirtd or launcher left) and its PID 1 removes the temp work dir`,
    async () => {
      const file = await writeVmiFile(dir(), tinyVmi('sa-mon9'));
      const p = startLauncher(
        ['standalone', '--vmi', file, '--image', imageArg, '--console', '--allow-emulation'],
        {},
        true,
      );
      try {
        await waitFor('two heartbeats', () => heartbeats(p.stdout()) >= 2, 120_000);
        const { pid: launcherPid, work } = standaloneLauncher(p.child.pid!);
        expect(work).toMatch(/^\/tmp\/kv-/);
        const run = descendants(p.child.pid!);
        const cmds = run.map((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' '));
        for (const what of ['qemu-system', 'libvirtd', 'virt-launcher-monitor'])
          expect(cmds.some((c) => c.includes(what))).toBe(true);
        expect(cmds.filter((c) => c.includes('virtlogd'))).toEqual([]); // QEMU writes its logs itself
        expect(run).toContain(launcherPid);
        // the run is in a PID namespace of its own: the launcher is not in ours
        expect(readlinkSync(`/proc/${launcherPid}/ns/pid`)).not.toBe(readlinkSync('/proc/self/ns/pid'));
        process.kill(p.child.pid!, 'SIGKILL');
        expect(await p.exited).toEqual({ code: null, signal: 'SIGKILL' });
        const alive = (pid: number) => {
          try {
            // a zombie is gone for this purpose: it holds no memory, files or devices
            return !/\) Z /.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
          } catch {
            return false;
          }
        };
        await waitFor('every process of the run gone', () => run.every((pid) => !alive(pid)), 60_000);
        expect(await processesMentioning(work)).toEqual([]);
        await waitFor('the work dir removed', () => !existsSync(work), 60_000);
      } finally {
        try {
          process.kill(-p.child.pid!, 'SIGKILL');
        } catch {
          /* gone */
        }
      }
    },
  );

  it('--socket-dir exposes the cmd socket: a CmdClient reads the domain and shuts it down by ACPI, exit 0; no virtlogd, QEMU appends to the serial log itself', async () => {
    const vmi = tinyVmi('sa-socket');
    const file = await writeVmiFile(dir(), vmi);
    // both dirs exist already, with modes of the user's choosing: the launcher never changes them
    const work = path.join(dir(), 'w');
    const sockets = path.join(dir(), 'socks');
    await mkdir(work, { mode: 0o751 });
    await chmod(work, 0o751);
    await mkdir(sockets, { mode: 0o750 });
    await chmod(sockets, 0o750);
    const p = startLauncher(
      standaloneArgs(file, work, ['--socket-dir', sockets, '--grace-period-seconds', '60']),
    );
    let client: CmdClient | undefined;
    try {
      await waitFor('ready line', () => p.stdout().includes(READY) || p.child.exitCode !== null, 120_000);
      expect(p.stdout()).toContain(READY);
      const sock = launcherSocketPath(sockets);
      expect(existsSync(sock)).toBe(true);
      client = await CmdClient.connect(sock, { timeoutMs: 60_000 });
      const dom = (await client.getDomain()) as { domainName: string; status: { status: string } };
      expect(dom.domainName).toBe('e2e_sa-socket');
      expect(dom.status.status).toBe('Running');
      // no virtlogd: QEMU writes the serial console log itself, opened O_APPEND, which the launcher's
      // rotation (copy, then truncate) relies on
      const run = [p.child.pid!, ...descendants(p.child.pid!)];
      const argv0 = run.map((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0]!);
      expect(argv0.filter((a) => a.endsWith('virtlogd'))).toEqual([]);
      const qemu = run.find((_, i) => /qemu-system/.test(argv0[i]!));
      expect(qemu).toBeDefined();
      const serialFd = readdirSync(`/proc/${qemu}/fd`).find((fd) => {
        try {
          return readlinkSync(`/proc/${qemu}/fd/${fd}`).endsWith('/virt-serial0-log');
        } catch {
          return false;
        }
      });
      expect(serialFd).toBeDefined();
      const flags = parseInt(
        /^flags:\s+(\d+)$/m.exec(readFileSync(`/proc/${qemu}/fdinfo/${serialFd}`, 'utf8'))![1]!,
        8,
      );
      expect(flags & 0o2000).toBe(0o2000); // O_APPEND
      await client.shutdownVMI(vmi);
      const res = await p.exited;
      expect(res).toEqual({ code: 0, signal: null });
      expect(p.stdout()).toContain('KUBEVIRT-TS-GUEST-POWEROFF acpi-power-button');
      expect(await processesMentioning(work)).toEqual([]);
      expect(statSync(work).mode & 0o777).toBe(0o751);
      expect(statSync(sockets).mode & 0o777).toBe(0o750);
    } finally {
      client?.close();
      if (p.child.exitCode === null && p.child.signalCode === null) {
        p.child.kill('SIGKILL');
        await p.exited;
      }
    }
  });

  it('an invalid VMI: a clear error naming the field, exit 3, nothing started or left behind', async () => {
    const vmi = tinyVmi('sa-invalid') as unknown as { spec: { domain: { devices: { disks: unknown[] } } } };
    vmi.spec.domain.devices.disks = [{ name: 'nodisk', disk: { bus: 'virtio' } }];
    const p = await spawnStandalone(dir(), vmi, [], { console: false });
    const { work } = p;
    const res = await p.exited;
    expect(res.code).toBe(3);
    expect(p.stderr()).toMatch(/spec\.domain\.devices\.disks\[0\]/);
    expect(p.stderr()).not.toContain('libvirtd:');
    expect(existsSync(path.join(work, 'lv'))).toBe(false);
    expect(await processesMentioning(work)).toEqual([]);
  });

  it('an unmapped image reference is refused before anything starts', async () => {
    const file = await writeVmiFile(dir(), tinyVmi('sa-noimage'));
    const p = startLauncher(['standalone', '--vmi', file, '--allow-emulation']);
    const res = await p.exited;
    expect(res.code).toBe(3);
    expect(p.stderr()).toContain(`image "${GUEST_IMAGE}" is not mapped (add --image ${GUEST_IMAGE}=PATH)`);
  });

  it('bad flags exit 2 with the flag named', async () => {
    await writeFile(path.join(dir(), 'x.yaml'), 'kind: VirtualMachineInstance\n');
    const p = startLauncher(['standalone', '--vmi', path.join(dir(), 'x.yaml'), '--image', 'nope']);
    expect((await p.exited).code).toBe(2);
    expect(p.stderr()).toContain('--image: expected REF=PATH');
    const q = startLauncher(['--name', 'a', '--namespace', 'b', '--uid', 'c', '--hook-sidecars', '1']);
    expect((await q.exited).code).toBe(2);
    expect(q.stderr()).toContain('hook sidecars are not supported');
  });

  it('examples/vmi-tiny.yaml is valid and kernel-boots the test guest image', async () => {
    const vmi = await loadVmi(path.join(REPO, 'examples/vmi-tiny.yaml'));
    expect(vmi.spec.domain.firmware?.kernelBoot?.container?.image).toBe(GUEST_IMAGE);
    expect(
      existsSync(
        path.join(GUEST_DIR, path.basename(vmi.spec.domain.firmware!.kernelBoot!.container!.kernelPath!)),
      ),
    ).toBe(true);
  });
});
