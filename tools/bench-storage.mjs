#!/usr/bin/env node
// npm run bench:storage — issue 32's "Measure" on this project's cluster (tools/cluster.sh up && load-images, deploy/
// applied with useEmulation as the cluster e2e does; root). Prints numbers, asserts no timing. Two parts:
//
//   dd: guest against host sequential throughput on a claim. For each of a Filesystem claim of class local-path (the
//      storage add-on, deploy/addons/storage; the launcher puts a sparse raw disk.img in it) and a Block claim of
//      class local-block (a loop device tools/cluster.sh made on the node): examples/vm-tiny.yaml as a VM whose second
//      disk is the claim (serial `benchdisk`, no network), with kernel argument `kvts.ddbench=benchdisk,<MiB>,<pause>`
//      (tools/guest): the guest writes the disk's first MiB MiB with busybox dd (1 MiB blocks, O_DIRECT, fsync), then
//      reads them back (O_DIRECT) and prints each elapsed time by its own clock. Between the two, the benchmark
//      drops the host's page cache of the volume (`dd iflag=nocache count=0`: posix_fadvise DONTNEED on disk.img, or
//      on the loop device and its backing file), so the read comes from the disk and not from what QEMU's write left
//      in the host's cache. Then the VM is deleted (the claim stays) and the same dd runs on the host against the same
//      backing file / loop device (first made sparse again, as the guest found it: fallocate --punch-hole /
//      blkdiscard), GNU dd's own figure: write `oflag=direct conv=fsync`, cache dropped, read `iflag=direct`.
//      Printed: MB/s (10^6 bytes/s) each, the ratio guest/host, QEMU's cache mode for the disk (from its -blockdev),
//      the node and the backing file system. The guest is emulated (TCG: this machine's /dev/kvm is not for the
//      launcher), so the guest's side includes emulating its I/O path in software.
//   start: VM create -> VMI Running and -> the guest's ready line, for examples/vm-tiny.yaml (a containerDisk VM) and
//      for the same guest whose only disk is a DataVolume importing a 50 MiB qcow2 (random bytes, made by qemu-img of
//      CDI's importer image, served by busybox httpd from a Pod in the namespace) over HTTP into a 128Mi claim of the
//      default class, from the VM's `dataVolumeTemplates` (virt-controller creates the DataVolume; also printed:
//      -> DataVolume Succeeded). When virt-controller makes no DataVolume from the template in 60 s, that figure is
//      printed as not measured, and the DataVolume is created first, then the VM naming it (times from the
//      DataVolume's create). Needs CDI installed (its DataVolume CRD and an available cdi-deployment: the add-on
//      deploy/addons/cdi); without it the DataVolume figures are printed as not measured, and why.
//      Running: polled every 0.2 s on the host's clock (and the VMI's Running phaseTransitionTimestamp less the VM's
//      creationTimestamp, whole seconds from the API server); ready: the serial log polled every 0.2 s.
//
// The last line is one summary: `storage: fs write X MB/s (ratio r), read ...; block ...; containerDisk -> Running ...`.
// Everything it creates is in namespace bench-storage, deleted at the end (the block volume it used is wiped and made
// Available again by `tools/cluster.sh block-volumes`).
// Usage: node tools/bench-storage.mjs [--parts dd,start] [--mib 96] [--rounds 1] [--pause 3] [--cache none]
//   --cache none: the claim disks with `cache: none` (QEMU opens them O_DIRECT) instead of no cache field
//   (a shared cluster: under flock -o <its lock>)
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import path from 'node:path';
import {
  READY,
  getJson,
  kubectl,
  kubectlIn,
  nodeNames,
  onNode,
  repo,
  requireDeployedCluster,
  serialLogPath,
  until,
  vmManifest,
} from './cluster-bench-lib.mjs';

const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const PARTS = arg('--parts', 'dd,start').split(',');
const MIB = Number(arg('--mib', '96'));
const ROUNDS = Number(arg('--rounds', '1'));
const PAUSE = Number(arg('--pause', '3'));
const CACHE = arg('--cache', undefined);
for (const p of PARTS)
  if (!['dd', 'start'].includes(p)) throw new Error(`--parts: unknown part ${p} (dd, start)`);
