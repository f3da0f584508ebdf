#!/usr/bin/env node
// npm run bench:migration — migration through the two-node cluster (tools/cluster.sh up --nodes 2, load-images,
// deploy with useEmulation; root) against raw `virsh migrate` between the same two nodes, and a drain (issue 31).
//
//   1. cluster: examples/vm-tiny.yaml (VM `bench-mig`) moved between the nodes by a VirtualMachineInstanceMigration,
//      --rounds times (alternating direction). Per round: total time (VMIM created -> phase Succeeded, and -> the VMI
//      handed off to the target node), the launcher's migrateToURI3 time ("Live migration succeeded." seconds in the
//      source launcher's log), the VMI's migrationState start -> end, and the guest-visible downtime: the largest gap
//      in host time between two consecutive `KUBEVIRT-TS-GUEST-HEARTBEAT` lines (one a second) across the two
//      launcher Pods' serial logs, less the 1 s period. libvirt's own downtime figure ("Total downtime" of
//      `virsh domjobinfo --completed` on the source) only when the source launcher's libvirtd still answers (it
//      usually exits with its Pod first: then "n/a").
//   2. raw virsh: a session libvirtd (uid 107, as in the launcher) per node, run inside that node's mount and network
//      namespaces (a mount namespace of its own on top, with the root PID namespace's /proc, so libvirtd can look up
//      its clients), with its config/run/cache dirs and the guest's files in a node-private dir
//      (`/var/lib/kubevirt-ts/bench-migration-<pid>`). The same guest: the test kernel/initramfs, 128 MiB, 1 vCPU,
//      TCG (`<domain type='qemu'>`), a qcow2 overlay over a blank 64 MiB qcow2 (the containerDisk's shape), the serial
//      console logged to a file, no NIC. `virsh migrate --persistent --copy-storage-inc` (a block migration of the
//      overlay, as the cluster's BlockMigration) with `--migrateuri tcp://<target node>:49400`,
//      `--disks-uri tcp://<target node>:49401`, `--listen-address <target node>`: non-live (the guest paused for the
//      transfer: what the launcher does on QEMU < 9.0 with TCG, the like-for-like reference) and `--live`. Per
//      migration: the wall time of `virsh migrate`, the heartbeat gap, and "Total downtime" from
//      `virsh domjobinfo --completed` on the source.
//   3. drain: --vms (5) tiny VMs with `evictionStrategy: LiveMigrate` started on node 1 (node 2 cordoned meanwhile),
//      then `kubectl drain kvts-node1 --ignore-daemonsets --delete-emptydir-data`: the time until the drain returns
//      and until every VMI runs on node 2 with no launcher Pod left on node 1, each VM's migration times, and that no
//      guest rebooted (no KUBEVIRT-TS-GUEST-READY line in the target launcher's serial log, heartbeats there);
//      `kubectl uncordon` afterwards.
// Prints human-readable lines and a final JSON line (`{"bench":"migration",...}`). Everything it creates is removed.
// Usage: node tools/bench-migration.mjs [--rounds N] [--vms N] [--parts virsh,cluster,drain] [--lock FILE]
//   --lock FILE: each part holds `flock FILE` only while it runs (a cluster shared with other users)
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chown, copyFile, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import {
  KUBECONFIG,
  KUBECTL,
  READY,
  cache,
  getJson,
  kubectl,
  kubectlIn,
  median,
  nodeAddress,
  nodeInitPid,
  nodeNames,
  nodeNetns,
  onNode,
  percentile,
  requireDeployedCluster,
  serialLogPath,
  until,
  vmManifest,
} from './cluster-bench-lib.mjs';

const run = promisify(execFile);
const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const ROUNDS = Number(arg('--rounds', '5'));
const VMS = Number(arg('--vms', '5'));
const PARTS = arg('--parts', 'virsh,cluster,drain').split(',');
const LOCK = arg('--lock', undefined);
for (const p of PARTS)
  if (!['virsh', 'cluster', 'drain'].includes(p))
    throw new Error(`--parts: unknown part ${p} (virsh, cluster, drain)`);
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error('--rounds: a positive integer');
if (!Number.isInteger(VMS) || VMS < 1) throw new Error('--vms: a positive integer');
const NS = 'default';
const HEARTBEAT = /KUBEVIRT-TS-GUEST-HEARTBEAT (\d+) /g;
const QEMU_UID = 107;
const MIGRATION_PORT = 49400;
const DISKS_PORT = 49401;
const s = (ms) => Math.round(ms) / 1000;
const stats = (a) =>
  a.length
    ? { median: median(a), p95: percentile(a, 95), min: Math.min(...a), max: Math.max(...a) }
    : undefined;
