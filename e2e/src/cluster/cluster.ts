// Helpers of the cluster suites (the cluster of tools/cluster.sh, one or more nodes; CI runs two): kubectl of the
// pinned version, the admin kubeconfig, whether the cluster can be used, the nodes' own file system views, and what
// a VM's launcher Pod leaves on its node.
//
// Each node has its own network, mount and PID namespace (tools/cluster/README.md "Layout"): its files (Pod dirs,
// serial logs, seccomp profiles) are read through `/proc/<node init pid>/root`, its mounts in that init's
// mountinfo; the root namespace, where the tests run, has the client address CLIENT_IP on a veth into the fabric.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { READY, REPO, readText, waitFor } from '../launcher/helpers.js';

export const STATE_DIR = process.env.KVTS_CLUSTER_DIR ?? '/var/lib/kubevirt-ts-cluster';
/** pid files of tools/cluster.sh: `<node>-init.pid` is each node's init (its PID 1) */
export const RUN_DIR = process.env.KVTS_CLUSTER_RUN ?? '/run/kubevirt-ts-cluster';
export const KUBECONFIG = path.join(STATE_DIR, 'admin.kubeconfig');
/** tools/cluster/config.sh's settings (the same environment variables override both) */
const NS_PREFIX = process.env.KVTS_NS_PREFIX ?? 'kvts-';
const FABRIC_NET = process.env.KVTS_FABRIC_NET ?? '10.87.0';
const NODE_NAME_PREFIX = process.env.KVTS_NODE_NAME_PREFIX ?? 'kvts-node';
/**
 * The root namespace's address on its veth into the cluster's fabric: what Pods and guests reach of the machine the
 * tests run on (listeners for `kvts.connect=` bind it). Only the cluster's own namespaces see it.
 */
export const CLIENT_IP = `${FABRIC_NET}.254`;
/** node i (1-based) of tools/cluster.sh */
export function nodeName(i: number): string {
  return `${NODE_NAME_PREFIX}${i}`;
}
/** the first node (also the one kubeadm/kind would call the control-plane node) */
export const NODE_NAME = nodeName(1);
/** the nodes that are up (`cluster.sh up --nodes N` writes N to `$RUN_DIR/nodes`) */
export function nodeNames(): string[] {
  let n = 0;
  try {
    n = Number(readFileSync(path.join(RUN_DIR, 'nodes'), 'utf8').trim()) || 0;
  } catch {
    n = 0;
  }
  return Array.from({ length: n }, (_, i) => nodeName(i + 1));
}
/** where kubelet keeps the Pods' dirs, inside each node's mount namespace */
export const PODS_DIR = '/var/lib/kubelet/pods';
/** the root-namespace pid of a node's init (tools/cluster.sh node-pid) */
export function nodeInitPid(node: string): number {
  const pid = Number(readFileSync(path.join(RUN_DIR, `${node}-init.pid`), 'utf8').trim());
  if (!pid) throw new Error(`${RUN_DIR}/${node}-init.pid: no pid (is the node up?)`);
  return pid;
}
/**
 * The node a process runs on: its cgroup is under that node's cgroup root (`/<prefix>node<i>`, kubelet's
 * cgroupRoot); a Pod's processes have PID namespaces of their own, so the cgroup is what ties them to the node.
 */
export function nodeOfProcess(pid: number): string | undefined {
  let cg: string;
  try {
    cg = readFileSync(`/proc/${pid}/cgroup`, 'utf8');
  } catch {
    return undefined;
  }
  const m = new RegExp(`:/${NS_PREFIX}node(\\d+)/`).exec(cg);
  return m ? nodeName(Number(m[1])) : undefined;
}
/** A path inside a node's mount namespace, as the root namespace reads it. */
export function onNode(node: string, p: string): string {
  return path.join(`/proc/${nodeInitPid(node)}/root`, p);
}
/** A command in a node's network namespace (tools/cluster.sh names it `<prefix>node<i>` for node `<name prefix><i>`). */
export function inNodeNet(node: string, cmd: string, ...args: string[]): string {
  if (!node.startsWith(NODE_NAME_PREFIX)) throw new Error(`${node} is not a node of tools/cluster.sh`);
  const ns = `${NS_PREFIX}node${node.slice(NODE_NAME_PREFIX.length)}`;
  return execFileSync('nsenter', [`--net=/run/netns/${ns}`, cmd, ...args], { encoding: 'utf8' });
}
/** The node whose kubelet has the Pod's dir (a Pod lives on one node), or undefined when none has it. */
export function nodeOfPodDir(podUid: string): string | undefined {
  return nodeNames().find((n) => existsSync(onNode(n, path.join(PODS_DIR, podUid))));
}
/**
 * deploy/ with the apps' images pinned by digest to the archives `tools/cluster.sh load-images` imported (it writes
 * this copy with `node tools/gen-deploy.mjs --pin`): the node runs exactly the images tools/images/build.sh built
 */
