// Admission, as upstream's virt-api webhooks: the mutating webhook applies @kubevirt-ts/api's defaults
// (and the VMI finalizer), the validating webhook rejects with every error and its field path, and a
// VMI's spec cannot change after creation. Served over TLS by virt-controller (webhook.ts).
import {
  applyPresets,
  applyToVmiSpec,
  checkPreferenceRequirements,
  checkSpreadCpuTopology,
  DefaultsError,
  notImplementedMessage,
  setVirtualMachineDefaults,
  setVirtualMachineInstanceDefaults,
  validateObject,
  type DefaultsOptions,
  type FieldError,
  type VirtualMachine,
  type VirtualMachineInstance,
  type VirtualMachineInstancePreset,
} from '@kubevirt-ts/api';
import { deepEqual, type KubeClient, type Resource } from '@kubevirt-ts/controller-runtime';
import { VMI_FINALIZER, VMIMS, VMIS, errorMessage, isFinal, type Vmi } from './common.js';
import { inferFromVolumes } from './infer.js';
import { findVmSpecs } from './instancetype.js';

export interface AdmissionRequest {
  uid: string;
  kind?: { group?: string; version?: string; kind?: string };
  operation?: 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';
  object?: unknown;
  oldObject?: unknown;
  userInfo?: { username?: string; extra?: Record<string, string[]> };
  /** a dry run is answered the same way: admission has no side effects */
  dryRun?: boolean;
}
export interface AdmissionReview {
  apiVersion: string;
  kind: 'AdmissionReview';
  request?: AdmissionRequest;
  response?: AdmissionResponse;
}
export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: {
    code: number;
    reason?: string;
    message: string;
    details?: { causes: { field: string; message: string; reason: string }[] };
  };
  patchType?: 'JSONPatch';
  /** base64 of the JSON Patch */
  patch?: string;
}

type JsonPatchOp = { op: 'add' | 'replace'; path: string; value: unknown };

/** The one-line form of an error, as kv-validate prints it: `path: reason`. */
export const formatFieldError = (e: FieldError): string => (e.path ? `${e.path}: ${e.reason}` : e.reason);

function deny(uid: string, kind: string, errs: FieldError[]): AdmissionResponse {
  return {
    uid,
    allowed: false,
    status: {
      code: 422,
      reason: 'Invalid',
      message: `${kind} is invalid:\n${errs.map(formatFieldError).join('\n')}`,
      details: {
        causes: errs.map((e) => ({ field: e.path, message: e.reason, reason: 'FieldValueInvalid' })),
      },
    },
  };
}

/**
 * The labels of a VMI that only kubevirt-ts's components set (upstream's restricted VMI labels): where it runs, its
 * migration, who made it. Anyone else creating a VMI with one, or changing one, is refused.
 */
export const RESERVED_VMI_LABELS: readonly string[] = [
  'kubevirt.io/created-by',
  'kubevirt.io/migrationJobUID',
  'kubevirt.io/nodeName',
  'kubevirt.io/migrationTargetNodeName',
  'kubevirt.io/schedulable',
  'kubevirt.io/install-strategy',
];
/** the service accounts of virt-operator, virt-controller and virt-handler (deploy/'s names) */
export const COMPONENT_SERVICE_ACCOUNTS: readonly string[] = [
  'kubevirt-ts-operator',
  'kubevirt-ts-controller',
  'kubevirt-ts-handler',
];
/** the user names the API server gives the components' service accounts in `namespace` */
export function componentUsers(namespace = 'kubevirt-ts'): ReadonlySet<string> {
  return new Set(COMPONENT_SERVICE_ACCOUNTS.map((sa) => `system:serviceaccount:${namespace}:${sa}`));
}
const DEFAULT_COMPONENT_USERS = componentUsers();

export interface ValidateOptions {
  /** who may set the reserved VMI labels (default: the components' service accounts in kubevirt-ts) */
  componentUsers?: ReadonlySet<string>;
  /** false: the bridge binding is refused on the pod network (upstream `permitBridgeInterfaceOnPodNetwork`) */
  permitBridgeInterfaceOnPodNetwork?: boolean;
}

/**
 * Errors for interfaces bound with `bridge` to the pod network while the cluster's configuration does not permit
 * it (upstream's message, at the interface's name). `prefix` is the path of the VMI spec in the object.
 */
