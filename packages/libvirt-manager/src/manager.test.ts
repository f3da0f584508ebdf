import { createPodLayout } from '@kubevirt-ts/converter';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { DomainManager, type DomainManagerOptions } from './manager.js';
import { FakeConnection, quietLogger, until } from './test-fake-libvirt.js';

let n = 0;
function vmi(
  name = 'vm1',
  extra: Partial<VirtualMachineInstance['spec']> = {},
  status?: VirtualMachineInstance['status'],
): VirtualMachineInstance {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name, namespace: 'default', uid: `uid-${name}` },
    spec: {
      domain: {
        resources: { requests: { memory: '128Mi' } },
        devices: { autoattachGraphicsDevice: false },
      },
      ...extra,
    },
    status,
  };
}

function setup(opts: { grace?: number; migrationTarget?: DomainManagerOptions['migrationTarget'] } = {}) {
  const conn = new FakeConnection(`fake:///manager-${n++}`);
  const prepared: string[] = [];
  const mgr = new DomainManager({
    connection: conn,
    context: { allowEmulation: true, kvmAvailable: false, layout: createPodLayout('/nonexistent/pod') },
    prepare: async (v) => {
      prepared.push(v.metadata!.name!);
    },
    defaultGracePeriodSeconds: opts.grace,
    migrationTarget: opts.migrationTarget,
    pollIntervalMs: 5,
    logger: quietLogger,
  });
  return { conn, mgr, prepared };
}

const state = (conn: FakeConnection, name = 'default_vm1') => {
  const r = conn.domains.get(name);
  return r ? `${r.state}/${r.reason}` : 'absent';
};

describe('DomainManager.syncVMI', () => {
  test('defines and starts an absent domain, then is idempotent', async () => {
    const { conn, mgr, prepared } = setup();
    const d = await mgr.syncVMI(vmi());
    expect(d.status).toEqual({ status: 'Running', reason: 'Booted' });
    expect(d.metadata).toMatchObject({ name: 'vm1', namespace: 'default', uid: 'uid-vm1' });
    expect(d.spec?.type).toBe('qemu');
    expect(prepared).toEqual(['vm1']);
    const mutating = () =>
      conn.calls.filter((c) => /^(defineXML|create|resume|suspend|destroy|attach|detach)/.test(c));
    expect(mutating()).toEqual(['defineXML', 'create(default_vm1)']);
    await mgr.syncVMI(vmi());
    await mgr.syncVMI(vmi());
    expect(mutating()).toEqual(['defineXML', 'create(default_vm1)']);
    expect(prepared).toEqual(['vm1']);
  });

  test('startStrategy Paused starts paused and later syncs leave it paused', async () => {
    const { conn, mgr } = setup();
    const d = await mgr.syncVMI(vmi('vm1', { startStrategy: 'Paused' }));
    expect(d.status).toEqual({ status: 'Paused', reason: 'User' });
    await mgr.syncVMI(vmi('vm1', { startStrategy: 'Paused' }));
    expect(state(conn)).toBe('3/1');
    await mgr.unpauseVMI(vmi());
    expect(state(conn)).toBe('1/5');
  });

  test('a domain paused by the user stays paused; one paused by the system (IOError) is resumed', async () => {
    const { conn, mgr } = setup();
    await mgr.syncVMI(vmi());
    await mgr.pauseVMI(vmi());
    await mgr.syncVMI(vmi());
    expect(state(conn)).toBe('3/1');
    await mgr.unpauseVMI(vmi());
    conn.domains.get('default_vm1')!.state = 3;
    conn.domains.get('default_vm1')!.reason = 5; // IOERROR
    await mgr.syncVMI(vmi());
    expect(state(conn)).toBe('1/5');
    // but never a domain paused for a migration
    conn.domains.get('default_vm1')!.state = 3;
    conn.domains.get('default_vm1')!.reason = 2; // MIGRATION
    await mgr.syncVMI(vmi());
    expect(state(conn)).toBe('3/2');
  });

  test('a stopped domain of a VMI that already ran is not started again', async () => {
    const { conn, mgr } = setup();
    await mgr.syncVMI(vmi());
    await mgr.killVMI(vmi());
    expect(state(conn)).toBe('5/2');
    const d = await mgr.syncVMI(vmi('vm1', {}, { phase: 'Running' }));
    expect(d.status).toEqual({ status: 'Shutoff', reason: 'Destroyed' });
    // a VMI that did not run yet (Scheduled) does get it started
    await mgr.syncVMI(vmi('vm1', {}, { phase: 'Scheduled' }));
    expect(state(conn)).toBe('1/1');
  });

  test('hot-plugs a disk the VMI gained and unplugs it when it is gone', async () => {
    const { conn, mgr } = setup();
    await mgr.syncVMI(vmi());
    const withDisk = vmi('vm1', {
      domain: {
        resources: { requests: { memory: '128Mi' } },
        devices: { autoattachGraphicsDevice: false, disks: [{ name: 'data', disk: { bus: 'scsi' } }] },
      },
      volumes: [{ name: 'data', hostDisk: { path: '/data/disk.img', type: 'Disk' } }],
    });
    await mgr.syncVMI(withDisk);
    const attach = conn.calls.filter((c) => c.startsWith('attach:'));
    expect(attach).toHaveLength(1);
    expect(attach[0]).toMatch(/^attach:<disk type="file" device="disk"[^>]*>/);
    expect(attach[0]).toContain('<target dev="sda" bus="scsi"');
    // the fake does not change its XML on attach: make the live domain have the disk
    conn.domains.get('default_vm1')!.xml = (await import('@kubevirt-ts/converter')).toDomainXml(
      mgr.convert(withDisk),
    );
    await mgr.syncVMI(withDisk);
    expect(conn.calls.filter((c) => c.startsWith('attach:'))).toHaveLength(1);
    await mgr.syncVMI(vmi());
    const detach = conn.calls.filter((c) => c.startsWith('detach:'));
    expect(detach).toHaveLength(1);
    expect(detach[0]).toContain('dev="sda"');
  });

  test('bad VMI input names the field', async () => {
    const { mgr } = setup();
    const noName = { ...vmi(), metadata: { namespace: 'x' } };
    await expect(mgr.syncVMI(noName)).rejects.toThrow(/^metadata\.name/);
  });
});

