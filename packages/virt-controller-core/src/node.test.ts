// The node controller's decisions (no API server: heartbeatLeft, lostLeft, stuckVmis, podsOnLostNode, isPodAlive
// on plain objects); the writes are in events-nodes.apiserver.test.ts and node-loss.apiserver.test.ts.
import type { Vmi } from './common.js';
import type { ControllerContext, Pod } from './context.js';
import { HEARTBEAT_ANNOTATION, NodeController, isPodAlive, type Node } from './node.js';

const NOW = Date.parse('2030-01-01T12:00:00Z');
const TIMEOUT = 60_000;
const ago = (ms: number) => new Date(NOW - ms).toISOString().replace(/\.\d+Z$/, 'Z');

function node(name: string, heartbeatAgoMs?: number, ready?: { status: string; agoMs: number }): Node {
  return {
    metadata: {
      name,
      annotations: heartbeatAgoMs === undefined ? {} : { [HEARTBEAT_ANNOTATION]: ago(heartbeatAgoMs) },
    },
    status: ready
      ? { conditions: [{ type: 'Ready', status: ready.status, lastTransitionTime: ago(ready.agoMs) }] }
      : undefined,
  };
}
const vmi = (name: string, nodeName: string, phase = 'Running', extra: Partial<Vmi['metadata']> = {}): Vmi =>
  ({
    metadata: { name, namespace: 'ns', uid: `uid-${name}`, ...extra },
    spec: {},
    status: { phase, nodeName },
  }) as unknown as Vmi;
const pod = (
  name: string,
  vmiUid: string,
  nodeName: string,
  status: Pod['status'] = { phase: 'Running' },
): Pod =>
  ({
    metadata: { name, namespace: 'ns', uid: `pod-${name}`, labels: { 'kubevirt.io/created-by': vmiUid } },
    spec: { nodeName },
    status,
  }) as Pod;

function controller(nodes: Node[], vmis: Vmi[], pods: Pod[]): NodeController {
  const ctx = {
    nodes: { get: (_: undefined, name: string) => nodes.find((n) => n.metadata?.name === name) },
    vmis: { list: () => vmis },
    podsOfVmi: (uid: string) => pods.filter((p) => p.metadata?.labels?.['kubevirt.io/created-by'] === uid),
  } as unknown as ControllerContext & { nodes: { get(ns: undefined, name: string): Node | undefined } };
  return new NodeController(ctx, { heartbeatTimeoutMs: TIMEOUT, now: () => NOW });
}

describe('heartbeatLeft: is virt-handler unresponsive?', () => {
  const c = controller([], [], []);
  it('a heartbeat younger than the timeout: time left', () => {
    expect(c.heartbeatLeft(node('n', 10_000))).toBe(TIMEOUT - 10_000);
  });
  it('a heartbeat older than the timeout: unresponsive', () => {
    expect(c.heartbeatLeft(node('n', TIMEOUT + 1000))).toBeLessThanOrEqual(0);
  });
  it('no heartbeat annotation (no handler ever ran there): never unresponsive', () => {
    expect(c.heartbeatLeft(node('n'))).toBe(Infinity);
  });
  it('an unreadable heartbeat: not acted on', () => {
    expect(
      c.heartbeatLeft({ metadata: { name: 'n', annotations: { [HEARTBEAT_ANNOTATION]: 'soon' } } }),
    ).toBe(Infinity);
  });
  it('a node that is gone: unresponsive', () => {
    expect(c.heartbeatLeft(undefined)).toBe(0);
  });
});