export const DEPLOY_DIR = path.join(STATE_DIR, 'deploy');

export function kubeVersion(): string {
  const goMod = readFileSync(path.join(REPO, 'tools/testenv/kube-apiserver/go.mod'), 'utf8');
  return /^require\s+k8s\.io\/kubernetes\s+(v\S+)/m.exec(goMod)![1]!;
}
const CACHE =
  process.env.KVTS_CACHE ??
  path.join(process.env.XDG_CACHE_HOME ?? path.join(process.env.HOME ?? '/root', '.cache'), 'kubevirt-ts');
export const KUBECTL = path.join(CACHE, 'kube', kubeVersion(), 'kubectl');
/** the list of the image archives load-images imports (tools/images/build.sh): tag, manifest digest, image id */
export const IMAGES_JSON = path.join(
  process.env.KVTS_IMAGES_DIR ?? path.join(CACHE, 'images'),
  'images.json',
);

/**
 * The bound of one synchronous kubectl or tools/cluster.sh call (longer than the longest `--timeout=600s` the tests
 * pass): a call that blocks the test's event loop cannot be stopped by jest's test timeout, so it is killed here
 * and the test fails naming it, instead of holding the whole e2e phase until tools/test.sh's bound.
 */
export const SYNC_CALL_MS = 660_000;
export function kubectl(...args: string[]): string {
  return execFileSync(KUBECTL, ['--kubeconfig', KUBECONFIG, ...args], {
    encoding: 'utf8',
    timeout: SYNC_CALL_MS,
  });
}
/** kubectl with a manifest on stdin */
export function kubectlIn(input: string, ...args: string[]): string {
  return execFileSync(KUBECTL, ['--kubeconfig', KUBECONFIG, ...args], {
    encoding: 'utf8',
    input,
    timeout: SYNC_CALL_MS,
  });
}
/** kubectl that may fail: status, stdout, stderr (status null and the reason in stderr when it was killed) */
export function kubectlTry(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(KUBECTL, ['--kubeconfig', KUBECONFIG, ...args], {
    encoding: 'utf8',
    timeout: SYNC_CALL_MS,
  });
  return {
    status: r.status,
    stdout: r.stdout,
    stderr: r.error ? `${r.error.message}\n${r.stderr}` : r.stderr,
  };
}
/** the install namespace and the KubeVirt CR virt-operator creates there (the cluster's configuration) */
export const KV_NS = 'kubevirt-ts';
export const KV_CR = 'kubevirt';

/** `kubectl patch kubevirt kubevirt --type merge` of spec.configuration (null removes a field) */
export function patchKubeVirt(configuration: object): void {
  kubectl(
    'patch',
    'kubevirt',
    KV_CR,
    '-n',
    KV_NS,
    '--type',
    'merge',
    '-p',
    JSON.stringify({ spec: { configuration } }),
  );
}

/**
 * `kubectl apply` of deploy/ pinned to the built images' digests (DEPLOY_DIR, written by `cluster.sh load-images`),
 * then emulation on: this machine's /dev/kvm is root-only (crw-------), so the uid-107 launcher cannot use KVM and
 * guests run under TCG, as in every test of the project. That is upstream's
 * `kubectl patch kubevirt kubevirt --type merge -p '{"spec":{"configuration":{"developerConfiguration":{"useEmulation":true}}}}'`
 * on the KubeVirt CR virt-operator creates: virt-controller reads it live, no restart. Returns once the CR is
 * Available (upstream's install check: `kubectl wait kubevirt kubevirt --for condition=Available`) and the operator
 * has observed the patch.
 */
