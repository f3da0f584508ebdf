// Block migration's flags and parameters (upstream's generateMigrationFlags / generateMigrationParams /
// getDiskTargetsForMigration) over the domain XML the converter really produces for a VMI.
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { createPodLayout, parseDomainXml, toDomain, toDomainXml } from '@kubevirt-ts/converter';
import { Vir } from './libvirt.js';
import {
  DETECT_ZEROES_MIN_LIBVIRT,
  TCG_COHERENT_DIRTY_BITMAP_QEMU,
  checkMigrationTarget,
  classifyVolumesForMigration,
  diskTargetsForMigration,
  domainTypeOf,
  ephemeralDisksBytes,
  isBlockMigration,
  migrateCall,
  migrationDataGB,
  pauseForMigration,
  sharedStorageNeedsUnsafe,
  sharedStorageVolumes,
} from './migration.js';

const layout = createPodLayout('/pod');
const DISKS_URI = 'unix:///var/run/kubevirt/migrationproxy/u1-49153-source.sock';

/** A VMI with one disk of every kind a block migration tells apart. */
function vmi(migrationMethod?: string): VirtualMachineInstance {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: 'vm', namespace: 'ns', uid: 'u1' },
    spec: {
      domain: {
        resources: { requests: { memory: '1Gi' } },
        devices: {
          autoattachGraphicsDevice: false,
          disks: [
            { name: 'root', disk: { bus: 'virtio' } }, // containerDisk overlay: copied
            { name: 'shared', disk: { bus: 'virtio' } }, // PVC: shared, never copied
            { name: 'scratch', disk: { bus: 'virtio' } }, // emptyDisk: copied
            { name: 'cloudinit', disk: { bus: 'virtio' } }, // generated ISO on a disk: copied
            { name: 'ro-generated', disk: { bus: 'virtio', readonly: true } }, // read-only but generated: copied
            { name: 'ro-host', disk: { bus: 'virtio', readonly: true } }, // read-only hostDisk: not copied
            { name: 'iso', cdrom: { bus: 'sata' } }, // a cdrom: never copied
          ],
        },
      },
      volumes: [
        { name: 'root', containerDisk: { image: 'example.com/root:1' } },
        { name: 'shared', persistentVolumeClaim: { claimName: 'rwx' } },
        { name: 'scratch', emptyDisk: { capacity: '1Gi' } },
        { name: 'cloudinit', cloudInitNoCloud: { userData: '#cloud-config\n' } },
        { name: 'ro-generated', configMap: { name: 'cm' } },
        { name: 'ro-host', hostDisk: { path: '/data/x.img', type: 'Disk' } },
        { name: 'iso', containerDisk: { image: 'example.com/iso:1' } },
      ],
    },
    ...(migrationMethod ? { status: { migrationMethod } } : {}),
  } as unknown as VirtualMachineInstance;
}

const xmlOf = (v: VirtualMachineInstance) =>
  toDomainXml(toDomain(v, { allowEmulation: true, kvmAvailable: false, layout }));

describe('which disks a block migration copies', () => {
  test('volume classes (upstream classifyVolumesForMigration)', () => {
    const c = classifyVolumesForMigration(vmi());
    expect([...c.shared]).toEqual(['shared']);
    expect([...c.generated].sort()).toEqual(['cloudinit', 'iso', 'ro-generated', 'root']);
    const sharedHost = vmi();
    (sharedHost.spec.volumes![5] as { hostDisk: { shared?: boolean } }).hostDisk.shared = true;
    expect([...classifyVolumesForMigration(sharedHost).shared].sort()).toEqual(['ro-host', 'shared']);
  });

  test('the target devs over the converter’s real domain XML: no cdrom, no shared, no read-only unless generated', () => {
    const v = vmi('BlockMigration');
    const disks = parseDomainXml(xmlOf(v)).devices.disks ?? [];
    const byAlias = Object.fromEntries(disks.map((d) => [d.alias, d.target.dev]));
    expect(diskTargetsForMigration(v, disks)).toEqual([
      byAlias['ua-root'],
      byAlias['ua-scratch'],
      byAlias['ua-cloudinit'],
      byAlias['ua-ro-generated'],
    ]);
    expect(byAlias['ua-root']).toBe('vda');
  });
});

