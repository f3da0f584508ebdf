// Rotation of the mutual-TLS certificates between virt-controller and virt-handler, on a real kube-apiserver
// (tools/testenv), with lifetimes short enough that it happens during the test (CA 30 s, leaves 10 s, renewed at 80%,
// a new CA trusted 3 s before it signs): virt-controller-core's HandlerCertManager writes the Secrets and hands this
// package's handlerConnector each new client certificate; a stand-in for the kubelet copies Secret
// `virt-handler-certs` into files as a Secret volume is updated (file by file, renamed into place); virt-handler's
// real endpoint (@kubevirt-ts/handler) re-reads those files (watchTlsFiles) and swaps its TLS context. Calls go on
// every 200 ms through two leaf renewals and a CA rotation and none fails; a connection opened before the rotation
// is still used after it; new connections see the new serving certificate; the old CA leaves the bundles once it
// has expired.
import { X509Certificate } from 'node:crypto';
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { Agent, request } from 'node:https';
import { connect, type PeerCertificate } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';
import { KubeClient, type Resource } from '@kubevirt-ts/controller-runtime';
import {
  readTlsFiles,
  startHandlerEndpoint,
  watchTlsFiles,
  type HandlerEndpoint,
} from '@kubevirt-ts/handler';
import { createLogger } from '@kubevirt-ts/log';
import { startTestEnv, type TestEnv } from '@kubevirt-ts/testenv';
import {
  HANDLER_CA_SECRET,
  HANDLER_CERTS_SECRET,
  HandlerCertManager,
  splitPem,
  type HandlerClientTls,
} from '@kubevirt-ts/virt-controller-core';
import { handlerConnector, HANDLER_TLS_NAME, type HandlerConnector } from './handler-connector.js';

