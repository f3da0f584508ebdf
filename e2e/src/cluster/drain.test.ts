// `kubectl drain` of a node running VMs (tools/cluster.sh up --nodes 2; issue 31). Two VMs of examples/vm-tiny.yaml
// run on the same node: `live` has no eviction strategy of its own and the KubeVirt CR's cluster-wide
// `evictionStrategy: LiveMigrate` applies, so the eviction of its launcher Pod is refused and turned into a
// migration (the drain retries until the Pod is gone); `restart` says `evictionStrategy: None`, so its launcher Pod
// is evicted (the guest shut down) and RunStrategy Always starts it again on the other node. The drain completes;
// `kubectl uncordon` makes the node schedulable again. Runs only when the cluster is up with two nodes.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { READY, waitFor } from '../launcher/helpers.js';
import {
  KUBECONFIG,
  KUBECTL,
  SerialLog,
  beats,
  deployKubevirtTs,
  getJson,
  kubectl,
  kubectlIn,
  kubectlTry,
  nodeNames,
  patchKubeVirt,
  tinyVmManifest,
  twoNodeGate,
} from './cluster.js';

const { reason, requireCluster, clusterTest } = twoNodeGate('drain');
const twoNodes = nodeNames().length >= 2;
const NS = 'default';
const SLOW = 900_000;
type Obj = Record<string, any>;

/** examples/vm-tiny.yaml as VM `name`, with `evictionStrategy` when given */
function vmManifest(name: string, evictionStrategy?: string): string {
  let vm = tinyVmManifest(name);
  if (evictionStrategy)
    vm = vm.replace(
      /^( +)terminationGracePeriodSeconds: 30$/m,
      `$&\n$1evictionStrategy: ${evictionStrategy}`,
    );
  expect(vm).toContain(`kubevirt.io/vm: ${name}`);
  if (evictionStrategy) expect(vm).toContain(`evictionStrategy: ${evictionStrategy}`);
  return vm;
}

const vmiOf = (name: string): Obj | undefined => getJson('vmi', '-n', NS, name);
const launcherPodsOn = (node: string): Obj[] =>
  (getJson('pods', '-n', NS, '-l', 'kubevirt.io=virt-launcher', '--field-selector', `spec.nodeName=${node}`)
    ?.items ?? []) as Obj[];

