// What the cluster benchmarks (tools/bench-cluster.mjs, tools/bench-density.mjs, tools/bench-migration.mjs) share:
// kubectl on the cluster of tools/cluster.sh, its audit log, polling, the tiny VM of examples/, the checks that the
// cluster is up and deployed, and the nodes' own file system views (each node has its own mount namespace: its files
// are read through `/proc/<node init pid>/root`, see tools/cluster/README.md "Layout"; e2e/src/cluster/cluster.ts
// has the same helpers for the tests).
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const repo = path.resolve(fileURLToPath(new URL('..', import.meta.url)));
export const cache =
  process.env.KVTS_CACHE ??
  path.join(process.env.XDG_CACHE_HOME ?? path.join(process.env.HOME ?? '/root', '.cache'), 'kubevirt-ts');
const kubeVersion = /^require\s+k8s\.io\/kubernetes\s+(v\S+)/m.exec(
  readFileSync(path.join(repo, 'tools/testenv/kube-apiserver/go.mod'), 'utf8'),
)[1];
export const KUBECTL = path.join(cache, 'kube', kubeVersion, 'kubectl');
export const KUBECONFIG = path.join(
  process.env.KVTS_CLUSTER_DIR ?? '/var/lib/kubevirt-ts-cluster',
  'admin.kubeconfig',
);
export const AUDIT = path.join(process.env.KVTS_CLUSTER_LOGS ?? '/var/log/kubevirt-ts-cluster', 'audit.log');
/** where kubelet keeps the Pods' dirs, inside each node's mount namespace */
export const PODS_DIR = '/var/lib/kubelet/pods';
/** pid files of tools/cluster.sh: `<node>-init.pid` is each node's init, `nodes` the node count */
export const RUN_DIR = process.env.KVTS_CLUSTER_RUN ?? '/run/kubevirt-ts-cluster';
const NS_PREFIX = process.env.KVTS_NS_PREFIX ?? 'kvts-';
const FABRIC_NET = process.env.KVTS_FABRIC_NET ?? '10.87.0';
const NODE_NAME_PREFIX = process.env.KVTS_NODE_NAME_PREFIX ?? 'kvts-node';
export const READY = 'KUBEVIRT-TS-GUEST-READY';

export const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
/** the p-th percentile (0..100) by nearest rank */
export const percentile = (a, p) => {
  const s = [...a].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
};
export const kubectl = (...args) =>
  execFileSync(KUBECTL, ['--kubeconfig', KUBECONFIG, ...args], { encoding: 'utf8' });
export const kubectlIn = (input, ...args) =>
  execFileSync(KUBECTL, ['--kubeconfig', KUBECONFIG, ...args], { encoding: 'utf8', input });
export function getJson(...args) {
  try {
    return JSON.parse(
      execFileSync(KUBECTL, ['--kubeconfig', KUBECONFIG, 'get', ...args, '-o', 'json'], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'ignore'],
        maxBuffer: 256 * 1024 * 1024,
      }),
    );
  } catch {
    return undefined;
  }
}
export async function until(what, fn, ms = 600_000, every = 100) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(every);
  }
}

/** examples/vm-tiny.yaml as a VM named `name` */
export function vmManifest(name) {
  return readFileSync(path.join(repo, 'examples/vm-tiny.yaml'), 'utf8')
    .replace(/^ {2}name: tiny$/m, `  name: ${name}`)
    .replace(/kubevirt\.io\/vm: tiny/, `kubevirt.io/vm: ${name}`);
}

/** examples/vm-tiny.yaml's template as a VMI named `name` in `namespace`, with `labels` */
export function vmiManifest(name, namespace, labels = {}) {
  const vm = readFileSync(path.join(repo, 'examples/vm-tiny.yaml'), 'utf8');
  const spec = vm
    .slice(vm.indexOf('    spec:\n'))
    .split('\n')
    .map((l) => l.replace(/^ {4}/, ''))
    .join('\n');
  const l = Object.entries(labels)
    .map(([k, v]) => `\n    ${k}: ${v}`)
    .join('');
  return `apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata:\n  name: ${name}\n  namespace: ${namespace}\n  labels:${l || ' {}'}\n${spec}`;
}

