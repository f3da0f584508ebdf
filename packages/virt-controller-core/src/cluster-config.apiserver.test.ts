// The KubeVirt CR's configuration as new VMs and VMIs see it, through a real kube-apiserver (tools/testenv) with
// deploy/'s CRDs, the admission webhooks (reading the CR live) and the controller (reading it too):
// `network.defaultNetworkInterface`, `network.permitBridgeInterfaceOnPodNetwork` and `evictionStrategy`, each
// patched while everything runs; and `RestartRequired` on a running VM whose template changes (vmRolloutStrategy
// Stage: kubevirt-ts updates nothing live).
import { get as httpsGet } from 'node:https';
import { KUBEVIRT_CR_NAME, type KubeVirtConfiguration } from '@kubevirt-ts/api';
import { KUBEVIRTS, type KubeClient, type KubeObject } from '@kubevirt-ts/controller-runtime';
import type { TestEnv } from '@kubevirt-ts/testenv';
import { ANNOTATION_VM_TEMPLATE_HASH, VMIS, VMS, type Vm, type Vmi } from './common.js';
import type { Pod } from './context.js';
import type { VirtController } from './manager.js';
import {
  TEST_RENDERER,
  podsOf,
  poller,
  startController,
  stopController,
  startTestWebhooks,
  type TestWebhooks,
} from './test-apiserver.js';
import { RESTART_REQUIRED_MESSAGE } from './vm.js';

const NS = 'cfg-test';
const KV_NS = 'kubevirt-ts';
let env: TestEnv;
let api: KubeClient;
let controller: VirtController;
let hooks: TestWebhooks;
const { until, finish } = poller();

const NAMESPACES = { group: '', version: 'v1', plural: 'namespaces', namespaced: false };

async function setConfiguration(configuration: KubeVirtConfiguration): Promise<void> {
  const cur = await api.get<KubeObject & { spec: Record<string, unknown> }>(
    KUBEVIRTS,
    KV_NS,
    KUBEVIRT_CR_NAME,
  );
  cur.spec = { configuration };
  await api.update(KUBEVIRTS, cur);
}

/** a VMI create that sees the configuration: the webhook's informer may lag a patch by a watch event */
async function createVmiWhenConfigured(
  name: string,
  accept: (vmi: Vmi) => boolean,
  spec: Record<string, unknown> = {},
): Promise<Vmi> {
  let n = 0;
  return until(`VMI ${name} created with the new configuration`, async () => {
    const vmiName = `${name}-${n++}`;
    const created = await api.create<Vmi>(VMIS, NS, {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstance',
      metadata: { name: vmiName, namespace: NS },
      spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } }, ...spec },
    } as unknown as Vmi);
    return accept(created) ? created : false;
  });
}

beforeAll(async () => {
  // the controller reads the CR (no fixed rendererConfig), as deployed
  ({ env, api, controller } = await startController(NS, 'cfg-test', {
    rendererConfig: undefined,
    baseConfig: { launcherImage: TEST_RENDERER.launcherImage },
    configNamespace: KV_NS,
  }));
  await api.create(NAMESPACES, undefined, {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: KV_NS },
  } as KubeObject);
  await api.create(KUBEVIRTS, KV_NS, {
    apiVersion: 'kubevirt.io/v1',
    kind: 'KubeVirt',
    metadata: { name: KUBEVIRT_CR_NAME, namespace: KV_NS },
    spec: { configuration: { developerConfiguration: { useEmulation: true } } },
  } as KubeObject);
  hooks = await startTestWebhooks(api, { kubeVirt: { namespace: KV_NS, name: KUBEVIRT_CR_NAME } });
}, 120000);

afterAll(async () => {
  finish();
  await controller?.stop(); // before the webhooks it writes through
  await hooks?.close();
  await stopController({ env, api }, finish);
});

