// VirtualMachineInstance -> virt-launcher Pod (upstream KubeVirt's layout; see README.md for each rule).
import { createHash } from 'node:crypto';
import { posix } from 'node:path';
import type {
  V1Affinity,
  V1Container,
  V1Probe,
  V1Pod,
  V1SecurityContext,
  V1Volume,
  V1VolumeMount,
  V1VolumeDevice,
} from '@kubernetes/client-node';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { LAUNCHER_UID, podLayout } from '@kubevirt-ts/converter';
import {
  CLAIM_IMAGE_DEFAULTS,
  RenderError,
  gateEnabled,
  resolveConfig,
  type RendererConfig,
  type ResolvedConfig,
} from './config.js';
import { computeResources, hasTapPodInterface, isDedicatedCpu, wantsGuaranteedQos } from './resources.js';

/** uid/gid QEMU, libvirtd and the launcher run as (upstream's "qemu" user; the converter's Pod layout owns it). */
export { LAUNCHER_UID };
export const COMPUTE_CONTAINER = 'compute';
export const LABEL_APP = 'kubevirt.io';
export const LABEL_CREATED_BY = 'kubevirt.io/created-by';
export const LABEL_VM_NAME = 'vm.kubevirt.io/name';
export const ANNOTATION_DOMAIN = 'kubevirt.io/domain';
export const NODE_SCHEDULABLE_LABEL = 'kubevirt.io/schedulable';
/** default VMI spec.terminationGracePeriodSeconds */
export const DEFAULT_GRACE_PERIOD_SECONDS = 30;

/** In-Pod directories (upstream's), the ones the converter's layout does not name. */
export const POD_DIRS = {
  /** emptyDir "public": shared with virt-handler through the kubelet pod dir */
  public: '/var/run/kubevirt',
  /** emptyDir "sockets": the launcher's cmd socket (launcher-sock) */
  sockets: '/var/run/kubevirt/sockets',
  /** emptyDir "hotplug-disks": hotplugged volumes, mounted by virt-handler */
  hotplugDisks: '/var/run/kubevirt/hotplug-disks',
  /** emptyDir "libvirt-runtime": libvirtd's runtime dir, empty disks, cloud-init ISOs */
  libvirtRuntime: '/var/run/libvirt',
  /** where container-disk containers put their socket (container-disks emptyDir seen from their side) */
  containerDiskData: '/var/run/kubevirt-ephemeral-disks/container-disk-data',
  /** emptyDir "virt-bin-share-dir": the static container-disk helper copied from the launcher image */
  containerDiskBinary: '/usr/bin/container-disk',
} as const;

/** Where kubelet mounts the source of a config volume (the launcher builds the ISO from there). */
export function configSourceDir(
  kind: 'configMap' | 'secret' | 'downwardAPI' | 'sysprep',
  volumeName: string,
): string {
  return podLayout.configSourceDir(kind, volumeName);
}

/** The Pod's own volumes; a VMI volume with one of these names is rejected. */
export const RESERVED_VOLUME_NAMES = [
  'private',
  'public',
  'sockets',
  'virt-bin-share-dir',
  'libvirt-runtime',
  'ephemeral-disks',
  'container-disks',
  'hotplug-disks',
  'nvram',
] as const;

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

function restrictedSecurityContext(add: string[] = []): V1SecurityContext {
  return {
    runAsUser: LAUNCHER_UID,
    runAsGroup: LAUNCHER_UID,
    runAsNonRoot: true,
    privileged: false,
    allowPrivilegeEscalation: false,
    capabilities: { drop: ['ALL'], ...(add.length ? { add } : {}) },
  };
}

/** Small resources of the container-disk and kernel-boot helper containers (upstream's). */
const HELPER_RESOURCES = { requests: { cpu: '10m', memory: '1M' }, limits: { cpu: '100m', memory: '40M' } };
/** ... and with dedicated CPUs / Guaranteed QoS, where every container needs requests == limits */
const HELPER_RESOURCES_GUARANTEED = {
  requests: { cpu: '10m', memory: '40M' },
  limits: { cpu: '10m', memory: '40M' },
};