export function applyDeployWithEmulation(): void {
  kubectl('apply', '-f', DEPLOY_DIR);
  kubectl('rollout', 'status', '-n', KV_NS, 'deployment/virt-operator', '--timeout=600s');
  kubectl('wait', '-n', KV_NS, `kubevirt/${KV_CR}`, '--for=create', '--timeout=120s');
  patchKubeVirt({ developerConfiguration: { useEmulation: true } });
  kubectl('rollout', 'status', '-n', KV_NS, 'deployment/virt-controller', '--timeout=600s');
  kubectl('rollout', 'status', '-n', KV_NS, 'daemonset/virt-handler', '--timeout=600s');
  kubectl('wait', '-n', KV_NS, `kubevirt/${KV_CR}`, '--for=condition=Available', '--timeout=600s');
  const generation = kubectl('get', 'kubevirt', KV_CR, '-n', KV_NS, '-o', 'jsonpath={.metadata.generation}');
  kubectl(
    'wait',
    '-n',
    KV_NS,
    `kubevirt/${KV_CR}`,
    `--for=jsonpath={.status.observedGeneration}=${generation}`,
    '--timeout=120s',
  );
}
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed kubectl JSON, read field by field in tests
export function getJson<T = Record<string, any>>(...args: string[]): T | undefined {
  const r = kubectlTry('get', ...args, '-o', 'json');
  if (r.status !== 0) {
    if (/NotFound|not found/.test(r.stderr)) return undefined;
    throw new Error(`kubectl get ${args.join(' ')}: ${r.stderr}`);
  }
  return JSON.parse(r.stdout) as T;
}

/** why the cluster tests cannot run here, or undefined when they can */
export function notRunnable(): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root (the node runs as root)';
  if (!existsSync(KUBECTL)) return `kubectl ${kubeVersion()} not built (${KUBECTL})`;
  if (!existsSync(KUBECONFIG)) return `no cluster (${KUBECONFIG} missing): run bash tools/cluster.sh up`;
  // the API server's address is inside the cluster's namespaces, reached through the root veth only while the cluster
  // is up: never dial it otherwise (it would leave the machine through the default route)
  if (!existsSync(`/run/netns/${NS_PREFIX}fabric`) || !existsSync(`/sys/class/net/${NS_PREFIX}fab0`))
    return `cluster not up (no ${NS_PREFIX}fabric namespace and ${NS_PREFIX}fab0 veth): run bash tools/cluster.sh up`;
  if (nodeNames().length === 0) return `cluster not up (no ${RUN_DIR}/nodes): run bash tools/cluster.sh up`;
  const r = spawnSync(KUBECTL, ['--kubeconfig', KUBECONFIG, 'get', '--raw', '/readyz'], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  if (r.status !== 0)
    return `cluster not up (kube-apiserver: ${r.stderr.trim()}): run bash tools/cluster.sh up`;
  return undefined;
}

/**
 * `test` when the cluster is up, `test.skip` otherwise; under KVTS_REQUIRE_CLUSTER=1 (tools/test.sh, CI) a cluster
 * that is not up adds a failing test instead (call inside the describe).
 */
export function clusterGate(): {
  reason: string | undefined;
  clusterTest: typeof test;
  requireCluster: () => void;
} {
  const reason = notRunnable();
  const required = process.env.KVTS_REQUIRE_CLUSTER === '1';
  if (reason) console.warn(`cluster e2e ${required ? 'FAILS' : 'skipped'}: ${reason}`);
  return {
    reason,
    clusterTest: reason ? test.skip : test,
    requireCluster: () => {
      if (reason && required)
        test('the cluster is up (KVTS_REQUIRE_CLUSTER=1: tools/test.sh brought it up)', () => {
          throw new Error(`the cluster e2e cannot run: ${reason}`);
        });
    },
  };
}

/**
 * clusterGate for suites that need two nodes: their tests are skipped (with a warning) on a one-node cluster.
 */
export function twoNodeGate(suite: string): ReturnType<typeof clusterGate> {
  const gate = clusterGate();
  const twoNodes = nodeNames().length >= 2;
  if (!gate.reason && !twoNodes)
    console.warn(`${suite} e2e skipped: the cluster has one node (tools/cluster.sh up --nodes 2)`);
  return { ...gate, clusterTest: twoNodes ? gate.clusterTest : test.skip };
}