describe('the KubeVirt CR configuration at admission, read live', () => {
  it("network.defaultNetworkInterface: unset gives upstream's default (bridge); a patch to masquerade applies to the next VMI", async () => {
    const bridged = await createVmiWhenConfigured('net-default', () => true);
    expect(bridged.spec.domain.devices?.interfaces).toEqual([{ name: 'default', bridge: {} }]);
    expect(bridged.spec.networks).toEqual([{ name: 'default', pod: {} }]);
    await setConfiguration({ network: { defaultNetworkInterface: 'masquerade' } });
    const masq = await createVmiWhenConfigured(
      'net-masq',
      (v) => v.spec.domain.devices?.interfaces?.[0]?.masquerade !== undefined,
    );
    expect(masq.spec.domain.devices?.interfaces).toEqual([{ name: 'default', masquerade: {} }]);
  });

  it('network.permitBridgeInterfaceOnPodNetwork false: bridge on the pod network is refused, naming the interface', async () => {
    await setConfiguration({
      network: { defaultNetworkInterface: 'masquerade', permitBridgeInterfaceOnPodNetwork: false },
    });
    const bridgeSpec = {
      domain: {
        devices: { interfaces: [{ name: 'pod', bridge: {} }] },
        resources: { requests: { memory: '64Mi' } },
      },
      networks: [{ name: 'pod', pod: {} }],
    };
    let n = 0;
    const message = await until('bridge on the pod network refused', async () => {
      try {
        await api.create<Vmi>(VMIS, NS, {
          apiVersion: 'kubevirt.io/v1',
          kind: 'VirtualMachineInstance',
          metadata: { name: `bridge-${n++}`, namespace: NS },
          spec: bridgeSpec,
        } as unknown as Vmi);
        return false;
      } catch (e) {
        return String(e);
      }
    });
    expect(message).toContain(
      'spec.domain.devices.interfaces[0].name: Bridge on pod network configuration is not enabled under kubevirt-config',
    );
    // the same in a VM's template, with the template's path
    await expect(
      api.create(VMS, NS, {
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachine',
        metadata: { name: 'bridge-vm', namespace: NS },
        spec: { runStrategy: 'Halted', template: { spec: bridgeSpec } },
      } as unknown as Vm),
    ).rejects.toThrow(/spec\.template\.spec\.domain\.devices\.interfaces\[0\]\.name: Bridge on pod network/);
    // and bridge as the default binding cannot be given either (upstream's message)
    await setConfiguration({
      network: { defaultNetworkInterface: 'bridge', permitBridgeInterfaceOnPodNetwork: false },
    });
    const refused = await until('the default bridge refused', async () => {
      try {
        await api.create<Vmi>(VMIS, NS, {
          apiVersion: 'kubevirt.io/v1',
          kind: 'VirtualMachineInstance',
          metadata: { name: `default-bridge-${n++}`, namespace: NS },
          spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } } },
        } as unknown as Vmi);
        return false;
      } catch (e) {
        return String(e);
      }
    });
    expect(refused).toContain('bridge interface is not enabled in kubevirt-config');
  });

  it('evictionStrategy: VMIs that set none get the cluster-wide one; one that sets its own keeps it', async () => {
    await setConfiguration({
      network: { defaultNetworkInterface: 'masquerade' },
      evictionStrategy: 'LiveMigrate',
    });
    const vmi = await createVmiWhenConfigured('evict', (v) => v.spec.evictionStrategy !== undefined);
    expect(vmi.spec.evictionStrategy).toBe('LiveMigrate');
    const own = await api.create<Vmi>(VMIS, NS, {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstance',
      metadata: { name: 'evict-own', namespace: NS },
      spec: {
        evictionStrategy: 'None',
        domain: { devices: {}, resources: { requests: { memory: '64Mi' } } },
      },
    } as unknown as Vmi);
    expect(own.spec.evictionStrategy).toBe('None');
  });
});