// the block volumes of tools/cluster.sh are 128 MiB (KVTS_BLOCK_SIZE_MIB); the claims ask for 128Mi
if (!Number.isInteger(MIB) || MIB < 1 || MIB > 112) throw new Error('--mib: a whole number of MiB, 1 to 112');
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error('--rounds: a positive whole number');
if (!Number.isInteger(PAUSE) || PAUSE < 1) throw new Error('--pause: a positive whole number of seconds');
if (CACHE !== undefined && CACHE !== 'none') throw new Error('--cache: none (or leave it out)');

const NS = 'bench-storage';
const SERIAL = 'benchdisk';
const CLAIM_SIZE = '128Mi';
const TIMEOUT = 600_000;
const IMPORT_MIB = 50;
const MiB = 1024 * 1024;
const CLUSTER_SH = path.join(repo, 'tools/cluster.sh');
const KINDS = [
  { name: 'fs', storageClass: 'local-path', volumeMode: 'Filesystem' },
  { name: 'block', storageClass: 'local-block', volumeMode: 'Block' },
];
const s = (ms) => (ms / 1000).toFixed(1);
/** the median; of an even count, the mean of the two middle values (cluster-bench-lib's is the upper one) */
const median = (a) => {
  const x = [...a].sort((p, q) => p - q);
  const h = Math.floor(x.length / 2);
  return x.length % 2 ? x[h] : (x[h - 1] + x[h]) / 2;
};
const mbps = (bytes, ms) => bytes / 1e6 / (ms / 1000);
const f1 = (x) => (x === undefined ? 'n/a' : x.toFixed(1));
const f2 = (x) => (x === undefined ? 'n/a' : x.toFixed(2));
const load = () =>
  `load average ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`;

// ---------------------------------------------------------------- manifests (JSON: kubectl takes it as YAML)

/** examples/vm-tiny.yaml as an object, VM `name` in NS (kubectl's client-side conversion; no YAML parser here) */
function tinyVm(name) {
  const vm = JSON.parse(kubectlIn(vmManifest(name), 'create', '--dry-run=client', '-o', 'json', '-f', '-'));
  vm.metadata.namespace = NS;
  return vm;
}

/** the tiny VM with a second disk (serial SERIAL) on claim `claim`, the guest measuring it (kvts.ddbench) */
function ddVm(name, claim) {
  const vm = tinyVm(name);
  const spec = vm.spec.template.spec;
  spec.domain.firmware.kernelBoot.kernelArgs = `console=ttyS0 quiet kvts.ddbench=${SERIAL},${MIB},${PAUSE}`;
  spec.domain.devices.disks.push({
    name: 'data',
    serial: SERIAL,
    disk: { bus: 'virtio' },
    ...(CACHE ? { cache: CACHE } : {}),
  });
  spec.volumes.push({ name: 'data', persistentVolumeClaim: { claimName: claim } });
  return vm;
}

const claimManifest = (name, kind) => ({
  apiVersion: 'v1',
  kind: 'PersistentVolumeClaim',
  metadata: { name, namespace: NS },
  spec: {
    accessModes: ['ReadWriteOnce'],
    volumeMode: kind.volumeMode,
    storageClassName: kind.storageClass,
    resources: { requests: { storage: CLAIM_SIZE } },
  },
});

const create = (obj) => kubectlIn(JSON.stringify(obj), 'create', '-f', '-');

// ---------------------------------------------------------------- the VM's side

/** the VMI of VM `name` Running (host time it was seen), its launcher Pod; throws when it fails */
async function running(name, timeout = TIMEOUT) {
  let pod;
  const vmi = await until(
    `VMI ${NS}/${name} Running`,
    () => {
      const v = getJson('vmi', '-n', NS, name);
      if (v?.status?.phase === 'Failed') throw new Error(`VMI ${NS}/${name} Failed`);
      if (v?.status?.phase !== 'Running') return undefined;
      pod = (getJson('pods', '-n', NS, '-l', `kubevirt.io/created-by=${v.metadata.uid}`)?.items ?? [])[0];
      return pod ? v : undefined;
    },
    timeout,
    200,
  );
  return { vmi, pod, seenAt: Date.now() };
}

/** the guest's serial log text, '' while it is not there (yet) */
function serialText(pod, vmi) {
  try {
    return readFileSync(serialLogPath(pod.metadata.uid, vmi.metadata.uid), 'utf8');
  } catch {
    return '';
  }
}

