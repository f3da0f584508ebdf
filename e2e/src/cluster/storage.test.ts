// The storage add-on (deploy/addons/storage/) on the real nodes: Rancher's local-path-provisioner built from its Go
// module and its busybox helper image, both from tools/images/build.sh and imported by `tools/cluster.sh
// load-images` (nothing pulled: every Pod here says imagePullPolicy Never or IfNotPresent on a local name). A claim
// without a class gets the default class local-path, binds when its Pod is scheduled, and is a directory on the node
// that the Pod (as uid 107, virt-launcher's qemu) writes into; deleting the claim removes the volume and the
// directory. local-path-shared gives ReadWriteMany on the shared-filesystem path; local-path refuses it.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { REPO, waitFor } from '../launcher/helpers.js';
import {
  IMAGES_JSON,
  clusterGate,
  getJson,
  kubectl,
  kubectlIn,
  kubectlTry,
  nodeNames,
  onNode,
} from './cluster.js';

const { reason, clusterTest, requireCluster } = clusterGate();
const ADDON = path.join(REPO, 'deploy/addons/storage');
const SYSTEM_NS = 'local-path-storage';
const NS = `e2e-storage-${process.pid}`;
const HELPER = 'localhost/kubevirt-ts/local-path-helper:v0.0.30';
type Obj = Record<string, any>;

/** a claim: no storageClassName unless `cls` names one */
const claim = (name: string, accessMode: string, cls?: string): Obj => ({
  apiVersion: 'v1',
  kind: 'PersistentVolumeClaim',
  metadata: { name, namespace: NS },
  spec: {
    accessModes: [accessMode],
    resources: { requests: { storage: '16Mi' } },
    ...(cls ? { storageClassName: cls } : {}),
  },
});

/** a Pod of the helper image (busybox sh) that runs `script` with the claim at /data, as uid 107 */
const shPod = (name: string, claimName: string, script: string, nodeName?: string): Obj => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: NS },
  spec: {
    ...(nodeName ? { nodeName } : {}),
    restartPolicy: 'Never',
    securityContext: { runAsUser: 107, runAsGroup: 107, runAsNonRoot: true },
    containers: [
      {
        name: 'sh',
        image: HELPER,
        imagePullPolicy: 'Never',
        command: ['/bin/sh', '-c', script],
        volumeMounts: [{ name: 'data', mountPath: '/data' }],
      },
    ],
    volumes: [{ name: 'data', persistentVolumeClaim: { claimName } }],
  },
});

const apply = (...objs: Obj[]): void => {
  kubectlIn(JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objs }), 'apply', '-f', '-');
};
const podPhase = (name: string): string | undefined => getJson('pod', '-n', NS, name)?.status?.phase;
const succeeded = (name: string): Promise<true> =>
  waitFor(
    `Pod ${name} Succeeded`,
    () => {
      const phase = podPhase(name);
      if (phase === 'Failed') throw new Error(`Pod ${name} failed: ${kubectl('logs', '-n', NS, name)}`);
      return phase === 'Succeeded' || undefined;
    },
    120_000,
    500,
  );
/** the bound claim's volume */
const boundVolume = (name: string): Promise<Obj> =>
  waitFor(
    `claim ${name} Bound`,
    () => {
      const pvc = getJson('pvc', '-n', NS, name);
      return pvc?.status?.phase === 'Bound' ? getJson('pv', pvc.spec.volumeName) : undefined;
    },
    120_000,
    500,
  );
/** the volume's directory as the root namespace sees it: a node-local one through its node's mount namespace */
const volumeDir = (pv: Obj): string => {
  const node: string | undefined =
    pv.spec.nodeAffinity?.required.nodeSelectorTerms[0].matchExpressions[0].values[0];
  return node ? onNode(node, pv.spec.hostPath.path) : pv.spec.hostPath.path;
};
/** deletes Pod and claim, then waits until the provisioner removed the volume and its directory on the node */
async function deleteAndGone(pod: string[], claimName: string, pv: Obj): Promise<void> {
  for (const p of pod) kubectl('delete', 'pod', '-n', NS, p, '--wait=true', '--timeout=120s');
  kubectl('delete', 'pvc', '-n', NS, claimName, '--wait=true', '--timeout=120s');
  await waitFor(`volume ${pv.metadata.name} deleted`, () => !getJson('pv', pv.metadata.name), 120_000, 500);
  expect(existsSync(volumeDir(pv))).toBe(false);
}

