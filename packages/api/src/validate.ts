// Validation: structural checks derived from the TypeBox schemas (validate-schema.ts), then the semantic
// rules upstream's admission webhooks apply, by area (validate-compute.ts, validate-storage.ts,
// validate-network.ts, and the rest of the spec here). Every error is returned at once, each with its
// field path.
import { isIP } from 'node:net';
import { sub } from './paths.js';
import { labelSelectorError, labelSelectorMatches } from './selector.js';
import {
  API_VERSION,
  VirtualMachineInstanceMigrationSchema,
  VirtualMachineInstanceReplicaSetSchema,
  VirtualMachineInstanceSchema,
  type VirtualMachineInstanceSpec,
  VirtualMachineSchema,
  VirtualMachinePoolSchema,
  VirtualMachineInstancePresetSchema,
  POOL_API_VERSIONS,
  type LabelSelector,
} from './schemas.js';
import {
  Errs,
  type FieldError,
  KINDS,
  TOO_DEEP,
  arr,
  checkDns1123Label,
  checkDns1123Subdomain,
  dropNulls,
  isObj,
  obj,
  str,
  tooDeep,
  uniqueNames,
  validateMetadata,
} from './validate-common.js';
import {
  validateClockAndFeatures,
  validateCpu,
  validateFirmware,
  validateResourcesAndMemory,
} from './validate-compute.js';
import {
  INSTANCETYPE_API_VERSION,
  INSTANCETYPE_KINDS,
  PREFERENCE_KINDS,
  VirtualMachineClusterInstancetypeSchema,
  VirtualMachineClusterPreferenceSchema,
  VirtualMachineInstancetypeSchema,
  VirtualMachinePreferenceSchema,
  matcherKind,
} from './instancetype.js';
import {
  MIGRATION_POLICY_API_VERSION,
  MIGRATION_POLICY_FIELDS_NOT_IMPLEMENTED,
  MigrationPolicySchema,
} from './migration-policy.js';
import { validateNetworks } from './validate-network.js';
import { type Checked, checkSchema, describe } from './validate-schema.js';
import { type BootOrderUse, validateDisks, validateVolumes } from './validate-storage.js';

export {
  type FieldError,
  KINDS,
  dropNulls,
  checkDns1123Label,
  checkDns1123Subdomain,
  checkQualifiedName,
} from './validate-common.js';
export { HYPERV_REQUIRES, type HypervFeature } from './validate-compute.js';

type Spec = Checked<VirtualMachineInstanceSpec>;

function validateDevices(
  spec: Spec,
  base: string,
  volumes: Map<string, number> | undefined,
  boot: BootOrderUse[],
  e: Errs,
) {
  const devices = spec.domain?.devices ?? {};
  const dpath = sub(sub(base, 'domain'), 'devices');
  validateDisks(devices, dpath, volumes, spec.volumes ?? [], boot, e);

  const inputs = devices.inputs ?? [];
  uniqueNames(inputs, sub(dpath, 'inputs'), e, 'input');
  inputs.forEach((inp, i) => {
    const p = sub(sub(dpath, 'inputs'), i);
    const t = inp.type;
    if (t !== undefined && t !== 'tablet')
      e.add(sub(p, 'type'), `unsupported input type "${t}": only tablet is supported`);
    const bus = inp.bus;
    if (bus !== undefined && bus !== 'usb' && bus !== 'virtio')
      e.add(sub(p, 'bus'), `unsupported input bus "${bus}": must be usb or virtio`);
  });

  // upstream's message (validateVideoConfig)
  if (devices.video && devices.autoattachGraphicsDevice === false)
    e.add(
      sub(dpath, 'video'),
      'Video configuration is not allowed when autoattachGraphicsDevice is set to false',
    );

  const seen = new Map<number, string>();
  for (const b of boot) {
    const first = seen.get(b.order);
    if (first !== undefined) e.add(b.path, `boot order ${b.order} is already used by ${first}`);
    else seen.set(b.order, b.path);
  }
}

