// Live migration through the two-node cluster (tools/cluster.sh up --nodes 2; issue 31): the tiny guest of
// examples/vm-tiny.yaml (a containerDisk, the masquerade pod network) moves between the nodes by a
// VirtualMachineInstanceMigration, by our virtctl's `migrate` and by upstream KubeVirt's own virtctl's (v1.1.0,
// tools/build-upstream-virtctl.sh); the guest does not reboot (its heartbeat counter on the serial console goes on
// across the two launcher Pods' logs without a gap) and stays reachable through a Service. Deleting a migration while it runs cancels it; a migration whose target Pod cannot be scheduled (the
// other node cordoned) fails once upstream's pending timeout (shortened by its annotation) passes; the admission
// refuses a migration of a VMI that does not exist and a second one while one is in flight. Deleting the VM leaves
// nothing on either node. Runs only when the cluster is up with two nodes (KVTS_REQUIRE_CLUSTER=1 in CI).
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { READY, REPO, processesMentioning, waitFor } from '../launcher/helpers.js';
import {
  KUBECONFIG,
  KUBECTL,
  SerialLog,
  beats,
  createVmim as createVmimOf,
  expectMigratedWithoutReboot,
  deployKubevirtTs,
  getJson,
  kubectl,
  kubectlIn,
  kubectlTry,
  launcherPodsOfVmi,
  mountsUnder,
  nodeNames,
  nodeOfProcess,
  nodeSchedulable,
  tcpLine,
  tinyVmManifest,
  twoNodeGate,
  vmimFinal,
} from './cluster.js';
import { UPSTREAM_VIRTCTL, UPSTREAM_VIRTCTL_TAG, upstreamVirtctlGate } from './upstream-virtctl-bin.js';

const { reason, requireCluster, clusterTest } = twoNodeGate('migration');
const twoNodes = nodeNames().length >= 2;
// the test of upstream's virtctl also needs its binary (skipped without it; failing under KVTS_REQUIRE_CLUSTER=1)
const upstreamTest = reason || !twoNodes ? clusterTest : upstreamVirtctlGate('migration').upstreamTest;
const NS = 'default';
const VM = 'mig';
const SLOW = 900_000;
const POLICY = 'e2e-slow-migrations';
const VIRTCTL = path.join(REPO, 'packages/virtctl/dist/cli.js');
type Obj = Record<string, any>;

/** examples/vm-tiny.yaml as VM `mig`, labelled for the slow MigrationPolicy, with a Service on its port 8080 */
function manifests(): string {
  const vm = tinyVmManifest(VM, { 'kvts-e2e': 'migration' });
  expect(vm).toContain('kvts-e2e: migration');
  return `${vm}\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: ${VM}\n  namespace: ${NS}\nspec:\n  selector:\n    kubevirt.io/vm: ${VM}\n  ports:\n    - port: 80\n      targetPort: 8080\n`;
}

const vmiNow = () => getJson('vmi', '-n', NS, VM)!;
/** the launcher Pods of the VMI (source and target during a migration) that are not being deleted */
const launcherPods = (uid: string): Obj[] =>
  (getJson('pods', '-n', NS, '-l', `kubevirt.io/created-by=${uid}`)?.items ?? []).filter(
    (p: Obj) => !p.metadata.deletionTimestamp,
  );
const vmimPhase = (name: string): string | undefined => getJson('vmim', '-n', NS, name)?.status?.phase;

/** creates a VMIM of the VM (generateName) with optional annotations, returns its name */
const createVmim = (annotations: Record<string, string> = {}): string => createVmimOf(NS, VM, annotations);

/** waits for a final phase of the VMIM; its conditions in the error when it is not `want` */
async function vmimEnds(name: string, want: 'Succeeded' | 'Failed' | undefined): Promise<Obj> {
  const m = await vmimFinal(NS, name, SLOW);
  if (want) expect({ phase: m.status.phase, conditions: m.status.conditions }).toMatchObject({ phase: want });
  return m;
}