describe(`kubectl drain of a node with VMs (${reason ? `skipped: ${reason}` : 'tools/cluster.sh'})`, () => {
  requireCluster();
  const serials: SerialLog[] = [];
  const follow = (vmi: Obj): SerialLog => {
    const s = SerialLog.ofVmi(vmi);
    serials.push(s);
    return s;
  };
  const [node1, node2] = nodeNames();
  let live: Obj, restart: Obj; // the VMIs before the drain
  let liveSerial: SerialLog;

  afterAll(() => {
    for (const s of serials) s.stop();
    if (reason || !twoNodes) return;
    for (const n of nodeNames()) kubectlTry('uncordon', n);
    for (const vm of ['live', 'restart'])
      kubectlTry('delete', 'vm', '-n', NS, vm, '--ignore-not-found', '--wait=true', '--timeout=300s');
    kubectlTry(
      'patch',
      'kubevirt',
      'kubevirt',
      '-n',
      'kubevirt-ts',
      '--type',
      'merge',
      '-p',
      JSON.stringify({ spec: { configuration: { evictionStrategy: null } } }),
    );
  });

  clusterTest(
    'two VMs on one node: one under the cluster-wide LiveMigrate strategy, one with evictionStrategy None',
    async () => {
      await deployKubevirtTs();
      patchKubeVirt({ evictionStrategy: 'LiveMigrate' });
      // both on node 1: node 2 cordoned while they start
      kubectl('cordon', node2!);
      try {
        kubectlIn(`${vmManifest('live')}\n---\n${vmManifest('restart', 'None')}`, 'apply', '-f', '-');
        [live, restart] = await Promise.all(
          ['live', 'restart'].map((n) =>
            waitFor(
              `VMI ${n} Running`,
              () => {
                const v = vmiOf(n);
                return v?.status?.phase === 'Running' ? v : undefined;
              },
              SLOW,
              1000,
            ),
          ),
        );
      } finally {
        kubectl('uncordon', node2!);
      }
      expect([live!.status.nodeName, restart!.status.nodeName]).toEqual([node1, node1]);
      liveSerial = follow(live!);
      const restartSerial = follow(restart!);
      await waitFor(
        'both guests ready',
        () => liveSerial.text.includes(READY) && restartSerial.text.includes(READY),
        SLOW,
        1000,
      );
      await waitFor('heartbeats of live', () => beats(liveSerial.text).length >= 2, 120_000, 500);
    },
    SLOW,
  );

  clusterTest(
    'kubectl drain completes: live migrated without a reboot, restart started again on the other node, no launcher Pod left on the node',
    async () => {
      const t0 = Date.now();
      const drain = await promisify(execFile)(
        KUBECTL,
        [
          '--kubeconfig',
          KUBECONFIG,
          'drain',
          node1!,
          '--ignore-daemonsets',
          '--delete-emptydir-data',
          '--timeout=600s',
        ],
        { encoding: 'utf8', maxBuffer: 16 << 20 },
      );
      console.log(`kubectl drain ${node1}: ${(Date.now() - t0) / 1000} s\n${drain.stdout}${drain.stderr}`);
      // the eviction of live's launcher Pod was refused (turned into a migration), restart's Pod evicted
      expect(drain.stdout + drain.stderr).toMatch(/Eviction triggered evacuation of VMI/);
      expect(drain.stdout).toMatch(/drained/);
      expect(getJson('node', node1!)!.spec.unschedulable).toBe(true);
      expect(launcherPodsOn(node1!)).toEqual([]);

      // live: the same VMI on node 2, migrated by an evacuation migration, the guest did not reboot
      const moved = vmiOf('live')!;
      expect(moved.metadata.uid).toBe(live.metadata.uid);
      expect(moved.status.phase).toBe('Running');
      expect(moved.status.nodeName).toBe(node2);
      expect(moved.status.migrationState).toMatchObject({
        completed: true,
        sourceNode: node1,
        targetNode: node2,
      });
      expect(moved.status.migrationState.failed).toBeFalsy();
      const vmims = (getJson('vmim', '-n', NS)?.items ?? []) as Obj[];
      const evac = vmims.find((m) => m.metadata.uid === moved.status.migrationState.migrationUid);
      expect(evac?.metadata.annotations?.['kubevirt.io/evacuationMigration']).toBe(node1);
      expect(evac?.status.phase).toBe('Succeeded');
      const after = follow(moved);
      await waitFor('heartbeats of live on node 2', () => beats(after.text).length >= 2, 120_000, 500);
      expect(after.text).not.toContain(READY);
      // its heartbeat counter goes on from where the source's log ended (a reboot would start it again)
      expect(beats(after.text)[0]!).toBeGreaterThan(beats(liveSerial.text).at(-1)!);

      // restart: a new VMI, Running on node 2, its guest booted there
      const again = await waitFor(
        'a new VMI of restart Running',
        () => {
          const v = vmiOf('restart');
          return v?.metadata.uid !== restart.metadata.uid && v?.status?.phase === 'Running' ? v : undefined;
        },
        SLOW,
        1000,
      );
      expect(again.status.nodeName).toBe(node2);
      const s = follow(again);
      await waitFor('restart booted on node 2', () => s.text.includes(READY), SLOW, 1000);
    },
    SLOW,
  );

  clusterTest(
    'kubectl uncordon: the node is schedulable again',
    async () => {
      kubectl('uncordon', node1!);
      expect(getJson('node', node1!)!.spec.unschedulable).toBeFalsy();
      await waitFor(
        `${node1} labelled kubevirt.io/schedulable=true`,
        () => getJson('node', node1!)?.metadata.labels['kubevirt.io/schedulable'] === 'true',
        120_000,
        500,
      );
      // a migration back lands there
      const m = JSON.parse(
        kubectlIn(
          JSON.stringify({
            apiVersion: 'kubevirt.io/v1',
            kind: 'VirtualMachineInstanceMigration',
            metadata: { generateName: 'live-back-', namespace: NS },
            spec: { vmiName: 'live' },
          }),
          'create',
          '-f',
          '-',
          '-o',
          'json',
        ),
      ).metadata.name as string;
      await waitFor(
        `migration ${m} Succeeded`,
        () => getJson('vmim', '-n', NS, m)?.status?.phase === 'Succeeded',
        SLOW,
        1000,
      );
      await waitFor('live back on node 1', () => vmiOf('live')?.status?.nodeName === node1, 120_000, 500);
    },
    SLOW,
  );
});