function validateProbesAndDns(spec: Spec, base: string, e: Errs) {
  const hasPodNetwork = (spec.networks ?? []).some((n) => n.pod !== undefined);
  for (const k of ['readinessProbe', 'livenessProbe'] as const) {
    const probe = spec[k];
    if (probe === undefined) continue;
    const p = sub(base, k);
    const handlers = (['httpGet', 'tcpSocket', 'exec', 'guestAgentPing'] as const).filter(
      (h) => probe[h] !== undefined,
    );
    if (handlers.length === 0) e.add(p, 'a probe needs one of httpGet, tcpSocket, exec or guestAgentPing');
    if (handlers.length > 1) e.add(p, `a probe can have only one handler, got ${handlers.join(', ')}`);
    if (!hasPodNetwork) {
      for (const h of ['httpGet', 'tcpSocket'] as const)
        if (probe[h] !== undefined) e.add(sub(p, h), `${h} probes need the pod network`);
    }
  }
  if (spec.startStrategy === 'Paused' && spec.livenessProbe !== undefined) {
    e.add(sub(base, 'startStrategy'), 'a VMI started paused cannot have a livenessProbe');
  }
  const dnsPolicy = spec.dnsPolicy;
  if (dnsPolicy === 'None' && spec.dnsConfig === undefined)
    e.add(sub(base, 'dnsConfig'), 'required when dnsPolicy is None');
  const dp = sub(base, 'dnsConfig');
  if (spec.dnsConfig !== undefined && !e.reported(dp)) {
    // dnsConfig is core/v1 PodDNSConfig, which the schema keeps opaque: its fields are read as given
    const dnsConfig = obj(spec.dnsConfig);
    const ns = arr(dnsConfig['nameservers']);
    if (dnsPolicy === 'None' && ns.length === 0)
      e.add(sub(dp, 'nameservers'), 'at least one nameserver is required when dnsPolicy is None');
    if (ns.length > 3) e.add(sub(dp, 'nameservers'), `at most 3 nameservers, got ${ns.length}`);
    ns.forEach((x, i) => {
      if (typeof x !== 'string' || !isIP(x))
        e.add(sub(sub(dp, 'nameservers'), i), `${describe(x)} is not an IP address`);
    });
    const searches = arr(dnsConfig['searches']);
    if (searches.length > 6) e.add(sub(dp, 'searches'), `at most 6 search domains, got ${searches.length}`);
    searches.forEach((x, i) => {
      const bad = typeof x === 'string' ? checkDns1123Subdomain(x) : 'must be a string';
      if (bad) e.add(sub(sub(dp, 'searches'), i), bad);
    });
  }
}

function validateAccessCredentials(spec: Spec, base: string, e: Errs) {
  const vols = spec.volumes ?? [];
  const hasNoCloud = vols.some((v) => v.cloudInitNoCloud !== undefined);
  const hasConfigDrive = vols.some((v) => v.cloudInitConfigDrive !== undefined);
  // access credentials are kept opaque by the schema: their fields are read as given
  (spec.accessCredentials ?? []).forEach((c0, i) => {
    const c = obj(c0);
    const p = sub(sub(base, 'accessCredentials'), i);
    const kinds = ['sshPublicKey', 'userPassword'].filter((k) => c[k] !== undefined);
    if (kinds.length !== 1) {
      e.add(p, 'exactly one of sshPublicKey and userPassword must be set');
      return;
    }
    const k = kinds[0]!;
    const cred = obj(c[k]);
    if (obj(obj(cred['source'])['secret'])['secretName'] === undefined)
      e.add(sub(sub(p, k), 'source'), 'needs source.secret.secretName');
    const pm = obj(cred['propagationMethod']);
    const methods = Object.keys(pm);
    if (methods.length !== 1)
      e.add(sub(sub(p, k), 'propagationMethod'), 'exactly one propagation method must be set');
    if (pm['noCloud'] !== undefined && !hasNoCloud)
      e.add(sub(sub(p, k), 'propagationMethod'), 'noCloud propagation needs a cloudInitNoCloud volume');
    if (pm['configDrive'] !== undefined && !hasConfigDrive)
      e.add(
        sub(sub(p, k), 'propagationMethod'),
        'configDrive propagation needs a cloudInitConfigDrive volume',
      );
    if (k === 'userPassword' && methods.some((m) => m !== 'qemuGuestAgent'))
      e.add(sub(sub(p, k), 'propagationMethod'), 'userPassword only supports qemuGuestAgent');
    if (
      pm['qemuGuestAgent'] !== undefined &&
      k === 'sshPublicKey' &&
      arr(obj(pm['qemuGuestAgent'])['users']).length === 0
    ) {
      e.add(
        sub(sub(sub(sub(p, k), 'propagationMethod'), 'qemuGuestAgent'), 'users'),
        'at least one user is required',
      );
    }
  });
}