/** the first `KUBEVIRT-TS-GUEST-DDBENCH <what> ...` line's figures; throws on the guest's FAILED line */
async function ddLine(pod, vmi, what) {
  return until(
    `the guest's ddbench ${what} line`,
    () => {
      const text = serialText(pod, vmi);
      const failed = /KUBEVIRT-TS-GUEST-DDBENCH-FAILED (.*)/.exec(text);
      if (failed) throw new Error(`guest: ${failed[1]}`);
      const m = new RegExp(`KUBEVIRT-TS-GUEST-DDBENCH ${what} dev=(\\S+) bytes=(\\d+) ms=(\\d+)`).exec(text);
      return m ? { dev: m[1], bytes: Number(m[2]), ms: Number(m[3]) } : undefined;
    },
    TIMEOUT,
    100,
  );
}

/** QEMU's cache mode for the disk on `file` (its -blockdev's `cache`; none there: QEMU's default, writeback) */
function qemuCache(vmName, file) {
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    let cmd;
    try {
      cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
    } catch {
      continue;
    }
    if (!/qemu-system/.test(cmd[0] ?? '') || !cmd.some((a) => a.includes(`guest=${NS}_${vmName}`))) continue;
    const dev = cmd.find((a) => a.startsWith('{"driver":"') && a.includes(`"filename":"${file}"`));
    if (!dev) return `no -blockdev on ${file}`;
    const c = JSON.parse(dev).cache;
    if (!c) return 'writeback (no cache option: QEMU default, through the host page cache)';
    return c.direct ? `none (cache.direct: O_DIRECT on the host)` : `writeback (cache.direct false)`;
  }
  return 'QEMU process not found';
}

/** deletes VM `name` and waits for its VMI and launcher Pods to be gone */
async function deleteVm(name) {
  kubectl('delete', 'vm', '-n', NS, name, '--wait=true', '--timeout=300s');
  await until(
    `VMI ${name} and its launcher Pod gone`,
    () =>
      !getJson('vmi', '-n', NS, name) &&
      (getJson('pods', '-n', NS, '-l', 'kubevirt.io=virt-launcher')?.items ?? []).length === 0,
    TIMEOUT,
    500,
  );
}

// ---------------------------------------------------------------- the host's side

/** the claim's volume as the root namespace reaches it: the file (disk.img) or the loop device and its backing file */
function volumeOf(claim, kind) {
  const pvc = getJson('pvc', '-n', NS, claim);
  if (pvc?.status?.phase !== 'Bound') throw new Error(`claim ${NS}/${claim} is not Bound`);
  const pv = getJson('pv', pvc.spec.volumeName);
  const node = pv.spec.nodeAffinity?.required?.nodeSelectorTerms?.[0]?.matchExpressions?.[0]?.values?.[0];
  if (kind.volumeMode === 'Block') {
    const backing = pv.metadata.annotations?.['kubevirt-ts.io/backing-file'];
    return { pv: pv.metadata.name, node, target: pv.spec.local.path, backing, inPod: '/dev/data' };
  }
  const dir = node ? onNode(node, pv.spec.hostPath.path) : pv.spec.hostPath.path;
  return {
    pv: pv.metadata.name,
    node,
    target: path.join(dir, 'disk.img'),
    inPod: '/var/run/kubevirt-private/vmi-disks/data/disk.img',
  };
}

/** GNU dd on the host (C locale): its own elapsed time in ms, from its `copied, X s` line */
function hostDd(...args) {
  const r = spawnSync('dd', args, { encoding: 'utf8', env: { ...process.env, LC_ALL: 'C' } });
  if (r.status !== 0) throw new Error(`dd ${args.join(' ')}: ${r.stderr}`);
  const m = /copied, ([\d.e+-]+) s/.exec(r.stderr);
  if (!m) throw new Error(`dd ${args.join(' ')}: no elapsed time in ${JSON.stringify(r.stderr)}`);
  return Number(m[1]) * 1000;
}

/** the host's page cache of these files/devices dropped (posix_fadvise DONTNEED through GNU dd) */
function dropCache(...files) {
  for (const f of files.filter(Boolean)) {
    const r = spawnSync('dd', [`if=${f}`, 'iflag=nocache', 'count=0', 'status=none']);
    if (r.status !== 0) throw new Error(`dd if=${f} iflag=nocache count=0: ${r.stderr}`);
  }
}