describe('pause, shutdown, kill, delete', () => {
  test('pause/unpause; errors when there is no domain', async () => {
    const { conn, mgr } = setup();
    await expect(mgr.pauseVMI(vmi())).rejects.toThrow('domain default_vm1 not found');
    await mgr.syncVMI(vmi());
    await mgr.pauseVMI(vmi());
    await mgr.pauseVMI(vmi()); // idempotent
    expect(state(conn)).toBe('3/1');
    await mgr.unpauseVMI(vmi());
    await mgr.unpauseVMI(vmi());
    expect(state(conn)).toBe('1/5');
    await mgr.killVMI(vmi());
    await expect(mgr.pauseVMI(vmi())).rejects.toThrow(
      /cannot pause domain default_vm1: it is Shutoff \(Destroyed\)/,
    );
  });

  test('shutdown: a guest that powers off within the grace period is not destroyed', async () => {
    const { conn, mgr } = setup();
    await mgr.syncVMI(vmi());
    const r = await mgr.shutdownVMI(vmi(), { gracePeriodSeconds: 5, wait: true });
    expect(r).toBe('shutdown');
    expect(state(conn)).toBe('5/1');
    expect(conn.calls).not.toContain('destroy(default_vm1)');
    expect(await mgr.shutdownVMI(vmi())).toBe('already-down');
  });

  test('shutdown: a guest that ignores ACPI is destroyed when the grace period ends', async () => {
    const { conn, mgr } = setup();
    conn.acpi = 'ignore';
    await mgr.syncVMI(vmi('vm1', { terminationGracePeriodSeconds: 0.2 }));
    const t0 = Date.now();
    expect(await mgr.shutdownVMI(vmi('vm1', { terminationGracePeriodSeconds: 0.2 }))).toBe('requested');
    expect(state(conn)).toBe('1/1');
    await until(() => state(conn) === '5/2', 3000, 'destroy after grace');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
    expect(conn.calls).toContain('shutdown(default_vm1)');
  });

  test('shutdown with grace period 0 destroys at once; absent domain is fine', async () => {
    const { conn, mgr } = setup();
    expect(await mgr.shutdownVMI(vmi())).toBe('absent');
    conn.acpi = 'ignore';
    await mgr.syncVMI(vmi());
    expect(await mgr.shutdownVMI(vmi(), { gracePeriodSeconds: 0, wait: true })).toBe('killed');
    expect(conn.calls).not.toContain('shutdown(default_vm1)');
  });

  test('kill and delete are idempotent; delete removes a running domain', async () => {
    const { conn, mgr } = setup();
    await mgr.killVMI(vmi());
    await mgr.deleteVMI(vmi());
    await mgr.syncVMI(vmi());
    await mgr.deleteVMI(vmi());
    expect(state(conn)).toBe('absent');
    await mgr.deleteVMI(vmi());
    expect(await mgr.getDomain()).toBeUndefined();
  });
});

