// The claim checks of the VMI controller, on claims, StorageClasses and DataVolumes given as plain objects (the
// apiserver suite, pvc.apiserver.test.ts, runs the same through a real kube-apiserver).
import type { Vmi } from './common.js';
import {
  REASON_PVC_NOT_FOUND,
  REASON_PVC_NOT_READY,
  REASON_PVC_VOLUME_MODE,
  cachedClaims,
  checkClaims,
  claimVolumes,
  desiredVolumeStatus,
  persistentVolumeClaimInfo,
  trimPvc,
  usesClaim,
  type ClaimLookup,
  type DataVolume,
  type Pvc,
  type StorageClass,
} from './claims.js';

const NS = 'ns1';

function vmi(volumes: unknown[], disks: unknown[] = []): Vmi {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: 'v', namespace: NS, uid: 'u' },
    spec: { domain: { devices: { disks } }, volumes },
  } as unknown as Vmi;
}

function pvc(
  name: string,
  extra: { phase?: string; mode?: string; class?: string; owner?: string } = {},
): Pvc {
  return {
    metadata: {
      name,
      namespace: NS,
      ...(extra.owner
        ? {
            ownerReferences: [
              {
                apiVersion: 'cdi.kubevirt.io/v1beta1',
                kind: 'DataVolume',
                name: extra.owner,
                uid: 'd',
                controller: true,
              },
            ],
          }
        : {}),
    },
    spec: {
      accessModes: ['ReadWriteOnce'],
      resources: { requests: { storage: '1Gi' } },
      ...(extra.mode ? { volumeMode: extra.mode } : {}),
      ...(extra.class !== undefined ? { storageClassName: extra.class } : {}),
    },
    status:
      extra.phase === 'Bound'
        ? { phase: 'Bound', capacity: { storage: '2Gi' } }
        : { phase: extra.phase ?? 'Pending' },
  };
}

function lookup(
  pvcs: Pvc[],
  classes: Record<string, string> = {},
  dvs: Record<string, string> = {},
): ClaimLookup & { reads: string[] } {
  const reads: string[] = [];
  return {
    reads,
    pvc: (ns, name) => pvcs.find((p) => p.metadata?.namespace === ns && p.metadata?.name === name),
    storageClass: (name) => {
      reads.push(`sc/${name}`);
      return Promise.resolve(
        name in classes
          ? ({ metadata: { name }, volumeBindingMode: classes[name] } as StorageClass)
          : undefined,
      );
    },
    dataVolume: (ns, name) => {
      reads.push(`dv/${ns}/${name}`);
      return Promise.resolve(
        name in dvs
          ? ({ metadata: { name, namespace: ns }, status: { phase: dvs[name] } } as DataVolume)
          : undefined,
      );
    },
  };
}

describe('claimVolumes', () => {
  it('lists persistentVolumeClaim, ephemeral and dataVolume volumes with the field naming the claim', () => {
    const v = vmi([
      { name: 'a', persistentVolumeClaim: { claimName: 'c-a' } },
      { name: 'b', containerDisk: { image: 'x' } },
      { name: 'c', ephemeral: { persistentVolumeClaim: { claimName: 'golden' } } },
      { name: 'd', dataVolume: { name: 'dv-d', hotpluggable: true } },
    ]);
    expect(claimVolumes(v)).toEqual([
      {
        volume: 'a',
        claimName: 'c-a',
        field: 'spec.volumes[0].persistentVolumeClaim.claimName',
        source: 'persistentVolumeClaim',
        hotpluggable: false,
      },
      {
        volume: 'c',
        claimName: 'golden',
        field: 'spec.volumes[2].ephemeral.persistentVolumeClaim.claimName',
        source: 'ephemeral',
        hotpluggable: false,
      },
      {
        volume: 'd',
        claimName: 'dv-d',
        field: 'spec.volumes[3].dataVolume.name',
        source: 'dataVolume',
        hotpluggable: true,
      },
    ]);
    expect(usesClaim(v, 'golden')).toBe(true);
    expect(usesClaim(v, 'x')).toBe(false);
  });
});