describe('lostLeft: is the whole node gone (kubelet unreachable too)?', () => {
  const c = controller([], [], []);
  it('Ready Unknown for longer than the timeout: lost', () => {
    expect(c.lostLeft(node('n', 0, { status: 'Unknown', agoMs: TIMEOUT + 1 }))).toBeLessThanOrEqual(0);
  });
  it('Ready Unknown only recently: time left until lost', () => {
    expect(c.lostLeft(node('n', 0, { status: 'Unknown', agoMs: 15_000 }))).toBe(TIMEOUT - 15_000);
  });
  it('Ready False (a kubelet that still reports, e.g. its network plugin is down): never lost', () => {
    expect(c.lostLeft(node('n', 0, { status: 'False', agoMs: 10 * TIMEOUT }))).toBe(Infinity);
  });
  it('Ready True: not lost', () => {
    expect(c.lostLeft(node('n', 0, { status: 'True', agoMs: 10 * TIMEOUT }))).toBe(Infinity);
  });
  it('no Ready condition (nothing to tell): not lost', () => {
    expect(c.lostLeft(node('n', 0))).toBe(Infinity);
  });
  it('no Node object: not lost (nothing tells that its Pods stopped; its VMIs fail once their Pods are down)', () => {
    expect(c.lostLeft(undefined)).toBe(Infinity);
  });
});

describe('isPodAlive', () => {
  it('Running, Pending and Terminating Pods are alive; Succeeded, Failed, all containers terminated are not', () => {
    expect(isPodAlive(pod('a', 'u', 'n', { phase: 'Running' }))).toBe(true);
    expect(isPodAlive(pod('a', 'u', 'n', { phase: 'Pending' }))).toBe(true);
    expect(isPodAlive(pod('a', 'u', 'n', { phase: 'Failed' }))).toBe(false);
    expect(isPodAlive(pod('a', 'u', 'n', { phase: 'Succeeded' }))).toBe(false);
    expect(
      isPodAlive(
        pod('a', 'u', 'n', {
          phase: 'Running',
          containerStatuses: [
            { name: 'compute', state: { terminated: { exitCode: 0 } } },
            { name: 'disk', state: { terminated: { exitCode: 137 } } },
          ],
        } as Pod['status']),
      ),
    ).toBe(false);
    expect(
      isPodAlive(
        pod('a', 'u', 'n', {
          phase: 'Running',
          containerStatuses: [
            { name: 'compute', state: { running: {} } },
            { name: 'disk', state: { terminated: { exitCode: 0 } } },
          ],
        } as Pod['status']),
      ),
    ).toBe(true);
  });
});

describe('stuckVmis and podsOnLostNode: which VMIs fail, which Pods are force-deleted', () => {
  const vmis = [
    vmi('alive-pod', 'n1'),
    vmi('dead-pod', 'n1'),
    vmi('no-pod', 'n1', 'Scheduled'),
    vmi('elsewhere', 'n2'),
    vmi('done', 'n1', 'Failed'),
    vmi('deleting', 'n1', 'Running', { deletionTimestamp: ago(1000) }),
  ];
  const pods = [
    pod('alive-pod', 'uid-alive-pod', 'n1'),
    pod('dead-pod', 'uid-dead-pod', 'n1', { phase: 'Failed' }),
    pod('elsewhere', 'uid-elsewhere', 'n2'),
    pod('done', 'uid-done', 'n1'),
    pod('deleting', 'uid-deleting', 'n1'),
  ];
  const c = controller([], vmis, pods);
  const names = (vs: Array<{ metadata?: { name?: string } }>) => vs.map((v) => v.metadata?.name).sort();

  it('handler unresponsive only: the active VMIs on the node without a live Pod there', () => {
    expect(names(c.stuckVmis('n1'))).toEqual(['dead-pod', 'no-pod']);
  });
  it('node lost: every active VMI on the node, live-looking Pod or not; none elsewhere, none final', () => {
    expect(names(c.stuckVmis('n1', true))).toEqual(['alive-pod', 'dead-pod', 'deleting', 'no-pod']);
  });
  it('force-deleted on a lost node: the Pods there of final, deleting or just-failed VMIs only', () => {
    expect(names(c.podsOnLostNode('n1'))).toEqual(['deleting', 'done']);
    expect(names(c.podsOnLostNode('n1', new Set(['uid-alive-pod'])))).toEqual([
      'alive-pod',
      'deleting',
      'done',
    ]);
    expect(names(c.podsOnLostNode('n2'))).toEqual([]);
  });
});
