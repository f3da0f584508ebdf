// virtctl console and vnc (the bin, as a child process) against a real kube-apiserver whose aggregation layer
// routes subresources.kubevirt.io to @kubevirt-ts/subresources in this process, which reaches virt-handler's
// real endpoint (@kubevirt-ts/handler) over mutual TLS; the launcher Pod's sockets are unix sockets in a temp
// dir laid out as its private emptyDir: the "serial port" echoes what it receives, the "VNC server" greets.
// alice is bound to kubevirt.io:view, bob to kubevirt.io:edit.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { createLogger } from '@kubevirt-ts/log';
import {
  bindUserRoles,
  startStreamsTestStack,
  type StreamsTestStack,
} from '@kubevirt-ts/subresources/testing';

const CLI = fileURLToPath(new URL('./cli.js', import.meta.url));
const NS = 'vms';
const log = createLogger({ component: 'test', silent: true });

let stack: StreamsTestStack;
let alice: string;
let bob: string;
const children: ChildProcessWithoutNullStreams[] = [];
/** what each VMI's serial port received */
const received = new Map<string, Buffer>();

beforeAll(async () => {
  stack = await startStreamsTestStack({ tmpPrefix: 'kvts-virtctl-console-', log });
  await stack.env.createNamespace(NS);
  await bindUserRoles(stack.admin, NS, [
    ['alice', 'kubevirt.io:view'],
    ['bob', 'kubevirt.io:edit'],
  ]);
  alice = await stack.api.userKubeconfig('alice', [], NS);
  bob = await stack.api.userKubeconfig('bob', [], NS);
}, 300000);

afterAll(async () => {
  for (const c of children) c.kill('SIGKILL');
  await stack?.stop();
});

async function vmi(name: string, phase = 'Running'): Promise<void> {
  const v = await stack.createVmi(NS, name, { phase });
  received.set(name, Buffer.alloc(0));
  await stack.serveStreams(v, (c) => {
    c.on('error', () => undefined);
    c.write('login: ');
    c.on('data', (d: Buffer) => {
      received.set(name, Buffer.concat([received.get(name)!, d]));
      c.write(d);
    });
  });
}
const setPhase = (name: string, phase: string) => stack.setPhase(NS, name, phase);

/** virtctl as a child process with piped stdin (not a terminal), or `onTty` under script(1) (a pseudo-terminal);
 * its output so far, and its exit */
