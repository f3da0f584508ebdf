// CDI (the Containerized Data Importer, deploy/addons/cdi/: v1.58.0 built from its Go module by tools/cdi/build-cdi.sh,
// images by tools/images/build.sh, operator manifest and CR from CDI's own generator) on the real cluster (issue 32):
// DataVolumes on the storage add-on's default class local-path.
// - an import over HTTP (a qcow2 served by busybox httpd from a Pod of the test namespace) ends Succeeded, `kubectl get
//   dv` prints PROGRESS 100.0%, and the claim holds disk.img: raw, the image's content (CDI converts with qemu-img);
// - a blank DataVolume ends Succeeded with a sparse raw disk.img;
// - CDI's own Pods run the loaded images and do not restart; everything of the test is deleted at the end.
// A clone (host-assisted: local-path has no CSI clone) and an import answered 404 (CDI retries, the DataVolume's
// Running condition names the 404) are tested through VMs, in vm-datavolume.test.ts.
// The DataVolumes carry CDI's `cdi.kubevirt.io/storage.bind.immediate.requested` annotation: local-path binds on the
// first consumer and CDI's HonorWaitForFirstConsumer gate is on (as upstream's release CR), so CDI would wait for a
// consumer (a VM's temporary provisioning Pod); with the annotation CDI's importer Pod is the consumer (deploy/README.md).
import { execFileSync } from 'node:child_process';
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import path from 'node:path';
import { waitFor } from '../launcher/helpers.js';
import { CDI_NS, deployCdi, diskHttpServer } from './cdi.js';
import { clusterGate, getJson, kubectl, kubectlIn, kubectlTry, onNode } from './cluster.js';

const { reason, clusterTest, requireCluster } = clusterGate();
const NS = 'e2e-cdi';
const SERVER = 'disk-server';
const MARKER = `KVTS-CDI-MARKER ${Date.now().toString(16)}`;
const IMAGE_MIB = 16;
const SLOW = 900_000;
const IMAGE_PREFIX = 'localhost/kubevirt-ts/cdi-';
type Obj = Record<string, any>;

function dataVolume(name: string, source: Obj, size: string): string {
  return JSON.stringify({
    apiVersion: 'cdi.kubevirt.io/v1beta1',
    kind: 'DataVolume',
    metadata: {
      name,
      namespace: NS,
      annotations: { 'cdi.kubevirt.io/storage.bind.immediate.requested': 'true' },
    },
    // no class, no access mode: the default class local-path and its StorageProfile (20-storageprofiles.yaml)
    spec: { source, storage: { resources: { requests: { storage: size } } } },
  });
}
const dv = (name: string): Obj | undefined => getJson('dv', '-n', NS, name);
/** waits for the DataVolume's phase; fails at once when it reaches `Failed` */
async function phase(name: string, want: string): Promise<Obj> {
  return waitFor(
    `DataVolume ${name} ${want}`,
    () => {
      const d = dv(name);
      if (d?.status?.phase === 'Failed' && want !== 'Failed')
        throw new Error(`DataVolume ${name} Failed: ${JSON.stringify(d.status)}`);
      return d?.status?.phase === want ? d : undefined;
    },
    SLOW,
    1_000,
  );
}
/** the claim's disk.img as the root namespace reads it (local-path: a directory on the PV's node) */
function diskImage(claim: string): { node: string; file: string } {
  const pvc = getJson('pvc', '-n', NS, claim)!;
  expect(pvc.status.phase).toBe('Bound');
  const pv = getJson('pv', pvc.spec.volumeName)!;
  const node: string = pv.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].values[0];
  return { node, file: path.join(onNode(node, pv.spec.hostPath.path), 'disk.img') };
}
function head(file: string, n: number): Buffer {
  const fd = openSync(file, 'r');
  try {
    const b = Buffer.alloc(n);
    const got = readSync(fd, b, 0, n, 0);
    return b.subarray(0, got);
  } finally {
    closeSync(fd);
  }
}
function qemuImgInfo(file: string): Obj {
  return JSON.parse(execFileSync('qemu-img', ['info', '--output=json', file], { encoding: 'utf8' }));
}
/** CDI's own Pods: name -> restart count (all Running and Ready) */
function cdiPods(): Record<string, number> {
  const pods = getJson<{ items: Obj[] }>('pod', '-n', CDI_NS)!.items.filter(
    (p) => !p.metadata.deletionTimestamp,
  );
  const out: Record<string, number> = {};
  for (const p of pods) {
    expect({ pod: p.metadata.name, phase: p.status.phase }).toEqual({
      pod: p.metadata.name,
      phase: 'Running',
    });
    for (const c of p.status.containerStatuses) {
      expect(c.image.startsWith(IMAGE_PREFIX)).toBe(true);
      out[`${p.metadata.name}/${c.name}`] = c.restartCount;
    }
  }
  return out;
}

