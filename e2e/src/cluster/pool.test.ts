// VirtualMachinePools (pool.kubevirt.io/v1beta1) on the real node, as a user of upstream drives them: kubectl apply,
// kubectl scale vmpool, kubectl get vmpool, kubectl delete. The VMs are Halted (no guest: a pool's VM is an ordinary
// VM, whose start the VM suites show); the garbage collector of the cluster's kube-controller-manager removes a
// deleted pool's VMs through their owner reference.
import { clusterGate, deployKubevirtTs, getJson, kubectl, kubectlIn, kubectlTry } from './cluster.js';
import { waitFor } from '../launcher/helpers.js';

const { reason, clusterTest, requireCluster } = clusterGate();
const NS = 'e2e-pool';
type Obj = Record<string, any>;

const pool = (replicas: number, selector = 'web') => ({
  apiVersion: 'pool.kubevirt.io/v1beta1',
  kind: 'VirtualMachinePool',
  metadata: { name: 'web', namespace: NS },
  spec: {
    replicas,
    selector: { matchLabels: { pool: selector } },
    virtualMachineTemplate: {
      metadata: { labels: { pool: 'web' } },
      spec: {
        runStrategy: 'Halted',
        template: {
          metadata: { labels: { pool: 'web' } },
          spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } } },
        },
      },
    },
  },
});
const vmNames = (): string[] =>
  (getJson<{ items: Obj[] }>('vm', '-n', NS, '-l', 'pool=web')?.items ?? [])
    .filter((v) => !v.metadata.deletionTimestamp)
    .map((v) => v.metadata.name)
    .sort();

describe(`VirtualMachinePools (${reason ? `skipped: ${reason}` : 'tools/cluster.sh'})`, () => {
  requireCluster();

  clusterTest(
    'kubectl apply, scale, get and delete a pool: VMs <pool>-<index>, status, garbage collection',
    async () => {
      await deployKubevirtTs();
      kubectlTry('create', 'namespace', NS);
      // an invalid pool is refused by admission with the field path
      const refused = (() => {
        try {
          kubectlIn(JSON.stringify(pool(1, 'other')), 'apply', '-f', '-');
          return '';
        } catch (e) {
          return String(e);
        }
      })();
      expect(refused).toMatch(/spec\.selector: selector does not match/);

      kubectlIn(JSON.stringify(pool(2)), 'apply', '-f', '-');
      await waitFor('web-0 and web-1', () => JSON.stringify(vmNames()) === '["web-0","web-1"]', 60_000, 250);
      kubectl('scale', 'vmpool', 'web', '-n', NS, '--replicas=3');
      await waitFor('three VMs', () => vmNames().length === 3, 60_000, 250);
      expect(vmNames()).toEqual(['web-0', 'web-1', 'web-2']);
      await waitFor(
        'status replicas 3',
        () => getJson('vmpool', 'web', '-n', NS)?.status?.replicas === 3,
        60_000,
        250,
      );
      expect(kubectl('get', 'vmpool', 'web', '-n', NS)).toMatch(/^web\s+3\s+3\s+0\s+\S+$/m);
      kubectl('scale', 'vmpool', 'web', '-n', NS, '--replicas=1');
      await waitFor('one VM left', () => JSON.stringify(vmNames()) === '["web-0"]', 60_000, 250);
      kubectl('delete', 'vmpool', 'web', '-n', NS, '--wait=true', '--timeout=60s');
      await waitFor('the VMs garbage-collected', () => vmNames().length === 0, 120_000, 500);
      kubectl('delete', 'namespace', NS, '--wait=false');
    },
    600_000,
  );
});
