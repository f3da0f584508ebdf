// What each subresource does, with upstream virt-api's rules, bodies, status codes and messages
// (pkg/virt-api/rest/subresource.go at v1.1.0): start/stop/restart change the VM's run strategy or
// queue state-change requests in its status, migrate creates a VirtualMachineInstanceMigration, and
// the VMI verbs are validated here and then forwarded to the VMI's virt-handler.
import {
  KubeApiError,
  KubeClient,
  isNotFound,
  resourcePath,
  PODS,
  VMIMS,
  VMIS,
  VMS,
  type Resource,
} from '@kubevirt-ts/controller-runtime';
import type { Duplex } from 'node:stream';
import { vmRunStrategy, type VirtualMachine, type VirtualMachineInstance } from '@kubevirt-ts/api';
import {
  StatusError,
  badRequest,
  conflict,
  forbidden,
  internalError,
  notFound,
  serviceUnavailable,
} from './status.js';

export type VmVerb = 'start' | 'stop' | 'restart' | 'migrate';
export type VmiVerb =
  'pause' | 'unpause' | 'softreboot' | 'freeze' | 'unfreeze' | 'guestosinfo' | 'userlist' | 'filesystemlist';

/** the websocket streams (upstream: console, vnc) */
export type StreamKind = 'console' | 'vnc';
export const STREAM_KINDS: readonly StreamKind[] = ['console', 'vnc'];

/** The client's websocket handshake, passed on to virt-handler (which completes it). */
export interface StreamRequest {
  /** Sec-WebSocket-Key, -Version, -Protocol, -Extensions as the client sent them */
  headers: Record<string, string>;
  /** the query string ('' or `?preserveSession=true`) */
  search: string;
}

/** A websocket to virt-handler whose handshake succeeded: relay `responseHead` to the client, then the bytes. */
export interface UpgradedStream {
  socket: Duplex;
  /** bytes the handler sent after its 101 answer */
  head: Buffer;
  /** the handler's answer: status line and headers, ending in an empty line */
  responseHead: string;
}

/** How VMI verbs reach the virt-handler of the VMI's node (upstream: https://<handler>:8186/v1/namespaces/NS/virtualmachineinstances/NAME/VERB, mutual TLS). */
export interface NodeConnector {
  put(vmi: VirtualMachineInstance, verb: VmiVerb, body: string): Promise<void>;
  get(vmi: VirtualMachineInstance, verb: VmiVerb): Promise<unknown>;
  /** console/vnc: opens the websocket on virt-handler with the client's handshake */
  stream?(vmi: VirtualMachineInstance, kind: StreamKind, req: StreamRequest): Promise<UpgradedStream>;
}

/** The default: virt-handler has no subresource endpoint yet, so node verbs are refused, naming why. */
export const NODE_CONNECTOR_MISSING: NodeConnector = {
  put(vmi, verb) {
    throw missing(vmi, verb);
  },
  get(vmi, verb) {
    throw missing(vmi, verb);
  },
};

function missing(vmi: VirtualMachineInstance, verb: VmiVerb | StreamKind): StatusError {
  return serviceUnavailable(
    `${verb} of virtualmachineinstance ${vmi.metadata?.namespace}/${vmi.metadata?.name} needs its virt-handler ` +
      `(node ${vmi.status?.nodeName ?? 'unknown'}), and forwarding subresources to virt-handler is not implemented ` +
      `in kubevirt-ts yet: nothing was changed`,
  );
}

/** the API resources the verbs read and write (controller-runtime's) */
export { VMS, VMIS, VMIMS, PODS };

const VM = 'virtualmachine';
const VMI = 'virtualmachineinstance';
const JSONPATCH_TEST_ERR = 'jsonpatch test operation does not apply';

type StateChange = { action: 'Start' | 'Stop'; uid?: string; data?: Record<string, string> };

interface Options {
  dryRun?: string[];
  paused?: boolean;
  gracePeriod?: number;
  gracePeriodSeconds?: number;
}

/** Decodes an options body (empty is fine); a malformed one is upstream's 400. */
function parseOptions(body: string): Options {
  if (!body.trim()) return {};
  try {
    const v = JSON.parse(body) as unknown;
    if (v === null || typeof v !== 'object' || Array.isArray(v))
      throw new Error('the body is not a JSON object');
    const o = v as Record<string, unknown>;
    for (const k of ['gracePeriod', 'gracePeriodSeconds'] as const)
      if (o[k] !== undefined && o[k] !== null && !Number.isInteger(o[k]))
        throw new Error(`${k}: must be an integer, got ${JSON.stringify(o[k])}`);
    if (o['paused'] !== undefined && typeof o['paused'] !== 'boolean')
      throw new Error(`paused: must be a boolean, got ${JSON.stringify(o['paused'])}`);
    if (
      o['dryRun'] !== undefined &&
      !(Array.isArray(o['dryRun']) && o['dryRun'].every((x) => typeof x === 'string'))
    )
      throw new Error(`dryRun: must be a list of strings, got ${JSON.stringify(o['dryRun'])}`);
    return o as Options;
  } catch (e) {
    throw badRequest(`Can not unmarshal Request body to struct, error: ${(e as Error).message}`);
  }
}