/** the first MIB MiB of the volume made sparse again (as the guest found it), then written and read by GNU dd */
function hostRound(vol, kind) {
  const bytes = MIB * MiB;
  if (kind.volumeMode === 'Block') execFileSync('blkdiscard', ['-o', '0', '-l', String(bytes), vol.target]);
  else execFileSync('fallocate', ['--punch-hole', '--offset', '0', '--length', String(bytes), vol.target]);
  dropCache(vol.target, vol.backing);
  const common = [`bs=1M`, `count=${MIB}`];
  const writeMs = hostDd('if=/dev/zero', `of=${vol.target}`, ...common, 'oflag=direct', 'conv=fsync,notrunc');
  dropCache(vol.target, vol.backing);
  const readMs = hostDd(`if=${vol.target}`, 'of=/dev/null', ...common, 'iflag=direct');
  return { write: mbps(bytes, writeMs), read: mbps(bytes, readMs) };
}

const fsType = (p) => {
  try {
    return execFileSync('stat', ['-f', '-c', '%T', p], { encoding: 'utf8' }).trim();
  } catch {
    return '?';
  }
};

/** `tools/cluster.sh block-volumes`: Released block volumes wiped and Available again */
function blockVolumes() {
  const r = spawnSync('bash', [CLUSTER_SH, 'block-volumes'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`tools/cluster.sh block-volumes: ${r.stderr}${r.stdout}`);
}

// ---------------------------------------------------------------- part dd

async function ddRound(kind, round) {
  const name = `bench-${kind.name}-${round}`;
  create(claimManifest(name, kind));
  create(ddVm(name, name));
  const { vmi, pod } = await running(name);
  const write = await ddLine(pod, vmi, 'write');
  // before the guest's pause ends: its read should come from the disk, not from the host's cache of its write
  const vol = volumeOf(name, kind);
  dropCache(vol.target, vol.backing);
  const lateDrop = serialText(pod, vmi).includes('KUBEVIRT-TS-GUEST-DDBENCH read');
  const read = await ddLine(pod, vmi, 'read');
  const cache = qemuCache(name, vol.inPod);
  await deleteVm(name);
  const host = hostRound(vol, kind);
  kubectl('delete', 'pvc', '-n', NS, name, '--wait=true', '--timeout=300s');
  if (kind.volumeMode === 'Block') blockVolumes();
  const guest = { write: mbps(write.bytes, write.ms), read: mbps(read.bytes, read.ms) };
  const r = {
    kind: kind.name,
    node: vol.node ?? vmi.status.nodeName,
    target: vol.target,
    fs: fsType(vol.backing ?? vol.target),
    cache,
    lateDrop,
    guest,
    host,
  };
  console.log(
    `  ${kind.name} round ${round}: guest (TCG) write ${f1(guest.write)} MB/s, read ${f1(guest.read)} MB/s; host write ${f1(host.write)} MB/s, read ${f1(host.read)} MB/s; ratio guest/host write ${f2(guest.write / host.write)}, read ${f2(guest.read / host.read)}`,
  );
  console.log(
    `    node ${r.node}, ${kind.volumeMode === 'Block' ? `loop device ${vol.target} over ${vol.backing}` : vol.target.replace(/^\/proc\/\d+\/root/, '')} (${r.fs}); QEMU cache: ${cache}${lateDrop ? '; WARNING: the host cache was dropped after the guest began its read (the read may have come from the host cache)' : ''}`,
  );
  return r;
}

async function ddPart() {
  console.log(
    `\n== dd: ${MIB} MiB sequential, 1 MiB blocks, O_DIRECT (write with fsync), guest (TCG-emulated tiny guest, busybox dd) vs host (GNU dd on the same backing file / loop device after the VM is gone); ${load()}${CACHE ? `; disks cache: ${CACHE}` : ''}`,
  );
  const out = {};
  for (const kind of KINDS) {
    const rounds = [];
    for (let i = 1; i <= ROUNDS; i++) rounds.push(await ddRound(kind, i));
    const m = (f) => median(rounds.map(f));
    out[kind.name] = {
      guestWrite: m((r) => r.guest.write),
      guestRead: m((r) => r.guest.read),
      hostWrite: m((r) => r.host.write),
      hostRead: m((r) => r.host.read),
      cache: rounds[0].cache,
    };
    const o = out[kind.name];
    console.log(
      `${kind.name} (${kind.storageClass}, ${kind.volumeMode})${ROUNDS > 1 ? `, median of ${ROUNDS}` : ''}: guest write ${f1(o.guestWrite)} MB/s vs host ${f1(o.hostWrite)} MB/s (ratio ${f2(o.guestWrite / o.hostWrite)}), guest read ${f1(o.guestRead)} MB/s vs host ${f1(o.hostRead)} MB/s (ratio ${f2(o.guestRead / o.hostRead)})`,
    );
  }
  return out;
}

// ---------------------------------------------------------------- part start

const ts = (t) => (t ? Date.parse(t) : undefined);

/** creates `vm`, then: host ms to VMI Running (polled), API seconds VM created -> VMI Running, host ms to ready */
async function startRound(vm) {
  const name = vm.metadata.name;
  const t0 = Date.now();
  create(vm);
  const { vmi, pod, seenAt } = await running(name, 1_200_000);
  const readyAt = await until(
    `${name}: the guest's ready line`,
    () => (serialText(pod, vmi).includes(READY) ? Date.now() : undefined),
    TIMEOUT,
    200,
  );
  const createdApi = ts(getJson('vm', '-n', NS, name)?.metadata?.creationTimestamp);
  const runningApi = ts(
    vmi.status.phaseTransitionTimestamps?.find((x) => x.phase === 'Running')?.phaseTransitionTimestamp,
  );
  await deleteVm(name);
  return {
    running: seenAt - t0,
    runningApi: createdApi && runningApi ? runningApi - createdApi : undefined,
    ready: readyAt - t0,
    node: vmi.status.nodeName,
  };
}

/** the image CDI's importer Pods run (cdi-deployment's IMPORTER_IMAGE): it has qemu-img */
function importerImage() {
  const d = (getJson('deployments', '-A', '-l', 'app=containerized-data-importer')?.items ?? []).find(
    (x) => x.metadata.name === 'cdi-deployment',
  );
  const env = (d?.spec?.template?.spec?.containers ?? []).flatMap((c) => c.env ?? []);
  const image = env.find((e) => e.name === 'IMPORTER_IMAGE')?.value;
  if (!image) throw new Error('cdi-deployment has no IMPORTER_IMAGE');
  return image;
}

/** the busybox image of the storage add-on's helper Pods (local-path-config's helperPod.yaml): it has httpd */
function busyboxImage() {
  const cm = getJson('configmap', '-n', 'local-path-storage', 'local-path-config');
  const image = /image:\s*(\S+)/.exec(cm?.data?.['helperPod.yaml'] ?? '')?.[1];
  if (!image) throw new Error('local-path-config has no helper image (deploy/addons/storage applied?)');
  return image;
}

/**
 * An HTTP server Pod in NS serving `/disk.qcow2`: IMPORT_MIB MiB of random bytes (nothing to skip as zeros) as qcow2,
 * made by an init container of CDI's importer image (qemu-img), served by busybox httpd. Its URL once it is Ready.
 */
async function imageServer() {
  const script = [
    'set -eu',
    `head -c ${IMPORT_MIB * MiB} /dev/urandom > /www/disk.raw`,
    'qemu-img convert -f raw -O qcow2 /www/disk.raw /www/disk.qcow2',
    'rm /www/disk.raw',
    'chmod 0644 /www/disk.qcow2',
  ].join('\n');
  create({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'images', namespace: NS },
    spec: {
      volumes: [{ name: 'www', emptyDir: {} }],
      initContainers: [
        {
          name: 'make-image',
          image: importerImage(),
          imagePullPolicy: 'IfNotPresent',
          command: ['/bin/bash', '-c', script],
          volumeMounts: [{ name: 'www', mountPath: '/www' }],
        },
      ],
      containers: [
        {
          name: 'httpd',
          image: busyboxImage(),
          imagePullPolicy: 'IfNotPresent',
          command: ['/bin/httpd', '-f', '-p', '8080', '-h', '/www'],
          volumeMounts: [{ name: 'www', mountPath: '/www' }],
          readinessProbe: { tcpSocket: { port: 8080 }, periodSeconds: 1 },
        },
      ],
    },
  });
  const pod = await until(
    'the image server Pod Ready',
    () => {
      const p = getJson('pod', '-n', NS, 'images');
      const ready = p?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
      return ready && p.status.podIP ? p : undefined;
    },
    TIMEOUT,
    500,
  );
  return `http://${pod.status.podIP}:8080/disk.qcow2`;
}

