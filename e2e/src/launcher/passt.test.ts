// Standalone pod network through passt (root: QEMU and passt run as the qemu user): the real launcher, its
// private libvirtd, QEMU under TCG and the test guest with `kvts.net`. The launcher runs passt as its own
// child; the guest gets its address by DHCP from passt, reaches a listener on this host's 127.0.0.1 through
// the gateway address, and a host connection to 127.0.0.1:<port> reaches the guest (the interface's
// `ports:`). Only loopback is a network target here.
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync, readlinkSync, statSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setVirtualMachineInstanceDefaults, type VirtualMachineInstance } from '@kubevirt-ts/api';
import { freePort } from '@kubevirt-ts/testenv';
import {
  READY,
  descendants,
  processesMentioning,
  readText,
  requireGuest,
  standaloneLauncher,
  spawnStandalone,
  tinyVmi,
  tmpDirPerTest,
  waitFor,
} from './helpers.js';

const isRoot = process.getuid?.() === 0;

/** The host's IPv4 default route (passt gives the guest its gateway and the address of its interface). */
function defaultRoute(): { gateway: string; address: string } | undefined {
  const r = spawnSync('ip', ['-4', '-j', 'route', 'show', 'default'], { encoding: 'utf8' });
  const route = (JSON.parse(r.stdout || '[]') as Array<{ gateway?: string; dev: string }>)[0];
  if (!route?.gateway) return undefined;
  const a = spawnSync('ip', ['-4', '-j', 'addr', 'show', 'dev', route.dev], { encoding: 'utf8' });
  const info = JSON.parse(a.stdout) as Array<{ addr_info: Array<{ local: string; prefixlen: number }> }>;
  const ai = info[0]?.addr_info[0];
  return ai ? { gateway: route.gateway, address: `${ai.local}/${ai.prefixlen}` } : undefined;
}
const route = defaultRoute();
const canRun = isRoot && route !== undefined;
const rootIt = canRun ? it : it.skip;
if (!isRoot)
  it.skip('passt in standalone needs root (QEMU and passt run as the qemu user; skipped: not root)', () =>
    undefined);
else if (!route)
  it.skip('passt needs a host interface with an IPv4 default route (skipped: this host has none)', () =>
    undefined);

beforeAll(() => {
  if (canRun) requireGuest();
});

function podNetVmi(name: string, kernelArgs: string, ports?: number[]): VirtualMachineInstance {
  const vmi = tinyVmi(name);
  const boot = vmi.spec.domain.firmware!.kernelBoot!;
  boot.kernelArgs = `${boot.kernelArgs} ${kernelArgs}`;
  delete vmi.spec.domain.devices!.autoattachPodInterface;
  const withDefaults = setVirtualMachineInstanceDefaults({
    ...vmi,
    spec: { ...vmi.spec, networks: undefined },
  } as never) as VirtualMachineInstance;
  // the API's default interface: masquerade on the pod network
  if (ports) withDefaults.spec.domain.devices!.interfaces![0]!.ports = ports.map((port) => ({ port }));
  return withDefaults;
}

/** passt processes whose command line names a socket under `dir`. */
async function passtProcs(dir: string) {
  return (await processesMentioning(dir)).filter((p) => p.cmd.startsWith('passt '));
}

function uidOf(pid: number): number {
  const m = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1]);
}

