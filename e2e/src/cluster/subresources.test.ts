// subresources.kubevirt.io on the single-node cluster (tools/cluster.sh): kube-apiserver's aggregation layer (front
// proxy) -> virt-controller's subresource API -> virt-handler over mutual TLS (certificates virt-controller made) ->
// the launcher. Our virtctl (the bin, as a child process) drives a VM made from examples/vm-tiny.yaml with a VNC
// display: start --paused, console attached before the guest boots (its ready line, then typed input echoed by the
// guest's tty), unpause, a second console replacing the first, the VNC proxy's RFB greeting, pause/unpause, stop,
// start, restart; and RBAC with real users (client certificates of the cluster CA): view cannot pause or open the
// console, edit can. Runs only when the cluster is up with the images loaded (tools/test.sh does both).
import { spawn, spawnSync, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { READY, REPO, waitFor } from '../launcher/helpers.js';
import {
  KUBECONFIG,
  STATE_DIR,
  applyDeployWithEmulation,
  clusterGate,
  getJson,
  kubectlIn,
  kubectlTry,
} from './cluster.js';

const { reason, clusterTest, requireCluster } = clusterGate();
const NS = 'default';
const VM = 'sub';
const SLOW = 900_000;
const VIRTCTL = path.join(REPO, 'packages/virtctl/dist/cli.js');

type Obj = Record<string, any>;

/** examples/vm-tiny.yaml as VM `sub`, Halted, with the VNC display (graphics device) attached */
function vmManifest(): string {
  const m = readFileSync(path.join(REPO, 'examples/vm-tiny.yaml'), 'utf8')
    .replace(/^ {2}name: tiny$/m, `  name: ${VM}`)
    .replace(/kubevirt\.io\/vm: tiny/, `kubevirt.io/vm: ${VM}`)
    .replace(/runStrategy: Always/, 'runStrategy: Halted')
    .replace(/^ *autoattachGraphicsDevice: false\n/m, '');
  expect(m).not.toContain('autoattachGraphicsDevice');
  return m;
}

const children: ChildProcessWithoutNullStreams[] = [];
/** virtctl with a kubeconfig; stdin piped (not a terminal) */
function virtctl(kubeconfig: string, ...args: string[]) {
  const p = spawn(process.execPath, [VIRTCTL, ...args], {
    env: { ...process.env, NODE_OPTIONS: '', KUBECONFIG: kubeconfig },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.push(p);
  const out = { stdout: '', stderr: '' };
  p.stdout.on('data', (d: Buffer) => (out.stdout += d.toString('latin1')));
  p.stderr.on('data', (d: Buffer) => (out.stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => p.on('close', (code) => resolve(code)));
  const waitForText = (what: 'stdout' | 'stderr', text: string, ms = SLOW) =>
    waitFor(
      `virtctl ${args.join(' ')}: "${text}" on ${what}`,
      () => {
        if (out[what].includes(text)) return true;
        if (p.exitCode !== null)
          throw new Error(`virtctl ${args.join(' ')} exited ${p.exitCode}: ${JSON.stringify(out)}`);
        return false;
      },
      ms,
      100,
    );
  return { p, out, exited, waitForText };
}
/** a virtctl command that ends by itself: its exit status and output */
async function run(kubeconfig: string, ...args: string[]) {
  const c = virtctl(kubeconfig, ...args);
  c.p.stdin.end();
  const code = await c.exited;
  return { code, ...c.out };
}

/** a user's kubeconfig: a client certificate for CN=user signed by the cluster CA */
function userKubeconfig(dir: string, user: string): string {
  const pki = path.join(STATE_DIR, 'pki');
  const key = path.join(dir, `${user}.key`);
  const csr = path.join(dir, `${user}.csr`);
  const crt = path.join(dir, `${user}.crt`);
  const ext = path.join(dir, `${user}.ext`);
  writeFileSync(
    ext,
    'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n',
  );
  for (const args of [
    ['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', csr, '-subj', `/CN=${user}`],
    [
      'x509',
      '-req',
      '-in',
      csr,
      '-CA',
      path.join(pki, 'ca.crt'),
      '-CAkey',
      path.join(pki, 'ca.key'),
      '-CAcreateserial',
      '-CAserial',
      path.join(dir, 'ca.srl'),
      '-out',
      crt,
      '-days',
      '1',
      '-extfile',
      ext,
    ],
  ]) {
    const r = spawnSync('openssl', args, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`openssl ${args[0]}: ${r.stderr}`);
  }
  const admin = readFileSync(KUBECONFIG, 'utf8');
  const server = /server: (\S+)/.exec(admin)![1]!;
  const file = path.join(dir, `${user}.kubeconfig`);
  writeFileSync(
    file,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'kvts', cluster: { server, 'certificate-authority': path.join(pki, 'ca.crt') } }],
      users: [{ name: user, user: { 'client-certificate': crt, 'client-key': key } }],
      contexts: [{ name: user, context: { cluster: 'kvts', user, namespace: NS } }],
      'current-context': user,
    }),
    { mode: 0o600 },
  );
  return file;
}

