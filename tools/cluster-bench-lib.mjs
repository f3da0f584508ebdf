// What the cluster benchmarks (tools/bench-cluster.mjs, tools/bench-density.mjs) share: kubectl on the cluster of
// tools/cluster.sh, its audit log, polling, the tiny VM of examples/, and the checks that the node is up and deployed.
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
export const PODS_DIR = '/var/lib/kubelet/pods';
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

/** the guest's serial log of a VMI in its launcher Pod (the private emptyDir) */
export const serialLogPath = (podUid, vmiUid) =>
  path.join(PODS_DIR, podUid, 'volumes/kubernetes.io~empty-dir/private', vmiUid, 'virt-serial0-log');

/** throws with what to do when the cluster is not up or deploy/ is not applied */
export function requireDeployedCluster(bench) {
  if (process.getuid?.() !== 0) throw new Error(`${bench}: run as root (the node runs as root)`);
  if (!existsSync(KUBECONFIG) || !existsSync('/sys/class/net/kvts-node0'))
    throw new Error(
      `${bench}: the cluster is not up (bash tools/cluster.sh up && bash tools/cluster.sh load-images)`,
    );
  if (!getJson('daemonset', '-n', 'kubevirt-ts', 'virt-handler'))
    throw new Error(
      `${bench}: deploy/ is not applied (bash tools/cluster.sh deploy: deploy/ pinned to the loaded images; useEmulation: true in the KubeVirt CR, as the cluster e2e sets it)`,
    );
}