function label(path: string, value: string, what: string): string {
  if (value.length > 63 || !DNS_LABEL.test(value)) {
    throw new RenderError(
      path,
      `${JSON.stringify(value)} cannot be used as a ${what}: it must be a DNS label (lowercase letters, digits, '-', at most 63 characters)`,
    );
  }
  return value;
}

/** Hostname of the Pod: spec.hostname, else the VMI name when it is a valid DNS label, else its first 63 characters trimmed of '-'/'.'. */
function hostnameOf(vmi: VirtualMachineInstance): string {
  if (vmi.spec.hostname) return label('spec.hostname', vmi.spec.hostname, 'hostname');
  return vmi.metadata.name!.slice(0, 63).replace(/[.]/g, '-').replace(/-+$/, '');
}

/**
 * DHCP's server port: the launcher's DHCP server (phase 2 of @kubevirt-ts/network) binds it. Its DHCPv6 server (a
 * masquerade interface in a Pod with IPv6) binds 547, above it: the same sysctl covers it. Router advertisements
 * would need CAP_NET_RAW (a raw ICMPv6 socket), which a uid-107 process cannot hold here: none are sent.
 */
const DHCP_SERVER_PORT = 67;

/**
 * The value of the Pod's `net.ipv4.ip_unprivileged_port_start` sysctl, when the launcher's processes must bind a
 * port below 1024 in the Pod's network namespace: 67 for the DHCP server of a masquerade/bridge pod interface,
 * the lowest forwarded port of passt/slirp (user-mode networking listens on them in the Pod). Undefined when
 * no port below 1024 is needed.
 *
 * Why a sysctl and not CAP_NET_BIND_SERVICE: the launcher runs as uid 107, and a non-root process keeps no
 * capability across `execve` unless it is ambient or a file capability of the binary; Kubernetes puts a
 * container's added capabilities only where a non-root user's exec drops them (checked on the real node:
 * CapEff 0 in the launcher with NET_BIND_SERVICE added). The sysctl is per network namespace (it changes only
 * the Pod's own ports, for IPv4 and IPv6), is in kubelet's safe set (no node allow-list needed) and in what
 * the baseline and restricted Pod Security Standards allow, and gives no process any capability.
 */
export function unprivilegedPortStart(vmi: VirtualMachineInstance): number | undefined {
  const ports: number[] = [];
  if (hasTapPodInterface(vmi)) ports.push(DHCP_SERVER_PORT);
  for (const i of vmi.spec.domain.devices?.interfaces ?? [])
    if (i.passt !== undefined || i.slirp !== undefined || i.binding?.name === 'passt')
      for (const p of i.ports ?? []) ports.push(p.port);
  const low = Math.min(...ports.filter((p) => Number.isInteger(p) && p >= 0 && p < 1024));
  return Number.isFinite(low) ? low : undefined;
}

/** Capabilities the compute container adds to an empty set (everything else is dropped). */
export function computeCapabilities(vmi: VirtualMachineInstance): string[] {
  const caps: string[] = [];
  // no NET_BIND_SERVICE: a uid-107 process cannot use an added capability (see unprivilegedPortStart)
  // real-time vCPU scheduling (spec.domain.cpu.realtime) sets SCHED_FIFO on the vCPU threads
  if (vmi.spec.domain.cpu?.realtime !== undefined) caps.push('SYS_NICE');
  return caps;
}

interface Mounts {
  volumes: V1Volume[];
  mounts: V1VolumeMount[];
  devices: V1VolumeDevice[];
  serviceAccountName?: string;
}

