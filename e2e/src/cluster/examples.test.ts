// examples/ on the real node (issue 30: each example whose devices kubevirt-ts implements runs there): every file
// is classified here, so a new example must say whether it runs. Each runnable one is applied as a user would
// (`kubectl apply -f examples/<file>`, in a namespace of its own instead of `default`), several at once, in batches
// the node's CPUs take; every VMI it makes reaches Running and, for the kernel-boot test guest, prints its ready line
// on the serial console; no launcher container restarted. Then the namespaces are deleted and nothing is left (a
// local-block volume an example used is wiped and Available again). A claim that cannot bind fails its example after
// a minute with the scheduler's or virt-controller's reason, instead of holding the batch for the whole wait.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { READY, REPO, waitFor } from '../launcher/helpers.js';
import {
  SerialLog,
  applyStorageAddon,
  blockVolumes,
  clusterGate,
  deployKubevirtTs,
  getJson,
  kubectlIn,
  kubectlTry,
} from './cluster.js';

const { reason, clusterTest, requireCluster } = clusterGate();
const SLOW = 900_000;
type Obj = Record<string, any>;

/** runnable examples: the VMIs each one makes, and whether its guest prints the ready line */
const RUNS: Record<string, { vmis: number; ready: boolean }> = {
  'vm-tiny.yaml': { vmis: 1, ready: true },
  'vm-instancetype.yaml': { vmis: 1, ready: true },
  'vmi-cloud-init-nocloud.yaml': { vmis: 1, ready: true },
  'vmi-cloud-init-configdrive.yaml': { vmis: 1, ready: true },
  'vmi-disk-buses.yaml': { vmis: 1, ready: true },
  'vmi-network-masquerade.yaml': { vmis: 1, ready: true },
  'vmi-network-bridge.yaml': { vmis: 1, ready: true },
  'vmi-network-passt.yaml': { vmis: 1, ready: true },
  'vmi-console-vnc.yaml': { vmis: 1, ready: true },
  'vmi-efi.yaml': { vmis: 1, ready: true },
  'vmi-cpu-model.yaml': { vmis: 1, ready: true },
  'vmipreset-small.yaml': { vmis: 1, ready: true },
  'vmirs-tiny.yaml': { vmis: 2, ready: true },
  'vmpool-tiny.yaml': { vmis: 2, ready: true },
  // a local-path (Filesystem) and a local-block (Block) claim: the storage add-on and tools/cluster.sh's block volumes
  'vm-persistent-volumes.yaml': { vmis: 1, ready: true },
  // OVMF with Secure Boot and SMM starts; the blank test disk has nothing it may boot
  'vmi-secure-boot.yaml': { vmis: 1, ready: false },
};
/** not run here, and why */
const NOT_RUN: Record<string, string> = {
  'vm-fedora.yaml': 'pulls quay.io/containerdisks/fedora (no registry here) and needs ~2Gi',
  'vmim-fedora.yaml': 'migrates vm-fedora (a Fedora guest: too heavy under TCG here)',
  'vmim-tiny.yaml': 'a migration of vm-tiny: migration.test.ts migrates that VM on the two nodes',
  'migrationpolicy.yaml': 'applies to migrations: needs a second node',
  'vmi-tiny.yaml': "standalone virt-launcher's example (image kubevirt-ts/test-guest)",
  'vm-multiple-nics.yaml': 'Multus secondary networks are not implemented (refused at network set-up)',
  'vmi-hugepages.yaml': 'needs free 2 MiB huge pages on the node',
};

const EXAMPLES = path.join(REPO, 'examples');
/**
 * VMIs at once (the examples in two batches): each launcher Pod requests 120m of CPU, far below the nodes' allocatable;
 * the bound is the machine's 2 cores booting the guests under TCG well within the wait
 */
const BATCH = 10;
/** how long a claim that cannot bind may hold an example up before the test fails with the reason */
const CLAIM_GRACE = 60_000;
/** virt-controller's reasons for a VMI whose claims cannot be used yet (packages/virt-controller-core claims.ts) */
const CLAIM_REASONS = ['FailedPvcNotFound', 'PVCNotReady', 'PVCVolumeModeMismatch'];
const nsOf = (file: string) => `ex-${file.replace(/\.yaml$/, '').replace(/[^a-z0-9-]/g, '-')}`.slice(0, 63);

test('every example is classified: runs on the node, or a reason why not', () => {
  const files = readdirSync(EXAMPLES).filter((f) => f.endsWith('.yaml'));
  expect(files.filter((f) => !(f in RUNS) && !(f in NOT_RUN))).toEqual([]);
  expect([...Object.keys(RUNS), ...Object.keys(NOT_RUN)].filter((f) => !files.includes(f))).toEqual([]);
});