/** the tiny VM whose only disk (serial SERIAL) is DataVolume `dv` (no containerDisk): the VM a user imports */
function dataVolumeVm(name, dv, template) {
  const vm = tinyVm(name);
  const spec = vm.spec.template.spec;
  spec.domain.firmware.kernelBoot.kernelArgs = 'console=ttyS0 quiet kvts.disks';
  spec.domain.devices.disks = [{ name: 'data', serial: SERIAL, disk: { bus: 'virtio' } }];
  spec.volumes = [{ name: 'data', dataVolume: { name: dv } }];
  if (template) vm.spec.dataVolumeTemplates = [{ metadata: { name: dv }, spec: template }];
  return vm;
}

/** a DataVolume spec importing `url` into a claim of CLAIM_SIZE of the default class */
const importSpec = (url) => ({
  source: { http: { url } },
  storage: { resources: { requests: { storage: CLAIM_SIZE } } },
});

/**
 * VM create -> DataVolume Succeeded -> VMI Running -> guest ready. `template`: the DataVolume from the VM's
 * dataVolumeTemplates (virt-controller creates it); else the DataVolume created first, then the VM (t0 at the
 * DataVolume's create). Undefined (and why) when virt-controller made no DataVolume from the template in 60 s.
 */
async function dataVolumeRound(url, round, template) {
  const name = `bench-dv-${template ? 't' : 'f'}-${round}`;
  const t0 = Date.now();
  if (!template)
    create({
      apiVersion: 'cdi.kubevirt.io/v1beta1',
      kind: 'DataVolume',
      metadata: { name, namespace: NS },
      spec: importSpec(url),
    });
  create(dataVolumeVm(name, name, template ? importSpec(url) : undefined));
  if (template) {
    const made = await until(
      `DataVolume ${name} from the VM's dataVolumeTemplates`,
      () => getJson('dv', '-n', NS, name) ?? undefined,
      60_000,
      200,
    ).catch(() => undefined);
    if (!made) {
      await deleteVm(name);
      return { whyNot: 'virt-controller created no DataVolume from dataVolumeTemplates within 60 s' };
    }
  }
  const imported = await until(
    `DataVolume ${name} Succeeded`,
    () => {
      const dv = getJson('dv', '-n', NS, name);
      if (dv?.status?.phase === 'Failed') throw new Error(`DataVolume ${name} Failed`);
      return dv?.status?.phase === 'Succeeded' ? Date.now() : undefined;
    },
    1_200_000,
    200,
  );
  const { vmi, pod, seenAt } = await running(name, TIMEOUT);
  const readyAt = await until(
    `${name}: the guest's ready line`,
    () => (serialText(pod, vmi).includes(READY) ? Date.now() : undefined),
    TIMEOUT,
    200,
  );
  const disk = new RegExp(`KUBEVIRT-TS-GUEST-DISK name=\\S+ bytes=(\\d+) ro=0 serial=${SERIAL}`).exec(
    serialText(pod, vmi),
  );
  await deleteVm(name);
  if (!template) kubectl('delete', 'dv', '-n', NS, name, '--wait=true', '--timeout=300s');
  return {
    imported: imported - t0,
    running: seenAt - t0,
    ready: readyAt - t0,
    node: vmi.status.nodeName,
    diskBytes: disk ? Number(disk[1]) : undefined,
  };
}