/** Pod volumes and compute mounts for spec.volumes. */
function userVolumes(vmi: VirtualMachineInstance, config: ResolvedConfig, claims: Claims): Mounts {
  const out: Mounts = { volumes: [], mounts: [], devices: [] };
  const dirOf = (p: string): string => posix.dirname(p);
  (vmi.spec.volumes ?? []).forEach((v, i) => {
    const path = `spec.volumes[${i}]`;
    label(`${path}.name`, v.name, 'volume name');
    if ((RESERVED_VOLUME_NAMES as readonly string[]).includes(v.name)) {
      throw new RenderError(
        `${path}.name`,
        `"${v.name}" is reserved for the launcher Pod's own volumes (${RESERVED_VOLUME_NAMES.join(', ')})`,
      );
    }
    const claim = (claimName: string, readOnly: boolean): void => {
      out.volumes.push({
        name: v.name,
        persistentVolumeClaim: { claimName, ...(readOnly ? { readOnly } : {}) },
      });
      if (claims[claimName]?.volumeMode === 'Block') {
        out.devices.push({ name: v.name, devicePath: podLayout.blockVolumeDevice(v.name) });
      } else {
        out.mounts.push({
          name: v.name,
          mountPath: dirOf(podLayout.filesystemVolumeImage(v.name)),
          ...(readOnly ? { readOnly } : {}),
        });
      }
    };
    if (v.persistentVolumeClaim) {
      if (!v.persistentVolumeClaim.hotpluggable)
        claim(v.persistentVolumeClaim.claimName, v.persistentVolumeClaim.readOnly === true);
    } else if (v.dataVolume) {
      if (!v.dataVolume.hotpluggable) claim(v.dataVolume.name, false);
    } else if (v.ephemeral) {
      const pvc = v.ephemeral.persistentVolumeClaim;
      if (!pvc) throw new RenderError(`${path}.ephemeral.persistentVolumeClaim`, 'required');
      claim(pvc.claimName, true); // the launcher writes to a qcow2 overlay in ephemeral-disks
    } else if (v.hostDisk) {
      // a hostDisk reaches the node's filesystem: only behind the HostDisk gate, never with relative parts
      if (!gateEnabled(config, 'HostDisk'))
        throw new RenderError(
          `${path}.hostDisk`,
          'hostDisk volumes need the HostDisk feature gate, which is off (cluster config featureGates)',
        );
      const hp = v.hostDisk.path;
      if (!hp.startsWith('/') || hp === '/' || hp.split('/').some((x) => x === '..' || x === '.'))
        throw new RenderError(`${path}.hostDisk.path`, 'must be an absolute path without . or .. components');
      const image = podLayout.hostDiskImage(v.name, hp);
      out.volumes.push({
        name: v.name,
        hostPath: {
          path: posix.dirname(v.hostDisk.path),
          type: v.hostDisk.type === 'DiskOrCreate' ? 'DirectoryOrCreate' : 'Directory',
        },
      });
      out.mounts.push({ name: v.name, mountPath: dirOf(image) });
    } else if (v.configMap) {
      out.volumes.push({
        name: v.name,
        configMap: {
          name: v.configMap.name,
          ...(v.configMap.optional !== undefined ? { optional: v.configMap.optional } : {}),
        },
      });
      out.mounts.push({ name: v.name, mountPath: configSourceDir('configMap', v.name), readOnly: true });
    } else if (v.secret) {
      out.volumes.push({
        name: v.name,
        secret: {
          secretName: v.secret.secretName,
          ...(v.secret.optional !== undefined ? { optional: v.secret.optional } : {}),
        },
      });
      out.mounts.push({ name: v.name, mountPath: configSourceDir('secret', v.name), readOnly: true });
    } else if (v.downwardAPI) {
      out.volumes.push({ name: v.name, downwardAPI: { items: (v.downwardAPI.fields ?? []) as never } });
      out.mounts.push({ name: v.name, mountPath: configSourceDir('downwardAPI', v.name), readOnly: true });
    } else if (v.serviceAccount) {
      // the token is mounted by kubelet at /var/run/secrets/kubernetes.io/serviceaccount (automount)
      if (out.serviceAccountName !== undefined)
        throw new RenderError(`${path}.serviceAccount`, 'only one serviceAccount volume is allowed');
      out.serviceAccountName = v.serviceAccount.serviceAccountName ?? 'default';
    } else if (v.sysprep) {
      const src = v.sysprep.configMap
        ? { configMap: { name: v.sysprep.configMap.name } }
        : v.sysprep.secret
          ? { secret: { secretName: v.sysprep.secret.name } }
          : undefined;
      if (!src) throw new RenderError(`${path}.sysprep`, 'needs configMap or secret');
      out.volumes.push({ name: v.name, ...src });
      out.mounts.push({ name: v.name, mountPath: configSourceDir('sysprep', v.name), readOnly: true });
    } else if (v.cloudInitNoCloud || v.cloudInitConfigDrive) {
      const ci = (v.cloudInitNoCloud ?? v.cloudInitConfigDrive)!;
      const secrets = [
        ...new Set([ci.secretRef?.name, ci.networkDataSecretRef?.name].filter((s): s is string => !!s)),
      ];
      if (secrets.length > 0) {
        // the launcher reads userdata / networkdata from one dir: project the referenced secret(s) there
        out.volumes.push({
          name: v.name,
          projected: { sources: secrets.map((name) => ({ secret: { name } })) },
        });
        out.mounts.push({ name: v.name, mountPath: configSourceDir('secret', v.name), readOnly: true });
      }
    } else if (v.downwardMetrics) {
      throw new RenderError(
        `${path}.downwardMetrics`,
        'downwardMetrics volumes are not supported by kubevirt-ts',
      );
    }
    // containerDisk: own containers (below); emptyDisk and inline cloud-init: files the launcher creates in
    // libvirt-runtime; memoryDump: hotplugged, never in the launcher Pod.
  });
  return out;
}