/** Semantic rules for a VMI spec at `base` (e.g. `spec` or `spec.template.spec`). */
function validateVmiSpec(
  spec: Spec | undefined,
  base: string,
  e: Errs,
  o: { memoryFromInstancetype?: boolean } = {},
) {
  if (spec === undefined || e.reported(base)) return;
  const domain = spec.domain;
  if (domain === undefined || e.reported(sub(base, 'domain'))) {
    // without a domain, cross-checks (disk -> volume, memory, ...) would only repeat that error
    validateVolumes(spec, base, e);
    return;
  }
  const dbase = sub(base, 'domain');
  validateResourcesAndMemory(domain, dbase, e, o);
  validateCpu(domain, dbase, e);
  validateFirmware(domain, dbase, e);
  validateClockAndFeatures(domain, dbase, e);
  const volumeNames = validateVolumes(spec, base, e);
  // a volumes field of the wrong type is a schema error; don't also report every disk as volume-less
  const volumes = e.reported(sub(base, 'volumes')) ? undefined : volumeNames;
  const boot: BootOrderUse[] = [];
  validateNetworks(spec, base, boot, e);
  validateDevices(spec, base, volumes, boot, e);
  const hostname = spec.hostname;
  if (hostname) {
    const bad = checkDns1123Label(hostname);
    if (bad) e.add(sub(base, 'hostname'), bad);
  }
  const subdomain = spec.subdomain;
  if (subdomain) {
    const bad = checkDns1123Subdomain(subdomain);
    if (bad) e.add(sub(base, 'subdomain'), bad);
  }
  validateProbesAndDns(spec, base, e);
  validateAccessCredentials(spec, base, e);
  const arch = spec.architecture;
  if (arch !== undefined && arch !== '' && !['amd64', 'arm64', 's390x', 'ppc64le'].includes(arch)) {
    e.add(
      sub(base, 'architecture'),
      `unsupported architecture "${arch}": must be amd64, arm64, s390x or ppc64le`,
    );
  }
  spec.tolerations?.forEach((t, i) => {
    if (t.operator === 'Exists' && t.value !== undefined && t.value !== '') {
      e.add(sub(sub(sub(base, 'tolerations'), i), 'value'), 'must be empty when operator is Exists');
    }
  });
}

// ------------------------------------------------------------------ entry points

function merge(structural: FieldError[], semantic: FieldError[]): FieldError[] {
  const out = [...structural];
  const key = (f: FieldError) => `${f.path}\u0000${f.reason}`;
  const have = new Set(out.map(key));
  // A field the schema already rejected is not re-reported by the semantic rules.
  const badPaths = new Set(structural.map((f) => f.path));
  for (const f of semantic) {
    if (have.has(key(f)) || badPaths.has(f.path)) continue;
    have.add(key(f));
    out.push(f);
  }
  return out;
}

function preamble(o: unknown, kind: string): FieldError[] | undefined {
  if (!isObj(o)) return [{ path: '', reason: `must be an object (a ${kind} manifest), got ${describe(o)}` }];
  if (tooDeep(o)) return [{ path: '', reason: TOO_DEEP }];
  return undefined;
}

/** Validates a VirtualMachineInstance manifest as upstream's admission webhook does (schema, names,
 * disk/volume and interface/network pairing, ...). Returns every problem found, [] when valid;
 * never throws. Null-valued fields count as absent. */
