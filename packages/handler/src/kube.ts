/**
 * The handler's writes to the Kubernetes API, plain JSON through controller-runtime's `KubeClient` (not
 * @kubernetes/client-node: importing it costs ~80 MiB of RSS and 67 MB of the image for models the handler never uses).
 */
import {
  EVENTS,
  KubeClient,
  VMIS,
  type ClusterAccess,
  type KubeObject,
  type Resource,
} from '@kubevirt-ts/controller-runtime';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import type { KubeWriter } from './controller.js';
import type { EventToRecord } from './status.js';
import { LABEL_NODE_NAME } from './migration-roles.js';

/** the VMI resource's group, version and plural (controller-runtime's VMIS, re-exported here) */
export { VMIS };
export const GROUP = VMIS.group;
export const VERSION = VMIS.version;
export const VMI_PLURAL = VMIS.plural;
/** upstream's label: the node a VMI runs on (the handler watches only its own) */
export const NODE_NAME_LABEL = LABEL_NODE_NAME;
export const SCHEDULABLE_LABEL = 'kubevirt.io/schedulable';
export const HEARTBEAT_ANNOTATION = 'kubevirt.io/heartbeat';
const NODES: Resource = { group: '', version: 'v1', plural: 'nodes', namespaced: false };

/** a core/v1 Event as the wire has it */
export interface EventObject extends KubeObject {
  involvedObject: Record<string, string | undefined>;
  type: string;
  reason: string;
  message: string;
  source: { component: string; host: string };
  firstTimestamp: string;
  lastTimestamp: string;
  count: number;
  reportingComponent: string;
  reportingInstance: string;
}

export function eventBody(
  obj: {
    kind?: string;
    apiVersion?: string;
    namespace?: string;
    name?: string;
    uid?: string;
    resourceVersion?: string;
  },
  e: EventToRecord,
  nodeName: string,
): EventObject {
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  return {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { generateName: `${obj.name ?? 'vmi'}.`, namespace: obj.namespace },
    involvedObject: {
      kind: obj.kind ?? 'VirtualMachineInstance',
      apiVersion: obj.apiVersion ?? `${GROUP}/${VERSION}`,
      namespace: obj.namespace,
      name: obj.name,
      uid: obj.uid,
      resourceVersion: obj.resourceVersion,
    },
    type: e.type,
    reason: e.reason,
    message: e.message,
    source: { component: 'virt-handler', host: nodeName },
    firstTimestamp: now,
    lastTimestamp: now,
    count: 1,
    reportingComponent: 'virt-handler',
    reportingInstance: nodeName,
  };
}

export class KubeApiWriter implements KubeWriter {
  readonly client: KubeClient;
  constructor(
    kc: ClusterAccess,
    private readonly nodeName: string,
  ) {
    this.client = new KubeClient(kc);
  }

  async updateStatus(vmi: VirtualMachineInstance, status: VirtualMachineInstance['status']): Promise<void> {
    // the VMI has no status subresource (upstream's CRD has none): the status is written with the object
    await this.client.update(VMIS, { ...vmi, status } as KubeObject);
  }

  async patchLabels(vmi: VirtualMachineInstance, labels: Record<string, string | null>): Promise<void> {
    await this.client.patch(
      VMIS,
      vmi.metadata.namespace,
      vmi.metadata.name!,
      { metadata: { labels } },
      'merge',
    );
  }

  async recordEvent(vmi: Pick<VirtualMachineInstance, 'metadata'>, e: EventToRecord): Promise<void> {
    const m = vmi.metadata;
    await this.client.create(
      EVENTS,
      m.namespace,
      eventBody(
        { namespace: m.namespace, name: m.name, uid: m.uid, resourceVersion: m.resourceVersion },
        e,
        this.nodeName,
      ),
    );
  }

  /** JSON merge patch of the node's labels/annotations. */
  async patchNode(labels: Record<string, string>, annotations: Record<string, string> = {}): Promise<void> {
    await this.client.patch(NODES, undefined, this.nodeName, { metadata: { labels, annotations } }, 'merge');
  }
}
