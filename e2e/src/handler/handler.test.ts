// virt-handler as a real process against a real kube-apiserver (tools/testenv), driving real in-Pod
// launchers (apps/virt-launcher with --root) that run the tiny test guest under TCG. The test plays
// virt-controller (creates the VMI, labels it for the node, sets status Scheduled + activePods) and
// kubelet (the Pod's emptyDirs under the pods dir, the sockets emptyDir also mounted at
// /var/run/kubevirt/sockets, here a symlink).
import { setTimeout as sleep } from 'node:timers/promises';
import { appendFileSync, existsSync } from 'node:fs';
import { mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { release } from 'node:os';
import path from 'node:path';
import type { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { CmdClient } from '@kubevirt-ts/cmd-protocol';
import type { TestEnv } from '@kubevirt-ts/testenv';
import { spawn, type ChildProcess } from 'node:child_process';
import {
  killMentioning,
  launcherPodFlags,
  qemuPid,
  readText,
  READY,
  REPO,
  requireGuest,
  shortTmp,
  stageTestGuest,
  startLauncher,
  tinyVmi,
  waitFor,
  type Proc,
} from '../launcher/helpers.js';
import {
  NODE_IP,
  POD_IP,
  createNet,
  isRoot,
  launcherInNetns,
  tcpGet,
  tcpServer,
  type Net,
} from '../launcher/net-helpers.js';
import { startCrdTestEnv } from './helpers.js';
import {
  DEFAULT_SECCOMP_BASE,
  SECCOMP_PROFILE_NAME,
  launcherSeccompProfile,
  setUpPodNetwork,
} from '@kubevirt-ts/handler';
import { createLogger } from '@kubevirt-ts/log';

const HANDLER_MAIN = path.join(REPO, 'apps/virt-handler/dist/main.js');
const NODE = 'node-e2e';
const NS = 'e2e';
const GROUP = 'kubevirt.io';
const FINALIZER = 'kubevirt.io/foregroundDeleteVirtualMachine';
const EMPTY = 'volumes/kubernetes.io~empty-dir';

let env: TestEnv;
let custom: CustomObjectsApi;
let core: CoreV1Api;
let base: string; // pods dir + handler dir
let handler: HandlerProc | undefined;
const pods = new Set<Pod>();

interface HandlerProc {
  child: ChildProcess;
  stderr(): string;
  exited: Promise<unknown>;
  http: string;
}

async function startHandler(): Promise<HandlerProc> {
  const child = spawn(
    process.execPath,
    [
      HANDLER_MAIN,
      '--node-name',
      NODE,
      '--kubeconfig',
      env.kubeconfigPath,
      '--pods-dir',
      path.join(base, 'pods'),
      '--kubevirt-share-dir',
      path.join(base, 'handler'),
      '--launcher-uid',
      String(process.getuid?.() ?? 0), // the test's launchers run as this user
      '--launcher-ready-timeout-seconds',
      '20',
      '--heartbeat-interval-seconds',
      '2',
      '--resync-interval-seconds',
      '1',
      '--port',
      '0',
      '--device-plugin-dir',
      '', // no kubelet here (device plugins: packages/handler/src/device-plugin.test.ts)
      '--container-disk-helper',
      '', // the test puts the kernelBoot files in the Pods itself (container disk mounts: e2e/src/cluster)
      '--seccomp-profile-dir',
      path.join(base, 'seccomp'), // a "kubelet seccomp dir" of the test's own (the real base: Debian's profile)
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    err += d;
    if (process.env.DEBUG_HANDLER_LOG) appendFileSync(process.env.DEBUG_HANDLER_LOG, d);
  });
  const exited = new Promise((r) => child.on('exit', r));
  const line = await waitFor(
    'handler serving',
    () => /serving \/healthz and \/metrics on (http:\/\/[0-9.:]+)/.exec(err) || child.exitCode !== null,
    60_000,
  );
  if (child.exitCode !== null) throw new Error(`virt-handler exited ${child.exitCode}: ${err}`);
  return { child, stderr: () => err, exited, http: (line as RegExpExecArray)[1]! };
}

async function killHandler(sig: NodeJS.Signals = 'SIGKILL'): Promise<void> {
  if (!handler) return;
  const h = handler;
  handler = undefined;
  if (h.child.exitCode === null && h.child.signalCode === null) {
    h.child.kill(sig);
    await h.exited;
  }
}

interface Pod {
  name: string;
  podUid: string;
  root: string;
  vmi: VirtualMachineInstance;
  proc?: Proc;
  serialLog: string;
  libvirtBase: string;
  socket: string;
  client?: CmdClient;
  cleanup(): Promise<void>;
}

const vmis = () => ({ group: GROUP, version: 'v1', namespace: NS, plural: 'virtualmachineinstances' });

async function getVmi(name: string): Promise<VirtualMachineInstance | undefined> {
  try {
    return (await custom.getNamespacedCustomObject({ ...vmis(), name })) as VirtualMachineInstance;
  } catch (e) {
    if ((e as { code?: number }).code === 404) return undefined;
    throw e;
  }
}

const cond = (v: VirtualMachineInstance | undefined, type: string) =>
  v?.status?.conditions?.find((c) => c.type === type);

/**
 * What virt-controller does: the VMI (with its finalizer), then, once its Pod is scheduled, status
 * Scheduled + activePods and the node label the handler selects on (one write).
 */
async function createScheduledVmi(
  vmi: VirtualMachineInstance,
  podUid: string,
): Promise<VirtualMachineInstance> {
  const body = { ...vmi, metadata: { name: vmi.metadata.name, namespace: NS, finalizers: [FINALIZER] } };
  const created = (await custom.createNamespacedCustomObject({ ...vmis(), body })) as VirtualMachineInstance;
  // one write: the VMI has no status subresource (as upstream), so the status and the label go together
  return (await custom.replaceNamespacedCustomObject({
    ...vmis(),
    name: vmi.metadata.name!,
    body: {
      ...created,
      metadata: { ...created.metadata, labels: { 'kubevirt.io/nodeName': NODE } },
      status: { phase: 'Scheduled', nodeName: NODE, activePods: { [podUid]: NODE } },
    },
  })) as VirtualMachineInstance;
}

async function removeFinalizer(name: string): Promise<void> {
  const v = await getVmi(name);
  if (!v) return;
  await custom.replaceNamespacedCustomObject({
    ...vmis(),
    name,
    body: { ...v, metadata: { ...v.metadata, finalizers: [] } },
  });
}

/** The kubelet part: the Pod's emptyDirs; then (unless `noLauncher`) the launcher process in it. */
async function startPod(
  name: string,
  opts: {
    noLauncher?: boolean;
    mutate?: (v: VirtualMachineInstance) => void;
    /** runs the launcher inside this "Pod" network namespace */
    net?: Net;
  } = {},
): Promise<Pod> {
  const podUid = `pod-${name}`;
  const spec = tinyVmi(name, { grace: 20 });
  opts.mutate?.(spec);
  const vmi = await createScheduledVmi(spec, podUid);
  const podDir = path.join(base, 'pods', podUid);
  const publicDir = path.join(podDir, EMPTY, 'public');
  await mkdir(publicDir, { recursive: true });
  await mkdir(path.join(podDir, EMPTY, 'sockets'), { recursive: true, mode: 0o700 });
  await symlink('../sockets', path.join(publicDir, 'sockets'));
  const root = await shortTmp();
  const layout = await stageTestGuest(vmi, root);
  const pod: Pod = {
    name,
    podUid,
    root,
    vmi,
    serialLog: layout.serialLogFile(vmi.metadata.uid!),
    libvirtBase: path.join(root, 'lv'),
    socket: path.join(podDir, EMPTY, 'sockets', 'launcher-sock'),
    async cleanup() {
      pods.delete(pod);
      pod.client?.close();
      if (pod.proc && pod.proc.child.exitCode === null && pod.proc.child.signalCode === null) {
        pod.proc.child.kill('SIGKILL');
        await pod.proc.exited;
      }
      await killMentioning(root);
      await removeFinalizer(name).catch(() => undefined);
      await custom.deleteNamespacedCustomObject({ ...vmis(), name }).catch(() => undefined);
      await rm(root, { recursive: true, force: true });
      await rm(podDir, { recursive: true, force: true });
    },
  };
  pods.add(pod);
  if (!opts.noLauncher) {
    const wrap = opts.net ? launcherInNetns(opts.net, root) : [];
    pod.proc = startLauncher(
      launcherPodFlags(vmi, root, publicDir, { grace: 20, logLevel: 'info' }),
      {},
      false,
      wrap,
    );
  }
  return pod;
}

async function waitPhase(name: string, phase: string, ms = 180_000): Promise<VirtualMachineInstance> {
  return waitFor(
    `${name} ${phase}`,
    async () => {
      const v = await getVmi(name);
      return v?.status?.phase === phase ? v : undefined;
    },
    ms,
    250,
  );
}

async function eventsOf(name: string): Promise<string[]> {
  const list = await core.listNamespacedEvent({
    namespace: NS,
    fieldSelector: `involvedObject.name=${name}`,
  });
  return list.items.map((e) => `${e.type}/${e.reason}`);
}

beforeAll(async () => {
  requireGuest();
  ({ env, custom, core } = await startCrdTestEnv(NS, 'handler-e2e'));
  await core.createNode({ body: { metadata: { name: NODE } } });
  base = await shortTmp();
  handler = await startHandler();
}, 180_000);

afterAll(async () => {
  for (const p of [...pods]) await p.cleanup();
  await killHandler('SIGTERM');
  if (base) await rm(base, { recursive: true, force: true });
  await env?.stop();
}, 120_000);

describe('virt-handler with real launchers and a real kube-apiserver', () => {
  it('Running with status from the real domain, heartbeat, /healthz, /metrics; pause/unpause in conditions; delete -> ACPI shutdown, Succeeded', async () => {
    const pod = await startPod('vm-main');
    try {
      await waitPhase('vm-main', 'Running');
      // libvirt starts the domain paused (reason StartingUp) and then runs it; the handler says Running once it runs
      const v = await waitFor('Ready', async () => {
        const x = await getVmi('vm-main');
        return cond(x, 'Ready')?.status === 'True' ? x : undefined;
      });
      expect(v.status!.phase).toBe('Running');
      expect(v.status!.nodeName).toBe(NODE);
      expect(cond(v, 'LiveMigratable')?.status).toBe('True');
      expect(cond(v, 'Paused')).toBeUndefined();
      await waitFor(
        'Started event',
        async () => (await eventsOf('vm-main')).includes('Normal/Started'),
        30_000,
      );
      await waitFor('guest ready line', async () => (await readText(pod.serialLog)).includes(READY), 120_000);

      // node heartbeat
      const node = await core.readNode({ name: NODE });
      expect(node.metadata!.labels!['kubevirt.io/schedulable']).toBe('true');
      expect(node.metadata!.annotations!['kubevirt.io/heartbeat']).toMatch(/^\d{4}-\d\d-\d\dT/);
      // the launcher Pods' seccomp profile, installed before the node was marked schedulable
      const profile = JSON.parse(await readText(path.join(base, 'seccomp', SECCOMP_PROFILE_NAME)));
      expect(profile).toEqual(
        launcherSeccompProfile(await readText(DEFAULT_SECCOMP_BASE), { kernel: release() }),
      );
      // under this project's name and upstream's (a KubeVirt CR written for upstream names kubevirt/kubevirt.json)
      expect(handler!.stderr()).toMatch(
        /"msg":"seccomp profile installed: [^"]*\/kubevirt-ts\/kubevirt.json[,"]/,
      );
      expect(handler!.stderr()).toMatch(
        /"msg":"seccomp profile installed: [^"]*\/kubevirt\/kubevirt.json[,"]/,
      );
      // /healthz and /metrics
      expect(await (await fetch(`${handler!.http}/healthz`)).text()).toBe('ok\n');
      const metrics = await (await fetch(`${handler!.http}/metrics`)).text();
      expect(metrics).toMatch(
        new RegExp(
          `^kubevirt_vmi_cpu_usage_seconds_total\\{node="${NODE}",namespace="${NS}",name="vm-main"\\} [0-9.e-]+$`,
          'm',
        ),
      );
      expect(metrics).toContain('# TYPE kubevirt_vmi_vcpu_seconds_total counter');

      // pause / unpause through the launcher (what the pause subresource ends up doing)
      pod.client = await CmdClient.connect(pod.socket, { timeoutMs: 60_000 });
      await pod.client.pauseVMI(v);
      const paused = await waitFor('Paused condition', async () => {
        const x = await getVmi('vm-main');
        return cond(x, 'Paused')?.status === 'True' ? x : undefined;
      });
      expect(cond(paused, 'Paused')).toMatchObject({
        reason: 'PausedByUser',
        message: 'VMI was paused by user',
      });
      expect(cond(paused, 'Ready')?.status).toBe('False');
      expect(paused.status!.phase).toBe('Running');
      await pod.client.unpauseVMI(v);
      await waitFor('Paused condition gone', async () => {
        const x = await getVmi('vm-main');
        return !cond(x, 'Paused') && cond(x, 'Ready')?.status === 'True';
      });

      // delete: the handler shuts the guest down by ACPI, the VMI ends Succeeded
      await custom.deleteNamespacedCustomObject({ ...vmis(), name: 'vm-main' });
      const done = await waitPhase('vm-main', 'Succeeded');
      expect(done.metadata.deletionTimestamp).toBeTruthy();
      expect(await readText(pod.serialLog)).toContain('KUBEVIRT-TS-GUEST-POWEROFF acpi-power-button');
      expect((await pod.proc!.exited).code).toBe(0);
      const ev = await eventsOf('vm-main');
      expect(ev).toContain('Normal/ShuttingDown');
      expect(ev).toContain('Normal/Stopped');
      await removeFinalizer('vm-main');
      await waitFor('VMI gone', async () => (await getVmi('vm-main')) === undefined, 30_000);
    } finally {
      await pod.cleanup();
    }
  });

  it('kill -9 of QEMU -> the VMI is Failed', async () => {
    const pod = await startPod('vm-crash');
    try {
      await waitPhase('vm-crash', 'Running');
      await waitFor('guest ready line', async () => (await readText(pod.serialLog)).includes(READY), 120_000);
      const pid = await waitFor('QEMU pid', () => qemuPid(pod.libvirtBase, `${NS}_vm-crash`), 10_000);
      process.kill(pid, 'SIGKILL');
      const v = await waitPhase('vm-crash', 'Failed', 60_000);
      expect(v.status!.reason).toMatch(/^(DomainCrashed|LauncherGone)$/);
      expect(cond(v, 'Ready')?.status).toBe('False');
      await waitFor(
        'Warning event',
        async () => (await eventsOf('vm-crash')).includes('Warning/Stopped'),
        30_000,
      );
    } finally {
      await pod.cleanup();
    }
  });

  it('the handler killed and restarted while VMIs run: re-attached, no status lost or rewritten, no domain restarted', async () => {
    const a = await startPod('vm-ra');
    const b = await startPod('vm-rb');
    try {
      const before = [await waitPhase('vm-ra', 'Running'), await waitPhase('vm-rb', 'Running')];
      await waitFor(
        'both guests up',
        async () =>
          (await readText(a.serialLog)).includes(READY) && (await readText(b.serialLog)).includes(READY),
        150_000,
      );
      const qemu = [
        await waitFor('QEMU a', () => qemuPid(a.libvirtBase, `${NS}_vm-ra`), 10_000),
        await waitFor('QEMU b', () => qemuPid(b.libvirtBase, `${NS}_vm-rb`), 10_000),
      ];
      const settled = [(await getVmi('vm-ra'))!, (await getVmi('vm-rb'))!];
      await killHandler('SIGKILL');
      handler = await startHandler();
      await sleep(5000); // a few resync rounds of the new handler
      for (const [i, name] of ['vm-ra', 'vm-rb'].entries()) {
        const now = (await getVmi(name))!;
        expect(now.status!.phase).toBe('Running');
        expect(now.status!.phaseTransitionTimestamps).toEqual(before[i]!.status!.phaseTransitionTimestamps);
        expect(now.metadata.resourceVersion).toBe(settled[i]!.metadata.resourceVersion); // nothing rewritten
      }
      expect(await qemuPid(a.libvirtBase, `${NS}_vm-ra`)).toBe(qemu[0]);
      expect(await qemuPid(b.libvirtBase, `${NS}_vm-rb`)).toBe(qemu[1]);
      expect(handler.stderr()).not.toContain('SyncVirtualMachine sent');
      // the new handler hears the launchers: a pause reaches the status
      a.client = await CmdClient.connect(a.socket, { timeoutMs: 60_000 });
      await a.client.pauseVMI(settled[0]!);
      await waitFor(
        'Paused after restart',
        async () => cond(await getVmi('vm-ra'), 'Paused')?.status === 'True',
      );
      // and it still acts: deleting both ends them cleanly
      await custom.deleteNamespacedCustomObject({ ...vmis(), name: 'vm-ra' });
      await custom.deleteNamespacedCustomObject({ ...vmis(), name: 'vm-rb' });
      await waitPhase('vm-rb', 'Succeeded');
      const ra = await waitFor(
        'vm-ra final',
        async () => {
          const v = await getVmi('vm-ra');
          return v?.status?.phase === 'Succeeded' || v?.status?.phase === 'Failed' ? v : undefined;
        },
        180_000,
      );
      // a paused guest cannot react to ACPI: after the grace period it is killed (Failed, as upstream)
      expect(['Succeeded', 'Failed']).toContain(ra.status!.phase);
    } finally {
      await a.cleanup();
      await b.cleanup();
    }
  });

  it('a launcher that never becomes ready -> Failed with a reason after the timeout; a non-socket launcher-sock is ignored with a log line', async () => {
    const pod = await startPod('vm-noready', { noLauncher: true });
    try {
      // something that is not a socket where the launcher socket should be
      await writeFile(pod.socket, 'not a socket');
      const v = await waitPhase('vm-noready', 'Failed', 120_000);
      expect(v.status!.reason).toBe('LauncherNotReady');
      expect(cond(v, 'Synchronized')).toMatchObject({ status: 'False', reason: 'LauncherNotReady' });
      expect(cond(v, 'Synchronized')!.message).toMatch(/did not become ready within 20s/);
      const warn = handler!
        .stderr()
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as { level: string; reason?: string; path?: string; msg: string })
        .find((l) => l.reason === 'NotASocket' && l.path === pod.socket);
      expect(warn).toBeDefined();
      expect(warn!.level).toBe('warn');
      expect(warn!.msg).toContain('not a unix socket, ignored');
      expect(existsSync(pod.socket)).toBe(true); // left alone
    } finally {
      await pod.cleanup();
    }
  });

  it('a VMI the launcher refuses: Synchronized=False with the launcher message, no domain', async () => {
    const pod = await startPod('vm-bad', {
      mutate: (v) => {
        v.spec.domain.devices!.disks = [{ name: 'missing-volume', disk: { bus: 'virtio' } }];
      },
    });
    try {
      const v = await waitFor('Synchronized=False', async () => {
        const x = await getVmi('vm-bad');
        return cond(x, 'Synchronized')?.status === 'False' ? x : undefined;
      });
      expect(cond(v, 'Synchronized')!.message).toMatch(/spec\.domain\.devices\.disks\[0\]/);
      expect(v.status!.phase).toBe('Scheduled');
      expect(await qemuPid(pod.libvirtBase, `${NS}_vm-bad`)).toBeUndefined();
      await waitFor(
        'SyncFailed event',
        async () => (await eventsOf('vm-bad')).includes('Warning/SyncFailed'),
        30_000,
      );
    } finally {
      await pod.cleanup();
    }
  });

  (isRoot ? it : it.skip)(
    isRoot
      ? 'a masquerade pod interface: phase 1 in the launcher Pod netns found from its socket, the guest leases 10.0.2.2 and is reached at the Pod IP; a second handler finds it set up'
      : 'Pod network phase 1 needs root for network namespaces (skipped: not root)',
    async () => {
      const net = createNet('h');
      let pod: Pod | undefined;
      const servers: ChildProcess[] = [];
      try {
        const node = tcpServer(net.node, 9090);
        servers.push(node.child);
        await node.ready;
        pod = await startPod('vm-net', {
          net,
          mutate: (v) => {
            const boot = v.spec.domain.firmware!.kernelBoot!;
            boot.kernelArgs = `${boot.kernelArgs} kvts.net kvts.connect=${NODE_IP}:9090`;
            v.spec.domain.devices!.interfaces = [
              { name: 'default', masquerade: {}, ports: [{ port: 8080 }] },
            ];
            v.spec.networks = [{ name: 'default', pod: {} }];
          },
        });
        await waitPhase('vm-net', 'Running');
        const line = await waitFor(
          'the guest lease',
          async () => /KUBEVIRT-TS-GUEST-NET (\S+)/.exec(await readText(pod!.serialLog))?.[1],
          240_000,
          250,
        );
        expect(line).toBe('ip=10.0.2.2/24');
        await waitFor('the guest connection', async () =>
          (await readText(pod!.serialLog)).includes(`KUBEVIRT-TS-GUEST-CONNECT ${NODE_IP}:9090 ok ${POD_IP}`),
        );
        expect(tcpGet(net.node, POD_IP, 8080)).toBe('KUBEVIRT-TS-GUEST-TCP vm-net 10.0.2.2/24');
        expect(handler!.stderr()).toContain('"msg":"Pod network set up"');
        // status.interfaces: the Pod IP, as upstream reports a masquerade interface
        await waitFor(
          'status.interfaces[0].ipAddress = the Pod IP',
          async () => (await getVmi('vm-net'))?.status?.interfaces?.[0]?.ipAddress === POD_IP,
          60_000,
          250,
        );
        expect((await getVmi('vm-net'))!.status!.interfaces![0]).toMatchObject({
          name: 'default',
          ipAddress: POD_IP,
          ipAddresses: [POD_IP],
        });
        // another handler (e.g. restarted before its first sync) neither fails nor sets up again
        const handlerDir = path.join(base, 'handler');
        const publicDir = path.join(base, 'pods', pod.podUid, EMPTY, 'public');
        const again = await setUpPodNetwork(
          (await getVmi('vm-net'))!,
          { socketPath: pod.socket, podUid: pod.podUid, shareDir: publicDir },
          {
            launcherUid: process.getuid!(),
            handlerDir,
            log: createLogger({ component: 'test', silent: true }),
          },
        );
        expect(again).toMatchObject({
          binding: 'masquerade',
          podAddress: POD_IP,
          guest: { address: '10.0.2.2' },
        });
        expect(existsSync(path.join(handlerDir, 'pod-network', `${pod.podUid}.json`))).toBe(true);
      } finally {
        for (const s of servers) s.kill();
        await pod?.cleanup();
        net.destroy();
      }
    },
    600_000,
  );

  it('on SIGTERM the handler marks its node unschedulable and leaves launchers alone', async () => {
    await killHandler('SIGTERM');
    const node = await core.readNode({ name: NODE });
    expect(node.metadata!.labels!['kubevirt.io/schedulable']).toBe('false');
    handler = await startHandler();
    await waitFor(
      'schedulable again',
      async () =>
        (await core.readNode({ name: NODE })).metadata!.labels!['kubevirt.io/schedulable'] === 'true',
      30_000,
    );
  });
});
