/**
 * The pure part of the VMI reconcile: from a VMI, the domain its launcher reports (or none) and what
 * the handler observed about the launcher, compute the VMI status the handler wants and the events
 * to record. No I/O here, so every rule has a fast unit test (status.test.ts).
 */
import type { Condition, VirtualMachineInstance, VirtualMachineInstanceStatus } from '@kubevirt-ts/api';
import type { DomainModel } from '@kubevirt-ts/cmd-protocol';

export type Phase = NonNullable<VirtualMachineInstanceStatus['phase']>;

export const FINAL_PHASES: readonly string[] = ['Succeeded', 'Failed'];

/** Condition types the handler owns on a VMI (upstream's names). */
export const COND = {
  ready: 'Ready',
  paused: 'Paused',
  agentConnected: 'AgentConnected',
  liveMigratable: 'LiveMigratable',
  synchronized: 'Synchronized',
} as const;
const OWNED: readonly string[] = Object.values(COND);

/** What the handler knows about the launcher of a VMI besides its domain. */
export interface LauncherObservation {
  /** the launcher answered on launcher-sock at least once for this VMI uid */
  ready: boolean;
  /** the launcher was ready and is no longer reachable (its socket is gone or refuses) */
  gone: boolean;
  /** the launcher never became ready within the timeout: the message to report */
  notReadyTimeout?: string;
  /** the last SyncVirtualMachine failed: the launcher's message */
  syncError?: string;
}

export interface StatusInput {
  vmi: VirtualMachineInstance;
  /** the domain of this VMI (same uid), undefined when there is none */
  domain: DomainModel | undefined;
  launcher: LauncherObservation;
  /** the pod interface (by its name in the spec) and the addresses phase 1 gave it (see podInterfaceAddresses) */
  podInterface?: { name: string; addresses: string[] };
  nodeName: string;
  launcherImageVersion?: string;
  now: string;
}

