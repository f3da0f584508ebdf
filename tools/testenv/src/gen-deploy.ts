// Generates deploy/*.yaml: namespace, CRDs (symlinks to deploy/crds, which @kubevirt-ts/api generates),
// service accounts, least-privilege RBAC for virt-operator, virt-controller and virt-handler, the
// virt-operator Deployment (which creates the KubeVirt CR, the cluster's configuration, when there is none), the
// virt-controller Deployment and the virt-handler DaemonSet. File name prefixes give the order
// `kubectl apply -f deploy/` applies them in.
//
// Every object is typed with @kubernetes/client-node's models. Run through tools/gen-deploy.mjs (after the
// build of tools/testenv):
//   node tools/gen-deploy.mjs            write deploy/*.yaml
//   node tools/gen-deploy.mjs --check    exit 1 when the committed files differ from what would be generated
//   --registry R --tag T                 image registry and tag (defaults below; the committed files use them)
//   --pin IMAGES.json --out DIR          a copy of deploy/ in DIR whose images are the ones tools/images/build.sh
//                                        built, by digest (name@sha256:...); the committed deploy/ keeps its tags
import {
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type {
  KubernetesObject,
  V1APIService,
  V1ClusterRole,
  V1ClusterRoleBinding,
  V1DaemonSet,
  V1Deployment,
  V1MutatingWebhook,
  V1MutatingWebhookConfiguration,
  V1Namespace,
  V1PodDisruptionBudget,
  V1PolicyRule,
  V1Role,
  V1RoleBinding,
  V1RuleWithOperations,
  V1SecurityContext,
  V1Service,
  V1ServiceAccount,
  V1ValidatingWebhookConfiguration,
  V1ValidatingAdmissionPolicy,
  V1ValidatingAdmissionPolicyBinding,
} from '@kubernetes/client-node';
import YAML from 'yaml';

/** An RBAC rule with the reason for its verbs (written as a comment above the rule). */
export interface Rule extends V1PolicyRule {
  why: string;
}

/** A host path virt-handler mounts, with the reason (written as a comment above the volume). */
export interface HostPath {
  name: string;
  path: string;
  mountPath?: string;
  type: string;
  mountPropagation?: string;
  why: string;
}

/** An object of deploy/: a client-node model; `_why`: the rules' reasons, written as comments. */
export type DeployObject = (
  | V1Namespace
  | V1ServiceAccount
  | V1ClusterRole
  | V1ClusterRoleBinding
  | V1Role
  | V1RoleBinding
  | V1Deployment
  | V1PodDisruptionBudget
  | V1Service
  | V1APIService
  | V1DaemonSet
  | V1MutatingWebhookConfiguration
  | V1ValidatingWebhookConfiguration
  | V1ValidatingAdmissionPolicy
  | V1ValidatingAdmissionPolicyBinding
) & { _why?: Rule[] };

/** What generateDeploy makes: file name -> content, and CRD link name -> symlink target. */
export interface GeneratedDeploy {
  files: Record<string, string>;
  links: Record<string, string>;
}

/** `registry`/`tag` name the images (the committed files use the defaults); `pinned` names them exactly */
export interface DeployOptions {
  registry?: string;
  tag?: string;
  pinned?: DeployImages;
}

export const NAMESPACE = 'kubevirt-ts';
export const CONTROLLER = 'kubevirt-ts-controller';
export const HANDLER = 'kubevirt-ts-handler';
export const OPERATOR = 'kubevirt-ts-operator';
/** the KubeVirt CR: the cluster's configuration (upstream's name) */
export const KUBEVIRT_CR = 'kubevirt';
/**
 * spec.configuration of the KubeVirt CR virt-operator creates when the namespace has none (kubectl cannot create a
 * custom resource in the same `apply` as its CRD): the launcher Pods' seccomp profile is the one virt-handler installs
 * on each node (--seccomp-profile-dir): containers' default profile (user namespaces for passt's sandbox) plus
 * userfaultfd. The pod network's default binding is masquerade, changes to running VMs are staged (Stage).
 * Everything else keeps upstream's defaults; feature gates are off (e.g. "HostDisk": hostDisk volumes).
 */
export const DEFAULT_CONFIGURATION = {
  developerConfiguration: { useEmulation: false, featureGates: [] as string[] },
  // upstream's compiled-in default is bridge; masquerade is the binding upstream's docs recommend for the pod network
  network: { defaultNetworkInterface: 'masquerade' },
  // what kubevirt-ts does (no live updates): upstream's default, LiveUpdate, would be reported as not implemented
  vmRolloutStrategy: 'Stage',
  seccompConfiguration: {
    virtualMachineInstanceProfile: { customProfile: { localhostProfile: 'kubevirt-ts/kubevirt.json' } },
  },
};
export const LEASE_NAME = 'kubevirt-ts-controller';
/** the admission webhooks: their TLS Secret (made and rotated by virt-controller), Service and configurations */
export const WEBHOOK_SECRET = 'kubevirt-ts-webhook-certs';
/** mutual TLS between virt-controller and virt-handler (packages/virt-controller-core/src/handler-certs.ts) */
export const HANDLER_CA_SECRET = 'kubevirt-ts-handler-ca';
export const HANDLER_CERTS_SECRET = 'virt-handler-certs';
/** virt-handler's client certificate (same CA): the source side of the migration proxy's mutual TLS */
export const HANDLER_CLIENT_CERTS_SECRET = 'virt-handler-client-certs';
const HANDLER_SUBRESOURCE_PORT = 8186;
/** upstream's virt-handler health port (its /healthz, HTTPS) */
const HANDLER_HEALTHZ_PORT = 8443;
const HANDLER_CERTS_DIR = '/etc/virt-handler/subresource-certs';
const HANDLER_CLIENT_CERTS_DIR = '/etc/virt-handler/client-certs';
export const WEBHOOK_SERVICE = 'virt-controller-webhook';
export const MUTATING_WEBHOOK = 'kubevirt-ts-mutator';
export const VALIDATING_WEBHOOK = 'kubevirt-ts-validator';
export const WEBHOOK_PORT = 8443;
export const METRICS_PORT = 8080;
export const DEFAULT_REGISTRY = 'ghcr.io/kubevirt-ts';
export const DEFAULT_TAG = '0.1.0';

const HEADER =
  '# Generated by tools/gen-deploy.mjs. Do not edit: change the generator and run `node tools/gen-deploy.mjs`.\n';
const labels = (component: string): Record<string, string> => ({
  'app.kubernetes.io/part-of': 'kubevirt-ts',
  'app.kubernetes.io/component': component,
});

/**
 * RBAC rules with the reason for each verb. `why` becomes a comment above the rule in the YAML.
 * Anything not listed is denied: no secrets, no pods/exec, no node deletion, no RBAC, no CRD changes.
 */
export const CONTROLLER_CLUSTER_RULES: Rule[] = [
  {
    apiGroups: ['kubevirt.io'],
    resources: ['virtualmachines'],
    verbs: ['get', 'list', 'watch'],
    why: 'get/list/watch: the VM controller reconciles every VirtualMachine (informer + re-read before writes)',
  },
  {
    apiGroups: ['kubevirt.io'],
    resources: ['virtualmachines'],
    verbs: ['update', 'patch'],
    why: 'update/patch: adds and removes its finalizer on VirtualMachines; a start request on a Halted VM sets running: true (runStrategy: Always), as upstream',
  },
  {
    apiGroups: ['kubevirt.io'],
    resources: ['virtualmachines'],
    verbs: ['create', 'delete'],
    why: "create/delete: the pool controller keeps each VirtualMachinePool's VMs (<pool>-<index>), deleting the surplus when it scales down",
  },
  {
    apiGroups: ['kubevirt.io'],
    resources: ['virtualmachineinstancepresets'],
    verbs: ['list'],
    why: "list: the mutating webhook applies the matching VirtualMachineInstancePresets of a new VMI's namespace (read per create, no informer)",
  },
  {
    apiGroups: ['pool.kubevirt.io'],
    resources: ['virtualmachinepools'],
    verbs: ['get', 'list', 'watch'],
    why: 'get/list/watch: the pool controller follows every VirtualMachinePool (informer); it writes only their status (below)',
  },
  {
    apiGroups: ['pool.kubevirt.io'],
    resources: ['virtualmachinepools/status'],
    verbs: ['update', 'patch'],
    why: 'update/patch status: replicas, readyReplicas, labelSelector (read by the scale subresource) and the ReplicaFailure / ReplicaPaused conditions',
  },
  {
    apiGroups: ['kubevirt.io'],
    resources: ['virtualmachines/status'],
    verbs: ['update', 'patch'],
    why: 'update/patch status: printableStatus, ready, created, conditions of each VM',
  },
  {
    apiGroups: ['kubevirt.io'],
    resources: ['virtualmachineinstances'],
    verbs: ['get', 'list', 'watch', 'create', 'delete', 'update', 'patch'],
    why: 'get/list/watch: the VMI controller follows every VMI; create: a VM starts by creating its VMI; delete: a VM stops by deleting its VMI (run strategy); update/patch: status (phase Pending -> Scheduling -> Scheduled from the launcher Pod, Failed when it fails; the VMI has no status subresource, as upstream), finalizers and labels, in one write; patch: the pod-eviction webhook marks a VMI for evacuation (status.evacuationNodeName) when a node drain evicts its launcher Pod',
  },
  {
    apiGroups: ['kubevirt.io'],
    resources: ['virtualmachineinstancereplicasets'],
    verbs: ['get', 'list', 'watch'],
    why: "get/list/watch: the replica set controller keeps each VirtualMachineInstanceReplicaSet's VMIs (informer); it writes only their status (below)",
  },
  {
    apiGroups: ['kubevirt.io'],
    resources: ['virtualmachineinstancereplicasets/status'],
    verbs: ['update', 'patch'],
    why: 'update/patch status: replicas, readyReplicas, labelSelector (read by the scale subresource) and the ReplicaFailure / ReplicaPaused conditions',
  },
  {
    apiGroups: ['kubevirt.io'],
    resources: ['virtualmachineinstancemigrations'],
    verbs: ['get', 'list', 'watch', 'create', 'update', 'patch'],
    why: 'get/list/watch: the migration controller follows migrations; create: the evacuation controller migrates the VMIs a node drain marked (kubevirt-evacuation-*); update/patch: its finalizer on them',
  },
  {
    apiGroups: ['kubevirt.io'],
    resources: ['virtualmachineinstancemigrations/status'],
    verbs: ['update', 'patch'],
    why: 'update/patch status: migration phase and target Pod',
  },
  {
    apiGroups: ['instancetype.kubevirt.io'],
    resources: [
      'virtualmachineinstancetypes',
      'virtualmachineclusterinstancetypes',
      'virtualmachinepreferences',
      'virtualmachineclusterpreferences',
    ],
    verbs: ['get'],
    why: 'get: the instance type and preference a VM names, read by the validating webhook (applied to the template before it is validated) and by the VM controller (stored in a ControllerRevision); no list/watch: read on demand, no informer',
  },
  {
    apiGroups: ['migrations.kubevirt.io'],
    resources: ['migrationpolicies'],
    verbs: ['list'],
    why: 'list: the migration controller hands a migration off with the options of the MigrationPolicy that matches the VMI and its namespace (read per hand-off, no informer)',
  },
  {
    apiGroups: [''],
    resources: ['namespaces'],
    verbs: ['get'],
    why: "get: the labels of a migrating VMI's namespace, which a MigrationPolicy's namespaceSelector matches (read per hand-off)",
  },
  {
    apiGroups: ['apps'],
    resources: ['controllerrevisions'],
    verbs: ['get', 'create'],
    why: "create: the VM controller stores a VM's instance type and preference in ControllerRevisions owned by the VM (the garbage collector removes them with it); get: reads them back to start the VM's VMIs and to compare with one already there; no list/watch/delete: upstream's informer and its Expand policy are not implemented",
  },
  {
    apiGroups: [''],
    resources: ['pods'],
    verbs: ['get', 'list', 'watch', 'create', 'delete'],
    why: 'get/list/watch: launcher Pods drive the VMI phase; create: one launcher Pod per VMI (and a target Pod per migration); delete: the Pod of a deleted or finished VMI',
  },
  {
    apiGroups: [''],
    resources: ['persistentvolumeclaims'],
    verbs: ['get', 'list', 'watch'],
    why: "get/list/watch: the claims a VMI's volumes use (informer): the launcher Pod waits until each exists and is bound (or binds on its first consumer), Block claims become volumeDevices, status.volumeStatus gets their access modes and size; get: the labels of the claim a VM's inferFromVolume names (the mutating webhook infers its instance type and preference)",
  },
  {
    apiGroups: ['storage.k8s.io'],
    resources: ['storageclasses'],
    verbs: ['get'],
    why: "get: the volumeBindingMode of a Pending claim's StorageClass (WaitForFirstConsumer: the launcher Pod is created so the claim binds on its node; Immediate: the Pod waits until the claim is bound); read on demand, no list/watch",
  },
  {
    apiGroups: ['cdi.kubevirt.io'],
    resources: ['datavolumes'],
    verbs: ['get', 'list', 'watch', 'create'],
    why: "list/watch: the DataVolumes of VMs' dataVolumeTemplates and those that own VMIs' claims (informer: the VMI waits until its DataVolume is Succeeded, the VM's printableStatus shows Provisioning or DataVolumeError); create: the DataVolume of each dataVolumeTemplate, owned by its VM (the garbage collector deletes it with the VM: no delete); get: the labels of the DataVolume a VM's inferFromVolume names, read by the mutating webhook",
  },
  {
    apiGroups: ['cdi.kubevirt.io'],
    resources: ['datasources'],
    verbs: ['get'],
    why: "get: the labels of the DataSource a VM's inferFromVolume copies (mutating webhook) and the claim a dataVolumeTemplate's sourceRef clones (its clone is authorized for the VM's service account first)",
  },
  {
    apiGroups: ['snapshot.storage.k8s.io'],
    resources: ['volumesnapshots'],
    verbs: ['get'],
    why: "get: the labels of the VolumeSnapshot a DataVolume named by a VM's inferFromVolume copies, read by the mutating webhook",
  },
  {
    apiGroups: [''],
    resources: ['nodes'],
    verbs: ['get', 'list', 'watch', 'patch'],
    why: "get/list/watch: VMIs on a node whose virt-handler heartbeat stopped are marked Failed; patch: such a node's kubevirt.io/schedulable label is set to false (upstream's node controller); no create, update or delete",
  },
  {
    apiGroups: ['', 'events.k8s.io'],
    resources: ['events'],
    verbs: ['create', 'patch'],
    why: 'create/patch: events on VMs, VMIs and migrations (patch aggregates repeated events)',
  },
  {
    apiGroups: ['admissionregistration.k8s.io'],
    resources: ['mutatingwebhookconfigurations', 'validatingwebhookconfigurations'],
    resourceNames: [MUTATING_WEBHOOK, VALIDATING_WEBHOOK],
    verbs: ['get'],
    why: "get: whether kubevirt-ts's own two webhook configurations trust a new CA (their caBundle, which virt-operator publishes) before a certificate it signed is served; no write: the component serving the webhooks cannot change which requests reach it",
  },
];

export const CONTROLLER_NAMESPACE_RULES: Rule[] = [
  {
    apiGroups: [''],
    resources: ['secrets'],
    verbs: ['create'],
    why: 'create: the webhook TLS Secret the first time, when the operator supplied none (create cannot be limited to a name)',
  },
  {
    apiGroups: [''],
    resources: ['secrets'],
    resourceNames: [WEBHOOK_SECRET],
    verbs: ['get', 'update'],
    why: 'get/update: reads the webhook CA and serving certificate (every replica serves them) and renews them before they expire; this Secret only',
  },
  {
    apiGroups: [''],
    resources: ['secrets'],
    resourceNames: [HANDLER_CA_SECRET, HANDLER_CERTS_SECRET, HANDLER_CLIENT_CERTS_SECRET],
    verbs: ['get', 'update'],
    why: "get/update: the CA of the mutual TLS with virt-handler (signs this process's client certificate) and virt-handler's serving and client certificate Secrets (checked against that CA), read by every replica and renewed before they expire (--manage-handler-certs); made with create above the first time; these Secrets only",
  },
  {
    apiGroups: ['coordination.k8s.io'],
    resources: ['leases'],
    verbs: ['create'],
    why: 'create: the leader-election Lease the first time (create cannot be limited to a name)',
  },
  {
    apiGroups: ['coordination.k8s.io'],
    resources: ['leases'],
    resourceNames: [LEASE_NAME],
    verbs: ['get', 'update'],
    why: 'get/update: leader election between the 2 replicas, on its own Lease only',
  },
  {
    apiGroups: ['kubevirt.io'],
    resources: ['kubevirts'],
    resourceNames: [KUBEVIRT_CR],
    verbs: ['get', 'list', 'watch'],
    why: "get/list/watch: the KubeVirt CR's spec.configuration (emulation, overcommit, migrations, seccomp profile), read live; this CR only, list/watch with fieldSelector metadata.name",
  },
];

export const HANDLER_CLUSTER_RULES: Rule[] = [
  {
    apiGroups: ['kubevirt.io'],
    resources: ['virtualmachineinstances'],
    verbs: ['get', 'list', 'watch', 'update', 'patch'],
    why: 'get/list/watch: the VMIs scheduled to its node and those migrating to it (informers with the nodeName and migrationTargetNodeName label selectors); update/patch: the migration hand-off moves the kubevirt.io/nodeName label to the target node, and their status (Running/Succeeded/Failed, interfaces, guest OS info, conditions, migration state from the launcher), written with the object: the VMI has no status subresource, as upstream',
  },
  {
    apiGroups: ['kubevirt.io'],
    resources: ['virtualmachineinstancemigrations'],
    verbs: ['get', 'list', 'watch'],
    why: 'get/list/watch: whether a VMI on its node is a migration source or target',
  },
  {
    apiGroups: [''],
    resources: ['nodes'],
    verbs: ['get', 'patch'],
    why: 'get/patch: heartbeat on its own node (kubevirt.io/schedulable label, heartbeat annotation); no list, no delete',
  },
  {
    apiGroups: ['', 'events.k8s.io'],
    resources: ['events'],
    verbs: ['create', 'patch'],
    why: 'create/patch: events on the VMIs it runs',
  },
];

/**
 * virt-handler's behaviour reads no configuration (what it needs comes with each VMI, e.g. its migration
 * configuration); it only reports the KubeVirt CR's resourceVersion it has seen on /healthz, as upstream's does
 */
export const HANDLER_NAMESPACE_RULES: Rule[] = [
  {
    apiGroups: ['kubevirt.io'],
    resources: ['kubevirts'],
    resourceNames: [KUBEVIRT_CR],
    verbs: ['get', 'list', 'watch'],
    why: "get/list/watch: the KubeVirt CR's resourceVersion, reported on /healthz (upstream's config-resource-version, which upstream's functional tests wait for after each change of the CR); this CR only, list/watch with fieldSelector metadata.name",
  },
];

export const OPERATOR_CLUSTER_RULES: Rule[] = [
  {
    apiGroups: ['admissionregistration.k8s.io'],
    resources: ['mutatingwebhookconfigurations', 'validatingwebhookconfigurations'],
    resourceNames: [MUTATING_WEBHOOK, VALIDATING_WEBHOOK],
    verbs: ['get', 'list', 'watch', 'patch'],
    why: "get/list/watch/patch: publishes the webhook Secret's CA as the caBundle of kubevirt-ts's own two webhook configurations (list/watch with fieldSelector metadata.name: a re-applied configuration gets it back at once); no other webhook, no create or delete",
  },
  {
    apiGroups: ['apiregistration.k8s.io'],
    resources: ['apiservices'],
    resourceNames: ['v1.subresources.kubevirt.io'],
    verbs: ['get', 'list', 'watch', 'patch'],
    why: 'get/list/watch/patch: the same CA as the caBundle of the subresource APIService (served with the same certificate); no other APIService, no create or delete',
  },
  {
    apiGroups: ['instancetype.kubevirt.io'],
    resources: ['virtualmachineclusterinstancetypes', 'virtualmachineclusterpreferences'],
    verbs: ['get', 'list', 'watch', 'create', 'update', 'delete'],
    why: 'list/watch: the common instance types and preferences it manages (label app.kubernetes.io/managed-by=virt-operator); create: the missing ones; get/update: one that exists under a bundle name without its labels (taken over, as upstream) or was edited; delete: the ones it manages when spec.configuration.commonInstancetypesDeployment.enabled is false, or no longer in the bundle (create and the label selector cannot be limited to names); no patch, no deletecollection',
  },
];
export const OPERATOR_NAMESPACE_RULES: Rule[] = [
  {
    apiGroups: ['kubevirt.io'],
    resources: ['kubevirts'],
    verbs: ['get', 'list', 'watch', 'create'],
    why: 'get/list/watch: the KubeVirt CRs of the install namespace, whose status it owns; create: the default CR when the namespace has none (create cannot be limited to a name)',
  },
  {
    apiGroups: ['kubevirt.io'],
    resources: ['kubevirts/status'],
    verbs: ['update'],
    why: 'update status: phase, conditions (Available, Progressing, Degraded, Created, NotImplemented), observedGeneration, versions',
  },
  {
    apiGroups: ['apps'],
    resources: ['deployments', 'daemonsets'],
    verbs: ['get', 'list', 'watch'],
    why: "get/list/watch: the virt-controller Deployment's and the virt-handler DaemonSet's rollout, which the CR's status reports (no write: nothing here needs a restart when the configuration changes)",
  },
  {
    apiGroups: [''],
    resources: ['secrets'],
    resourceNames: [WEBHOOK_SECRET],
    verbs: ['get', 'list', 'watch'],
    why: 'get/list/watch: the webhook certificate Secret (made and renewed by virt-controller), whose ca.crt it publishes as the caBundles above; this Secret only (list/watch with fieldSelector metadata.name), never written',
  },
];

/** Host paths virt-handler mounts, with the reason; nothing broader (no /, no /etc, no /var/lib/kubelet as a whole). */
export const HANDLER_HOST_PATHS: HostPath[] = [
  {
    name: 'kubelet-pods',
    path: '/var/lib/kubelet/pods',
    // upstream's short path: a launcher socket under /var/lib/kubelet/pods/<uid>/volumes/kubernetes.io~empty-dir/
    // is longer than a unix socket path may be (107 bytes); the handler gets --pods-dir=/pods
    mountPath: '/pods',
    type: 'Directory',
    mountPropagation: 'HostToContainer',
    why: "each launcher Pod's emptyDirs (cmd socket, domain-notify pipe in public, container-disks, hotplug-disks): talks to the launcher, and sees the container disks bound into the Pod. HostToContainer, not Bidirectional: the bind mounts are made in the host's mount namespace (kvts-hostmount through /proc/<pid>/ns/mnt), so nothing mounted in this container ever propagates to the host",
  },
  {
    name: 'device-plugins',
    path: '/var/lib/kubelet/device-plugins',
    type: 'Directory',
    why: 'registers the devices.kubevirt.io/kvm, tun and vhost-net device plugins with kubelet',
  },
  {
    name: 'kubelet-seccomp',
    path: '/var/lib/kubelet/seccomp',
    type: 'DirectoryOrCreate',
    why: "installs the launcher Pods' seccomp profile (kubevirt-ts/kubevirt.json) where kubelet reads Localhost profiles",
  },
  {
    name: 'virt-share-dir',
    path: '/var/run/kubevirt',
    type: 'DirectoryOrCreate',
    why: "virt-handler's own node state (its sockets, per-VMI bookkeeping); survives handler restarts",
  },
];

/** The aggregated API subresources.kubevirt.io/v1, served by every virt-controller replica. */
export const SUBRESOURCES_SERVICE = 'virt-api';
export const SUBRESOURCES_PORT = 8444;
export const SUBRESOURCES_ROLE = 'kubevirt-ts-controller-subresources';
export const SUBRESOURCES_CLUSTER_RULES: Rule[] = [
  {
    apiGroups: ['apiregistration.k8s.io'],
    resources: ['apiservices'],
    resourceNames: ['v1.subresources.kubevirt.io'],
    verbs: ['get'],
    why: 'get: whether its own APIService trusts a new CA (its caBundle, which virt-operator publishes) before a certificate it signed is served; no write',
  },
  {
    apiGroups: ['authorization.k8s.io'],
    resources: ['subjectaccessreviews'],
    verbs: ['create'],
    why: "create: every subresource request is authorized by a SubjectAccessReview for the user the API server names, as an aggregated API server must; the clone a VM's dataVolumeTemplate asks for is authorized for the VM's service account (create datavolumes/source in the source's namespace, CDI's rule) before the DataVolume is created",
  },
  {
    apiGroups: ['kubevirt.io'],
    resources: ['virtualmachines', 'virtualmachineinstances'],
    verbs: ['get', 'patch'],
    why: 'get: the VM/VMI a request names; patch: start/stop set running or runStrategy, stop sets the VMI grace period',
  },
  {
    apiGroups: ['kubevirt.io'],
    resources: ['virtualmachines/status'],
    verbs: ['patch'],
    why: 'patch status: start/stop/restart queue stateChangeRequests (a JSON patch guarded by a test of the old queue)',
  },
  {
    apiGroups: ['kubevirt.io'],
    resources: ['virtualmachineinstancemigrations'],
    verbs: ['create'],
    why: 'create: the migrate subresource creates a VirtualMachineInstanceMigration',
  },
  {
    apiGroups: [''],
    resources: ['pods'],
    verbs: ['list', 'delete'],
    why: "list/delete: restart with gracePeriodSeconds 0 deletes the VMI's launcher Pod (grace 1 s), as upstream",
  },
];

const SUBRESOURCES_GROUP = 'subresources.kubevirt.io';
const READ = ['get', 'list', 'watch'];
const WRITE = [...READ, 'create', 'update', 'patch', 'delete'];
const ALL = [...WRITE, 'deletecollection'];

/**
 * The kinds people work with, by API group, as upstream's user roles name them. kubevirt-ts serves kubevirt.io's
 * VirtualMachines, VirtualMachineInstances and migrations so far; RBAC may name a resource nobody serves yet, so the
 * roles are already right when the other kinds arrive.
 */
const USER_KINDS: { apiGroups: string[]; resources: string[]; what: string }[] = [
  {
    apiGroups: ['kubevirt.io'],
    resources: [
      'virtualmachines',
      'virtualmachineinstances',
      'virtualmachineinstancepresets',
      'virtualmachineinstancereplicasets',
    ],
    what: 'VMs, VMIs, VMI presets and VMI replica sets (their status stays with the components)',
  },
  {
    apiGroups: ['snapshot.kubevirt.io'],
    resources: ['virtualmachinesnapshots', 'virtualmachinesnapshotcontents', 'virtualmachinerestores'],
    what: 'VM snapshots, their contents and restores',
  },
  {
    apiGroups: ['backup.kubevirt.io'],
    resources: ['virtualmachinebackups', 'virtualmachinebackuptrackers'],
    what: 'VM backups and their trackers',
  },
  { apiGroups: ['export.kubevirt.io'], resources: ['virtualmachineexports'], what: 'VM exports' },
  { apiGroups: ['clone.kubevirt.io'], resources: ['virtualmachineclones'], what: 'VM clones' },
  {
    apiGroups: ['instancetype.kubevirt.io'],
    resources: [
      'virtualmachineinstancetypes',
      'virtualmachineclusterinstancetypes',
      'virtualmachinepreferences',
      'virtualmachineclusterpreferences',
    ],
    what: 'instance types and preferences (the cluster-wide ones only through a ClusterRoleBinding)',
  },
  { apiGroups: ['pool.kubevirt.io'], resources: ['virtualmachinepools'], what: 'VM pools' },
];

/** a rule per kind of USER_KINDS with `verbs`; `why`: the verbs' reason, after the kinds */
const kindRules = (verbs: string[], why: string): Rule[] =>
  USER_KINDS.map((k) => ({
    apiGroups: k.apiGroups,
    resources: k.resources,
    verbs,
    why: `${verbs.join('/')}: ${why} ${k.what}`,
  }));

/** what the guest agent and the object graph tell: readable by view, edit and admin */
const READ_SUBRESOURCES = [
  'virtualmachineinstances/guestosinfo',
  'virtualmachineinstances/filesystemlist',
  'virtualmachineinstances/userlist',
  'virtualmachineinstances/sev/fetchcertchain',
  'virtualmachineinstances/sev/querylaunchmeasurement',
  'virtualmachines/objectgraph',
  'virtualmachineinstances/objectgraph',
];

/** edit's and admin's actions on VMs and VMIs through subresources.kubevirt.io (the same in both, as upstream) */
const ACT_RULES: Rule[] = [
  {
    apiGroups: [SUBRESOURCES_GROUP],
    resources: [
      'virtualmachineinstances/pause',
      'virtualmachineinstances/unpause',
      'virtualmachineinstances/addvolume',
      'virtualmachineinstances/removevolume',
      'virtualmachineinstances/freeze',
      'virtualmachineinstances/unfreeze',
      'virtualmachineinstances/softreboot',
      'virtualmachineinstances/reset',
      'virtualmachineinstances/sev/setupsession',
      'virtualmachineinstances/sev/injectlaunchsecret',
      'virtualmachineinstances/evacuate/cancel',
    ],
    verbs: ['update'],
    why: 'update: act on a running VMI (virtctl pause/unpause/freeze/soft-reboot/reset, volume hotplug, SEV launch secrets, cancel an evacuation)',
  },
  {
    apiGroups: [SUBRESOURCES_GROUP],
    resources: ['virtualmachines/expand-spec', 'virtualmachines/portforward'],
    verbs: ['get'],
    why: "get: a VM's spec with its instance type and preference applied, and port forwarding to its VMI",
  },
  {
    apiGroups: [SUBRESOURCES_GROUP],
    resources: [
      'virtualmachines/start',
      'virtualmachines/stop',
      'virtualmachines/restart',
      'virtualmachines/addvolume',
      'virtualmachines/removevolume',
      'virtualmachines/memorydump',
      'virtualmachines/evacuate/cancel',
    ],
    verbs: ['update'],
    why: 'update: act on a VM (virtctl start/stop/restart, volume hotplug, memory dump, cancel an evacuation); not migrate: that is kubevirt.io:migrate',
  },
  {
    apiGroups: [SUBRESOURCES_GROUP],
    resources: ['expand-vm-spec'],
    verbs: ['update'],
    why: 'update: expand a VM spec sent in the request with its instance type and preference (nothing is written)',
  },
];

/** edit's and admin's read of migrations and migration policies: starting or cancelling a migration is not theirs */
const MIGRATION_READ_RULES: Rule[] = [
  {
    apiGroups: ['kubevirt.io'],
    resources: ['virtualmachineinstancemigrations'],
    verbs: READ,
    why: 'get/list/watch: see migrations; creating or deleting one (migrating a VM to another node, cancelling) needs kubevirt.io:migrate, as upstream',
  },
  {
    apiGroups: ['migrations.kubevirt.io'],
    resources: ['migrationpolicies'],
    verbs: READ,
    why: 'get/list/watch: see the migration policies that apply to VMs (only cluster admins write them)',
  },
];

/**
 * ClusterRoles for people, upstream's (names, verbs, aggregation labels), so RoleBindings written for upstream work:
 * `aggregateTo` puts a role into the built-in admin / edit / view ClusterRoles (which include each other: admin has
 * edit's rules, edit has view's); kubevirt.io:migrate is bound by hand; `bindToAuthenticated` roles are every
 * signed-in user's.
 */
export const USER_ROLES: Record<
  string,
  { aggregateTo: string[]; bindToAuthenticated?: boolean; rules: Rule[] }
> = {
  'kubevirt.io:admin': {
    aggregateTo: ['admin'],
    rules: [
      {
        apiGroups: [SUBRESOURCES_GROUP],
        resources: [
          'virtualmachineinstances/console',
          'virtualmachineinstances/vnc',
          'virtualmachineinstances/vnc/screenshot',
          'virtualmachineinstances/portforward',
          'virtualmachineinstances/usbredir',
          ...READ_SUBRESOURCES,
        ],
        verbs: ['get'],
        why: "get: open a VMI's serial console, VNC display (and its screenshot), port forwarding and USB redirection (websockets; virtctl console/vnc/port-forward/usbredir); read the guest agent's OS info, filesystems and users, SEV measurements and the object graphs",
      },
      ...ACT_RULES,
      ...kindRules(ALL, "manage the namespace's"),
      {
        apiGroups: ['plugin.kubevirt.io'],
        resources: ['plugins'],
        verbs: ALL,
        why: 'get/list/watch/create/update/patch/delete/deletecollection: manage the plugins of the namespace (admin only; edit cannot)',
      },
      ...MIGRATION_READ_RULES,
    ],
  },
  'kubevirt.io:edit': {
    aggregateTo: ['edit'],
    rules: [
      {
        apiGroups: [SUBRESOURCES_GROUP],
        resources: [
          'virtualmachineinstances/console',
          'virtualmachineinstances/vnc',
          'virtualmachineinstances/portforward',
          'virtualmachineinstances/usbredir',
          ...READ_SUBRESOURCES,
        ],
        verbs: ['get'],
        why: "get: open a VMI's serial console, VNC display, port forwarding and USB redirection (websockets; view cannot: typing into a guest is acting on it); read the guest agent's OS info, filesystems and users, SEV measurements and the object graphs",
      },
      ...ACT_RULES,
      ...kindRules(WRITE, "manage the namespace's"),
      {
        apiGroups: ['kubevirt.io'],
        resources: ['kubevirts'],
        verbs: ['get', 'list'],
        why: "get/list: read the KubeVirt CR (the cluster's configuration)",
      },
      ...MIGRATION_READ_RULES,
    ],
  },
  'kubevirt.io:view': {
    aggregateTo: ['view'],
    rules: [
      {
        apiGroups: ['kubevirt.io'],
        resources: ['kubevirts'],
        verbs: ['get', 'list'],
        why: "get/list: read the KubeVirt CR (the cluster's configuration)",
      },
      {
        apiGroups: [SUBRESOURCES_GROUP],
        resources: ['virtualmachines/expand-spec', ...READ_SUBRESOURCES],
        verbs: ['get'],
        why: "get: a VM's expanded spec; the guest agent's OS info, filesystems and users, SEV measurements and the object graphs (reads; no console or VNC)",
      },
      {
        apiGroups: [SUBRESOURCES_GROUP],
        resources: ['expand-vm-spec'],
        verbs: ['update'],
        why: 'update: expand a VM spec sent in the request (a computation: nothing is written)',
      },
      ...kindRules(READ, "see the namespace's"),
      {
        apiGroups: ['kubevirt.io'],
        resources: ['virtualmachineinstancemigrations'],
        verbs: READ,
        why: 'get/list/watch: see migrations',
      },
      {
        apiGroups: ['migrations.kubevirt.io'],
        resources: ['migrationpolicies'],
        verbs: READ,
        why: 'get/list/watch: see the migration policies',
      },
      {
        apiGroups: ['plugin.kubevirt.io'],
        resources: ['plugins'],
        verbs: READ,
        why: 'get/list/watch: see the plugins of the namespace',
      },
    ],
  },
  'kubevirt.io:migrate': {
    aggregateTo: [],
    rules: [
      {
        apiGroups: [SUBRESOURCES_GROUP],
        resources: ['virtualmachines/migrate'],
        verbs: ['update'],
        why: 'update: migrate a VM to another node (virtctl migrate), a right of its own that edit and admin do not have, as upstream',
      },
      {
        apiGroups: ['kubevirt.io'],
        resources: ['virtualmachineinstancemigrations'],
        verbs: ALL,
        why: 'get/list/watch/create/update/patch/delete/deletecollection: start migrations directly and cancel them (virtctl migrate-cancel deletes them)',
      },
    ],
  },
  'kubevirt.io:default': {
    aggregateTo: [],
    bindToAuthenticated: true,
    rules: [
      {
        apiGroups: ['kubevirt.io'],
        resources: ['kubevirts'],
        verbs: ['get', 'list'],
        why: "get/list: any signed-in user may read the KubeVirt CR (the cluster's configuration), as upstream",
      },
      {
        apiGroups: [SUBRESOURCES_GROUP],
        resources: ['version', 'guestfs'],
        verbs: ['get', 'list'],
        why: "get/list: any signed-in user may read the server's version (virtctl version) and the libguestfs image to use (virtctl guestfs), as upstream",
      },
    ],
  },
  'instancetype.kubevirt.io:view': {
    aggregateTo: [],
    bindToAuthenticated: true,
    rules: [
      {
        apiGroups: ['instancetype.kubevirt.io'],
        resources: ['virtualmachineclusterinstancetypes', 'virtualmachineclusterpreferences'],
        verbs: READ,
        why: 'get/list/watch: any signed-in user may see the cluster-wide instance types and preferences a VM can name, as upstream',
      },
    ],
  },
};

function rules(list: Rule[]): V1PolicyRule[] {
  return list.map(({ why: _why, ...r }) => r);
}

/** the image of each app: controller, handler, launcher */
export interface DeployImages {
  controller: string;
  handler: string;
  launcher: string;
  operator: string;
}

function images(registry: string, tag: string): DeployImages {
  return {
    controller: `${registry}/virt-controller:${tag}`,
    handler: `${registry}/virt-handler:${tag}`,
    launcher: `${registry}/virt-launcher:${tag}`,
    operator: `${registry}/virt-operator:${tag}`,
  };
}

/**
 * The apps' images pinned by digest from tools/images/build.sh's `deploy/images/images.json` (`images.<app>.image`
 * `repo:tag`, `images.<app>.digest` the manifest digest the node imports): `repo@sha256:...` for each. Throws naming
 * the file and the field when one is missing or malformed.
 */
export function pinnedImages(file: string, json: string): DeployImages {
  let doc: { images?: Record<string, { image?: unknown; digest?: unknown }> };
  try {
    doc = JSON.parse(json) as typeof doc;
  } catch (e) {
    throw new Error(`${file}: not JSON: ${(e as Error).message}`);
  }
  const pin = (app: string): string => {
    const e = doc.images?.[app];
    const field = `${file}: images.${app}`;
    if (!e) throw new Error(`${field}: missing (build it: bash tools/images/build.sh ${app})`);
    if (typeof e.image !== 'string' || !/^[a-z0-9.-]+(:\d+)?(\/[a-z0-9._-]+)+:[\w][\w.-]*$/.test(e.image))
      throw new Error(`${field}.image: want repository:tag, got ${JSON.stringify(e.image)}`);
    if (typeof e.digest !== 'string' || !/^sha256:[0-9a-f]{64}$/.test(e.digest))
      throw new Error(
        `${field}.digest: want sha256:<64 hex digits>, got ${JSON.stringify(e.digest)} (rebuild: bash tools/images/build.sh ${app})`,
      );
    return `${e.image.slice(0, e.image.lastIndexOf(':'))}@${e.digest}`;
  };
  return {
    controller: pin('virt-controller'),
    handler: pin('virt-handler'),
    launcher: pin('virt-launcher'),
    operator: pin('virt-operator'),
  };
}

/** a ClusterRole and a Role with their bindings to the component's ServiceAccount (none for an empty rule list) */
function rbacDocs(name: string, clusterRules: Rule[], nsRules: Rule[]): DeployObject[] {
  const docs: DeployObject[] = [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name, labels: labels(name) },
      rules: rules(clusterRules),
      _why: clusterRules,
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name, labels: labels(name) },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
      subjects: [{ kind: 'ServiceAccount', name, namespace: NAMESPACE }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name, namespace: NAMESPACE, labels: labels(name) },
      rules: rules(nsRules),
      _why: nsRules,
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name, namespace: NAMESPACE, labels: labels(name) },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: [{ kind: 'ServiceAccount', name, namespace: NAMESPACE }],
    },
  ];
  return [...(clusterRules.length ? docs.slice(0, 2) : []), ...(nsRules.length ? docs.slice(2) : [])];
}