describe('guest agent, stats, version', () => {
  test('guestPing / freeze / getGuestInfo fail clearly without an agent, work with one', async () => {
    const { conn, mgr } = setup();
    await mgr.syncVMI(vmi());
    await expect(mgr.guestPing('default_vm1', 1)).rejects.toThrow(/guest agent is not connected/);
    await expect(mgr.freezeVMI(vmi(), 0)).rejects.toThrow(/not connected/);
    const seen: string[] = [];
    conn.agent = (cmd) => {
      const { execute } = JSON.parse(cmd) as { execute: string };
      seen.push(execute);
      switch (execute) {
        case 'guest-info':
          return { version: '8.1.0', supported_commands: [{ name: 'guest-ping', enabled: true }] };
        case 'guest-get-osinfo':
          return {
            name: 'Debian GNU/Linux',
            'kernel-release': '6.1.0',
            id: 'debian',
            'pretty-name': 'Debian 12',
          };
        case 'guest-get-host-name':
          return { 'host-name': 'vm1' };
        case 'guest-get-timezone':
          return { zone: 'UTC', offset: 0 };
        case 'guest-get-users':
          return [{ user: 'root', 'login-time': 1.5 }];
        case 'guest-get-fsinfo':
          return [
            {
              name: 'vda1',
              mountpoint: '/',
              type: 'ext4',
              'used-bytes': 1,
              'total-bytes': 2,
              disk: [{ serial: 'D1', 'bus-type': 'virtio' }],
            },
          ];
        case 'guest-exec':
          return { pid: 42 };
        case 'guest-exec-status':
          return execPolls++ < 2
            ? { exited: false }
            : { exited: true, exitcode: 3, 'out-data': Buffer.from('hello\n').toString('base64') };
        default:
          return {};
      }
    };
    let execPolls = 0;
    expect(await mgr.exec('default_vm1', '/bin/echo', ['hello'], 5)).toEqual({
      exitCode: 3,
      stdout: 'hello\n',
    });
    expect(execPolls).toBe(3);
    await mgr.guestPing('default_vm1', 1);
    await mgr.freezeVMI(vmi(), 0);
    expect((await mgr.getDomain())?.status.fsFreezeStatus).toEqual({ status: 'frozen' });
    const info = await mgr.getGuestInfo();
    expect(info).toMatchObject({
      guestAgentVersion: '8.1.0',
      hostname: 'vm1',
      os: { name: 'Debian GNU/Linux', kernelRelease: '6.1.0', id: 'debian', prettyName: 'Debian 12' },
      timezone: 'UTC, 0',
      userList: [{ userName: 'root', loginTime: 1.5 }],
      fsInfo: {
        disks: [{ diskName: 'vda1', mountPoint: '/', fileSystemType: 'ext4', usedBytes: 1, totalBytes: 2 }],
      },
      fsFreezeStatus: 'frozen',
    });
    expect(await mgr.getUsers()).toEqual({ items: [{ userName: 'root', loginTime: 1.5 }] });
    expect((await mgr.getFilesystems()).items[0]).toMatchObject({
      diskName: 'vda1',
      disk: [{ serial: 'D1', busType: 'virtio' }],
    });
    await mgr.unfreezeVMI(vmi());
    expect((await mgr.getDomain())?.status.fsFreezeStatus).toBeUndefined();
    // automatic thaw after the timeout
    seen.length = 0;
    await mgr.freezeVMI(vmi(), 0.05);
    await until(() => seen.includes('guest-fsfreeze-thaw'), 2000, 'automatic thaw');
  });

  test('softReboot uses ACPI without an agent, the agent when it answers', async () => {
    const { conn, mgr } = setup();
    await mgr.syncVMI(vmi());
    await mgr.softRebootVMI(vmi());
    conn.agent = () => ({});
    await mgr.softRebootVMI(vmi());
    expect(conn.calls.filter((c) => c.startsWith('reboot-flags:'))).toEqual([
      'reboot-flags:1',
      'reboot-flags:2',
    ]);
  });

  test('getDomainStats converts libvirt stats to upstream DomainStats; getQemuVersion formats', async () => {
    const { conn, mgr } = setup();
    expect(await mgr.getDomainStats()).toBeUndefined();
    conn.stats = [
      {
        domain: { name: 'default_vm1', uuid: 'u1' },
        stats: {
          'state.state': 1,
          'cpu.time': 1000,
          'cpu.user': 600,
          'balloon.current': 131072,
          'balloon.rss': 50000,
          'vcpu.current': 1,
          'vcpu.0.state': 1,
          'vcpu.0.time': 900,
          'net.count': 1,
          'net.0.name': 'tap0',
          'net.0.rx.bytes': 10,
          'block.count': 1,
          'block.0.name': 'vda',
          'block.0.rd.bytes': 20,
        },
      },
    ];
    expect(await mgr.getDomainStats()).toEqual({
      Name: 'default_vm1',
      UUID: 'u1',
      Cpu: { Time: 1000, TimeSet: true, User: 600, UserSet: true },
      Memory: { ActualBalloon: 131072, ActualBalloonSet: true, RSS: 50000, RSSSet: true },
      Vcpu: [{ State: 1, StateSet: true, Time: 900, TimeSet: true }],
      Net: [{ Name: 'tap0', NameSet: true, RxBytes: 10, RxBytesSet: true }],
      Block: [{ Name: 'vda', NameSet: true, RdBytes: 20, RdBytesSet: true }],
      NrVirtCpu: 1,
    });
    expect(await mgr.getQemuVersion()).toBe('7.2.0');
  });
});