/** CDI is there when its DataVolume CRD is and its controller (cdi-deployment) is available */
function cdiState() {
  if (!getJson('crd', 'datavolumes.cdi.kubevirt.io'))
    return 'CDI is not installed (no datavolumes.cdi.kubevirt.io CRD)';
  const d = (getJson('deployments', '-A', '-l', 'app=containerized-data-importer')?.items ?? []).find(
    (x) => x.metadata.name === 'cdi-deployment',
  );
  if (!d || !(d.status?.availableReplicas > 0)) return 'CDI is installed but cdi-deployment is not available';
  return undefined;
}

async function startPart() {
  console.log(`\n== start: VM create -> VMI Running -> guest ready line; ${load()}`);
  const out = { containerDisk: [], dataVolume: undefined, dataVolumeWhyNot: undefined };
  for (let i = 1; i <= ROUNDS; i++) {
    const r = await startRound(tinyVm(`bench-cd-${i}`));
    out.containerDisk.push(r);
    console.log(
      `  containerDisk round ${i} (${r.node}): -> Running ${s(r.running)} s (API timestamps ${r.runningApi === undefined ? 'n/a' : s(r.runningApi)} s), -> guest ready ${s(r.ready)} s`,
    );
  }
  const why = cdiState();
  if (why) {
    out.dataVolumeWhyNot = why;
    console.log(
      `  DataVolume (${IMPORT_MIB} MiB image imported over HTTP, dataVolumeTemplates): NOT MEASURED: ${why}`,
    );
    return out;
  }
  const url = await imageServer();
  const show = (what, i, r) =>
    console.log(
      `  ${what} round ${i} (${r.node}): -> DataVolume Succeeded ${s(r.imported)} s, -> Running ${s(r.running)} s, -> guest ready ${s(r.ready)} s (the guest's disk: ${r.diskBytes ?? '?'} bytes)`,
    );
  for (let i = 1; i <= ROUNDS; i++) {
    const r = await dataVolumeRound(url, i, true);
    if (r.whyNot) {
      out.dataVolumeWhyNot = r.whyNot;
      console.log(`  dataVolumeTemplates (${IMPORT_MIB} MiB qcow2 over HTTP): NOT MEASURED: ${r.whyNot}`);
      break;
    }
    (out.dataVolume ??= []).push(r);
    show(`dataVolumeTemplates (${IMPORT_MIB} MiB qcow2 over HTTP)`, i, r);
  }
  // without dataVolumeTemplates: the DataVolume first, then the VM naming it (t0: the DataVolume's create)
  if (!out.dataVolume)
    for (let i = 1; i <= ROUNDS; i++) {
      const r = await dataVolumeRound(url, i, false);
      (out.dataVolumeFirst ??= []).push(r);
      show(`DataVolume created first, then the VM (${IMPORT_MIB} MiB qcow2 over HTTP)`, i, r);
    }
  return out;
}