const restrictedContainer: V1SecurityContext = {
  runAsNonRoot: true,
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
};

/** The objects of each file, in apply order. Values are plain data; comments are attached when written. */
export function deployObjects({
  registry = DEFAULT_REGISTRY,
  tag = DEFAULT_TAG,
  pinned,
}: DeployOptions = {}): Record<string, DeployObject[]> {
  const img = pinned ?? images(registry, tag);
  const envCommon = [
    {
      name: 'KVTS_NAMESPACE',
      valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } },
    },
  ];
  return {
    '00-namespace.yaml': [
      {
        apiVersion: 'v1',
        kind: 'Namespace',
        // virt-handler needs privileged Pods (mount propagation into launcher Pods, host PID namespace)
        metadata: {
          name: NAMESPACE,
          labels: { ...labels('namespace'), 'pod-security.kubernetes.io/enforce': 'privileged' },
        },
      },
    ],
    '10-service-accounts.yaml': [OPERATOR, CONTROLLER, HANDLER].map((name) => ({
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name, namespace: NAMESPACE, labels: labels(name) },
    })),
    '19-rbac-operator.yaml': rbacDocs(OPERATOR, OPERATOR_CLUSTER_RULES, OPERATOR_NAMESPACE_RULES),
    '20-rbac-controller.yaml': rbacDocs(CONTROLLER, CONTROLLER_CLUSTER_RULES, CONTROLLER_NAMESPACE_RULES),
    '21-rbac-handler.yaml': rbacDocs(HANDLER, HANDLER_CLUSTER_RULES, HANDLER_NAMESPACE_RULES),
    '22-rbac-users.yaml': Object.entries(USER_ROLES)
      .map(([name, r]): DeployObject => ({
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: {
          name,
          labels: {
            ...labels('user-roles'),
            ...Object.fromEntries(
              r.aggregateTo.map((to) => [`rbac.authorization.k8s.io/aggregate-to-${to}`, 'true']),
            ),
          },
        },
        rules: rules(r.rules),
        _why: r.rules,
      }))
      .concat(
        // roles every signed-in user has (upstream binds kubevirt.io:default to system:authenticated)
        Object.entries(USER_ROLES)
          .filter(([, r]) => r.bindToAuthenticated)
          .map(([name]) => ({
            apiVersion: 'rbac.authorization.k8s.io/v1',
            kind: 'ClusterRoleBinding',
            metadata: { name, labels: labels('user-roles') },
            roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
            subjects: [
              { apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: 'system:authenticated' },
            ],
          })),
      ),
    '39-virt-operator.yaml': [
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'virt-operator', namespace: NAMESPACE, labels: labels('virt-operator') },
        spec: {
          // one replica writes the CR's status (no leader election); Recreate: never two at once
          replicas: 1,
          selector: { matchLabels: { 'kubevirt.io': 'virt-operator' } },
          strategy: { type: 'Recreate' },
          template: {
            metadata: { labels: { ...labels('virt-operator'), 'kubevirt.io': 'virt-operator' } },
            spec: {
              serviceAccountName: OPERATOR,
              securityContext: {
                runAsNonRoot: true,
                runAsUser: 65532,
                runAsGroup: 65532,
                seccompProfile: { type: 'RuntimeDefault' },
              },
              containers: [
                {
                  name: 'virt-operator',
                  image: img.operator,
                  imagePullPolicy: 'IfNotPresent',
                  args: [
                    `--kubevirt-version=v${tag}`,
                    `--default-configuration=${JSON.stringify(DEFAULT_CONFIGURATION)}`,
                    // publishes this Secret's CA into the caBundles (virt-controller makes the Secret, cannot publish)
                    `--webhook-secret=${WEBHOOK_SECRET}`,
                  ],
                  env: envCommon,
                  resources: { requests: { cpu: '10m', memory: '64Mi' }, limits: { memory: '256Mi' } },
                  securityContext: restrictedContainer,
                },
              ],
            },
          },
        },
      },
    ],
    '40-virt-controller.yaml': [
      {
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'virt-controller', namespace: NAMESPACE, labels: labels('virt-controller') },
        spec: {
          replicas: 2,
          selector: { matchLabels: { 'kubevirt.io': 'virt-controller' } },
          strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1, maxSurge: 1 } },
          template: {
            metadata: { labels: { ...labels('virt-controller'), 'kubevirt.io': 'virt-controller' } },
            spec: {
              serviceAccountName: CONTROLLER,
              securityContext: {
                runAsNonRoot: true,
                runAsUser: 65532,
                runAsGroup: 65532,
                seccompProfile: { type: 'RuntimeDefault' },
              },
              affinity: {
                podAntiAffinity: {
                  preferredDuringSchedulingIgnoredDuringExecution: [
                    {
                      weight: 100,
                      podAffinityTerm: {
                        topologyKey: 'kubernetes.io/hostname',
                        labelSelector: { matchLabels: { 'kubevirt.io': 'virt-controller' } },
                      },
                    },
                  ],
                },
              },
              containers: [
                {
                  name: 'virt-controller',
                  image: img.controller,
                  imagePullPolicy: 'IfNotPresent',
                  args: [
                    `--launcher-image=${img.launcher}`,
                    '--leader-elect',
                    `--lease-name=${LEASE_NAME}`,
                    `--webhook-secret=${WEBHOOK_SECRET}`,
                    `--webhook-service=${WEBHOOK_SERVICE}`,
                    `--webhook-port=${WEBHOOK_PORT}`,
                    `--metrics-port=${METRICS_PORT}`,
                    `--subresources-port=${SUBRESOURCES_PORT}`,
                    // VMI verbs, console and VNC reach virt-handler over mutual TLS with certificates made here
                    '--manage-handler-certs',
                  ],
                  ports: [
                    { name: 'webhooks', containerPort: WEBHOOK_PORT, protocol: 'TCP' },
                    { name: 'subresources', containerPort: SUBRESOURCES_PORT, protocol: 'TCP' },
                    { name: 'metrics', containerPort: METRICS_PORT, protocol: 'TCP' },
                  ],
                  readinessProbe: {
                    httpGet: { path: '/readyz', port: 'webhooks', scheme: 'HTTPS' },
                    periodSeconds: 10,
                  },
                  env: [
                    ...envCommon,
                    {
                      name: 'POD_NAME',
                      valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } },
                    },
                  ],
                  resources: { requests: { cpu: '50m', memory: '128Mi' }, limits: { memory: '512Mi' } },
                  securityContext: restrictedContainer,
                  // the root filesystem is read-only: scratch space for Node.js and libraries
                  volumeMounts: [{ name: 'tmp', mountPath: '/tmp' }],
                },
              ],
              volumes: [{ name: 'tmp', emptyDir: { sizeLimit: '64Mi' } }],
            },
          },
        },
      },
      {
        // voluntary disruptions (node drains) keep one replica, so a leader can always take over
        apiVersion: 'policy/v1',
        kind: 'PodDisruptionBudget',
        metadata: { name: 'virt-controller', namespace: NAMESPACE, labels: labels('virt-controller') },
        spec: { minAvailable: 1, selector: { matchLabels: { 'kubevirt.io': 'virt-controller' } } },
      },
      {
        // the API server calls the admission webhooks of every ready replica through this Service
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: WEBHOOK_SERVICE, namespace: NAMESPACE, labels: labels('virt-controller') },
        spec: {
          selector: { 'kubevirt.io': 'virt-controller' },
          ports: [{ name: 'webhooks', port: 443, targetPort: 'webhooks', protocol: 'TCP' }],
        },
      },
    ],
    '50-webhooks.yaml': webhookConfigurations(),
    '51-node-restriction.yaml': nodeRestriction(),
    '23-rbac-subresources.yaml': [
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRole',
        metadata: { name: SUBRESOURCES_ROLE, labels: labels(CONTROLLER) },
        rules: rules(SUBRESOURCES_CLUSTER_RULES),
        _why: SUBRESOURCES_CLUSTER_RULES,
      },
      {
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'ClusterRoleBinding',
        metadata: { name: SUBRESOURCES_ROLE, labels: labels(CONTROLLER) },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: SUBRESOURCES_ROLE },
        subjects: [{ kind: 'ServiceAccount', name: CONTROLLER, namespace: NAMESPACE }],
      },
      {
        // the built-in role that reads kube-system/extension-apiserver-authentication (front-proxy CA and headers)
        apiVersion: 'rbac.authorization.k8s.io/v1',
        kind: 'RoleBinding',
        metadata: { name: SUBRESOURCES_ROLE, namespace: 'kube-system', labels: labels(CONTROLLER) },
        roleRef: {
          apiGroup: 'rbac.authorization.k8s.io',
          kind: 'Role',
          name: 'extension-apiserver-authentication-reader',
        },
        subjects: [{ kind: 'ServiceAccount', name: CONTROLLER, namespace: NAMESPACE }],
      },
    ],
    '43-subresources-api.yaml': [
      {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name: SUBRESOURCES_SERVICE, namespace: NAMESPACE, labels: labels('virt-controller') },
        spec: {
          selector: { 'kubevirt.io': 'virt-controller' },
          ports: [{ name: 'subresources', port: 443, targetPort: SUBRESOURCES_PORT, protocol: 'TCP' }],
        },
      },
      {
        apiVersion: 'apiregistration.k8s.io/v1',
        kind: 'APIService',
        metadata: { name: 'v1.subresources.kubevirt.io', labels: labels('virt-controller') },
        spec: {
          group: 'subresources.kubevirt.io',
          version: 'v1',
          groupPriorityMinimum: 1000,
          versionPriority: 15,
          service: { namespace: NAMESPACE, name: SUBRESOURCES_SERVICE, port: 443 },
          // caBundle: the CA of virt-controller's serving certificate, set at run time (never insecureSkipTLSVerify)
        },
      },
    ],
    '41-virt-handler.yaml': [
      {
        apiVersion: 'apps/v1',
        kind: 'DaemonSet',
        metadata: { name: 'virt-handler', namespace: NAMESPACE, labels: labels('virt-handler') },
        spec: {
          selector: { matchLabels: { 'kubevirt.io': 'virt-handler' } },
          updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } },
          template: {
            metadata: { labels: { ...labels('virt-handler'), 'kubevirt.io': 'virt-handler' } },
            spec: {
              serviceAccountName: HANDLER,
              // host PID namespace: finds launcher and QEMU processes to enter their mount and network namespaces
              hostPID: true,
              containers: [
                {
                  name: 'virt-handler',
                  image: img.handler,
                  imagePullPolicy: 'IfNotPresent',
                  env: [
                    ...envCommon,
                    {
                      name: 'NODE_NAME',
                      valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'spec.nodeName' } },
                    },
                    // the address a migration target publishes to the source handler (upstream's MY_POD_IP)
                    {
                      name: 'MY_POD_IP',
                      valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'status.podIP' } },
                    },
                  ],
                  // the Pods' dirs as mounted here, and as the host names them (container disks are mounted there)
                  // --subresource-*: the endpoint virt-controller calls for pause, guest agent reads, console and VNC
                  // (virt-controller's client certificate only: the handlers' client certificate has the same CA)
                  // --migration-*: the migration proxy's TCP leg between handlers, mutual TLS as upstream's: a target
                  // serves the handler's serving certificate and takes only the handlers' client certificate; a source
                  // dials with that client certificate and takes only a target named virt-handler
                  args: [
                    '--pods-dir=/pods',
                    '--host-pods-dir=/var/lib/kubelet/pods',
                    '--seccomp-profile-dir=/var/lib/kubelet/seccomp',
                    `--subresource-cert-file=${HANDLER_CERTS_DIR}/tls.crt`,
                    `--subresource-key-file=${HANDLER_CERTS_DIR}/tls.key`,
                    `--subresource-client-ca-file=${HANDLER_CERTS_DIR}/ca.crt`,
                    `--subresource-port=${HANDLER_SUBRESOURCE_PORT}`,
                    '--subresource-client-names=virt-controller',
                    `--migration-cert-file=${HANDLER_CERTS_DIR}/tls.crt`,
                    `--migration-key-file=${HANDLER_CERTS_DIR}/tls.key`,
                    `--migration-ca-file=${HANDLER_CERTS_DIR}/ca.crt`,
                    `--migration-client-cert-file=${HANDLER_CLIENT_CERTS_DIR}/tls.crt`,
                    `--migration-client-key-file=${HANDLER_CLIENT_CERTS_DIR}/tls.key`,
                    '--migration-client-name=virt-handler-client',
                    '--migration-server-name=virt-handler',
                    // upstream's /healthz on 8443 (HTTPS, the serving certificate above)
                    `--healthz-port=${HANDLER_HEALTHZ_PORT}`,
                    `--kubevirt-namespace=${NAMESPACE}`,
                    `--kubevirt-name=${KUBEVIRT_CR}`,
                  ],
                  ports: [
                    { name: 'subresources', containerPort: HANDLER_SUBRESOURCE_PORT, protocol: 'TCP' },
                    { name: 'healthz', containerPort: HANDLER_HEALTHZ_PORT, protocol: 'TCP' },
                  ],
                  resources: { requests: { cpu: '50m', memory: '128Mi' }, limits: { memory: '512Mi' } },
                  // privileged: mounts in the host's mount namespace and Pod network phase 1 inside launcher Pods (see below)
                  securityContext: { privileged: true, runAsUser: 0 },
                  volumeMounts: [
                    ...HANDLER_HOST_PATHS.map((h) => ({
                      name: h.name,
                      mountPath: h.mountPath ?? h.path,
                      ...(h.mountPropagation ? { mountPropagation: h.mountPropagation } : {}),
                    })),
                    { name: 'subresource-certs', mountPath: HANDLER_CERTS_DIR, readOnly: true },
                    { name: 'client-certs', mountPath: HANDLER_CLIENT_CERTS_DIR, readOnly: true },
                  ],
                },
              ],
              volumes: [
                ...HANDLER_HOST_PATHS.map((h) => ({
                  name: h.name,
                  hostPath: { path: h.path, type: h.type },
                })),
                // made by virt-controller (--manage-handler-certs); the Pod starts once it exists
                {
                  name: 'subresource-certs',
                  secret: { secretName: HANDLER_CERTS_SECRET, defaultMode: 0o400 },
                },
                // made by virt-controller too: the client side of migrations to other nodes' handlers
                {
                  name: 'client-certs',
                  secret: { secretName: HANDLER_CLIENT_CERTS_SECRET, defaultMode: 0o400 },
                },
              ],
            },
          },
        },
      },
    ],
  };
}