/** Init + sidecar containers that serve a container image's disk (upstream's container-disk protocol). */
function containerDiskContainers(vmi: VirtualMachineInstance, config: ResolvedConfig) {
  const uid = vmi.metadata.uid!;
  const init: V1Container[] = [];
  const sidecars: V1Container[] = [];
  const dataDir = `${POD_DIRS.containerDiskData}/${uid}`;
  const HELPER =
    isDedicatedCpu(vmi) || wantsGuaranteedQos(vmi) ? HELPER_RESOURCES_GUARANTEED : HELPER_RESOURCES;
  const add = (
    name: string,
    path: string,
    image: string,
    pullPolicy: string | undefined,
    socket: string,
  ): void => {
    label(path, name, 'container name');
    label(path, `${name}-init`, 'init container name');
    const mountsBin = { name: 'virt-bin-share-dir', mountPath: posix.dirname(POD_DIRS.containerDiskBinary) };
    // init: pulls the image before the launcher starts and checks it runs (`--no-op`), so a bad image fails the Pod early
    init.push({
      name: `${name}-init`,
      image,
      imagePullPolicy: pullPolicy ?? config.imagePullPolicy,
      command: [POD_DIRS.containerDiskBinary],
      args: ['--no-op'],
      volumeMounts: [mountsBin],
      resources: HELPER,
      securityContext: restrictedSecurityContext(),
    });
    // sidecar: keeps the image's root filesystem alive and announces it on a socket; virt-handler
    // finds the disk there and bind-mounts it into the compute container's container-disks dir
    sidecars.push({
      name,
      image,
      imagePullPolicy: pullPolicy ?? config.imagePullPolicy,
      command: [POD_DIRS.containerDiskBinary],
      args: ['--copy-path', `${dataDir}/${socket}`],
      volumeMounts: [{ name: 'container-disks', mountPath: dataDir }, mountsBin],
      resources: HELPER,
      securityContext: restrictedSecurityContext(),
    });
  };
  (vmi.spec.volumes ?? []).forEach((v, i) => {
    if (v.containerDisk) {
      add(
        `volume${v.name}`,
        `spec.volumes[${i}].name`,
        v.containerDisk.image,
        v.containerDisk.imagePullPolicy,
        `disk_${i}`,
      );
    }
  });
  const kb = vmi.spec.domain.firmware?.kernelBoot?.container;
  if (kb)
    add(
      'kernel-boot',
      'spec.domain.firmware.kernelBoot.container',
      kb.image,
      kb.imagePullPolicy,
      'kernel-boot',
    );
  if (init.length > 0) {
    // first: copy the static container-disk helper from the launcher image into the shared emptyDir
    init.unshift({
      name: 'container-disk-binary',
      image: config.launcherImage,
      imagePullPolicy: config.imagePullPolicy,
      command: ['/usr/bin/cp', POD_DIRS.containerDiskBinary, `/init${POD_DIRS.containerDiskBinary}`],
      volumeMounts: [
        { name: 'virt-bin-share-dir', mountPath: `/init${posix.dirname(POD_DIRS.containerDiskBinary)}` },
      ],
      resources: HELPER,
      securityContext: restrictedSecurityContext(),
    });
  }
  const pullSecrets = [
    ...(vmi.spec.volumes ?? []).map((v) => v.containerDisk?.imagePullSecret),
    kb?.imagePullSecret,
  ].filter((s): s is string => !!s);
  return { init, sidecars, pullSecrets };
}