export function bridgeOnPodNetworkErrors(spec: unknown, prefix: string, o: ValidateOptions): FieldError[] {
  if (o.permitBridgeInterfaceOnPodNetwork !== false) return [];
  const s = spec as { domain?: { devices?: { interfaces?: unknown } }; networks?: unknown } | undefined;
  const ifaces = Array.isArray(s?.domain?.devices?.interfaces) ? s.domain.devices.interfaces : [];
  const nets = Array.isArray(s?.networks) ? (s.networks as { name?: string; pod?: unknown }[]) : [];
  const pod = new Set(nets.filter((n) => n?.pod !== undefined).map((n) => n.name));
  return (ifaces as { name?: string; bridge?: unknown }[]).flatMap((iface, i) =>
    iface?.bridge !== undefined && pod.has(iface.name)
      ? [
          {
            path: `${prefix}.domain.devices.interfaces[${i}].name`,
            reason: 'Bridge on pod network configuration is not enabled under kubevirt-config',
          },
        ]
      : [],
  );
}

/** Errors for reserved VMI labels set (create) or changed (update) by someone other than a component. */
export function reservedLabelErrors(req: AdmissionRequest, o: ValidateOptions = {}): FieldError[] {
  const users = o.componentUsers ?? DEFAULT_COMPONENT_USERS;
  if (users.has(req.userInfo?.username ?? '')) return [];
  const labels = (x: unknown) =>
    (x as { metadata?: { labels?: Record<string, string> } })?.metadata?.labels ?? {};
  const now = labels(req.object);
  const before = req.operation === 'UPDATE' ? labels(req.oldObject) : {};
  return RESERVED_VMI_LABELS.filter((l) => now[l] !== before[l]).map((l) => ({
    path: `metadata.labels[${l}]`,
    reason: `Forbidden: a reserved label, set only by kubevirt-ts's components (${req.operation === 'UPDATE' ? 'it cannot be changed' : 'a VMI cannot be created with it'})`,
  }));
}

/** kubevirt.io/v1 VirtualMachineInstancePresets (deprecated upstream; applied to new VMIs by the mutating webhook) */
export const PRESETS: Resource = {
  group: 'kubevirt.io',
  version: 'v1',
  plural: 'virtualmachineinstancepresets',
  namespaced: true,
};

/**
 * The mutating webhook with what it reads through `client`: the presets of a new VMI's namespace (one list per
 * create), and for a VM whose instance type or preference is to be inferred from a volume, that volume's labels.
 */
export async function mutateWithPresets(
  req: AdmissionRequest,
  client: KubeClient | undefined,
  defaults: DefaultsOptions = {},
): Promise<AdmissionResponse> {
  const ns = (req.object as { metadata?: { namespace?: string } } | undefined)?.metadata?.namespace;
  const kind = req.kind?.kind ?? (req.object as { kind?: string } | undefined)?.kind;
  if (
    client &&
    kind === 'VirtualMachine' &&
    req.object &&
    (req.operation === 'CREATE' || req.operation === 'UPDATE')
  ) {
    // the instance type and preference named by the labels of the volume inferFromVolume names (upstream's VM
    // mutator); what cannot be inferred refuses the VM with upstream's message
    let inferred: VirtualMachine | undefined;
    try {
      inferred = await inferFromVolumes(client, req.object as VirtualMachine);
    } catch (e) {
      return {
        uid: req.uid,
        allowed: false,
        status: { code: 400, reason: 'BadRequest', message: errorMessage(e) },
      };
    }
    return mutate(req, [], defaults, inferred);
  }
  if (!client || kind !== 'VirtualMachineInstance' || req.operation !== 'CREATE' || !ns)
    return mutate(req, [], defaults);
  const presets = (await client.list<VirtualMachineInstancePreset>(PRESETS, ns)).items;
  return mutate(req, presets, defaults);
}

/** Mutating webhook: the presets and defaults for a new VMI, defaults for VMs, and the VMI finalizer. */
/** on a VirtualMachineInstanceMigration: the name of its VMI (upstream's `MigrationSelectorLabel`) */
export const MIGRATION_VMI_LABEL = 'kubevirt.io/vmi-name';