function virtctl(kubeconfig: string, ...args: string[]) {
  const onTty = args[0] === '--tty';
  if (onTty) args = args.slice(1);
  const p = onTty
    ? spawn('script', ['-q', '-f', '-e', '-c', [process.execPath, CLI, ...args].join(' '), '/dev/null'], {
        env: { ...process.env, NODE_OPTIONS: '', KUBECONFIG: kubeconfig },
        stdio: ['pipe', 'pipe', 'pipe'],
      })
    : spawn(process.execPath, [CLI, ...args], {
        env: { ...process.env, NODE_OPTIONS: '', KUBECONFIG: kubeconfig },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
  children.push(p);
  const out = { stdout: '', stderr: '' };
  p.stdout.on('data', (d: Buffer) => (out.stdout += d.toString('latin1')));
  p.stderr.on('data', (d: Buffer) => (out.stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => p.on('close', (code) => resolve(code)));
  const waitFor = async (what: 'stdout' | 'stderr', text: string) => {
    while (!out[what].includes(text)) {
      if (p.exitCode !== null)
        throw new Error(`virtctl exited ${p.exitCode} before "${text}": ${JSON.stringify(out)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  return { p, out, exited, waitFor };
}

test('console: connects, shows the serial port, sends what is typed; Ctrl+] leaves with exit 0', async () => {
  await vmi('con1');
  const c = virtctl(bob, 'console', 'con1');
  await c.waitFor(
    'stderr',
    'Successfully connected to con1 console. Press Ctrl+] or Ctrl+5 to exit console.',
  );
  await c.waitFor('stdout', 'login: ');
  c.p.stdin.write('root\r');
  await c.waitFor('stdout', 'login: root\r');
  c.p.stdin.write(Buffer.from([0x1d]));
  expect(await c.exited).toBe(0);
}, 600000);

test('console on a terminal: raw mode, so Ctrl+C and CR reach the guest unchanged; Ctrl+] leaves', async () => {
  await vmi('tty1');
  const c = virtctl(bob, '--tty', 'console', 'tty1');
  await c.waitFor('stdout', 'login: ');
  // a terminal in cooked mode would turn Ctrl+C into SIGINT for virtctl and CR into LF
  c.p.stdin.write(Buffer.from('\x03root\r'));
  while (!received.get('tty1')!.includes('root\r')) await new Promise((r) => setTimeout(r, 50));
  expect(received.get('tty1')!.toString('latin1')).toBe('\x03root\r');
  expect(c.p.exitCode).toBeNull();
  c.p.stdin.write(Buffer.from([0x1d]));
  expect(await c.exited).toBe(0);
}, 600000);

test('console waits for a VMI that is not running yet (--timeout), then connects', async () => {
  await vmi('con2', 'Scheduled');
  const c = virtctl(bob, 'console', 'con2', '--timeout=5');
  await new Promise((r) => setTimeout(r, 2000));
  expect(c.p.exitCode).toBeNull();
  expect(c.out.stderr).not.toContain('Successfully connected');
  await setPhase('con2', 'Running');
  await c.waitFor('stdout', 'login: ');
  c.p.stdin.end(); // the end of stdin leaves the console too
  expect(await c.exited).toBe(0);
}, 600000);

test('console: --timeout=0 on a VMI that is not running fails at once with the reason', async () => {
  await vmi('con3', 'Scheduled');
  const c = virtctl(bob, 'console', 'con3', '--timeout=0');
  expect(await c.exited).toBe(1);
  expect(c.out.stderr).toContain("Can't access VMI con3: VMI is not running");
}, 600000);

test('console: a second console disconnects the first, which says so and exits 1', async () => {
  await vmi('con4');
  const first = virtctl(bob, 'console', 'con4');
  await first.waitFor('stdout', 'login: ');
  const second = virtctl(bob, 'console', 'con4');
  await second.waitFor('stdout', 'login: ');
  expect(await first.exited).toBe(1);
  expect(first.out.stderr).toContain('You were disconnected from the console.');
  expect(first.out.stderr).toContain('another console connection to this VMI was opened');
  second.p.stdin.write(Buffer.from([0x1d]));
  expect(await second.exited).toBe(0);
}, 600000);

test('vnc --proxy-only prints the port; a viewer there gets the RFB greeting; closing it ends virtctl', async () => {
  await vmi('vnc1');
  const v = virtctl(bob, 'vnc', 'vnc1', '--proxy-only');
  await v.waitFor('stdout', '}\n');
  const { port } = JSON.parse(v.out.stdout) as { port: number };
  expect(port).toBeGreaterThan(0);
  const sock = connect(port, '127.0.0.1');
  const greeting = await new Promise<string>((resolve) => {
    let s = '';
    sock.on('data', (d: Buffer) => {
      s += d.toString();
      if (s.includes('\n')) resolve(s);
    });
  });
  expect(greeting).toBe('RFB 003.008\n');
  sock.end();
  expect(await v.exited).toBe(0);
}, 600000);

test('RBAC: view cannot open the console or VNC (exit 1, the reason); errors name the VMI', async () => {
  await vmi('rbac1');
  const c = virtctl(alice, 'console', 'rbac1', '--timeout=0');
  expect(await c.exited).toBe(1);
  expect(c.out.stderr).toMatch(
    /Can't access VMI rbac1: .*User "alice" cannot get resource "virtualmachineinstances\/console"/,
  );
  const v = virtctl(alice, 'vnc', 'rbac1', '--proxy-only');
  expect(await v.exited).toBe(1);
  expect(v.out.stderr).toMatch(
    /can't access VMI rbac1: .*cannot get resource "virtualmachineinstances\/vnc"/,
  );
  const missing = virtctl(bob, 'vnc', 'nope', '--proxy-only');
  expect(await missing.exited).toBe(1);
  expect(missing.out.stderr).toContain(
    `can't access VMI nope: virtualmachineinstance.kubevirt.io "nope" not found`,
  );
}, 600000);