const vmi = () => getJson('vmi', '-n', NS, VM);
const paused = (v: Obj | undefined) =>
  (v?.status?.conditions ?? []).some((c: Obj) => c.type === 'Paused' && c.status === 'True');
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

describe(`subresources and virtctl on the single-node cluster (${reason ? `skipped: ${reason}` : 'tools/cluster.sh'})`, () => {
  requireCluster();
  let dir: string;
  let alice: string; // kubevirt.io:view
  let bob: string; // kubevirt.io:edit
  afterAll(() => {
    for (const c of children) c.kill('SIGKILL');
    if (!reason) {
      kubectlTry('delete', 'vm', '-n', NS, VM, '--ignore-not-found', '--wait=true', '--timeout=300s');
      kubectlTry('delete', 'rolebinding', '-n', NS, 'kvts-e2e-alice', 'kvts-e2e-bob', '--ignore-not-found');
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  clusterTest(
    'deploy/ applied: the APIService is Available (front proxy, caBundle published by virt-operator) and virt-handler serves mutual TLS with the Secret virt-controller made',
    async () => {
      applyDeployWithEmulation();
      expect(getJson('secret', '-n', 'kubevirt-ts', 'virt-handler-certs')?.data?.['tls.crt']).toBeTruthy();
      await waitFor(
        'APIService v1.subresources.kubevirt.io Available',
        () =>
          getJson('apiservice', 'v1.subresources.kubevirt.io')?.status?.conditions?.some(
            (c: Obj) => c.type === 'Available' && c.status === 'True',
          ),
        SLOW,
        1000,
      );
      dir = mkdtempSync(path.join(tmpdir(), 'kvts-e2e-users-'));
      alice = userKubeconfig(dir, 'kvts-e2e-alice');
      bob = userKubeconfig(dir, 'kvts-e2e-bob');
      for (const [user, role] of [
        ['kvts-e2e-alice', 'kubevirt.io:view'],
        ['kvts-e2e-bob', 'kubevirt.io:edit'],
      ])
        kubectlIn(
          JSON.stringify({
            apiVersion: 'rbac.authorization.k8s.io/v1',
            kind: 'RoleBinding',
            metadata: { name: user, namespace: NS },
            roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
            subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }],
          }),
          'apply',
          '-f',
          '-',
        );
      const v = await run(bob, 'version');
      expect(v.code).toBe(0);
      expect(v.stdout).toMatch(/Server Version: version.Info\{GitVersion:"v\d/);
    },
    SLOW,
  );

  let uid: string;

  clusterTest(
    'start --paused, console attached before the guest runs: unpause shows the ready line, typed input comes back',
    async () => {
      kubectlIn(vmManifest(), 'apply', '-f', '-');
      const start = await run(bob, 'start', VM, '--paused');
      expect(start).toMatchObject({ code: 0, stdout: `VM ${VM} was scheduled to start\n` });
      const v = await runningVmi();
      uid = v.metadata.uid;
      await waitFor('VMI Paused (started paused)', () => paused(vmi()), SLOW, 500);
      const console1 = virtctl(bob, 'console', VM);
      await console1.waitForText('stderr', `Successfully connected to ${VM} console.`);
      expect(console1.out.stdout).not.toContain(READY);
      const unpause = await run(bob, 'unpause', 'vmi', VM);
      expect(unpause).toMatchObject({ code: 0, stdout: `VMI ${VM} was scheduled to unpause\n` });
      await console1.waitForText('stdout', READY);
      await waitFor('VMI not Paused', () => !paused(vmi()), SLOW, 500);
      // the guest's serial tty echoes what it receives
      console1.p.stdin.write('kvts-typed-42\r');
      await console1.waitForText('stdout', 'kvts-typed-42', 120_000);
      await console1.waitForText('stdout', 'KUBEVIRT-TS-GUEST-HEARTBEAT');

      // a second console replaces the first, which says why it ended
      const console2 = virtctl(bob, 'console', VM);
      await console2.waitForText('stderr', `Successfully connected to ${VM} console.`);
      expect(await console1.exited).toBe(1);
      expect(console1.out.stderr).toContain('You were disconnected from the console.');
      const seen = console2.out.stdout.length;
      await waitFor('heartbeats on the second console', () => console2.out.stdout.length > seen, 60_000, 200);
      console2.p.stdin.write(Buffer.from([0x1d])); // Ctrl+]
      expect(await console2.exited).toBe(0);
    },
    SLOW,
  );

  clusterTest(
    "vnc --proxy-only: the local port answers with the VNC server's RFB handshake",
    async () => {
      const v = virtctl(bob, 'vnc', VM, '--proxy-only');
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
      sock.end();
      expect(await v.exited).toBe(0);
    },
    SLOW,
  );

  clusterTest(
    'RBAC: view cannot pause or open the console; edit pauses and unpauses the guest',
    async () => {
      const denied = await run(alice, 'pause', 'vmi', VM);
      expect(denied.code).toBe(1);
      expect(denied.stderr).toMatch(
        /User "kvts-e2e-alice" cannot update resource "virtualmachineinstances\/pause"/,
      );
      const noConsole = await run(alice, 'console', VM, '--timeout=0');
      expect(noConsole.code).toBe(1);
      expect(noConsole.stderr).toMatch(/cannot get resource "virtualmachineinstances\/console"/);
      expect(paused(vmi())).toBe(false);

      const pause = await run(bob, 'pause', 'vmi', VM);
      expect(pause).toMatchObject({ code: 0, stdout: `VMI ${VM} was scheduled to pause\n` });
      await waitFor('VMI Paused', () => paused(vmi()), SLOW, 500);
      expect(getJson('vm', '-n', NS, VM)?.status?.printableStatus).toBe('Paused');
      const unpause = await run(bob, 'unpause', 'vm', VM);
      expect(unpause.code).toBe(0);
      await waitFor('VMI not Paused', () => !paused(vmi()), SLOW, 500);
    },
    SLOW,
  );

  clusterTest(
    "stop, start and restart through virtctl change the VM as upstream's do",
    async () => {
      expect(await run(bob, 'stop', VM)).toMatchObject({
        code: 0,
        stdout: `VM ${VM} was scheduled to stop\n`,
      });
      await waitFor('VMI gone', () => vmi() === undefined, SLOW, 500);
      await waitFor(
        'VM Stopped',
        () => getJson('vm', '-n', NS, VM)?.status?.printableStatus === 'Stopped',
        SLOW,
        500,
      );
      const again = await run(bob, 'stop', VM);
      expect(again.code).toBe(1);
      expect(again.stderr).toMatch(/VM is not running/);

      expect(await run(bob, 'start', VM)).toMatchObject({
        code: 0,
        stdout: `VM ${VM} was scheduled to start\n`,
      });
      const started = await runningVmi(uid);
      expect(paused(started)).toBe(false);

      expect(await run(bob, 'restart', VM)).toMatchObject({
        code: 0,
        stdout: `VM ${VM} was scheduled to restart\n`,
      });
      const restarted = await runningVmi(started.metadata.uid);
      expect(restarted.metadata.uid).not.toBe(started.metadata.uid);

      expect((await run(bob, 'stop', VM)).code).toBe(0);
      await waitFor('VMI gone', () => vmi() === undefined, SLOW, 500);
    },
    SLOW,
  );
});
