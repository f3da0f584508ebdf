// The reconcile logic against in-process launchers (real CmdServers on real unix sockets, a backend
// that keeps one fake domain) and a recorder instead of the API server; the clock is the test's.
import { mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { setVirtualMachineInstanceDefaults } from '@kubevirt-ts/api';
import { CmdServer, type DomainModel } from '@kubevirt-ts/cmd-protocol';
import { createLogger } from '@kubevirt-ts/log';
import { VmiController, type KubeWriter } from './controller.js';
import { GhostRecords, podPublicDir, podSocketsDir } from './launchers.js';
import type { EventToRecord } from './status.js';

const log = createLogger({ component: 'test', silent: true });
let dir: string;
let now = 1_000_000;
const servers: CmdServer[] = [];
const controllers: VmiController[] = [];

interface FakeLauncher {
  calls: string[];
  domain?: DomainModel;
}

async function fakeLauncher(podsDir: string, podUid: string): Promise<FakeLauncher> {
  await mkdir(podPublicDir(podsDir, podUid), { recursive: true });
  await mkdir(podSocketsDir(podsDir, podUid), { recursive: true, mode: 0o700 });
  await symlink('../sockets', path.join(podPublicDir(podsDir, podUid), 'sockets'));
  const f: FakeLauncher = { calls: [] };
  const dom = (vmi: VirtualMachineInstance, status: string, reason: string): DomainModel => ({
    metadata: { name: vmi.metadata.name!, namespace: vmi.metadata.namespace!, uid: vmi.metadata.uid! },
    domainName: `${vmi.metadata.namespace}_${vmi.metadata.name}`,
    status: { status, reason },
  });
  const server = new CmdServer({
    socketsDir: path.join(podPublicDir(podsDir, podUid), 'sockets'),
    logger: log,
    backend: {
      syncVMI: async (vmi) => {
        f.calls.push(`sync ${vmi.metadata.uid}`);
        f.domain = dom(vmi, 'Running', 'Booted');
      },
      shutdownVMI: async (vmi) => void f.calls.push(`shutdown ${vmi.metadata.uid}`),
      killVMI: async (vmi) => {
        f.calls.push(`kill ${vmi.metadata.uid}`);
        if (f.domain) f.domain = { ...f.domain, status: { status: 'Shutoff', reason: 'Destroyed' } };
      },
      getDomain: async () => f.domain,
    },
  });
  await server.start();
  await server.ready();
  servers.push(server);
  return f;
}

function vmi(
  name: string,
  uid: string,
  podUid: string,
  extra: Partial<VirtualMachineInstance['metadata']> = {},
) {
  const v = setVirtualMachineInstanceDefaults({
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name, namespace: 'ns', uid, ...extra },
    spec: {
      terminationGracePeriodSeconds: 10,
      domain: { resources: { requests: { memory: '64Mi' } }, devices: { autoattachPodInterface: false } },
    },
  } as unknown as VirtualMachineInstance);
  v.status = { phase: 'Scheduled', nodeName: 'n1', activePods: { [podUid]: 'n1' } };
  return v;
}

function setup() {
  const vmis = new Map<string, VirtualMachineInstance>();
  const writes: Array<VirtualMachineInstance['status']> = [];
  const events: EventToRecord[] = [];
  const kube: KubeWriter = {
    updateStatus: async (v, status) => {
      writes.push(status);
      vmis.set(`${v.metadata.namespace}/${v.metadata.name}`, { ...v, status });
    },
    recordEvent: async (_v, e) => void events.push(e),
  };
  const c = new VmiController(
    {
      nodeName: 'n1',
      podsDir: path.join(dir, 'pods'),
      handlerDir: path.join(dir, 'handler'),
      notifySocket: path.join(dir, 'handler', 'notify.sock'),
      launcherUid: process.getuid?.() ?? 0,
      getVmi: (k) => vmis.get(k),
      kube,
      requeueAfter: () => undefined,
      log,
      now: () => now,
    },
    () => undefined,
  );
  controllers.push(c);
  return { c, vmis, writes, events };
}

beforeEach(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'kvc-'));
});
afterEach(async () => {
  for (const c of controllers.splice(0)) await c.stop(); // clients and notify pipes
  for (const s of servers.splice(0)) await s.stop();
  await rm(dir, { recursive: true, force: true });
});