/** The launcher's command line (upstream flag names; the launcher parses exactly these). */
export function launcherCommand(
  vmi: VirtualMachineInstance,
  config: ResolvedConfig,
  gracePeriodSeconds: number,
): string[] {
  const cmd = [
    ...config.launcherCommand,
    '--qemu-timeout',
    `${config.qemuTimeoutSeconds}s`,
    '--name',
    vmi.metadata.name!,
    '--uid',
    vmi.metadata.uid!,
    '--namespace',
    vmi.metadata.namespace!,
    '--kubevirt-share-dir',
    POD_DIRS.public,
    '--ephemeral-disk-dir',
    podLayout.ephemeralDisksDir,
    '--container-disk-dir',
    podLayout.containerDisksDir,
    '--grace-period-seconds',
    String(gracePeriodSeconds),
    '--hook-sidecars',
    '0',
  ];
  if (config.useEmulation) cmd.push('--allow-emulation');
  if (config.keepAfterFailure) cmd.push('--keep-after-failure');
  // the sizing of disk.img on filesystem claims: only values other than the launcher's defaults (upstream's)
  if (config.lessPVCSpaceToleration !== CLAIM_IMAGE_DEFAULTS.lessPVCSpaceToleration)
    cmd.push('--less-pvc-space-toleration', String(config.lessPVCSpaceToleration));
  if (config.minimumReservePVCBytes !== CLAIM_IMAGE_DEFAULTS.minimumReservePVCBytes)
    cmd.push('--minimum-reserve-pvc-bytes', String(config.minimumReservePVCBytes));
  return cmd;
}

/** Name of the Pod interface of a secondary network (upstream: "pod" + the first 11 hex digits of sha256(name)). */
export function podInterfaceName(networkName: string): string {
  return `pod${createHash('sha256').update(networkName).digest('hex').slice(0, 11)}`;
}

export const ANNOTATION_MULTUS_NETWORKS = 'k8s.v1.cni.cncf.io/networks';
export const ANNOTATION_MULTUS_DEFAULT_NETWORK = 'v1.multus-cni.io/default-network';

/** Prefixes of the VMI annotations that stay off the launcher Pod (kubectl's own, and the API version bookkeeping). */
const VMI_ANNOTATIONS_NOT_COPIED = [
  'kubectl.kubernetes.io',
  'kubevirt.io/storage-observed-api-version',
  'kubevirt.io/latest-observed-api-version',
];

/** The VMI's annotations the launcher Pod carries (upstream copies all but the prefixes above). */
function podAnnotationsFromVmi(annotations: Record<string, string> | undefined): Record<string, string> {
  return Object.fromEntries(
    Object.entries(annotations ?? {}).filter(
      ([k]) => !VMI_ANNOTATIONS_NOT_COPIED.some((p) => k.startsWith(p)),
    ),
  );
}

/** Multus annotations for spec.networks[*].multus (secondary networks, and a replaced default network). */
function multusAnnotations(vmi: VirtualMachineInstance): Record<string, string> {
  const out: Record<string, string> = {};
  const secondary: { name: string; namespace: string; interface: string }[] = [];
  (vmi.spec.networks ?? []).forEach((n, i) => {
    if (!n.multus) return;
    const ref = n.multus.networkName;
    const parts = ref.split('/');
    if (parts.length > 2 || parts.some((p) => p === '')) {
      throw new RenderError(
        `spec.networks[${i}].multus.networkName`,
        `expected NAME or NAMESPACE/NAME, got ${JSON.stringify(ref)}`,
      );
    }
    if (n.multus.default) {
      out[ANNOTATION_MULTUS_DEFAULT_NETWORK] = ref;
      return;
    }
    const [ns, name] = parts.length === 2 ? [parts[0]!, parts[1]!] : [vmi.metadata.namespace!, parts[0]!];
    secondary.push({ name, namespace: ns, interface: podInterfaceName(n.name) });
  });
  if (secondary.length) out[ANNOTATION_MULTUS_NETWORKS] = JSON.stringify(secondary);
  return out;
}

type VmiProbe = NonNullable<VirtualMachineInstance['spec']['readinessProbe']>;