describe('migrateCall: flags and parameters', () => {
  const base = { targetURI: 'qemu+unix:///session?socket=/s/u1-source.sock', migrationURI: 'unix:///s/x' };

  test('a live migration (shared storage only): no NON_SHARED flag, no disks', () => {
    const v = vmi('LiveMigration');
    const { flags, params } = migrateCall({ ...base, disksURI: DISKS_URI, blockMigration: false }, xmlOf(v), {
      vmi: v,
    });
    expect(flags).toBe(Vir.MIGRATE_LIVE | Vir.MIGRATE_PEER2PEER | Vir.MIGRATE_PERSIST_DEST);
    expect(params.migrateDisks).toBeUndefined();
    expect(params.disksUri).toBeUndefined();
  });

  test('a block migration: NON_SHARED_INC, migrate_disks and disks_uri; never UNSAFE', () => {
    const v = vmi('BlockMigration');
    const xml = xmlOf(v);
    const { flags, params } = migrateCall({ ...base, disksURI: DISKS_URI, blockMigration: true }, xml, {
      vmi: v,
      libvirtVersion: 9_000_000,
    });
    expect(flags & Vir.MIGRATE_NON_SHARED_INC).toBe(Vir.MIGRATE_NON_SHARED_INC);
    expect(flags & Vir.MIGRATE_UNSAFE).toBe(0);
    expect(params.migrateDisks).toEqual(diskTargetsForMigration(v, parseDomainXml(xml).devices.disks ?? []));
    expect(params.migrateDisks).toHaveLength(4);
    expect(params.disksUri).toBe(DISKS_URI);
    expect(params.uri).toBe('unix:///s/x');
    // libvirt 9.0 has no migrate_disks_detect_zeroes: not sent
    expect(params.migrateDisksDetectZeroes).toBeUndefined();
  });

  test('migrate_disks_detect_zeroes for the same disks from libvirt 10.9.0 on', () => {
    const v = vmi('BlockMigration');
    const { params } = migrateCall({ ...base, disksURI: DISKS_URI, blockMigration: true }, xmlOf(v), {
      vmi: v,
      libvirtVersion: DETECT_ZEROES_MIN_LIBVIRT,
    });
    expect(DETECT_ZEROES_MIN_LIBVIRT).toBe(10_009_000);
    expect(params.migrateDisksDetectZeroes).toEqual(params.migrateDisks);
  });

  test('UnsafeMigration asked for explicitly still sets UNSAFE (upstream’s option), block or not', () => {
    const v = vmi('BlockMigration');
    const { flags } = migrateCall({ ...base, blockMigration: true, unsafe: true }, xmlOf(v), { vmi: v });
    expect(flags & Vir.MIGRATE_UNSAFE).toBe(Vir.MIGRATE_UNSAFE);
  });

  test('isBlockMigration follows status.migrationMethod (and migrated volumes)', () => {
    expect(isBlockMigration(vmi('BlockMigration'))).toBe(true);
    expect(isBlockMigration(vmi('LiveMigration'))).toBe(false);
    expect(isBlockMigration(vmi())).toBe(false);
    const mv = vmi('LiveMigration');
    (mv.status as Record<string, unknown>).migratedVolumes = [{ volumeName: 'shared' }];
    expect(isBlockMigration(mv)).toBe(true);
  });

  test('disksURI must be unix:/// or tcp://', () => {
    expect(() => checkMigrationTarget({ targetURI: 'qemu:///x', disksURI: '/plain/path' })).toThrow(
      'target.disksURI: "/plain/path" is not a URI',
    );
    expect(checkMigrationTarget({ targetURI: 'qemu:///x', disksURI: DISKS_URI }).disksURI).toBe(DISKS_URI);
  });
});

