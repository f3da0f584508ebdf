// deploy/'s webhook configurations on the real kube-apiserver (tools/testenv), served by the webhook server
// with the certificate virt-controller manages (startManagedWebhooks, what every replica runs).
//
// How the API server reaches the in-process server: deploy/ names the Service virt-controller-webhook; a
// Service needs endpoints, and the API server refuses loopback endpoint addresses, while the only address a
// test may use is loopback. So the test applies deploy/50-webhooks.yaml with each webhook's
// `clientConfig.service` replaced by `clientConfig.url: https://127.0.0.1:PORT<same path>` (everything else as
// in the file: rules, failurePolicy Fail, ...), and the controller adds 127.0.0.1 to the certificate's names
// (--webhook-extra-sans=127.0.0.1). The caBundle is published by virt-operator's CaBundlePublisher, started here
// beside the replicas as in a cluster; the replicas only read it (a new CA is served once it is published).
import { setTimeout as sleep } from 'node:timers/promises';
import { execFile, spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect } from 'node:tls';
import {
  parseManifests,
  setVirtualMachineInstanceDefaults,
  type VirtualMachineInstance,
} from '@kubevirt-ts/api';
import { KubeClient, type KubeObject } from '@kubevirt-ts/controller-runtime';
import { createLogger } from '@kubevirt-ts/log';
import { CaBundlePublisher } from '@kubevirt-ts/operator';
import { freePort, serverSideApply, type KubeObject as TestObject, type TestEnv } from '@kubevirt-ts/testenv';
import { splitPem } from './certs.js';
import { VMIS, VMI_FINALIZER, type Vmi } from './common.js';
import {
  API_SERVICES,
  MANAGED_BY,
  MANAGED_BY_ANNOTATION,
  MUTATING_WEBHOOKS,
  SECRETS,
  VALIDATING_WEBHOOKS,
  serviceDnsNames,
  startManagedWebhooks,
  type ManagedWebhooksOptions,
} from './webhook-certs.js';
import { deployObjects, invalidVm, repoRoot, startApiserver } from './test-apiserver.js';

const NS = 'certs-test';
const CTRL_NS = 'kubevirt-ts';
const SECRET = 'kubevirt-ts-webhook-certs';
const MWC = 'kubevirt-ts-mutator';
const VWC = 'kubevirt-ts-validator';

interface Secret extends KubeObject {
  data: Record<string, string>;
}
interface HookConfig extends KubeObject {
  webhooks: {
    failurePolicy: string;
    clientConfig: { url?: string; service?: unknown; caBundle?: string };
  }[];
}

let env: TestEnv;
let api: KubeClient;
let dir: string;
let port: number;
/** the replica currently serving on `port` */
let serving: { close(): Promise<void> } | undefined;
const closers: (() => Promise<void>)[] = [];
const unb64 = (s: string | undefined) => Buffer.from(s ?? '', 'base64').toString('utf8');
const SUBRESOURCES_API_SERVICE = 'v1.subresources.kubevirt.io';

/** virt-operator's part: publishes the Secret's ca.crt into the caBundles (stopped with the test file) */
async function startPublisher(): Promise<CaBundlePublisher> {
  const p = new CaBundlePublisher({
    client: api,
    namespace: CTRL_NS,
    secretName: SECRET,
    mutatingWebhook: MWC,
    validatingWebhook: VWC,
    apiService: SUBRESOURCES_API_SERVICE,
    log: createLogger({ component: 'virt-operator', level: 'warn' }),
  });
  await p.start();
  closers.push(() => p.stop());
  return p;
}

/** both webhook configurations' caBundle is `ca` (base64) */
async function caBundlesAre(ca: string): Promise<boolean> {
  const m = await api.get<HookConfig>(MUTATING_WEBHOOKS, undefined, MWC);
  const v = await api.get<HookConfig>(VALIDATING_WEBHOOKS, undefined, VWC);
  return [m, v].every((c) => c.webhooks[0]!.clientConfig.caBundle === ca);
}
let publisher: CaBundlePublisher;

async function until<T>(what: string, fn: () => Promise<T | undefined | false>, ms = 120000): Promise<T> {
  const end = Date.now() + ms;
  let last: unknown;
  while (Date.now() < end) {
    try {
      const v = await fn();
      if (v !== undefined && v !== false) return v;
    } catch (e) {
      last = e;
    }
    await sleep(200);
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}

/** the serial of the certificate a TLS server on 127.0.0.1:p presents */
function servedSerial(p: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port: p, rejectUnauthorized: false }, () => {
      const serial = s.getPeerCertificate().serialNumber;
      s.end();
      resolve(serial);
    });
    s.on('error', reject);
  });
}