/** examples/vm-tiny.yaml as VM `name` (its `kubevirt.io/vm` label too), with more template labels */
export function tinyVmManifest(name: string, labels: Record<string, string> = {}): string {
  const vm = readFileSync(path.join(REPO, 'examples/vm-tiny.yaml'), 'utf8')
    .replace(/^ {2}name: tiny$/m, `  name: ${name}`)
    .replace(/^( +)kubevirt\.io\/vm: tiny$/m, (_m, sp: string) =>
      [`${sp}kubevirt.io/vm: ${name}`, ...Object.entries(labels).map(([k, v]) => `${sp}${k}: ${v}`)].join(
        '\n',
      ),
    );
  if (!vm.includes(`kubevirt.io/vm: ${name}`))
    throw new Error('examples/vm-tiny.yaml changed: no VM name/label');
  return vm;
}

/** the heartbeat counters (`KUBEVIRT-TS-GUEST-HEARTBEAT <n> <uptime>`) in a serial log */
export const beats = (text: string): number[] =>
  [...text.matchAll(/KUBEVIRT-TS-GUEST-HEARTBEAT (\d+) /g)].map((m) => Number(m[1]));

/**
 * A launcher Pod's emptyDir on its node, as the root namespace reads it (undefined while no node has the Pod's
 * dir, e.g. before the kubelet made it or after it removed it).
 */
export function podEmptyDir(podUid: string, volume: string): string | undefined {
  const node = nodeOfPodDir(podUid);
  return node && onNode(node, path.join(PODS_DIR, podUid, 'volumes/kubernetes.io~empty-dir', volume));
}

/** Mounts under a Pod's dir on any node (container disks the handler bind-mounted), read in each node's mountinfo. */
export function mountsUnder(podUid: string): string[] {
  const dir = path.join(PODS_DIR, podUid) + '/';
  return nodeNames().flatMap((node) =>
    readFileSync(`/proc/${nodeInitPid(node)}/mountinfo`, 'utf8')
      .split('\n')
      .map((l) => l.split(' ')[4] ?? '')
      .filter((m) => m.startsWith(dir) && !m.includes('kubernetes.io~projected'))
      .map((m) => `${node}:${m}`),
  );
}

/**
 * Follows a VMI's serial log in its launcher Pod (private emptyDir, `<vmi uid>/virt-serial0-log`) and keeps what
 * it read after the Pod and the file are gone (the power-off line is the last one the guest writes).
 */
export class SerialLog {
  text = '';
  private timer: NodeJS.Timeout;
  constructor(
    readonly podUid: string,
    readonly vmiUid: string,
  ) {
    let file: string | undefined;
    this.timer = setInterval(() => {
      // the Pod's node: found once its dir is there (the path through that node's init stays valid)
      const dir = file ? undefined : podEmptyDir(podUid, 'private');
      if (dir) file = path.join(dir, vmiUid, 'virt-serial0-log');
      if (!file) return;
      void readText(file).then((t) => {
        if (t.length > this.text.length) this.text = t;
      });
    }, 100);
  }
  stop(): void {
    clearInterval(this.timer);
  }
  /** the serial log of a VMI (as kubectl shows it) in its first active launcher Pod */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed kubectl JSON
  static ofVmi(vmi: Record<string, any>): SerialLog {
    return new SerialLog(Object.keys(vmi.status.activePods ?? {})[0]!, vmi.metadata.uid);
  }
}

/** One TCP exchange from the root namespace (through the fabric): what the peer says. */
export function tcpLine(host: string, port: number, send?: string): Promise<string> {
  return new Promise((resolve, reject) => {
    // send: written first (Debian's passt 2023-03 forwards a connection once the client has spoken)
    const c = net.connect(port, host, () => {
      if (send !== undefined) c.write(send);
    });
    let d = '';
    c.setTimeout(20_000, () => c.destroy(new Error(`${host}:${port}: timeout`)));
    c.on('data', (x) => (d += x.toString()));
    c.on('end', () => resolve(d.trim()));
    c.on('error', reject);
  });
}