/** A VMI whose only disk is a filesystem claim's disk.img (the claim's access modes in its volume status). */
function claimVmi(accessModes: string[], extra?: 'emptyDisk'): VirtualMachineInstance {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: 'vm', namespace: 'ns', uid: 'u1' },
    spec: {
      domain: {
        resources: { requests: { memory: '128Mi' } },
        devices: {
          autoattachGraphicsDevice: false,
          disks: [
            { name: 'data', disk: { bus: 'virtio' } },
            ...(extra ? [{ name: 'scratch', disk: { bus: 'virtio' } }] : []),
          ],
        },
      },
      volumes: [
        { name: 'data', persistentVolumeClaim: { claimName: 'claim' } },
        ...(extra ? [{ name: 'scratch', emptyDisk: { capacity: '1Gi' } }] : []),
      ],
    },
    status: {
      migrationMethod: 'LiveMigration',
      volumeStatus: [{ name: 'data', persistentVolumeClaimInfo: { claimName: 'claim', accessModes } }],
    },
  } as unknown as VirtualMachineInstance;
}

describe('disks left in place on a ReadWriteMany claim: UNSAFE (libvirt 9.0 takes its directory for local storage)', () => {
  const base = { targetURI: 'qemu+unix:///session?socket=/s/u1-source.sock', migrationURI: 'unix:///s/x' };

  test('which volumes are shared storage: ReadWriteMany claims and shared hostDisks, not claims of other modes', () => {
    expect([...sharedStorageVolumes(claimVmi(['ReadWriteMany']))]).toEqual(['data']);
    expect([...sharedStorageVolumes(claimVmi(['ReadWriteOnce']))]).toEqual([]);
    const v = vmi();
    (v.spec.volumes![5] as { hostDisk: { shared?: boolean } }).hostDisk.shared = true;
    // no volume status: the PVC's access modes are unknown (virt-controller has not reported them)
    expect([...sharedStorageVolumes(v)]).toEqual(['ro-host']);
    (v as { status?: object }).status = {
      volumeStatus: [{ name: 'shared', persistentVolumeClaimInfo: { accessModes: ['ReadWriteMany'] } }],
      migratedVolumes: [{ volumeName: 'shared' }],
    };
    expect([...sharedStorageVolumes(v)]).toEqual(['ro-host']); // a migrated volume is copied, not shared
  });

  test('a live migration of a VMI on a ReadWriteMany claim: LIVE, PEER2PEER, PERSIST_DEST and UNSAFE, nothing copied', () => {
    const v = claimVmi(['ReadWriteMany']);
    const xml = xmlOf(v);
    const disks = parseDomainXml(xml).devices.disks ?? [];
    expect(disks.map((d) => [d.type, d.alias, d.source?.file])).toEqual([
      ['file', 'ua-data', expect.stringMatching(/\/data\/disk\.img$/)],
    ]);
    expect(sharedStorageNeedsUnsafe(v, disks, [])).toBe(true);
    const { flags, params } = migrateCall({ ...base, blockMigration: false }, xml, { vmi: v });
    expect(flags).toBe(
      Vir.MIGRATE_LIVE | Vir.MIGRATE_PEER2PEER | Vir.MIGRATE_PERSIST_DEST | Vir.MIGRATE_UNSAFE,
    );
    expect(params.migrateDisks).toBeUndefined();
  });

  test('a ReadWriteOnce claim: no UNSAFE (libvirt refuses, as LiveMigratable False does before it)', () => {
    const v = claimVmi(['ReadWriteOnce']);
    const { flags } = migrateCall({ ...base, blockMigration: false }, xmlOf(v), { vmi: v });
    expect(flags & Vir.MIGRATE_UNSAFE).toBe(0);
  });

  test('a node-local writable disk left in place besides the claim: no UNSAFE; copied by a block migration: UNSAFE', () => {
    const v = claimVmi(['ReadWriteMany'], 'emptyDisk');
    const xml = xmlOf(v);
    expect(migrateCall({ ...base, blockMigration: false }, xml, { vmi: v }).flags & Vir.MIGRATE_UNSAFE).toBe(
      0,
    );
    const block = migrateCall({ ...base, disksURI: DISKS_URI, blockMigration: true }, xml, { vmi: v });
    expect(block.params.migrateDisks).toEqual(['vdb']);
    expect(block.flags & Vir.MIGRATE_UNSAFE).toBe(Vir.MIGRATE_UNSAFE);
  });

  test('the block migration VMI with its PVC ReadWriteMany: its other kept disks are read-only or cdroms: UNSAFE', () => {
    const v = vmi('BlockMigration');
    (v as { status?: object }).status = {
      migrationMethod: 'BlockMigration',
      volumeStatus: [{ name: 'shared', persistentVolumeClaimInfo: { accessModes: ['ReadWriteMany'] } }],
    };
    const { flags } = migrateCall({ ...base, disksURI: DISKS_URI, blockMigration: true }, xmlOf(v), {
      vmi: v,
    });
    expect(flags & Vir.MIGRATE_UNSAFE).toBe(Vir.MIGRATE_UNSAFE);
  });
});