/** admission rules: kubevirt.io/v1 resources and operations */
const admissionRule = (resources: string[], operations: string[]): V1RuleWithOperations => ({
  apiGroups: ['kubevirt.io'],
  apiVersions: ['v1'],
  resources,
  operations,
  scope: 'Namespaced',
});

/**
 * The resources served (deploy/crds, from @kubevirt-ts/api's CRD_KINDS without a schema) that kubevirt-ts does
 * not implement yet, by API group: the validating webhook refuses to create them (deploy.test.ts checks this
 * list against deploy/crds).
 */
export const NOT_IMPLEMENTED_RESOURCES: Record<string, string[]> = {
  'snapshot.kubevirt.io': [
    'virtualmachinesnapshots',
    'virtualmachinesnapshotcontents',
    'virtualmachinerestores',
  ],
  'export.kubevirt.io': ['virtualmachineexports'],
  'backup.kubevirt.io': ['virtualmachinebackups', 'virtualmachinebackuptrackers'],
  'clone.kubevirt.io': ['virtualmachineclones'],
  'plugin.kubevirt.io': ['plugins'],
};

/**
 * The mutating and validating webhook configurations, as upstream's virt-api registers them: failurePolicy
 * Fail (an object is never stored unchecked), calls through the Service; the caBundle is not in the file:
 * virt-operator publishes it (kubectl apply leaves a field it does not manage alone).
 */