export function mutate(
  req: AdmissionRequest,
  presets: VirtualMachineInstancePreset[] = [],
  defaults: DefaultsOptions = {},
  /** a VM with its instance type and preference inferred from its volumes (mutateWithPresets) */
  inferredVm?: VirtualMachine,
): AdmissionResponse {
  const obj = req.object as
    | {
        kind?: string;
        spec?: unknown;
        metadata?: { finalizers?: string[]; annotations?: Record<string, string> };
      }
    | undefined;
  const kind = req.kind?.kind ?? obj?.kind;
  const ops: JsonPatchOp[] = [];
  try {
    if (kind === 'VirtualMachineInstance' && req.operation === 'CREATE' && obj) {
      // the presets first, then the defaults (as upstream's VMI mutator)
      const p = applyPresets(obj as VirtualMachineInstance, presets);
      if (p.error)
        return { uid: req.uid, allowed: false, status: { code: 422, reason: 'Invalid', message: p.error } };
      if (p.applied.length)
        ops.push({
          op: obj.metadata?.annotations ? 'replace' : 'add',
          path: '/metadata/annotations',
          value: p.vmi.metadata.annotations,
        });
      const d = setVirtualMachineInstanceDefaults(p.vmi, defaults);
      if (!deepEqual(d.spec, obj.spec))
        ops.push({ op: obj.spec === undefined ? 'add' : 'replace', path: '/spec', value: d.spec });
      const fin = obj.metadata?.finalizers;
      if (!fin) ops.push({ op: 'add', path: '/metadata/finalizers', value: [VMI_FINALIZER] });
      else if (!fin.includes(VMI_FINALIZER))
        ops.push({ op: 'add', path: '/metadata/finalizers/-', value: VMI_FINALIZER });
    } else if (kind === 'VirtualMachineInstanceMigration' && req.operation === 'CREATE' && obj) {
      // as upstream's migration-create mutator: the label `kubevirt.io/vmi-name` names the VMI, so clients
      // (upstream virtctl's migrate-cancel) find a VMI's migrations by label selector
      const vmiName = (obj.spec as { vmiName?: unknown } | undefined)?.vmiName;
      const labels = (obj.metadata as { labels?: Record<string, string> } | undefined)?.labels;
      if (typeof vmiName === 'string' && labels?.[MIGRATION_VMI_LABEL] !== vmiName) {
        if (!obj.metadata) ops.push({ op: 'add', path: '/metadata', value: {} });
        if (!labels) ops.push({ op: 'add', path: '/metadata/labels', value: {} });
        ops.push({
          op: 'add',
          path: `/metadata/labels/${MIGRATION_VMI_LABEL.replace('/', '~1')}`,
          value: vmiName,
        });
      }
    } else if (kind === 'VirtualMachine' && obj) {
      const d = setVirtualMachineDefaults(inferredVm ?? (obj as VirtualMachine), defaults);
      if (!deepEqual(d.spec, obj.spec))
        ops.push({ op: obj.spec === undefined ? 'add' : 'replace', path: '/spec', value: d.spec });
    }
  } catch (e) {
    // a default the cluster's configuration cannot give: refused with upstream's message
    if (e instanceof DefaultsError)
      return {
        uid: req.uid,
        allowed: false,
        status: { code: 400, reason: 'BadRequest', message: e.message },
      };
    // not an object the defaults understand: the validating webhook explains what is wrong
    return { uid: req.uid, allowed: true };
  }
  if (ops.length === 0) return { uid: req.uid, allowed: true };
  return {
    uid: req.uid,
    allowed: true,
    patchType: 'JSONPatch',
    patch: Buffer.from(JSON.stringify(ops)).toString('base64'),
  };
}

/**
 * Validating webhook: every error with its field path; a VMI's spec is immutable; a kind served (its CRD is
 * installed, so tools can list and delete it) but not implemented cannot be created.
 */
export function validate(req: AdmissionRequest, o: ValidateOptions = {}): AdmissionResponse {
  const obj = req.object as { kind?: string; spec?: unknown } | undefined;
  const kind = req.kind?.kind ?? obj?.kind ?? 'object';
  const notImplemented = notImplementedMessage(req.kind?.group, kind);
  if (notImplemented) {
    if (req.operation !== 'CREATE') return { uid: req.uid, allowed: true };
    return {
      uid: req.uid,
      allowed: false,
      status: { code: 403, reason: 'Forbidden', message: notImplemented },
    };
  }
  if (req.operation !== 'CREATE' && req.operation !== 'UPDATE') return { uid: req.uid, allowed: true };
  const errs = validateObject(obj);
  if (kind === 'VirtualMachineInstance') {
    errs.push(...reservedLabelErrors(req, o));
    if (req.operation === 'CREATE') errs.push(...bridgeOnPodNetworkErrors(obj?.spec, 'spec', o));
  } else if (kind === 'VirtualMachine')
    errs.push(
      ...bridgeOnPodNetworkErrors(
        (obj?.spec as { template?: { spec?: unknown } } | undefined)?.template?.spec,
        'spec.template.spec',
        o,
      ),
    );
  if (req.operation === 'UPDATE' && kind === 'VirtualMachineInstance') {
    const old = req.oldObject as { spec?: unknown } | undefined;
    if (old && !deepEqual(old.spec, obj?.spec))
      errs.push({
        path: 'spec',
        reason: 'Forbidden: the spec of a VirtualMachineInstance cannot change after creation',
      });
  }
  return errs.length ? deny(req.uid, kind, errs) : { uid: req.uid, allowed: true };
}

/**
 * The validating webhook with the instance type and preference a VM names applied first, as upstream's VM
 * admitter: a template field the instance type sets too is refused (`VM field(s) <path> conflicts with selected
 * instance type`), as are a spread topology the vCPUs do not divide into and unmet preference requirements; the
 * template is then validated as the VMI will be. What `client` cannot find is ignored, as upstream does (the VM
 * controller reports it and does not start the VM).
 */
