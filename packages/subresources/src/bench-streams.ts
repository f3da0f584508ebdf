// Benchmark: console websockets through a real kube-apiserver's aggregation layer (testenv) -> this package's server
// -> mutual TLS -> virt-handler's endpoint (@kubevirt-ts/handler) -> a unix socket standing in for QEMU's serial
// port. Prints the time to open a console (handshake to the first byte from the "guest"), p50/p95/max over N, and the
// throughput of a bulk transfer each way. Usage: npm run bench:console -- [N] [MiB]
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { CmdClient } from '@kubevirt-ts/cmd-protocol';
import { KubeClient } from '@kubevirt-ts/controller-runtime';
import { startHandlerEndpoint } from '@kubevirt-ts/handler';
import { startTestEnv } from '@kubevirt-ts/testenv';
import { issueHandlerTls, startAggregatedTestApi } from './testing.js';
import { VMIS } from './verbs.js';

const n = Number(process.argv[2] ?? 50);
const mib = Number(process.argv[3] ?? 64);
const dir = await mkdtemp(join(tmpdir(), 'kvts-bench-streams-'));
const env = await startTestEnv();
const servers: { close(): void }[] = [];
try {
  const tls = await issueHandlerTls(dir);
  const { controllerCA, serving } = tls;
  const admin = new KubeClient(env.kubeConfig());
  const privateDir = join(dir, 'private');
  const running: { vmi?: VirtualMachineInstance } = {};
  const nowhere = new CmdClient(join(dir, 'none'));
  const endpoint = await startHandlerEndpoint({
    ...serving,
    clientCA: controllerCA,
    host: '127.0.0.1',
    port: 0,
    launcherUid: process.getuid!(),
    lookup: () => (running.vmi ? { vmi: running.vmi, client: nowhere, privateDir } : undefined),
  });
  servers.push({ close: () => void endpoint.close() });
  const api = await startAggregatedTestApi(env, {
    handler: { tls, port: endpoint.port },
  });
  await admin.create(VMIS, 'default', {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: 'bench', namespace: 'default' },
    spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } } },
  } as never);
  const vmi = await admin.patch<VirtualMachineInstance>(
    VMIS,
    'default',
    'bench',
    { status: { phase: 'Running', nodeName: 'node-a' } },
    'merge',
    'status',
  );
  running.vmi = vmi;
  const uidDir = join(privateDir, vmi.metadata!.uid!);
  await mkdir(uidDir, { recursive: true });
  // the "serial port": greets each connection, then either sends `mode.send` bytes or counts what it receives
  const mode = { send: 0, received: 0, onReceived: (_n: number) => undefined as void };
  const serial = createServer((c: Socket) => {
    c.on('error', () => undefined);
    c.write('>');
    if (mode.send) {
      const chunk = Buffer.alloc(1 << 20, 0x61);
      let left = mode.send;
      const pump = () => {
        while (left > 0) {
          left -= chunk.length;
          if (!c.write(chunk)) return void c.once('drain', pump);
        }
      };
      pump();
    }
    c.on('data', (d: Buffer) => {
      mode.received += d.length;
      mode.onReceived(mode.received);
    });
  });
  servers.push(serial);
  await new Promise<void>((r) => serial.listen(join(uidDir, 'virt-serial0'), r));
  const kc = env.kubeConfig();
  const url = `${kc.getCurrentCluster()!.server.replace(/^https/, 'wss')}/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachineinstances/bench/console`;
  const opts: WebSocket.ClientOptions = { perMessageDeflate: false };
  await kc.applyToHTTPSOptions(opts);
  /** opens a console; resolves with it once the serial port's first byte arrived */
  const open = () =>
    new Promise<WebSocket>((resolve, reject) => {
      const ws = new WebSocket(url, ['plain.kubevirt.io'], opts);
      ws.once('message', () => resolve(ws));
      ws.once('error', reject);
    });

  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    const ws = await open();
    ms.push(performance.now() - t);
    ws.close();
  }
  ms.sort((a, b) => a - b);
  const q = (p: number) => ms[Math.min(ms.length - 1, Math.floor(p * ms.length))]!.toFixed(1);
  console.log(
    `console open (SAR + VMI read + mutual TLS + handshake + first byte): ${n} opens, p50 ${q(0.5)} ms, p95 ${q(0.95)} ms, max ${ms[ms.length - 1]!.toFixed(1)} ms`,
  );

  const bytes = mib << 20;
  mode.send = bytes;
  let t = performance.now();
  await new Promise<void>((resolve, reject) => {
    const ws = new WebSocket(url, ['plain.kubevirt.io'], opts);
    let got = 0;
    ws.on('message', (d: Buffer) => {
      got += d.length;
      if (got >= bytes + 1) {
        ws.close();
        resolve();
      }
    });
    ws.once('error', reject);
  });
  console.log(
    `guest -> client: ${mib} MiB in ${((performance.now() - t) / 1000).toFixed(2)} s, ${((mib * 1000) / (performance.now() - t)).toFixed(0)} MiB/s`,
  );
  mode.send = 0;

  const ws = await open();
  mode.received = 0;
  t = performance.now();
  await new Promise<void>((resolve) => {
    mode.onReceived = (r) => {
      if (r >= bytes) resolve();
    };
    const chunk = Buffer.alloc(1 << 20, 0x62);
    let left = bytes;
    const pump = () => {
      while (left > 0) {
        left -= chunk.length;
        ws.send(chunk);
        if (ws.bufferedAmount > 8 << 20) return void setTimeout(pump, 5);
      }
    };
    pump();
  });
  console.log(
    `client -> guest: ${mib} MiB in ${((performance.now() - t) / 1000).toFixed(2)} s, ${((mib * 1000) / (performance.now() - t)).toFixed(0)} MiB/s`,
  );
  ws.close();
  nowhere.close();
  admin.close();
  await api.stop();
} finally {
  for (const s of servers) s.close();
  await env.stop();
  await rm(dir, { recursive: true, force: true });
}
