// Kubernetes test control plane: a real etcd and a real kube-apiserver on free loopback ports, with a
// generated CA, serving certificate, admin client certificate (group system:masters), service-account
// signing keys and an admin kubeconfig. Used by the `tools/testenv.sh -- COMMAND` CLI and by jest suites.
//
// Binaries: $KUBEBUILDER_ASSETS/{kube-apiserver,etcd} when KUBEBUILDER_ASSETS is set; otherwise
// kube-apiserver from $KVTS_CACHE/kube/<version>/ (built by tools/testenv/build-kube-apiserver.sh at the
// version pinned in tools/testenv/kube-apiserver/go.mod) and etcd from $KVTS_CACHE/kube/etcd or /usr/bin/etcd.
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { existsSync, openSync, closeSync, readFileSync, accessSync, constants as fsConstants } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile, readFile } from 'node:fs/promises';
import { request as httpsRequest } from 'node:https';
import { request as httpRequest } from 'node:http';
import { createServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { join, delimiter } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { kubeRequest } from './apply.js';

/** Where built artifacts are cached: $KVTS_CACHE, else $XDG_CACHE_HOME/kubevirt-ts, else ~/.cache/kubevirt-ts. */
export function cacheDir(): string {
  if (process.env.KVTS_CACHE) return process.env.KVTS_CACHE;
  const xdg = process.env.XDG_CACHE_HOME || join(homedir(), '.cache');
  return join(xdg, 'kubevirt-ts');
}

/** The Kubernetes version pinned in tools/testenv/kube-apiserver/go.mod, e.g. "v1.33.13". */
export function pinnedKubeVersion(): string {
  const goMod = fileURLToPath(new URL('../kube-apiserver/go.mod', import.meta.url));
  const m = /^require\s+k8s\.io\/kubernetes\s+(v\S+)/m.exec(readFileSync(goMod, 'utf8'));
  if (!m) throw new Error(`${goMod}: no "require k8s.io/kubernetes vX.Y.Z" line`);
  return m[1]!;
}

export interface TestEnvBinaries {
  kubeApiserver: string;
  etcd: string;
  /** kubectl of the same version when it was built (or ships in KUBEBUILDER_ASSETS), else one on PATH */
  kubectl?: string;
  /** where they came from: "KUBEBUILDER_ASSETS" or "cache" */
  source: 'KUBEBUILDER_ASSETS' | 'cache';
}

function isExecutable(p: string): boolean {
  try {
    accessSync(p, fsConstants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function which(name: string): string | undefined {
  for (const d of (process.env.PATH ?? '').split(delimiter)) {
    if (d && isExecutable(join(d, name))) return join(d, name);
  }
  return undefined;
}

/** Locates kube-apiserver and etcd; throws an Error that says how to get them when missing. */
export function findBinaries(): TestEnvBinaries {
  const assets = process.env.KUBEBUILDER_ASSETS;
  if (assets) {
    const kubeApiserver = join(assets, 'kube-apiserver');
    const etcd = join(assets, 'etcd');
    for (const p of [kubeApiserver, etcd]) {
      if (!isExecutable(p))
        throw new Error(`KUBEBUILDER_ASSETS=${assets}: ${p} is missing or not executable`);
    }
    const kubectl = isExecutable(join(assets, 'kubectl')) ? join(assets, 'kubectl') : which('kubectl');
    return { kubeApiserver, etcd, kubectl, source: 'KUBEBUILDER_ASSETS' };
  }
  const version = pinnedKubeVersion();
  const kubeApiserver = join(cacheDir(), 'kube', version, 'kube-apiserver');
  if (!isExecutable(kubeApiserver)) {
    throw new Error(
      `kube-apiserver ${version} not found at ${kubeApiserver}: build it with tools/testenv/build-kube-apiserver.sh ` +
        `(or run tools/setup.sh), or set KUBEBUILDER_ASSETS to a folder holding kube-apiserver and etcd`,
    );
  }
  const cachedEtcd = join(cacheDir(), 'kube', 'etcd', 'etcd');
  const etcd = isExecutable(cachedEtcd) ? cachedEtcd : which('etcd');
  if (!etcd)
    throw new Error('etcd not found: install Debian etcd-server (tools/setup.sh) or set KUBEBUILDER_ASSETS');
  const cachedKubectl = join(cacheDir(), 'kube', version, 'kubectl');
  const kubectl = isExecutable(cachedKubectl) ? cachedKubectl : which('kubectl');
  return { kubeApiserver, etcd, kubectl, source: 'cache' };
}

export interface StartOptions {
  /** receives progress messages (the CLI passes its winston logger) */
  log?: (msg: string, fields?: Record<string, unknown>) => void;
  /** extra kube-apiserver flags, appended last (so they override ours) */
  apiserverArgs?: string[];
  /** how long to wait for /readyz (default 90 s: the first start on 2 busy cores is slow) */
  startTimeoutMs?: number;
  /** keep the data directory (certificates, logs, etcd data) after stop() */
  keepDir?: boolean;
}

export interface TestEnv {
  /** https://127.0.0.1:PORT */
  server: string;
  /** folder holding certificates, kubeconfig, logs and etcd data */
  dir: string;
  kubeconfigPath: string;
  /** the admin kubeconfig (JSON, a valid kubeconfig file) */
  kubeconfig: string;
  caPem: string;
  pids: { etcd: number; apiserver: number };
  /** milliseconds from startTestEnv() to a ready API server */
  startupMs: number;
  binaries: TestEnvBinaries;
  /** a fresh @kubernetes/client-node KubeConfig for the admin user */
  kubeConfig(): KubeConfig;
  /** creates the namespace `name` as the admin user (`kubectl create namespace`) */
  createNamespace(name: string): Promise<void>;
  /** stops kube-apiserver then etcd (TERM, KILL after 10 s) and removes dir; idempotent */
  stop(): Promise<void>;
}

/** Asks the kernel for a free TCP port on `host` (default 127.0.0.1; `::` for one free on both loopbacks). */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

function run(cmd: string, args: string[], cwd: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`${cmd} ${args.join(' ')} exited ${code}: ${err.trim()}`)),
    );
  });
}

