// `virtctl create vm|instancetype|preference`: build a manifest from flags and print it; nothing is sent to
// a cluster. Follows upstream virtctl's flags, defaults and naming (see README); what upstream has and this
// does not is refused by name.
import { readFileSync } from 'node:fs';
import { checkDns1123Label, isQuantity, yaml, INSTANCETYPE_API_VERSION } from '@kubevirt-ts/api';
import { UsageError, type FlagValues, type Flags } from './flags.js';

type Obj = Record<string, unknown>;

/** what the builders get besides the flags */
export interface CreateCtx {
  /** -n/--namespace when given on the command line (upstream: only an explicit namespace is printed) */
  namespace?: string;
  /** the 5-character suffix of generated names (tests pin it) */
  suffix?: () => string;
  warn: (s: string) => void;
}

// the alphabet of Kubernetes' generated-name suffixes (no vowels, no look-alikes)
const SUFFIX_CHARS = 'bcdfghjklmnpqrstvwxz2456789';
export const randomSuffix = (): string =>
  Array.from({ length: 5 }, () => SUFFIX_CHARS[Math.floor(Math.random() * SUFFIX_CHARS.length)]).join('');

const str = (f: FlagValues, k: string): string | undefined => {
  const v = f[k];
  return typeof v === 'string' ? v : undefined;
};
const list = (f: FlagValues, k: string): string[] => {
  const v = f[k];
  return Array.isArray(v) ? v : typeof v === 'string' ? [v] : [];
};
const given = (f: FlagValues, k: string) => f[k] !== undefined;

function exclusive(f: FlagValues, names: string[]): void {
  const set = names.filter((n) => given(f, n));
  if (set.length > 1)
    throw new UsageError(
      `${set
        .slice(0, -1)
        .map((n) => `--${n}`)
        .join(', ')} and --${set.at(-1)!} cannot be used together`,
    );
}

/** `key:value,key:value` of a flag, only the keys allowed */
function params(flag: string, s: string, allowed?: readonly string[]): Map<string, string> {
  if (s === '') throw new UsageError(`--${flag}: params may not be empty`);
  const m = new Map<string, string>();
  for (const p of s.split(',')) {
    const i = p.indexOf(':');
    if (i < 0) throw new UsageError(`--${flag}: params need to have at least one colon: ${p}`);
    m.set(p.slice(0, i), p.slice(i + 1));
  }
  const unknown = allowed ? [...m].filter(([k]) => !allowed.includes(k)) : [];
  if (unknown.length)
    throw new UsageError(`--${flag}: unknown param(s): ${unknown.map(([k, v]) => `${k}:${v}`).join(',')}`);
  return m;
}

function uintParam(flag: string, p: Map<string, string>, key: string): number | undefined {
  const v = p.get(key);
  if (v === undefined) return undefined;
  if (!/^\d+$/.test(v) || Number(v) > 0xffffffff)
    throw new UsageError(`--${flag}: param "${key}" must be a whole number, got "${v}"`);
  return Number(v);
}

function quantity(flag: string, v: string, what = 'value'): string {
  if (!isQuantity(v)) throw new UsageError(`--${flag}: ${what} "${v}" is not a quantity (e.g. 512Mi, 2Gi)`);
  return canonicalQuantity(v);
}

const BINARY_SHIFT: Record<string, number> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };
const DECIMAL_EXP: Record<string, number> = {
  n: -9,
  u: -6,
  m: -3,
  '': 0,
  k: 3,
  M: 6,
  G: 9,
  T: 12,
  P: 15,
  E: 18,
};

/**
 * A quantity as Kubernetes prints it after parsing: the largest suffix of its kind (binary or decimal) that keeps
 * the number whole (1024Mi -> 1Gi, 0.5Gi -> 512Mi, 1000 -> 1k, 1500M -> 1500M). Exponent forms (1e3) and
 * fractions of a byte are printed as given.
 */