const dryRunQuery = (o: Options): string => (o.dryRun?.includes('All') ? '?dryRun=All' : '');
const isFinal = (vmi: VirtualMachineInstance): boolean =>
  vmi.status?.phase === 'Succeeded' || vmi.status?.phase === 'Failed';
const hasCondition = (vmi: VirtualMachineInstance, type: string, status?: string): boolean =>
  (vmi.status?.conditions ?? []).some(
    (c) => c.type === type && (status === undefined || c.status === status),
  );

/** An error from the API server turned into the answer upstream gives for it. */
function asStatus(kind: string, name: string, e: unknown): StatusError {
  if (e instanceof StatusError) return e;
  const msg = e instanceof Error ? e.message : String(e);
  if (msg.includes(JSONPATCH_TEST_ERR)) return conflict(kind, name, msg);
  return internalError(msg);
}

export class Subresources {
  constructor(
    private readonly client: KubeClient,
    private readonly node: NodeConnector = NODE_CONNECTOR_MISSING,
  ) {}

  private async getVm(namespace: string, name: string): Promise<VirtualMachine> {
    try {
      return await this.client.get<VirtualMachine>(VMS, namespace, name);
    } catch (e) {
      if (isNotFound(e)) throw notFound(VM, name);
      throw internalError(`unable to retrieve vm [${name}]: ${(e as Error).message}`);
    }
  }
  private async getVmi(namespace: string, name: string): Promise<VirtualMachineInstance> {
    try {
      return await this.client.get<VirtualMachineInstance>(VMIS, namespace, name);
    } catch (e) {
      if (isNotFound(e)) throw notFound(VMI, name);
      throw internalError(`unable to retrieve vmi [${name}]: ${(e as Error).message}`);
    }
  }
  private async findVmi(namespace: string, name: string): Promise<VirtualMachineInstance | undefined> {
    try {
      return await this.client.get<VirtualMachineInstance>(VMIS, namespace, name);
    } catch (e) {
      if (isNotFound(e)) return undefined;
      throw internalError((e as Error).message);
    }
  }

  /** JSON patch of the VM's status.stateChangeRequests, guarded by a test of the old value (upstream's). */
  private async patchStateChanges(vm: VirtualMachine, changes: StateChange[], o: Options): Promise<void> {
    const ops: unknown[] = [];
    const st = vm.status as (Record<string, unknown> & { stateChangeRequests?: unknown[] }) | undefined;
    if (!st || Object.keys(st).length === 0) {
      ops.push({ op: 'add', path: '/status', value: { stateChangeRequests: changes } });
    } else {
      const existing = st.stateChangeRequests ?? [];
      // a single stop request replaces what is queued; anything else waits for the queue to drain
      const onlyStop = changes.length === 1 && changes[0]!.action === 'Stop';
      if (existing.length > 0 && !onlyStop)
        throw internalError('unable to complete request: stop/start already underway');
      ops.push({ op: 'test', path: '/status/stateChangeRequests', value: st.stateChangeRequests ?? null });
      ops.push({
        op: existing.length > 0 ? 'replace' : 'add',
        path: '/status/stateChangeRequests',
        value: changes,
      });
    }
    if (st?.['startFailure'] !== undefined) ops.push({ op: 'remove', path: '/status/startFailure' });
    const m = vm.metadata!;
    await this.client.request(
      'PATCH',
      resourcePath(VMS, m.namespace, m.name, 'status') + dryRunQuery(o),
      ops,
      'application/json-patch+json',
    );
  }

  private async mergePatch(r: Resource, namespace: string, name: string, patch: unknown, o: Options) {
    await this.client.request(
      'PATCH',
      resourcePath(r, namespace, name) + dryRunQuery(o),
      patch,
      'application/merge-patch+json',
    );
  }

  /** spec.runStrategy when the VM uses it, else spec.running (upstream's getRunningJson) */
  private runningPatch(vm: VirtualMachine, running: boolean): unknown {
    return vm.spec?.runStrategy !== undefined
      ? { spec: { runStrategy: running ? 'Always' : 'Halted' } }
      : { spec: { running } };
  }

  async vm(
    verb: VmVerb,
    namespace: string,
    name: string,
    body: string,
  ): Promise<{ code: number; body?: unknown }> {
    switch (verb) {
      case 'start':
        return this.start(namespace, name, body);
      case 'stop':
        return this.stop(namespace, name, body);
      case 'restart':
        return this.restart(namespace, name, body);
      case 'migrate':
        return this.migrate(namespace, name, body);
    }
  }