/**
 * A listener (on CLIENT_IP, in the root namespace) that answers each connection with the peer's address; `closeAfterPeer`: the
 * close only after the peer's FIN (Debian's passt 2023-03 can drop its FIN to the guest otherwise).
 */
export function peerEcho(host: string, port: number, closeAfterPeer = false): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const srv = closeAfterPeer
      ? net.createServer({ allowHalfOpen: true }, (c) => {
          c.write(`${c.remoteAddress}\n`);
          c.on('end', () => c.end());
          c.on('error', () => undefined);
          c.resume();
        })
      : net.createServer((c) => c.end(`${c.remoteAddress}\n`));
    srv.once('error', reject);
    srv.listen(port, host, () => resolve(srv));
  });
}

/** Whether virt-handler labelled the node schedulable and its device plugins are registered. */
export function nodeSchedulable(name: string): boolean {
  const node = getJson('node', name);
  return (
    node?.metadata.labels['kubevirt.io/schedulable'] === 'true' &&
    node.status.allocatable['devices.kubevirt.io/tun'] === '1k' &&
    node.status.allocatable['devices.kubevirt.io/kvm'] === '1k'
  );
}

/** applyDeployWithEmulation, then every node labelled schedulable by its virt-handler, device plugins registered */
export async function deployKubevirtTs(): Promise<void> {
  applyDeployWithEmulation();
  for (const name of nodeNames())
    await waitFor(
      `node ${name} labelled schedulable by virt-handler, with its device plugins`,
      () => nodeSchedulable(name),
      120_000,
      500,
    );
}

/** The first address of the node's Pod CIDR: its CNI bridge, the default gateway of its Pods. */
export function cniGateway(node: string): string {
  const cidr = getJson('node', node)?.spec.podCIDR as string | undefined;
  const m = cidr && /^(\d+\.\d+\.\d+)\.0\/24$/.exec(cidr);
  if (!m) throw new Error(`node ${node}: spec.podCIDR ${cidr} is not a /24`);
  return `${m[1]}.1`;
}

/**
 * examples/vm-tiny.yaml as VM `name` in `namespace` with a virtio disk `data` (serial `serial`) on the claim `claim`:
 * the guest reads and rewrites its marker there (`kvts.marker=<serial>`, tools/guest), `kernelArgs` are added to the
 * guest's; no network in the guest (the Pod network stays attached). `containerDisk: false` leaves out the image's
 * blank containerDisk, so the claim is the VM's only volume.
 */
export function claimDiskVmManifest(o: {
  name: string;
  namespace: string;
  claim: string;
  serial: string;
  kernelArgs?: string;
  containerDisk?: boolean;
}): string {
  const keep = o.containerDisk !== false;
  const vm = tinyVmManifest(o.name)
    .replace(/^ {2}namespace: default$/m, `  namespace: ${o.namespace}`)
    .replace(
      /kvts\.disks kvts\.net$/m,
      `kvts.disks kvts.marker=${o.serial}${o.kernelArgs ? ` ${o.kernelArgs}` : ''}`,
    )
    .replace(
      /^( +)- name: containerdisk\n( +)disk:\n( +)bus: virtio$/m,
      (all, a: string, b: string, c: string) =>
        `${keep ? `${all}\n` : ''}${a}- name: data\n${b}serial: ${o.serial}\n${b}disk:\n${c}bus: virtio`,
    )
    .replace(
      /^( +)- name: containerdisk\n( +)containerDisk:\n(?:\2 +\S.*(?:\n|$))*/m,
      (all, a: string, b: string) =>
        `${a}- name: data\n${b}persistentVolumeClaim:\n${b}  claimName: ${o.claim}\n${keep ? all : ''}`,
    );
  if (
    !vm.includes(`namespace: ${o.namespace}`) ||
    !vm.includes(`claimName: ${o.claim}`) ||
    !vm.includes(`serial: ${o.serial}`) ||
    !vm.includes(`kvts.marker=${o.serial}`) ||
    vm.includes('containerdisk') !== keep
  )
    throw new Error('examples/vm-tiny.yaml changed: the PVC disk could not be added');
  return vm;
}