describe(`examples/ on the node (${reason ? `skipped: ${reason}` : 'tools/cluster.sh'})`, () => {
  requireCluster();

  clusterTest(
    'deploy/ applied, the storage add-on (local-path) and the block volumes (local-block) there',
    async () => {
      await deployKubevirtTs();
      applyStorageAddon();
      blockVolumes();
    },
    SLOW,
  );

  // in batches of at most BATCH VMIs
  const batches: string[][] = [[]];
  let inBatch = 0;
  for (const [file, want] of Object.entries(RUNS)) {
    if (inBatch + want.vmis > BATCH) {
      batches.push([]);
      inBatch = 0;
    }
    batches.at(-1)!.push(file);
    inBatch += want.vmis;
  }
  clusterTest(
    "a claim no volume can satisfy (vm-persistent-volumes.yaml's Block claim at 1Gi; the volumes are 128 MiB) stops the wait with the scheduler's reason",
    async () => {
      const ns = 'ex-claim-too-large';
      const written = readFileSync(path.join(EXAMPLES, 'vm-persistent-volumes.yaml'), 'utf8');
      const manifest = written
        .replace(/^(\s*)namespace: default$/gm, `$1namespace: ${ns}`)
        .replace(/(volumeMode: Block\n(?:.*\n)*? +storage: )128Mi$/m, '$11Gi');
      expect(manifest).toMatch(/volumeMode: Block\n(?:.*\n)*? +storage: 1Gi$/m);
      kubectlTry('create', 'namespace', ns);
      try {
        kubectlIn(manifest, 'apply', '-n', ns, '-f', '-');
        const why = await waitFor(
          'the claim reported as the trouble',
          // the claim can never bind: a short grace (the batches' is for claims that are still binding)
          () => claimTrouble(ns, 15_000),
          15_000 + 180_000,
          2000,
        );
        expect(why).toMatch(/^launcher Pod \S+ unschedulable for its volumes: .*persistent volumes to bind/);
      } finally {
        kubectlTry('delete', 'namespace', ns, '--wait=false');
      }
      await waitFor(`namespace ${ns} gone`, () => !getJson('namespace', ns), 300_000, 2000);
    },
    SLOW,
  );

  for (const batch of batches)
    clusterTest(
      `applied as written (in its own namespace): its VMIs Running, the guests ready: ${batch.join(', ')}`,
      () => runBatch(batch),
      SLOW,
    );
});

/** what the cluster shows of the examples' namespaces: each VMI's phase and node, each Pod's phase and why */
function stateOf(namespaces: string[]): string {
  const out: string[] = [];
  for (const ns of namespaces) {
    for (const v of (getJson<{ items: Obj[] }>('vmi', '-n', ns)?.items ?? []) as Obj[])
      out.push(
        `vmi ${ns}/${v.metadata.name}: ${v.status?.phase ?? '-'} on ${v.status?.nodeName ?? '-'} ${JSON.stringify(
          (v.status?.conditions ?? [])
            .filter((c: Obj) => c.status !== 'True')
            .map((c: Obj) => c.reason ?? c.type),
        )}`,
      );
    for (const p of (getJson<{ items: Obj[] }>('pods', '-n', ns)?.items ?? []) as Obj[])
      out.push(
        `pod ${ns}/${p.metadata.name}: ${p.status?.phase} on ${p.spec.nodeName ?? '-'} ${JSON.stringify(
          [...(p.status?.conditions ?? []), ...(p.status?.containerStatuses ?? [])]
            .map((c: Obj) => c.message ?? c.state?.waiting?.reason ?? c.state?.terminated?.reason)
            .filter(Boolean),
        )}`,
      );
  }
  return out.join('\n');
}

/**
 * Why an example's claims keep it from starting, once that has lasted `grace`: a launcher Pod the scheduler
 * cannot place for its volumes (a claim larger than every free volume of its class, or an unbound claim of an
 * Immediate class), or a VMI virt-controller holds back for a claim (missing, not bound, wrong volume mode); else
 * undefined. So a claim that never binds fails the test with the reason instead of holding it for the whole wait.
 */
