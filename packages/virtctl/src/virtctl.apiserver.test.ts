// virtctl (the bin, as a child process) against a real kube-apiserver whose aggregation layer routes
// subresources.kubevirt.io to @kubevirt-ts/subresources running in this process. Users are real
// client certificates: alice is bound to kubevirt.io:view, bob to kubevirt.io:edit, carol to kubevirt.io:migrate.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { KubeClient } from '@kubevirt-ts/controller-runtime';
import { VMIMS } from '@kubevirt-ts/subresources';
import {
  bindUserRoles,
  startAggregatedTestApi,
  vmObjects,
  type AggregatedTestApi,
} from '@kubevirt-ts/subresources/testing';
import { startTestEnv, type TestEnv } from '@kubevirt-ts/testenv';

const CLI = fileURLToPath(new URL('./cli.js', import.meta.url));
const NS = 'vms';

let env: TestEnv;
let api: AggregatedTestApi;
let admin: KubeClient;
let objects: ReturnType<typeof vmObjects>;
let alice: string;
let bob: string;
let carol: string;

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}
function virtctl(args: string[], extraEnv: Record<string, string | undefined> = {}): Promise<Result> {
  return new Promise((resolve, reject) => {
    const environ: NodeJS.ProcessEnv = { ...process.env, NODE_OPTIONS: '', ...extraEnv };
    for (const [k, v] of Object.entries(extraEnv)) if (v === undefined) delete environ[k];
    const p = spawn(process.execPath, [CLI, ...args], { env: environ, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    p.on('error', reject);
    p.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
const asBob = (...args: string[]) => virtctl(args, { KUBECONFIG: bob });

beforeAll(async () => {
  env = await startTestEnv();
  api = await startAggregatedTestApi(env);
  admin = api.client;
  objects = vmObjects(admin, NS);
  await env.createNamespace(NS);
  await bindUserRoles(admin, NS, [
    ['alice', 'kubevirt.io:view'],
    ['bob', 'kubevirt.io:edit'],
    ['carol', 'kubevirt.io:migrate'],
  ]);
  // the kubeconfigs' contexts name the namespace "vms", as `kubectl config set-context --namespace` would
  alice = await api.userKubeconfig('alice', [], NS);
  bob = await api.userKubeconfig('bob', [], NS);
  carol = await api.userKubeconfig('carol', [], NS);
}, 300000);

afterAll(async () => {
  await api?.stop();
  await env?.stop();
});

const createVm = (name: string, spec: Record<string, unknown>) => objects.createVm(name, spec);
/** a VMI in `phase` on node-a; its uid */
const createVmi = async (name: string, phase: string) => (await objects.createVmi(name, phase)).metadata.uid;
const getVm = (name: string) => objects.getVm(name);

describe('usage (no cluster needed)', () => {
  test('--help per verb, exit 0', async () => {
    for (const verb of [
      'start',
      'stop',
      'restart',
      'pause',
      'unpause',
      'softreboot',
      'soft-reboot',
      'migrate',
      'migrate-cancel',
      'guestosinfo',
      'userlist',
      'fslist',
      'version',
    ]) {
      const r = await virtctl([verb, '--help'], { KUBECONFIG: undefined });
      expect({ verb, code: r.code }).toEqual({ verb, code: 0 });
      expect(r.stdout).toContain(`virtctl ${verb}`);
    }
    // the overview lists every command
    const all = await virtctl(['--help']);
    expect(all.code).toBe(0);
    for (const verb of ['start', 'migrate-cancel', 'fslist', 'version'])
      expect(all.stdout).toContain(`  ${verb} `);
    const stop = await virtctl(['stop', '--help']);
    expect(stop.stdout).toMatch(/--grace-period=VALUE/);
    expect(stop.stdout).toMatch(/-n, --namespace=VALUE/);
  });

  test('bad usage exits 2 and names what is wrong', async () => {
    let r = await virtctl(['frobnicate', 'x']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/unknown command "frobnicate"/);
    r = await virtctl(['start']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/virtctl start: expects NAME, got none/);
    r = await virtctl(['stop', 'vm1', '--grace-period=0'], { KUBECONFIG: bob });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/Must both use --force=true and set --grace-period\./);
    r = await virtctl(['stop', 'vm1', '--force', '--grace-period=soon'], { KUBECONFIG: bob });
    expect(r.stderr).toMatch(/--grace-period: must be a whole number of seconds, got "soon"/);
    r = await virtctl(['pause', 'vmx', 'a'], { KUBECONFIG: bob });
    expect(r.stderr).toMatch(/the first argument must be "vm" or "vmi", got "vmx"/);
    r = await virtctl(['start', 'a', '--bogus']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--bogus/);
    r = await virtctl(['start', 'a'], {
      KUBECONFIG: undefined,
      HOME: '/nonexistent-vctl',
      KUBERNETES_SERVICE_HOST: undefined,
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/no kubeconfig: set KUBECONFIG, pass --kubeconfig, or create ~\/.kube\/config/);
    r = await virtctl(['start', 'a', '--kubeconfig', '/nonexistent-vctl/config']);
    expect(r.stderr).toMatch(/--kubeconfig: \/nonexistent-vctl\/config does not exist/);
  });
});

describe('against the aggregated API', () => {
  test('version prints the client and the server', async () => {
    const r = await virtctl(['version'], { KUBECONFIG: alice });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /^Client Version: version.Info\{GitVersion:"v0.1.0", .*Platform:"linux\/\w+"\}$/m,
    );
    expect(r.stdout).toMatch(/^Server Version: version.Info\{GitVersion:"v\d+\.\d+\.\d+".*\}$/m);
  });

  test('start, and start again of a running VM (exit 1 with the server message)', async () => {
    await createVm('vm-start', { running: false });
    let r = await asBob('start', 'vm-start');
    expect(r).toMatchObject({ code: 0, stdout: 'VM vm-start was scheduled to start\n' });
    expect((await getVm('vm-start')).spec['running']).toBe(true);
    await createVmi('vm-start', 'Running');
    r = await asBob('start', 'vm-start');
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'Error starting VirtualMachine Operation cannot be fulfilled on virtualmachine.kubevirt.io "vm-start": VM is already running\n',
    );
  });

  test('stop --force --grace-period=0, and stop of a stopped VM', async () => {
    await createVm('vm-stop', { runStrategy: 'Always' });
    await createVmi('vm-stop', 'Running');
    let r = await asBob('stop', 'vm-stop', '--force', '--grace-period=0');
    expect(r).toMatchObject({ code: 0, stdout: 'VM vm-stop was scheduled to stop\n' });
    expect((await getVm('vm-stop')).spec['runStrategy']).toBe('Halted');
    const vmi = await objects.getVmi('vm-stop');
    expect(vmi.spec.terminationGracePeriodSeconds).toBe(0);
    await createVm('vm-stopped', { running: false });
    r = await asBob('stop', 'vm-stopped');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^Error stopping VirtualMachine .*"vm-stopped": VM is not running$/m);
  });

  test('restart queues Stop+Start; --dry-run changes nothing', async () => {
    await createVm('vm-restart', { runStrategy: 'Always' });
    const uid = await createVmi('vm-restart', 'Running');
    let r = await asBob('restart', 'vm-restart', '--dry-run');
    expect(r.code).toBe(0);
    expect((await getVm('vm-restart')).status?.['stateChangeRequests']).toBeUndefined();
    r = await asBob('restart', 'vm-restart');
    expect(r).toMatchObject({ code: 0, stdout: 'VM vm-restart was scheduled to restart\n' });
    expect((await getVm('vm-restart')).status?.['stateChangeRequests']).toEqual([
      { action: 'Stop', uid },
      { action: 'Start', data: {} },
    ]);
  });

  test('migrate and migrate-cancel: kubevirt.io:migrate may, edit may not (as upstream)', async () => {
    await createVm('vm-mig', { runStrategy: 'Always' });
    await createVmi('vm-mig', 'Running');
    const asCarol = (...args: string[]) => virtctl(args, { KUBECONFIG: carol });
    let r = await asBob('migrate', 'vm-mig');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/User "bob" cannot update resource "virtualmachines\/migrate"/);
    r = await asCarol('migrate', 'vm-mig');
    expect(r).toMatchObject({ code: 0, stdout: 'VM vm-mig was scheduled to migrate\n' });
    const mine = async () =>
      (await admin.list<{ metadata?: object; spec: { vmiName: string } }>(VMIMS, NS)).items.filter(
        (m) => m.spec.vmiName === 'vm-mig',
      );
    expect(await mine()).toHaveLength(1);
    // edit lists migrations but cannot delete them
    r = await asBob('migrate-cancel', 'vm-mig');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/User "bob" cannot delete resource "virtualmachineinstancemigrations"/);
    expect(await mine()).toHaveLength(1);
    r = await asCarol('migrate-cancel', 'vm-mig');
    expect(r).toMatchObject({ code: 0, stdout: 'VM vm-mig was scheduled to migrate-cancel\n' });
    expect(await mine()).toHaveLength(0);
    r = await asCarol('migrate-cancel', 'vm-mig');
    expect(r).toMatchObject({ code: 1, stderr: 'Found no migration to cancel for vm-mig\n' });
  });

  test('pause/unpause/softreboot/guestosinfo: upstream refusals, and 503 where virt-handler is needed', async () => {
    await createVm('vm-p', { runStrategy: 'Always' });
    await createVmi('vm-p', 'Running');
    let r = await asBob('pause', 'vm', 'vm-p');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^Error pausing VirtualMachineInstance vm-p: pause of virtualmachineinstance vms\/vm-p needs its virt-handler/,
    );
    r = await asBob('unpause', 'vmi', 'vm-p');
    expect(r.stderr).toBe(
      'Error unpausing VirtualMachineInstance vm-p: Operation cannot be fulfilled on virtualmachineinstance.kubevirt.io "vm-p": VMI is not paused\n',
    );
    r = await asBob('soft-reboot', 'vm-p');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^Error soft rebooting VirtualMachineInstance vm-p: softreboot of .* not implemented/,
    );
    r = await asBob('softreboot', 'vm-p');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /^Error soft rebooting VirtualMachineInstance vm-p: softreboot of .* not implemented/,
    );
    for (const verb of ['guestosinfo', 'userlist', 'fslist']) {
      r = await asBob(verb, 'vm-p');
      expect({ verb, code: r.code }).toEqual({ verb, code: 1 });
      expect(r.stderr).toMatch(/VMI does not have guest agent connected$/m);
    }
    r = await asBob('pause', 'vm', 'no-such-vm');
    expect(r.stderr).toBe(
      'Error getting VirtualMachine no-such-vm: virtualmachines.kubevirt.io "no-such-vm" not found\n',
    );
  });

  test('authorization: view cannot start or pause; the namespace comes from -n or the context', async () => {
    await createVm('vm-authz', { running: false });
    let r = await virtctl(['start', 'vm-authz'], { KUBECONFIG: alice });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /User "alice" cannot update resource "virtualmachines\/start" in API group "subresources.kubevirt.io"/,
    );
    r = await virtctl(['pause', 'vmi', 'vm-authz'], { KUBECONFIG: alice });
    expect(r.stderr).toMatch(/cannot update resource "virtualmachineinstances\/pause"/);
    expect((await getVm('vm-authz')).spec['running']).toBe(false);
    // --kubeconfig wins over KUBECONFIG; -n over the context's namespace
    r = await virtctl(['start', 'vm-authz', '--kubeconfig', bob], { KUBECONFIG: alice });
    expect(r.code).toBe(0);
    r = await virtctl(['start', 'vm-authz', '-n', 'default'], { KUBECONFIG: bob });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/in the namespace "default"/);
  });
});