/** our virtctl (packages/virtctl) in `namespace`, with the admin kubeconfig: its stdout, or an error with its output */
export function virtctlIn(namespace: string, ...args: string[]): string {
  const out = spawnSync(
    process.execPath,
    [path.join(REPO, 'packages/virtctl/dist/cli.js'), ...args, '-n', namespace],
    {
      encoding: 'utf8',
      env: { ...process.env, NODE_OPTIONS: '', KUBECONFIG },
      timeout: SYNC_CALL_MS,
    },
  );
  if (out.status !== 0)
    throw new Error(`virtctl ${args.join(' ')}: ${out.error?.message ?? ''}${out.stderr}${out.stdout}`);
  return out.stdout;
}

/** deploy/addons/storage applied (idempotent) and its provisioner rolled out: the default StorageClass local-path. */
export function applyStorageAddon(): void {
  kubectl('apply', '-f', path.join(REPO, 'deploy/addons/storage'));
  kubectl(
    'rollout',
    'status',
    '-n',
    'local-path-storage',
    'deployment/local-path-provisioner',
    '--timeout=180s',
  );
}

/**
 * `tools/cluster.sh block-volumes`: the class local-block, its loop devices and PersistentVolumes made when missing,
 * Released ones wiped and Available again (a claim deleted with its namespace leaves its volume Released: Retain).
 * Its output (`block volume <device> <pv> <phase> ...` lines).
 */
export function blockVolumes(): string {
  const out = spawnSync('bash', [path.join(REPO, 'tools/cluster.sh'), 'block-volumes'], {
    encoding: 'utf8',
    timeout: SYNC_CALL_MS,
  });
  if (out.status !== 0)
    throw new Error(`tools/cluster.sh block-volumes: ${out.error?.message ?? ''}${out.stderr}${out.stdout}`);
  return out.stdout;
}

/** The guest's marker in the first 512-byte block of a disk image (tools/guest kvts.marker), as the root namespace reads it. */
export function markerOnDisk(image: string): string {
  return readFileSync(image).subarray(0, 512).toString('latin1').replace(/\0+$/, '').trim();
}

/** A claim's volume directory as the root namespace sees it: a node-local one (node affinity) through its node's mount namespace. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed kubectl JSON, read field by field in tests
export function volumeDir(pv: Record<string, any>): string {
  const node: string | undefined =
    pv.spec.nodeAffinity?.required.nodeSelectorTerms[0].matchExpressions[0].values[0];
  return node ? onNode(node, pv.spec.hostPath.path) : pv.spec.hostPath.path;
}

/** Creates a VirtualMachineInstanceMigration of VMI `vmi` (generateName `<vmi>-`) with optional annotations: its name. */
export function createVmim(namespace: string, vmi: string, annotations: Record<string, string> = {}): string {
  const m = {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstanceMigration',
    metadata: { generateName: `${vmi}-`, namespace, annotations },
    spec: { vmiName: vmi },
  };
  return JSON.parse(kubectlIn(JSON.stringify(m), 'create', '-f', '-', '-o', 'json')).metadata.name;
}