/**
 * A VMI probe kubelet can run against the Pod (httpGet, tcpSocket: the Pod's address reaches the guest
 * through the pod network binding) becomes the compute container's probe with the same timing. exec and
 * guestAgentPing run inside the guest through the guest agent; kubevirt-ts does not render those (undefined).
 */
export function podProbe(probe: VmiProbe | undefined): V1Probe | undefined {
  if (!probe || (!probe.httpGet && !probe.tcpSocket)) return undefined;
  const { exec: _e, guestAgentPing: _g, httpGet, tcpSocket, ...timing } = probe;
  return {
    ...timing,
    ...(httpGet
      ? { httpGet: httpGet as V1Probe['httpGet'] }
      : { tcpSocket: tcpSocket as V1Probe['tcpSocket'] }),
  };
}

function usesEfi(vmi: VirtualMachineInstance): boolean {
  return vmi.spec.domain.firmware?.bootloader?.efi !== undefined;
}

/** What the renderer needs of a PersistentVolumeClaim the VMI uses (virt-controller reads the claim). */
export interface ClaimInfo {
  /** the claim's `spec.volumeMode`: `Block` becomes a volumeDevice, anything else (Filesystem, unset) a mount */
  volumeMode?: string;
}
/** claim name -> {@link ClaimInfo} */
export type Claims = Readonly<Record<string, ClaimInfo | undefined>>;

/**
 * Renders the virt-launcher Pod for a VMI. The VMI should carry its API defaults (as stored by the cluster)
 * and must have metadata.name, metadata.namespace and metadata.uid. `claims` gives the volume mode of each
 * PersistentVolumeClaim the VMI's volumes use (a dataVolume's claim has the DataVolume's name), as virt-controller
 * reads them from the API server; a claim not in it is taken as Filesystem. Throws RenderError naming the field
 * on bad input.
 */