/** a MigrationPolicy for the VM's label that caps the bandwidth, so a migration runs long enough to act on it */
const slowPolicy = () => ({
  apiVersion: 'migrations.kubevirt.io/v1alpha1',
  kind: 'MigrationPolicy',
  metadata: { name: POLICY },
  spec: {
    selectors: { virtualMachineInstanceSelector: { 'kvts-e2e': 'migration' } },
    bandwidthPerMigration: '1Mi',
  },
});

/** the pid of the virt-handler process of a node */
async function handlerPid(node: string): Promise<number> {
  const found = (await processesMentioning('/virt-handler/dist/main.js')).filter(
    (p) => nodeOfProcess(p.pid) === node,
  );
  if (found.length !== 1) throw new Error(`${node}: ${found.length} virt-handler processes`);
  return found[0]!.pid;
}

describe(`Live migration between the two nodes (${reason ? `skipped: ${reason}` : 'tools/cluster.sh'})`, () => {
  requireCluster();
  let vmi: Obj;
  let serial: SerialLog; // the current launcher Pod's serial log
  const serials: SerialLog[] = [];
  const podUids = new Set<string>();
  const follow = (podUid: string) => {
    podUids.add(podUid);
    const s = new SerialLog(podUid, vmi.metadata.uid);
    serials.push(s);
    return s;
  };
  const otherNode = (node: string) => nodeNames().find((n) => n !== node)!;

  afterAll(() => {
    for (const s of serials) s.stop();
    if (reason || !twoNodes) return;
    for (const n of nodeNames()) kubectlTry('uncordon', n);
    kubectlTry('delete', 'migrationpolicy', POLICY, '--ignore-not-found');
    kubectlTry('delete', 'service', '-n', NS, VM, '--ignore-not-found');
    kubectlTry('delete', 'vm', '-n', NS, VM, '--ignore-not-found', '--wait=true', '--timeout=300s');
    // the finished migrations stay after the VMI (as upstream's): the run's own, by the label the admission sets
    kubectlTry('delete', 'vmim', '-n', NS, '-l', `kubevirt.io/vmi-name=${VM}`, '--ignore-not-found');
  });

  clusterTest('deploy/ applied: virt-handler Ready on both nodes', deployKubevirtTs, SLOW);

  clusterTest(
    'the VM runs: LiveMigratable, BlockMigration (its containerDisk is node-local)',
    async () => {
      await waitFor(
        'the VM applied (the admission webhook answers)',
        () => {
          try {
            kubectlIn(manifests(), 'apply', '-f', '-');
            return true;
          } catch (e) {
            if (!/failed calling webhook/.test(String((e as { stderr?: string }).stderr ?? e))) throw e;
            return false;
          }
        },
        120_000,
        2000,
      );
      vmi = await waitFor(
        `VMI ${VM} Running and LiveMigratable`,
        () => {
          const v = getJson('vmi', '-n', NS, VM);
          const ok = v?.status?.conditions?.some(
            (c: Obj) => c.type === 'LiveMigratable' && c.status === 'True',
          );
          return v?.status?.phase === 'Running' && ok ? v : undefined;
        },
        SLOW,
        500,
      );
      expect(vmi.status.migrationMethod).toBe('BlockMigration');
      serial = follow(launcherPods(vmi.metadata.uid)[0]!.metadata.uid);
      await waitFor('guest ready line', () => serial.text.includes(READY), SLOW, 500);
      await waitFor('guest heartbeats', () => beats(serial.text).length >= 2, 120_000, 500);
    },
    SLOW,
  );

  /** checks a completed migration from `source`: the VMI on the other node, one launcher Pod there, no reboot */
  async function migratedFrom(source: string, sourcePodUid: string, name: string): Promise<void> {
    const before = serial;
    const target = otherNode(source);
    // the VMIM is Succeeded once the source launcher reports the migration completed (as upstream); the VMI moves to
    // the target when the source handler sees the target's report of the running domain, which may come later
    const r = await expectMigratedWithoutReboot({
      namespace: NS,
      vmi: VM,
      vmiUid: vmi.metadata.uid,
      source,
      target,
      sourcePodUid,
      before,
      follow,
      timeoutMs: SLOW,
    });
    const { vmi: now, last, first } = r;
    serial = r.serial;
    const missing = first - last - 1;
    const m = getJson('vmim', '-n', NS, name)!;
    const ms = now.status.migrationState;
    console.log(
      `migration ${name}: ${source} -> ${target}, ${(Date.parse(ms.endTimestamp) - Date.parse(ms.startTimestamp)) / 1000} s from start to end (VMIM created ${m.metadata.creationTimestamp}), heartbeats ${last} -> ${first} (${missing} missing)`,
    );
    // reachable through the Service after the move (kube-proxy's rules now point at the target Pod)
    const svc = getJson('service', '-n', NS, VM)!;
    const answer = await waitFor(
      'the guest through its Service',
      () => tcpLine(svc.spec.clusterIP, 80).catch(() => false as const),
      120_000,
      1000,
    );
    expect(answer).toMatch(/^KUBEVIRT-TS-GUEST-TCP /);
  }

  clusterTest(
    'a VirtualMachineInstanceMigration moves the running VM to the other node: no reboot, the Service still answers',
    async () => {
      const source: string = vmi.status.nodeName;
      const sourcePod = launcherPods(vmi.metadata.uid)[0]!.metadata.uid;
      const name = createVmim();
      await vmimEnds(name, 'Succeeded');
      await migratedFrom(source, sourcePod, name);
    },
    SLOW,
  );

  /** `virtctl migrate` (`argv`: the client's command line before `migrate`) moves the VM to the other node */
  async function virtctlMigrates(argv: string[]): Promise<string> {
    const source: string = vmiNow().status.nodeName;
    const sourcePod = launcherPods(vmi.metadata.uid)[0]!.metadata.uid;
    const known = new Set(
      (getJson('vmim', '-n', NS)?.items ?? []).map((m: Obj) => m.metadata.name as string),
    );
    const out = spawnSync(argv[0]!, [...argv.slice(1), 'migrate', VM, '-n', NS], {
      encoding: 'utf8',
      env: { ...process.env, NODE_OPTIONS: '', KUBECONFIG },
    });
    if (out.status !== 0) throw new Error(`virtctl migrate: exit ${out.status}: ${out.stderr}`);
    expect({ status: out.status, stdout: out.stdout, stderr: out.stderr }).toMatchObject({
      status: 0,
      stdout: `VM ${VM} was scheduled to migrate\n`,
    });
    const name = await waitFor(
      'the migration virtctl created',
      () =>
        (getJson('vmim', '-n', NS)?.items ?? [])
          .map((m: Obj) => m.metadata.name as string)
          .find((n: string) => !known.has(n)),
      60_000,
      500,
    );
    await vmimEnds(name, 'Succeeded');
    await migratedFrom(source, sourcePod, name);
    return name;
  }

  clusterTest(
    'virtctl migrate (ours) moves it back',
    async () => void (await virtctlMigrates([process.execPath, VIRTCTL])),
    SLOW,
  );

  // upstream KubeVirt's own virtctl (tools/build-upstream-virtctl.sh): its migrate creates the migration as it does
  // against upstream's virt-api (name kubevirt-migrate-vm-*), and the migration completes
  upstreamTest(
    `virtctl migrate (upstream's ${UPSTREAM_VIRTCTL_TAG}) moves it again`,
    async () => expect(await virtctlMigrates([UPSTREAM_VIRTCTL])).toMatch(/^kubevirt-migrate-vm-/),
    SLOW,
  );

  clusterTest(
    'deleting a running migration cancels it (the VM stays where it was, healthy); a second migration meanwhile is refused',
    async () => {
      // a MigrationPolicy for this VM's label caps the bandwidth, so the migration runs long enough to cancel
      kubectlIn(JSON.stringify(slowPolicy()), 'apply', '-f', '-');
      const node: string = vmiNow().status.nodeName;
      const sourcePod = launcherPods(vmi.metadata.uid)[0]!.metadata.uid;
      const name = createVmim();
      await waitFor(`migration ${name} Running`, () => vmimPhase(name) === 'Running', SLOW, 200);
      expect(vmiNow().status.migrationState.migrationPolicyName).toBe(POLICY);
      // upstream's admitter: one migration of a VMI at a time
      const refused = spawnSync(KUBECTL, ['--kubeconfig', KUBECONFIG, 'create', '-f', '-'], {
        encoding: 'utf8',
        input: JSON.stringify({
          apiVersion: 'kubevirt.io/v1',
          kind: 'VirtualMachineInstanceMigration',
          metadata: { generateName: `${VM}-`, namespace: NS },
          spec: { vmiName: VM },
        }),
      });
      expect(refused.status).not.toBe(0);
      expect(refused.stderr).toContain(`in-flight migration detected. Active migration job (${name})`);

      kubectl('delete', 'vmim', '-n', NS, name, '--wait=true', '--timeout=300s');
      const after = await waitFor(
        'the migration aborted on the VMI',
        () => {
          const ms = vmiNow().status.migrationState;
          return ms?.migrationUid && ms.completed && ms.failed ? vmiNow() : undefined;
        },
        SLOW,
        500,
      );
      expect(after.status.nodeName).toBe(node);
      expect(after.status.phase).toBe('Running');
      expect(after.status.migrationState.abortStatus).toBe('Succeeded');
      await waitFor(
        'only the source launcher Pod left',
        () => {
          const pods = launcherPods(vmi.metadata.uid);
          return pods.length === 1 && pods[0]!.metadata.uid === sourcePod;
        },
        SLOW,
        500,
      );
      const n = beats(serial.text).length;
      await waitFor('heartbeats go on in the source', () => beats(serial.text).length > n + 2, 60_000, 500);
      kubectl('delete', 'migrationpolicy', POLICY);
    },
    SLOW,
  );

  // virt-handler killed (SIGKILL; the kubelet restarts its container) on one side while a slow migration runs: the
  // migration ends either way, Succeeded or Failed, and the VMI is Running on one node with one launcher Pod and one
  // guest, whose heartbeats go on
  for (const side of ['source', 'target'] as const)
    clusterTest(
      `virt-handler killed on the ${side} node during a migration: the migration ends, the VMI is Running with one guest`,
      async () => {
        kubectlIn(JSON.stringify(slowPolicy()), 'apply', '-f', '-');
        try {
          const source: string = vmiNow().status.nodeName;
          const node = side === 'source' ? source : otherNode(source);
          const name = createVmim();
          await waitFor(`migration ${name} Running`, () => vmimPhase(name) === 'Running', SLOW, 200);
          const handler = await handlerPid(node);
          process.kill(handler, 'SIGKILL');
          const m = await vmimEnds(name, undefined);
          const after = await waitFor(
            'the VMI Running on one node, one launcher Pod',
            () => {
              const v = vmiNow();
              const pods = launcherPods(v.metadata.uid);
              return v.status.phase === 'Running' &&
                pods.length === 1 &&
                pods[0]!.spec.nodeName === v.status.nodeName &&
                pods[0]!.status.phase === 'Running'
                ? { v, pod: pods[0]! }
                : undefined;
            },
            SLOW,
            500,
          );
          console.log(
            `virt-handler killed on the ${side} (${node}) during migration ${name}: ${m.status.phase}, the VMI on ${after.v.status.nodeName}`,
          );
          expect(after.v.status.nodeName).toBe(m.status.phase === 'Succeeded' ? otherNode(source) : source);
          expect(after.v.status.migrationState).toMatchObject({
            completed: true,
            failed: m.status.phase === 'Failed',
          });
          // the other side's Pod (a failed target, or the source after a hand-off) may still be terminating: its
          // launcher ends its QEMU within the Pod's grace period; once the Pod object is gone one guest is left
          await waitFor(
            'the other launcher Pod gone',
            () => launcherPodsOfVmi(NS, after.v.metadata.uid).length === 1,
            SLOW,
            500,
          );
          expect(
            (await processesMentioning(`guest=${NS}_${VM},`)).filter((p) => /qemu-system/.test(p.cmd)),
          ).toHaveLength(1);
          const s = after.v.status.nodeName === source ? serial : (serial = follow(after.pod.metadata.uid));
          const n = beats(s.text).length;
          await waitFor('heartbeats go on', () => beats(s.text).length > n + 2, 120_000, 500);
          // the killed handler is back
          await waitFor(`virt-handler on ${node} back`, () => nodeSchedulable(node), 300_000, 1000);
        } finally {
          kubectlTry('delete', 'migrationpolicy', POLICY, '--ignore-not-found');
        }
      },
      SLOW,
    );

  clusterTest(
    'the target node cordoned: the target Pod stays unschedulable, the migration fails after the pending timeout, the source is untouched',
    async () => {
      const node: string = vmiNow().status.nodeName;
      const other = otherNode(node);
      const sourcePod = launcherPods(vmi.metadata.uid)[0]!.metadata.uid;
      kubectl('cordon', other);
      try {
        const name = createVmim({ 'kubevirt.io/migrationUnschedulablePodTimeoutSeconds': '10' });
        const m = await vmimEnds(name, 'Failed');
        expect(m.status.conditions).toEqual(
          expect.arrayContaining([expect.objectContaining({ type: 'Failed', reason: 'TargetPodMissing' })]),
        );
        const events = getJson('events', '-n', NS, '--field-selector', `involvedObject.name=${name}`)!.items;
        expect(events.map((e: Obj) => e.reason)).toEqual(
          expect.arrayContaining(['MigrationTargetPodUnschedulable', 'SuccessfulDelete']),
        );
      } finally {
        kubectl('uncordon', other);
      }
      const now = vmiNow();
      expect(now.status.nodeName).toBe(node);
      expect(now.status.phase).toBe('Running');
      await waitFor(
        'only the source launcher Pod left',
        () => {
          const pods = launcherPods(vmi.metadata.uid);
          return pods.length === 1 && pods[0]!.metadata.uid === sourcePod;
        },
        SLOW,
        500,
      );
      const n = beats(serial.text).length;
      await waitFor('heartbeats go on', () => beats(serial.text).length > n + 2, 60_000, 500);
    },
    SLOW,
  );

  clusterTest('a migration of a VMI that does not exist is refused at admission', () => {
    const r = spawnSync(KUBECTL, ['--kubeconfig', KUBECONFIG, 'create', '-f', '-'], {
      encoding: 'utf8',
      input: JSON.stringify({
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachineInstanceMigration',
        metadata: { generateName: 'nowhere-', namespace: NS },
        spec: { vmiName: 'nowhere' },
      }),
    });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain(`the VMI "${NS}/nowhere" does not exist`);
  });

  clusterTest(
    'deleting the VM leaves nothing on either node',
    async () => {
      kubectl('delete', 'vm', '-n', NS, VM, '--wait=true', '--timeout=300s');
      await waitFor(
        'every launcher Pod of the VM gone',
        () => {
          const all = JSON.stringify(getJson('pods', '-n', NS)?.items ?? []);
          return [...podUids].every((u) => !all.includes(u));
        },
        SLOW,
        500,
      );
      expect(
        (await processesMentioning(`guest=${NS}_${VM},`)).filter((p) => /qemu-system/.test(p.cmd)),
      ).toEqual([]);
      for (const uid of podUids) expect({ uid, mounts: mountsUnder(uid) }).toEqual({ uid, mounts: [] });
    },
    SLOW,
  );
});
