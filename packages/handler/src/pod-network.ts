/**
 * Pod network phase 1 in the node agent (privileged), before the first SyncVirtualMachine of a VMI
 * with a masquerade/bridge pod interface: find the launcher Pod's network namespace in a way the Pod
 * cannot forge, run setupPodNetwork there once, and leave the resulting config for the launcher's
 * DHCP server (phase 2) in the Pod's share dir.
 *
 * Finding the namespace: never from a PID or path the Pod writes. The kernel's tables are the
 * source: the processes running as the launcher's uid, each one's listening unix sockets
 * (/proc/<pid>/net/unix: the sockets of its network namespace), the socket among its own file
 * descriptors (/proc/<pid>/fd -> socket:[inode]) whose bound path, resolved in that process's root
 * (/proc/<pid>/root), is the very file (device + inode) the handler talks to. Its /proc/<pid>/ns/net
 * is the Pod's network namespace; the node's own namespace is refused (a hostNetwork Pod).
 *
 * Once per Pod: the config is recorded in the handler's dir (`pod-network/<pod uid>.json`, trusted,
 * like the ghost records); a restarted handler that finds the record and the bridge/tap in place does
 * not set up again. The Pod's namespace dies with the Pod, and every device and rule with it: no
 * teardown.
 */
import { constants as fsc } from 'node:fs';
import {
  lstat,
  mkdir,
  open,
  readFile,
  readdir,
  readlink,
  rename,
  rm,
  stat,
  writeFile,
} from 'node:fs/promises';
import path from 'node:path';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { LAUNCHER_SOCKET_NAME } from '@kubevirt-ts/cmd-protocol';
import type { Logger } from '@kubevirt-ts/log';
import {
  NetworkSetupError,
  ipJson,
  parsePodNetworkConfig,
  planPodNetwork,
  setupPodNetwork,
  writePodNetworkConfig,
  type PodNetworkConfig,
  type PodNetworkPlan,
} from '@kubevirt-ts/network';

const LAUNCHER_INIT_SOCKET_NAME = 'launcher-init-sock';
const SO_ACCEPTCON = 0x10000; // /proc/net/unix Flags of a listening socket

export interface LauncherProcess {
  pid: number;
  /** /proc/<pid>/ns/net */
  netns: string;
}

async function uidsOf(procDir: string, pid: string): Promise<number[] | undefined> {
  try {
    const status = await readFile(path.join(procDir, pid, 'status'), 'utf8');
    const m = /^Uid:\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)/m.exec(status);
    return m ? m.slice(1).map(Number) : undefined;
  } catch {
    return undefined; // gone
  }
}

/** inode -> bound path of the listening unix sockets named like a launcher's cmd socket. */
function listeningLauncherSockets(netUnix: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of netUnix.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 8) continue;
    const [, , , flags, , , inode, ...rest] = f;
    const p = rest.join(' ');
    const base = path.posix.basename(p);
    if ((parseInt(flags!, 16) & SO_ACCEPTCON) === 0) continue;
    if (base !== LAUNCHER_SOCKET_NAME && base !== LAUNCHER_INIT_SOCKET_NAME) continue;
    out.set(inode!, p);
  }
  return out;
}

/**
 * `p` (absolute) as the process whose root is `root` (/proc/<pid>/root) sees it: every symlink on the way is
 * followed inside that root (an absolute target starts again at `root`), never in the handler's own (the
 * launcher image's /var/run is a link to /run). The last component is not followed. Undefined when a
 * component is missing or the links loop.
 */
export async function resolveInRoot(root: string, p: string): Promise<string | undefined> {
  const todo = p.split('/').filter(Boolean);
  const done: string[] = [];
  let links = 0;
  while (todo.length > 0) {
    const c = todo.shift()!;
    if (c === '.') continue;
    if (c === '..') {
      done.pop(); // never above the root
      continue;
    }
    if (todo.length === 0) {
      done.push(c);
      break;
    }
    const here = path.join(root, ...done, c);
    const target = await readlink(here).catch((e: NodeJS.ErrnoException) =>
      e.code === 'EINVAL' ? null : undefined,
    );
    if (target === undefined) return undefined; // missing
    if (target === null) {
      done.push(c); // not a link
      continue;
    }
    if (++links > 40) return undefined;
    if (target.startsWith('/')) done.length = 0;
    todo.unshift(...target.split('/').filter(Boolean));
  }
  return path.join(root, ...done);
}

/**
 * The process that listens on the launcher socket `socketPath` (as the handler sees it), running as
 * `uid`, and its network namespace. Throws a NetworkSetupError when there is none, or when it is the
 * node's own network namespace.
 */
