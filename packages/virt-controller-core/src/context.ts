// What the controllers share: the client, the informers' caches, the queues and the expectations.
import type {
  ControllerExpectations,
  EventRecorder,
  Informer,
  KubeClient,
  KubeObject,
  WorkQueue,
} from '@kubevirt-ts/controller-runtime';
import type { DefaultsOptions } from '@kubevirt-ts/api';
import type { Logger } from '@kubevirt-ts/log';
import type { RendererConfig } from '@kubevirt-ts/renderer';
import type { Vm, Vmi } from './common.js';
import type { ClaimLookup, DataVolume, Pvc } from './claims.js';

export interface PodContainerStatus {
  name: string;
  ready?: boolean;
  state?: {
    running?: Record<string, unknown>;
    waiting?: { reason?: string; message?: string };
    terminated?: { exitCode?: number; reason?: string; message?: string };
  };
}

/** a launcher Pod as the controllers' cache keeps it (metadata, node, status; see manager.ts) */
export interface Pod extends KubeObject {
  spec?: { nodeName?: string; containers?: { name: string; image?: string }[] };
  status?: {
    phase?: string;
    qosClass?: string;
    reason?: string;
    message?: string;
    conditions?: {
      type: string;
      status: string;
      reason?: string;
      message?: string;
      lastProbeTime?: string | null;
      lastTransitionTime?: string | null;
    }[];
    containerStatuses?: PodContainerStatus[];
    initContainerStatuses?: PodContainerStatus[];
  };
}

export interface ControllerContext {
  client: KubeClient;
  /** Kubernetes Events (their own client: events are not state writes) */
  recorder: EventRecorder;
  log: Logger;
  vms: Informer<Vm>;
  vmis: Informer<Vmi>;
  pods: Informer<Pod>;
  /** every PersistentVolumeClaim (the fields claims.ts's trimPvc keeps): what VMIs' volumes use */
  pvcs: Informer<Pvc>;
  /** CDI's DataVolumes (empty while CDI is not installed; listed again until it is) */
  dataVolumes: Informer<DataVolume>;
  /** the claims from `pvcs` and DataVolumes from `dataVolumes`; StorageClasses read on demand */
  claimLookup: ClaimLookup;
  /** launcher Pods of a VMI, by the VMI's uid (the kubevirt.io/created-by label) */
  podsOfVmi(uid: string): Pod[];
  vmQueue: WorkQueue<string>;
  vmiQueue: WorkQueue<string>;
  /** VM key -> VMI creations/deletions */
  vmExpectations: ControllerExpectations;
  /** VMI key -> launcher Pod creations/deletions */
  podExpectations: ControllerExpectations;
  /** VMI key -> the controller's own VMI writes, until the informer shows them */
  vmiExpectations: ControllerExpectations;
  /** the cluster config for the renderer; undefined while the config object is missing */
  rendererConfig(): RendererConfig | undefined;
  /** the defaults the KubeVirt CR's configuration gives new VMIs (the library's when no CR is read) */
  clusterDefaults(): DefaultsOptions;
}
