// Upstream KubeVirt's own virtctl (v1.1.0, built from the Go module proxy by tools/build-upstream-virtctl.sh: see
// packages/virtctl/README.md) against kubevirt-ts on the cluster (tools/cluster.sh), with the cluster's admin
// kubeconfig: kube-apiserver's aggregation layer -> virt-controller's subresources.kubevirt.io -> virt-handler
// (mutual TLS) -> the launcher. Each verb as a user types it, its output and exit status as upstream's virtctl prints
// them against upstream's virt-api: version, start, pause/unpause (vm and vmi), console (on a pseudo-terminal:
// script(1); the guest's ready line after a soft-reboot, typed input echoed), vnc --proxy-only (RFB greeting),
// guestosinfo without a guest agent, migrate (accepted, as upstream's; the other nodes cordoned, so its target Pod
// stays unschedulable) and migrate-cancel, restart, stop. A migration by upstream's `migrate` that completes (the VM
// on the other node, no reboot) is in migration.test.ts, with the others. Without the binary the suite is skipped,
// visibly; under KVTS_REQUIRE_CLUSTER=1 (tools/test.sh, which builds it) it fails with the reason.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import path from 'node:path';
import { READY, REPO, waitFor } from '../launcher/helpers.js';
import {
  KUBECONFIG,
  applyDeployWithEmulation,
  clusterGate,
  getJson,
  kubectl,
  kubectlIn,
  kubectlTry,
  nodeNames,
} from './cluster.js';
import {
  UPSTREAM_VIRTCTL as UPSTREAM,
  UPSTREAM_VIRTCTL_TAG as TAG,
  upstreamVirtctlGate,
} from './upstream-virtctl-bin.js';

const gate = clusterGate();
const bin = upstreamVirtctlGate('upstream-virtctl.test');
const reason = gate.reason ?? bin.missing;
const clusterTest = gate.reason ? gate.clusterTest : bin.upstreamTest;

const NS = 'default';
const VM = 'upstream';
const SLOW = 900_000;
type Obj = Record<string, any>;

/** examples/vm-tiny.yaml as VM `upstream`, Halted, with a VNC display */
function vmManifest(): string {
  return readFileSync(path.join(REPO, 'examples/vm-tiny.yaml'), 'utf8')
    .replace(/^ {2}name: tiny$/m, `  name: ${VM}`)
    .replace(/kubevirt\.io\/vm: tiny/, `kubevirt.io/vm: ${VM}`)
    .replace(/runStrategy: Always/, 'runStrategy: Halted')
    .replace(/^ *autoattachGraphicsDevice: false\n/m, '');
}

const children: ChildProcessWithoutNullStreams[] = [];
/**
 * upstream's virtctl with the admin kubeconfig; `tty`: on a pseudo-terminal (script(1): upstream's console puts
 * its stdin in raw mode and refuses to run without a terminal). The command line reaches script's shell only
 * through environment variables, never spliced into it.
 */
