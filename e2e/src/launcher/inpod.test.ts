// The in-Pod launcher driven like virt-handler drives it: a real launcher process under a temp root,
// a CmdClient on its launcher-sock, a NotifyServer receiving its domain events, QEMU under TCG.
import { setTimeout as sleep } from 'node:timers/promises';
import { existsSync, readlinkSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { CmdClient, NotifyServer, notifySocketPath, type DomainEvent } from '@kubevirt-ts/cmd-protocol';
import {
  connectLauncher,
  heartbeats,
  killMentioning,
  launcherPodFlags,
  processesMentioning,
  qemuPid,
  readText,
  READY,
  requireGuest,
  shortTmp,
  stageTestGuest,
  startLauncher,
  tinyVmi,
  waitFor,
  type Proc,
} from './helpers.js';

beforeAll(() => requireGuest());

// pods still up when a test failed or timed out (its finally did not run)
const live = new Set<Pod>();
afterAll(async () => {
  for (const p of live) await p.cleanup();
});

interface Pod {
  root: string;
  share: string;
  vmi: VirtualMachineInstance;
  proc: Proc;
  events: DomainEvent[];
  notify: NotifyServer;
  client: CmdClient;
  serialLog: string;
  libvirtBase: string;
  cleanup(): Promise<void>;
}

/** A launcher "Pod": root dir with the kernel boot files (what kubelet would mount), handler dir, launcher process. */
async function startPod(
  name: string,
  opts: { grace?: number; extraArgs?: string[]; vmi?: VirtualMachineInstance; monitor?: boolean } = {},
): Promise<Pod> {
  const root = await shortTmp();
  const share = path.join(root, 'handler');
  const vmi = opts.vmi ?? tinyVmi(name);
  const layout = await stageTestGuest(vmi, root);
  const events: DomainEvent[] = [];
  const notify = new NotifyServer({
    socketPath: notifySocketPath(share),
    onDomainEvent: (e) => void events.push(e),
    onK8sEvent: () => undefined,
  });
  await notify.start();
  const proc = startLauncher([
    ...(opts.monitor ? ['monitor'] : []),
    ...launcherPodFlags(vmi, root, share, { grace: opts.grace ?? 60, logLevel: 'info' }),
    ...(opts.extraArgs ?? []),
  ]);
  const client = await connectLauncher(share, { exitCode: () => proc.child.exitCode, stderr: proc.stderr });
  const pod: Pod = {
    root,
    share,
    vmi,
    proc,
    events,
    notify,
    client,
    serialLog: layout.serialLogFile(vmi.metadata!.uid!),
    libvirtBase: path.join(root, 'lv'),
    async cleanup() {
      live.delete(pod);
      client.close();
      if (proc.child.exitCode === null && proc.child.signalCode === null) {
        proc.child.kill('SIGKILL');
        await proc.exited;
      }
      await killMentioning(root);
      await notify.stop(500);
      await rm(root, { recursive: true, force: true });
    },
  };
  live.add(pod);
  return pod;
}

function statusOf(ev: DomainEvent): string {
  const st = (ev.domain as { status?: { status?: string; reason?: string } }).status;
  return `${st?.status}/${st?.reason}`;
}

describe('in-Pod launcher over its cmd socket', () => {
  it('starts in stages, syncs, pauses / unpauses the heartbeat, answers GetDomain / GetDomainStats, shuts down by ACPI', async () => {
    const pod = await startPod('pod-main');
    try {
      // one structured log line per stage, in order
      const stages = pod.proc
        .stderr()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { stage?: string; component?: string; msg?: string })
        .filter((l) => l.stage && l.component === 'virt-launcher')
        .map((l) => l.stage);
      expect(stages).toEqual(['dirs', 'libvirtd', 'connect', 'cmd-server', 'notify', 'ready']);

      await pod.client.syncVMI(pod.vmi);
      await waitFor('ready line', async () => (await readText(pod.serialLog)).includes(READY), 120_000);
      await waitFor('Running event', () => pod.events.some((e) => statusOf(e) === 'Running/Booted'), 30_000);
      // idempotent
      await pod.client.syncVMI(pod.vmi);

      const dom = (await pod.client.getDomain()) as { domainName: string; status: { status: string } };
      expect(dom.domainName).toBe('e2e_pod-main');
      expect(dom.status.status).toBe('Running');
      const stats = (await pod.client.getDomainStats()) as Record<string, unknown>;
      expect(stats).toBeDefined();
      expect(JSON.stringify(stats)).toContain('e2e_pod-main');

      await waitFor('a heartbeat', async () => heartbeats(await readText(pod.serialLog)) >= 1, 60_000);
      await pod.client.pauseVMI(pod.vmi);
      await waitFor('Paused event', () => pod.events.some((e) => statusOf(e).startsWith('Paused/')), 30_000);
      const atPause = heartbeats(await readText(pod.serialLog));
      await sleep(3000);
      expect(heartbeats(await readText(pod.serialLog))).toBeLessThanOrEqual(atPause + 1);
      const paused = heartbeats(await readText(pod.serialLog));
      await sleep(1500);
      expect(heartbeats(await readText(pod.serialLog))).toBe(paused);
      await pod.client.unpauseVMI(pod.vmi);
      await waitFor(
        'heartbeats again',
        async () => heartbeats(await readText(pod.serialLog)) >= paused + 2,
        60_000,
      );

      await pod.client.shutdownVMI(pod.vmi);
      const res = await pod.proc.exited;
      expect(res.code).toBe(0);
      // the guest powered off by ACPI (not destroyed after the 60 s grace period)
      const log = await readText(pod.serialLog);
      expect(log).toContain('KUBEVIRT-TS-GUEST-POWEROFF acpi-power-button');
      expect(pod.events.some((e) => statusOf(e) === 'Shutoff/Shutdown')).toBe(true);
      expect(await processesMentioning(pod.root)).toEqual([]);
    } finally {
      await pod.cleanup();
    }
  });

  it('Kill ends the guest at once and the launcher exits 0', async () => {
    const pod = await startPod('pod-kill');
    try {
      await pod.client.syncVMI(pod.vmi);
      await waitFor('ready line', async () => (await readText(pod.serialLog)).includes(READY), 120_000);
      await pod.client.killVMI(pod.vmi);
      const res = await pod.proc.exited;
      expect(res.code).toBe(0);
      expect(await readText(pod.serialLog)).not.toContain('KUBEVIRT-TS-GUEST-POWEROFF');
      expect(pod.events.some((e) => statusOf(e) === 'Shutoff/Destroyed')).toBe(true);
    } finally {
      await pod.cleanup();
    }
  });

  it('SIGTERM: the guest shuts down cleanly and the launcher exits 0', async () => {
    const pod = await startPod('pod-term');
    try {
      await pod.client.syncVMI(pod.vmi);
      await waitFor('ready line', async () => (await readText(pod.serialLog)).includes(READY), 120_000);
      pod.proc.child.kill('SIGTERM');
      const res = await pod.proc.exited;
      expect(res.code).toBe(0);
      expect(await readText(pod.serialLog)).toContain('KUBEVIRT-TS-GUEST-POWEROFF acpi-power-button');
      expect(pod.proc.stderr()).toContain('the guest shut down cleanly');
      expect(await processesMentioning(pod.root)).toEqual([]);
    } finally {
      await pod.cleanup();
    }
  });

  it('kill -9 of QEMU: a failure event reaches the handler and the launcher exits non-zero', async () => {
    const pod = await startPod('pod-crash');
    try {
      await pod.client.syncVMI(pod.vmi);
      await waitFor('ready line', async () => (await readText(pod.serialLog)).includes(READY), 120_000);
      const pid = await waitFor('QEMU pid', () => qemuPid(pod.libvirtBase, 'e2e_pod-crash'), 10_000);
      process.kill(pid, 'SIGKILL');
      const res = await pod.proc.exited;
      expect(res.code).not.toBe(0);
      expect(res.code).toBe(5);
      const last = pod.events[pod.events.length - 1]!;
      expect(statusOf(last)).toMatch(/^(Crashed\/|Shutoff\/(Crashed|Failed))/);
      expect(pod.proc.stderr()).toContain('DomainFailed');
      expect(await processesMentioning(pod.root)).toEqual([]);
    } finally {
      await pod.cleanup();
    }
  });

  it('an invalid VMI over the socket: a clear error naming the field, no domain defined, no QEMU', async () => {
    const pod = await startPod('pod-invalid');
    try {
      const bad = JSON.parse(JSON.stringify(pod.vmi)) as {
        spec: { domain: { devices: { disks: unknown[] } } };
      };
      bad.spec.domain.devices.disks = [{ name: 'missing-volume', disk: { bus: 'virtio' } }];
      await expect(pod.client.syncVMI(bad as never)).rejects.toThrow(/spec\.domain\.devices\.disks\[0\]/);
      expect(await pod.client.getDomain()).toBeUndefined();
      expect(await qemuPid(pod.libvirtBase, 'e2e_pod-invalid')).toBeUndefined();
      expect((await processesMentioning(pod.root)).filter((p) => /qemu-system/.test(p.cmd))).toEqual([]);
      // a VMI for another launcher is refused too
      const other = tinyVmi('someone-else');
      await expect(pod.client.syncVMI(other)).rejects.toThrow(/this launcher runs e2e\/pod-invalid/);
      pod.proc.child.kill('SIGTERM');
      expect((await pod.proc.exited).code).toBe(0);
      expect(await processesMentioning(pod.root)).toEqual([]);
    } finally {
      await pod.cleanup();
    }
  });

  it('two launchers side by side do not see each other’s domains or sockets', async () => {
    const a = await startPod('pod-a');
    const b = await startPod('pod-b');
    try {
      expect(a.client.socketPath).not.toBe(b.client.socketPath);
      await Promise.all([a.client.syncVMI(a.vmi), b.client.syncVMI(b.vmi)]);
      await waitFor(
        'both ready',
        async () =>
          (await readText(a.serialLog)).includes(READY) && (await readText(b.serialLog)).includes(READY),
        150_000,
      );
      const da = (await a.client.getDomain()) as { domainName: string };
      const db = (await b.client.getDomain()) as { domainName: string };
      expect(da.domainName).toBe('e2e_pod-a');
      expect(db.domainName).toBe('e2e_pod-b');
      // each handler only heard of its own domain
      expect(a.events.every((e) => (e.domain as { domainName?: string }).domainName === 'e2e_pod-a')).toBe(
        true,
      );
      expect(b.events.every((e) => (e.domain as { domainName?: string }).domainName === 'e2e_pod-b')).toBe(
        true,
      );
      // a VMI sent to the wrong launcher is refused
      await expect(a.client.syncVMI(b.vmi)).rejects.toThrow(/this launcher runs e2e\/pod-a/);
      await a.client.killVMI(a.vmi);
      expect((await a.proc.exited).code).toBe(0);
      // b is untouched
      const hb = heartbeats(await readText(b.serialLog));
      await waitFor('b keeps beating', async () => heartbeats(await readText(b.serialLog)) > hb, 30_000);
      await b.client.killVMI(b.vmi);
      expect((await b.proc.exited).code).toBe(0);
    } finally {
      await a.cleanup();
      await b.cleanup();
    }
  });

  it('monitor: the launcher crashing leaves nothing behind (QEMU gets its grace period, then is killed)', async () => {
    const pod = await startPod('pod-mon', { monitor: true, grace: 3 });
    try {
      await pod.client.syncVMI(pod.vmi);
      await waitFor('ready line', async () => (await readText(pod.serialLog)).includes(READY), 120_000);
      const qemu = await waitFor('QEMU pid', () => qemuPid(pod.libvirtBase, 'e2e_pod-mon'), 10_000);
      // `virt-launcher monitor` became the native monitor (same pid); the launcher is the Node process under it
      expect(readlinkSync(`/proc/${pod.proc.child.pid}/exe`)).toMatch(/\/virt-launcher-monitor$/);
      const launcher = (await processesMentioning(pod.root)).find(
        (p) => p.cmd.startsWith(`${process.execPath} `) && /main\.js --name pod-mon/.test(p.cmd),
      );
      expect(launcher).toBeDefined();
      expect(launcher!.pid).not.toBe(pod.proc.child.pid);
      // libvirtd daemonizes QEMU: it is re-parented to the monitor (a child subreaper, as PID 1 of a Pod), which reaps it
      const qemuStat = await readText(`/proc/${qemu}/stat`);
      expect(Number(qemuStat.slice(qemuStat.lastIndexOf(')') + 2).split(' ')[1])).toBe(pod.proc.child.pid);
      process.kill(launcher!.pid, 'SIGKILL');
      const res = await pod.proc.exited;
      expect(res.code).not.toBe(0);
      expect(pod.proc.stderr()).toContain('QemuLeftBehind');
      expect(pod.proc.stderr()).toContain('GracePeriodExpired');
      expect(await processesMentioning(pod.root)).toEqual([]);
      expect(await readText(`/proc/${qemu}/cmdline`)).toBe('');
      expect(existsSync(`/proc/${qemu}`)).toBe(false); // reaped: not even a zombie is left
    } finally {
      await pod.cleanup();
    }
  });
});