/** Generates CA, apiserver serving cert, admin client cert (openssl) and service-account keys (node:crypto). */
async function generateCertificates(dir: string): Promise<void> {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  /** a self-signed CA: `<name>.crt`, `<name>.key` */
  const makeCA = (name: string, cn: string) =>
    run(
      'openssl',
      [
        'req',
        '-x509',
        ...ec,
        '-keyout',
        `${name}.key`,
        '-out',
        `${name}.crt`,
        '-days',
        '365',
        '-subj',
        `/CN=${cn}`,
        '-addext',
        'basicConstraints=critical,CA:TRUE',
        '-addext',
        'keyUsage=critical,keyCertSign,cRLSign',
      ],
      dir,
    );
  /** a key and a certificate `<name>.crt` for `subj` with the extensions of file `ext`, signed by CA `ca` */
  const issue = async (name: string, subj: string, ext: string, ca: string) => {
    await run(
      'openssl',
      ['req', '-new', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subj],
      dir,
    );
    await run(
      'openssl',
      [
        'x509',
        '-req',
        '-in',
        `${name}.csr`,
        '-CA',
        `${ca}.crt`,
        '-CAkey',
        `${ca}.key`,
        '-CAcreateserial',
        '-days',
        '365',
        '-extfile',
        ext,
        '-out',
        `${name}.crt`,
      ],
      dir,
    );
  };
  await makeCA('ca', 'kubevirt-ts-testenv-ca');
  await writeFile(
    join(dir, 'server.ext'),
    'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' +
      'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc\n',
  );
  await writeFile(
    join(dir, 'client.ext'),
    'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n',
  );
  await issue('server', '/CN=kube-apiserver', 'server.ext', 'ca');
  await issue('admin', '/O=system:masters/CN=kubevirt-ts-admin', 'client.ext', 'ca');
  // The aggregation layer (front proxy): its own CA, and the client certificate kube-apiserver presents to
  // aggregated API servers (they trust the CA and the name through the extension-apiserver-authentication
  // ConfigMap in kube-system, then read the user from the X-Remote-* headers).
  await makeCA('front-proxy-ca', 'kubevirt-ts-testenv-front-proxy-ca');
  await issue('front-proxy-client', '/CN=front-proxy-client', 'client.ext', 'front-proxy-ca');
  const sa = generateKeyPairSync('rsa', { modulusLength: 2048 });
  await writeFile(join(dir, 'sa.key'), sa.privateKey.export({ type: 'pkcs8', format: 'pem' }), {
    mode: 0o600,
  });
  await writeFile(join(dir, 'sa.pub'), sa.publicKey.export({ type: 'spki', format: 'pem' }));
}