describe('software emulation on QEMU before 9.0: the guest is paused for the migration (issue 31)', () => {
  const base = { targetURI: 'qemu+unix:///session?socket=/s/u1-source.sock', migrationURI: 'unix:///s/x' };

  test('the domain type comes from the converter’s XML: qemu without /dev/kvm, kvm with it', () => {
    const v = vmi('LiveMigration');
    expect(domainTypeOf(xmlOf(v))).toBe('qemu');
    expect(domainTypeOf(toDomainXml(toDomain(v, { allowEmulation: true, kvmAvailable: true, layout })))).toBe(
      'kvm',
    );
    expect(domainTypeOf(`<domain id='3' type="kvm">`)).toBe('kvm');
    expect(domainTypeOf('<domain>')).toBeUndefined();
  });

  test('paused only under TCG on a QEMU older than 9.0.0 (or of unknown version)', () => {
    expect(TCG_COHERENT_DIRTY_BITMAP_QEMU).toBe(9_000_000);
    expect(pauseForMigration('qemu', 7_002_022)).toBe(true); // Debian 12's 7.2.22
    expect(pauseForMigration('qemu', 8_002_009)).toBe(true);
    expect(pauseForMigration('qemu', 0)).toBe(true);
    expect(pauseForMigration('qemu', 9_000_000)).toBe(false);
    expect(pauseForMigration('qemu', 10_001_000)).toBe(false);
    expect(pauseForMigration('kvm', 7_002_022)).toBe(false);
    expect(pauseForMigration(undefined, 7_002_022)).toBe(false);
  });

  test('a paused migration has no VIR_MIGRATE_LIVE, no post-copy, no auto-converge; the rest as a live one', () => {
    const v = vmi('BlockMigration');
    const mo = {
      ...base,
      disksURI: DISKS_URI,
      blockMigration: true,
      allowPostCopy: true,
      allowAutoConverge: true,
    };
    const live = migrateCall(mo, xmlOf(v), { vmi: v });
    const paused = migrateCall(mo, xmlOf(v), { vmi: v, pauseGuest: true });
    expect(live.flags & (Vir.MIGRATE_LIVE | Vir.MIGRATE_POSTCOPY | Vir.MIGRATE_AUTO_CONVERGE)).toBe(
      Vir.MIGRATE_LIVE | Vir.MIGRATE_POSTCOPY | Vir.MIGRATE_AUTO_CONVERGE,
    );
    expect(paused.flags).toBe(Vir.MIGRATE_PEER2PEER | Vir.MIGRATE_PERSIST_DEST | Vir.MIGRATE_NON_SHARED_INC);
    expect(paused.params).toEqual(live.params);
  });
});

describe('migration data size (completion timeout)', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kvlm-eph-'));
    await mkdir(path.join(dir, 'disk-data', 'root'), { recursive: true });
    await writeFile(path.join(dir, 'disk-data', 'root', 'disk.qcow2'), Buffer.alloc(3_000_000));
    await writeFile(path.join(dir, 'other'), Buffer.alloc(1_000));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  test('the ephemeral disks count only for a block migration (upstream getVMIMigrationDataSize)', async () => {
    const bytes = await ephemeralDisksBytes(dir);
    expect(bytes).toBe(3_001_000);
    expect(await ephemeralDisksBytes(path.join(dir, 'missing'))).toBe(0);
    // 1Gi = 1.07 GB -> 2; plus 3 MB still 2; plus 1 GB -> 3
    expect(migrationDataGB(vmi('LiveMigration'), bytes)).toBe(2);
    expect(migrationDataGB(vmi('BlockMigration'), bytes)).toBe(2);
    expect(migrationDataGB(vmi('BlockMigration'), 1e9)).toBe(3);
    expect(migrationDataGB(vmi('LiveMigration'), 1e9)).toBe(2);
  });
});