export function validateVirtualMachineInstance(o: unknown): FieldError[] {
  const pre = preamble(o, 'VirtualMachineInstance');
  if (pre) return pre;
  const { errors, value: vmi } = checkSchema(VirtualMachineInstanceSchema, dropNulls(o));
  const e = new Errs(errors);
  validateMetadata(vmi.metadata, 'metadata', e, { nameRequired: true });
  validateVmiSpec(vmi.spec, 'spec', e);
  return merge(errors, e.list);
}

/** Validates a VirtualMachine manifest: its metadata, `running` vs `runStrategy`, the VMI template (as
 * {@link validateVirtualMachineInstance}) and dataVolumeTemplates. Returns every problem, [] when valid. */
export function validateVirtualMachine(o: unknown): FieldError[] {
  const pre = preamble(o, 'VirtualMachine');
  if (pre) return pre;
  const { errors, value: vm } = checkSchema(VirtualMachineSchema, dropNulls(o));
  const e = new Errs(errors);
  validateMetadata(vm.metadata, 'metadata', e, { nameRequired: true });
  const spec = vm.spec ?? {};
  if (spec.running !== undefined && spec.runStrategy !== undefined) {
    e.add('spec.running', 'running and runStrategy are mutually exclusive: set only runStrategy');
  }
  const volumeNames = new Set((spec.template?.spec?.volumes ?? []).map((v) => v.name));
  for (const [field, matcher] of [
    ['instancetype', 'InstancetypeMatcher'],
    ['preference', 'PreferenceMatcher'],
  ] as const) {
    const m = spec[field];
    if (!m) continue;
    if (!m.name && !m.inferFromVolume)
      e.add(`spec.${field}`, `Either Name or InferFromVolume should be provided within the ${matcher}`);
    if (!m.inferFromVolume) continue;
    // upstream's messages: the matcher names an object or a volume, not both
    if (m.name)
      e.add(`spec.${field}.name`, 'Name already set, should be cleared before setting inferFromVolume');
    if (m.kind)
      e.add(`spec.${field}.kind`, 'Kind already set, should be cleared before setting inferFromVolume');
    if (!volumeNames.has(m.inferFromVolume))
      e.add(`spec.${field}.inferFromVolume`, `unable to find volume ${m.inferFromVolume} to infer defaults`);
  }
  for (const [field, kinds] of [
    ['instancetype', INSTANCETYPE_KINDS],
    ['preference', PREFERENCE_KINDS],
  ] as const) {
    const kind = spec[field]?.kind;
    if (kind && !matcherKind(kind, kinds))
      e.add(
        `spec.${field}.kind`,
        `must be ${kinds.join(' or ')} (any case, singular or plural), got ${JSON.stringify(kind)}`,
      );
  }
  validateMetadata(spec.template?.metadata, 'spec.template.metadata', e, { nameRequired: false });
  // an instance type gives the memory: the template need not (the admission webhook validates it applied)
  validateVmiSpec(spec.template?.spec, 'spec.template.spec', e, {
    memoryFromInstancetype: !!spec.instancetype,
  });
  const dvNames = new Set(
    (spec.template?.spec?.volumes ?? []).map((v) => v.dataVolume?.name).filter((n): n is string => !!n),
  );
  // data volume templates are kept opaque by the schema: their metadata is read as given
  (spec.dataVolumeTemplates ?? []).forEach((t, i) => {
    const p = sub('spec.dataVolumeTemplates', i);
    const name = str(obj(obj(t)['metadata'])['name']);
    if (!name) e.add(sub(sub(p, 'metadata'), 'name'), 'required: a data volume template needs a name');
    else if (!dvNames.has(name))
      e.add(
        p,
        `data volume template "${name}" is not used by any dataVolume volume in spec.template.spec.volumes`,
      );
  });
  return merge(errors, e.list);
}

/** Validates a VirtualMachineInstanceMigration manifest (metadata, `spec.vmiName` a DNS-1123 subdomain).
 * Returns every problem found, [] when valid. */