describe(`CDI add-on: DataVolumes on local-path (${reason ? `skipped: ${reason}` : 'tools/cluster.sh'})`, () => {
  requireCluster();
  let base: string;
  let restarts: Record<string, number>;

  beforeAll(async () => {
    if (reason) return;
    kubectlTry('delete', 'namespace', NS, '--wait=true', '--timeout=300s');
    const seconds = await deployCdi();
    console.log(`CDI deployed (or found Available) in ${seconds.toFixed(0)} s`);
    kubectl('create', 'namespace', NS);
    base = await diskHttpServer(NS, SERVER, MARKER, IMAGE_MIB);
  }, SLOW * 2);
  afterAll(() => {
    if (reason) return;
    kubectlTry('delete', 'namespace', NS, '--wait=true', '--timeout=300s');
  }, SLOW);

  clusterTest("CDI's operator deployed its components from the loaded images; they run", () => {
    const cr = getJson('cdi', 'cdi')!;
    expect(cr.status.phase).toBe('Deployed');
    expect(cr.status.observedVersion).toBe('v1.58.0');
    restarts = cdiPods();
    const names = Object.keys(restarts).join(' ');
    for (const c of ['cdi-operator', 'cdi-apiserver', 'cdi-deployment', 'cdi-uploadproxy'])
      expect(names).toContain(c);
    // the StorageProfile of the default class: what a DataVolume without access mode gets
    const sp = getJson('storageprofile', 'local-path')!;
    expect(sp.status.claimPropertySets).toEqual([
      { accessModes: ['ReadWriteOnce'], volumeMode: 'Filesystem' },
    ]);
  });

  clusterTest(
    'an HTTP import of a qcow2 ends Succeeded, kubectl get dv shows 100.0%, the claim holds it as raw disk.img',
    async () => {
      kubectlIn(dataVolume('imported', { http: { url: `${base}/disk.qcow2` } }, '64Mi'), 'apply', '-f', '-');
      const d = await phase('imported', 'Succeeded');
      expect(d.status.progress).toBe('100.0%');
      const table = kubectl('get', 'dv', '-n', NS, 'imported');
      expect(table.split('\n')[0]).toMatch(/^NAME\s+PHASE\s+PROGRESS\s+RESTARTS\s+AGE/);
      // RESTARTS: a qcow2 needs scratch space; CDI's importer exits asking for it and runs again (restartCount 1)
      expect(table.split('\n')[1]).toMatch(/^imported\s+Succeeded\s+100\.0%\s+\d+\s+/);
      const imported = diskImage('imported');
      const info = qemuImgInfo(imported.file);
      expect(info.format).toBe('raw');
      // CDI resizes the raw image to the claim's usable size (the request less the filesystem overhead)
      expect(info['virtual-size']).toBeGreaterThanOrEqual(IMAGE_MIB * 1024 * 1024);
      expect(info['virtual-size']).toBeLessThanOrEqual(64 * 1024 * 1024);
      expect(head(imported.file, MARKER.length + 1).toString()).toBe(`${MARKER}\n`);
      console.log(
        `imported: ${imported.file} on ${imported.node}, ${info['virtual-size']} bytes, ${statSync(imported.file).blocks * 512} allocated`,
      );
    },
    SLOW,
  );

  clusterTest(
    'a blank DataVolume ends Succeeded with a sparse raw disk.img',
    async () => {
      kubectlIn(dataVolume('blank', { blank: {} }, '32Mi'), 'apply', '-f', '-');
      await phase('blank', 'Succeeded');
      const { file } = diskImage('blank');
      const info = qemuImgInfo(file);
      expect(info.format).toBe('raw');
      expect(info['virtual-size']).toBeGreaterThan(16 * 1024 * 1024);
      expect(info['virtual-size']).toBeLessThanOrEqual(32 * 1024 * 1024);
      expect(statSync(file).blocks * 512).toBeLessThan(1024 * 1024);
      expect(head(file, 4096).every((b) => b === 0)).toBe(true);
    },
    SLOW,
  );

  clusterTest(
    "deleting the DataVolumes deletes their claims and CDI's Pods for them; CDI's own Pods did not restart",
    async () => {
      kubectl('delete', 'dv', '-n', NS, '--all', '--wait=true', '--timeout=300s');
      await waitFor(
        'no claim and no CDI Pod left in the namespace',
        () => {
          const pvcs = getJson<{ items: Obj[] }>('pvc', '-n', NS)!.items;
          const pods = getJson<{ items: Obj[] }>('pod', '-n', NS)!.items.filter(
            (p) => p.metadata.name !== SERVER,
          );
          return pvcs.length === 0 && pods.length === 0;
        },
        300_000,
        1_000,
      );
      expect(cdiPods()).toEqual(restarts);
    },
    SLOW,
  );
});
