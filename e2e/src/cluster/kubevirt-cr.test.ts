// The KubeVirt CR on the real node, as a user switching from upstream meets it: virt-operator (deploy/'s Deployment,
// its own image) created it; `kubectl wait kubevirt kubevirt --for condition=Available` (upstream's install docs)
// returns; the status carries upstream's phase, conditions and versions; a configuration patch is reflected in
// status.observedGeneration, a field kubevirt-ts does not implement is reported in the NotImplemented condition, a
// value of the wrong type is refused by the API server naming the field; the pod network's default binding
// (network.defaultNetworkInterface) reaches the next VMI admitted, read live by the deployed webhooks.
import {
  clusterGate,
  deployKubevirtTs,
  getJson,
  kubectl,
  kubectlIn,
  kubectlTry,
  KV_CR,
  KV_NS,
  patchKubeVirt,
} from './cluster.js';
import { waitFor } from '../launcher/helpers.js';

const { reason, clusterTest, requireCluster } = clusterGate();
const SLOW = 900_000;
type Obj = Record<string, any>;
const kv = () => getJson('kubevirt', KV_CR, '-n', KV_NS)!;
const cond = (o: Obj, type: string) => (o.status?.conditions ?? []).find((c: Obj) => c.type === type);

describe(`the KubeVirt CR (${reason ? `skipped: ${reason}` : 'tools/cluster.sh'})`, () => {
  requireCluster();

  clusterTest(
    "virt-operator's KubeVirt CR: Available as upstream's install check waits for it; patches observed",
    async () => {
      await deployKubevirtTs();
      // upstream's docs: kubectl -n kubevirt wait kv kubevirt --for condition=Available
      kubectl('wait', '-n', KV_NS, `kv/${KV_CR}`, '--for', 'condition=Available', '--timeout=300s');
      const ready = kv();
      expect(ready.status).toMatchObject({ phase: 'Deployed', observedKubeVirtVersion: 'v0.1.0' });
      expect(ready.status.observedGeneration).toBe(ready.metadata.generation);
      expect(cond(ready, 'Available')).toMatchObject({ status: 'True', reason: 'AllComponentsReady' });
      expect(cond(ready, 'Degraded')).toMatchObject({ status: 'False' });
      expect(cond(ready, 'NotImplemented')).toMatchObject({ status: 'False' });
      expect(ready.spec.configuration.developerConfiguration.useEmulation).toBe(true);
      expect(kubectl('get', 'kubevirt', '-n', KV_NS)).toMatch(/^kubevirt\s+\S+\s+Deployed$/m);

      // a patch of an implemented field: observed (the controllers read it live, nothing restarts)
      const controllerPods = kubectl(
        'get',
        'pods',
        '-n',
        KV_NS,
        '-l',
        'kubevirt.io=virt-controller',
        '-o',
        'name',
      );
      patchKubeVirt({ migrations: { progressTimeout: 300 } });
      const g = ready.metadata.generation + 1;
      await waitFor('generation observed', () => kv().status.observedGeneration === g, 60_000, 250);
      expect(kubectl('get', 'pods', '-n', KV_NS, '-l', 'kubevirt.io=virt-controller', '-o', 'name')).toBe(
        controllerPods,
      );

      // a field kubevirt-ts does not implement: kept, and reported
      patchKubeVirt({ developerConfiguration: { logVerbosity: { virtLauncher: 4 } } });
      await waitFor('NotImplemented', () => cond(kv(), 'NotImplemented')?.status === 'True', 60_000, 250);
      expect(cond(kv(), 'NotImplemented').message).toBe(
        'not implemented by kubevirt-ts, ignored: spec.configuration.developerConfiguration.logVerbosity',
      );
      expect(cond(kv(), 'Available').status).toBe('True');

      // deploy/'s CR: masquerade for a VMI without interfaces; patched to bridge, the next VMI gets bridge
      expect(ready.spec.configuration.network).toEqual({ defaultNetworkInterface: 'masquerade' });
      const bare = JSON.stringify({
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachineInstance',
        metadata: { name: 'no-interfaces', namespace: 'default' },
        spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } } },
      });
      const admitted = () =>
        JSON.parse(kubectlIn(bare, 'create', '--dry-run=server', '-o', 'json', '-f', '-')).spec.domain.devices
          .interfaces;
      expect(admitted()).toEqual([{ name: 'default', masquerade: {} }]);
      patchKubeVirt({ network: { defaultNetworkInterface: 'bridge' } });
      await waitFor(
        'bridge as the default binding',
        () => admitted()?.[0]?.bridge !== undefined,
        60_000,
        250,
      );
      patchKubeVirt({ network: { defaultNetworkInterface: 'masquerade' } });
      await waitFor('masquerade again', () => admitted()?.[0]?.masquerade !== undefined, 60_000, 250);

      // the wrong type: refused by the API server, naming the field
      const bad = kubectlTry(
        ...['patch', 'kubevirt', KV_CR, '-n', KV_NS, '--type', 'merge', '-p'],
        '{"spec":{"configuration":{"developerConfiguration":{"useEmulation":"yes"}}}}',
      );
      expect(bad.status).not.toBe(0);
      expect(bad.stderr).toMatch(/spec\.configuration\.developerConfiguration\.useEmulation/);

      patchKubeVirt({
        migrations: { progressTimeout: null },
        developerConfiguration: { logVerbosity: null },
      });
      await waitFor(
        'back to all implemented',
        () => cond(kv(), 'NotImplemented')?.status === 'False',
        60_000,
        250,
      );
    },
    SLOW,
  );
});
