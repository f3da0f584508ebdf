// The reconcile logic against in-process launchers (real CmdServers on real unix sockets, a backend
// that keeps one fake domain) and a recorder instead of the API server; the clock is the test's.
import { existsSync, linkSync, mkdirSync, renameSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { mkdir, mkdtemp, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { setVirtualMachineInstanceDefaults } from '@kubevirt-ts/api';
import { CmdServer, type DomainModel } from '@kubevirt-ts/cmd-protocol';
import { createLogger } from '@kubevirt-ts/log';
import { VmiController, socketAnswers, type ControllerOptions, type KubeWriter } from './controller.js';
import { MigrationProxyManager } from './migration-proxy.js';
import { DEFAULT_MIGRATION_OPTIONS } from './migration-roles.js';
import { GhostRecords, podPublicDir, podSocketPath, podSocketsDir } from './launchers.js';
import type { EventToRecord } from './status.js';

const log = createLogger({ component: 'test', silent: true });
let dir: string;
let now = 1_000_000;
const servers: CmdServer[] = [];
const controllers: VmiController[] = [];

interface FakeLauncher {
  calls: string[];
  domain?: DomainModel;
  migrateOptions?: unknown;
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
      deleteVMI: async (vmi) => {
        f.calls.push(`delete ${vmi.metadata.uid}`);
        f.domain = undefined;
      },
      prepareMigrationTarget: async (vmi) => void f.calls.push(`prepare ${vmi.metadata.uid}`),
      migrateVMI: async (vmi, options) => {
        f.calls.push(`migrate ${vmi.metadata.uid}`);
        f.migrateOptions = options;
      },
      cancelMigration: async (vmi) => void f.calls.push(`cancel ${vmi.metadata.uid}`),
      finalizeMigration: async (vmi) => void f.calls.push(`finalize ${vmi.metadata.uid}`),
      signalTargetPodCleanup: async (vmi) => void f.calls.push(`cleanup ${vmi.metadata.uid}`),
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

function setup(
  o: {
    nodeName?: string;
    migration?: ControllerOptions['migration'];
    containerDisks?: ControllerOptions['containerDisks'];
    blockDevices?: ControllerOptions['blockDevices'];
  } = {},
) {
  const vmis = new Map<string, VirtualMachineInstance>();
  const writes: Array<VirtualMachineInstance['status']> = [];
  const events: EventToRecord[] = [];
  const labelPatches: Array<Record<string, string | null>> = [];
  const requeues: number[] = [];
  const kube: KubeWriter = {
    updateStatus: async (v, status) => {
      writes.push(status);
      vmis.set(`${v.metadata.namespace}/${v.metadata.name}`, { ...v, status });
    },
    recordEvent: async (_v, e) => void events.push(e),
    patchLabels: async (v, labels) => {
      labelPatches.push(labels);
      const k = `${v.metadata.namespace}/${v.metadata.name}`;
      const cur = vmis.get(k)!;
      const merged: Record<string, string> = { ...cur.metadata.labels };
      for (const [l, val] of Object.entries(labels))
        if (val === null) delete merged[l];
        else merged[l] = val;
      vmis.set(k, { ...cur, metadata: { ...cur.metadata, labels: merged } });
    },
  };
  const c = new VmiController(
    {
      nodeName: o.nodeName ?? 'n1',
      migration: o.migration,
      containerDisks: o.containerDisks,
      blockDevices: o.blockDevices,
      podsDir: path.join(dir, 'pods'),
      handlerDir: path.join(dir, 'handler'),
      notifySocket: path.join(dir, 'handler', 'notify.sock'),
      launcherUid: process.getuid?.() ?? 0,
      getVmi: (k) => vmis.get(k),
      kube,
      requeueAfter: (_k, ms) => void requeues.push(ms),
      log,
      now: () => now,
    },
    () => undefined,
  );
  controllers.push(c);
  return { c, vmis, writes, events, labelPatches, requeues };
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

  it("the Pod's block devices are given to the launcher before the first sync; a failure is SyncFailed, no sync, retried", async () => {
    const seen: string[] = [];
    let fail = true;
    const a0: { calls: string[] } = { calls: [] };
    const { c, vmis, events, requeues } = setup({
      blockDevices: async (v, l) => {
        seen.push(`${v.metadata.uid} ${l.podUid} ${path.basename(l.socketPath)} calls=${a0.calls.length}`);
        if (fail)
          throw new Error(
            'spec.volumes[0].persistentVolumeClaim: the claim is volumeMode Block but the launcher Pod has no device /dev/data',
          );
        return [{ volume: 'data', path: '/proc/1/root/dev/data', changed: true }];
      },
    });
    await c.ghosts.load(log);
    const a = await fakeLauncher(path.join(dir, 'pods'), 'pod-a');
    a0.calls = a.calls;
    vmis.set('ns/vm', vmi('vm', 'u1', 'pod-a'));
    await c.reconcile('ns/vm');
    expect(a.calls).toEqual([]);
    expect(events).toEqual([
      {
        type: 'Warning',
        reason: 'SyncFailed',
        message:
          'spec.volumes[0].persistentVolumeClaim: the claim is volumeMode Block but the launcher Pod has no device /dev/data',
      },
    ]);
    expect(requeues).toContain(5_000);
    fail = false;
    await c.reconcile('ns/vm');
    expect(a.calls).toEqual(['sync u1']);
    // before each attempt, never after the sync
    expect(seen).toEqual(['u1 pod-a launcher-sock calls=0', 'u1 pod-a launcher-sock calls=0']);
    await c.reconcile('ns/vm');
    expect(seen).toHaveLength(2);
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
    // the old domain, now down, is deleted before its launcher is let go
    expect(a.calls).toEqual(['sync u1', 'kill u1', 'delete u1']);
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

  it('node loss, the node back: a VMI virt-controller failed as lost (NodeUnresponsive) has its domain destroyed at once after the restart, no graceful shutdown, no sync, its phase kept', async () => {
    const { c, vmis } = setup();
    await c.ghosts.load(log);
    const a = await fakeLauncher(path.join(dir, 'pods'), 'pod-a');
    vmis.set('ns/vm', vmi('vm', 'u1', 'pod-a'));
    await c.reconcile('ns/vm');
    await c.reconcile('ns/vm');
    expect(vmis.get('ns/vm')!.status?.phase).toBe('Running');
    // the node was lost; virt-controller failed the VMI meanwhile; the handler starts again
    const lost = vmis.get('ns/vm')!;
    const again = setup();
    again.vmis.set('ns/vm', {
      ...lost,
      status: { ...lost.status, phase: 'Failed', reason: 'NodeUnresponsive' },
    });
    await again.c.resync([]);
    await again.c.reconcile('ns/vm');
    expect(a.calls).toEqual(['sync u1', 'kill u1']);
    expect(again.events.map((e) => e.reason)).toEqual(['Stopped']);
    // the domain is down now: nothing more is sent, the VMI stays Failed with its reason
    again.c.domains.apply('MODIFIED', a.domain);
    await again.c.reconcile('ns/vm');
    expect(a.calls).toEqual(['sync u1', 'kill u1']);
    expect(again.vmis.get('ns/vm')!.status).toMatchObject({ phase: 'Failed', reason: 'NodeUnresponsive' });
  });

  it('node loss, the node back: a launcher whose VMI was replaced (same name, new uid, on another node) or is gone is killed after the restart, never synced', async () => {
    const { c, vmis } = setup();
    await c.ghosts.load(log);
    const a = await fakeLauncher(path.join(dir, 'pods'), 'pod-a');
    const b = await fakeLauncher(path.join(dir, 'pods'), 'pod-b');
    vmis.set('ns/vm', vmi('vm', 'u1', 'pod-a'));
    vmis.set('ns/other', vmi('other', 'u2', 'pod-b'));
    for (const k of ['ns/vm', 'ns/other']) {
      await c.reconcile(k);
      await c.reconcile(k);
    }
    // the replacement of vm runs on n2 now; other is gone
    const again = setup();
    const next = vmi('vm', 'u9', 'pod-z');
    next.status = { phase: 'Running', nodeName: 'n2', activePods: { 'pod-z': 'n2' } };
    again.vmis.set('ns/vm', next);
    await again.c.resync([]);
    expect(again.c.knownKeys().sort()).toEqual(['ns/other', 'ns/vm']);
    for (const k of again.c.knownKeys()) await again.c.reconcile(k);
    expect(a.calls).toEqual(['sync u1', 'kill u1']);
    expect(b.calls).toEqual(['sync u2', 'kill u2']);
    expect(again.writes).toEqual([]); // the replacement is not this node's: no status written
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
    expect(a.calls).toEqual(['sync u1', 'kill u1', 'delete u1']);
    expect(c.ghosts.get('u1')).toBeUndefined();
    expect(c.knownKeys()).toEqual([]);
  });
});

const quiet = {
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
  debug: () => undefined,
};
const proxies: MigrationProxyManager[] = [];
afterEach(async () => {
  for (const p of proxies.splice(0)) await p.close();
});

function migrationParts() {
  // the launcher's root as in its image: /var/run is a link to /run (followed inside the root, not the handler's)
  mkdirSync(path.join(dir, 'run/lv'), { recursive: true });
  mkdirSync(path.join(dir, 'var'), { recursive: true });
  if (!existsSync(path.join(dir, 'var/run'))) symlinkSync('/run', path.join(dir, 'var/run'));
  const proxy = new MigrationProxyManager({ logger: quiet as never, bindAddress: '127.0.0.1' });
  proxies.push(proxy);
  return {
    proxy,
    address: '127.0.0.1',
    // the Pod's root: the test dir (the libvirt socket need not exist to listen)
    podRoot: async () => dir,
    launcherLibvirtSocket: '/var/run/lv/libvirt-sock',
  };
}

/** a VMI running on n1 whose migration m1 the controller handed to n2 (upstream's fields) */
function migratingVmi(extra: Partial<NonNullable<VirtualMachineInstance['status']>['migrationState']> = {}) {
  const v = vmi('vm', 'u1', 'pod-src');
  v.metadata.labels = { 'kubevirt.io/nodeName': 'n1', 'kubevirt.io/migrationTargetNodeName': 'n2' };
  v.status = {
    phase: 'Running',
    nodeName: 'n1',
    activePods: { 'pod-src': 'n1', 'pod-dst': 'n2' },
    migrationState: {
      migrationUid: 'm1',
      sourceNode: 'n1',
      targetNode: 'n2',
      sourcePod: 'src',
      targetPod: 'dst',
      ...extra,
    },
  };
  return v;
}

const dom = (status: string, reason: string, migration?: DomainModel['migration']): DomainModel => ({
  metadata: { name: 'vm', namespace: 'ns', uid: 'u1' },
  domainName: 'ns_vm',
  status: { status, reason },
  ...(migration ? { migration } : {}),
});

describe('migration roles', () => {
  it('target: SyncMigrationTarget, proxy listeners, targetNodeAddress and ports; the domain detected, then ready (Finalize); after the hand-off it is the running VMI, never synced', async () => {
    const m = migrationParts();
    const { c, vmis, writes, events } = setup({ nodeName: 'n2', migration: m });
    await c.ghosts.load(log);
    const dst = await fakeLauncher(path.join(dir, 'pods'), 'pod-dst');
    // this node ran the VMI before (migrated away and now back): its old Pod, launcher gone, is listed first
    const first = migratingVmi();
    first.status!.activePods = { 'pod-src': 'n1', 'pod-old': 'n2', 'pod-dst': 'n2' };
    vmis.set('ns/vm', first);
    await c.reconcile('ns/vm');
    expect(dst.calls).toEqual(['prepare u1']);
    const ms = vmis.get('ns/vm')!.status!.migrationState!;
    expect(ms.targetNodeAddress).toBe('127.0.0.1');
    expect(Object.values(ms.targetDirectMigrationNodePorts!).sort()).toEqual([0, 49152]);
    expect(ms.targetDirectMigrationNodePorts).toEqual(m.proxy.targetListenerPorts('u1'));
    expect(m.proxy.openListenerCount()).toBe(2);
    expect(vmis.get('ns/vm')!.status!.nodeName).toBe('n1'); // not ours yet
    expect(events.map((e) => e.reason)).toEqual(['PreparingTarget', 'PreparingTarget']);
    await c.reconcile('ns/vm'); // level-triggered: nothing more
    expect(dst.calls).toEqual(['prepare u1']);
    expect(writes).toHaveLength(1);

    // the source started (its handler wrote startTimestamp); the incoming domain appears, paused
    const started = vmis.get('ns/vm')!;
    started.status!.migrationState!.startTimestamp = '2025-01-01T00:00:00Z';
    c.domains.apply('ADDED', dom('Paused', 'Migration'));
    await c.reconcile('ns/vm');
    expect(vmis.get('ns/vm')!.status!.migrationState).toMatchObject({ targetNodeDomainDetected: true });
    expect(vmis.get('ns/vm')!.status!.migrationState!.targetNodeDomainReadyTimestamp).toBeUndefined();
    // the source saw its side complete first (completed before the hand-off, as upstream's): the listeners go,
    // and the target still reports its running domain
    const done = structuredClone(vmis.get('ns/vm')!);
    Object.assign(done.status!.migrationState!, { completed: true, endTimestamp: '2025-01-01T00:00:09Z' });
    vmis.set('ns/vm', done);
    c.domains.apply('MODIFIED', dom('Running', 'Migrated'));
    await c.reconcile('ns/vm');
    expect(m.proxy.openListenerCount()).toBe(0);
    expect(dst.calls).toEqual(['prepare u1', 'finalize u1']);
    expect(vmis.get('ns/vm')!.status!.migrationState!.targetNodeDomainReadyTimestamp).toBe(
      new Date(now).toISOString().replace(/\.\d+Z$/, 'Z'),
    );

    // the source hands off (status.nodeName + label): this node runs the VMI; no SyncVirtualMachine
    const handed = structuredClone(vmis.get('ns/vm')!);
    handed.status!.nodeName = 'n2';
    handed.status!.migrationState!.completed = true;
    // the status first, the node label still the source's (the hand-off's two writes): the domain stays
    vmis.set('ns/vm', handed);
    await c.reconcile('ns/vm');
    expect(dst.calls).toEqual(['prepare u1', 'finalize u1']);
    expect(vmis.get('ns/vm')!.status).toMatchObject({ phase: 'Running', nodeName: 'n2' });
    handed.metadata.labels!['kubevirt.io/nodeName'] = 'n2';
    vmis.set('ns/vm', { ...handed, status: vmis.get('ns/vm')!.status });
    await c.reconcile('ns/vm');
    expect(dst.calls).toEqual(['prepare u1', 'finalize u1']);
    expect(vmis.get('ns/vm')!.status).toMatchObject({ phase: 'Running', nodeName: 'n2' });
    expect(m.proxy.openListenerCount()).toBe(0); // completed: the listeners go
    expect(c.ghosts.get('u1')).toMatchObject({ podUid: 'pod-dst' });
  });

  it('block migration (status.migrationMethod BlockMigration): the target also listens for 49153, the source opens its socket', async () => {
    const m = migrationParts();
    const { c, vmis } = setup({ nodeName: 'n2', migration: m });
    await c.ghosts.load(log);
    const dst = await fakeLauncher(path.join(dir, 'pods'), 'pod-dst');
    const v = migratingVmi();
    v.status!.migrationMethod = 'BlockMigration';
    vmis.set('ns/vm', v);
    await c.reconcile('ns/vm');
    expect(dst.calls).toEqual(['prepare u1']);
    const ports = vmis.get('ns/vm')!.status!.migrationState!.targetDirectMigrationNodePorts!;
    expect(Object.values(ports).sort()).toEqual([0, 49152, 49153]);
    expect(m.proxy.openListenerCount()).toBe(3);

    // the source node's handler opens one unix socket per published port, 49153's at upstream's path
    const sm = migrationParts();
    const source = setup({ nodeName: 'n1', migration: sm });
    await source.c.ghosts.load(log);
    const src = await fakeLauncher(path.join(dir, 'pods'), 'pod-src');
    const running = migratingVmi();
    delete running.status!.migrationState;
    running.status!.phase = 'Scheduled';
    source.vmis.set('ns/vm', running);
    await source.c.reconcile('ns/vm');
    source.c.domains.apply('ADDED', src.domain);
    await source.c.reconcile('ns/vm');
    const withState = structuredClone(source.vmis.get('ns/vm')!);
    // what the handler computed while the containerDisk-less test VMI runs: no local disk, LiveMigration
    expect(withState.status!.migrationMethod).toBe('LiveMigration');
    withState.status!.migrationMethod = 'BlockMigration';
    withState.status!.migrationState = {
      ...migratingVmi().status!.migrationState,
      targetNodeAddress: '127.0.0.1',
      targetDirectMigrationNodePorts: ports,
    };
    source.vmis.set('ns/vm', withState);
    await source.c.reconcile('ns/vm');
    expect(src.calls).toEqual(['sync u1', 'migrate u1']);
    const share = podPublicDir(path.join(dir, 'pods'), 'pod-src');
    expect(sm.proxy.sourceListenerFiles('u1').sort()).toEqual(
      [
        `${share}/migrationproxy/u1-source.sock`,
        `${share}/migrationproxy/u1-49152-source.sock`,
        `${share}/migrationproxy/u1-49153-source.sock`,
      ].sort(),
    );
  });

  it('source: proxy sockets + MigrateVirtualMachine once, progress from the domain, the hand-off once the target reports the domain; then the old domain is deleted', async () => {
    const m = migrationParts();
    const { c, vmis, events, labelPatches, requeues } = setup({ nodeName: 'n1', migration: m });
    await c.ghosts.load(log);
    const src = await fakeLauncher(path.join(dir, 'pods'), 'pod-src');
    // running here first
    const running = migratingVmi();
    delete running.status!.migrationState;
    running.status!.phase = 'Scheduled';
    vmis.set('ns/vm', running);
    await c.reconcile('ns/vm');
    c.domains.apply('ADDED', src.domain);
    await c.reconcile('ns/vm');
    expect(vmis.get('ns/vm')!.status!.phase).toBe('Running');

    // handed off, target not listening yet: nothing
    const v = structuredClone(vmis.get('ns/vm')!);
    v.status!.migrationState = migratingVmi().status!.migrationState;
    vmis.set('ns/vm', v);
    await c.reconcile('ns/vm');
    expect(src.calls).toEqual(['sync u1']);
    // the target listens
    const v2 = structuredClone(v);
    Object.assign(v2.status!.migrationState!, {
      targetNodeAddress: '127.0.0.1',
      targetDirectMigrationNodePorts: { '40001': 0, '40002': 49152 },
    });
    vmis.set('ns/vm', v2);
    await c.reconcile('ns/vm');
    expect(src.calls).toEqual(['sync u1', 'migrate u1']);
    // no migrationConfiguration in the migration state: upstream's defaults (their values: migration-roles.test.ts)
    expect(src.migrateOptions).toEqual(DEFAULT_MIGRATION_OPTIONS);
    const share = podPublicDir(path.join(dir, 'pods'), 'pod-src');
    expect(m.proxy.sourceListenerFiles('u1').sort()).toEqual(
      [`${share}/migrationproxy/u1-source.sock`, `${share}/migrationproxy/u1-49152-source.sock`].sort(),
    );
    await c.reconcile('ns/vm');
    expect(src.calls).toEqual(['sync u1', 'migrate u1']); // once

    // the launcher reports the migration running, then done: the domain left (Shutoff/Migrated)
    c.domains.apply(
      'MODIFIED',
      dom('Running', 'Booted', { uid: 'm1', startTimestamp: '2025-01-01T00:00:01Z', mode: 'PreCopy' }),
    );
    await c.reconcile('ns/vm');
    expect(vmis.get('ns/vm')!.status!.migrationState).toMatchObject({
      startTimestamp: '2025-01-01T00:00:01Z',
      mode: 'PreCopy',
      completed: false,
      failed: false,
    });
    c.domains.apply(
      'MODIFIED',
      dom('Shutoff', 'Migrated', {
        uid: 'm1',
        startTimestamp: '2025-01-01T00:00:01Z',
        endTimestamp: '2025-01-01T00:00:09Z',
        completed: true,
        mode: 'PreCopy',
      }),
    );
    requeues.length = 0;
    await c.reconcile('ns/vm');
    let st = vmis.get('ns/vm')!.status!;
    expect(st.phase).toBe('Running'); // not Succeeded: the guest lives on
    expect(st.nodeName).toBe('n1'); // the target has not reported the domain yet
    expect(st.migrationState).toMatchObject({ completed: true, endTimestamp: '2025-01-01T00:00:09Z' });
    expect(requeues.length).toBeGreaterThan(0);
    expect(labelPatches).toEqual([]);

    // the target reports the domain running: hand-off
    const v3 = structuredClone(vmis.get('ns/vm')!);
    Object.assign(v3.status!.migrationState!, {
      targetNodeDomainDetected: true,
      targetNodeDomainReadyTimestamp: '2025-01-01T00:00:10Z',
    });
    vmis.set('ns/vm', v3);
    await c.reconcile('ns/vm');
    st = vmis.get('ns/vm')!.status!;
    expect(st.nodeName).toBe('n2');
    expect(st.phase).toBe('Running');
    expect(labelPatches).toEqual([{ 'kubevirt.io/nodeName': 'n2' }]);
    expect(events.map((e) => `${e.reason}: ${e.message}`)).toContain(
      'Migrated: The VirtualMachineInstance migrated to node n2.',
    );
    // the VMI now belongs to n2 (this node's informer drops it): the old domain is deleted, the record goes
    vmis.delete('ns/vm');
    src.domain = dom('Shutoff', 'Migrated');
    await c.reconcile('ns/vm');
    expect(src.calls).toEqual(['sync u1', 'migrate u1', 'delete u1']);
    expect(c.ghosts.get('u1')).toBeUndefined();
  });

  it('source: the target never reports the domain within 60 s of the end -> Failed (upstream)', async () => {
    const m = migrationParts();
    const { c, vmis } = setup({ nodeName: 'n1', migration: m });
    await c.ghosts.load(log);
    await fakeLauncher(path.join(dir, 'pods'), 'pod-src');
    const v = migratingVmi({ targetNodeAddress: '127.0.0.1', targetDirectMigrationNodePorts: { '1': 0 } });
    vmis.set('ns/vm', v);
    const end = new Date(now).toISOString();
    c.domains.apply('ADDED', dom('Shutoff', 'Migrated', { uid: 'm1', endTimestamp: end, completed: true }));
    await c.reconcile('ns/vm');
    expect(vmis.get('ns/vm')!.status!.phase).toBe('Running');
    now += 61_000;
    await c.reconcile('ns/vm');
    expect(vmis.get('ns/vm')!.status).toMatchObject({
      phase: 'Failed',
      nodeName: 'n1',
      migrationState: { completed: true, failed: true },
    });
  });

  it('abort: abortRequested -> CancelVirtualMachineMigration once; the outcome (abortStatus, failed) reaches the status, the VMI keeps running here', async () => {
    const m = migrationParts();
    const { c, vmis, events } = setup({ nodeName: 'n1', migration: m });
    await c.ghosts.load(log);
    const src = await fakeLauncher(path.join(dir, 'pods'), 'pod-src');
    const v = migratingVmi({
      targetNodeAddress: '127.0.0.1',
      targetDirectMigrationNodePorts: { '1': 0 },
      startTimestamp: '2025-01-01T00:00:01Z',
      abortRequested: true,
    });
    vmis.set('ns/vm', v);
    c.ghosts.put({ name: 'vm', namespace: 'ns', uid: 'u1', socketFile: '', podUid: 'pod-src' });
    src.domain = dom('Running', 'Booted', { uid: 'm1', startTimestamp: '2025-01-01T00:00:01Z' });
    c.domains.apply('ADDED', src.domain);
    await c.reconcile('ns/vm');
    expect(src.calls).toEqual(['cancel u1']);
    expect(events.map((e) => e.message)).toContain('VirtualMachineInstance is aborting migration.');
    c.domains.apply(
      'MODIFIED',
      dom('Running', 'Booted', {
        uid: 'm1',
        startTimestamp: '2025-01-01T00:00:01Z',
        abortStatus: 'Aborting',
      }),
    );
    await c.reconcile('ns/vm');
    expect(src.calls).toEqual(['cancel u1']); // once
    expect(vmis.get('ns/vm')!.status!.migrationState!.abortStatus).toBe('Aborting');
    c.domains.apply(
      'MODIFIED',
      dom('Running', 'Migrated', {
        uid: 'm1',
        startTimestamp: '2025-01-01T00:00:01Z',
        endTimestamp: '2025-01-01T00:00:05Z',
        abortStatus: 'Succeeded',
        completed: true,
        failed: true,
        failureReason: 'canceled by client',
      }),
    );
    await c.reconcile('ns/vm');
    const st = vmis.get('ns/vm')!.status!;
    expect(st).toMatchObject({
      phase: 'Running',
      nodeName: 'n1',
      migrationState: {
        abortStatus: 'Succeeded',
        completed: true,
        failed: true,
        endTimestamp: '2025-01-01T00:00:05Z',
      },
    });
    expect(src.calls).toEqual(['cancel u1']);
  });

  it('the periodic sweep unmounts the container disks of Pods whose launcher is gone (socket refusing, missing or not a launcher socket), not of a live one', async () => {
    const unmounted: string[] = [];
    const containerDisks = {
      mountedPods: async () => ['pod-live', 'pod-dead', 'pod-missing', 'pod-link'],
      unmount: async (podUid: string) => void unmounted.push(podUid),
    } as unknown as ControllerOptions['containerDisks'];
    const { c } = setup({ containerDisks });
    const pods = path.join(dir, 'pods');
    await fakeLauncher(pods, 'pod-live');
    // a launcher killed: its socket file stays, nobody listens on it
    await mkdir(podSocketsDir(pods, 'pod-dead'), { recursive: true, mode: 0o700 });
    const dead = createServer();
    await new Promise<void>((resolve) => dead.listen(podSocketPath(pods, 'pod-dead'), resolve));
    const stale = podSocketPath(pods, 'pod-dead');
    await new Promise<void>((resolve) => {
      // close() unlinks the socket file: keep a copy of it under the same name (a hard link) to leave it behind
      linkSync(stale, `${stale}.keep`);
      dead.close(() => resolve());
    });
    renameSync(`${stale}.keep`, stale);
    expect(existsSync(stale)).toBe(true);
    // a symlink to the live launcher's socket is not a launcher socket: never connected to, swept
    await mkdir(podSocketsDir(pods, 'pod-link'), { recursive: true, mode: 0o700 });
    await symlink(podSocketPath(pods, 'pod-live'), podSocketPath(pods, 'pod-link'));
    await c.sweepContainerDisks();
    expect(unmounted.sort()).toEqual(['pod-dead', 'pod-link', 'pod-missing']);
    expect(await socketAnswers(podSocketPath(pods, 'pod-live'))).toBe(true);
    expect(await socketAnswers(stale)).toBe(false);
  });

  it('target of a failed migration whose launcher went while this handler was down: its container disks are unmounted, its record goes', async () => {
    const m = migrationParts();
    const unmounted: string[] = [];
    const containerDisks = {
      mount: async () => undefined,
      unmount: async (podUid: string) => void unmounted.push(podUid),
    } as unknown as ControllerOptions['containerDisks'];
    const { c, vmis } = setup({ nodeName: 'n2', migration: m, containerDisks });
    await c.ghosts.load(log);
    // the record the previous handler wrote while preparing the target; the launcher's socket is gone since
    await c.ghosts.put({
      name: 'vm',
      namespace: 'ns',
      uid: 'u1',
      socketFile: podSocketPath(path.join(dir, 'pods'), 'pod-dst'),
      podUid: 'pod-dst',
    });
    const failed = migratingVmi({ failed: true, completed: true });
    vmis.set('ns/vm', failed);
    await c.reconcile('ns/vm');
    expect(unmounted).toEqual(['pod-dst']);
    expect(c.ghosts.get('u1')).toBeUndefined();
    await c.reconcile('ns/vm');
    expect(unmounted).toEqual(['pod-dst']); // once
  });

  it('target of a failed migration whose Pod already left status.activePods: the record names it, SignalTargetPodCleanup goes out; its launcher gone: disks unmounted, record gone', async () => {
    const m = migrationParts();
    const unmounted: string[] = [];
    const containerDisks = {
      mount: async () => undefined,
      unmount: async (podUid: string) => void unmounted.push(podUid),
    } as unknown as ControllerOptions['containerDisks'];
    const { c, vmis } = setup({ nodeName: 'n2', migration: m, containerDisks });
    await c.ghosts.load(log);
    const dst = await fakeLauncher(path.join(dir, 'pods'), 'pod-dst');
    vmis.set('ns/vm', migratingVmi());
    await c.reconcile('ns/vm');
    expect(dst.calls).toEqual(['prepare u1']);
    expect(c.ghosts.get('u1')).toMatchObject({ podUid: 'pod-dst' });
    // virt-controller lists only the Pods that exist: the deleted target Pod is no longer there
    const failed = structuredClone(vmis.get('ns/vm')!);
    Object.assign(failed.status!.migrationState!, { failed: true, completed: true });
    failed.status!.activePods = { 'pod-src': 'n1' };
    vmis.set('ns/vm', failed);
    await c.reconcile('ns/vm');
    expect(dst.calls).toEqual(['prepare u1', 'cleanup u1']);
    expect(m.proxy.openListenerCount()).toBe(0);
    expect(unmounted).toEqual([]);
    // the target launcher ends (its Pod goes): what this handler held for it goes with it, once
    await servers.at(-1)!.stop();
    await c.reconcile('ns/vm');
    await c.reconcile('ns/vm');
    expect(unmounted).toEqual(['pod-dst']);
    expect(c.ghosts.get('u1')).toBeUndefined();
  });

  it('an orphaned domain whose launcher ended without a word (its socket gone) is forgotten and its Pod let go, not asked about forever', async () => {
    const unmounted: string[] = [];
    const containerDisks = {
      mount: async () => undefined,
      unmount: async (podUid: string) => void unmounted.push(podUid),
    } as unknown as ControllerOptions['containerDisks'];
    const { c, vmis, requeues } = setup({ containerDisks });
    await c.ghosts.load(log);
    const a = await fakeLauncher(path.join(dir, 'pods'), 'pod-a');
    vmis.set('ns/vm', vmi('vm', 'u1', 'pod-a'));
    await c.reconcile('ns/vm');
    expect(a.calls).toEqual(['sync u1']);
    c.domains.apply('ADDED', a.domain!);
    // the launcher dies (no event reaches the cache: the domain stays Running there), and the VM gets a new VMI
    await servers.at(-1)!.stop();
    vmis.set('ns/vm', vmi('vm', 'u2', 'pod-b'));
    requeues.length = 0;
    await c.reconcile('ns/vm');
    expect(unmounted).toContain('pod-a');
    expect(c.ghosts.get('u1')).toBeUndefined();
    expect(c.domains.get('ns/vm', 'u1')).toBeUndefined();
    // a slow launcher, though, is asked again
    const slow = await fakeLauncher(path.join(dir, 'pods'), 'pod-c');
    vmis.set('ns/vm', vmi('vm', 'u3', 'pod-c'));
    await c.reconcile('ns/vm');
    expect(slow.calls).toEqual(['sync u3']);
    c.domains.apply('ADDED', slow.domain!);
    vmis.set('ns/vm', vmi('vm', 'u4', 'pod-d'));
    requeues.length = 0;
    await c.reconcile('ns/vm');
    expect(slow.calls).toEqual(['sync u3', 'kill u3']);
    expect(requeues).toContain(1000);
    expect(c.ghosts.get('u3')).toBeDefined();
  });

  it('target of a failed migration: SignalTargetPodCleanup once, the listeners go; a VMI deleted meanwhile: the target domain goes', async () => {
    const m = migrationParts();
    const { c, vmis } = setup({ nodeName: 'n2', migration: m });
    await c.ghosts.load(log);
    const dst = await fakeLauncher(path.join(dir, 'pods'), 'pod-dst');
    vmis.set('ns/vm', migratingVmi());
    await c.reconcile('ns/vm');
    expect(m.proxy.openListenerCount()).toBe(2);
    const failed = structuredClone(vmis.get('ns/vm')!);
    Object.assign(failed.status!.migrationState!, { failed: true, completed: true });
    vmis.set('ns/vm', failed);
    await c.reconcile('ns/vm');
    await c.reconcile('ns/vm');
    expect(dst.calls).toEqual(['prepare u1', 'cleanup u1']);
    expect(m.proxy.openListenerCount()).toBe(0);

    // another try whose VMI is deleted while the target holds an incoming domain: it is killed here
    const again = migratingVmi({ migrationUid: 'm2' });
    vmis.set('ns/vm', again);
    await c.reconcile('ns/vm');
    expect(dst.calls).toEqual(['prepare u1', 'cleanup u1', 'prepare u1']);
    c.domains.apply('ADDED', dom('Paused', 'Migration'));
    vmis.set('ns/vm', { ...again, metadata: { ...again.metadata, deletionTimestamp: 'x' } });
    await c.reconcile('ns/vm');
    expect(dst.calls.at(-1)).toBe('kill u1');
  });
});