export function webhookConfigurations(): [V1MutatingWebhookConfiguration, V1ValidatingWebhookConfiguration] {
  const hook = (name: string, path: string, rules: V1RuleWithOperations[]): V1MutatingWebhook => ({
    name,
    clientConfig: { service: { namespace: NAMESPACE, name: WEBHOOK_SERVICE, path, port: 443 } },
    rules,
    failurePolicy: 'Fail',
    matchPolicy: 'Equivalent',
    sideEffects: 'None',
    admissionReviewVersions: ['v1'],
    timeoutSeconds: 10,
  });
  return [
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingWebhookConfiguration',
      metadata: { name: MUTATING_WEBHOOK, labels: labels('virt-controller') },
      webhooks: [
        hook('mutate.kubevirt-ts.kubevirt.io', '/mutate', [
          admissionRule(['virtualmachineinstances'], ['CREATE']),
          admissionRule(['virtualmachines'], ['CREATE', 'UPDATE']),
          admissionRule(['virtualmachineinstancemigrations'], ['CREATE']),
        ]),
      ],
    },
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingWebhookConfiguration',
      metadata: { name: VALIDATING_WEBHOOK, labels: labels('virt-controller') },
      webhooks: [
        hook('validate.kubevirt-ts.kubevirt.io', '/validate', [
          admissionRule(
            [
              'virtualmachines',
              'virtualmachineinstances',
              'virtualmachineinstancemigrations',
              'virtualmachineinstancereplicasets',
              'virtualmachineinstancepresets',
            ],
            ['CREATE', 'UPDATE'],
          ),
          // pools in the version they are stored in (matchPolicy Equivalent: a v1alpha1 request is converted)
          {
            apiGroups: ['pool.kubevirt.io'],
            apiVersions: ['v1beta1'],
            resources: ['virtualmachinepools'],
            operations: ['CREATE', 'UPDATE'],
            scope: 'Namespaced',
          },
          // migration policies (cluster-scoped): their selectors and options, checked as upstream's admitter does
          {
            apiGroups: ['migrations.kubevirt.io'],
            apiVersions: ['v1alpha1'],
            resources: ['migrationpolicies'],
            operations: ['CREATE', 'UPDATE'],
            scope: 'Cluster',
          },
          // every served version (and both scopes): a create of a kind not implemented is refused by name
          ...Object.entries(NOT_IMPLEMENTED_RESOURCES).map(([group, resources]): V1RuleWithOperations => ({
            apiGroups: [group],
            apiVersions: ['*'],
            resources,
            operations: ['CREATE'],
            scope: '*',
          })),
        ]),
        // node drain (upstream's virt-launcher eviction interceptor): an eviction of a virt-launcher Pod whose VMI
        // is to be live-migrated is refused (429) and the VMI marked for evacuation; only the launcher Pods' evictions
        // are sent (the Eviction carries the Pod's name; objectSelector would see the Eviction's labels, not the
        // Pod's). A dry-run eviction marks the VMI with a dry-run patch: side effects none on dry run.
        {
          ...hook('virt-launcher-eviction-interceptor.kubevirt-ts.kubevirt.io', '/pod-eviction-validate', [
            {
              apiGroups: [''],
              apiVersions: ['v1'],
              resources: ['pods/eviction'],
              operations: ['CREATE'],
              scope: 'Namespaced',
            },
          ]),
          sideEffects: 'NoneOnDryRun',
          matchConditions: [
            {
              name: 'only-virt-launcher-pods',
              expression: 'object.metadata.name.startsWith("virt-launcher")',
            },
          ],
        },
      ],
    },
  ];
}