describe("GET /healthz: upstream's JSON with the KubeVirt CR's resourceVersion the webhooks apply", () => {
  /** the webhook server's /healthz over TLS (the test's own CA: not verified here, as upstream's tests do not) */
  const getHealthz = (path = '/healthz'): Promise<{ status?: number; type?: string; body: string }> =>
    new Promise((resolve, reject) => {
      const req = httpsGet(
        { host: '127.0.0.1', port: hooks.hook.port, path, rejectUnauthorized: false },
        (res) => {
          let body = '';
          res.on('data', (c: Buffer) => (body += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode, type: res.headers['content-type'], body }));
        },
      );
      req.on('error', reject);
    });

  it('reports the current version, and the patched one after a change of the CR', async () => {
    const rv = async () =>
      (await api.get<KubeObject>(KUBEVIRTS, KV_NS, KUBEVIRT_CR_NAME)).metadata?.resourceVersion;
    const current = await rv();
    const seen = await until('healthz reports the CR as stored', async () => {
      const r = await getHealthz();
      const j = JSON.parse(r.body) as Record<string, unknown>;
      return j['config-resource-version'] === current ? r : false;
    });
    expect(seen.status).toBe(200);
    expect(seen.type).toBe('application/json');
    expect(JSON.parse(seen.body)).toEqual({
      apiserver: { connectivity: 'ok' },
      'config-resource-version': current,
    });
    await setConfiguration({ developerConfiguration: { useEmulation: true, cpuAllocationRatio: 5 } });
    const patched = await rv();
    expect(patched).not.toBe(current);
    await until('healthz reports the patched CR', async () => {
      const j = JSON.parse((await getHealthz()).body) as Record<string, unknown>;
      return j['config-resource-version'] === patched;
    });
    // the URL upstream's tests build (https://localhost:<port>/ + "/healthz"), as go-restful answers it
    expect(JSON.parse((await getHealthz('//healthz?x=1')).body)).toEqual({
      apiserver: { connectivity: 'ok' },
      'config-resource-version': patched,
    });
  });
});

describe('RestartRequired (vmRolloutStrategy Stage)', () => {
  const getVm = (name: string) => api.get<Vm>(VMS, NS, name);
  const restartRequired = (vm: Vm) => vm.status?.conditions?.find((c) => c.type === 'RestartRequired');

  it("a change of a running VM's template sets RestartRequired; undoing it clears it; a restart takes the change", async () => {
    await setConfiguration({
      network: { defaultNetworkInterface: 'masquerade' },
      vmRolloutStrategy: 'Stage',
    });
    await api.create(VMS, NS, {
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachine',
      metadata: { name: 'staged', namespace: NS },
      spec: {
        runStrategy: 'Always',
        template: {
          spec: {
            domain: { devices: {}, resources: { requests: { memory: '64Mi' } } },
            terminationGracePeriodSeconds: 0,
          },
        },
      },
    } as unknown as Vm);
    const vmi = await until('the VM started its VMI', () => api.getOrUndefined<Vmi>(VMIS, NS, 'staged'));
    expect(vmi.metadata.annotations?.[ANNOTATION_VM_TEMPLATE_HASH]).toMatch(/^[0-9a-f]{32}$/);
    await until('the VM status written', async () => (await getVm('staged')).status?.created === true);
    expect(restartRequired(await getVm('staged'))).toBeUndefined();

    // a metadata-only change (a label on the VM) needs no restart; merge patches, as kubectl edit would: the
    // controller writes the VM's status meanwhile, so a read-modify-PUT could meet a conflict
    await api.patch(VMS, NS, 'staged', { metadata: { labels: { team: 'a' } } });

    const change = async (memory: string) => {
      await api.patch(VMS, NS, 'staged', {
        spec: { template: { spec: { domain: { resources: { requests: { memory } } } } } },
      });
    };
    await change('128Mi');
    const cond = await until('RestartRequired', async () => restartRequired(await getVm('staged')));
    expect(cond).toMatchObject({ status: 'True', message: RESTART_REQUIRED_MESSAGE });
    // the running VMI is untouched
    expect((await api.get<Vmi>(VMIS, NS, 'staged')).metadata.uid).toBe(vmi.metadata.uid);

    await change('64Mi'); // back to what the VMI was started from
    await until('RestartRequired cleared', async () => !restartRequired(await getVm('staged')));

    await change('96Mi');
    await until('RestartRequired again', async () => restartRequired(await getVm('staged')));
    // a restart (the VMI deleted, RunStrategy Always starts a new one) takes the change and clears the condition
    await api.delete(VMIS, NS, 'staged');
    const restarted = await until('a new VMI with the change', async () => {
      const v = await api.getOrUndefined<Vmi>(VMIS, NS, 'staged');
      return v && v.metadata.uid !== vmi.metadata.uid && !v.metadata.deletionTimestamp ? v : false;
    });
    expect(restarted.spec.domain.resources?.requests?.memory).toBe('96Mi');
    await until(
      'RestartRequired cleared after the restart',
      async () => !restartRequired(await getVm('staged')),
    );
  });
});