export function validateVirtualMachineInstanceMigration(o: unknown): FieldError[] {
  const pre = preamble(o, 'VirtualMachineInstanceMigration');
  if (pre) return pre;
  const { errors, value: vmim } = checkSchema(VirtualMachineInstanceMigrationSchema, dropNulls(o));
  const e = new Errs(errors);
  validateMetadata(vmim.metadata, 'metadata', e, { nameRequired: true });
  const vmiName = vmim.spec?.vmiName;
  if (vmiName === '') e.add('spec.vmiName', 'must not be empty');
  else if (vmiName !== undefined) {
    const bad = checkDns1123Subdomain(vmiName);
    if (bad) e.add('spec.vmiName', bad);
  }
  return merge(errors, e.list);
}

/** Validates a VirtualMachineInstanceReplicaSet manifest as upstream's VMIRS admitter: its metadata, the VMI
 * template (as {@link validateVirtualMachineInstance}), and `spec.selector`, which must be well formed and
 * match the template's labels. Returns every problem found, [] when valid. */
export function validateVirtualMachineInstanceReplicaSet(o: unknown): FieldError[] {
  const pre = preamble(o, 'VirtualMachineInstanceReplicaSet');
  if (pre) return pre;
  const { errors, value: rs } = checkSchema(VirtualMachineInstanceReplicaSetSchema, dropNulls(o));
  const e = new Errs(errors);
  validateMetadata(rs.metadata, 'metadata', e, { nameRequired: true });
  const spec = rs.spec ?? {};
  validateMetadata(spec.template?.metadata, 'spec.template.metadata', e, { nameRequired: false });
  validateVmiSpec(spec.template?.spec, 'spec.template.spec', e);
  // a selector the schema refused is not looked into further
  const selector = spec.selector as LabelSelector | undefined;
  if (selector && spec.template && !errors.some((f) => f.path.startsWith('spec.selector'))) {
    const bad = labelSelectorError(selector);
    if (bad) e.add('spec.selector', bad);
    else if (!labelSelectorMatches(selector, spec.template.metadata?.labels as Record<string, string>))
      e.add('spec.selector', 'selector does not match the labels of spec.template.metadata.labels');
  }
  return merge(errors, e.list);
}

/** the fields of a pool's spec upstream has and kubevirt-ts does not implement */
export const POOL_FIELDS_NOT_IMPLEMENTED = [
  'maxUnavailable',
  'scaleInStrategy',
  'updateStrategy',
  'autohealing',
] as const;

/** Validates a VirtualMachinePool manifest (pool.kubevirt.io/v1beta1 or v1alpha1) as upstream's pool admitter: its
 * metadata, the VM template (as {@link validateVirtualMachine}, paths under `spec.virtualMachineTemplate`), and
 * `spec.selector`, which must be well formed and match the template's labels. Upstream's rollout and scale-in fields
 * (`POOL_FIELDS_NOT_IMPLEMENTED`) are refused by name. Returns every problem found, [] when valid. */
export function validateVirtualMachinePool(o: unknown): FieldError[] {
  const pre = preamble(o, 'VirtualMachinePool');
  if (pre) return pre;
  const { errors, value: pool } = checkSchema(VirtualMachinePoolSchema, dropNulls(o));
  const e = new Errs(errors);
  validateMetadata(pool.metadata, 'metadata', e, { nameRequired: true });
  const spec = pool.spec ?? {};
  for (const f of POOL_FIELDS_NOT_IMPLEMENTED)
    if (spec[f] !== undefined)
      e.add(
        `spec.${f}`,
        'not implemented by kubevirt-ts: a pool creates and deletes VMs; a template change applies to the VMs created after it',
      );
  const tmpl = spec.virtualMachineTemplate;
  if (tmpl?.spec) {
    // the template as the pool's first VM will be
    const vm = {
      apiVersion: API_VERSION,
      kind: 'VirtualMachine',
      metadata: { ...(tmpl.metadata ?? {}), name: `${pool.metadata?.name || 'pool'}-0` },
      spec: tmpl.spec,
    };
    for (const f of validateVirtualMachine(vm))
      if (f.path !== 'metadata.name')
        e.add(f.path.replace(/^(spec|metadata)\b/, 'spec.virtualMachineTemplate.$1'), f.reason);
  }
  const selector = spec.selector as LabelSelector | undefined;
  if (selector && tmpl && !errors.some((f) => f.path.startsWith('spec.selector'))) {
    const bad = labelSelectorError(selector);
    if (bad) e.add('spec.selector', bad);
    else if (!labelSelectorMatches(selector, tmpl.metadata?.labels as Record<string, string>))
      e.add(
        'spec.selector',
        'selector does not match the labels of spec.virtualMachineTemplate.metadata.labels',
      );
  }
  return merge(errors, e.list);
}

