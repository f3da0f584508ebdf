// VMs with dataVolumeTemplates through the cluster and the CDI add-on (deploy/addons/cdi, issue 32): virt-controller
// creates the DataVolumes (owned by the VM), the VM shows `Provisioning` while CDI imports a qcow2 image over HTTP
// (served by a Pod in the test namespace) and fills a `blank` one, then runs; the guest reads the marker the image
// carries (kvts.marker) and sees both disks. A second VM clones the first one's claim (host-assisted clone) and its
// guest reads what the first guest wrote. An import whose URL answers 404 leaves the VM `DataVolumeError`, with CDI's
// reason and message in the VM's `DataVolumesReady` condition, no launcher Pod, and CDI retrying (`kubectl get dv`
// counts the restarts; the DataVolume's Running condition names the 404). Deleting a VM deletes its
// DataVolumes and their claims (garbage collector).
import { READY, waitFor } from '../launcher/helpers.js';
import {
  clusterGate,
  deployKubevirtTs,
  getJson,
  kubectl,
  kubectlIn,
  kubectlTry,
  launcherPodsIn,
  launcherPodsOfVmi,
  runningVmiIn,
  serialLine,
  SerialLog,
} from './cluster.js';
import { cloneTest, deployCdi, diskHttpServer } from './cdi.js';

const { reason, clusterTest, requireCluster } = clusterGate();
const NS = 'e2e-vm-dv';
const SLOW = 600_000;
/** what the served image holds in its first block: the guest's marker format (tools/guest kvts.marker) */
const IMPORTED = 'boot=40 id=imported';
type Obj = Record<string, any>;

/** A DataVolume template of `storage` 64Mi (the default class: local-path) with `source`. */
const template = (name: string, source: Obj): Obj => ({
  metadata: { name },
  spec: { source, storage: { resources: { requests: { storage: '64Mi' } } } },
});

/**
 * examples/vm-tiny.yaml's guest (kernel boot, 128Mi, no network) as VM `name` with one virtio disk per template
 * (serial = the template's name), each a `dataVolume` volume; the guest prints its disks and reads/writes the marker
 * on the disk whose serial is `marker`.
 */
function dvVm(name: string, templates: Obj[], marker: string): Obj {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachine',
    metadata: { name, namespace: NS },
    spec: {
      runStrategy: 'Always',
      dataVolumeTemplates: templates,
      template: {
        metadata: { labels: { 'kubevirt.io/vm': name } },
        spec: {
          terminationGracePeriodSeconds: 30,
          domain: {
            cpu: { cores: 1 },
            resources: { requests: { memory: '128Mi' } },
            firmware: {
              kernelBoot: {
                kernelArgs: `console=ttyS0 quiet kvts.disks kvts.marker=${marker}`,
                container: {
                  image: 'localhost/kubevirt-ts/guest-kernel-boot:latest',
                  imagePullPolicy: 'IfNotPresent',
                  kernelPath: '/boot/vmlinuz',
                  initrdPath: '/boot/initramfs.img',
                },
              },
            },
            devices: {
              autoattachGraphicsDevice: false,
              autoattachMemBalloon: false,
              disks: templates.map((t) => ({
                name: t.metadata.name,
                serial: t.metadata.name,
                disk: { bus: 'virtio' },
              })),
            },
          },
          volumes: templates.map((t) => ({ name: t.metadata.name, dataVolume: { name: t.metadata.name } })),
        },
      },
    },
  };
}

const vmOf = (name: string): Obj | undefined => getJson('vm', '-n', NS, name);
const dvOf = (name: string): Obj | undefined => getJson('dv', '-n', NS, name);

/** Polls the VM's printableStatus every 200 ms until `until` holds: the distinct statuses seen, in order. */
async function statusesUntil(vm: string, until: (v: Obj | undefined) => boolean): Promise<string[]> {
  const seen: string[] = [];
  await waitFor(
    `VM ${vm}`,
    () => {
      const v = vmOf(vm);
      const s = v?.status?.printableStatus;
      if (s && seen[seen.length - 1] !== s) seen.push(s);
      return until(v);
    },
    SLOW,
    200,
  );
  return seen;
}