const fmt = (st, unit = 's') =>
  st ? `median ${st.median} ${unit}, p95 ${st.p95} ${unit} (min ${st.min}, max ${st.max})` : 'n/a';

/** `flock FILE cat`: held once cat echoes the line written to it; released by closing its stdin */
async function withLock(what, fn) {
  if (!LOCK) return fn();
  const t0 = Date.now();
  const holder = spawn('flock', [LOCK, 'cat'], { stdio: ['pipe', 'pipe', 'inherit'] });
  holder.stdin.write('held\n');
  await new Promise((resolve, reject) => {
    holder.stdout.once('data', resolve);
    holder.once('exit', (code) => reject(new Error(`flock ${LOCK} exited with ${code}`)));
  });
  console.log(`[${what}: ${LOCK} held after ${s(Date.now() - t0)} s of waiting]`);
  try {
    return await fn();
  } finally {
    holder.stdin.end();
    await new Promise((r) => (holder.exitCode === null ? holder.once('exit', r) : r()));
  }
}

/**
 * Host time of arrival of each heartbeat (by its counter) and the ready lines, over serial logs polled every 50 ms
 * (files may appear later and vanish: what was read is kept).
 */
class Beats {
  seen = new Map(); // counter -> first host time (ms)
  ready = new Map(); // file key -> number of READY lines
  files = new Map(); // key -> () => path | undefined
  texts = new Map();
  constructor() {
    this.timer = setInterval(() => void this.poll(), 50);
  }
  add(key, pathFn) {
    if (!this.files.has(key)) this.files.set(key, pathFn);
  }
  async poll() {
    if (this.polling) return;
    this.polling = true;
    try {
      for (const [key, fn] of this.files) {
        let p;
        try {
          p = fn();
        } catch {
          p = undefined;
        }
        if (!p) continue;
        const t = await readFile(p, 'utf8').catch(() => undefined);
        if (t === undefined || t.length <= (this.texts.get(key)?.length ?? 0)) continue;
        const now = Date.now();
        this.texts.set(key, t);
        for (const m of t.matchAll(HEARTBEAT)) {
          const n = Number(m[1]);
          if (!this.seen.has(n)) this.seen.set(n, now);
        }
        this.ready.set(key, t.split(READY).length - 1);
      }
    } finally {
      this.polling = false;
    }
  }
  text(key) {
    return this.texts.get(key) ?? '';
  }
  beatsIn(key) {
    return [...this.text(key).matchAll(HEARTBEAT)].map((m) => Number(m[1]));
  }
  /** the last counter seen anywhere */
  last() {
    return Math.max(0, ...this.seen.keys());
  }
  /** the largest host-time gap between consecutive counters from..to, and the counters missing in that range */
  gap(from, to) {
    let max = 0;
    let missing = 0;
    let prev;
    for (let n = from; n <= to; n++) {
      const t = this.seen.get(n);
      if (t === undefined) {
        missing++;
        continue;
      }
      if (prev !== undefined) max = Math.max(max, t - prev);
      prev = t;
    }
    return { gapMs: max, missing };
  }
  stop() {
    clearInterval(this.timer);
  }
}

// ---------------------------------------------------------------------------------------------- raw virsh
const DOM = 'bench-mig';

/** "Total downtime" and "Time elapsed" (ms) of `virsh domjobinfo --completed` output */
function jobInfo(text) {
  const num = (k) => {
    const m = new RegExp(`^${k}:\\s+(\\d+)\\s+ms`, 'm').exec(text);
    return m ? Number(m[1]) : undefined;
  };
  return { downtimeMs: num('Total downtime'), elapsedMs: num('Time elapsed') };
}