export const NODE_RESTRICTION = 'kubevirt-ts-node-restriction';
/** the VMI labels naming its node and its migration target (virt-controller's and virt-handler's) */
const LABEL_NODE_NAME = 'kubevirt.io/nodeName';
const LABEL_MIGRATION_TARGET = 'kubevirt.io/migrationTargetNodeName';
/** the node-name claim of a service-account token bound to a Pod, as the API server puts it in the user's extra */
export const NODE_NAME_EXTRA = 'authentication.kubernetes.io/node-name';

/**
 * virt-handler's node restriction: a ValidatingAdmissionPolicy on Node and VMI updates by the handler's service
 * account, and its binding. A PATCH reaches admission as an UPDATE with the whole old and new object.
 */
function nodeRestriction(): DeployObject[] {
  const labels_ = (o: string) => `${o}.metadata.?labels.orValue({})`;
  const annotations = (o: string) => `${o}.metadata.?annotations.orValue({})`;
  // a key virt-handler owns: kubevirt.io/... or <sub>.kubevirt.io/... (e.g. cpu-model.node.kubevirt.io/)
  const reserved = (k: string) => `${k}.matches('^([a-z0-9.-]+\\\\.)?kubevirt\\\\.io/')`;
  /** only reserved keys of map `m` differ between oldObject and object */
  const onlyReserved = (m: (o: string) => string) =>
    `${m('object')}.all(k, ${reserved('k')} || (k in ${m('oldObject')} && ${m('oldObject')}[k] == ${m('object')}[k])) && ` +
    `${m('oldObject')}.all(k, ${reserved('k')} || k in ${m('object')})`;
  const isNode = "request.resource.resource == 'nodes'";
  const isVmi = "request.resource.resource == 'virtualmachineinstances'";
  return [
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicy',
      metadata: { name: NODE_RESTRICTION, labels: labels('virt-handler') },
      spec: {
        failurePolicy: 'Fail',
        // with the API server's defaults spelled out (matchConstraints is atomic: `kubectl apply` and a server-side
        // apply after it must send the same value)
        matchConstraints: {
          matchPolicy: 'Equivalent',
          namespaceSelector: {},
          objectSelector: {},
          resourceRules: [
            {
              apiGroups: [''],
              apiVersions: ['v1'],
              resources: ['nodes'],
              operations: ['UPDATE'],
              scope: '*',
            },
            {
              apiGroups: ['kubevirt.io'],
              apiVersions: ['*'],
              resources: ['virtualmachineinstances'],
              operations: ['UPDATE'],
              scope: '*',
            },
          ],
        },
        matchConditions: [
          {
            name: 'virt-handler',
            expression: `request.userInfo.username == 'system:serviceaccount:${NAMESPACE}:${HANDLER}'`,
          },
        ],
        variables: [
          {
            name: 'node',
            expression: `'${NODE_NAME_EXTRA}' in request.userInfo.extra ? request.userInfo.extra['${NODE_NAME_EXTRA}'][0] : ''`,
          },
          // the nodes a VMI is on, migrating to, or migrated from (its migration state's source), before this write
          {
            name: 'vmiNodes',
            expression: `${isVmi} ? [${labels_('oldObject')}[?'${LABEL_NODE_NAME}'].orValue(''), string(oldObject.?status.?nodeName.orValue('')), ${labels_('oldObject')}[?'${LABEL_MIGRATION_TARGET}'].orValue(''), string(oldObject.?status.?migrationState.?targetNode.orValue('')), string(oldObject.?status.?migrationState.?sourceNode.orValue(''))].filter(n, n != '') : []`,
          },
        ],
        validations: [
          {
            expression: "variables.node != ''",
            message:
              "virt-handler's token names no node: its service-account token must be bound to its Pod (a projected token), which puts the node's name in it",
            reason: 'Forbidden',
          },
          {
            expression: `!(${isNode}) || object.metadata.name == variables.node`,
            messageExpression:
              "'virt-handler on node ' + variables.node + ' may not change node ' + object.metadata.name",
            reason: 'Forbidden',
          },
          {
            expression: `!(${isNode}) || (object.spec == oldObject.spec && ${onlyReserved(labels_)} && ${onlyReserved(annotations)})`,
            messageExpression:
              "'virt-handler may change only kubevirt.io labels and annotations of its node ' + object.metadata.name",
            reason: 'Forbidden',
          },
          {
            expression: `!(${isVmi}) || variables.node in variables.vmiNodes`,
            messageExpression:
              "'virt-handler on node ' + variables.node + ' may not change VirtualMachineInstance ' + object.metadata.namespace + '/' + object.metadata.name + ' (on ' + string(oldObject.?status.?nodeName.orValue('no node')) + ')'",
            reason: 'Forbidden',
          },
          {
            expression: `!(${isVmi}) || (object.spec == oldObject.spec && ${onlyReserved(labels_)} && [${labels_('object')}[?'${LABEL_NODE_NAME}'].orValue(''), string(object.?status.?nodeName.orValue(''))].all(n, n == '' || n in variables.vmiNodes))`,
            messageExpression:
              "'virt-handler may change only the status and kubevirt.io labels of VirtualMachineInstance ' + object.metadata.namespace + '/' + object.metadata.name + ', and not move it to another node'",
            reason: 'Forbidden',
          },
        ],
      },
    },
    {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'ValidatingAdmissionPolicyBinding',
      metadata: { name: NODE_RESTRICTION, labels: labels('virt-handler') },
      spec: { policyName: NODE_RESTRICTION, validationActions: ['Deny'] },
    },
  ];
}