export async function validateWithInstancetypes(
  req: AdmissionRequest,
  client: KubeClient | undefined,
  o: ValidateOptions = {},
): Promise<AdmissionResponse> {
  const vm = req.object as VirtualMachine | undefined;
  const kind = req.kind?.kind ?? vm?.kind;
  if (
    !client ||
    kind !== 'VirtualMachine' ||
    (req.operation !== 'CREATE' && req.operation !== 'UPDATE') ||
    !vm?.spec?.template?.spec?.domain ||
    (!vm.spec.instancetype?.name && !vm.spec.preference?.name) ||
    validateObject(vm).length > 0
  )
    return validate(req, o);
  const specs = await findVmSpecs(client, vm, { ignoreMissing: true });
  if (!specs.instancetype && !specs.preference) return validate(req, o);
  const spread = checkSpreadCpuTopology(specs.instancetype, specs.preference);
  if (spread) return deny(req.uid, kind, [{ path: spread.path, reason: spread.message }]);
  const applied = structuredClone(vm);
  const tmpl = applied.spec.template;
  const conflicts = applyToVmiSpec(
    'spec.template.spec',
    specs.instancetype,
    specs.preference,
    tmpl.spec,
    (tmpl.metadata ??= {}),
  );
  if (conflicts.length)
    return deny(
      req.uid,
      kind,
      conflicts.map((c) => ({ path: c.path, reason: c.message })),
    );
  const unmet = checkPreferenceRequirements(
    specs.instancetype,
    specs.preference,
    setVirtualMachineDefaults({
      ...applied,
      spec: { ...applied.spec, instancetype: undefined, preference: undefined },
    }).spec.template.spec,
  );
  if (unmet)
    return deny(req.uid, kind, [
      { path: unmet.paths.join(', '), reason: `failure checking preference requirements: ${unmet.message}` },
    ]);
  return validate({ ...req, object: applied }, o);
}

/**
 * A new VirtualMachineInstanceMigration, as upstream's migration-create admitter: its VMI must exist, not be final,
 * not be marked not migratable (its `LiveMigratable` condition False: refused with that reason and message), and no
 * other migration of it may be unfinished. Undefined: allowed as far as this check goes (the schema is validated
 * too). The VMIs and migrations are read from the API server, as upstream does.
 */
export async function migrationCreateDenied(
  req: AdmissionRequest,
  client: KubeClient,
): Promise<AdmissionResponse | undefined> {
  const m = req.object as { metadata?: { namespace?: string }; spec?: { vmiName?: unknown } } | undefined;
  const kind = req.kind?.kind ?? (m as { kind?: string } | undefined)?.kind;
  if (kind !== 'VirtualMachineInstanceMigration' || req.operation !== 'CREATE') return undefined;
  const name = m?.spec?.vmiName;
  const ns = (req as { namespace?: string }).namespace ?? m?.metadata?.namespace;
  if (typeof name !== 'string' || !ns) return undefined; // the schema check names the field
  const refuse = (message: string): AdmissionResponse => ({
    uid: req.uid,
    allowed: false,
    status: { code: 400, reason: 'BadRequest', message },
  });
  const vmi = await client.getOrUndefined<Vmi>(VMIS, ns, name);
  if (!vmi) return refuse(`the VMI "${ns}/${name}" does not exist`);
  if (isFinal(vmi)) return refuse('Cannot migrate VMI in finalized state.');
  const notMigratable = vmi.status?.conditions?.find(
    (c) => c.type === 'LiveMigratable' && c.status === 'False',
  );
  if (notMigratable)
    return refuse(`Cannot migrate VMI, Reason: ${notMigratable.reason}, Message: ${notMigratable.message}`);
  const others = (
    await client.list<{ metadata: { name?: string }; status?: { phase?: string } }>(VMIMS, ns, {
      labelSelector: `${MIGRATION_VMI_LABEL} in (${name})`,
    })
  ).items;
  const running = others.find((o) => o.status?.phase !== 'Succeeded' && o.status?.phase !== 'Failed');
  if (running)
    return refuse(
      `in-flight migration detected. Active migration job (${running.metadata.name}) is currently already in progress for VMI ${name}.`,
    );
  return undefined;
}

/** An AdmissionReview answer for a review (v1). */
export async function review(
  body: AdmissionReview,
  handler: (r: AdmissionRequest) => AdmissionResponse | Promise<AdmissionResponse>,
): Promise<AdmissionReview> {
  if (!body?.request?.uid) throw new Error('not an AdmissionReview with a request');
  return {
    apiVersion: body.apiVersion || 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    response: await handler(body.request),
  };
}