export async function findLauncherProcess(
  socketPath: string,
  uid: number,
  procDir = '/proc',
  /** the caller wants the process only (e.g. its root for the migration proxy), not its network */
  opts: { allowNodeNetwork?: boolean } = {},
): Promise<LauncherProcess> {
  const target = await stat(socketPath);
  const ownNetns = await stat(path.join(procDir, 'self', 'ns', 'net'));
  for (const pid of await readdir(procDir)) {
    if (!/^\d+$/.test(pid)) continue;
    const uids = await uidsOf(procDir, pid);
    if (!uids || uids.some((u) => u !== uid)) continue;
    let sockets: Map<string, string>;
    let fds: string[];
    try {
      sockets = listeningLauncherSockets(await readFile(path.join(procDir, pid, 'net', 'unix'), 'utf8'));
      if (sockets.size === 0) continue;
      fds = await readdir(path.join(procDir, pid, 'fd'));
    } catch {
      continue; // gone, or not ours to read
    }
    for (const fd of fds) {
      const link = await readlink(path.join(procDir, pid, 'fd', fd)).catch(() => '');
      const m = /^socket:\[(\d+)\]$/.exec(link);
      const bound = m && sockets.get(m[1]!);
      if (!bound) continue;
      // the bound name may be launcher-init-sock, renamed to launcher-sock when ready
      const root = path.join(procDir, pid, 'root');
      for (const name of [bound, path.posix.join(path.posix.dirname(bound), LAUNCHER_SOCKET_NAME)]) {
        const inRoot = await resolveInRoot(root, name);
        const st = inRoot && (await lstat(inRoot).catch(() => undefined)); // the socket itself, never a link
        if (!st || st.dev !== target.dev || st.ino !== target.ino) continue;
        const netns = path.join(procDir, pid, 'ns', 'net');
        const ns = await stat(netns);
        if (!opts.allowNodeNetwork && ns.ino === ownNetns.ino && ns.dev === ownNetns.dev)
          throw new NetworkSetupError(
            `the launcher behind ${socketPath} (pid ${pid}) runs in the node's network namespace: ` +
              `refusing to set up a Pod network there`,
          );
        return { pid: Number(pid), netns };
      }
    }
  }
  throw new NetworkSetupError(
    `no process of uid ${uid} listens on ${socketPath}: cannot find the Pod's network namespace`,
  );
}

const TUN_MAJOR = 10;
const TUN_MINOR = 200;

/**
 * Gives the launcher's user the Pod's /dev/net/tun. The device plugin (devices.kubevirt.io/tun) puts the node
 * in the container with the host's mode and owner (root, 0600 here), so libvirt/QEMU as uid 107 could not open
 * it to attach to the tap phase 1 made (upstream's handler chowns it too). The node is reached through the
 * launcher process's root (/proc/<pid>/root, hostPID), opened without following a link, and changed only when
 * it is the tun character device (10:200) and neither the node's own /dev/net/tun (`hostRoot`) nor the
 * handler's: a container's device node is its own inode on the container's /dev, so nothing outside the Pod
 * changes.
 */
export async function prepareTun(
  pid: number,
  uid: number,
  gid = uid,
  procDir = '/proc',
  hostRoot = path.join(procDir, '1', 'root'),
): Promise<void> {
  const tun = path.join(procDir, String(pid), 'root', 'dev', 'net', 'tun');
  let fh;
  try {
    fh = await open(tun, fsc.O_RDONLY | fsc.O_NOFOLLOW | fsc.O_NONBLOCK | fsc.O_NOCTTY);
  } catch (e) {
    throw new NetworkSetupError(
      `cannot open /dev/net/tun in the launcher Pod (pid ${pid}; is devices.kubevirt.io/tun allocated?): ${
        (e as NodeJS.ErrnoException).code ?? (e as Error).message
      }`,
    );
  }
  try {
    const st = await fh.stat();
    const major = Math.floor(st.rdev / 256) & 0xfff;
    const minor = (st.rdev & 0xff) | ((st.rdev >> 12) & 0xfff00);
    if (!st.isCharacterDevice() || major !== TUN_MAJOR || minor !== TUN_MINOR)
      throw new NetworkSetupError(
        `/dev/net/tun in the launcher Pod (pid ${pid}) is not the tun device: not touching it`,
      );
    // the node's node (through PID 1's root: hostPID) and the handler's own; either may be unreachable, but
    // the launcher's must be neither
    for (const own of [path.join(hostRoot, 'dev', 'net', 'tun'), '/dev/net/tun']) {
      const o = await stat(own).catch(() => undefined);
      if (o && o.dev === st.dev && o.ino === st.ino)
        throw new NetworkSetupError(
          `/dev/net/tun in the launcher Pod (pid ${pid}) is the node's own device node: not changing its owner`,
        );
    }
    if (st.uid !== uid || st.gid !== gid) await fh.chown(uid, gid);
  } finally {
    await fh.close();
  }
}