/** What upstream's virt-handler sends (json.Marshal of cmdclient.MigrationOptions, v1.1.0 defaults). */
const UPSTREAM_OPTIONS = {
  Bandwidth: '64Mi',
  ProgressTimeout: 150,
  CompletionTimeoutPerGiB: 800,
  UnsafeMigration: false,
  AllowAutoConverge: false,
  AllowPostCopy: false,
  ParallelMigrationThreads: null,
};

describe('migration (logic, fake peers)', () => {
  test('migrates to the target, reports state, the source ends Shutoff/Migrated', async () => {
    const src = setup();
    const dst = setup();
    await src.mgr.syncVMI(vmi());
    await dst.mgr.prepareMigrationTarget(vmi());
    expect(dst.prepared).toEqual(['vm1']);
    await expect(dst.mgr.syncVMI(vmi())).rejects.toThrow(/waiting for an incoming migration/);
    const started = await src.mgr.migrateVMI(vmi(), UPSTREAM_OPTIONS, {
      targetURI: dst.conn.uri,
      migrationURI: 'tcp://127.0.0.1:49152',
      destinationXML: (xml: string) => xml.replace('/nonexistent/pod', '/nonexistent/pod2'),
    });
    expect(started).toMatchObject({ completed: false, failed: false, targetURI: dst.conn.uri });
    await expect(src.mgr.migrateVMI(vmi(), UPSTREAM_OPTIONS, { targetURI: dst.conn.uri })).rejects.toThrow(
      /already migrating/,
    );
    const done = await src.mgr.waitForMigration(vmi());
    expect(done).toMatchObject({ completed: true, failed: false });
    expect(state(src.conn)).toBe('5/4');
    expect(state(dst.conn)).toBe('1/2');
    expect(dst.conn.domains.get('default_vm1')!.xml).toContain('/nonexistent/pod2/');
    await dst.mgr.finalizeMigration(vmi());
    const call = src.conn.calls.find((c) => c.startsWith('migrateToURI3'));
    expect(call).toBeDefined();
    // the source must not restart the migrated-away domain
    await src.mgr.syncVMI(vmi());
    expect(state(src.conn)).toBe('5/4');
  });

  test('cancel aborts the running migration', async () => {
    const src = setup();
    const dst = setup();
    src.conn.migrationMs = 5000;
    await src.mgr.syncVMI(vmi());
    await expect(src.mgr.cancelMigration(vmi())).rejects.toThrow(/not migrating/);
    await src.mgr.migrateVMI(vmi(), {}, { targetURI: dst.conn.uri });
    await new Promise((r) => setTimeout(r, 10));
    await src.mgr.cancelMigration(vmi());
    const st = await src.mgr.waitForMigration(vmi());
    expect(st).toMatchObject({ completed: true, failed: true, abortStatus: 'Succeeded' });
    expect(st.failureReason).toMatch(/canceled/);
    expect(state(src.conn)).toBe('1/1');
    expect(state(dst.conn)).toBe('absent');
  });

  test('completion timeout aborts a migration that takes too long', async () => {
    const src = setup();
    const dst = setup();
    src.conn.migrationMs = 5000;
    await src.mgr.syncVMI(vmi());
    // upstream: CompletionTimeoutPerGiB x the guest memory in GB rounded up (1 here) = 1 s
    await src.mgr.migrateVMI(
      vmi(),
      { ...UPSTREAM_OPTIONS, CompletionTimeoutPerGiB: 1 },
      { targetURI: dst.conn.uri },
    );
    const st = await src.mgr.waitForMigration('default_vm1');
    expect(st).toMatchObject({ failed: true, abortStatus: 'Succeeded' });
  });

  test('progress timeout aborts a migration whose remaining data stops shrinking', async () => {
    const src = setup();
    const dst = setup();
    src.conn.migrationMs = 10_000;
    let remaining = 5000;
    src.conn.jobRemaining = () => (remaining > 3000 ? (remaining -= 1000) : remaining); // shrinks, then stalls
    await src.mgr.syncVMI(vmi());
    const t0 = Date.now();
    await src.mgr.migrateVMI(
      vmi(),
      { ...UPSTREAM_OPTIONS, ProgressTimeout: 1, CompletionTimeoutPerGiB: 0 },
      { targetURI: dst.conn.uri },
    );
    const st = await src.mgr.waitForMigration(vmi());
    expect(st).toMatchObject({ failed: true, abortStatus: 'Succeeded' });
    expect(st.failureReason).toMatch(/^migration made no progress for 1 s: operation aborted/);
    expect(remaining).toBe(3000);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1000);
  });

  test('a watcher given the manager reports migration progress with the domain', async () => {
    const src = setup();
    const dst = setup();
    await src.mgr.syncVMI(vmi());
    const { DomainWatcher } = await import('./watcher.js');
    const w = new DomainWatcher({ connection: src.conn, migrations: src.mgr, logger: quietLogger });
    const seen: string[] = [];
    w.on(
      'event',
      (e: {
        type: string;
        domain: {
          status: { status: string; reason: string };
          migration?: { completed: boolean; failed: boolean };
        };
      }) => {
        const m = e.domain.migration;
        seen.push(
          `${e.type} ${e.domain.status.status}/${e.domain.status.reason} ${m ? `migration completed=${m.completed}` : '-'}`,
        );
      },
    );
    await new Promise((r) => setTimeout(r, 10));
    await w.start();
    await src.mgr.migrateVMI(vmi(), UPSTREAM_OPTIONS, { targetURI: dst.conn.uri });
    await src.mgr.waitForMigration(vmi());
    await until(
      () => seen.some((s) => s.startsWith('MODIFIED Shutoff/Migrated migration completed=true')),
      3000,
      'completed migration reported',
    );
    expect(seen[0]).toBe('ADDED Running/Booted -');
    expect(seen).toContain('MODIFIED Running/Booted migration completed=false');
    expect((await src.mgr.getDomain())?.migration).toMatchObject({ completed: true, failed: false });
    await w.stop();
  });

  test('migration options are validated with field paths', async () => {
    const { mgr } = setup();
    await mgr.syncVMI(vmi());
    const to = { targetURI: 'x' };
    await expect(mgr.migrateVMI(vmi(), 'fast')).rejects.toThrow(/^options: must be an object/);
    // no target given and none configured (a launcher derives it from its share dir)
    await expect(mgr.migrateVMI(vmi(), UPSTREAM_OPTIONS)).rejects.toThrow(/^target\.targetURI: required/);
    // our old shape is refused by name: the target never comes in the request (upstream)
    await expect(mgr.migrateVMI(vmi(), { targetURI: 'x' })).rejects.toThrow(
      /^options\.targetURI: not a field of upstream's MigrationOptions \(Bandwidth, /,
    );
    await expect(mgr.migrateVMI(vmi(), {}, { targetURI: 'x', migrationURI: '127.0.0.1:1' })).rejects.toThrow(
      /^target\.migrationURI: /,
    );
    await expect(mgr.migrateVMI(vmi(), { Bandwidth: 'lots' }, to)).rejects.toThrow(/^options\.Bandwidth: /);
    await expect(mgr.migrateVMI(vmi(), { Bandwidth: 64 }, to)).rejects.toThrow(
      /^options\.Bandwidth: must be a quantity/,
    );
    await expect(mgr.migrateVMI(vmi(), { AllowPostCopy: 'yes' }, to)).rejects.toThrow(
      /^options\.AllowPostCopy: must be a boolean/,
    );
    await expect(mgr.migrateVMI(vmi(), { ProgressTimeout: 1.5 }, to)).rejects.toThrow(
      /^options\.ProgressTimeout: must be a non-negative integer/,
    );
    await expect(
      mgr.migrateVMI(vmi(), UPSTREAM_OPTIONS, { targetURI: 'fake:///nowhere' }),
    ).resolves.toBeDefined();
    const st = await mgr.waitForMigration(vmi());
    expect(st.failed).toBe(true);
    expect(st.failureReason).toMatch(/Failed to connect socket/);
  });
});