function virtctl(args: string[], o: { tty?: boolean } = {}) {
  const env = { ...process.env, KUBECONFIG, KVTS_VIRTCTL: UPSTREAM, KVTS_ARGS: args.join('\n') };
  const p = o.tty
    ? spawn(
        'script',
        [
          '-q',
          '-f',
          '-e',
          '-c',
          // split KVTS_ARGS at newlines only, no globbing
          'IFS=\'\n\'; set -f; exec "$KVTS_VIRTCTL" $KVTS_ARGS',
          '/dev/null',
        ],
        { env, stdio: ['pipe', 'pipe', 'pipe'] },
      )
    : spawn(UPSTREAM, args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
  children.push(p);
  const out = { stdout: '', stderr: '' };
  p.stdout.on('data', (d: Buffer) => (out.stdout += d.toString('latin1')));
  p.stderr.on('data', (d: Buffer) => (out.stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => p.on('close', (code) => resolve(code)));
  const waitForText = async (what: 'stdout' | 'stderr', text: string | RegExp, ms = SLOW) => {
    try {
      await waitFor(
        `virtctl ${args.join(' ')}: ${String(text)} on ${what}`,
        () => {
          if (typeof text === 'string' ? out[what].includes(text) : text.test(out[what])) return true;
          if (p.exitCode !== null) throw new Error(`exited ${p.exitCode}`);
          return false;
        },
        ms,
        100,
      );
    } catch (e) {
      throw new Error(`${(e as Error).message}; output so far: ${JSON.stringify(out).slice(-3000)}`);
    }
  };
  return { p, out, exited, waitForText };
}
async function run(...args: string[]) {
  const c = virtctl(args);
  c.p.stdin.end();
  const code = await c.exited;
  return { code, ...c.out };
}

const vmi = () => getJson('vmi', '-n', NS, VM);
const hasCond = (v: Obj | undefined, type: string) =>
  (v?.status?.conditions ?? []).some((c: Obj) => c.type === type && c.status === 'True');
async function runningVmi(notUid?: string): Promise<Obj> {
  return waitFor(
    `VMI ${VM} Running`,
    () => {
      const v = vmi();
      return v?.status?.phase === 'Running' && v.metadata.uid !== notUid ? v : undefined;
    },
    SLOW,
    500,
  );
}
const migrations = () =>
  (getJson<{ items: Obj[] }>('vmim', '-n', NS)?.items ?? []).filter((m) => m.spec?.vmiName === VM);

describe(`upstream virtctl ${TAG} against kubevirt-ts (${reason ? `not run: ${reason}` : 'tools/cluster.sh'})`, () => {
  gate.requireCluster();
  afterAll(() => {
    for (const c of children) c.kill('SIGKILL');
    if (reason) return;
    kubectlTry('delete', 'vm', '-n', NS, VM, '--ignore-not-found', '--wait=true', '--timeout=300s');
    // a migration left by a failed migrate test (migrate-cancel deletes it otherwise)
    kubectlTry('delete', 'vmim', '-n', NS, '-l', `kubevirt.io/vmi-name=${VM}`, '--ignore-not-found');
  });

  clusterTest(
    "version: the client's v1.1.0 and the server's version.Info",
    async () => {
      applyDeployWithEmulation();
      await waitFor(
        'APIService v1.subresources.kubevirt.io Available',
        () =>
          getJson('apiservice', 'v1.subresources.kubevirt.io')?.status?.conditions?.some(
            (c: Obj) => c.type === 'Available' && c.status === 'True',
          ),
        SLOW,
        1000,
      );
      const v = await run('version');
      expect(v).toMatchObject({ code: 0 });
      expect(v.stdout).toMatch(
        /^Client Version: version.Info\{GitVersion:"v1\.1\.0", GitCommit:"[0-9a-f]{40}"/m,
      );
      expect(v.stdout).toMatch(
        /^Server Version: version.Info\{GitVersion:"v\d+\.\d+\.\d+", .*Compiler:"node v\d/m,
      );
    },
    SLOW,
  );

  let uid: string;
  clusterTest(
    'start, then pause vm / unpause vm / pause vmi / unpause vmi',
    async () => {
      kubectlIn(vmManifest(), 'apply', '-f', '-');
      expect(await run('start', VM)).toMatchObject({ code: 0, stdout: `VM ${VM} was scheduled to start\n` });
      uid = (await runningVmi()).metadata.uid;
      const again = await run('start', VM);
      expect(again.code).toBe(1);
      expect(again.stderr).toContain(
        `Error starting VirtualMachine Operation cannot be fulfilled on virtualmachine.kubevirt.io "${VM}": VM is already running`,
      );

      for (const kind of ['vm', 'vmi']) {
        expect(await run('pause', kind, VM)).toMatchObject({
          code: 0,
          stdout: `VMI ${VM} was scheduled to pause\n`,
        });
        await waitFor(`VMI Paused (pause ${kind})`, () => hasCond(vmi(), 'Paused'), SLOW, 500);
        const twice = await run('pause', kind, VM);
        expect(twice.code).toBe(1);
        expect(twice.stderr).toMatch(/VMI is already paused/);
        expect(await run('unpause', kind, VM)).toMatchObject({
          code: 0,
          stdout: `VMI ${VM} was scheduled to unpause\n`,
        });
        await waitFor(`VMI not Paused (unpause ${kind})`, () => !hasCond(vmi(), 'Paused'), SLOW, 500);
      }
      const notPaused = await run('unpause', 'vmi', VM);
      expect(notPaused.code).toBe(1);
      expect(notPaused.stderr).toMatch(/VMI is not paused/);
    },
    SLOW,
  );

  clusterTest(
    'console with stdin piped (no terminal; upstream reads it as it is): output, typed input echoed, Ctrl+] leaves',
    async () => {
      const con = virtctl(['console', VM]);
      await con.waitForText('stderr', `Successfully connected to ${VM} console. The escape sequence is ^]`);
      await con.waitForText('stdout', /HEARTBEAT[\s\S]*HEARTBEAT/, 120_000);
      con.p.stdin.write('kvts-upstream-piped-3\r');
      await con.waitForText('stdout', 'kvts-upstream-piped-3', 120_000);
      con.p.stdin.write(Buffer.from([0x1d])); // Ctrl+]
      expect(await con.exited).toBe(0);
    },
    SLOW,
  );

  clusterTest(
    'console on a terminal: typed input comes back; soft-reboot reboots the guest (its ready line again); Ctrl+] leaves',
    async () => {
      const con = virtctl(['console', VM], { tty: true });
      await con.waitForText('stdout', `Successfully connected to ${VM} console. The escape sequence is ^]`);
      // the guest's output flows (its heartbeat line), then what is typed comes back from the guest's tty
      const connected = con.out.stdout.length;
      await con.waitForText('stdout', /HEARTBEAT[\s\S]*HEARTBEAT/, 120_000);
      expect(con.out.stdout.length).toBeGreaterThan(connected);
      con.p.stdin.write('kvts-upstream-typed-7\r');
      await con.waitForText('stdout', 'kvts-upstream-typed-7', 120_000);
      const before = con.out.stdout.length;

      // upstream v1.1.0 names the command soft-reboot (the subresource is softreboot)
      expect(await run('soft-reboot', VM)).toMatchObject({
        code: 0,
        stdout: `VMI ${VM} was scheduled to soft-reboot\n`,
      });
      await waitFor(
        'the ready line after the soft reboot',
        () => con.out.stdout.slice(before).includes(READY),
        SLOW,
        200,
      );
      expect(vmi()?.metadata.uid).toBe(uid); // the same VMI: the guest rebooted inside its QEMU
      con.p.stdin.write(Buffer.from([0x1d])); // Ctrl+]
      expect(await con.exited).toBe(0);
    },
    SLOW,
  );

  clusterTest(
    'vnc --proxy-only prints {"port":N}; a viewer there gets QEMU\'s RFB greeting',
    async () => {
      const v = virtctl(['vnc', VM, '--proxy-only']);
      await v.waitForText('stdout', '}\n');
      const { port } = JSON.parse(v.out.stdout) as { port: number };
      const sock = connect(port, '127.0.0.1');
      const greeting = await new Promise<string>((resolve, reject) => {
        let s = '';
        sock.on('error', reject);
        sock.on('data', (d: Buffer) => {
          s += d.toString('latin1');
          if (s.includes('\n')) resolve(s);
        });
      });
      expect(greeting).toBe('RFB 003.008\n');
      sock.destroy();
      v.p.kill('SIGINT');
      await v.exited;
    },
    SLOW,
  );

  clusterTest(
    "guestosinfo without a guest agent: upstream's refusal",
    async () => {
      const r = await run('guestosinfo', VM);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`Error getting guestosinfo of VirtualMachineInstance ${VM}, `);
      expect(r.stderr).toMatch(/VMI does not have guest agent connected/);
    },
    SLOW,
  );

  clusterTest(
    'migrate is accepted (a VirtualMachineInstanceMigration), its target Pod cannot be scheduled (the other nodes cordoned); migrate-cancel deletes it',
    async () => {
      const others = nodeNames().filter((n) => n !== vmi()?.status?.nodeName);
      for (const n of others) kubectl('cordon', n);
      try {
        await migrateAndCancel();
      } finally {
        for (const n of others) kubectl('uncordon', n);
      }
    },
    SLOW,
  );

  async function migrateAndCancel(): Promise<void> {
    {
      expect(await run('migrate', VM)).toMatchObject({
        code: 0,
        stdout: `VM ${VM} was scheduled to migrate\n`,
      });
      const m = await waitFor('a migration of the VMI', () => migrations()[0], 60_000, 500);
      expect(m.metadata.name).toMatch(/^kubevirt-migrate-vm-/);
      // the target Pod (anti-affinity to the VMI's Pods) stays Pending: no other node takes it
      const target = await waitFor(
        'the target Pod unschedulable',
        () =>
          (
            getJson<{ items: Obj[] }>('pods', '-n', NS, '-l', `kubevirt.io/migrationJobUID=${m.metadata.uid}`)
              ?.items ?? []
          ).find((p) =>
            (p.status?.conditions ?? []).some(
              (c: Obj) => c.type === 'PodScheduled' && c.reason === 'Unschedulable',
            ),
          ),
        SLOW,
        1000,
      );
      expect(target.status.phase).toBe('Pending');
      expect(await run('migrate-cancel', VM)).toMatchObject({
        code: 0,
        stdout: `VM ${VM} was scheduled to migrate-cancel\n`,
      });
      await waitFor('the migration gone', () => migrations().length === 0, SLOW, 1000);
      expect(vmi()?.status?.phase).toBe('Running');
      expect(vmi()?.metadata.uid).toBe(uid);
    }
  }

  clusterTest(
    'restart makes a new VMI; stop halts the VM; stop again is refused',
    async () => {
      expect(await run('restart', VM)).toMatchObject({
        code: 0,
        stdout: `VM ${VM} was scheduled to restart\n`,
      });
      await runningVmi(uid);
      expect(await run('stop', VM)).toMatchObject({ code: 0, stdout: `VM ${VM} was scheduled to stop\n` });
      await waitFor('VMI gone', () => vmi() === undefined, SLOW, 500);
      const again = await run('stop', VM);
      expect(again.code).toBe(1);
      expect(again.stderr).toContain(
        `Error stopping VirtualMachine Operation cannot be fulfilled on virtualmachine.kubevirt.io "${VM}": VM is not running`,
      );
    },
    SLOW,
  );
});