/** Whether phase 1's bridge and tap exist in `netns`. */
async function devicesPresent(plan: PodNetworkPlan, netns: string): Promise<boolean[]> {
  const has = (dev: string) =>
    ipJson<unknown[]>(['link', 'show', 'dev', dev], { netns }).then(
      (l) => l.length > 0,
      () => false,
    );
  return Promise.all([has(plan.bridge), has(plan.tap)]);
}

/** The launcher a VMI is synced to, as the controller knows it. */
export interface LauncherRef {
  socketPath: string;
  podUid: string;
  /** the Pod's /var/run/kubevirt as the handler reaches it (the launcher's --kubevirt-share-dir) */
  shareDir: string;
}

export interface PodNetworkSetupOptions {
  launcherUid: number;
  handlerDir: string;
  log: Logger;
  procDir?: string;
  /** the node's root as the handler sees it (default /proc/1/root: hostPID) */
  hostRoot?: string;
}

const POD_UID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export function podNetworkRecord(handlerDir: string, podUid: string): string {
  if (!POD_UID_RE.test(podUid)) throw new Error(`pod uid ${JSON.stringify(podUid)} cannot be a file name`);
  return path.join(handlerDir, 'pod-network', `${podUid}.json`);
}

/** The config phase 1 recorded for a Pod (the handler's own file), undefined when there is none. */
export async function recordedPodNetwork(
  handlerDir: string,
  podUid: string,
): Promise<PodNetworkConfig | undefined> {
  if (!POD_UID_RE.test(podUid)) return undefined;
  try {
    return JSON.parse(await readFile(podNetworkRecord(handlerDir, podUid), 'utf8')) as PodNetworkConfig;
  } catch {
    return undefined;
  }
}

/**
 * The addresses status.interfaces reports for the pod interface, as upstream does: with masquerade the Pod's
 * (IPv4, then IPv6 when the Pod has it), the guest being behind NAT; with bridge the address the guest got
 * (the Pod's former one).
 */
export function podInterfaceAddresses(config: PodNetworkConfig): string[] {
  if (config.binding === 'bridge') return [config.guest.address];
  return [config.podAddress, ...(config.ipv6 ? [config.ipv6.podAddress] : [])];
}

/** Forgets the record of a Pod (its namespace is gone with it). */
export async function forgetPodNetwork(handlerDir: string, podUid: string): Promise<void> {
  if (POD_UID_RE.test(podUid)) await rm(podNetworkRecord(handlerDir, podUid), { force: true });
}

/**
 * Phase 1 for `vmi` behind launcher `l`; resolves once the config is in the launcher's share dir.
 * Nothing to do without a masquerade/bridge pod interface. Idempotent per Pod.
 */
export async function setUpPodNetwork(
  vmi: VirtualMachineInstance,
  l: LauncherRef,
  o: PodNetworkSetupOptions,
): Promise<PodNetworkConfig | undefined> {
  const plan = planPodNetwork(vmi);
  if (!plan || plan.binding === 'passt') return undefined;
  const ids = { namespace: vmi.metadata.namespace, name: vmi.metadata.name, uid: vmi.metadata.uid };
  const { pid, netns } = await findLauncherProcess(l.socketPath, o.launcherUid, o.procDir);
  const recordFile = podNetworkRecord(o.handlerDir, l.podUid);
  const recorded = await readFile(recordFile, 'utf8').then(
    (t) => parsePodNetworkConfig(t, plan, recordFile),
    () => undefined,
  );
  await prepareTun(pid, o.launcherUid, o.launcherUid, o.procDir, o.hostRoot);
  const [bridge, tap] = await devicesPresent(plan, netns);
  let config: PodNetworkConfig;
  if (recorded && bridge && tap) {
    o.log.info('Pod network already set up', { ...ids, pid, bridge: plan.bridge });
    config = recorded;
  } else if (bridge || tap) {
    throw new NetworkSetupError(
      `${bridge ? plan.bridge : plan.tap} already exists in the Pod's network namespace (pid ${pid}) ` +
        `but this handler has no record of setting it up (${recordFile}): not touching it`,
    );
  } else {
    const t0 = Date.now();
    config = await setupPodNetwork(plan, { netns, log: o.log });
    await mkdir(path.dirname(recordFile), { recursive: true, mode: 0o700 });
    await writeFile(`${recordFile}.tmp`, JSON.stringify(config), { mode: 0o600 });
    await rename(`${recordFile}.tmp`, recordFile);
    o.log.info('Pod network set up', {
      ...ids,
      pid,
      binding: plan.binding,
      podInterface: plan.podInterface,
      ms: Date.now() - t0,
    });
  }
  writePodNetworkConfig(l.shareDir, plan.interfaceName, config);
  return config;
}