test('a manager with migrationTarget derives the target itself (as a launcher does)', async () => {
  const { conn, mgr } = setup({ migrationTarget: (v) => ({ targetURI: `fake:///${v.metadata?.uid}` }) });
  await mgr.syncVMI(vmi());
  const st = await mgr.migrateVMI(vmi(), UPSTREAM_OPTIONS);
  expect(st.targetURI).toBe(`fake:///${vmi().metadata!.uid}`);
  // the fake libvirt has no peer there: the failure names the derived URI
  expect((await mgr.waitForMigration(vmi())).failureReason).toContain(`'fake:///${vmi().metadata!.uid}'`);
  expect(conn.calls.some((c) => c.startsWith('migrateToURI3'))).toBe(true);
});

test("the migration metadata's uid is the migration's (status.migrationState.migrationUid), as upstream's", async () => {
  const { mgr } = setup({ migrationTarget: (v) => ({ targetURI: `fake:///${v.metadata?.uid}` }) });
  await mgr.syncVMI(vmi());
  const migrating = vmi('vm1', {}, { phase: 'Running', migrationState: { migrationUid: 'vmim-uid-1' } });
  const st = await mgr.migrateVMI(migrating, UPSTREAM_OPTIONS);
  expect(st.uid).toBe('vmim-uid-1');
  expect((await mgr.waitForMigration(migrating)).uid).toBe('vmim-uid-1');
});