export function renderLaunchPod(
  vmi: VirtualMachineInstance,
  rendererConfig: RendererConfig,
  claims: Claims = {},
): V1Pod {
  const config = resolveConfig(rendererConfig);
  const meta = vmi?.metadata;
  for (const k of ['name', 'namespace', 'uid'] as const) {
    if (!meta?.[k])
      throw new RenderError(
        `metadata.${k}`,
        'required (the launcher Pod is named after and owned by the VMI)',
      );
  }
  if (!vmi.spec?.domain) throw new RenderError('spec.domain', 'required');
  const name = meta.name!;
  const uid = meta.uid!;

  const grace = vmi.spec.terminationGracePeriodSeconds ?? DEFAULT_GRACE_PERIOD_SECONDS;
  const { requests, limits } = computeResources(vmi, config);
  const user = userVolumes(vmi, config, claims);
  const cd = containerDiskContainers(vmi, config);

  const emptyDir = (n: string): V1Volume => ({ name: n, emptyDir: {} });
  const volumes: V1Volume[] = [
    emptyDir('private'),
    emptyDir('public'),
    emptyDir('sockets'),
    emptyDir('virt-bin-share-dir'),
    emptyDir('libvirt-runtime'),
    emptyDir('ephemeral-disks'),
    emptyDir('container-disks'),
    emptyDir('hotplug-disks'),
    ...(usesEfi(vmi) ? [emptyDir('nvram')] : []),
    ...user.volumes,
  ];
  const mounts: V1VolumeMount[] = [
    { name: 'private', mountPath: podLayout.privateDir },
    { name: 'public', mountPath: POD_DIRS.public },
    { name: 'ephemeral-disks', mountPath: podLayout.ephemeralDisksDir },
    // virt-handler bind-mounts container disks here from the host side: propagate host mounts into the container
    { name: 'container-disks', mountPath: podLayout.containerDisksDir, mountPropagation: 'HostToContainer' },
    { name: 'libvirt-runtime', mountPath: POD_DIRS.libvirtRuntime },
    { name: 'sockets', mountPath: POD_DIRS.sockets },
    { name: 'hotplug-disks', mountPath: POD_DIRS.hotplugDisks, mountPropagation: 'HostToContainer' },
    ...(usesEfi(vmi) ? [{ name: 'nvram', mountPath: posix.dirname(podLayout.nvramFile(name)) }] : []),
    ...user.mounts,
  ];

  const compute: V1Container = {
    name: COMPUTE_CONTAINER,
    image: config.launcherImage,
    imagePullPolicy: config.imagePullPolicy,
    command: launcherCommand(vmi, config, grace),
    env: [{ name: 'POD_NAME', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } } }],
    resources: { requests, limits },
    securityContext: restrictedSecurityContext(computeCapabilities(vmi)),
    volumeMounts: mounts,
    ...(user.devices.length ? { volumeDevices: user.devices } : {}),
  };
  const readiness = podProbe(vmi.spec.readinessProbe);
  const liveness = podProbe(vmi.spec.livenessProbe);
  if (readiness) compute.readinessProbe = readiness;
  if (liveness) compute.livenessProbe = liveness;

  const spec = vmi.spec;
  const portStart = unprivilegedPortStart(vmi);
  const pullSecrets = [...new Set([...(config.imagePullSecrets ?? []), ...cd.pullSecrets])];
  const pod: V1Pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: `virt-launcher-${name}-`,
      namespace: meta.namespace!,
      labels: {
        ...(meta.labels ?? {}),
        [LABEL_APP]: 'virt-launcher',
        [LABEL_CREATED_BY]: uid,
        [LABEL_VM_NAME]: name.length <= 63 ? name : name.slice(0, 63).replace(/[-_.]+$/, ''),
      },
      annotations: {
        ...podAnnotationsFromVmi(meta.annotations),
        [ANNOTATION_DOMAIN]: name,
        'kubectl.kubernetes.io/default-container': COMPUTE_CONTAINER,
        ...multusAnnotations(vmi),
      },
      ownerReferences: [
        {
          apiVersion: 'kubevirt.io/v1',
          kind: 'VirtualMachineInstance',
          name,
          uid,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      hostname: hostnameOf(vmi),
      ...(spec.subdomain ? { subdomain: label('spec.subdomain', spec.subdomain, 'subdomain') } : {}),
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: grace + config.gracePeriodBufferSeconds,
      // seccomp: RuntimeDefault by default (QEMU, libvirtd and the launcher need no syscall it blocks; passt does:
      // the user namespace of its sandbox), or the Localhost profile virt-handler installs (config.launcherSeccompProfile)
      securityContext: {
        runAsUser: LAUNCHER_UID,
        runAsGroup: LAUNCHER_UID,
        fsGroup: LAUNCHER_UID,
        runAsNonRoot: true,
        seccompProfile:
          config.launcherSeccompProfile === 'RuntimeDefault'
            ? { type: 'RuntimeDefault' }
            : { type: 'Localhost', localhostProfile: config.launcherSeccompProfile },
        // ports below 1024 in the Pod's own network namespace (DHCP for the guest): see unprivilegedPortStart
        ...(portStart !== undefined
          ? { sysctls: [{ name: 'net.ipv4.ip_unprivileged_port_start', value: String(portStart) }] }
          : {}),
      },
      automountServiceAccountToken: user.serviceAccountName !== undefined,
      ...(user.serviceAccountName !== undefined ? { serviceAccountName: user.serviceAccountName } : {}),
      nodeSelector: {
        ...(spec.nodeSelector ?? {}),
        // spec.architecture (amd64, arm64, s390x): only nodes of that CPU architecture
        ...(spec.architecture ? { 'kubernetes.io/arch': spec.architecture } : {}),
        [NODE_SCHEDULABLE_LABEL]: 'true',
      },
      ...(spec.affinity ? { affinity: spec.affinity as V1Affinity } : {}),
      ...(spec.tolerations ? { tolerations: spec.tolerations } : {}),
      ...(spec.topologySpreadConstraints
        ? { topologySpreadConstraints: spec.topologySpreadConstraints as never }
        : {}),
      ...(spec.schedulerName ? { schedulerName: spec.schedulerName } : {}),
      ...(spec.priorityClassName ? { priorityClassName: spec.priorityClassName } : {}),
      ...(spec.dnsPolicy ? { dnsPolicy: spec.dnsPolicy } : {}),
      ...(spec.dnsConfig ? { dnsConfig: spec.dnsConfig as never } : {}),
      ...(pullSecrets.length ? { imagePullSecrets: pullSecrets.map((n) => ({ name: n })) } : {}),
      ...(cd.init.length ? { initContainers: cd.init } : {}),
      containers: [compute, ...cd.sidecars],
      volumes,
    },
  };
  return pod;
}