/** node i (1-based) of tools/cluster.sh */
export const nodeName = (i) => `${NODE_NAME_PREFIX}${i}`;
/** the nodes that are up (`cluster.sh up --nodes N` writes N to `$RUN_DIR/nodes`) */
export function nodeNames() {
  let n = 0;
  try {
    n = Number(readFileSync(path.join(RUN_DIR, 'nodes'), 'utf8').trim()) || 0;
  } catch {
    n = 0;
  }
  return Array.from({ length: n }, (_, i) => nodeName(i + 1));
}
/** the root-namespace pid of a node's init (tools/cluster.sh node-pid) */
export function nodeInitPid(node) {
  const pid = Number(readFileSync(path.join(RUN_DIR, `${node}-init.pid`), 'utf8').trim());
  if (!pid) throw new Error(`${RUN_DIR}/${node}-init.pid: no pid (is the node up?)`);
  return pid;
}
/** a path inside a node's mount namespace, as the root namespace reads it */
export const onNode = (node, p) => path.join(`/proc/${nodeInitPid(node)}/root`, p);
/** the node's address on the cluster's fabric (node i: `<fabric net>.(10+i)`) */
export function nodeAddress(node) {
  if (!node.startsWith(NODE_NAME_PREFIX)) throw new Error(`${node} is not a node of tools/cluster.sh`);
  return `${FABRIC_NET}.${10 + Number(node.slice(NODE_NAME_PREFIX.length))}`;
}
/** the node's network namespace (`/run/netns/<prefix>node<i>`) */
export function nodeNetns(node) {
  if (!node.startsWith(NODE_NAME_PREFIX)) throw new Error(`${node} is not a node of tools/cluster.sh`);
  return `/run/netns/${NS_PREFIX}node${node.slice(NODE_NAME_PREFIX.length)}`;
}
/** a node's cgroup dir in one v1 hierarchy (`memory`, `cpu,cpuacct`, `pids`, ...): kubelet's `cgroupRoot` `/<prefix>nodeI` */
export function nodeCgroupDir(node, hierarchy) {
  if (!node.startsWith(NODE_NAME_PREFIX)) throw new Error(`${node} is not a node of tools/cluster.sh`);
  return path.join('/sys/fs/cgroup', hierarchy, `${NS_PREFIX}node${node.slice(NODE_NAME_PREFIX.length)}`);
}
/**
 * the node a process belongs to, from its `/proc/<pid>/cgroup` text (Pods: under the node's cgroup root) or its
 * command line (the node's kubelet, kube-proxy and containerd name `nodes/<node>/`, the shims the node's containerd
 * socket); undefined for the control plane and anything else
 */
export function nodeOfProcess(cgroup, cmdline) {
  const prefix = NS_PREFIX.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const c = new RegExp(`:/${prefix}node(\\d+)/`).exec(cgroup);
  if (c) return nodeName(Number(c[1]));
  const n = /\/nodes\/([^/\s]+)\/|kubevirt-ts-containerd-([^/\s]+)\/containerd\.sock/.exec(cmdline);
  return n ? (n[1] ?? n[2]) : undefined;
}
/** the node whose kubelet has the Pod's dir (a Pod lives on one node), or undefined when none has it */
export const nodeOfPodDir = (podUid) =>
  nodeNames().find((n) => existsSync(onNode(n, path.join(PODS_DIR, podUid))));

/**
 * The guest's serial log of a VMI in its launcher Pod (the private emptyDir), through the init of the node that has
 * the Pod's dir (with one node, that node's). With several nodes and no node having the dir yet (or any more): the
 * path inside a node (`/var/lib/kubelet/pods/...`), which the root namespace does not have, so reading it fails;
 * callers that keep the path should ask again once the Pod is bound (`spec.nodeName`) and its dir is there.
 */
export function serialLogPath(podUid, vmiUid) {
  const p = path.join(
    PODS_DIR,
    podUid,
    'volumes/kubernetes.io~empty-dir/private',
    vmiUid,
    'virt-serial0-log',
  );
  const nodes = nodeNames();
  const node = nodes.length === 1 ? nodes[0] : nodeOfPodDir(podUid);
  return node ? onNode(node, p) : p;
}

/** throws with what to do when the cluster is not up or deploy/ is not applied */
export function requireDeployedCluster(bench) {
  if (process.getuid?.() !== 0) throw new Error(`${bench}: run as root (the node runs as root)`);
  // the API server's address is inside the cluster's namespaces, reached through the root veth while it is up
  if (
    !existsSync(KUBECONFIG) ||
    !existsSync(`/run/netns/${NS_PREFIX}fabric`) ||
    !existsSync(`/sys/class/net/${NS_PREFIX}fab0`) ||
    nodeNames().length === 0
  )
    throw new Error(
      `${bench}: the cluster is not up (bash tools/cluster.sh up && bash tools/cluster.sh load-images)`,
    );
  if (!getJson('daemonset', '-n', 'kubevirt-ts', 'virt-handler'))
    throw new Error(
      `${bench}: deploy/ is not applied (bash tools/cluster.sh deploy: deploy/ pinned to the loaded images; useEmulation: true in the KubeVirt CR, as the cluster e2e sets it)`,
    );
}
