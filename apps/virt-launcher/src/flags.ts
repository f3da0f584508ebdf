import path from 'node:path';
import { parseArgs } from 'node:util';
import { ExitCode, LauncherError } from './errors.js';
import type { LogLevel } from '@kubevirt-ts/log';

// @kubevirt-ts/log's levels; not imported at run time: flags are parsed before winston is loaded (start-up time)
const LOG_LEVELS: readonly LogLevel[] = ['error', 'warn', 'info', 'debug'];

/** In-Pod flags, named like upstream virt-launcher's. */
export interface LauncherFlags {
  name: string;
  namespace: string;
  uid: string;
  gracePeriodSeconds: number;
  /** milliseconds */
  qemuTimeoutMs: number;
  allowEmulation: boolean;
  kubevirtShareDir: string;
  ephemeralDiskDir: string;
  containerDiskDir: string;
  /** private dir (upstream: fixed /var/run/kubevirt-private) */
  privateDir: string;
  /** where libvirtd's XDG dirs and runtime files live (upstream: /var/run/libvirt) */
  libvirtRunDir: string;
  hookSidecars: number;
  keepAfterFailure: boolean;
  logLevel: LogLevel;
  /** --trace-start: start-up phases as JSON lines on stderr (else at debug level in the log) */
  traceStart: boolean;
  /** uid/gid libvirtd (and so QEMU) runs as; undefined = the launcher's own */
  libvirtUid?: number;
  libvirtGid?: number;
  /**
   * --less-pvc-space-toleration: percent by which a filesystem claim's free space may fall short of the disk.img
   * created on it (the KubeVirt CR's `developerConfiguration.lessPVCSpaceToleration`; undefined: 10, upstream's)
   */
  lessPVCSpaceToleration?: number;
  /**
   * --minimum-reserve-pvc-bytes: bytes of a filesystem claim kept free when disk.img is sized (the KubeVirt CR's
   * `developerConfiguration.minimumReservePVCBytes`; undefined: 131072, upstream's)
   */
  minimumReservePVCBytes?: number;
}

export interface StandaloneFlags {
  vmiFile: string;
  /** image reference -> local file or folder */
  images: Map<string, string>;
  console: boolean;
  allowEmulation: boolean;
  socketDir?: string;
  /** where the pod-like root lives; a temp dir removed at exit when not given */
  workDir?: string;
  gracePeriodSeconds?: number;
  qemuTimeoutMs: number;
  logLevel: LogLevel;
  keepAfterFailure: boolean;
  /** --trace-start: start-up phases as JSON lines on stderr */
  traceStart: boolean;
  libvirtUid?: number;
  libvirtGid?: number;
  /** feature gates turned on (--feature-gates A,B): HostDisk lets hostDisk volumes reach the host's files */
  featureGates: string[];
  /** remove workDir at the end although it was given (set for the launcher a standalone monitor runs) */
  removeWorkDir?: boolean;
  /** how the pod network's interface is attached (no Pod network namespace here): passt (default) or slirp */
  podNetwork: 'passt' | 'slirp';
  /** the passt binary (--passt PATH); default `passt` from PATH */
  passtBinary?: string;
}

function usage(msg: string): LauncherError {
  return new LauncherError(msg, ExitCode.USAGE, 'flags');
}

/** Parses a Go-style duration ("300s", "5m", "1m30s", "1500ms") or plain seconds ("30") to milliseconds. */
export function parseDuration(flag: string, value: string): number {
  if (/^\d+(\.\d+)?$/.test(value)) return Math.round(Number(value) * 1000);
  const re = /(\d+(?:\.\d+)?)(ms|s|m|h)/gy;
  const unit: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  let total = 0;
  let pos = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(value)) !== null) {
    total += Number(m[1]) * unit[m[2]!]!;
    pos = re.lastIndex;
  }
  if (pos === 0 || pos !== value.length)
    throw usage(`--${flag}: invalid duration ${JSON.stringify(value)} (use e.g. 300s, 5m, 1m30s or seconds)`);
  return Math.round(total);
}

function parseNonNegInt(flag: string, value: string): number {
  if (!/^\d+$/.test(value))
    throw usage(`--${flag}: must be a non-negative integer, got ${JSON.stringify(value)}`);
  return Number(value);
}

function parsePercent(flag: string, value: string): number {
  if (!/^\d+$/.test(value) || Number(value) > 100)
    throw usage(`--${flag}: must be an integer percentage from 0 to 100, got ${JSON.stringify(value)}`);
  return Number(value);
}

function parseBytes(flag: string, value: string): number {
  const n = parseNonNegInt(flag, value);
  if (!Number.isSafeInteger(n)) throw usage(`--${flag}: ${value} bytes is too large`);
  return n;
}