interface Proc {
  name: string;
  child: ChildProcess;
  logPath: string;
  exited: Promise<number | null>;
  exitCode?: number | null;
}

const live = new Set<Proc>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // Last resort when the owner never called stop(): kill what we started (synchronously, by pid).
  process.on('exit', () => {
    for (const p of live) {
      try {
        p.child.kill('SIGKILL');
      } catch {
        /* already gone */
      }
    }
  });
}

const setpriv = which('setpriv');

function startProcess(name: string, bin: string, args: string[], dir: string): Proc {
  const logPath = join(dir, `${name}.log`);
  const fd = openSync(logPath, 'a');
  // setpriv --pdeathsig: the kernel kills the server if this Node process dies without cleaning up
  // (SIGKILL, crash). setpriv execs, so the pid we hold is the server's own.
  const [cmd, argv] = setpriv ? [setpriv, ['--pdeathsig', 'KILL', '--', bin, ...args]] : [bin, args];
  const child = spawn(cmd, argv, { cwd: dir, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  const proc: Proc = {
    name,
    child,
    logPath,
    exited: new Promise((resolve) => {
      child.on('exit', (code, signal) => {
        live.delete(proc);
        proc.exitCode = code ?? (signal ? -1 : null);
        resolve(proc.exitCode);
      });
      child.on('error', () => {
        live.delete(proc);
        proc.exitCode = -1;
        resolve(-1);
      });
    }),
  };
  live.add(proc);
  installExitHook();
  return proc;
}

async function stopProcess(p: Proc, graceMs = 10000): Promise<void> {
  if (p.exitCode !== undefined) return;
  p.child.kill('SIGTERM');
  const timer = setTimeout(() => p.child.kill('SIGKILL'), graceMs);
  await p.exited;
  clearTimeout(timer);
}

async function logTail(p: Proc, lines = 30): Promise<string> {
  try {
    return (await readFile(p.logPath, 'utf8')).split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

function get(
  url: string,
  tls?: { ca: string; cert: string; key: string },
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const opts = { timeout: 2000, ...(tls ?? {}) };
    const req = (url.startsWith('https:') ? httpsRequest : httpRequest)(url, opts, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

async function waitReady(
  p: Proc,
  url: string,
  deadline: number,
  tls?: Parameters<typeof get>[1],
): Promise<void> {
  let last = '';
  for (;;) {
    if (p.exitCode !== undefined) {
      throw new Error(
        `${p.name} exited (${p.exitCode}) before it was ready; log ${p.logPath}:\n${await logTail(p)}`,
      );
    }
    try {
      const r = await get(url, tls);
      if (r.status === 200) return;
      last = `HTTP ${r.status} ${r.body.slice(0, 500)}`;
    } catch (e) {
      last = (e as Error).message;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `${p.name} not ready at ${url} in time (last: ${last}); log ${p.logPath}:\n${await logTail(p)}`,
      );
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** Where data dirs are created: $KVTS_TESTENV_DIR, else /dev/shm when writable, else the temp dir. */
export function baseDir(): string {
  // etcd fsyncs a lot: keep its data on tmpfs when there is one.
  if (process.env.KVTS_TESTENV_DIR) return process.env.KVTS_TESTENV_DIR;
  try {
    accessSync('/dev/shm', fsConstants.W_OK);
    return '/dev/shm';
  } catch {
    return tmpdir();
  }
}

/**
 * Removes data dirs left by runs whose Node process died without stop() (SIGKILL): their servers are gone
 * too (parent-death signal), only files remain. A dir whose owner process still runs is left alone.
 */
async function removeStaleDirs(base: string): Promise<void> {
  let names: string[];
  try {
    names = await readdir(base);
  } catch {
    return;
  }
  for (const n of names.filter((x) => x.startsWith('kvts-testenv-'))) {
    const dir = join(base, n);
    let pid: number;
    try {
      pid = Number(await readFile(join(dir, 'owner.pid'), 'utf8'));
    } catch {
      continue; // not ours to judge (being created, or --keep without owner file)
    }
    if (!Number.isInteger(pid) || pid <= 0) continue;
    try {
      process.kill(pid, 0);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ESRCH') await rm(dir, { recursive: true, force: true });
    }
  }
}

/** Starts etcd and kube-apiserver and waits until the API server is ready. Call stop() when done. */
export async function startTestEnv(opts: StartOptions = {}): Promise<TestEnv> {
  const t0 = Date.now();
  const log = opts.log ?? (() => {});
  const binaries = findBinaries();
  if (!which('openssl'))
    throw new Error('openssl not found (Debian package openssl): needed to generate certificates');
  await removeStaleDirs(baseDir());
  const dir = await mkdtemp(join(baseDir(), 'kvts-testenv-'));
  await writeFile(join(dir, 'owner.pid'), String(process.pid));
  const procs: Proc[] = [];
  const cleanup = async (): Promise<void> => {
    for (const p of [...procs].reverse()) await stopProcess(p);
    if (!opts.keepDir) await rm(dir, { recursive: true, force: true });
  };
  try {
    await generateCertificates(dir);
    const deadline = t0 + (opts.startTimeoutMs ?? 90000);

    // etcd (plain http on loopback: only this user's processes can reach it). Retried on a port race.
    let etcd: Proc | undefined;
    let etcdUrl = '';
    for (let attempt = 1; ; attempt++) {
      const [clientPort, peerPort] = [await freePort(), await freePort()];
      etcdUrl = `http://127.0.0.1:${clientPort}`;
      const peerUrl = `http://127.0.0.1:${peerPort}`;
      etcd = startProcess(
        'etcd',
        binaries.etcd,
        [
          '--name=kvts',
          `--data-dir=${join(dir, 'etcd')}`,
          `--listen-client-urls=${etcdUrl}`,
          `--advertise-client-urls=${etcdUrl}`,
          `--listen-peer-urls=${peerUrl}`,
          `--initial-advertise-peer-urls=${peerUrl}`,
          `--initial-cluster=kvts=${peerUrl}`,
          '--initial-cluster-state=new',
          '--log-level=warn',
        ],
        dir,
      );
      procs.push(etcd);
      try {
        await waitReady(etcd, `${etcdUrl}/health`, deadline);
        break;
      } catch (e) {
        if (attempt >= 3 || etcd.exitCode === undefined) throw e;
        procs.pop();
        log('etcd failed to start, retrying on other ports', { attempt });
      }
    }
    log('etcd ready', { url: etcdUrl, pid: etcd.child.pid });

    const tls = {
      ca: await readFile(join(dir, 'ca.crt'), 'utf8'),
      cert: await readFile(join(dir, 'admin.crt'), 'utf8'),
      key: await readFile(join(dir, 'admin.key'), 'utf8'),
    };
    let apiserver: Proc | undefined;
    let server = '';
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      server = `https://127.0.0.1:${port}`;
      apiserver = startProcess(
        'kube-apiserver',
        binaries.kubeApiserver,
        [
          `--etcd-servers=${etcdUrl}`,
          '--bind-address=127.0.0.1',
          '--advertise-address=127.0.0.1',
          `--secure-port=${port}`,
          `--cert-dir=${join(dir, 'apiserver-certs')}`,
          `--tls-cert-file=${join(dir, 'server.crt')}`,
          `--tls-private-key-file=${join(dir, 'server.key')}`,
          `--client-ca-file=${join(dir, 'ca.crt')}`,
          `--service-account-issuer=https://kubernetes.default.svc.cluster.local`,
          `--service-account-key-file=${join(dir, 'sa.pub')}`,
          `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
          '--service-cluster-ip-range=10.96.0.0/16',
          '--authorization-mode=RBAC',
          '--allow-privileged=true',
          // No kube-controller-manager runs here, so nothing creates the "default" service accounts that the
          // ServiceAccount admission plugin would require for every Pod.
          '--disable-admission-plugins=ServiceAccount',
          '--enable-priority-and-fairness=false',
          '--endpoint-reconciler-type=none',
          '--v=1',
          // the aggregation layer: aggregated APIs (subresources.kubevirt.io) authenticate the API server by
          // this client certificate and take the user from these headers
          `--requestheader-client-ca-file=${join(dir, 'front-proxy-ca.crt')}`,
          '--requestheader-allowed-names=front-proxy-client',
          '--requestheader-username-headers=X-Remote-User',
          '--requestheader-group-headers=X-Remote-Group',
          '--requestheader-extra-headers-prefix=X-Remote-Extra-',
          `--proxy-client-cert-file=${join(dir, 'front-proxy-client.crt')}`,
          `--proxy-client-key-file=${join(dir, 'front-proxy-client.key')}`,
          ...(opts.apiserverArgs ?? []),
        ],
        dir,
      );
      procs.push(apiserver);
      try {
        await waitReady(apiserver, `${server}/readyz`, deadline, tls);
        break;
      } catch (e) {
        const portTaken = /address already in use/.test(await logTail(apiserver, 200));
        if (attempt >= 3 || !portTaken) throw e;
        await stopProcess(apiserver);
        procs.pop();
        log('kube-apiserver port was taken, retrying', { attempt });
      }
    }

    const b64 = (s: string): string => Buffer.from(s).toString('base64');
    const kubeconfig = JSON.stringify(
      {
        apiVersion: 'v1',
        kind: 'Config',
        clusters: [{ name: 'testenv', cluster: { server, 'certificate-authority-data': b64(tls.ca) } }],
        users: [
          {
            name: 'admin',
            user: { 'client-certificate-data': b64(tls.cert), 'client-key-data': b64(tls.key) },
          },
        ],
        contexts: [{ name: 'testenv', context: { cluster: 'testenv', user: 'admin', namespace: 'default' } }],
        'current-context': 'testenv',
      },
      null,
      2,
    );
    const kubeconfigPath = join(dir, 'kubeconfig');
    await writeFile(kubeconfigPath, kubeconfig, { mode: 0o600 });
    const startupMs = Date.now() - t0;
    log('kube-apiserver ready', { server, pid: apiserver.child.pid, startupMs });

    let stopped: Promise<void> | undefined;
    const kubeConfig = () => {
      const kc = new KubeConfig();
      kc.loadFromString(kubeconfig);
      return kc;
    };
    return {
      server,
      dir,
      kubeconfigPath,
      kubeconfig,
      caPem: tls.ca,
      pids: { etcd: etcd.child.pid!, apiserver: apiserver.child.pid! },
      startupMs,
      binaries,
      kubeConfig,
      async createNamespace(name) {
        await kubeRequest(kubeConfig(), 'POST', '/api/v1/namespaces', {
          apiVersion: 'v1',
          kind: 'Namespace',
          metadata: { name },
        });
      },
      stop() {
        stopped ??= cleanup();
        return stopped;
      },
    };
  } catch (e) {
    await cleanup();
    throw e;
  }
}

/** Runs fn with a started control plane and always stops it afterwards. */
export async function withTestEnv<T>(fn: (env: TestEnv) => Promise<T>, opts?: StartOptions): Promise<T> {
  const env = await startTestEnv(opts);
  try {
    return await fn(env);
  } finally {
    await env.stop();
  }
}

/** True when kube-apiserver and etcd can be found (for suites that explain clearly why they cannot run). */
export function testEnvAvailable(): { ok: true } | { ok: false; reason: string } {
  try {
    findBinaries();
    return existsSync('/usr/bin/openssl') || which('openssl')
      ? { ok: true }
      : { ok: false, reason: 'openssl missing' };
  } catch (e) {
    return { ok: false, reason: (e as Error).message };
  }
}

export {
  kubeRequest,
  serverSideApply,
  waitCrdEstablished,
  ResourceMapper,
  KubeRequestError,
  type KubeObject,
  type ApplyOptions,
} from './apply.js';