describe(`VMs with dataVolumeTemplates and CDI (${reason ? `skipped: ${reason}` : 'tools/cluster.sh'})`, () => {
  requireCluster();
  const serials: SerialLog[] = [];
  let url = '';
  let written = '';
  const follow = (v: Obj) => {
    const s = SerialLog.ofVmi(v);
    serials.push(s);
    return s;
  };

  beforeAll(async () => {
    if (reason) return;
    kubectlTry('delete', 'namespace', NS, '--wait=true', '--timeout=180s');
    await deployKubevirtTs();
    console.log(`CDI deployed (or already there) in ${(await deployCdi()).toFixed(1)} s`);
    kubectl('create', 'namespace', NS);
    url = await diskHttpServer(NS, 'images', `KVTS-MARKER ${IMPORTED}`);
  }, SLOW);
  afterAll(() => {
    for (const s of serials) s.stop();
    if (!reason) kubectlTry('delete', 'namespace', NS, '--wait=true', '--timeout=300s');
  });

  clusterTest(
    'import over HTTP + blank: DataVolumes owned by the VM, Provisioning while CDI works, then Running; the guest reads the imported marker',
    async () => {
      const t0 = Date.now();
      const created = JSON.parse(
        kubectlIn(
          JSON.stringify(
            dvVm(
              'imported',
              [
                template('root-data', { http: { url: `${url}/disk.qcow2` } }),
                template('scratch', { blank: {} }),
              ],
              'root-data',
            ),
          ),
          'create',
          '-f',
          '-',
          '-o',
          'json',
        ),
      );
      const seen = await statusesUntil('imported', (v) => v?.status?.printableStatus === 'Running');
      expect(seen).toContain('Provisioning');
      expect(seen.indexOf('Provisioning')).toBeLessThan(seen.indexOf('Running'));
      for (const name of ['root-data', 'scratch']) {
        const dv = dvOf(name)!;
        expect(dv.metadata.ownerReferences).toEqual([
          expect.objectContaining({
            kind: 'VirtualMachine',
            name: 'imported',
            uid: created.metadata.uid,
            controller: true,
          }),
        ]);
        expect(dv.metadata.labels['kubevirt.io/created-by']).toBe(created.metadata.uid);
        expect(dv.status.phase).toBe('Succeeded');
      }
      // `kubectl get dv` as CDI prints it: PHASE and PROGRESS columns
      const table = kubectl('get', 'dv', '-n', NS, 'root-data');
      expect(table).toMatch(/^NAME\s+PHASE\s+PROGRESS\s+RESTARTS\s+AGE/);
      // RESTARTS: CDI restarts an import once when it finds it needs scratch space (a qcow2 over HTTP)
      expect(table).toMatch(/root-data\s+Succeeded\s+100\.0%\s+\d+\s/);
      const vmi = await runningVmiIn(NS, 'imported', undefined, SLOW);
      // local-path binds on the first consumer and CDI waits for one: virt-controller's temporary Pod was it, for both
      // claims at once (so the launcher Pod can be scheduled: both on one node), and is gone
      const events = getJson(
        'events',
        '-n',
        NS,
        '--field-selector',
        `involvedObject.uid=${vmi.metadata.uid}`,
      )!.items;
      const tmp = events.find((e: Obj) => /^Created temporary pod virt-provision-imported-/.test(e.message));
      expect(tmp).toBeDefined();
      expect(getJson('pod', '-n', NS, tmp.message.split(' ')[3])).toBeUndefined();
      const nodes = ['root-data', 'scratch'].map(
        (c) =>
          getJson('pv', getJson('pvc', '-n', NS, c)!.spec.volumeName)!.spec.nodeAffinity.required
            .nodeSelectorTerms[0].matchExpressions[0].values[0],
      );
      expect(nodes).toEqual([vmi.status.nodeName, vmi.status.nodeName]);
      const serial = follow(vmi);
      expect(await serialLine(serial, 'KUBEVIRT-TS-GUEST-MARKER-READ', SLOW)).toBe(IMPORTED);
      written = await serialLine(serial, 'KUBEVIRT-TS-GUEST-MARKER-WRITTEN', SLOW);
      expect(written).toMatch(/^boot=41 id=[0-9a-f]{8}$/);
      await waitFor('guest ready line', () => serial.text.includes(READY), SLOW, 200);
      // both claims reach the guest, each no larger than its 64Mi claim
      for (const name of ['root-data', 'scratch']) {
        const m = new RegExp(`KUBEVIRT-TS-GUEST-DISK name=vd\\w+ bytes=(\\d+) ro=0 serial=${name}`).exec(
          serial.text,
        );
        expect(m).not.toBeNull();
        expect(Number(m![1])).toBeGreaterThan(16 * 2 ** 20);
        expect(Number(m![1])).toBeLessThanOrEqual(64 * 2 ** 20);
      }
      console.log(
        `VM with an imported and a blank DataVolume: Running, marker read, ${Date.now() - t0} ms; statuses ${seen.join(' -> ')}`,
      );
    },
    SLOW,
  );

  cloneTest(reason, clusterTest)(
    "a clone of the stopped VM's claim: the second VM's guest reads what the first guest wrote",
    async () => {
      const t0 = Date.now();
      // CDI clones a claim that no Pod uses: stop the first VM (its guest powers off, the launcher Pod goes)
      kubectl('patch', 'vm', '-n', NS, 'imported', '--type=merge', '-p', '{"spec":{"runStrategy":"Halted"}}');
      await waitFor(
        'the first VM stopped',
        () => vmOf('imported')?.status?.printableStatus === 'Stopped' && launcherPodsIn(NS).length === 0,
        SLOW,
        500,
      );
      kubectlIn(
        JSON.stringify(
          dvVm('cloned', [template('copy', { pvc: { namespace: NS, name: 'root-data' } })], 'copy'),
        ),
        'create',
        '-f',
        '-',
      );
      const seen = await statusesUntil('cloned', (v) => v?.status?.printableStatus === 'Running');
      expect(seen).toContain('Provisioning');
      expect(dvOf('copy')?.status?.phase).toBe('Succeeded');
      const vmi = await runningVmiIn(NS, 'cloned', undefined, SLOW);
      const serial = follow(vmi);
      expect(await serialLine(serial, 'KUBEVIRT-TS-GUEST-MARKER-READ', SLOW)).toBe(written);
      console.log(
        `clone DataVolume -> VM Running with the copied marker: ${Date.now() - t0} ms; statuses ${seen.join(' -> ')}`,
      );
    },
    SLOW,
  );

  clusterTest(
    'an import answered 404: DataVolumeError with CDI reason and message, no launcher Pod, CDI retries',
    async () => {
      const t0 = Date.now();
      kubectlIn(
        JSON.stringify(
          dvVm('missing', [template('gone', { http: { url: `${url}/no-such-image.qcow2` } })], 'gone'),
        ),
        'create',
        '-f',
        '-',
      );
      const vm = await waitFor(
        'DataVolumeError',
        () => {
          const v = vmOf('missing');
          return v?.status?.printableStatus === 'DataVolumeError' ? v : undefined;
        },
        SLOW,
        500,
      );
      const cond = vm.status.conditions.find((c: Obj) => c.type === 'DataVolumesReady');
      expect(cond).toMatchObject({ status: 'False', reason: 'Error' });
      expect(cond.message).toMatch(/^DataVolume gone importer has stopped running due to an error: .*404/);
      // the DataVolume waited for its first consumer: the VMI exists (as upstream) with the temporary provisioning Pod
      // that bound the claim, and waits for the import: no launcher Pod
      const waiting = () => {
        const vmi = getJson('vmi', '-n', NS, 'missing');
        expect(vmi?.status?.phase ?? 'Pending').toBe('Pending');
        if (vmi) expect(launcherPodsOfVmi(NS, vmi.metadata.uid)).toEqual([]);
      };
      waiting();
      // CDI retries the import: its restart count grows
      const restarts = await waitFor(
        'a retried import',
        () => {
          const n = dvOf('gone')?.status?.restartCount ?? 0;
          return n >= 2 ? n : undefined;
        },
        SLOW,
        1000,
      );
      waiting();
      // the DataVolume's own Running condition names the 404 between two attempts (True while a retry runs), and
      // `kubectl get dv` counts the retries
      const running = await waitFor(
        'the Running condition False between two attempts',
        () => {
          const c = dvOf('gone')?.status?.conditions?.find((x: Obj) => x.type === 'Running');
          return c?.status === 'False' ? c : undefined;
        },
        SLOW,
        500,
      );
      expect(`${running.reason} ${running.message}`).toMatch(/404/);
      const row = kubectl('get', 'dv', '-n', NS, 'gone').split('\n')[1]!;
      expect(Number(row.trim().split(/\s+/)[3])).toBeGreaterThanOrEqual(2);
      console.log(`404 import: DataVolumeError, ${restarts} restarts, ${Date.now() - t0} ms`);
    },
    SLOW,
  );

  clusterTest(
    'deleting the VMs deletes their DataVolumes and claims',
    async () => {
      kubectl('delete', 'vm', '-n', NS, '--all', '--wait=true', '--timeout=300s');
      await waitFor(
        'DataVolumes and claims gone',
        () =>
          (getJson('dv', '-n', NS)?.items ?? []).length === 0 &&
          (getJson('pvc', '-n', NS)?.items ?? []).length === 0,
        SLOW,
        1000,
      );
      expect(launcherPodsIn(NS)).toEqual([]);
    },
    SLOW,
  );
});