// ---------------------------------------------------------------- main

requireDeployedCluster('bench:storage');
if (getJson('namespace', NS))
  throw new Error(`bench:storage: namespace ${NS} exists (an earlier run?): delete it first`);
for (const k of KINDS)
  if (PARTS.includes('dd') && !getJson('storageclass', k.storageClass))
    throw new Error(
      `bench:storage: no StorageClass ${k.storageClass} (${k.name === 'fs' ? 'kubectl apply -f deploy/addons/storage' : 'tools/cluster.sh up makes it; KVTS_BLOCK_PER_NODE > 0'})`,
    );
console.log(`bench:storage on ${nodeNames().join(', ')}; ${load()}`);
kubectl('create', 'namespace', NS);
const summary = {};
try {
  if (PARTS.includes('dd')) summary.dd = await ddPart();
  if (PARTS.includes('start')) summary.start = await startPart();
} finally {
  kubectl('delete', 'namespace', NS, '--wait=true', '--timeout=600s');
  if (PARTS.includes('dd') && existsSync(CLUSTER_SH)) blockVolumes();
}
const parts = [];
for (const k of KINDS) {
  const o = summary.dd?.[k.name];
  if (o)
    parts.push(
      `${k.name} write ${f1(o.guestWrite)} MB/s (ratio ${f2(o.guestWrite / o.hostWrite)}), read ${f1(o.guestRead)} MB/s (ratio ${f2(o.guestRead / o.hostRead)})`,
    );
}
if (summary.start) {
  const cd = summary.start.containerDisk;
  const dv = summary.start.dataVolume;
  const first = summary.start.dataVolumeFirst;
  const med = (a, f) => s(median(a.map(f)));
  parts.push(
    `${dv ? `import (dataVolumeTemplates) -> Running ${med(dv, (r) => r.running)} s, -> ready ${med(dv, (r) => r.ready)} s vs ` : ''}containerDisk -> Running ${med(cd, (r) => r.running)} s, -> ready ${med(cd, (r) => r.ready)} s${dv ? '' : ` (dataVolumeTemplates not measured: ${summary.start.dataVolumeWhyNot}${first ? `; DataVolume created first: -> Running ${med(first, (r) => r.running)} s, -> ready ${med(first, (r) => r.ready)} s` : ''})`}`,
  );
}
console.log(`storage (TCG guest, ${load()}): ${parts.join('; ')}`);