/**
 * a short-lived replica set: serving certificate 40 s, CA 60 s, renewed at half their life, checked every 500 ms.
 * The margins are for a loaded machine: the second serving certificate (from ~20 s) lasts until ~60 s, so the replica
 * keeps it for ~30 s after the CA's renewal (~30 s) while virt-operator is away (with 20 s / 40 s that was 10 s, and
 * a CI run under load saw it expire, by design served the new one, before the test looked); the certificate of the
 * new CA is due for renewal ~20 s after it, which bounds how long the test may take to see it served.
 */
const SHORT_LIVED = { certValidityMs: 40000, caValidityMs: 60000, renewAfter: 0.5, checkIntervalMs: 500 };

function managedOptions(o: Partial<ManagedWebhooksOptions> & { port: number }): ManagedWebhooksOptions {
  return {
    client: api,
    namespace: CTRL_NS,
    secretName: SECRET,
    mutatingWebhook: MWC,
    validatingWebhook: VWC,
    sans: [...serviceDnsNames('virt-controller-webhook', CTRL_NS), '127.0.0.1'],
    host: '127.0.0.1',
    ...o,
  };
}

/** kubectl apply -f FILE: exit status and stderr (asynchronous: the webhook server runs in this process) */
function kubectlApply(file: string): Promise<{ status: number; stderr: string }> {
  return new Promise((resolve) =>
    execFile(
      env.binaries.kubectl!,
      ['--kubeconfig', env.kubeconfigPath, 'apply', '-f', file],
      (err, _o, stderr) => resolve({ status: err ? ((err as { code?: number }).code ?? 1) : 0, stderr }),
    ),
  );
}

const vmi = (name: string) =>
  ({
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name, namespace: NS },
    spec: { domain: { devices: {}, resources: { requests: { memory: '64Mi' } } } },
  }) as unknown as VirtualMachineInstance;

beforeAll(async () => {
  ({ env, api } = await startApiserver(NS, 'certs-test', deployObjects('00-namespace.yaml')));
  dir = mkdtempSync(join(tmpdir(), 'kvts-ctrl-certs-'));
  port = await freePort();
  // deploy/'s webhook configurations, reaching this process by URL instead of the Service (see the top)
  const hooks = deployObjects('50-webhooks.yaml').map((o) => {
    const c = structuredClone(o) as unknown as HookConfig;
    for (const w of c.webhooks) {
      const svc = w.clientConfig.service as { path: string };
      w.clientConfig = { url: `https://127.0.0.1:${port}${svc.path}` };
    }
    return c as unknown as TestObject;
  });
  expect(hooks.map((h) => h.kind)).toEqual([
    'MutatingWebhookConfiguration',
    'ValidatingWebhookConfiguration',
  ]);
  await serverSideApply(env.kubeConfig(), hooks, { fieldManager: 'certs-test' });
}, 120000);