  private async start(namespace: string, name: string, body: string) {
    const vm = await this.getVm(namespace, name);
    const vmi = await this.findVmi(namespace, name);
    if (vmi && !isFinal(vmi) && vmi.status?.phase && vmi.status.phase !== 'Unknown')
      throw conflict(VM, name, 'VM is already running');
    const o = parseOptions(body);
    const data: Record<string, string> = o.paused ? { paused: 'true' } : {};
    const strategy = vmRunStrategy(vm);
    try {
      switch (strategy) {
        case 'Halted':
          if (o.paused && vm.spec?.template?.spec?.startStrategy !== 'Paused')
            await this.patchStateChanges(vm, [{ action: 'Start', data }], o);
          else await this.mergePatch(VMS, namespace, name, this.runningPatch(vm, true), o);
          break;
        case 'RerunOnFailure':
        case 'Manual': {
          if (strategy === 'RerunOnFailure' && vmi?.status?.phase === 'Failed')
            throw conflict(VM, name, 'RerunOnFailure does not support starting VM from failed state');
          const restart =
            vmi !== undefined &&
            ((strategy === 'RerunOnFailure' && vmi.status?.phase === 'Succeeded') ||
              (strategy === 'Manual' && isFinal(vmi)));
          await this.patchStateChanges(
            vm,
            restart
              ? [
                  { action: 'Stop', uid: vmi!.metadata?.uid },
                  { action: 'Start', data },
                ]
              : [{ action: 'Start', data }],
            o,
          );
          break;
        }
        default:
          throw conflict(VM, name, `${strategy} does not support manual start requests`);
      }
    } catch (e) {
      throw asStatus(VM, name, e);
    }
    return { code: 202 };
  }

  private async stop(namespace: string, name: string, body: string) {
    const o = parseOptions(body);
    const vm = await this.getVm(namespace, name);
    const strategy = vmRunStrategy(vm);
    const vmi = await this.findVmi(namespace, name);
    const live = vmi !== undefined && !isFinal(vmi);
    let oldGrace = 0;
    try {
      if (live && o.gracePeriod !== undefined && o.gracePeriod !== null) {
        oldGrace = vmi.spec?.terminationGracePeriodSeconds ?? 0;
        await this.mergePatch(
          VMIS,
          namespace,
          name,
          { spec: { terminationGracePeriodSeconds: o.gracePeriod } },
          o,
        );
      }
      switch (strategy) {
        case 'Halted':
          if (!live) throw conflict(VM, name, 'VM is not running');
          if (
            o.gracePeriod === undefined ||
            o.gracePeriod === null ||
            (vmi.spec?.terminationGracePeriodSeconds !== undefined && o.gracePeriod >= oldGrace)
          )
            throw conflict(VM, name, 'Halted only supports manual stop requests with a shorter graceperiod');
          await this.patchStateChanges(vm, [{ action: 'Stop', uid: vmi.metadata?.uid }], o);
          break;
        // a stop request for the VMI: the VM keeps its run strategy (RerunOnFailure does not rerun it)
        case 'Manual':
        case 'RerunOnFailure':
          if (!live) throw conflict(VM, name, 'VM is not running');
          await this.patchStateChanges(vm, [{ action: 'Stop', uid: vmi.metadata?.uid }], o);
          break;
        default: // Always, Once: the VM becomes Halted
          await this.mergePatch(VMS, namespace, name, this.runningPatch(vm, false), o);
      }
    } catch (e) {
      throw asStatus(VM, name, e);
    }
    return { code: 202 };
  }

  private async restart(namespace: string, name: string, body: string) {
    const o = parseOptions(body);
    if (o.gracePeriodSeconds !== undefined && o.gracePeriodSeconds !== null) {
      if (o.gracePeriodSeconds > 0)
        throw badRequest('For force restart, only gracePeriod=0 is supported for now');
      if (o.gracePeriodSeconds < 0) throw badRequest('gracePeriod has to be greater or equal to 0');
    }
    const vm = await this.getVm(namespace, name);
    const strategy = vmRunStrategy(vm);
    if (strategy === 'Halted' || strategy === 'Once')
      throw conflict(VM, name, `RunStategy ${strategy} does not support manual restart requests`);
    const vmi = await this.findVmi(namespace, name);
    if (!vmi) throw conflict(VM, name, 'VM is not running: Halted');
    try {
      await this.patchStateChanges(
        vm,
        [
          { action: 'Stop', uid: vmi.metadata?.uid },
          { action: 'Start', data: {} },
        ],
        o,
      );
      // force restart: delete the launcher Pod with the shortest safe grace period
      if (o.gracePeriodSeconds === 0 && !o.dryRun?.includes('All')) {
        const pods = await this.client.list<{ metadata?: { name?: string } }>(PODS, namespace, {
          labelSelector: `kubevirt.io=virt-launcher,kubevirt.io/created-by=${vmi.metadata?.uid}`,
          fieldSelector: 'status.phase==Running',
        });
        const target = vmi.status?.migrationState?.completed
          ? (pods.items.find((p) => p.metadata?.name === vmi.status?.migrationState?.targetPod) ??
            pods.items[0])
          : pods.items[0];
        if (target?.metadata?.name) {
          try {
            await this.client.delete(PODS, namespace, target.metadata.name, { gracePeriodSeconds: 1 });
          } catch (e) {
            if (!isNotFound(e)) throw e;
          }
        }
      }
    } catch (e) {
      throw asStatus(VM, name, e);
    }
    return { code: 202 };
  }