async function virshPart() {
  const [n1, n2] = nodeNames();
  const dir = `/var/lib/kubevirt-ts/bench-migration-${process.pid}`; // inside each node (node-private)
  const daemons = [];
  const virsh = (node, ...a) =>
    run(
      'virsh',
      ['-c', `qemu+unix:///session?socket=${onNode(node, `${dir}/run/libvirt/libvirt-sock`)}`, ...a],
      {
        encoding: 'utf8',
      },
    );
  const beats = new Beats();
  const guestDir = path.join(cache, 'guest');
  for (const f of ['vmlinuz', 'initramfs.img'])
    if (!existsSync(path.join(guestDir, f)))
      throw new Error(`${guestDir}/${f} missing: bash tools/guest/build.sh`);
  const overlay = async (node) => {
    const p = onNode(node, `${dir}/img/overlay.qcow2`);
    await rm(p, { force: true });
    // -u: the backing path is the node's, which the root namespace does not have
    await run('qemu-img', [
      'create',
      '-q',
      '-f',
      'qcow2',
      '-u',
      '-b',
      `${dir}/img/base.qcow2`,
      '-F',
      'qcow2',
      p,
      '64M',
    ]);
    await chown(p, QEMU_UID, QEMU_UID);
  };
  const result = {};
  try {
    for (const node of [n1, n2]) {
      const root = onNode(node, dir);
      for (const d of ['config/libvirt', 'run', 'cache', 'home', 'img'])
        await mkdir(path.join(root, d), { recursive: true });
      await writeFile(path.join(root, 'config/libvirt/libvirtd.conf'), `host_uuid = "${randomUUID()}"\n`);
      for (const f of ['vmlinuz', 'initramfs.img'])
        await copyFile(path.join(guestDir, f), path.join(root, 'img', f));
      await run('qemu-img', ['create', '-q', '-f', 'qcow2', path.join(root, 'img/base.qcow2'), '64M']);
      await run('chown', ['-R', `${QEMU_UID}:${QEMU_UID}`, root]);
      await overlay(node);
      // the node's mount and network namespaces; a mount namespace of its own with the root PID namespace's /proc
      // (the node's /proc is its own PID namespace's, where libvirtd would not find itself or its clients)
      const d = spawn(
        'nsenter',
        [
          `--target=${nodeInitPid(node)}`,
          '--mount',
          '--net',
          'unshare',
          '--mount',
          '--mount-proc',
          'env',
          '-i',
          `HOME=${dir}/home`,
          `XDG_CONFIG_HOME=${dir}/config`,
          `XDG_RUNTIME_DIR=${dir}/run`,
          `XDG_CACHE_HOME=${dir}/cache`,
          'PATH=/usr/sbin:/usr/bin:/sbin:/bin',
          'setpriv',
          `--reuid=${QEMU_UID}`,
          `--regid=${QEMU_UID}`,
          '--clear-groups',
          '--pdeathsig=TERM',
          '/usr/sbin/libvirtd',
          '--timeout=0',
        ],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let err = '';
      d.stderr.on('data', (b) => (err = (err + b).slice(-4000)));
      daemons.push({ node, proc: d, err: () => err });
    }
    for (const { node } of daemons)
      await until(
        `libvirtd on ${node}`,
        () =>
          virsh(node, 'version').then(
            () => true,
            () => false,
          ),
        30_000,
        200,
      );
    const xml = `<domain type='qemu'>
  <name>${DOM}</name>
  <memory unit='MiB'>128</memory>
  <vcpu>1</vcpu>
  <os><type arch='x86_64' machine='q35'>hvm</type>
    <kernel>${dir}/img/vmlinuz</kernel><initrd>${dir}/img/initramfs.img</initrd>
    <cmdline>console=ttyS0 quiet kvts.disks</cmdline></os>
  <features><acpi/></features>
  <cpu mode='custom' match='exact'><model fallback='allow'>qemu64</model></cpu>
  <on_poweroff>destroy</on_poweroff>
  <devices>
    <disk type='file' device='disk'><driver name='qemu' type='qcow2' cache='none'/><source file='${dir}/img/overlay.qcow2'/><target dev='vda' bus='virtio'/></disk>
    <serial type='unix'><source mode='bind' path='${dir}/serial.sock'/><log file='${dir}/serial.log' append='on'/><target port='0'/></serial>
    <console type='unix'><source mode='bind' path='${dir}/serial.sock'/><target type='serial' port='0'/></console>
    <memballoon model='none'/>
  </devices>
</domain>
`;
    await writeFile(onNode(n1, `${dir}/domain.xml`), xml);
    await virsh(n1, 'define', onNode(n1, `${dir}/domain.xml`));
    for (const node of [n1, n2]) beats.add(node, () => onNode(node, `${dir}/serial.log`));
    const tBoot = Date.now();
    await virsh(n1, 'start', DOM);
    await until('the raw guest ready (virsh)', () => beats.ready.get(n1) > 0, 300_000, 200);
    console.log(`virsh: guest started on ${n1}, ready after ${s(Date.now() - tBoot)} s`);
    await until('heartbeats', () => beats.beatsIn(n1).length >= 2, 60_000, 200);

    let at = n1;
    for (const mode of ['paused', 'live']) {
      const runs = [];
      for (let r = 0; r < ROUNDS; r++) {
        const to = at === n1 ? n2 : n1;
        await overlay(to); // a fresh overlay over the same base, as a target launcher Pod's containerDisk overlay
        const ip = nodeAddress(to);
        const readyBefore = beats.ready.get(to) ?? 0;
        const first = beats.last();
        const t0 = Date.now();
        await virsh(
          at,
          'migrate',
          ...(mode === 'live' ? ['--live'] : []),
          '--persistent',
          '--copy-storage-inc',
          DOM,
          `qemu+unix:///session?socket=${onNode(to, `${dir}/run/libvirt/libvirt-sock`)}`,
          '--migrateuri',
          `tcp://${ip}:${MIGRATION_PORT}`,
          '--disks-uri',
          `tcp://${ip}:${DISKS_PORT}`,
          '--listen-address',
          ip,
        );
        const totalMs = Date.now() - t0;
        const info = jobInfo((await virsh(at, 'domjobinfo', '--completed', DOM)).stdout);
        await until(
          `heartbeats on ${to}`,
          () => beats.beatsIn(to).filter((n) => n > first).length >= 2,
          60_000,
          100,
        );
        const { gapMs, missing } = beats.gap(first, beats.last());
        const rebooted = (beats.ready.get(to) ?? 0) > readyBefore;
        if (rebooted)
          throw new Error(`virsh ${mode}: the guest rebooted on ${to} (a ready line in its serial log)`);
        const row = {
          from: at,
          to,
          totalS: s(totalMs),
          heartbeatGapS: s(gapMs),
          downtimeS: s(Math.max(0, gapMs - 1000)),
          missingBeats: missing,
          libvirtDowntimeS: info.downtimeMs === undefined ? undefined : s(info.downtimeMs),
          libvirtElapsedS: info.elapsedMs === undefined ? undefined : s(info.elapsedMs),
        };
        runs.push(row);
        console.log(
          `virsh ${mode} ${r + 1}/${ROUNDS} ${at} -> ${to}: ${row.totalS} s (libvirt job ${row.libvirtElapsedS} s), heartbeat gap ${row.heartbeatGapS} s (guest-visible downtime ~${row.downtimeS} s, ${missing} beats missing), libvirt total downtime ${row.libvirtDowntimeS} s`,
        );
        at = to;
      }
      result[mode] = {
        runs,
        totalS: stats(runs.map((x) => x.totalS)),
        downtimeS: stats(runs.map((x) => x.downtimeS)),
        libvirtDowntimeS: stats(runs.map((x) => x.libvirtDowntimeS).filter((x) => x !== undefined)),
      };
    }
  } finally {
    beats.stop();
    for (const { node } of daemons) {
      await virsh(node, 'destroy', DOM).catch(() => undefined);
      await virsh(node, 'undefine', DOM).catch(() => undefined);
    }
    for (const { proc } of daemons) {
      if (proc.exitCode === null && proc.signalCode === null) {
        const gone = new Promise((r) => proc.once('exit', r));
        proc.kill('SIGTERM');
        const t = setTimeout(() => proc.kill('SIGKILL'), 10_000);
        await gone;
        clearTimeout(t);
      }
    }
    // nothing of ours left: no QEMU of this dir, then the dirs
    const left = (await run('ps', ['-eo', 'pid=,args='], { encoding: 'utf8' })).stdout
      .split('\n')
      .filter((l) => l.includes(dir));
    if (left.length) console.log(`virsh: left processes (killed): ${left.join('; ')}`);
    for (const l of left) {
      try {
        process.kill(Number(l.trim().split(/\s+/)[0]), 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    for (const node of [n1, n2])
      await rm(onNode(node, dir), { recursive: true, force: true }).catch(() => undefined);
  }
  for (const mode of ['paused', 'live'])
    console.log(
      `virsh ${mode}: total ${fmt(result[mode].totalS)}; guest-visible downtime ${fmt(result[mode].downtimeS)}; libvirt total downtime ${fmt(result[mode].libvirtDowntimeS)}`,
    );
  return result;
}

// ---------------------------------------------------------------------------------------------- cluster
const launcherPods = (vmiUid) =>
  (getJson('pods', '-n', NS, '-l', `kubevirt.io/created-by=${vmiUid}`)?.items ?? []).filter(
    (p) => !p.metadata.deletionTimestamp,
  );

async function applyVms(manifest) {
  // the admission webhook may not answer for a moment after a virt-controller restart
  await until(
    'the VMs applied',
    () => {
      try {
        kubectlIn(manifest, 'apply', '-f', '-');
        return true;
      } catch (e) {
        if (!/failed calling webhook/.test(String(e.stderr ?? e))) throw e;
        return false;
      }
    },
    120_000,
    2000,
  );
}

async function vmRunning(name, beats) {
  const vmi = await until(
    `VMI ${name} Running and LiveMigratable`,
    () => {
      const v = getJson('vmi', '-n', NS, name);
      const ok = v?.status?.conditions?.some((c) => c.type === 'LiveMigratable' && c.status === 'True');
      return v?.status?.phase === 'Running' && ok ? v : undefined;
    },
    600_000,
    500,
  );
  const pod = launcherPods(vmi.metadata.uid)[0];
  beats.add(pod.metadata.uid, () => serialLogPath(pod.metadata.uid, vmi.metadata.uid));
  await until(`${name}: guest ready line`, () => beats.ready.get(pod.metadata.uid) > 0, 600_000, 500);
  await until(`${name}: heartbeats`, () => beats.beatsIn(pod.metadata.uid).length >= 2, 120_000, 500);
  return { vmi, pod };
}

/**
 * libvirt's figures of the outgoing migration in the source launcher: `virsh event --event job-completed` on its
 * libvirtd (the event carries the completed job's statistics, downtime among them; `domjobinfo --completed` cannot be
 * asked afterwards: the launcher and its container are gone by the time the VMIM is Succeeded). Resolves with the
 * event's text once virsh exits; `stop()` ends it.
 */
function launcherJobEvent(pod, domain) {
  const p = spawn(
    KUBECTL,
    [
      '--kubeconfig',
      KUBECONFIG,
      'exec',
      '-n',
      NS,
      pod,
      '-c',
      'compute',
      '--',
      'virsh',
      '-c',
      'qemu+unix:///session?socket=/var/run/libvirt/run/libvirt/libvirt-sock',
      'event',
      domain,
      '--event',
      'job-completed',
      '--timeout',
      '600',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let text = '';
  p.stdout.on('data', (b) => (text += b));
  p.stderr.on('data', (b) => (text += b));
  const done = new Promise((r) => p.once('exit', () => r(text)));
  return { done, stop: () => p.kill() };
}

async function clusterPart() {
  const name = 'bench-mig';
  const beats = new Beats();
  const runs = [];
  try {
    await applyVms(vmManifest(name));
    let { vmi, pod } = await vmRunning(name, beats);
    console.log(
      `cluster: VM ${name} Running on ${vmi.status.nodeName}, migrationMethod ${vmi.status.migrationMethod}`,
    );
    for (let r = 0; r < ROUNDS; r++) {
      const source = vmi.status.nodeName;
      const first = beats.last();
      const logs = spawn(
        KUBECTL,
        [
          '--kubeconfig',
          KUBECONFIG,
          'logs',
          '-f',
          '-n',
          NS,
          pod.metadata.name,
          '-c',
          'compute',
          '--since=5s',
        ],
        {
          stdio: ['ignore', 'pipe', 'ignore'],
        },
      );
      let log = '';
      logs.stdout.on('data', (b) => (log += b));
      const event = launcherJobEvent(pod.metadata.name, `${NS}_${name}`);
      await sleep(500); // virsh connected and registered before the migration starts
      const t0 = Date.now();
      const vmim = JSON.parse(
        kubectlIn(
          JSON.stringify({
            apiVersion: 'kubevirt.io/v1',
            kind: 'VirtualMachineInstanceMigration',
            metadata: { generateName: `${name}-`, namespace: NS },
            spec: { vmiName: name },
          }),
          'create',
          '-f',
          '-',
          '-o',
          'json',
        ),
      ).metadata.name;
      // follow the target Pod's serial log as soon as it exists
      let target;
      const m = await until(
        `migration ${vmim} final`,
        () => {
          if (!target) {
            target = launcherPods(vmi.metadata.uid).find((p) => p.metadata.uid !== pod.metadata.uid);
            if (target) {
              const uid = target.metadata.uid;
              beats.add(uid, () => serialLogPath(uid, vmi.metadata.uid));
            }
          }
          const x = getJson('vmim', '-n', NS, vmim);
          return ['Succeeded', 'Failed'].includes(x?.status?.phase) ? x : undefined;
        },
        600_000,
        100,
      );
      const succeededMs = Date.now() - t0;
      if (m.status.phase !== 'Succeeded')
        throw new Error(`migration ${vmim} ${m.status.phase}: ${JSON.stringify(m.status.conditions)}`);
      const now = await until(
        `VMI handed off`,
        () => {
          const v = getJson('vmi', '-n', NS, name);
          return v?.status?.nodeName && v.status.nodeName !== source ? v : undefined;
        },
        120_000,
        100,
      );
      const handoffMs = Date.now() - t0;
      const tuid = target.metadata.uid;
      await until(
        'heartbeats in the target Pod',
        () => beats.beatsIn(tuid).filter((n) => n > first).length >= 2,
        120_000,
        100,
      );
      if ((beats.ready.get(tuid) ?? 0) > 0)
        throw new Error(`the guest rebooted in the target Pod ${target.metadata.name}`);
      const { gapMs, missing } = beats.gap(first, beats.last());
      const ms = now.status.migrationState;
      const launcherS = Number(
        /"Live migration succeeded\."[^\n]*?"seconds":\s*([\d.]+)/.exec(log)?.[1] ?? NaN,
      );
      logs.kill();
      const evText = await Promise.race([event.done, sleep(5000).then(() => undefined)]);
      event.stop();
      const downtime = /downtime:\s*(\d+)/.exec(evText ?? '');
      const job = downtime
        ? { downtimeMs: Number(downtime[1]) }
        : { error: (evText ?? 'no job-completed event within 5 s').trim().split('\n').slice(-1)[0] };
      const row = {
        from: source,
        to: now.status.nodeName,
        vmim,
        totalS: s(succeededMs),
        handoffS: s(handoffMs),
        migrationStateS: s(Date.parse(ms.endTimestamp) - Date.parse(ms.startTimestamp)),
        launcherMigrateS: Number.isFinite(launcherS) ? launcherS : undefined,
        heartbeatGapS: s(gapMs),
        downtimeS: s(Math.max(0, gapMs - 1000)),
        missingBeats: missing,
        libvirtDowntimeS: job.downtimeMs === undefined ? undefined : s(job.downtimeMs),
        libvirtError: job.error,
      };
      runs.push(row);
      console.log(
        `cluster ${r + 1}/${ROUNDS} ${row.from} -> ${row.to}: VMIM created -> Succeeded ${row.totalS} s, -> handed off ${row.handoffS} s, migrationState ${row.migrationStateS} s, launcher migrateToURI3 ${row.launcherMigrateS ?? 'n/a'} s, heartbeat gap ${row.heartbeatGapS} s (guest-visible downtime ~${row.downtimeS} s, ${missing} beats missing), libvirt total downtime ${row.libvirtDowntimeS ?? `n/a (${row.libvirtError})`}`,
      );
      // the next round starts from one launcher Pod: the source's gone
      await until(
        'the source launcher Pod gone',
        () => !launcherPods(vmi.metadata.uid).some((p) => p.metadata.uid === pod.metadata.uid),
        300_000,
        500,
      );
      vmi = now;
      pod = launcherPods(vmi.metadata.uid)[0];
    }
  } finally {
    beats.stop();
    kubectl('delete', 'vm', '-n', NS, name, '--ignore-not-found', '--wait=true', '--timeout=300s');
    for (const m of getJson('vmim', '-n', NS)?.items ?? [])
      if (m.spec.vmiName === name) kubectl('delete', 'vmim', '-n', NS, m.metadata.name, '--ignore-not-found');
  }
  const out = {
    runs,
    totalS: stats(runs.map((x) => x.totalS)),
    handoffS: stats(runs.map((x) => x.handoffS)),
    launcherMigrateS: stats(runs.map((x) => x.launcherMigrateS).filter((x) => x !== undefined)),
    downtimeS: stats(runs.map((x) => x.downtimeS)),
    libvirtDowntimeS: stats(runs.map((x) => x.libvirtDowntimeS).filter((x) => x !== undefined)),
  };
  console.log(
    `cluster: VMIM -> Succeeded ${fmt(out.totalS)}; -> handed off ${fmt(out.handoffS)}; launcher migrateToURI3 ${fmt(out.launcherMigrateS)}; guest-visible downtime ${fmt(out.downtimeS)}; libvirt total downtime ${fmt(out.libvirtDowntimeS)}`,
  );
  return out;
}

// ---------------------------------------------------------------------------------------------- drain
async function drainPart() {
  const [n1, n2] = nodeNames();
  const names = Array.from({ length: VMS }, (_, i) => `bench-drain-${i + 1}`);
  const beats = new Beats();
  let out;
  try {
    const manifest = names
      .map((n) =>
        vmManifest(n).replace(
          /^( +)terminationGracePeriodSeconds: 30$/m,
          '$&\n$1evictionStrategy: LiveMigrate',
        ),
      )
      .join('\n---\n');
    if ((manifest.match(/evictionStrategy: LiveMigrate/g) ?? []).length !== VMS)
      throw new Error(
        'examples/vm-tiny.yaml: no terminationGracePeriodSeconds line to add evictionStrategy after',
      );
    kubectl('cordon', n2);
    const before = {};
    try {
      await applyVms(manifest);
      const tStart = Date.now();
      for (const n of names) before[n] = await vmRunning(n, beats);
      console.log(`drain: ${VMS} VMs Running on ${n1}, guests ready after ${s(Date.now() - tStart)} s`);
    } finally {
      kubectl('uncordon', n2);
    }
    for (const n of names)
      if (before[n].vmi.status.nodeName !== n1)
        throw new Error(`${n} runs on ${before[n].vmi.status.nodeName}, not ${n1}`);
    const t0 = Date.now();
    const drain = await run(
      KUBECTL,
      [
        '--kubeconfig',
        KUBECONFIG,
        'drain',
        n1,
        '--ignore-daemonsets',
        '--delete-emptydir-data',
        '--timeout=600s',
      ],
      { encoding: 'utf8', maxBuffer: 16 << 20 },
    );
    const drainMs = Date.now() - t0;
    console.log(`drain: kubectl drain ${n1} returned after ${s(drainMs)} s`);
    const after = await until(
      `every VMI Running on ${n2}, no launcher Pod on ${n1}`,
      () => {
        const vmis = names.map((n) => getJson('vmi', '-n', NS, n));
        const moved = vmis.every(
          (v, i) =>
            v?.metadata.uid === before[names[i]].vmi.metadata.uid &&
            v.status.phase === 'Running' &&
            v.status.nodeName === n2 &&
            v.status.migrationState?.completed &&
            !v.status.migrationState.failed,
        );
        const left = (
          getJson(
            'pods',
            '-n',
            NS,
            '-l',
            'kubevirt.io=virt-launcher',
            '--field-selector',
            `spec.nodeName=${n1}`,
          )?.items ?? []
        ).length;
        return moved && left === 0 ? vmis : undefined;
      },
      600_000,
      200,
    );
    const emptyMs = Date.now() - t0;
    const vmims = getJson('vmim', '-n', NS)?.items ?? [];
    const per = [];
    for (const v of after) {
      const ms = v.status.migrationState;
      const m = vmims.find((x) => x.metadata.uid === ms.migrationUid);
      const pod = launcherPods(v.metadata.uid)[0];
      beats.add(pod.metadata.uid, () => serialLogPath(pod.metadata.uid, v.metadata.uid));
      await until(
        `${v.metadata.name}: heartbeats on ${n2}`,
        () => beats.beatsIn(pod.metadata.uid).length >= 1,
        120_000,
        200,
      );
      if ((beats.ready.get(pod.metadata.uid) ?? 0) > 0)
        throw new Error(`${v.metadata.name} rebooted on ${n2}`);
      per.push({
        vm: v.metadata.name,
        vmim: m?.metadata.name,
        evacuation: m?.metadata.annotations?.['kubevirt.io/evacuationMigration'],
        vmimCreatedS: m ? s(Date.parse(m.metadata.creationTimestamp) - t0) : undefined,
        migrationS: s(Date.parse(ms.endTimestamp) - Date.parse(ms.startTimestamp)),
        vmimToEndS: m ? s(Date.parse(ms.endTimestamp) - Date.parse(m.metadata.creationTimestamp)) : undefined,
        endS: s(Date.parse(ms.endTimestamp) - t0),
      });
    }
    for (const p of per)
      console.log(
        `drain: ${p.vm} migrated by ${p.vmim} (evacuation of ${p.evacuation}): VMIM created at +${p.vmimCreatedS} s, migration ${p.migrationS} s (VMIM -> end ${p.vmimToEndS} s), ended at +${p.endS} s; no reboot`,
      );
    out = {
      vms: VMS,
      drainS: s(drainMs),
      emptyS: s(emptyMs),
      migrationS: stats(per.map((p) => p.migrationS)),
      perVm: per,
      refusedEvictionLines: (drain.stdout + drain.stderr)
        .split('\n')
        .filter((l) => /evacuation|Cannot evict|error when evicting/i.test(l)).length,
    };
    console.log(
      `drain of ${n1} with ${VMS} VMs: kubectl drain ${out.drainS} s, node empty and every VM Running on ${n2} after ${out.emptyS} s; per-VM migration ${fmt(out.migrationS)}`,
    );
  } finally {
    beats.stop();
    for (const n of [n1, n2]) kubectl('uncordon', n);
    kubectl('delete', 'vm', '-n', NS, ...names, '--ignore-not-found', '--wait=true', '--timeout=300s');
    for (const m of getJson('vmim', '-n', NS)?.items ?? [])
      if (names.includes(m.spec.vmiName))
        kubectl('delete', 'vmim', '-n', NS, m.metadata.name, '--ignore-not-found');
  }
  return out;
}

// ---------------------------------------------------------------------------------------------- main
requireDeployedCluster('bench:migration');
if (nodeNames().length < 2)
  throw new Error('bench:migration: needs two nodes (bash tools/cluster.sh up --nodes 2)');
for (const n of nodeNames().slice(0, 2))
  if (!existsSync(nodeNetns(n)))
    throw new Error(`bench:migration: ${nodeNetns(n)} missing (node ${n} not up)`);
const qemu = (await run('qemu-system-x86_64', ['--version'], { encoding: 'utf8' })).stdout.split('\n')[0];
console.log(`bench:migration: ${ROUNDS} rounds, parts ${PARTS.join(',')}; raw virsh with ${qemu}`);
const summary = { bench: 'migration', rounds: ROUNDS };
for (const part of PARTS) {
  if (part === 'virsh') summary.virsh = await withLock('virsh', virshPart);
  if (part === 'cluster') summary.cluster = await withLock('cluster', clusterPart);
  if (part === 'drain') summary.drain = await withLock('drain', drainPart);
}
if (summary.cluster?.totalS && summary.virsh) {
  const c = summary.cluster.totalS.median;
  summary.ratio = {
    // like for like: the launcher migrates a TCG guest paused on QEMU < 9.0
    clusterOverVirshPaused: Math.round((c / summary.virsh.paused.totalS.median) * 100) / 100,
    clusterOverVirshLive: Math.round((c / summary.virsh.live.totalS.median) * 100) / 100,
    goal: 1.3,
  };
  console.log(
    `ratio cluster (VMIM -> Succeeded, median) / raw virsh migrate (median): ${summary.ratio.clusterOverVirshPaused}x against the paused (like-for-like) migration, ${summary.ratio.clusterOverVirshLive}x against --live (goal <= 1.3x)`,
  );
}
console.log(JSON.stringify(summary));