describe('VmiController.reconcile', () => {
  it('syncs once, writes Running once, records Started; a Pending VMI is left alone', async () => {
    const { c, vmis, writes, events } = setup();
    await c.ghosts.load(log);
    const a = await fakeLauncher(path.join(dir, 'pods'), 'pod-a');
    const pending = vmi('vm', 'u1', 'pod-a');
    pending.status = { phase: 'Pending' };
    vmis.set('ns/vm', pending);
    await c.reconcile('ns/vm');
    expect(a.calls).toEqual([]);
    vmis.set('ns/vm', vmi('vm', 'u1', 'pod-a'));
    await c.reconcile('ns/vm');
    expect(a.calls).toEqual(['sync u1']);
    expect(writes).toEqual([]); // nothing to say until the domain is there
    await c.reconcile('ns/vm');
    await c.reconcile('ns/vm');
    expect(a.calls).toEqual(['sync u1']);
    expect(writes.map((w) => w!.phase)).toEqual(['Running']);
    expect(events.map((e) => e.reason)).toEqual(['Started']);
    expect(c.ghosts.get('u1')).toMatchObject({ name: 'vm', namespace: 'ns', podUid: 'pod-a' });
  });

  it('a VMI recreated under the same name never adopts the old domain: the old one is killed, the new one synced to its own launcher', async () => {
    const { c, vmis, writes } = setup();
    await c.ghosts.load(log);
    const a = await fakeLauncher(path.join(dir, 'pods'), 'pod-a');
    vmis.set('ns/vm', vmi('vm', 'u1', 'pod-a'));
    await c.reconcile('ns/vm');
    c.domains.apply('ADDED', a.domain); // its notify event
    await c.reconcile('ns/vm');
    expect(vmis.get('ns/vm')!.status!.phase).toBe('Running');

    // deleted and created again: new uid, new Pod whose launcher is not up yet
    vmis.set('ns/vm', vmi('vm', 'u2', 'pod-b'));
    writes.length = 0;
    await c.reconcile('ns/vm');
    expect(a.calls).toEqual(['sync u1', 'kill u1']);
    expect(vmis.get('ns/vm')!.status!.phase).toBe('Scheduled'); // not Running from u1's domain
    expect(writes).toEqual([]);
    const b = await fakeLauncher(path.join(dir, 'pods'), 'pod-b');
    c.domains.apply('MODIFIED', a.domain); // u1: Shutoff/Destroyed
    await c.reconcile('ns/vm');
    expect(b.calls).toEqual(['sync u2']);
    expect(a.calls).toEqual(['sync u1', 'kill u1']);
    expect(c.ghosts.get('u1')).toBeUndefined();
    await c.reconcile('ns/vm');
    expect(vmis.get('ns/vm')!.status!.phase).toBe('Running');
  });

  it('deletion: ACPI shutdown once, Kill only after the grace period (kept in the ghost record across a restart)', async () => {
    const { c, vmis } = setup();
    await c.ghosts.load(log);
    const a = await fakeLauncher(path.join(dir, 'pods'), 'pod-a');
    vmis.set('ns/vm', vmi('vm', 'u1', 'pod-a'));
    await c.reconcile('ns/vm');
    await c.reconcile('ns/vm');
    const running = vmis.get('ns/vm')!;
    vmis.set('ns/vm', { ...running, metadata: { ...running.metadata, deletionTimestamp: 'x' } });
    await c.reconcile('ns/vm');
    expect(a.calls).toEqual(['sync u1', 'shutdown u1']);
    expect((await new GhostRecords(path.join(dir, 'handler')).load(log))[0]!.shutdownStartedAt).toBe(now);
    now += 5_000;
    await c.reconcile('ns/vm');
    expect(a.calls).toEqual(['sync u1', 'shutdown u1']);

    // a new controller (handler restart) continues the same grace period
    const again = setup();
    again.vmis.set('ns/vm', vmis.get('ns/vm')!);
    await again.c.resync([]);
    now += 5_001;
    await again.c.reconcile('ns/vm');
    expect(a.calls).toEqual(['sync u1', 'shutdown u1', 'kill u1']);
  });

  it('a VMI that is gone: its domain is killed and its record dropped once the domain is down', async () => {
    const { c, vmis } = setup();
    await c.ghosts.load(log);
    const a = await fakeLauncher(path.join(dir, 'pods'), 'pod-a');
    vmis.set('ns/vm', vmi('vm', 'u1', 'pod-a'));
    await c.reconcile('ns/vm');
    c.domains.apply('ADDED', a.domain);
    vmis.delete('ns/vm');
    await c.reconcile('ns/vm');
    expect(a.calls).toEqual(['sync u1', 'kill u1']);
    c.domains.apply('MODIFIED', a.domain);
    await c.reconcile('ns/vm');
    expect(c.ghosts.get('u1')).toBeUndefined();
    expect(c.knownKeys()).toEqual([]);
  });
});