  private async migrate(namespace: string, name: string, body: string) {
    const o = parseOptions(body);
    await this.getVm(namespace, name);
    const vmi = await this.getVmi(namespace, name);
    if (vmi.status?.phase !== 'Running') throw conflict(VM, name, 'VM is not running');
    try {
      await this.client.request('POST', resourcePath(VMIMS, namespace) + dryRunQuery(o), {
        apiVersion: 'kubevirt.io/v1',
        kind: 'VirtualMachineInstanceMigration',
        metadata: { generateName: 'kubevirt-migrate-vm-' },
        spec: { vmiName: name },
      });
    } catch (e) {
      throw internalError(e instanceof KubeApiError ? e.message : String(e));
    }
    return { code: 202 };
  }

  /** Validates a VMI verb as upstream does, then forwards it to the VMI's virt-handler. */
  /**
   * console / vnc: validated as upstream's virt-api does (the device is there, the VMI is running), then
   * the websocket is opened on the VMI's virt-handler with the client's handshake.
   */
  async stream(
    kind: StreamKind,
    namespace: string,
    name: string,
    req: StreamRequest,
  ): Promise<UpgradedStream> {
    const vmi = await this.getVmi(namespace, name);
    const devices = vmi.spec?.domain?.devices;
    if (kind === 'console') {
      if (devices?.autoattachSerialConsole === false) throw badRequest('No serial consoles are present.');
      if (vmi.status?.phase === 'Failed') throw conflict(VMI, name, 'VMI is in failed status');
    } else if (devices?.autoattachGraphicsDevice === false)
      throw badRequest('No graphics devices are present.');
    if (vmi.status?.phase !== 'Running') throw badRequest('VMI is not running');
    if (!this.node.stream) throw missing(vmi, kind);
    return this.node.stream(vmi, kind, req);
  }

  async vmi(
    verb: VmiVerb,
    namespace: string,
    name: string,
    body: string,
  ): Promise<{ code: number; body?: unknown }> {
    const o = verb === 'pause' || verb === 'unpause' ? parseOptions(body) : {};
    const vmi = await this.getVmi(namespace, name);
    const running = vmi.status?.phase === 'Running';
    const paused = hasCondition(vmi, 'Paused');
    switch (verb) {
      case 'pause':
        if (!running) throw conflict(VMI, name, 'VM is not running');
        if (vmi.spec?.livenessProbe)
          throw forbidden(VMI, name, 'Pausing VMIs with LivenessProbe is currently not supported');
        if (paused) throw conflict(VMI, name, 'VMI is already paused');
        break;
      case 'unpause':
        if (!running) throw conflict(VMI, name, 'VMI is not running');
        if (!paused) throw conflict(VMI, name, 'VMI is not paused');
        break;
      case 'freeze':
      case 'softreboot':
        if (!running) throw conflict(VMI, name, 'VM is not running');
        if (verb === 'softreboot') {
          if (hasCondition(vmi, 'Paused', 'True')) throw conflict(VMI, name, 'VMI is paused');
          if (!hasCondition(vmi, 'AgentConnected') && vmi.spec?.domain?.features?.acpi?.enabled === false)
            throw conflict(VMI, name, 'VMI neither have the agent connected nor the ACPI feature enabled');
        }
        break;
      case 'unfreeze':
        if (!running) throw conflict(VMI, name, 'VMI is not running');
        break;
      case 'guestosinfo':
      case 'userlist':
      case 'filesystemlist':
        if (!running) throw conflict(VMI, name, 'VMI is not running');
        if (!hasCondition(vmi, 'AgentConnected'))
          throw conflict(VMI, name, 'VMI does not have guest agent connected');
        return { code: 200, body: await this.node.get(vmi, verb) };
    }
    if (o.dryRun?.includes('All')) return { code: 200 };
    await this.node.put(vmi, verb, body);
    return { code: 200 };
  }
}