export function canonicalQuantity(q: string): string {
  const m = /^(-?)(\d+)(?:\.(\d+))?(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$/.exec(q.replace(/^\+/, ''));
  if (!m) return q;
  const [, sign, int, frac = '', suffix = ''] = m;
  let digits = BigInt(int! + frac);
  if (digits === 0n) return '0';
  const shift = BINARY_SHIFT[suffix];
  if (shift !== undefined) {
    const num = digits << BigInt(shift);
    const den = 10n ** BigInt(frac.length);
    if (num % den !== 0n) return q;
    let v = num / den;
    let unit = 0;
    while (unit < 6 && v % 1024n === 0n) {
      v /= 1024n;
      unit++;
    }
    return `${sign}${v}${['', 'Ki', 'Mi', 'Gi', 'Ti', 'Pi', 'Ei'][unit]}`;
  }
  let exp = DECIMAL_EXP[suffix]! - frac.length;
  while (digits % 10n === 0n) {
    digits /= 10n;
    exp++;
  }
  const exp3 = Math.min(18, Math.floor(exp / 3) * 3);
  if (exp3 < -9) return q;
  const name = Object.keys(DECIMAL_EXP).find((k) => DECIMAL_EXP[k] === exp3)!;
  return `${sign}${digits * 10n ** BigInt(exp - exp3)}${name}`;
}

/** `[prefix/]name` */
function prefixed(flag: string, s: string, what = ''): [string, string] {
  const parts = s.split('/');
  if (parts.length > 2)
    throw new UsageError(`--${flag}: ${what}invalid count ${parts.length - 1} of slashes in prefix/name`);
  const [prefix, name] = parts.length === 2 ? [parts[0]!, parts[1]!] : ['', parts[0]!];
  if (name === '') throw new UsageError(`--${flag}: ${what}name cannot be empty`);
  return [prefix, name];
}

function dnsLabel(flag: string, name: string): void {
  const bad = checkDns1123Label(name);
  if (bad) throw new UsageError(`--${flag}: invalid name "${name}": ${bad}`);
}

// ---------------------------------------------------------------- vm

const RUN_STRATEGIES = ['Always', 'Manual', 'Halted', 'Once', 'RerunOnFailure'];
const NOT_IMPL = 'not implemented by kubevirt-ts';

export const CREATE_VM_FLAGS: Flags = {
  name: { type: 'string', help: 'the name of the VM (default: vm-<5 random characters>)' },
  'run-strategy': {
    type: 'string',
    help: `the runStrategy: ${RUN_STRATEGIES.join(', ')} (case-insensitive; default Always)`,
  },
  'termination-grace-period': { type: 'string', help: 'terminationGracePeriodSeconds (default 180)' },
  memory: {
    type: 'string',
    help: 'guest memory (default 512Mi); not with --instancetype or --infer-instancetype(-from), and no implicit instance type inference',
  },
  instancetype: {
    type: 'string',
    help: '[virtualmachineinstancetype|virtualmachineclusterinstancetype/]NAME (no kind: cluster-wide, the server decides)',
  },
  'infer-instancetype': {
    type: 'boolean',
    help:
      'infer the instance type from the first boot volume (a PVC or DataVolume), failing here when it cannot; ' +
      'without it inference is implicit (policy Ignore, memory kept) unless --memory is given; =false: none',
  },
  'infer-instancetype-from': {
    type: 'string',
    help: 'the volume to infer the instance type from (explicit inference); not with --infer-instancetype',
  },
  preference: {
    type: 'string',
    help: '[virtualmachinepreference|virtualmachineclusterpreference/]NAME',
  },
  'infer-preference': {
    type: 'boolean',
    help:
      'infer the preference from the first boot volume (a PVC or DataVolume), failing here when it cannot; ' +
      'without it inference is implicit (policy Ignore); =false: none',
  },
  'infer-preference-from': {
    type: 'string',
    help: 'the volume to infer the preference from (explicit inference); not with --infer-preference',
  },

  'volume-containerdisk': {
    type: 'string',
    multiple: true,
    help: 'src:IMAGE[,name:NAME][,bootorder:N], repeatable (name default: <vm>-containerdisk-<index>)',
  },
  'volume-pvc': {
    type: 'string',
    multiple: true,
    help: "src:PVC[,name:NAME][,bootorder:N], repeatable: a PVC of the VM's namespace used as is",
  },
  'volume-import': {
    type: 'string',
    multiple: true,
    help:
      'type:TYPE,... a DataVolume template, repeatable; [,name:NAME][,bootorder:N][,size:Q] and per type: ' +
      'blank size:Q | pvc src:NS/NAME | snapshot src:NS/NAME | ds src:[NS/]NAME | ' +
      'registry size:Q and url:URL or imagestream:S [,pullmethod:pod|node][,secretref:S][,certconfigmap:C] | ' +
      'http size:Q,url:URL[,secretref:S][,certconfigmap:C][,extraheaders:H;H][,secretextraheaders:S;S]',
  },
  user: { type: 'string', help: 'the user of the generated cloud-init user data' },
  'password-file': {
    type: 'string',
    help: 'a file holding the password of the generated cloud-init user data (stored in clear text!)',
  },
  'ssh-key': {
    type: 'string',
    multiple: true,
    help: 'SSH authorized keys of the generated cloud-init user data (repeatable, or comma-separated)',
  },
  'ga-manage-ssh': {
    type: 'boolean',
    help: 'let the guest agent manage SSH keys (an SELinux boolean in the generated user data)',
  },
  'cloud-init': { type: 'string', help: 'the cloud-init data source: nocloud (default), configdrive, none' },
  'cloud-init-user-data': {
    type: 'string',
    help: 'base64 cloud-init user data (instead of the generated one)',
  },
  'cloud-init-network-data': { type: 'string', help: 'base64 cloud-init network data' },
  output: { type: 'string', short: 'o', help: 'yaml (default) or json' },
  'volume-sysprep': { type: 'string', unimplemented: true, help: `upstream's; ${NOT_IMPL}` },
  'access-cred': { type: 'string', multiple: true, unimplemented: true, help: `upstream's; ${NOT_IMPL}` },
  'volume-datasource': {
    type: 'string',
    multiple: true,
    unimplemented: true,
    help: `upstream's deprecated form; ${NOT_IMPL} (use --volume-import type:ds,...)`,
  },
  'volume-clone-pvc': {
    type: 'string',
    multiple: true,
    unimplemented: true,
    help: `upstream's deprecated form; ${NOT_IMPL} (use --volume-import type:pvc,...)`,
  },
  'volume-blank': {
    type: 'string',
    multiple: true,
    unimplemented: true,
    help: `upstream's deprecated form; ${NOT_IMPL} (use --volume-import type:blank,...)`,
  },
};

const VOLUME_PARAMS = ['name', 'src', 'bootorder'] as const;
const IMPORT_COMMON = ['type', 'name', 'size', 'bootorder'];
/** the --volume-import types: their params, whether size is required, the DataVolume spec they give */
const IMPORT_TYPES: Record<
  string,
  { params: string[]; sizeOptional?: boolean; spec(p: Map<string, string>): Obj }
> = {
  blank: { params: IMPORT_COMMON, spec: () => ({ source: { blank: {} } }) },
  pvc: {
    params: [...IMPORT_COMMON, 'src'],
    sizeOptional: true,
    spec: (p) => ({ source: { pvc: namespacedSource(p, 'pvc') } }),
  },
  snapshot: {
    params: [...IMPORT_COMMON, 'src'],
    sizeOptional: true,
    spec: (p) => ({ source: { snapshot: namespacedSource(p, 'snapshot') } }),
  },
  ds: {
    params: [...IMPORT_COMMON, 'src'],
    sizeOptional: true,
    spec(p) {
      const [namespace, name] = prefixed('volume-import', required(p, 'src'), 'src invalid: ');
      return { sourceRef: { kind: 'DataSource', name, ...(namespace ? { namespace } : {}) } };
    },
  },
  registry: {
    params: [...IMPORT_COMMON, 'certconfigmap', 'imagestream', 'pullmethod', 'secretref', 'url'],
    spec(p) {
      const pull = p.get('pullmethod');
      if (pull && pull !== 'pod' && pull !== 'node')
        throw new UsageError('--volume-import: pullmethod must be set to pod or node');
      if (!p.get('url') === !p.get('imagestream'))
        throw new UsageError('--volume-import: exactly one of url or imagestream must be defined');
      const registry: Obj = {};
      for (const [param, field] of [
        ['certconfigmap', 'certConfigMap'],
        ['imagestream', 'imageStream'],
        ['pullmethod', 'pullMethod'],
        ['secretref', 'secretRef'],
        ['url', 'url'],
      ] as const)
        if (p.get(param)) registry[field] = p.get(param);
      return { source: { registry } };
    },
  },
  http: {
    params: [...IMPORT_COMMON, 'certconfigmap', 'extraheaders', 'secretextraheaders', 'secretref', 'url'],
    spec(p) {
      const url = p.get('url');
      if (!url) throw new UsageError('--volume-import: url is required with http volume source');
      const http: Obj = { url };
      if (p.get('secretref')) http['secretRef'] = p.get('secretref');
      if (p.get('certconfigmap')) http['certConfigMap'] = p.get('certconfigmap');
      if (p.has('extraheaders')) http['extraHeaders'] = p.get('extraheaders')!.split(';');
      if (p.has('secretextraheaders')) http['secretExtraHeaders'] = p.get('secretextraheaders')!.split(';');
      return { source: { http } };
    },
  },
};
const UNIMPLEMENTED_IMPORT_TYPES = ['gcs', 'imageio', 's3', 'vddk'];

function required(p: Map<string, string>, key: string): string {
  const v = p.get(key);
  if (!v) throw new UsageError(`--volume-import: ${key} must be specified`);
  return v;
}

function namespacedSource(p: Map<string, string>, kind: string): Obj {
  const [namespace, name] = prefixed('volume-import', required(p, 'src'), 'src invalid: ');
  if (!namespace) throw new UsageError(`--volume-import: namespace of ${kind} "${name}" must be specified`);
  return { name, namespace };
}

interface VmState {
  volumes: Obj[];
  disks: Obj[];
  /** boot order -> volume */
  bootOrders: Map<number, string>;
}

function addVolume(s: VmState, flag: string, name: string, source: Obj, boot: number | undefined): void {
  if (s.volumes.some((v) => v['name'] === name))
    throw new UsageError(`--${flag}: there is already a volume with name "${name}"`);
  s.volumes.push({ name, ...source });
  if (boot === undefined) return;
  if (boot === 0) throw new UsageError(`--${flag}: bootorder must be greater than 0`);
  if (s.bootOrders.has(boot))
    throw new UsageError(`--${flag}: bootorder ${boot} was specified multiple times`);
  s.bootOrders.set(boot, name);
  s.disks.push({ name, bootOrder: boot });
}

/** --volume-containerdisk, --volume-pvc: `src:S[,name:N][,bootorder:N]`; build gives the default name and the source */
function plainVolume(s: VmState, flag: string, v: string, build: (src: string) => [string, Obj]): void {
  const p = params(flag, v, VOLUME_PARAMS);
  const src = p.get('src');
  if (!src) throw new UsageError(`--${flag}: src must be specified`);
  const [dflt, source] = build(src);
  const vol = p.get('name') || dflt;
  dnsLabel(flag, vol);
  addVolume(s, flag, vol, source, uintParam(flag, p, 'bootorder'));
}

/**
 * `[kind/]name` of --instancetype/--preference. The kind is taken in any case and printed lower-cased, as upstream's
 * (the API reads it in any case, singular or plural).
 */
function matcher(flag: string, value: string, kinds: [string, string]): Obj {
  const [prefix, name] = prefixed(flag, value);
  const lower = prefix.toLowerCase();
  const kind = kinds.find((k) => k.toLowerCase() === lower);
  if (lower && !kind)
    throw new UsageError(
      `--${flag}: invalid ${flag} kind "${lower}", supported values are: ${kinds.map((k) => k.toLowerCase()).join(', ')}`,
    );
  return { name, ...(kind ? { kind: lower } : {}) };
}

function cloudInit(s: VmState, f: FlagValues, ctx: CreateCtx): void {
  const names = [
    'user',
    'password-file',
    'ssh-key',
    'ga-manage-ssh',
    'cloud-init',
    'cloud-init-user-data',
    'cloud-init-network-data',
  ];
  if (!names.some((n) => given(f, n))) return;
  if (given(f, 'password-file'))
    ctx.warn('WARNING: --password-file: The password is stored in cleartext in the VM definition!\n');
  if (s.volumes.some((v) => v['name'] === 'cloudinitdisk'))
    throw new Error('there is already a volume with name "cloudinitdisk"');
  const type = (str(f, 'cloud-init') ?? 'nocloud').toLowerCase();
  if (type === 'none') {
    if (names.slice(1).some((n) => n !== 'cloud-init' && given(f, n)))
      ctx.warn(
        'WARNING: --cloud-init: was set to none, not creating a data source although other cloud-init options were set\n',
      );
    return;
  }
  if (type !== 'nocloud' && type !== 'configdrive')
    throw new UsageError(
      `--cloud-init: invalid cloud-init data source type "${str(f, 'cloud-init')}", supported values are: nocloud, configdrive, none`,
    );
  const src: Obj = {};
  const network = str(f, 'cloud-init-network-data');
  if (network) src['networkDataBase64'] = network;
  const userDataB64 = str(f, 'cloud-init-user-data');
  let userData = '#cloud-config';
  if (userDataB64) src['userDataBase64'] = userDataB64;
  else {
    const user = str(f, 'user');
    if (user) userData += `\nuser: ${user}`;
    const pwFile = str(f, 'password-file');
    if (pwFile) {
      let pw: string;
      try {
        pw = readFileSync(pwFile, 'utf8').trim();
      } catch (e) {
        throw new UsageError(`--password-file: ${(e as Error).message}`);
      }
      if (pw) userData += `\npassword: ${pw}\nchpasswd: { expire: False }`;
    }
    const keys = list(f, 'ssh-key').flatMap((k) => k.split(','));
    if (keys.length) userData += `\nssh_authorized_keys:${keys.map((k) => `\n  - ${k}`).join('')}`;
    if (f['ga-manage-ssh']) userData += "\nruncmd:\n  - [ setsebool, -P, 'virt_qemu_ga_manage_ssh', 'on' ]";
    src['userData'] = userData;
  }
  // nothing to say and no data source asked for: no volume
  if (!given(f, 'cloud-init') && src['userData'] === '#cloud-config' && !network) return;
  s.volumes.push({
    name: 'cloudinitdisk',
    [type === 'nocloud' ? 'cloudInitNoCloud' : 'cloudInitConfigDrive']: src,
  });
}

/** the VirtualMachine `virtctl create vm` prints */
export function createVm(f: FlagValues, ctx: CreateCtx): Obj {
  // upstream's groups: at most one flag of each
  exclusive(f, ['memory', 'instancetype', 'infer-instancetype', 'infer-instancetype-from']);
  exclusive(f, ['preference', 'infer-preference', 'infer-preference-from']);
  for (const n of ['user', 'password-file', 'ssh-key', 'ga-manage-ssh'])
    exclusive(f, ['cloud-init-user-data', n]);

  const name = str(f, 'name') ?? `vm-${(ctx.suffix ?? randomSuffix)()}`;
  const grace = str(f, 'termination-grace-period') ?? '180';
  if (!/^-?\d+$/.test(grace))
    throw new UsageError(`--termination-grace-period: must be a whole number of seconds, got "${grace}"`);
  const memory = quantity('memory', str(f, 'memory') ?? '512Mi');

  const disks: Obj[] = [];
  const tspec: Obj = {
    domain: { devices: {}, memory: { guest: memory } },
    terminationGracePeriodSeconds: Number(grace),
  };
  const spec: Obj = { runStrategy: 'Always', template: { metadata: {}, spec: tspec } };
  const vm: Obj = {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachine',
    metadata: { name, ...(ctx.namespace ? { namespace: ctx.namespace } : {}) },
    spec,
    status: {},
  };
  const s: VmState = { volumes: [], disks, bootOrders: new Map() };
  const dataVolumeTemplates: Obj[] = [];

  const rs = str(f, 'run-strategy');
  if (rs !== undefined) {
    const match = RUN_STRATEGIES.find((r) => r.toLowerCase() === rs.toLowerCase());
    if (!match)
      throw new UsageError(
        `--run-strategy: invalid run strategy "${rs}", supported values are: ${RUN_STRATEGIES.join(', ')}`,
      );
    spec['runStrategy'] = match;
  }
  const it = str(f, 'instancetype');
  if (it !== undefined) {
    spec['instancetype'] = matcher('instancetype', it, [
      'VirtualMachineInstancetype',
      'VirtualMachineClusterInstancetype',
    ]);
    delete (tspec['domain'] as Obj)['memory'];
  }
  const pref = str(f, 'preference');
  if (pref !== undefined)
    spec['preference'] = matcher('preference', pref, [
      'VirtualMachinePreference',
      'VirtualMachineClusterPreference',
    ]);

  list(f, 'volume-containerdisk').forEach((v, i) =>
    plainVolume(s, 'volume-containerdisk', v, (image) => [
      `${name}-containerdisk-${i}`,
      { containerDisk: { image } },
    ]),
  );
  for (const v of list(f, 'volume-pvc'))
    plainVolume(s, 'volume-pvc', v, (src) => {
      const [ns, claimName] = prefixed('volume-pvc', src, 'src invalid: ');
      if (ns) throw new UsageError(`--volume-pvc: not allowed to specify namespace of pvc "${claimName}"`);
      return [claimName, { persistentVolumeClaim: { claimName } }];
    });
  for (const v of list(f, 'volume-import')) {
    const type = params('volume-import', v).get('type');
    if (type === undefined) throw new UsageError('--volume-import: type must be specified');
    if (UNIMPLEMENTED_IMPORT_TYPES.includes(type))
      throw new UsageError(`--volume-import: type:${type} is not implemented by kubevirt-ts`);
    const t = IMPORT_TYPES[type];
    if (!t)
      throw new UsageError(
        `--volume-import: invalid volume import type "${type}", see help for supported values`,
      );
    const p = params('volume-import', v, t.params);
    const dvSpec = t.spec(p);
    const size = p.get('size');
    if (size === undefined && !t.sizeOptional)
      throw new UsageError('--volume-import: size must be specified');
    const storage =
      size === undefined
        ? {}
        : { resources: { requests: { storage: quantity('volume-import', size, 'size') } } };
    const vol = p.get('name') ?? `imported-volume-${(ctx.suffix ?? randomSuffix)()}`;
    dnsLabel('volume-import', vol);
    const boot = uintParam('volume-import', p, 'bootorder');
    addVolume(s, 'volume-import', vol, { dataVolume: { name: vol } }, boot);
    dataVolumeTemplates.push({
      metadata: { name: vol },
      spec: { ...dvSpec, storage },
    });
  }

  cloudInit(s, f, ctx);

  if (dataVolumeTemplates.length) spec['dataVolumeTemplates'] = dataVolumeTemplates;
  if (disks.length) (tspec['domain'] as Obj)['devices'] = { disks };
  if (s.volumes.length) tspec['volumes'] = s.volumes;

  // after the volumes (cloudinitdisk included), instance type before preference, as upstream
  for (const field of ['instancetype', 'preference'] as const) {
    const inf = inference(f, field);
    if (!inf) continue;
    let volume: string;
    try {
      volume = inferVolume(s, dataVolumeTemplates, inf.from);
    } catch (e) {
      // implicit inference is best effort: the VM is printed without it
      if (inf.explicitFlag === undefined) continue;
      throw new UsageError(`--${inf.explicitFlag}: ${(e as Error).message}`);
    }
    spec[field] = {
      inferFromVolume: volume,
      ...(inf.explicitFlag === undefined ? { inferFromVolumeFailurePolicy: 'Ignore' } : {}),
    };
    // explicit: the instance type gives the memory; implicit: 512Mi stays as the fallback the webhook drops
    // when inference succeeds
    if (field === 'instancetype' && inf.explicitFlag !== undefined) delete (tspec['domain'] as Obj)['memory'];
  }
  return vm;
}

/**
 * Whether `spec.<field>` is inferred from a volume: on by default (implicit), off with --infer-<field>=false, with
 * --<field> and (instance type) with --memory. Explicit when --infer-<field> or --infer-<field>-from was given.
 */
function inference(
  f: FlagValues,
  field: 'instancetype' | 'preference',
): { explicitFlag?: string; from?: string } | undefined {
  const on = `infer-${field}`;
  const from = `infer-${field}-from`;
  if (f[on] === false || given(f, field) || (field === 'instancetype' && given(f, 'memory')))
    return undefined;
  const explicitFlag = given(f, from) ? from : given(f, on) ? on : undefined;
  const volume = str(f, from);
  return { ...(explicitFlag ? { explicitFlag } : {}), ...(volume ? { from: volume } : {}) };
}

/**
 * The volume to infer from: the one named, else the disk with the lowest boot order, else the first volume. Only a
 * PVC or a DataVolume qualifies; a DataVolume template only when it copies a PVC, a registry image or a snapshot, or
 * refers to a DataSource (what carries the instancetype.kubevirt.io/default-* labels). Errors carry upstream's text.
 */
function inferVolume(s: VmState, templates: Obj[], named: string | undefined): string {
  let name = named;
  if (name === undefined) {
    if (s.volumes.length === 0)
      throw new Error('at least one volume is needed to infer an instance type or preference');
    const lowest = Math.min(...s.bootOrders.keys());
    name = s.bootOrders.size ? s.bootOrders.get(lowest)! : (s.volumes[0]!['name'] as string);
  }
  const vol = s.volumes.find((v) => v['name'] === name);
  if (!vol) throw new Error(`there is no volume with name "${name}"`);
  if (vol['persistentVolumeClaim']) return name;
  const dv = vol['dataVolume'] as Obj | undefined;
  if (!dv)
    throw new Error(
      'inference of instancetype or preference works only with datasources, datavolumes or pvcs',
    );
  const t = templates.find((x) => (x['metadata'] as Obj)['name'] === dv['name']);
  const tspec = (t?.['spec'] ?? {}) as Obj;
  const source = tspec['source'] as Obj | undefined;
  const ref = tspec['sourceRef'] as Obj | undefined;
  if (
    t &&
    !(source?.['pvc'] || source?.['registry'] || source?.['snapshot'] || ref?.['kind'] === 'DataSource')
  )
    throw new Error(
      'this datavolume is not valid to infer an instancetype or preference from ' +
        '(source needs to be PVC, Registry or Snapshot, sourceRef needs to be DataSource)',
    );
  return name;
}

// ---------------------------------------------------------------- instancetype, preference

const NAMESPACED: Flags = {
  name: { type: 'string', help: 'the name (default: a kind prefix and 5 random characters)' },
  namespaced: {
    type: 'boolean',
    help: 'the namespaced kind (also implied by -n) instead of the cluster-wide one',
  },
  output: { type: 'string', short: 'o', help: 'yaml (default) or json' },
};

export const CREATE_INSTANCETYPE_FLAGS: Flags = {
  cpu: { type: 'string', help: 'guest vCPUs (required, > 0)' },
  memory: { type: 'string', help: 'guest memory (required), e.g. 2Gi' },
  gpu: { type: 'string', multiple: true, help: 'name:NAME,devicename:DEVICE, a vGPU (repeatable)' },
  hostdevice: {
    type: 'string',
    multiple: true,
    help: 'name:NAME,devicename:DEVICE, a host device (repeatable)',
  },
  iothreadspolicy: { type: 'string', help: 'auto or shared' },
  ...NAMESPACED,
};

export const CREATE_PREFERENCE_FLAGS: Flags = {
  'cpu-topology': { type: 'string', help: 'the preferred CPU topology: sockets, cores, threads or spread' },
  'volume-storage-class': { type: 'string', help: 'the preferred storage class of volumes' },
  'machine-type': { type: 'string', help: 'the preferred machine type' },
  ...NAMESPACED,
};

function header(f: FlagValues, ctx: CreateCtx, kind: 'Instancetype' | 'Preference'): Obj {
  const namespaced = Boolean(f['namespaced']) || ctx.namespace !== undefined;
  const prefix = `${namespaced ? '' : 'cluster'}${kind.toLowerCase()}-`;
  const name = str(f, 'name') ?? `${prefix}${(ctx.suffix ?? randomSuffix)()}`;
  return {
    apiVersion: INSTANCETYPE_API_VERSION,
    kind: `VirtualMachine${namespaced ? '' : 'Cluster'}${kind}`,
    metadata: { name, ...(namespaced && ctx.namespace ? { namespace: ctx.namespace } : {}) },
  };
}

function devices(flag: string, f: FlagValues): Obj[] {
  return list(f, flag).map((v) => {
    const p = params(flag, v, ['name', 'devicename']);
    if (!p.get('name')) throw new UsageError(`--${flag}: name must be specified`);
    if (!p.get('devicename')) throw new UsageError(`--${flag}: deviceName must be specified`);
    return { name: p.get('name'), deviceName: p.get('devicename') };
  });
}

/** the (Cluster)Instancetype `virtctl create instancetype` prints */
export function createInstancetype(f: FlagValues, ctx: CreateCtx): Obj {
  const cpu = str(f, 'cpu');
  const memory = str(f, 'memory');
  const missing = ['cpu', 'memory'].filter((n) => !given(f, n));
  if (missing.length)
    throw new UsageError(`required flag(s) ${missing.map((n) => `--${n}`).join(', ')} not set`);
  if (!/^\d+$/.test(cpu!) || Number(cpu) > 0xffffffff)
    throw new UsageError(`--cpu: must be a whole number of vCPUs, got "${cpu}"`);
  if (Number(cpu) === 0) throw new UsageError('--cpu: cpu value must be greater than zero');
  const spec: Obj = { cpu: { guest: Number(cpu) }, memory: { guest: quantity('memory', memory!) } };
  const gpus = devices('gpu', f);
  if (gpus.length) spec['gpus'] = gpus;
  const hostDevices = devices('hostdevice', f);
  if (hostDevices.length) spec['hostDevices'] = hostDevices;
  const io = str(f, 'iothreadspolicy');
  if (io !== undefined) {
    if (io !== 'auto' && io !== 'shared')
      throw new UsageError('--iothreadspolicy: IOThread must be of value auto or shared');
    spec['ioThreadsPolicy'] = io;
  }
  return { ...header(f, ctx, 'Instancetype'), spec };
}

const TOPOLOGIES = ['sockets', 'cores', 'threads', 'spread'];

/** the (Cluster)Preference `virtctl create preference` prints */
export function createPreference(f: FlagValues, ctx: CreateCtx): Obj {
  const spec: Obj = {};
  const topology = str(f, 'cpu-topology');
  if (topology !== undefined) {
    if (!TOPOLOGIES.includes(topology))
      throw new UsageError(
        '--cpu-topology: CPU topology must have a value of sockets, cores, threads or spread',
      );
    spec['cpu'] = { preferredCPUTopology: topology };
  }
  const machine = str(f, 'machine-type');
  if (machine !== undefined) spec['machine'] = { preferredMachineType: machine };
  const sc = str(f, 'volume-storage-class');
  if (sc !== undefined) spec['volumes'] = { preferredStorageClassName: sc };
  return { ...header(f, ctx, 'Preference'), spec };
}

/** YAML as upstream prints it (keys sorted, lists not indented), or JSON with -o json */
export function render(o: unknown, f: FlagValues): string {
  const out = str(f, 'output') ?? 'yaml';
  if (out === 'json') return `${JSON.stringify(o, null, 2)}\n`;
  if (out !== 'yaml') throw new UsageError(`--output: must be yaml or json, got "${out}"`);
  return yaml().stringify(o, { sortMapEntries: true, indentSeq: false, lineWidth: 0 });
}