describe('checkClaims', () => {
  it('ready: every claim Bound; the volume modes for the renderer (unset stays unset: Filesystem)', async () => {
    const v = vmi([
      { name: 'a', persistentVolumeClaim: { claimName: 'blk' } },
      { name: 'b', dataVolume: { name: 'fs' } },
      { name: 'c', ephemeral: { persistentVolumeClaim: { claimName: 'plain' } } },
    ]);
    const r = await checkClaims(
      v,
      lookup([
        pvc('blk', { phase: 'Bound', mode: 'Block' }),
        pvc('fs', { phase: 'Bound', mode: 'Filesystem' }),
        pvc('plain', { phase: 'Bound' }),
      ]),
    );
    expect(r).toEqual({
      ready: true,
      claims: {
        blk: { volumeMode: 'Block' },
        fs: { volumeMode: 'Filesystem' },
        plain: { volumeMode: undefined },
      },
      waitingForFirstConsumer: [],
    });
  });

  it('a missing claim: FailedPvcNotFound naming the field and the claim', async () => {
    const r = await checkClaims(
      vmi([{ name: 'a', persistentVolumeClaim: { claimName: 'nope' } }]),
      lookup([]),
    );
    expect(r).toMatchObject({ ready: false, reason: REASON_PVC_NOT_FOUND });
    expect(!r.ready && r.message).toBe(
      'spec.volumes[0].persistentVolumeClaim.claimName: PersistentVolumeClaim ns1/nope does not exist; waiting for it to be created',
    );
    expect(!r.ready && r.recheckMs).toBeUndefined(); // a claim event wakes the VMI
  });

  it('a dataVolume volume without claim: says whether the DataVolume exists', async () => {
    const v = vmi([{ name: 'a', dataVolume: { name: 'dv1' } }]);
    const none = await checkClaims(v, lookup([]));
    expect(none).toMatchObject({ ready: false, reason: REASON_PVC_NOT_FOUND });
    expect(!none.ready && none.message).toBe(
      'spec.volumes[0].dataVolume.name: neither DataVolume ns1/dv1 nor a PersistentVolumeClaim of that name exists; waiting for one of them to be created',
    );
    const importing = await checkClaims(v, lookup([], {}, { dv1: 'Pending' }));
    expect(!importing.ready && importing.message).toMatch(
      /^spec\.volumes\[0\]\.dataVolume\.name: the PersistentVolumeClaim of DataVolume ns1\/dv1 does not exist yet \(DataVolume phase Pending\)/,
    );
  });

  it('WaitForFirstConsumer: a Pending claim does not hold the Pod (the Pod is its consumer)', async () => {
    const look = lookup([pvc('lp', { class: 'local-path', mode: 'Block' })], {
      'local-path': 'WaitForFirstConsumer',
    });
    const r = await checkClaims(vmi([{ name: 'a', persistentVolumeClaim: { claimName: 'lp' } }]), look);
    expect(r).toEqual({
      ready: true,
      claims: { lp: { volumeMode: 'Block' } },
      waitingForFirstConsumer: ['lp'],
    });
    expect(look.reads).toEqual(['sc/local-path']);
  });

  it('Immediate, no class, a missing class, Lost: the Pod waits until the claim binds (PVCNotReady)', async () => {
    const v = vmi([{ name: 'a', persistentVolumeClaim: { claimName: 'c' } }]);
    const imm = await checkClaims(v, lookup([pvc('c', { class: 'fast' })], { fast: 'Immediate' }));
    expect(imm).toMatchObject({ ready: false, reason: REASON_PVC_NOT_READY });
    expect(!imm.ready && imm.message).toMatch(
      /ns1\/c is Pending, not Bound; its StorageClass fast binds at once/,
    );
    const unset = await checkClaims(v, lookup([pvc('c', { class: 'fast' })], { fast: '' }));
    expect(!unset.ready && unset.message).toMatch(/volumeBindingMode Immediate/);
    const noClass = await checkClaims(v, lookup([pvc('c', { class: '' })]));
    expect(!noClass.ready && noClass.message).toMatch(
      /no StorageClass: waiting for a matching PersistentVolume/,
    );
    const gone = await checkClaims(v, lookup([pvc('c', { class: 'missing' })]));
    expect(gone).toMatchObject({ ready: false, reason: REASON_PVC_NOT_READY, recheckMs: 30_000 });
    expect(!gone.ready && gone.message).toMatch(/its StorageClass missing does not exist/);
    const lost = await checkClaims(v, lookup([pvc('c', { phase: 'Lost' })]));
    expect(!lost.ready && lost.message).toMatch(/is Lost/);
  });

  it('a claim of a DataVolume waits for the DataVolume to succeed (upstream: Succeeded or PendingPopulation)', async () => {
    const v = vmi([{ name: 'a', dataVolume: { name: 'dv1' } }]);
    const claims = [pvc('dv1', { phase: 'Bound', owner: 'dv1' })];
    const importing = await checkClaims(v, lookup(claims, {}, { dv1: 'ImportInProgress' }));
    expect(importing).toMatchObject({ ready: false, reason: REASON_PVC_NOT_READY });
    expect(!importing.ready && importing.recheckMs).toBeUndefined(); // a DataVolume event wakes the VMI
    expect(!importing.ready && importing.message).toBe(
      'spec.volumes[0].dataVolume.name: DataVolume ns1/dv1 is in phase ImportInProgress; waiting until it is Succeeded',
    );
    expect((await checkClaims(v, lookup(claims, {}, { dv1: 'Succeeded' }))).ready).toBe(true);
    expect((await checkClaims(v, lookup(claims, {}, { dv1: 'PendingPopulation' }))).ready).toBe(true);
    const wffc = await checkClaims(v, lookup(claims, {}, { dv1: 'WaitForFirstConsumer' }));
    expect(!wffc.ready && wffc.message).toMatch(/waits for its first consumer: a temporary Pod binds/);
    expect(!wffc.ready && wffc.firstConsumer).toBe(true);
    expect(!importing.ready && importing.firstConsumer).toBeUndefined();
    // the DataVolume garbage-collected after its import: the claim stands alone
    expect((await checkClaims(v, lookup(claims))).ready).toBe(true);
  });

  it('hotplugged volumes do not hold the Pod', async () => {
    const r = await checkClaims(
      vmi([{ name: 'a', persistentVolumeClaim: { claimName: 'later', hotpluggable: true } }]),
      lookup([]),
    );
    expect(r).toEqual({ ready: true, claims: {}, waitingForFirstConsumer: [] });
  });

  it('a lun on a Filesystem claim: refused naming the disk (a Block claim is fine)', async () => {
    const v = vmi(
      [
        { name: 'ok', persistentVolumeClaim: { claimName: 'blk' } },
        { name: 'bad', persistentVolumeClaim: { claimName: 'fs' } },
      ],
      [
        { name: 'ok', lun: {} },
        { name: 'bad', lun: { bus: 'scsi' } },
      ],
    );
    const r = await checkClaims(
      v,
      lookup([
        pvc('blk', { phase: 'Bound', mode: 'Block' }),
        pvc('fs', { phase: 'Bound', mode: 'Filesystem' }),
      ]),
    );
    expect(r).toMatchObject({ ready: false, reason: REASON_PVC_VOLUME_MODE });
    expect(!r.ready && r.message).toBe(
      'spec.domain.devices.disks[1].lun: a lun passes a block device through, but PersistentVolumeClaim ns1/fs (spec.volumes[1].persistentVolumeClaim.claimName) has volumeMode Filesystem; use a Block claim or a disk',
    );
  });
});