/** the annotation of the temporary Pod that binds a VMI's WaitForFirstConsumer claims (upstream's name) */
export const ANNOTATION_EPHEMERAL_PROVISIONING = 'kubevirt.io/ephemeral-provisioning';
/** the label naming the VMI (uid) a temporary provisioning Pod is for (not `kubevirt.io/created-by`: no launcher) */
export const LABEL_PROVISIONING_FOR = 'kubevirt.io/provisioning-for';

/** The name of the temporary provisioning Pod of a VMI: one per VMI, so a second create is AlreadyExists. */
export function provisioningPodName(vmi: VirtualMachineInstance): string {
  return `virt-provision-${vmi.metadata!.name}-${vmi.metadata!.uid!.slice(0, 5)}`;
}

/**
 * The temporary Pod that is the first consumer of a VMI's claims when CDI waits for one (a DataVolume in phase
 * `WaitForFirstConsumer`, CDI's HonorWaitForFirstConsumer): upstream's "ephemeral provisioning" Pod. It names every
 * claim the launcher Pod will mount (so the scheduler binds them all on one node the VMI may run on: its node
 * selector, affinity, tolerations, scheduler, priority) and runs nothing but `container-disk --no-op` of the launcher
 * image as an unprivileged user; CDI then populates the claims on that node, and the launcher Pod that follows is
 * scheduled there by the volumes' node affinity. Owned by the VMI (the garbage collector removes it with the VMI).
 */
export function renderProvisioningPod(vmi: VirtualMachineInstance, rendererConfig: RendererConfig): V1Pod {
  const config = resolveConfig(rendererConfig);
  const meta = vmi.metadata;
  if (!meta?.name || !meta.namespace || !meta.uid)
    throw new RenderError('metadata', 'name, namespace and uid are required');
  const spec = vmi.spec;
  const claims = new Map<string, string>();
  for (const v of spec.volumes ?? []) {
    const claim =
      (v.persistentVolumeClaim &&
        !v.persistentVolumeClaim.hotpluggable &&
        v.persistentVolumeClaim.claimName) ||
      (v.dataVolume && !v.dataVolume.hotpluggable && v.dataVolume.name) ||
      v.ephemeral?.persistentVolumeClaim?.claimName;
    if (claim && !claims.has(claim)) claims.set(claim, v.name);
  }
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: provisioningPodName(vmi),
      namespace: meta.namespace,
      labels: { [LABEL_PROVISIONING_FOR]: meta.uid },
      annotations: { [ANNOTATION_EPHEMERAL_PROVISIONING]: 'true' },
      ownerReferences: [
        {
          apiVersion: 'kubevirt.io/v1',
          kind: 'VirtualMachineInstance',
          name: meta.name,
          uid: meta.uid,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 0,
      automountServiceAccountToken: false,
      securityContext: {
        runAsUser: LAUNCHER_UID,
        runAsGroup: LAUNCHER_UID,
        runAsNonRoot: true,
        seccompProfile: { type: 'RuntimeDefault' },
      },
      nodeSelector: {
        ...(spec.nodeSelector ?? {}),
        ...(spec.architecture ? { 'kubernetes.io/arch': spec.architecture } : {}),
        [NODE_SCHEDULABLE_LABEL]: 'true',
      },
      ...(spec.affinity ? { affinity: spec.affinity as V1Affinity } : {}),
      ...(spec.tolerations ? { tolerations: spec.tolerations } : {}),
      ...(spec.schedulerName ? { schedulerName: spec.schedulerName } : {}),
      ...(spec.priorityClassName ? { priorityClassName: spec.priorityClassName } : {}),
      ...(config.imagePullSecrets?.length
        ? { imagePullSecrets: config.imagePullSecrets.map((n) => ({ name: n })) }
        : {}),
      containers: [
        {
          name: 'provision',
          image: config.launcherImage,
          imagePullPolicy: config.imagePullPolicy,
          command: ['/usr/bin/container-disk', '--no-op'],
          resources: HELPER_RESOURCES,
          securityContext: restrictedSecurityContext(),
        },
      ],
      volumes: [...claims].map(([claimName, volume]) => ({
        name: volume,
        persistentVolumeClaim: { claimName },
      })),
    },
  };
}