/** Validates a VirtualMachineInstancePreset (deprecated upstream): its metadata, a well-formed selector, and the
 * domain settings it fills (the VMI's domain schema). Returns every problem found, [] when valid. */
export function validateVirtualMachineInstancePreset(o: unknown): FieldError[] {
  const pre = preamble(o, 'VirtualMachineInstancePreset');
  if (pre) return pre;
  const { errors, value: p } = checkSchema(VirtualMachineInstancePresetSchema, dropNulls(o));
  const e = new Errs(errors);
  validateMetadata(p.metadata, 'metadata', e, { nameRequired: true });
  const selector = p.spec?.selector as LabelSelector | undefined;
  if (selector && !errors.some((f) => f.path.startsWith('spec.selector'))) {
    const bad = labelSelectorError(selector);
    if (bad) e.add('spec.selector', bad);
  }
  return merge(errors, e.list);
}

const INSTANCETYPE_SCHEMAS = {
  VirtualMachineInstancetype: VirtualMachineInstancetypeSchema,
  VirtualMachineClusterInstancetype: VirtualMachineClusterInstancetypeSchema,
  VirtualMachinePreference: VirtualMachinePreferenceSchema,
  VirtualMachineClusterPreference: VirtualMachineClusterPreferenceSchema,
} as const;

/** Validates an instance type or preference (instancetype.kubevirt.io/v1beta1, namespaced or cluster-wide) as
 * upstream's admitters do: the schema, its metadata, and an instance type's memory `overcommitPercent`, which
 * does not go with `hugepages`. Returns every problem found, [] when valid. */
export function validateInstancetypeOrPreference(o: unknown): FieldError[] {
  const kind = (isObj(o) ? o['kind'] : undefined) as keyof typeof INSTANCETYPE_SCHEMAS;
  const schema = INSTANCETYPE_SCHEMAS[kind] ?? VirtualMachineInstancetypeSchema;
  const pre = preamble(o, kind ?? 'VirtualMachineInstancetype');
  if (pre) return pre;
  const { errors, value } = checkSchema(schema, dropNulls(o));
  const e = new Errs(errors);
  validateMetadata(value.metadata, 'metadata', e, { nameRequired: true });
  const memory = (value.spec as { memory?: { overcommitPercent?: number; hugepages?: unknown } } | undefined)
    ?.memory;
  if (memory?.overcommitPercent && memory.hugepages !== undefined)
    e.add(
      'spec.memory.overcommitPercent',
      'spec.memory.overcommitPercent and spec.memory.hugepages cannot be requested together',
    );
  return merge(errors, e.list);
}

/** Validates a MigrationPolicy (migrations.kubevirt.io/v1alpha1, cluster-scoped): the schema (spec.selectors is
 * required, completionTimeoutPerGiB not negative) and its metadata; upstream's feature-gated fields
 * (`MIGRATION_POLICY_FIELDS_NOT_IMPLEMENTED`) are refused by name. Returns every problem found, [] when valid. */
export function validateMigrationPolicy(o: unknown): FieldError[] {
  const pre = preamble(o, 'MigrationPolicy');
  if (pre) return pre;
  const { errors, value: p } = checkSchema(MigrationPolicySchema, dropNulls(o));
  const e = new Errs(errors);
  validateMetadata(p.metadata, 'metadata', e, { nameRequired: true });
  for (const f of MIGRATION_POLICY_FIELDS_NOT_IMPLEMENTED)
    if (p.spec?.[f] !== undefined)
      e.add(
        `spec.${f}`,
        "not implemented by kubevirt-ts (upstream's MigrationStallDetection feature gate, which kubevirt-ts does not have)",
      );
  return merge(errors, e.list);
}