export interface EventToRecord {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export interface StatusResult {
  status: VirtualMachineInstanceStatus;
  events: EventToRecord[];
}

export function isFinal(phase: string | undefined): boolean {
  return !!phase && FINAL_PHASES.includes(phase);
}

/** A domain state that means QEMU is there (running or paused, ...). */
export function domainActive(domain: DomainModel | undefined): boolean {
  return (
    !!domain && ['Running', 'Paused', 'Blocked', 'PMSuspended', 'ShuttingDown'].includes(domain.status.status)
  );
}

/** ACPI on unless spec.domain.features.acpi.enabled is false (the default is on). */
function acpiEnabled(vmi: VirtualMachineInstance): boolean {
  const acpi = (vmi.spec.domain.features as { acpi?: { enabled?: boolean } } | undefined)?.acpi;
  return acpi?.enabled !== false;
}

/** libvirt's StartingUp pause: QEMU launched, its CPUs not started yet */
const startingUp = (d: DomainModel | undefined) =>
  d?.status.status === 'Paused' && d.status.reason === 'StartingUp';

/**
 * The phase the domain implies (upstream's rules): Running/Paused/Blocked/PMSuspended -> Running;
 * Shutoff or Crashed with reason Crashed/Panicked -> Failed, Destroyed -> Failed when ACPI was
 * there to shut it down cleanly (else Succeeded), Shutdown/Saved/FromSnapshot -> Succeeded.
 * Without a domain: Failed when the launcher is gone (or never got ready) after being scheduled. A VMI not
 * Running yet stays as it is through libvirt's StartingUp pause.
 */
export function phaseFor(
  vmi: VirtualMachineInstance,
  domain: DomainModel | undefined,
  launcher: LauncherObservation,
): { phase: Phase; reason?: string } {
  const current = (vmi.status?.phase || 'Scheduled') as Phase;
  if (isFinal(current)) return { phase: current, reason: vmi.status?.reason };
  if (domain) {
    const { status, reason } = domain.status;
    // libvirt's StartingUp pause (QEMU launched, its CPUs not started yet) lasts until virDomainCreate returns, a
    // few ms: a VMI not Running yet stays Scheduled through it, so that its first write says Running and Ready at
    // once (it cost every VMI one more write: Running with Ready False, then Ready True 60 ms later)
    if (startingUp(domain) && current !== 'Running') return { phase: current };
    if (['Running', 'Paused', 'Blocked', 'PMSuspended'].includes(status)) return { phase: 'Running' };
    if (status === 'Shutoff' || status === 'Crashed') {
      if (status === 'Crashed' || reason === 'Crashed' || reason === 'Panicked' || reason === 'Failed')
        return { phase: 'Failed', reason: 'DomainCrashed' };
      if (reason === 'Destroyed')
        return acpiEnabled(vmi) ? { phase: 'Failed', reason: 'DomainDestroyed' } : { phase: 'Succeeded' };
      if (['Shutdown', 'Saved', 'FromSnapshot'].includes(reason)) return { phase: 'Succeeded' };
    }
  }
  if (launcher.notReadyTimeout) return { phase: 'Failed', reason: 'LauncherNotReady' };
  if (launcher.gone) return { phase: 'Failed', reason: 'LauncherGone' };
  if (!domain && current === 'Running') return { phase: 'Failed', reason: 'DomainGone' };
  return { phase: current === 'Running' ? 'Running' : 'Scheduled' };
}

function cond(
  type: string,
  status: 'True' | 'False',
  now: string,
  reason?: string,
  message?: string,
): Condition {
  return {
    type,
    status,
    lastProbeTime: null,
    lastTransitionTime: now,
    ...(reason ? { reason } : {}),
    ...(message ? { message } : {}),
  };
}

/** `status.migrationMethod`: upstream's VirtualMachineInstanceMigrationMethod. */
export type MigrationMethod = 'BlockMigration' | 'LiveMigration';

/** Volumes the handler knows nothing about: a status entry of upstream's `VolumeStatus` (the fields read here). */
interface VolumeStatusEntry {
  name: string;
  persistentVolumeClaimInfo?: { claimName?: string; accessModes?: string[] };
}

/** A claim with ReadWriteMany can be opened on both nodes at once: the target uses it as it is (upstream's HasSharedAccessMode). */
export function hasSharedAccessMode(accessModes: readonly string[] | undefined): boolean {
  return (accessModes ?? []).includes('ReadWriteMany');
}

/** The volumes of `status.migratedVolumes` (a volume migration copies them as local ones). */
function migratedVolumeNames(vmi: VirtualMachineInstance): Set<string> {
  const mv = (vmi.status as { migratedVolumes?: Array<{ volumeName?: string }> } | undefined)
    ?.migratedVolumes;
  return new Set((mv ?? []).map((v) => v.volumeName ?? '').filter(Boolean));
}

/** The VMI migrates with its node-local disks copied (upstream's IsBlockMigration). */
export function isBlockMigration(vmi: VirtualMachineInstance): boolean {
  return vmi.status?.migrationMethod === 'BlockMigration' || migratedVolumeNames(vmi).size > 0;
}

/**
 * Upstream's checkVolumesForMigration: whether a live migration must copy disks (block migration) and what
 * refuses it. PVCs and DataVolumes must be shared (status.volumeStatus[].persistentVolumeClaimInfo.accessModes
 * has ReadWriteMany; virt-controller fills it from the claims); a hostDisk only when `shared: true` (or, translated
 * from a PVC, like a PVC); every other volume (containerDisk, emptyDisk, ephemeral, cloud-init, configMap, secret,
 * serviceAccount, downwardAPI, ...) is node-local and makes the migration a block migration, except one backing a
 * virtiofs filesystem or used only by a read-only cdrom. On a refusal `blockMigration` is true, as upstream.
 */
export function checkVolumesForMigration(vmi: VirtualMachineInstance): {
  blockMigration: boolean;
  error?: string;
} {
  const statuses = new Map<string, VolumeStatusEntry>();
  for (const vs of (vmi.status?.volumeStatus ?? []) as VolumeStatusEntry[]) statuses.set(vs.name, vs);
  const migrated = migratedVolumeNames(vmi);
  let blockMigration = migrated.size > 0;
  const devices = vmi.spec.domain.devices ?? {};
  const filesystems = new Set(
    ((devices as { filesystems?: Array<{ name?: string }> }).filesystems ?? []).map((f) => f.name),
  );
  const readOnlyCdroms = new Set(
    (devices.disks ?? [])
      .filter((d) => d.cdrom !== undefined && (d.cdrom as { readonly?: boolean }).readonly !== false)
      .map((d) => d.name),
  );
  const notShared = (claim: string) =>
    `cannot migrate VMI: PVC ${claim} is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)`;
  for (const volume of vmi.spec.volumes ?? []) {
    const v = volume as {
      name: string;
      persistentVolumeClaim?: { claimName?: string };
      dataVolume?: { name?: string };
      hostDisk?: { shared?: boolean };
    };
    const info = statuses.get(v.name)?.persistentVolumeClaimInfo;
    if (v.persistentVolumeClaim || v.dataVolume) {
      const claim = v.persistentVolumeClaim
        ? (v.persistentVolumeClaim.claimName ?? '')
        : (v.dataVolume!.name ?? '');
      if (!info)
        return {
          blockMigration: true,
          error: `cannot migrate VMI: Unable to determine if PVC ${claim} is shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)`,
        };
      if (!hasSharedAccessMode(info.accessModes) && !migrated.has(v.name))
        return { blockMigration: true, error: notShared(claim) };
    } else if (v.hostDisk) {
      if (info) {
        // a PVC handed to the VMI as a hostDisk (a disk.img on a filesystem claim)
        if (!hasSharedAccessMode(info.accessModes) && !migrated.has(v.name))
          return { blockMigration: true, error: notShared(info.claimName ?? '') };
        continue;
      }
      if (v.hostDisk.shared !== true)
        return { blockMigration: true, error: 'cannot migrate VMI with non-shared HostDisk' };
    } else {
      if (filesystems.has(v.name) || readOnlyCdroms.has(v.name)) continue;
      blockMigration = true;
    }
  }
  return { blockMigration };
}

/**
 * Upstream's calculateLiveMigrationCondition: the LiveMigratable condition (False with upstream's reason when
 * something pins the VMI to this node; the disks are checked last) and the migration method the VMI's volumes
 * call for (status.migrationMethod: BlockMigration when a node-local disk must be copied, else LiveMigration).
 */
export function liveMigration(
  vmi: VirtualMachineInstance,
  now: string,
): { condition: Condition; method: MigrationMethod } {
  const volumes = checkVolumesForMigration(vmi);
  const method: MigrationMethod = volumes.blockMigration ? 'BlockMigration' : 'LiveMigration';
  const no = (reason: string, message: string) => ({
    condition: cond(COND.liveMigratable, 'False', now, reason, message),
    method,
  });
  const spec = vmi.spec;
  const podNets = new Set((spec.networks ?? []).filter((n) => n.pod).map((n) => n.name));
  const bridged = (spec.domain.devices?.interfaces ?? []).find(
    (i) => podNets.has(i.name) && (i as { bridge?: unknown }).bridge !== undefined,
  );
  if (bridged)
    return no(
      'InterfaceNotLiveMigratable',
      `cannot migrate VMI which does not use masquerade to connect to the pod network (interface ${bridged.name})`,
    );
  const devices = (spec.domain.devices ?? {}) as { hostDevices?: unknown[]; gpus?: unknown[] };
  if ((devices.hostDevices?.length ?? 0) > 0 || (devices.gpus?.length ?? 0) > 0)
    return no('HostDeviceNotLiveMigratable', 'VMI uses a PCI host devices');
  if ((devices as { filesystems?: unknown[] }).filesystems?.length)
    return no('VirtIOFSNotLiveMigratable', 'VMI uses virtiofs');
  if (volumes.error) return no('DisksNotLiveMigratable', volumes.error);
  return { condition: cond(COND.liveMigratable, 'True', now), method };
}

/** LiveMigratable: False with upstream's reason when something pins the VMI to this node (see liveMigration). */
export function liveMigratable(vmi: VirtualMachineInstance, now: string): Condition {
  return liveMigration(vmi, now).condition;
}

/** The guest agent channel of the domain is connected (libvirt's channel state). */
function agentConnected(domain: DomainModel | undefined): boolean {
  const channels =
    (domain?.spec as { devices?: { channels?: unknown[] } } | undefined)?.devices?.channels ?? [];
  return channels.some((c) => {
    const ch = c as { target?: { name?: string; state?: string } };
    return ch.target?.name === 'org.qemu.guest_agent.0' && ch.target.state === 'connected';
  });
}

const OS_INFO: Array<[string, string]> = [
  ['name', 'name'],
  ['kernelRelease', 'kernelRelease'],
  ['version', 'version'],
  ['prettyName', 'prettyName'],
  ['versionId', 'versionId'],
  ['kernelVersion', 'kernelVersion'],
  ['machine', 'machine'],
  ['id', 'id'],
];

/** The reasons of the Ready conditions the handler states (besides True): what it knows and the Pod does not. */
const HANDLER_READY_REASONS: readonly string[] = ['StartingUp', 'Paused', 'Succeeded', 'Failed'];

/**
 * Keeps lastTransitionTime of a condition whose status did not change. Ready is shared with virt-controller
 * (upstream's owner: it derives Ready from the launcher Pod, e.g. GuestNotRunning while Scheduled, PodTerminating
 * while the Pod goes down). The handler states it only while the domain runs (True, or False while QEMU starts or
 * the domain is paused) and when the VMI ends, and only over a Ready that is absent, True, GuestNotRunning or its
 * own: a False the controller set from the Pod (terminating, absent, not ready) stays until the controller changes
 * it. Either side overwriting the other's False
 * made the two rewrite the status in turn, tens of times a second, for as long as the Pod took to terminate.
 */
function mergeConditions(old: Condition[] | undefined, wanted: Condition[]): Condition[] {
  const oldReady = (old ?? []).find((c) => c.type === COND.ready);
  // GuestNotRunning is the controller's word for "the handler has not said Running yet": the handler answers it
  const mayStateReady =
    !oldReady ||
    oldReady.status === 'True' ||
    oldReady.reason === 'GuestNotRunning' ||
    HANDLER_READY_REASONS.includes(oldReady.reason ?? '');
  if (!mayStateReady) wanted = wanted.filter((c) => c.type !== COND.ready);
  const saysReady = wanted.some((c) => c.type === COND.ready);
  const keep = (old ?? []).filter((c) => !OWNED.includes(c.type) || (c.type === COND.ready && !saysReady));
  const out = [...keep];
  for (const w of wanted) {
    const prev = (old ?? []).find((c) => c.type === w.type);
    out.push(prev && prev.status === w.status ? { ...w, lastTransitionTime: prev.lastTransitionTime } : w);
  }
  return out;
}

/** The whole status the handler wants for this VMI, and the events its changes call for. */
export function computeStatus(input: StatusInput): StatusResult {
  const { vmi, domain, launcher, now } = input;
  const old = vmi.status ?? {};
  const status: VirtualMachineInstanceStatus = JSON.parse(
    JSON.stringify(old),
  ) as VirtualMachineInstanceStatus;
  const events: EventToRecord[] = [];
  // a VMI that ended keeps the status it ended with
  if (isFinal(old.phase)) return { status, events };
  // nothing to say during libvirt's StartingUp pause of a VMI not Running yet (see phaseFor)
  if (startingUp(domain) && old.phase !== 'Running') return { status, events };
  const { phase, reason } = phaseFor(vmi, domain, launcher);
  status.phase = phase;
  if (reason) status.reason = reason;
  else delete status.reason;
  status.nodeName = input.nodeName;
  if (input.launcherImageVersion) status.launcherContainerImageVersion = input.launcherImageVersion;

  if (phase !== old.phase) {
    const stamps = [...(old.phaseTransitionTimestamps ?? [])];
    stamps.push({ phase, phaseTransitionTimestamp: now });
    status.phaseTransitionTimestamps = stamps;
    if (phase === 'Running')
      events.push({ type: 'Normal', reason: 'Started', message: 'VirtualMachineInstance started.' });
    if (phase === 'Succeeded')
      events.push({
        type: 'Normal',
        reason: 'Stopped',
        message: 'The VirtualMachineInstance was shut down.',
      });
    if (phase === 'Failed')
      events.push({
        type: 'Warning',
        reason: 'Stopped',
        message: `The VirtualMachineInstance crashed (${reason ?? 'unknown'}).`,
      });
  }

  const wanted: Condition[] = [];
  if (phase === 'Running' && domain) {
    const paused = domain.status.status === 'Paused';
    wanted.push(
      paused
        ? domain.status.reason === 'StartingUp'
          ? cond(COND.ready, 'False', now, 'StartingUp', 'the domain is starting')
          : cond(COND.ready, 'False', now, 'Paused', 'the domain is paused')
        : cond(COND.ready, 'True', now),
    );
    if (paused) {
      const r = domain.status.reason;
      if (r === 'StartingUp') {
        /* libvirt's own pause while QEMU starts: not a Paused VMI */
      } else if (r === 'Migration') {
        // paused for a migration in mode Paused (the launcher's choice under TCG on QEMU < 9.0), on the source; a
        // domain QEMU paused at the end of a migration needs no condition (upstream's calculatePausedCondition)
        const ms = vmi.status?.migrationState;
        if (ms?.mode === 'Paused' && ms.sourceNode === vmi.status?.nodeName && !ms.completed)
          wanted.push(
            cond(
              COND.paused,
              'True',
              now,
              'PausedByMigrationMonitor',
              'VMI was paused by the migration monitor',
            ),
          );
      } else if (r === 'User')
        wanted.push(cond(COND.paused, 'True', now, 'PausedByUser', 'VMI was paused by user'));
      else if (r === 'IOError')
        wanted.push(
          cond(COND.paused, 'True', now, 'PausedIOError', 'VMI was paused, low-level IO error detected'),
        );
      else
        wanted.push(
          cond(
            COND.paused,
            'True',
            now,
            `Paused${r || 'Unknown'}`,
            `VMI was paused (${r || 'unknown reason'})`,
          ),
        );
    }
    if (agentConnected(domain)) wanted.push(cond(COND.agentConnected, 'True', now));
    const lm = liveMigration(vmi, now);
    wanted.push(lm.condition);
    status.migrationMethod = lm.method;
  } else if (isFinal(phase)) {
    wanted.push(
      cond(COND.ready, 'False', now, phase, `the VMI ${phase === 'Failed' ? 'failed' : 'shut down'}`),
    );
  }
  if (launcher.syncError && !isFinal(phase))
    wanted.push(
      cond(COND.synchronized, 'False', now, 'Synchronizing with the Domain failed.', launcher.syncError),
    );
  if (launcher.notReadyTimeout)
    wanted.push(cond(COND.synchronized, 'False', now, 'LauncherNotReady', launcher.notReadyTimeout));
  const conditions = mergeConditions(old.conditions, wanted);
  if (conditions.length > 0 || old.conditions) status.conditions = conditions;

  // what the domain says of its interfaces and guest OS waits for Running: a domain defined but not started yet (a
  // busy node shows it for seconds) would cost a write of its own
  if (domain && phase === 'Running') {
    const ifaces = domain.status.interfaces ?? [];
    const specIfaces = vmi.spec.domain.devices?.interfaces ?? [];
    if (specIfaces.length > 0 || ifaces.length > 0) {
      const pod = input.podInterface;
      status.interfaces = specIfaces.map((s) => {
        const d = ifaces.find((i) => i.name === s.name);
        // the pod interface: the Pod's addresses (masquerade: the guest's own are behind NAT, as upstream
        // reports them), else what the guest agent says
        const podIps = pod?.name === s.name && pod.addresses.length ? pod.addresses : undefined;
        const masq = podIps !== undefined && s.masquerade !== undefined;
        const ips = masq ? podIps : d?.ips?.length ? d.ips : podIps;
        const ip = masq ? podIps[0] : (d?.ip ?? podIps?.[0]);
        return {
          name: s.name,
          ...(d?.mac || s.macAddress ? { mac: d?.mac || s.macAddress } : {}),
          ...(ip ? { ipAddress: ip } : {}),
          ...(ips?.length ? { ipAddresses: ips } : {}),
          ...(d?.interfaceName ? { interfaceName: d.interfaceName } : {}),
          infoSource: d?.ip ? 'domain, guest-agent' : 'domain',
        };
      }) as VirtualMachineInstanceStatus['interfaces'];
    }
    const os = domain.status.osInfo as Record<string, string | undefined> | undefined;
    if (os && Object.values(os).some(Boolean)) {
      status.guestOSInfo = Object.fromEntries(
        OS_INFO.filter(([from]) => os[from]).map(([from, to]) => [to, os[from]]),
      );
    }
  }
  return { status, events };
}

/** Status equality that ignores key order (what decides whether the handler writes). */
export function sameStatus(a: unknown, b: unknown): boolean {
  return canonical(a) === canonical(b);
}
function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, val: unknown) =>
    val && typeof val === 'object' && !Array.isArray(val)
      ? Object.fromEntries(
          Object.entries(val as Record<string, unknown>).sort(([x], [y]) => x.localeCompare(y)),
        )
      : val,
  );
}