describe('contextWithOptions', () => {
  test('applies VirtualMachineOptions from virt-handler to the launcher context', async () => {
    const { contextWithOptions } = await import('./manager.js');
    const base = { allowEmulation: true, freePageReporting: true, serialConsoleLog: true };
    expect(contextWithOptions(base, undefined)).toBe(base);
    expect(
      contextWithOptions(base, {
        VirtualMachineSMBios: { manufacturer: 'KubeVirt', product: '', version: '1', sku: '', family: '' },
        MemBalloonStatsPeriod: 10,
        PreallocatedVolumes: ['thick'],
        DisksInfo: { disk0: { format: 'raw', virtualSize: 1024 }, bad: { format: 'vmdk' } },
        clusterConfig: { FreePageReportingDisabled: true, SerialConsoleLogDisabled: true },
      }),
    ).toEqual({
      allowEmulation: true,
      freePageReporting: false,
      serialConsoleLog: false,
      smbios: { manufacturer: 'KubeVirt', version: '1' },
      memBalloonStatsPeriod: 10,
      volumesDiscardIgnore: ['thick'],
      disksInfo: { disk0: { format: 'raw', virtualSize: 1024 } },
    });
  });

  test('syncVMI puts the options into the domain', async () => {
    const { conn, mgr } = setup();
    await mgr.syncVMI(vmi(), { VirtualMachineSMBios: { manufacturer: 'Acme' }, MemBalloonStatsPeriod: 7 });
    const xml = conn.domains.get('default_vm1')!.xml;
    expect(xml).toContain('<entry name="manufacturer">Acme</entry>');
    expect(xml).toContain('<stats period="7"');
  });
});
