// A small density check on the real node (issue 33's CI part; the figures are bench:density's job, not this test's):
// 10 VMIs of the tiny test guest created at once. Correctness only: every VMI Running with its guest's ready line,
// no launcher Pod restarted or OOM-killed, none Failed; after the delete nothing is left (no launcher Pod, QEMU,
// or mount under a launcher Pod's dir).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { READY, REPO, processesMentioning, waitFor } from '../launcher/helpers.js';
import {
  SerialLog,
  clusterGate,
  deployKubevirtTs,
  getJson,
  kubectlIn,
  kubectlTry,
  mountsUnder,
} from './cluster.js';

const { reason, clusterTest, requireCluster } = clusterGate();
const NS = 'e2e-density';
const N = 10;
const SLOW = 900_000;
type Obj = Record<string, any>;

/** examples/vm-tiny.yaml's VMI template (its pod network too) as a VMI named `name` */
function vmiManifest(name: string): string {
  const vm = readFileSync(path.join(REPO, 'examples/vm-tiny.yaml'), 'utf8');
  const spec = vm.slice(vm.indexOf('    spec:\n'));
  // the VM template's spec, four spaces in: the VMI's spec
  const vmiSpec = spec
    .split('\n')
    .map((l) => l.replace(/^ {4}/, ''))
    .join('\n');
  return `apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata:\n  name: ${name}\n  namespace: ${NS}\n  labels:\n    density: e2e\n${vmiSpec}`;
}

describe(`density: ${N} VMIs at once (${reason ? `skipped: ${reason}` : 'tools/cluster.sh'})`, () => {
  requireCluster();
  const serials: SerialLog[] = [];
  afterAll(() => {
    for (const s of serials) s.stop();
    if (!reason) kubectlTry('delete', 'namespace', NS, '--wait=false');
  });

  clusterTest(
    `${N} tiny VMIs created at once: all Running with the guest's ready line, no restart or OOM kill; delete leaves nothing`,
    async () => {
      await deployKubevirtTs();
      kubectlTry('create', 'namespace', NS);
      const names = Array.from({ length: N }, (_, i) => `dens-${i}`);
      kubectlIn(names.map(vmiManifest).join('\n---\n'), 'create', '-f', '-');
      const vmis = await waitFor(
        `${N} VMIs Running`,
        () => {
          const items = (getJson<{ items: Obj[] }>('vmi', '-n', NS, '-l', 'density=e2e')?.items ??
            []) as Obj[];
          const failed = items.filter((v) => v.status?.phase === 'Failed');
          if (failed.length) throw new Error(`VMIs Failed: ${failed.map((v) => v.metadata.name).join(', ')}`);
          return items.length === N && items.every((v) => v.status?.phase === 'Running') ? items : undefined;
        },
        SLOW,
        1000,
      );
      for (const v of vmis) serials.push(SerialLog.ofVmi(v));
      await waitFor(`${N} guests ready`, () => serials.every((s) => s.text.includes(READY)), SLOW, 1000);
      const pods = (getJson<{ items: Obj[] }>('pods', '-n', NS)?.items ?? []) as Obj[];
      expect(pods).toHaveLength(N);
      for (const p of pods)
        for (const c of p.status.containerStatuses ?? []) {
          expect({ pod: p.metadata.name, container: c.name, restarts: c.restartCount }).toEqual({
            pod: p.metadata.name,
            container: c.name,
            restarts: 0,
          });
          expect(c.lastState?.terminated?.reason).not.toBe('OOMKilled');
        }
      const podUids = pods.map((p) => p.metadata.uid as string);

      kubectlTry('delete', 'vmi', '-n', NS, '-l', 'density=e2e', '--wait=true', '--timeout=300s');
      await waitFor(
        'every launcher Pod gone',
        () => ((getJson<{ items: Obj[] }>('pods', '-n', NS)?.items ?? []).length === 0 ? true : undefined),
        SLOW,
        1000,
      );
      await waitFor(
        'no QEMU of these VMIs',
        async () => ((await processesMentioning(`guest=${NS}_dens-`)).length === 0 ? true : undefined),
        120_000,
        1000,
      );
      for (const uid of podUids) expect({ uid, mounts: mountsUnder(uid) }).toEqual({ uid, mounts: [] });
    },
    SLOW,
  );
});