describe(`storage add-on: local-path-provisioner (${reason ? `skipped: ${reason}` : 'tools/cluster.sh'})`, () => {
  requireCluster();
  let config: Obj;

  beforeAll(() => {
    if (reason) return;
    kubectlTry('delete', 'namespace', NS, '--wait=true', '--timeout=120s');
  });
  afterAll(() => {
    if (reason) return;
    // the add-on stays (the cluster's default StorageClass); the test's namespace goes, volumes with its claims
    kubectlTry('delete', 'namespace', NS, '--wait=true', '--timeout=180s');
  });

  clusterTest(
    'kubectl apply -f deploy/addons/storage/: the provisioner runs the loaded image, local-path is the one default class',
    async () => {
      kubectl('apply', '-f', ADDON);
      kubectl('rollout', 'status', '-n', SYSTEM_NS, 'deployment/local-path-provisioner', '--timeout=180s');
      const pods = getJson<{ items: Obj[] }>(
        'pod',
        '-n',
        SYSTEM_NS,
        '-l',
        'app.kubernetes.io/name=local-path-provisioner',
      )!.items.filter((p) => !p.metadata.deletionTimestamp && p.status.phase === 'Running');
      expect(pods.length).toBe(1);
      // the exact archive tools/images/build.sh made: the manifest digest images.json records
      const images = JSON.parse(readFileSync(IMAGES_JSON, 'utf8')).images;
      const status = pods[0]!.status.containerStatuses[0];
      expect(status.image).toBe('localhost/kubevirt-ts/local-path-provisioner:v0.0.30');
      expect(status.imageID).toBe(
        `localhost/kubevirt-ts/local-path-provisioner@${images['local-path-provisioner'].digest}`,
      );
      expect(images['local-path-helper'].image).toBe(HELPER);

      const classes = getJson<{ items: Obj[] }>('storageclass')!.items;
      const defaults = classes
        .filter((c) => c.metadata.annotations?.['storageclass.kubernetes.io/is-default-class'] === 'true')
        .map((c) => c.metadata.name);
      expect(defaults).toEqual(['local-path']);
      const byName = Object.fromEntries(classes.map((c) => [c.metadata.name, c]));
      expect(byName['local-path'].provisioner).toBe('rancher.io/local-path');
      expect(byName['local-path'].volumeBindingMode).toBe('WaitForFirstConsumer');
      expect(byName['local-path-shared'].provisioner).toBe('rancher.io/local-path');

      config = JSON.parse(getJson('configmap', '-n', SYSTEM_NS, 'local-path-config')!.data['config.json']);
      kubectl('create', 'namespace', NS);
    },
  );

  clusterTest(
    'a claim without a class binds on its Pod, the file lands in the node directory, deleting the claim removes it',
    async () => {
      const base: string = config.storageClassConfigs['local-path'].nodePathMap[0].paths[0];
      apply(
        claim('data', 'ReadWriteOnce'),
        shPod('writer', 'data', 'echo "written by $(id -u)" > /data/hello.txt && ls -ln /data'),
      );
      // the class was filled in by the DefaultStorageClass admission
      expect(getJson('pvc', '-n', NS, 'data')!.spec.storageClassName).toBe('local-path');
      const pv = await boundVolume('data');
      await succeeded('writer');

      expect(pv.spec.storageClassName).toBe('local-path');
      expect(pv.spec.accessModes).toEqual(['ReadWriteOnce']);
      expect(pv.spec.persistentVolumeReclaimPolicy).toBe('Delete');
      // node-local: pinned to the node the Pod was scheduled to
      expect(pv.spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0]).toEqual({
        key: 'kubernetes.io/hostname',
        operator: 'In',
        values: [getJson('pod', '-n', NS, 'writer')!.spec.nodeName],
      });
      const dir: string = pv.spec.hostPath.path;
      expect(path.dirname(dir)).toBe(base);
      expect(path.basename(dir)).toBe(`${pv.metadata.name}_${NS}_data`);
      expect(readFileSync(path.join(volumeDir(pv), 'hello.txt'), 'utf8')).toBe('written by 107\n');

      await deleteAndGone(['writer'], 'data', pv);
      // no helper Pod left behind
      expect(
        getJson<{ items: Obj[] }>('pod', '-n', SYSTEM_NS, '-l', 'app.kubernetes.io/name=local-path-helper')!
          .items,
      ).toEqual([]);
    },
  );

  clusterTest(
    'local-path-shared: a ReadWriteMany claim, written by a Pod on the first node and read by one on the last',
    async () => {
      const base: string = config.storageClassConfigs['local-path-shared'].sharedFileSystemPath;
      apply(claim('shared', 'ReadWriteMany', 'local-path-shared'));
      const pv = await boundVolume('shared'); // Immediate: no Pod needed
      expect(pv.spec.accessModes).toEqual(['ReadWriteMany']);
      expect(pv.spec.nodeAffinity).toBeUndefined();
      expect(path.dirname(pv.spec.hostPath.path)).toBe(base);
      const nodes = nodeNames();
      apply(shPod('one', 'shared', 'echo one > /data/one.txt', nodes[0]));
      await succeeded('one');
      apply(shPod('two', 'shared', 'cat /data/one.txt && echo two > /data/two.txt', nodes.at(-1)));
      await succeeded('two');
      expect(kubectl('logs', '-n', NS, 'two')).toBe('one\n');
      expect(readFileSync(path.join(pv.spec.hostPath.path, 'two.txt'), 'utf8')).toBe('two\n');
      await deleteAndGone(['one', 'two'], 'shared', pv);
    },
  );

  clusterTest(
    'local-path refuses ReadWriteMany: the claim stays Pending with the provisioner’s reason',
    async () => {
      apply(claim('rwx', 'ReadWriteMany'), shPod('rwx-user', 'rwx', 'true'));
      const event = await waitFor(
        'a ProvisioningFailed event on claim rwx',
        () =>
          getJson<{ items: Obj[] }>(
            'events',
            '-n',
            NS,
            '--field-selector',
            'involvedObject.name=rwx,reason=ProvisioningFailed',
          )!.items[0],
        120_000,
        500,
      );
      expect(event.message).toMatch(/NodePath only supports ReadWriteOnce and ReadWriteOncePod/);
      expect(getJson('pvc', '-n', NS, 'rwx')!.status.phase).toBe('Pending');
      expect(podPhase('rwx-user')).toBe('Pending');
      kubectl('delete', 'pod', '-n', NS, 'rwx-user', '--wait=true', '--timeout=120s');
      kubectl('delete', 'pvc', '-n', NS, 'rwx', '--wait=true', '--timeout=120s');
    },
  );
});
