// Kubernetes events from the launcher (HandleK8sEvent's eventJSON): a core/v1 Event as Go's encoding/json
// writes upstream's k8sv1.Event{InvolvedObject, Type, Reason, Message} (upstream's notify client fills
// only these; Go writes the rest as zero values).

/** What a launcher reports (upstream's SendK8sEvent(vmi, severity, reason, message)). */
export interface K8sEventModel {
  type: 'Normal' | 'Warning' | string;
  reason: string;
  message: string;
  /** the VMI the event is about */
  involvedObject?: { kind?: string; namespace?: string; name?: string; uid?: string; apiVersion?: string };
}

/** Our event -> core/v1 Event JSON as upstream's launcher sends it. */
export function toUpstreamK8sEvent(e: K8sEventModel): Record<string, unknown> {
  const io = e.involvedObject ?? {};
  const ref: Record<string, string> = {};
  // ObjectReference fields in Go's order, all omitempty
  for (const k of ['kind', 'namespace', 'name', 'uid', 'apiVersion'] as const) if (io[k]) ref[k] = io[k]!;
  return {
    metadata: { creationTimestamp: null },
    involvedObject: ref,
    reason: e.reason,
    message: e.message,
    source: {},
    firstTimestamp: null,
    lastTimestamp: null,
    type: e.type,
    eventTime: null,
    reportingComponent: '',
    reportingInstance: '',
  };
}

/** core/v1 Event JSON (upstream's or ours) -> our event; throws naming the missing field. */
export function fromUpstreamK8sEvent(json: unknown): K8sEventModel {
  const o = (typeof json === 'object' && json !== null ? json : {}) as Record<string, unknown>;
  const s = (k: string) => (typeof o[k] === 'string' ? (o[k] as string) : '');
  if (!s('reason')) throw new Error('eventJSON: reason is missing');
  const e: K8sEventModel = { type: s('type') || 'Normal', reason: s('reason'), message: s('message') };
  const io = o['involvedObject'];
  if (typeof io === 'object' && io !== null) {
    const r = io as Record<string, unknown>;
    const ref: NonNullable<K8sEventModel['involvedObject']> = {};
    for (const k of ['kind', 'namespace', 'name', 'uid', 'apiVersion'] as const)
      if (typeof r[k] === 'string' && r[k]) ref[k] = r[k] as string;
    if (Object.keys(ref).length) e.involvedObject = ref;
  }
  return e;
}