describe('developerConfiguration.lessPVCSpaceToleration and minimumReservePVCBytes: from the CR into the launcher Pod', () => {
  type Container = { name: string; command?: string[]; args?: string[] };
  const argvOf = (pod: Pod) => {
    const c = (pod.spec?.containers as Container[] | undefined)?.find((x) => x.name === 'compute');
    return [...(c?.command ?? []), ...(c?.args ?? [])];
  };
  const flag = (argv: string[], name: string) => {
    const i = argv.indexOf(name);
    return i < 0 ? undefined : argv[i + 1];
  };
  let n = 0;
  /** the compute argv of the launcher Pod the controller renders for a new VMI, once `accept` holds */
  const podArgv = (what: string, accept: (argv: string[]) => boolean) =>
    until(what, async () => {
      const vmi = await api.create<Vmi>(VMIS, NS, {
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachineInstance',
        metadata: { name: `pvc-space-${n++}`, namespace: NS },
        spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } } },
      } as unknown as Vmi);
      const pod = await until(
        `the launcher Pod of ${vmi.metadata.name}`,
        async () => (await podsOf(api, vmi))[0],
      );
      const argv = argvOf(pod);
      return accept(argv) ? argv : false;
    });

  it('the values set in the CR reach the compute command; a change reaches the next Pod; out of range is refused naming the field', async () => {
    await setConfiguration({
      network: { defaultNetworkInterface: 'masquerade' },
      developerConfiguration: {
        useEmulation: true,
        lessPVCSpaceToleration: 25,
        minimumReservePVCBytes: 1048576,
      },
    });
    const argv = await podArgv('a Pod with the CR values', (a) => a.includes('--less-pvc-space-toleration'));
    expect(flag(argv, '--less-pvc-space-toleration')).toBe('25');
    expect(flag(argv, '--minimum-reserve-pvc-bytes')).toBe('1048576');

    // changed live: the next Pod has the new ones (0 is a value: no toleration, no reserve)
    await setConfiguration({
      network: { defaultNetworkInterface: 'masquerade' },
      developerConfiguration: { useEmulation: true, lessPVCSpaceToleration: 0, minimumReservePVCBytes: 0 },
    });
    const zero = await podArgv(
      'a Pod with the changed values',
      (a) => flag(a, '--less-pvc-space-toleration') === '0',
    );
    expect(flag(zero, '--minimum-reserve-pvc-bytes')).toBe('0');

    // the CRD refuses values out of range, naming the field; the CR keeps its values
    const bad = async (developerConfiguration: Record<string, unknown>) => {
      try {
        await setConfiguration({ developerConfiguration } as KubeVirtConfiguration);
      } catch (e) {
        return String(e);
      }
      throw new Error(`${JSON.stringify(developerConfiguration)} was accepted`);
    };
    expect(await bad({ lessPVCSpaceToleration: 101 })).toMatch(
      /spec\.configuration\.developerConfiguration\.lessPVCSpaceToleration: Invalid value: 101: .*less than or equal to 100/,
    );
    expect(await bad({ lessPVCSpaceToleration: 2.5 })).toMatch(
      /spec\.configuration\.developerConfiguration\.lessPVCSpaceToleration: Invalid value: "number": .*integer/,
    );
    expect(await bad({ minimumReservePVCBytes: -1 })).toMatch(
      /spec\.configuration\.developerConfiguration\.minimumReservePVCBytes: Invalid value: -1: .*greater than or equal to 0/,
    );
    const kv = await api.get<KubeObject & { spec: { configuration?: KubeVirtConfiguration } }>(
      KUBEVIRTS,
      KV_NS,
      KUBEVIRT_CR_NAME,
    );
    expect(kv.spec.configuration?.developerConfiguration).toMatchObject({
      lessPVCSpaceToleration: 0,
      minimumReservePVCBytes: 0,
    });

    // unset again: upstream's defaults, which are the launcher's: no flags
    await setConfiguration({
      network: { defaultNetworkInterface: 'masquerade' },
      developerConfiguration: { useEmulation: true },
    });
    const unset = await podArgv('a Pod without the flags', (a) => !a.includes('--less-pvc-space-toleration'));
    expect(unset).not.toContain('--minimum-reserve-pvc-bytes');
  });
});