const COMMENTS: Record<string, string> = {
  '00-namespace.yaml': 'Namespace of virt-operator, virt-controller, virt-handler and the KubeVirt CR.',
  '10-service-accounts.yaml': 'One ServiceAccount per component.',
  '20-rbac-controller.yaml':
    'virt-controller: least privilege. Each rule says why each verb is needed; anything else is denied.',
  '21-rbac-handler.yaml':
    'virt-handler: least privilege. Each rule says why each verb is needed; anything else is denied.',
  '22-rbac-users.yaml':
    "Roles for people, upstream's: kubevirt.io:admin, kubevirt.io:edit and kubevirt.io:view, aggregated into the built-in admin, edit and view ClusterRoles; kubevirt.io:migrate (migrating VMs: neither edit nor admin may), bound by hand; kubevirt.io:default (the KubeVirt CR, the version of subresources.kubevirt.io) and instancetype.kubevirt.io:view (cluster-wide instance types and preferences) bound to every signed-in user.",
  '19-rbac-operator.yaml':
    'virt-operator: least privilege. Each rule says why each verb is needed; anything else is denied.',
  '39-virt-operator.yaml':
    "virt-operator: owns the KubeVirt CR (the cluster's configuration, read live by virt-controller): creates the default one when the namespace has none, and keeps its status (phase, conditions, observedGeneration) true to the components' rollout; installs the common instance types and preferences unless spec.configuration.commonInstancetypesDeployment.enabled is false.",
  '40-virt-controller.yaml':
    'virt-controller: 2 replicas, one active at a time through leader election on a Lease; a PodDisruptionBudget keeps one; every replica serves the admission webhooks behind the Service.',
  '41-virt-handler.yaml': 'virt-handler: one per node; host paths listed with the reason each is needed.',
  '50-webhooks.yaml':
    'Admission webhooks served by virt-controller (defaults, validation, refusal of the served kinds not implemented, evictions of virt-launcher Pods in a node drain), failurePolicy Fail; virt-operator publishes their caBundle.',
  '51-node-restriction.yaml':
    "Node restriction for virt-handler (upstream's NodeRestriction), in the API server itself (CEL, no webhook): a handler's service-account token names the node of its Pod (authentication.kubernetes.io/node-name); it may change only that Node (only kubevirt.io labels and annotations) and only the VMIs on that node, migrating to it or from it (status and kubevirt.io labels, never the spec, never onto a third node).",
  '23-rbac-subresources.yaml':
    'virt-controller serving subresources.kubevirt.io: least privilege for the subresource verbs; each rule says why.',
  '43-subresources-api.yaml':
    'The aggregated API subresources.kubevirt.io/v1 (virtctl start/stop/...), served by virt-controller on port 8444 behind Service virt-api.',
};