function claimTrouble(ns: string, grace = CLAIM_GRACE): string | undefined {
  const old = (t: string | undefined) => t !== undefined && Date.now() - Date.parse(t) > grace;
  for (const p of (getJson<{ items: Obj[] }>('pods', '-n', ns)?.items ?? []) as Obj[]) {
    const c = (p.status?.conditions ?? []).find(
      (x: Obj) => x.type === 'PodScheduled' && x.status === 'False',
    );
    if (c && /persistent ?volume/i.test(c.message ?? '') && old(c.lastTransitionTime))
      return `launcher Pod ${p.metadata.name} unschedulable for its volumes: ${c.message}`;
  }
  for (const v of (getJson<{ items: Obj[] }>('vmi', '-n', ns)?.items ?? []) as Obj[]) {
    const c = (v.status?.conditions ?? []).find(
      (x: Obj) => x.type === 'Synchronized' && x.status === 'False' && CLAIM_REASONS.includes(x.reason),
    );
    if (c && old(c.lastTransitionTime)) return `VMI ${v.metadata.name}: ${c.reason}: ${c.message}`;
  }
  return undefined;
}

/** applies each example of `files` in its namespace, waits for its VMIs Running and guests ready, then deletes */
async function runBatch(files: string[]): Promise<void> {
  const serials: SerialLog[] = [];
  const namespaces = files.map(nsOf);
  try {
    for (const file of files) {
      const ns = nsOf(file);
      kubectlTry('create', 'namespace', ns);
      const manifest = readFileSync(path.join(EXAMPLES, file), 'utf8').replace(
        /^(\s*)namespace: default$/gm,
        `$1namespace: ${ns}`,
      );
      kubectlIn(manifest, 'apply', '-n', ns, '-f', '-');
    }
    const running = await waitFor(
      `the VMIs of ${files.join(', ')} Running`,
      () => {
        const out: Record<string, Obj[]> = {};
        for (const file of files) {
          const items = (getJson<{ items: Obj[] }>('vmi', '-n', nsOf(file))?.items ?? []) as Obj[];
          const failed = items.filter((v) => v.status?.phase === 'Failed');
          if (failed.length) throw new Error(`${file}: VMI ${failed[0]!.metadata.name} Failed`);
          const trouble = claimTrouble(nsOf(file));
          if (trouble) throw new Error(`${file}: ${trouble}`);
          if (items.length !== RUNS[file]!.vmis || !items.every((v) => v.status?.phase === 'Running'))
            return undefined;
          out[file] = items;
        }
        return out;
      },
      480_000,
      2000,
    ).catch((e: unknown) => {
      throw new Error(`${String(e)}\n${stateOf(namespaces)}`);
    });
    const ready: [string, SerialLog][] = [];
    for (const [file, items] of Object.entries(running))
      for (const v of items) {
        const s = SerialLog.ofVmi(v);
        serials.push(s);
        if (RUNS[file]!.ready) ready.push([`${file} ${v.metadata.name}`, s]);
      }
    await waitFor(
      'the guests ready',
      () => ready.every(([, s]) => s.text.includes(READY)),
      300_000,
      1000,
    ).catch((e: unknown) => {
      throw new Error(
        `${String(e)}; not ready: ${ready
          .filter(([, s]) => !s.text.includes(READY))
          .map(([n]) => n)
          .join(', ')}\n${stateOf(namespaces)}`,
      );
    });
    for (const ns of namespaces)
      for (const p of (getJson<{ items: Obj[] }>('pods', '-n', ns)?.items ?? []) as Obj[])
        for (const c of p.status.containerStatuses ?? [])
          expect({ pod: p.metadata.name, container: c.name, restarts: c.restartCount }).toEqual({
            pod: p.metadata.name,
            container: c.name,
            restarts: 0,
          });
  } finally {
    for (const s of serials) s.stop();
    for (const ns of namespaces) kubectlTry('delete', 'namespace', ns, '--wait=false');
  }
  await waitFor(
    `the namespaces of ${files.join(', ')} gone (launcher Pods, VMIs, VMs)`,
    () => namespaces.every((ns) => !getJson('namespace', ns)),
    300_000,
    2000,
  );
  // their claims went with them: a local-block volume is then Released (Retain), wiped and made Available again
  const held = (): string[] =>
    ((getJson<{ items: Obj[] }>('pv')?.items ?? []) as Obj[])
      .filter((pv) => namespaces.includes(pv.spec.claimRef?.namespace) && pv.status?.phase === 'Bound')
      .map((pv) => pv.metadata.name);
  await waitFor(
    `the volumes of ${files.join(', ')} released`,
    () => held().length === 0,
    120_000,
    1000,
  ).catch((e: unknown) => {
    throw new Error(`${String(e)}: ${held().join(', ')}`);
  });
  blockVolumes();
}