/** `kubectl create` of a VirtualMachineInstanceMigration of `vmi` that may be refused: kubectl's status and output. */
export function tryCreateVmim(namespace: string, vmi: string): ReturnType<typeof kubectlTry> {
  const r = spawnSync(KUBECTL, ['--kubeconfig', KUBECONFIG, 'create', '-f', '-'], {
    encoding: 'utf8',
    input: JSON.stringify({
      apiVersion: 'kubevirt.io/v1',
      kind: 'VirtualMachineInstanceMigration',
      metadata: { generateName: `${vmi}-`, namespace },
      spec: { vmiName: vmi },
    }),
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Waits for a final phase (Succeeded, Failed) of a VirtualMachineInstanceMigration: the object. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed kubectl JSON, read field by field in tests
export function vmimFinal(namespace: string, name: string, timeoutMs: number): Promise<Record<string, any>> {
  return waitFor(
    `migration ${name} final`,
    () => {
      const x = getJson('vmim', '-n', namespace, name);
      return x && ['Succeeded', 'Failed'].includes(x.status?.phase) ? x : undefined;
    },
    timeoutMs,
    500,
  );
}

/** Waits for the first line `<prefix> <rest>` on a guest's serial console: the rest. */
export function serialLine(s: SerialLog, prefix: string, timeoutMs: number): Promise<string> {
  return waitFor(
    `${prefix} on the serial console`,
    () => new RegExp(`^${prefix} (.*)$`, 'm').exec(s.text)?.[1],
    timeoutMs,
    200,
  );
}

/** A launcher Pod's log lines (JSON, from its compute container) about the disk.img of its claims. */
export function diskImageLogLines(namespace: string, pod: string): string[] {
  return kubectl('logs', '-n', namespace, pod, '-c', 'compute')
    .split('\n')
    .filter((l) => l.includes('disk.img'));
}

/** Waits for VMI `name` in `namespace` to be Running, a VMI other than `notUid` when given: the object. */
export function runningVmiIn(
  namespace: string,
  name: string,
  notUid?: string,
  timeoutMs = 300_000,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed kubectl JSON, read field by field in tests
): Promise<Record<string, any>> {
  return waitFor(
    `VMI ${name} Running`,
    () => {
      const v = getJson('vmi', '-n', namespace, name);
      return v?.status?.phase === 'Running' && v.metadata.uid !== notUid ? v : undefined;
    },
    timeoutMs,
    500,
  );
}

/** The launcher Pod(s) of a VMI, by its uid (`kubevirt.io/created-by`); `[]` when none. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed kubectl JSON, read field by field in tests
export function launcherPodsOfVmi(namespace: string, vmiUid: string): Record<string, any>[] {
  return getJson('pods', '-n', namespace, '-l', `kubevirt.io/created-by=${vmiUid}`)?.items ?? [];
}

/** Every launcher Pod in `namespace`. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed kubectl JSON, read field by field in tests
export function launcherPodsIn(namespace: string): Record<string, any>[] {
  return getJson('pods', '-n', namespace, '-l', 'kubevirt.io=virt-launcher')?.items ?? [];
}

/**
 * Checks a migration that succeeded from `source` to `target`: the VMI handed off to the target (the source handler
 * moves it once it sees the target's running domain, which may come after the VMIM is Succeeded), Running with its
 * migrationState completed; the source launcher Pod gone, one launcher Pod left, on the target; and no reboot: no
 * ready line on the target's serial console, and its heartbeat counter goes on from the source's last beat (`before`:
 * the source Pod's log), every beat in one of the two logs (a line cut by the switch at most). `follow` starts
 * following a launcher Pod's serial log (by its uid). Returns the VMI, the target's log and the two beats.
 */
export async function expectMigratedWithoutReboot(o: {
  namespace: string;
  vmi: string;
  vmiUid: string;
  source: string;
  target: string;
  sourcePodUid: string;
  before: SerialLog;
  follow: (podUid: string) => SerialLog;
  timeoutMs: number;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- parsed kubectl JSON, read field by field in tests
}): Promise<{ vmi: Record<string, any>; serial: SerialLog; last: number; first: number }> {
  const now = await waitFor(
    `the VMI handed off to ${o.target}`,
    () => {
      const v = getJson('vmi', '-n', o.namespace, o.vmi);
      return v?.status?.nodeName === o.target ? v : undefined;
    },
    120_000,
    500,
  );
  expect(now.status.phase).toBe('Running');
  expect(now.status.migrationState).toMatchObject({
    completed: true,
    sourceNode: o.source,
    targetNode: o.target,
  });
  expect(now.status.migrationState.failed).toBeFalsy();
  await waitFor(
    'the source launcher Pod gone',
    () => !JSON.stringify(getJson('pods', '-n', o.namespace)?.items ?? []).includes(o.sourcePodUid),
    o.timeoutMs,
    500,
  );
  const pods = launcherPodsOfVmi(o.namespace, o.vmiUid).filter((p) => !p.metadata.deletionTimestamp);
  expect(pods.map((p) => p.spec.nodeName)).toEqual([o.target]);
  const serial = o.follow(pods[0]!.metadata.uid);
  await waitFor('heartbeats in the target Pod', () => beats(serial.text).length >= 3, 120_000, 500);
  expect(serial.text).not.toContain(READY);
  const last = beats(o.before.text).at(-1)!;
  const first = beats(serial.text)[0]!;
  expect(first).toBeGreaterThan(last);
  expect(first - last - 1).toBeLessThanOrEqual(1);
  return { vmi: now, serial, last, first };
}