function toYaml(obj: DeployObject): string {
  const { _why, ...plain } = obj;
  // no anchors and aliases where rules share a list (e.g. the same verbs): each rule reads on its own
  const doc = new YAML.Document(plain, { aliasDuplicateObjects: false });
  const nodeAt = (path: (string | number)[]) => doc.getIn(path, true) as YAML.Node;
  const mapAt = (path: (string | number)[]) => doc.getIn(path, true) as YAML.YAMLMap<YAML.Scalar, unknown>;
  if (_why) {
    _why.forEach((r, i) => {
      nodeAt(['rules', i]).commentBefore = ` ${r.why}`;
    });
  }
  if ((obj as KubernetesObject).kind === 'DaemonSet') {
    HANDLER_HOST_PATHS.forEach((h, i) => {
      nodeAt(['spec', 'template', 'spec', 'volumes', i]).commentBefore = ` ${h.why}`;
    });
    for (const item of mapAt(['spec', 'template', 'spec']).items) {
      if (item.key.value === 'hostPID')
        item.key.commentBefore =
          ' host PID namespace: finds launcher and QEMU processes to enter their mount and network namespaces';
    }
    for (const item of mapAt(['spec', 'template', 'spec', 'containers', 0]).items) {
      if (item.key.value === 'securityContext')
        item.key.commentBefore =
          ' privileged: container disks bound into launcher Pods from the host mount namespace (setns into /proc/1/ns/mnt), and Pod network phase 1' +
          " inside each launcher Pod's network namespace (entered by nsenter through /proc/<pid>/ns/net: setns needs" +
          ' CAP_SYS_ADMIN; bridge, tap and nftables NAT: CAP_NET_ADMIN; IP forwarding sysctl) and the chown of the' +
          " Pod's /dev/net/tun to the launcher's user (CAP_CHOWN) require it";
    }
  }
  return doc.toString({ lineWidth: 0 });
}