function parseLevel(value: string | undefined): LogLevel {
  const v = (value ?? 'info') as LogLevel;
  if (!LOG_LEVELS.includes(v))
    throw usage(`--log-level: must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(value)}`);
  return v;
}

function parseBool(flag: string, value: string | boolean | undefined, dflt: boolean): boolean {
  if (value === undefined) return dflt;
  if (typeof value === 'boolean') return value;
  if (value === 'true') return true;
  if (value === 'false') return false;
  throw usage(`--${flag}: must be true or false, got ${JSON.stringify(value)}`);
}

function parseHookSidecars(value: string | undefined): number {
  const n = parseNonNegInt('hook-sidecars', value ?? '0');
  if (n !== 0) {
    throw usage(
      `--hook-sidecars: ${n} hook sidecars requested, but hook sidecars are not supported by this launcher (only 0)`,
    );
  }
  return n;
}

function parseUidGid(value: string | undefined): { uid?: number; gid?: number } {
  if (value === undefined || value === '') return {};
  const m = /^(\d+)(?::(\d+))?$/.exec(value);
  if (!m) throw usage(`--libvirt-user: must be UID or UID:GID, got ${JSON.stringify(value)}`);
  return { uid: Number(m[1]), gid: Number(m[2] ?? m[1]) };
}

/** Strips the `--flag=value` / `--flag value` forms parseArgs understands; `--allow-emulation=false` is accepted too. */
function normalizeBoolFlags(
  argv: string[],
  names: string[],
): { argv: string[]; values: Map<string, boolean> } {
  const values = new Map<string, boolean>();
  const out: string[] = [];
  for (const a of argv) {
    const m = /^--([a-z-]+)=(true|false)$/.exec(a);
    if (m && names.includes(m[1]!)) {
      values.set(m[1]!, m[2] === 'true');
      continue;
    }
    out.push(a);
  }
  return { argv: out, values };
}

const POD_BOOL = ['allow-emulation', 'keep-after-failure', 'trace-start'];

/** Parses the in-Pod flags (upstream names, plus --root/--libvirt-user/--log-level for running outside a real Pod). */
export function parseLauncherFlags(argv: string[]): LauncherFlags {
  const norm = normalizeBoolFlags(argv, POD_BOOL);
  let parsed;
  try {
    parsed = parseArgs({
      args: norm.argv,
      strict: true,
      allowPositionals: false,
      options: {
        name: { type: 'string' },
        namespace: { type: 'string' },
        uid: { type: 'string' },
        'grace-period-seconds': { type: 'string' },
        'qemu-timeout': { type: 'string' },
        'allow-emulation': { type: 'boolean' },
        'kubevirt-share-dir': { type: 'string' },
        'ephemeral-disk-dir': { type: 'string' },
        'container-disk-dir': { type: 'string' },
        'private-dir': { type: 'string' },
        'libvirt-run-dir': { type: 'string' },
        'hook-sidecars': { type: 'string' },
        'keep-after-failure': { type: 'boolean' },
        'trace-start': { type: 'boolean' },
        'log-level': { type: 'string' },
        'libvirt-user': { type: 'string' },
        'less-pvc-space-toleration': { type: 'string' },
        'minimum-reserve-pvc-bytes': { type: 'string' },
        root: { type: 'string' },
      },
    });
  } catch (e) {
    throw usage((e as Error).message);
  }
  const v = parsed.values;
  for (const req of ['name', 'namespace', 'uid'] as const) {
    if (!v[req]) throw usage(`--${req} is required`);
  }
  const root = v.root ? path.resolve(v.root) : '/';
  const under = (p: string) => path.join(root, p);
  const grace = parseNonNegInt('grace-period-seconds', v['grace-period-seconds'] ?? '30');
  const ug = parseUidGid(v['libvirt-user']);
  return {
    name: v.name!,
    namespace: v.namespace!,
    uid: v.uid!,
    gracePeriodSeconds: grace,
    qemuTimeoutMs: parseDuration('qemu-timeout', v['qemu-timeout'] ?? '5m'),
    allowEmulation:
      norm.values.get('allow-emulation') ?? parseBool('allow-emulation', v['allow-emulation'], false),
    kubevirtShareDir: path.resolve(v['kubevirt-share-dir'] ?? under('var/run/kubevirt')),
    ephemeralDiskDir: path.resolve(v['ephemeral-disk-dir'] ?? under('var/run/kubevirt-ephemeral-disks')),
    containerDiskDir: path.resolve(v['container-disk-dir'] ?? under('var/run/kubevirt/container-disks')),
    privateDir: path.resolve(v['private-dir'] ?? under('var/run/kubevirt-private')),
    // under a --root, a short name: libvirt's per-domain unix sockets (guest agent channel) must stay under 107 bytes
    libvirtRunDir: path.resolve(
      v['libvirt-run-dir'] ?? (root === '/' ? '/var/run/libvirt' : path.join(root, 'lv')),
    ),
    hookSidecars: parseHookSidecars(v['hook-sidecars']),
    keepAfterFailure:
      norm.values.get('keep-after-failure') ??
      parseBool('keep-after-failure', v['keep-after-failure'], false),
    logLevel: parseLevel(v['log-level']),
    traceStart: norm.values.get('trace-start') ?? parseBool('trace-start', v['trace-start'], false),
    libvirtUid: ug.uid,
    libvirtGid: ug.gid,
    ...(v['less-pvc-space-toleration'] !== undefined
      ? {
          lessPVCSpaceToleration: parsePercent('less-pvc-space-toleration', v['less-pvc-space-toleration']),
        }
      : {}),
    ...(v['minimum-reserve-pvc-bytes'] !== undefined
      ? {
          minimumReservePVCBytes: parseBytes('minimum-reserve-pvc-bytes', v['minimum-reserve-pvc-bytes']),
        }
      : {}),
  };
}