const NS = 'kubevirt-ts';
const SECRETS: Resource = { group: '', version: 'v1', plural: 'secrets', namespaced: true };
const log = createLogger({ component: 'test', silent: true });
const unb64 = (s: string | undefined) => Buffer.from(s ?? '', 'base64').toString('utf8');
const serial = (pem: string | Buffer) => new X509Certificate(pem).serialNumber;
const signedBy = (pem: string, ca: string) =>
  new X509Certificate(pem).verify(new X509Certificate(ca).publicKey);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until<T>(what: string, f: () => Promise<T | undefined | false>, ms = 90_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

let env: TestEnv;
let client: KubeClient;
let dir: string;
let manager: HandlerCertManager;
let connector: HandlerConnector;
let endpoint: HandlerEndpoint;
let watch: { stop(): void };
let kubelet: NodeJS.Timeout;
/** every version of each Secret, from a watch: a short-lived state (the 3 s of CA step 1) cannot be missed by polling */
const history = new Map<string, Record<string, string>[]>();
const watching = new AbortController();
let watched: Promise<void> | undefined;
const clientSerials: string[] = [];
/** the CA bundle of every client TLS the manager handed out, in order */
const clientCas: string[] = [];
const files = () => ({
  certFile: join(dir, 'tls.crt'),
  keyFile: join(dir, 'tls.key'),
  caFile: join(dir, 'ca.crt'),
});

async function secret(name: string): Promise<Record<string, string>> {
  const s = await client.get<{ metadata?: object; data?: Record<string, string> }>(SECRETS, NS, name);
  return Object.fromEntries(Object.entries(s.data ?? {}).map(([k, v]) => [k, unb64(v)]));
}
/** the first version of Secret `name` (from the watch's history) for which `pred` holds */
function seen(
  what: string,
  name: string,
  pred: (s: Record<string, string>) => boolean,
): Promise<Record<string, string>> {
  return until(what, async () => history.get(name)?.find(pred));
}
/** what a kubelet does for a Secret volume, file by file (each replaced atomically) */
async function syncMount(): Promise<void> {
  const s = await secret(HANDLER_CERTS_SECRET);
  for (const k of ['ca.crt', 'tls.crt', 'tls.key']) {
    await writeFile(join(dir, `.${k}.tmp`), s[k] ?? '', { mode: 0o600 });
    await rename(join(dir, `.${k}.tmp`), join(dir, k));
  }
}
/** the serving certificate a new connection to the endpoint gets, presenting the current client certificate */
function served(tls: HandlerClientTls): Promise<X509Certificate> {
  return new Promise((resolve, reject) => {
    const s = connect(
      { host: '127.0.0.1', port: endpoint.port, servername: HANDLER_TLS_NAME, ...tls },
      () => {
        const c: PeerCertificate = s.getPeerCertificate();
        s.end();
        resolve(new X509Certificate(c.raw));
      },
    );
    s.on('error', reject);
  });
}

const vmi = {
  apiVersion: 'kubevirt.io/v1',
  kind: 'VirtualMachineInstance',
  metadata: { name: 'rot', namespace: 'default' },
  spec: { domain: { devices: {} } },
  status: { nodeName: 'node-a', phase: 'Running' },
} as unknown as VirtualMachineInstance;
/** one call through the connector: the handler answers 404 (no launcher here), which needs a full mTLS exchange */
async function call(): Promise<string> {
  try {
    await connector.put(vmi, 'pause', '{}');
    return 'unexpected success';
  } catch (e) {
    const m = (e as Error).message;
    return /answered 404: .*no running launcher/.test(m) ? 'ok' : m;
  }
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'kvts-rotation-'));
  env = await startTestEnv();
  client = new KubeClient(env.kubeConfig());
  await env.createNamespace(NS);
  manager = new HandlerCertManager({
    client,
    namespace: NS,
    caValidityMs: 30_000,
    certValidityMs: 10_000,
    caPropagationMs: 3_000,
    checkIntervalMs: 300,
    log,
    onClientTls: (t) => {
      clientSerials.push(serial(t.cert));
      clientCas.push(t.ca);
      connector?.setTls(t);
    },
  });
  watched = client
    .watch(
      SECRETS,
      NS,
      {},
      (e) => {
        if (e.type !== 'ADDED' && e.type !== 'MODIFIED') return;
        const data = (e.object as { data?: Record<string, string> }).data ?? {};
        const name = e.object.metadata?.name ?? '';
        history.set(name, [
          ...(history.get(name) ?? []),
          Object.fromEntries(Object.entries(data).map(([k, v]) => [k, unb64(v)])),
        ]);
      },
      watching.signal,
    )
    .catch(() => undefined);
  await manager.start();
  await syncMount();
  const material = await readTlsFiles(files());
  endpoint = await startHandlerEndpoint({
    cert: material.cert,
    key: material.key,
    clientCA: material.ca,
    host: '127.0.0.1',
    port: 0,
    log,
    lookup: () => undefined,
  });
  connector = handlerConnector({
    client,
    ...manager.current!,
    address: async () => '127.0.0.1',
    port: endpoint.port,
  });
  watch = watchTlsFiles(
    files(),
    material,
    (m) => endpoint.setCredentials({ cert: m.cert, key: m.key, clientCA: m.ca }),
    { intervalMs: 200, log },
  );
  kubelet = setInterval(() => void syncMount().catch(() => undefined), 300);
}, 300_000);