/**
 * The whole deploy/ folder (except crds/ and README.md): `files` (name -> content) and `links`
 * (name -> symlink target). The CRDs are symlinks `01-crd-<plural>.yaml -> crds/<file>`: kubectl follows
 * them, and they never go stale when @kubevirt-ts/api regenerates crds/ (only when its file set changes).
 */
export function generateDeploy(repoRoot: string, opts: DeployOptions = {}): GeneratedDeploy {
  const files: Record<string, string> = {};
  const links: Record<string, string> = {};
  const objs = deployObjects(opts);
  for (const name of Object.keys(objs).sort()) {
    files[name] = `${HEADER}# ${COMMENTS[name]}\n${objs[name].map(toYaml).join('---\n')}`;
  }
  const crdDir = join(repoRoot, 'deploy', 'crds');
  const crds = existsSync(crdDir)
    ? readdirSync(crdDir)
        .filter((f) => f.endsWith('.yaml'))
        .sort()
    : [];
  // crds/<group>_<plural>.yaml -> 01-crd-<plural>.yaml (the plurals are unique across the groups)
  for (const f of crds) links[`01-crd-${f.replace(/^[^_]+_/, '')}`] = `crds/${f}`;
  return { files, links };
}

/** true when `name` in deploy/ is one of ours (we only ever delete those) */
function isOurs(deployDir: string, name: string): boolean {
  const p = join(deployDir, name);
  if (lstatSync(p).isSymbolicLink()) return readlinkSync(p).startsWith('crds/');
  return readFileSync(p, 'utf8').startsWith(HEADER);
}

/** names in deploy/ that are not what the generator writes; [] when current */
export function checkDeploy(repoRoot: string, generated: GeneratedDeploy): string[] {
  const deployDir = join(repoRoot, 'deploy');
  const { files, links } = generated;
  const diff = [];
  for (const [f, c] of Object.entries(files)) {
    const p = join(deployDir, f);
    if (!existsSync(p) || lstatSync(p).isSymbolicLink() || readFileSync(p, 'utf8') !== c) diff.push(f);
  }
  for (const [f, target] of Object.entries(links)) {
    const p = join(deployDir, f);
    let ok = false;
    try {
      ok = lstatSync(p).isSymbolicLink() && readlinkSync(p) === target;
    } catch {
      ok = false;
    }
    if (!ok) diff.push(f);
  }
  const stale = readdirSync(deployDir).filter(
    (f) => f.endsWith('.yaml') && !(f in files) && !(f in links) && isOurs(deployDir, f),
  );
  return [...diff, ...stale];
}

/**
 * deploy/ written to another folder `dir` (e.g. a copy pinned by digest): the files, and the CRDs as symlinks to the
 * repository's `deploy/crds` by absolute path. Files of ours already there are replaced; nothing else is touched.
 */
export function writeDeployCopy(repoRoot: string, dir: string, generated: GeneratedDeploy): void {
  mkdirSync(dir, { recursive: true });
  for (const f of readdirSync(dir)) if (f.endsWith('.yaml') && isOurs(dir, f)) rmSync(join(dir, f));
  for (const [f, c] of Object.entries(generated.files)) writeFileSync(join(dir, f), c);
  for (const [f, target] of Object.entries(generated.links)) {
    rmSync(join(dir, f), { force: true });
    symlinkSync(resolve(repoRoot, 'deploy', target), join(dir, f));
  }
}

const USAGE =
  'usage: node tools/gen-deploy.mjs [--check] [--registry R] [--tag T]\n       node tools/gen-deploy.mjs --pin IMAGES.json --out DIR';

/** The CLI (tools/gen-deploy.mjs): writes deploy/, or with --check exits 1 when it is not current. */
export function main(): void {
  let values: { check?: boolean; registry?: string; tag?: string; pin?: string; out?: string };
  try {
    ({ values } = parseArgs({
      options: {
        check: { type: 'boolean' },
        registry: { type: 'string' },
        tag: { type: 'string' },
        pin: { type: 'string' },
        out: { type: 'string' },
      },
    }));
    // a pinned deploy/ never overwrites the committed one (which names tags), nor is it checked against it
    if (values.pin !== undefined && values.out === undefined) throw new Error('--pin needs --out DIR');
    if (values.out !== undefined && values.check) throw new Error('--check and --out do not go together');
    if (values.pin !== undefined && (values.registry !== undefined || values.tag !== undefined))
      throw new Error('--pin names the images: --registry and --tag do not go with it');
  } catch (e) {
    console.error(`gen-deploy: ${(e as Error).message}\n${USAGE}`);
    process.exit(2);
  }
  const repoRoot = join(import.meta.dirname, '..', '..', '..');
  const deployDir = join(repoRoot, 'deploy');
  let pinned: DeployImages | undefined;
  if (values.pin !== undefined) {
    try {
      pinned = pinnedImages(values.pin, readFileSync(values.pin, 'utf8'));
    } catch (e) {
      console.error(`gen-deploy: ${(e as Error).message}`);
      process.exit(1);
    }
  }
  const generated = generateDeploy(repoRoot, { registry: values.registry, tag: values.tag, pinned });
  if (values.out !== undefined) {
    writeDeployCopy(repoRoot, values.out, generated);
    console.error(
      `wrote ${Object.keys(generated.files).length} files and ${Object.keys(generated.links).length} CRD links to ${values.out}` +
        (pinned ? ` (images ${pinned.controller}, ${pinned.handler}, ${pinned.launcher})` : ''),
    );
    return;
  }
  const wrong = checkDeploy(repoRoot, generated);
  if (values.check) {
    if (wrong.length) {
      console.error(`deploy/ is not current (${wrong.join(', ')}): run node tools/gen-deploy.mjs`);
      process.exit(1);
    }
    console.error('deploy/ is current');
    return;
  }
  for (const f of wrong) rmSync(join(deployDir, f), { force: true });
  for (const [f, c] of Object.entries(generated.files)) writeFileSync(join(deployDir, f), c);
  for (const [f, target] of Object.entries(generated.links))
    if (!existsSync(join(deployDir, f))) symlinkSync(target, join(deployDir, f));
  console.error(
    `wrote ${Object.keys(generated.files).length} files and ${Object.keys(generated.links).length} CRD links to deploy/`,
  );
}