afterAll(async () => {
  for (const c of closers.reverse()) await c().catch(() => undefined);
  api?.close();
  await env?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("deploy/'s webhooks with the certificate virt-controller manages", () => {
  it('with failurePolicy Fail and no caBundle yet, kubevirt objects are refused', async () => {
    const cfg = await api.get<HookConfig>(VALIDATING_WEBHOOKS, undefined, VWC);
    expect(cfg.webhooks[0]!.failurePolicy).toBe('Fail');
    expect(cfg.webhooks[0]!.clientConfig.caBundle).toBeUndefined();
    await expect(api.create<Vmi>(VMIS, NS, vmi('early') as Vmi)).rejects.toThrow(/failed calling webhook/);
  });

  it('two replicas starting at once: one Secret (CA + serving cert), both serve it; virt-operator publishes its CA', async () => {
    const port2 = await freePort();
    const [a, b] = await Promise.all([
      startManagedWebhooks(managedOptions({ port })),
      startManagedWebhooks(managedOptions({ port: port2 })),
    ]);
    closers.push(a.close, b.close);
    serving = a;
    const secret = await api.get<Secret>(SECRETS, CTRL_NS, SECRET);
    expect(secret.metadata!.annotations?.[MANAGED_BY_ANNOTATION]).toBe(MANAGED_BY);
    const ca = new X509Certificate(unb64(secret.data['ca.crt']));
    const tls = new X509Certificate(unb64(secret.data['tls.crt']));
    expect(ca.ca).toBe(true);
    expect(tls.verify(ca.publicKey)).toBe(true);
    for (const n of serviceDnsNames('virt-controller-webhook', CTRL_NS)) expect(tls.checkHost(n)).toBe(n);
    expect(tls.checkIP('127.0.0.1')).toBe('127.0.0.1');
    // openssl agrees it is a TLS server certificate of that CA
    writeFileSync(join(dir, 'ca.pem'), unb64(secret.data['ca.crt']));
    writeFileSync(join(dir, 'tls.pem'), unb64(secret.data['tls.crt']));
    const v = spawnSync('openssl', ['verify', '-purpose', 'sslserver', '-CAfile', 'ca.pem', 'tls.pem'], {
      cwd: dir,
      encoding: 'utf8',
    });
    expect(v.stdout.trim()).toBe('tls.pem: OK');
    expect(await servedSerial(port)).toBe(tls.serialNumber);
    expect(await servedSerial(port2)).toBe(tls.serialNumber);
    // the replicas do not write the caBundles: admission fails until virt-operator publishes the CA
    const cfg = await api.get<HookConfig>(VALIDATING_WEBHOOKS, undefined, VWC);
    expect(cfg.webhooks[0]!.clientConfig.caBundle).toBeUndefined();
    publisher = await startPublisher();
    await until('the caBundles published', () => caBundlesAre(secret.data['ca.crt']!));
    await api.create<Vmi>(VMIS, NS, vmi('published') as Vmi);
    // a configuration re-applied without its caBundle gets it back
    await api.patch(
      VALIDATING_WEBHOOKS,
      undefined,
      VWC,
      [{ op: 'remove', path: '/webhooks/0/clientConfig/caBundle' }],
      'json',
    );
    await until('the caBundle published again', () => caBundlesAre(secret.data['ca.crt']!));
    // stop the second replica; the first answers the API server
    await b.close();
  });

  it('kubectl apply of an invalid VM prints the same messages as kv-validate', async () => {
    const bad = invalidVm(NS);
    const file = join(dir, 'bad-vm.json');
    writeFileSync(file, JSON.stringify(bad));
    const kv = spawnSync(process.execPath, [join(repoRoot, 'packages/api/bin/kv-validate.js'), file], {
      encoding: 'utf8',
    });
    expect(kv.status).toBe(1);
    const lines = (kv.stdout + kv.stderr)
      .split('\n')
      .filter(Boolean)
      .map((l) => l.slice(`${file}: `.length));
    expect(lines.length).toBeGreaterThanOrEqual(2);
    const r = await kubectlApply(file);
    expect(r.status).not.toBe(0);
    // kubectl lists the causes of the webhook's Status: one `* path: reason` line per error
    expect(r.stderr).toMatch(/The request is invalid/);
    for (const l of lines) expect(r.stderr).toContain(`* ${l}\n`);
  });

  it('a valid VMI is stored defaulted, with the finalizer', async () => {
    const v = vmi('defaults');
    const created = await api.create<Vmi>(VMIS, NS, v as Vmi);
    expect(created.spec).toEqual(setVirtualMachineInstanceDefaults(v).spec);
    expect(created.spec.domain.firmware?.uuid).toBeDefined();
    expect(created.metadata.finalizers).toEqual([VMI_FINALIZER]);
  });

  it('rotation: the serving certificate, then the CA, are renewed before they expire; admission keeps working', async () => {
    // a short-lived replica set (SHORT_LIVED): serving certificate 40 s, CA 60 s, renewed at half their life
    await serving!.close();
    await api.delete(SECRETS, CTRL_NS, SECRET);
    const short = await startManagedWebhooks(managedOptions({ port, ...SHORT_LIVED }));
    closers.push(short.close);
    serving = short;
    const first = await api.get<Secret>(SECRETS, CTRL_NS, SECRET);
    const firstCa = unb64(first.data['ca.crt']);
    const firstTls = new X509Certificate(unb64(first.data['tls.crt']));
    expect(await servedSerial(port)).toBe(firstTls.serialNumber);
    // serving certificate renewed (same CA) after ~20 s
    const second = await until('a renewed serving certificate', async () => {
      const s = await api.get<Secret>(SECRETS, CTRL_NS, SECRET);
      return unb64(s.data['tls.crt']) !== firstTls.toString() ? s : undefined;
    });
    const secondTls = new X509Certificate(unb64(second.data['tls.crt']));
    expect(secondTls.serialNumber).not.toBe(firstTls.serialNumber);
    expect(Date.parse(secondTls.validTo)).toBeGreaterThan(Date.parse(firstTls.validTo));
    await until(
      'the new certificate served',
      async () => (await servedSerial(port)) === secondTls.serialNumber,
    );
    await api.create<Vmi>(VMIS, NS, vmi('after-cert-rotation') as Vmi);
    // virt-operator is away while the CA is renewed: the replica keeps serving the certificate the API server trusts
    await publisher.stop();
    // CA renewed after ~30 s: the bundle holds the new CA first and the old one until it expires
    const third = await until('a renewed CA', async () => {
      const s = await api.get<Secret>(SECRETS, CTRL_NS, SECRET);
      const bundle = splitPem(unb64(s.data['ca.crt']));
      return bundle[0] !== splitPem(firstCa)[0] ? s : undefined;
    });
    const bundle = splitPem(unb64(third.data['ca.crt']));
    expect(bundle).toHaveLength(2);
    expect(bundle[1]).toBe(splitPem(firstCa)[0]);
    const newCa = new X509Certificate(bundle[0]!);
    const thirdTls = new X509Certificate(unb64(third.data['tls.crt']));
    expect(thirdTls.verify(newCa.publicKey)).toBe(true);
    await sleep(2000); // four checks
    expect(await servedSerial(port)).toBe(secondTls.serialNumber);
    await api.create<Vmi>(VMIS, NS, vmi('ca-not-yet-published') as Vmi);
    publisher = await startPublisher();
    await until('the caBundles updated', () => caBundlesAre(third.data['ca.crt']!));
    await until(
      'the CA-rotated certificate served',
      async () => (await servedSerial(port)) === thirdTls.serialNumber,
    );
    // the API server trusts the new chain: admission still answers (defaults applied)
    const created = await api.create<Vmi>(VMIS, NS, vmi('after-ca-rotation') as Vmi);
    expect(created.metadata.finalizers).toEqual([VMI_FINALIZER]);
  }, 180000);

  it('an operator-supplied Secret (openssl CA and certificate) is served unchanged; only the caBundles follow its ca.crt', async () => {
    await serving!.close();
    await api.delete(SECRETS, CTRL_NS, SECRET);
    const ossl = (args: string[]) => {
      const r = spawnSync('openssl', args, { cwd: dir, encoding: 'utf8' });
      if (r.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
    };
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
    ossl([
      'req',
      '-x509',
      ...ec,
      '-keyout',
      'op-ca.key',
      '-out',
      'op-ca.crt',
      '-days',
      '2',
      '-subj',
      '/CN=operator-ca',
    ]);
    writeFileSync(
      join(dir, 'op.ext'),
      'basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\n',
    );
    ossl(['req', '-new', ...ec, '-keyout', 'op.key', '-out', 'op.csr', '-subj', '/CN=operator-webhook']);
    ossl([
      'x509',
      '-req',
      '-in',
      'op.csr',
      '-CA',
      'op-ca.crt',
      '-CAkey',
      'op-ca.key',
      '-CAcreateserial',
      '-days',
      '2',
      '-extfile',
      'op.ext',
      '-out',
      'op.crt',
    ]);
    const f = (n: string) => readFileSync(join(dir, n)).toString('base64');
    const made = await api.create<Secret>(SECRETS, CTRL_NS, {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: SECRET, namespace: CTRL_NS },
      type: 'kubernetes.io/tls',
      data: { 'tls.crt': f('op.crt'), 'tls.key': f('op.key'), 'ca.crt': f('op-ca.crt') },
    } as Secret);
    const op = await startManagedWebhooks(managedOptions({ port, ...SHORT_LIVED }));
    closers.push(op.close);
    expect(await servedSerial(port)).toBe(
      new X509Certificate(readFileSync(join(dir, 'op.crt'))).serialNumber,
    );
    await until("the operator's CA published", () => caBundlesAre(f('op-ca.crt')));
    await api.create<Vmi>(VMIS, NS, vmi('operator-cert') as Vmi);
    // several checks later the Secret is still the operator's, untouched
    await sleep(2000);
    const after = await api.get<Secret>(SECRETS, CTRL_NS, SECRET);
    expect(after.metadata!.resourceVersion).toBe(made.metadata!.resourceVersion);
    expect(after.metadata!.annotations?.[MANAGED_BY_ANNOTATION]).toBeUndefined();
  });

  it("deploy/'s APIService for subresources.kubevirt.io gets the same CA as its caBundle (virt-operator publishes it)", async () => {
    const file = parseManifests(
      readFileSync(join(repoRoot, 'deploy', '43-subresources-api.yaml'), 'utf8'),
    ) as TestObject[];
    const apiService = file.find((o) => o.kind === 'APIService')!;
    expect((apiService as { spec?: { caBundle?: string } }).spec?.caBundle).toBeUndefined();
    await serverSideApply(env.kubeConfig(), [apiService], { fieldManager: 'certs-test' });
    const name = apiService.metadata!.name!;
    expect(name).toBe(SUBRESOURCES_API_SERVICE);
    try {
      const p = await freePort();
      const m = await startManagedWebhooks(managedOptions({ port: p, apiService: name }));
      closers.push(m.close);
      const secret = await api.get<Secret>(SECRETS, CTRL_NS, SECRET);
      await until('the APIService caBundle published', async () => {
        const got = await api.get<KubeObject & { spec: { caBundle?: string } }>(
          API_SERVICES,
          undefined,
          name,
        );
        return got.spec.caBundle === secret.data['ca.crt'];
      });
      await m.close();
    } finally {
      await api.delete(API_SERVICES, undefined, name).catch(() => undefined);
    }
  });
});