const DRA_NOT_IMPLEMENTED =
  'not implemented by kubevirt-ts: dynamic resource allocation (DRA) resource claims; a GPU or host device is named by its deviceName (a device plugin resource)';

/** Upstream's DRA fields (a VMI spec's `resourceClaims`, a GPU's or host device's `claimName`/`requestName` in
 * place of `deviceName`) get one clear reason instead of the schema's `unknown field`/`required field is missing`. */
function explainDra(o: Record<string, unknown>, errs: FieldError[]): FieldError[] {
  const at = (path: string): unknown =>
    path
      .split(/\.|\[(\d+)\]/)
      .filter((k) => k !== undefined && k !== '')
      .reduce<unknown>(
        (v, k) => (isObj(v) || Array.isArray(v) ? (v as Record<string, unknown>)[k] : undefined),
        o,
      );
  return errs.map((f) => {
    if (/(^|\.)spec\.resourceClaims$/.test(f.path) && f.reason === 'unknown field')
      return { path: f.path, reason: DRA_NOT_IMPLEMENTED };
    const device = /^(.*\.(?:gpus|hostDevices)\[\d+\])\.deviceName$/.exec(f.path);
    if (device && f.reason === 'required field is missing') {
      const d = at(device[1]!);
      if (isObj(d) && (d['claimName'] !== undefined || d['requestName'] !== undefined))
        return { path: f.path, reason: `required field is missing (${DRA_NOT_IMPLEMENTED})` };
    }
    return f;
  });
}

/** Validate any of the kinds in `KINDS`, dispatching on `kind`. */
export function validateObject(o: unknown): FieldError[] {
  if (!isObj(o))
    return [{ path: '', reason: `must be an object (a Kubernetes manifest), got ${describe(o)}` }];
  const kind = o['kind'];
  const errs: FieldError[] = [];
  const versions: readonly string[] =
    kind === 'VirtualMachinePool'
      ? POOL_API_VERSIONS
      : kind === 'VirtualMachineInstancePreset'
        ? [API_VERSION, 'kubevirt.io/v1alpha3']
        : typeof kind === 'string' && kind in INSTANCETYPE_SCHEMAS
          ? [INSTANCETYPE_API_VERSION]
          : kind === 'MigrationPolicy'
            ? [MIGRATION_POLICY_API_VERSION]
            : [API_VERSION];
  if (!versions.includes(o['apiVersion'] as string)) {
    errs.push({
      path: 'apiVersion',
      reason: `must be ${versions.map((v) => `"${v}"`).join(' or ')}, got ${describe(o['apiVersion'])}`,
    });
  }
  let rest: FieldError[];
  switch (kind) {
    case 'VirtualMachineInstance':
      rest = validateVirtualMachineInstance(o);
      break;
    case 'VirtualMachine':
      rest = validateVirtualMachine(o);
      break;
    case 'VirtualMachineInstanceMigration':
      rest = validateVirtualMachineInstanceMigration(o);
      break;
    case 'VirtualMachineInstanceReplicaSet':
      rest = validateVirtualMachineInstanceReplicaSet(o);
      break;
    case 'VirtualMachinePool':
      rest = validateVirtualMachinePool(o);
      break;
    case 'VirtualMachineInstancePreset':
      rest = validateVirtualMachineInstancePreset(o);
      break;
    case 'VirtualMachineInstancetype':
    case 'VirtualMachineClusterInstancetype':
    case 'VirtualMachinePreference':
    case 'VirtualMachineClusterPreference':
      rest = validateInstancetypeOrPreference(o);
      break;
    case 'MigrationPolicy':
      rest = validateMigrationPolicy(o);
      break;
    default:
      return [
        ...errs,
        { path: 'kind', reason: `unsupported kind ${describe(kind)}: must be one of ${KINDS.join(', ')}` },
      ];
  }
  return explainDra(o, merge(errs, rest));
}
