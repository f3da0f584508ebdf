/** The handler's writes to the Kubernetes API through @kubernetes/client-node (object-parameter calls). */
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type CoreV1Event,
  type KubeConfig,
} from '@kubernetes/client-node';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import type { KubeWriter } from './controller.js';
import type { EventToRecord } from './status.js';
import { LABEL_NODE_NAME } from './migration-roles.js';

export const GROUP = 'kubevirt.io';
export const VERSION = 'v1';
export const VMI_PLURAL = 'virtualmachineinstances';
/** upstream's label: the node a VMI runs on (the handler watches only its own) */
export const NODE_NAME_LABEL = LABEL_NODE_NAME;
export const SCHEDULABLE_LABEL = 'kubevirt.io/schedulable';
export const HEARTBEAT_ANNOTATION = 'kubevirt.io/heartbeat';

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
): CoreV1Event {
  const now = new Date();
  return {
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

export class ClientNodeWriter implements KubeWriter {
  private readonly custom: CustomObjectsApi;
  private readonly core: CoreV1Api;
  constructor(
    kc: KubeConfig,
    private readonly nodeName: string,
  ) {
    this.custom = kc.makeApiClient(CustomObjectsApi);
    this.core = kc.makeApiClient(CoreV1Api);
  }

  async updateStatus(vmi: VirtualMachineInstance, status: VirtualMachineInstance['status']): Promise<void> {
    await this.custom.replaceNamespacedCustomObjectStatus({
      group: GROUP,
      version: VERSION,
      namespace: vmi.metadata.namespace!,
      plural: VMI_PLURAL,
      name: vmi.metadata.name!,
      body: { ...vmi, status },
    });
  }

  async patchLabels(vmi: VirtualMachineInstance, labels: Record<string, string | null>): Promise<void> {
    await this.custom.patchNamespacedCustomObject(
      {
        group: GROUP,
        version: VERSION,
        namespace: vmi.metadata.namespace!,
        plural: VMI_PLURAL,
        name: vmi.metadata.name!,
        body: { metadata: { labels } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }

  async recordEvent(vmi: Pick<VirtualMachineInstance, 'metadata'>, e: EventToRecord): Promise<void> {
    const m = vmi.metadata;
    await this.core.createNamespacedEvent({
      namespace: m.namespace!,
      body: eventBody(
        { namespace: m.namespace, name: m.name, uid: m.uid, resourceVersion: m.resourceVersion },
        e,
        this.nodeName,
      ),
    });
  }

  /** JSON merge patch of the node's labels/annotations. */
  async patchNode(labels: Record<string, string>, annotations: Record<string, string> = {}): Promise<void> {
    await this.core.patchNode(
      { name: this.nodeName, body: { metadata: { labels, annotations } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }
}