afterAll(async () => {
  clearInterval(kubelet);
  watching.abort();
  await watched;
  watch?.stop();
  await manager?.stop();
  await endpoint?.close();
  client?.close();
  await env?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

test('leaves renewed twice and the CA rotated in two steps, without a failed call; open connections keep working', async () => {
  const ca0 = await secret(HANDLER_CA_SECRET);
  const served0 = await secret(HANDLER_CERTS_SECRET);
  expect(ca0['bundle.crt']).toBe(ca0['ca.crt']);
  expect(served0['ca.crt']).toBe(ca0['ca.crt']);
  expect(await call()).toBe('ok');
  expect((await served(manager.current!)).serialNumber).toBe(serial(served0['tls.crt']!));

  // calls all along, and one keep-alive connection opened now and used again at the end
  const failures: string[] = [];
  let calls = 0;
  let stop = false;
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const first = manager.current!;
  const viaAgent = () =>
    new Promise<{ code?: number; reused: boolean }>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port: endpoint.port,
          path: '/v1/namespaces/default/virtualmachineinstances/rot/guestosinfo',
          agent,
          servername: HANDLER_TLS_NAME,
          ...first,
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve({ code: res.statusCode, reused: req.reusedSocket }));
        },
      );
      req.on('error', reject);
      req.end();
    });
  expect(await viaAgent()).toEqual({ code: 404, reused: false });
  const caller = (async () => {
    while (!stop) {
      const r = await call();
      calls++;
      if (r !== 'ok') failures.push(r);
      // the keep-alive connection is used on every round (an idle one would be closed after 5 s by the server)
      const k = await viaAgent().catch((e: Error) => ({ code: 0, reused: false, error: e.message }));
      if (k.code !== 404 || !k.reused) failures.push(`keep-alive connection: ${JSON.stringify(k)}`);
      await sleep(200);
    }
  })();

  try {
    // 1. the serving certificate is renewed (80% of 10 s); virt-handler serves the new one without a restart
    const renewed = await until('a renewed serving certificate', async () => {
      const s = await secret(HANDLER_CERTS_SECRET);
      return s['tls.crt'] !== served0['tls.crt'] ? s : undefined;
    });
    expect(signedBy(renewed['tls.crt']!, ca0['ca.crt']!)).toBe(true);
    await until(
      'virt-handler serving a renewed certificate',
      async () => (await served(manager.current!)).serialNumber !== serial(served0['tls.crt']!),
    );
    await until('a renewed client certificate', async () => clientSerials.length >= 2);

    // 2. CA rotation, step 1: the next CA is published in both bundles while the old one still signs
    const published = await seen('the next CA published', HANDLER_CA_SECRET, (s) => !!s['next.crt']);
    expect(published['ca.crt']).toBe(ca0['ca.crt']);
    expect(splitPem(published['bundle.crt']!)).toEqual([ca0['ca.crt'], published['next.crt']]);
    const duringServed = await seen(
      'virt-handler-certs carrying the bundle',
      HANDLER_CERTS_SECRET,
      (s) => s['ca.crt'] === published['bundle.crt'],
    );
    expect(signedBy(duringServed['tls.crt']!, ca0['ca.crt']!)).toBe(true);
    // virt-controller trusted the bundle while it was published (read from the history: on a loaded machine the
    // manager may already be a step further when the Secret is read; and its client TLS may be handed over a moment
    // after the Secret is written: CI saw the history without it at this point)
    await until('virt-controller trusting the published bundle', async () =>
      clientCas.includes(published['bundle.crt']!),
    );

    // step 2: the new CA signs; every leaf is re-issued by it
    const promoted = await seen(
      'the new CA signing',
      HANDLER_CA_SECRET,
      (s) => s['ca.crt'] === published['next.crt'],
    );
    expect(promoted['next.crt']).toBeUndefined();
    expect(splitPem(promoted['bundle.crt']!)).toEqual([published['next.crt'], ca0['ca.crt']]);
    const newCa = promoted['ca.crt']!;
    await seen('a serving certificate of the new CA', HANDLER_CERTS_SECRET, (s) =>
      signedBy(s['tls.crt']!, newCa),
    );
    await until('virt-handler serving one', async () =>
      (await served(manager.current!)).verify(new X509Certificate(newCa).publicKey),
    );
    expect(signedBy(manager.current!.cert, newCa)).toBe(true);

    // the old CA expires (30 s after it was made) and leaves both bundles
    await until('the old CA out of the bundles', async () => {
      const [c, s] = [await secret(HANDLER_CA_SECRET), await secret(HANDLER_CERTS_SECRET)];
      return c['bundle.crt'] === newCa && s['ca.crt'] === newCa && manager.current!.ca === newCa;
    });
    expect(await call()).toBe('ok');

    // the connection opened before any of this is still open and still answers
    expect(await viaAgent()).toEqual({ code: 404, reused: true });
  } finally {
    // also when an expectation above failed: a caller loop left running would keep jest from exiting
    stop = true;
    await caller;
    agent.destroy();
  }
  expect(failures).toEqual([]);
  expect(calls).toBeGreaterThan(20);
  expect(new Set(clientSerials).size).toBeGreaterThanOrEqual(3);
}, 300_000);