describe('virt-launcher standalone: the pod network through passt', () => {
  const dir = tmpDirPerTest();

  rootIt(
    'the guest gets its lease from passt, reaches the host loopback via the gateway, is reached on a forwarded port; no passt after',
    async () => {
      // the reply at once, the close only after the guest's FIN: Debian's passt (2023-03) can drop its FIN
      // to the guest when the host side closes before the guest's data and FIN are through (seen with strace)
      const hostLn = net.createServer({ allowHalfOpen: true }, (c) => {
        c.write(`HOST-LOOPBACK-REPLY from=${c.remoteAddress}\n`);
        c.on('end', () => c.end());
        c.on('error', () => undefined);
        c.resume();
      });
      await new Promise<void>((r) => hostLn.listen(0, '127.0.0.1', r));
      const hostPort = (hostLn.address() as net.AddressInfo).port;
      const guestPort = await freePort('::'); // free on both loopbacks: the guest's listener and passt's forward
      const vmi = podNetVmi(
        'sa-passt',
        `kvts.net kvts.port=${guestPort} kvts.connect=${route!.gateway}:${hostPort}`,
        [guestPort],
      );
      const p = await spawnStandalone(dir(), vmi);
      const { work } = p;
      try {
        const netLine = await waitFor(
          "the guest's DHCP lease line",
          () => /KUBEVIRT-TS-GUEST-NET (.*)/.exec(p.stdout())?.[1],
          300_000,
          250,
        );
        const lease = Object.fromEntries(
          netLine
            .trim()
            .split(' ')
            .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
        );
        // passt's DHCP: this host's address and gateway (as upstream's passt binding gives the Pod's), its MTU
        expect(lease.ip).toBe(route!.address);
        expect(lease.router).toBe(route!.gateway);
        expect(lease.mtu).toBe('65520');

        // the guest -> gateway:hostPort reaches the listener on this host's 127.0.0.1
        const connect = await waitFor(
          "the guest's outbound connection",
          () => /KUBEVIRT-TS-GUEST-CONNECT (.*)/.exec(p.stdout())?.[1],
          120_000,
          250,
        );
        expect(connect).toBe(`${route!.gateway}:${hostPort} ok HOST-LOOPBACK-REPLY from=127.0.0.1`);

        // 127.0.0.1:guestPort on this host -> passt -> the guest's listener. The client speaks first: Debian's
        // passt (2023-03) acknowledges the guest's SYN-ACK only with the first data it forwards (seen in its
        // pcap), so the guest's accept() returns once the host side has sent something
        const reply = await waitFor(
          'the guest answering on the forwarded port',
          () =>
            new Promise<string | false>((resolve) => {
              const c = net.connect(guestPort, '127.0.0.1', () => c.write('hello\n'));
              let d = '';
              c.setTimeout(10_000, () => c.destroy());
              c.on('data', (x) => (d += x.toString()));
              c.on('close', () => resolve(d.includes('KUBEVIRT-TS-GUEST-TCP') ? d.trim() : false));
              c.on('error', () => resolve(false));
            }),
          60_000,
          500,
        );
        // the guest's listener answers with its hostname (passt's DHCP sends none: "(none)") and address
        expect(reply).toBe(`KUBEVIRT-TS-GUEST-TCP (none) ${route!.address}`);

        // passt: the launcher's own child, as QEMU's user, its socket in the VMI's 0700 private dir
        const launcher = standaloneLauncher(p.child.pid!);
        const procs = await passtProcs(work);
        expect(procs).toHaveLength(1);
        const passt = procs[0]!;
        expect(descendants(launcher.pid)).toContain(passt.pid);
        const ppid = Number(/^PPid:\s+(\d+)/m.exec(readFileSync(`/proc/${passt.pid}/status`, 'utf8'))![1]);
        expect(ppid).toBe(launcher.pid);
        expect(uidOf(passt.pid)).toBe(107);
        const sock = passt.cmd.split(' ')[passt.cmd.split(' ').indexOf('--socket') + 1]!;
        expect(path.basename(sock)).toBe('passt0.sock');
        expect(statSync(path.dirname(sock)).mode & 0o777).toBe(0o700);
        expect(passt.cmd).toContain(`--tcp-ports ${guestPort}`);
        expect(passt.cmd).not.toContain('--no-map-gw');
        // QEMU's command line: the NIC attached to that socket by -netdev stream
        // (libvirtd daemonizes QEMU: it is the monitor's, not the launcher's, descendant)
        const qemu = descendants(p.child.pid!)
          .map((pid) => {
            try {
              return { pid, exe: readlinkSync(`/proc/${pid}/exe`) };
            } catch {
              return { pid, exe: '' };
            }
          })
          .find((x) => x.exe.includes('qemu-system'));
        const qemuArgs = readFileSync(`/proc/${qemu!.pid}/cmdline`, 'utf8').split('\0');
        expect(qemuArgs).toContain(
          JSON.stringify({
            type: 'stream',
            id: 'kvts-passt0',
            server: false,
            addr: { type: 'unix', path: sock },
          }),
        );
        const dev = JSON.parse(qemuArgs.find((a) => a.includes('"netdev":"kvts-passt0"'))!) as Record<
          string,
          unknown
        >;
        expect(dev).toEqual({
          driver: 'virtio-net-pci-non-transitional',
          netdev: 'kvts-passt0',
          id: 'kvts-net0',
          mac: expect.stringMatching(/^52:54:00(:[0-9a-f]{2}){3}$/),
          romfile: '',
        });

        p.child.kill('SIGTERM');
        expect(await p.exited).toEqual({ code: 0, signal: null });
        expect(p.stderr()).not.toContain('PasstExited');
        expect(await passtProcs(work)).toEqual([]);
        expect(await processesMentioning(work)).toEqual([]);
        // libvirt's domain log: the passthrough marks the domain tainted (custom-argv), nothing worse
        const logs = readdirSync(work, { recursive: true, encoding: 'utf8' }).filter((f) =>
          f.endsWith('sa-passt.log'),
        );
        const qemuLog = (await Promise.all(logs.map((f) => readText(path.join(work, f))))).join('');
        expect(qemuLog).toContain('"type":"stream","id":"kvts-passt0"');
        expect(qemuLog).toContain('is tainted: custom-argv');
      } finally {
        p.child.kill('SIGKILL');
        hostLn.close();
      }
    },
    480_000,
  );

  rootIt(
    'the launcher killed with SIGKILL: its monitor ends passt too, nothing left',
    async () => {
      const p = await spawnStandalone(
        dir(),
        podNetVmi('sa-passtkill', 'kvts.net'),
        ['--grace-period-seconds', '2'],
        {
          console: false,
        },
      );
      const { work } = p;
      try {
        const passt = await waitFor('passt running', async () => (await passtProcs(work))[0], 180_000, 250);
        const launcher = standaloneLauncher(p.child.pid!);
        expect(descendants(launcher.pid)).toContain(passt.pid);
        process.kill(launcher.pid, 'SIGKILL');
        const res = await p.exited;
        expect(res.code).not.toBe(0);
        expect(await passtProcs(work)).toEqual([]);
        expect(await processesMentioning(work)).toEqual([]);
      } finally {
        p.child.kill('SIGKILL');
      }
    },
    240_000,
  );

  rootIt(
    'passt binary missing: the start fails naming it, nothing left behind',
    async () => {
      const p = await spawnStandalone(
        dir(),
        podNetVmi('sa-nopasst', 'kvts.net'),
        ['--passt', path.join(dir(), 'no-such-passt')],
        { console: false },
      );
      const { work } = p;
      const res = await p.exited;
      expect(res.code).toBe(1);
      expect(p.stderr()).toContain(
        `passt: ${path.join(dir(), 'no-such-passt')} not found: install passt (Debian's passt package), or run standalone with --pod-network slirp`,
      );
      expect(p.stderr()).not.toContain('domain: Running');
      expect(await processesMentioning(work)).toEqual([]);
    },
    180_000,
  );

  rootIt(
    'passt failing (its forwarded port is taken): the start fails with its message, no passt or QEMU left',
    async () => {
      const taken = net.createServer();
      await new Promise<void>((r) => taken.listen(0, '::', r)); // both families
      const port = (taken.address() as net.AddressInfo).port;
      try {
        const p = await spawnStandalone(dir(), podNetVmi('sa-passtfail', 'kvts.net', [port]), [], {
          console: false,
        });
        const { work } = p;
        const res = await p.exited;
        expect(res.code).toBe(1);
        expect(p.stderr()).toMatch(
          /passt \(interface default\) exited with code \d+ before its socket was ready: .*bind/i,
        );
        expect(p.stderr()).not.toContain('domain: Running');
        expect(p.stdout()).not.toContain(READY);
        expect(await processesMentioning(work)).toEqual([]);
      } finally {
        taken.close();
      }
    },
    180_000,
  );
});