/** Parses `virt-launcher standalone ...` arguments (after the word standalone). */
/** Feature gates standalone mode knows (the cluster's are in @kubevirt-ts/renderer's config). */
export const STANDALONE_GATES = ['HostDisk'];

export function parseStandaloneFlags(argv: string[]): StandaloneFlags {
  const norm = normalizeBoolFlags(argv, ['allow-emulation', 'console', 'keep-after-failure', 'trace-start']);
  let parsed;
  try {
    parsed = parseArgs({
      args: norm.argv,
      strict: true,
      allowPositionals: false,
      options: {
        vmi: { type: 'string' },
        image: { type: 'string', multiple: true },
        console: { type: 'boolean' },
        'allow-emulation': { type: 'boolean' },
        'socket-dir': { type: 'string' },
        'work-dir': { type: 'string' },
        'grace-period-seconds': { type: 'string' },
        'qemu-timeout': { type: 'string' },
        'log-level': { type: 'string' },
        'keep-after-failure': { type: 'boolean' },
        'trace-start': { type: 'boolean' },
        'libvirt-user': { type: 'string' },
        'feature-gates': { type: 'string', multiple: true },
        'pod-network': { type: 'string' },
        passt: { type: 'string' },
      },
    });
  } catch (e) {
    throw usage((e as Error).message);
  }
  const v = parsed.values;
  if (!v.vmi) throw usage('--vmi FILE.yaml is required');
  const podNetwork = v['pod-network'] ?? 'passt';
  if (podNetwork !== 'passt' && podNetwork !== 'slirp')
    throw usage(`--pod-network: must be passt or slirp, got ${JSON.stringify(podNetwork)}`);
  if (v.passt === '') throw usage('--passt: a path to the passt binary is required');
  const featureGates = (v['feature-gates'] ?? []).flatMap((g) => g.split(',')).filter((g) => g !== '');
  for (const g of featureGates)
    if (!STANDALONE_GATES.includes(g))
      throw usage(
        `--feature-gates: unknown gate ${JSON.stringify(g)} (known: ${STANDALONE_GATES.join(', ')})`,
      );
  const images = new Map<string, string>();
  for (const spec of v.image ?? []) {
    const eq = spec.lastIndexOf('=');
    if (eq <= 0 || eq === spec.length - 1)
      throw usage(`--image: expected REF=PATH, got ${JSON.stringify(spec)}`);
    images.set(spec.slice(0, eq), path.resolve(spec.slice(eq + 1)));
  }
  const ug = parseUidGid(v['libvirt-user']);
  return {
    vmiFile: path.resolve(v.vmi),
    images,
    console: norm.values.get('console') ?? v.console ?? false,
    allowEmulation: norm.values.get('allow-emulation') ?? v['allow-emulation'] ?? false,
    socketDir: v['socket-dir'] ? path.resolve(v['socket-dir']) : undefined,
    workDir: v['work-dir'] ? path.resolve(v['work-dir']) : undefined,
    gracePeriodSeconds:
      v['grace-period-seconds'] !== undefined
        ? parseNonNegInt('grace-period-seconds', v['grace-period-seconds'])
        : undefined,
    qemuTimeoutMs: parseDuration('qemu-timeout', v['qemu-timeout'] ?? '5m'),
    logLevel: parseLevel(v['log-level'] ?? 'error'),
    keepAfterFailure: norm.values.get('keep-after-failure') ?? v['keep-after-failure'] ?? false,
    traceStart: norm.values.get('trace-start') ?? v['trace-start'] ?? false,
    libvirtUid: ug.uid,
    libvirtGid: ug.gid,
    featureGates,
    podNetwork,
    ...(v.passt !== undefined
      ? { passtBinary: v.passt.includes('/') ? path.resolve(v.passt) : v.passt }
      : {}),
  };
}
