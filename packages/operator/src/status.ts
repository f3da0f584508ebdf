// The KubeVirt CR's status as upstream's virt-operator reports it, computed from the CR and the two components'
// rollout (the virt-controller Deployment, the virt-handler DaemonSet). A pure function: the operator writes what it
// returns when it differs from what the CR has.
import { kubeVirtNotImplemented, type Condition, type KubeVirt, type KubeVirtStatus } from '@kubevirt-ts/api';
import { kubeVirtConfigurationError } from '@kubevirt-ts/renderer';

/** apps/v1 Deployment: the fields read here */
export interface Deployment {
  metadata: { name?: string; generation?: number };
  spec?: { replicas?: number };
  status?: {
    observedGeneration?: number;
    replicas?: number;
    updatedReplicas?: number;
    availableReplicas?: number;
  };
}

/** apps/v1 DaemonSet: the fields read here */
export interface DaemonSet {
  metadata: { name?: string; generation?: number };
  status?: {
    observedGeneration?: number;
    desiredNumberScheduled?: number;
    updatedNumberScheduled?: number;
    numberAvailable?: number;
  };
}

export interface Components {
  /** the virt-controller Deployment (undefined: not there) */
  controller: Deployment | undefined;
  /** the virt-handler DaemonSet (undefined: not there) */
  handler: DaemonSet | undefined;
  /**
   * why the last sync of what the operator installs itself (the common instance types and preferences) failed;
   * undefined: it did not
   */
  deploymentError?: string | undefined;
}

/** Node's process.arch as Go (and Kubernetes) name the architecture */
const GO_ARCH: Record<string, string> = { x64: 'amd64', arm64: 'arm64', s390x: 's390x', ppc64: 'ppc64le' };

/** upstream's condition reasons (virt-operator) and this project's two */
export const REASONS = {
  ready: 'AllComponentsReady',
  deploying: 'DeploymentInProgress',
  created: 'AllResourcesCreated',
  deleting: 'DeletionInProgress',
  failed: 'DeploymentFailed',
  invalid: 'InvalidConfiguration',
  notImplemented: 'FieldsNotImplemented',
  allImplemented: 'AllFieldsImplemented',
} as const;

/** Why virt-controller is not ready yet, or undefined when it is (rolled out, one replica available at least). */
export function controllerNotReady(d: Deployment | undefined): string | undefined {
  if (!d) return 'the virt-controller Deployment does not exist';
  const s = d.status ?? {};
  const want = d.spec?.replicas ?? 1;
  if ((s.observedGeneration ?? 0) < (d.metadata.generation ?? 0))
    return 'virt-controller: rollout not observed yet';
  if ((s.updatedReplicas ?? 0) < want)
    return `virt-controller: ${s.updatedReplicas ?? 0}/${want} replicas updated`;
  if ((s.availableReplicas ?? 0) < 1) return `virt-controller: no replica available (0/${want})`;
  return undefined;
}

/** Why virt-handler is not ready yet on every node it should run on, or undefined when it is. */
export function handlerNotReady(ds: DaemonSet | undefined): string | undefined {
  if (!ds) return 'the virt-handler DaemonSet does not exist';
  const s = ds.status ?? {};
  const want = s.desiredNumberScheduled ?? 0;
  if ((s.observedGeneration ?? 0) < (ds.metadata.generation ?? 0))
    return 'virt-handler: rollout not observed yet';
  if (want < 1) return 'virt-handler: no schedulable node';
  if ((s.updatedNumberScheduled ?? 0) < want)
    return `virt-handler: updated on ${s.updatedNumberScheduled ?? 0}/${want} nodes`;
  if ((s.numberAvailable ?? 0) < want)
    return `virt-handler: available on ${s.numberAvailable ?? 0}/${want} nodes`;
  return undefined;
}

export interface StatusOptions {
  /** the version this installation runs, as upstream reports it (e.g. "v0.1.0") */
  version: string;
  /** now, for lastTransitionTime (RFC 3339) */
  now: string;
}

/**
 * The status the CR should have. Conditions keep their lastTransitionTime while their status stays the same, so an
 * unchanged world computes an equal status (no write).
 */
export function kubeVirtStatus(kv: KubeVirt, components: Components, o: StatusOptions): KubeVirtStatus {
  const old = kv.status ?? {};
  const conditions: Condition[] = [];
  const cond = (type: string, status: boolean, reason: string, message: string) => {
    const s = status ? 'True' : 'False';
    const prev = old.conditions?.find((c) => c.type === type);
    const lastTransitionTime =
      prev?.status === s && prev.lastTransitionTime ? prev.lastTransitionTime : o.now;
    conditions.push({ type, status: s, reason, message, lastTransitionTime });
  };
  const deleting = Boolean((kv.metadata as { deletionTimestamp?: string }).deletionTimestamp);
  const waiting = [controllerNotReady(components.controller), handlerNotReady(components.handler)].filter(
    (x): x is string => x !== undefined,
  );
  const invalid = kubeVirtConfigurationError(kv.spec.configuration);
  const ready = waiting.length === 0;
  if (deleting) {
    const msg = 'Deletion was triggered';
    cond('Available', false, REASONS.deleting, msg);
    cond('Progressing', false, REASONS.deleting, msg);
    cond('Degraded', true, REASONS.deleting, msg);
  } else if (components.deploymentError) {
    // upstream's failed sync: Synchronized, Available and Progressing False, Degraded True
    const msg = `An error occurred during deployment: ${components.deploymentError}`;
    cond('Synchronized', false, REASONS.failed, msg);
    cond('Available', false, REASONS.failed, msg);
    cond('Progressing', false, REASONS.failed, msg);
    cond('Degraded', true, REASONS.failed, msg);
  } else if (ready) {
    const msg = 'All components are ready.';
    cond('Available', true, REASONS.ready, msg);
    cond('Progressing', false, REASONS.ready, msg);
    cond('Degraded', invalid !== undefined, invalid ? REASONS.invalid : REASONS.ready, invalid ?? msg);
  } else {
    const msg = `Deploying version ${o.version}: ${waiting.join('; ')}`;
    cond('Available', false, REASONS.deploying, msg);
    cond('Progressing', true, REASONS.deploying, msg);
    cond('Degraded', invalid !== undefined, invalid ? REASONS.invalid : REASONS.deploying, invalid ?? msg);
  }
  if (components.controller && components.handler)
    cond('Created', true, REASONS.created, 'All resources were created.');
  const missing = kubeVirtNotImplemented(kv);
  cond(
    'NotImplemented',
    missing.length > 0,
    missing.length ? REASONS.notImplemented : REASONS.allImplemented,
    missing.length
      ? `not implemented by kubevirt-ts, ignored: ${missing.join(', ')}`
      : 'every field set in spec is implemented',
  );
  const status: KubeVirtStatus = {
    ...old,
    phase: deleting ? 'Deleting' : ready ? 'Deployed' : 'Deploying',
    conditions,
    operatorVersion: o.version,
    targetKubeVirtVersion: o.version,
    // upstream's operator: the architecture VMIs get when they name none (its own; architectureConfiguration is not
    // implemented here), which upstream's tools read from the CR
    defaultArchitecture: GO_ARCH[process.arch] ?? process.arch,
  };
  if (ready && !deleting) status.observedKubeVirtVersion = o.version;
  if (kv.metadata.generation !== undefined) status.observedGeneration = kv.metadata.generation;
  return status;
}