describe('volume status', () => {
  it("persistentVolumeClaimInfo: upstream's fields from the claim", () => {
    const p = pvc('c', { phase: 'Bound', mode: 'Filesystem' });
    p.spec!.accessModes = ['ReadWriteMany'];
    p.metadata!.annotations = { 'cdi.kubevirt.io/storage.preallocation': 'true' };
    expect(persistentVolumeClaimInfo(p)).toEqual({
      claimName: 'c',
      accessModes: ['ReadWriteMany'],
      volumeMode: 'Filesystem',
      capacity: { storage: '2Gi' },
      requests: { storage: '1Gi' },
      preallocated: true,
      filesystemOverhead: '0.055',
    });
    expect(persistentVolumeClaimInfo(pvc('b', { mode: 'Block' }))).toEqual({
      claimName: 'b',
      accessModes: ['ReadWriteOnce'],
      volumeMode: 'Block',
      requests: { storage: '1Gi' },
      filesystemOverhead: '0',
    });
  });

  it("an entry per volume, sorted; the handler's fields and entries kept; claim info replaced", () => {
    const v = vmi([
      { name: 'z', persistentVolumeClaim: { claimName: 'c-z' } },
      { name: 'cd', containerDisk: { image: 'x' } },
      { name: 'eph', ephemeral: { persistentVolumeClaim: { claimName: 'golden' } } },
      { name: 'dv', dataVolume: { name: 'dv1' } },
      { name: 'gone', persistentVolumeClaim: { claimName: 'not-cached' } },
    ]);
    v.status = {
      volumeStatus: [
        {
          name: 'z',
          target: 'vda',
          persistentVolumeClaimInfo: { claimName: 'c-z', accessModes: ['ReadOnlyMany'] },
        },
        { name: 'gone', target: 'vdc', persistentVolumeClaimInfo: { claimName: 'not-cached' } },
        { name: 'hot', target: 'sda', phase: 'Ready' },
      ],
    };
    const claims = [
      pvc('c-z', { phase: 'Bound', mode: 'Block' }),
      pvc('dv1', { phase: 'Bound' }),
      pvc('golden', { phase: 'Bound' }),
    ];
    const got = desiredVolumeStatus(v, (ns, n) =>
      claims.find((p) => p.metadata?.namespace === ns && p.metadata?.name === n),
    );
    expect(got).toEqual([
      { name: 'cd' },
      {
        name: 'dv',
        persistentVolumeClaimInfo: {
          claimName: 'dv1',
          accessModes: ['ReadWriteOnce'],
          capacity: { storage: '2Gi' },
          requests: { storage: '1Gi' },
          filesystemOverhead: '0.055',
        },
      },
      { name: 'eph' }, // upstream reports no claim for an ephemeral volume
      { name: 'gone', target: 'vdc', persistentVolumeClaimInfo: { claimName: 'not-cached' } },
      { name: 'hot', target: 'sda', phase: 'Ready' },
      {
        name: 'z',
        target: 'vda',
        persistentVolumeClaimInfo: {
          claimName: 'c-z',
          accessModes: ['ReadWriteOnce'],
          volumeMode: 'Block',
          capacity: { storage: '2Gi' },
          requests: { storage: '1Gi' },
          filesystemOverhead: '0',
        },
      },
    ]);
    expect(desiredVolumeStatus(vmi([]), () => undefined)).toBeUndefined();
  });

  it('cachedClaims: the modes for a target Pod, or the claim the cache lacks', () => {
    const v = vmi([
      { name: 'a', persistentVolumeClaim: { claimName: 'blk' } },
      { name: 'b', dataVolume: { name: 'dv1' } },
    ]);
    const claims = [pvc('blk', { phase: 'Bound', mode: 'Block' })];
    const get = (ns: string, n: string) =>
      claims.find((p) => p.metadata?.namespace === ns && p.metadata?.name === n);
    expect(cachedClaims(v, get).missing?.field).toBe('spec.volumes[1].dataVolume.name');
    claims.push(pvc('dv1', { phase: 'Bound' }));
    expect(cachedClaims(v, get)).toEqual({
      claims: { blk: { volumeMode: 'Block' }, dv1: { volumeMode: undefined } },
    });
  });

  it('trimPvc keeps what the controller reads and drops the rest', () => {
    const full = {
      ...pvc('c', { phase: 'Bound', mode: 'Block', class: 'local-path' }),
      metadata: {
        name: 'c',
        namespace: NS,
        uid: 'u1',
        resourceVersion: '7',
        labels: { a: 'b' },
        annotations: {
          'kubectl.kubernetes.io/last-applied-configuration': '{"big":"json"}',
          'cdi.kubevirt.io/storage.thick-provisioned': 'true',
        },
      },
    } as Pvc;
    expect(trimPvc(full)).toEqual({
      apiVersion: undefined,
      kind: undefined,
      metadata: {
        name: 'c',
        namespace: NS,
        uid: 'u1',
        resourceVersion: '7',
        annotations: { 'cdi.kubevirt.io/storage.thick-provisioned': 'true' },
      },
      spec: {
        accessModes: ['ReadWriteOnce'],
        volumeMode: 'Block',
        storageClassName: 'local-path',
        resources: { requests: { storage: '1Gi' } },
      },
      status: { phase: 'Bound', capacity: { storage: '2Gi' } },
    });
  });
});
