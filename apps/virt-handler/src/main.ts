#!/usr/bin/env node
// virt-handler: the node agent. Flags, wiring and signals; the logic is @kubevirt-ts/handler.
import { KubeClient, LiteKubeConfig } from '@kubevirt-ts/controller-runtime';
import {
  Handler,
  readTlsFiles,
  startHandlerEndpoint,
  startHealthzServer,
  watchTlsFiles,
  type HandlerEndpoint,
  type HealthzServer,
} from '@kubevirt-ts/handler';
import { createLogger } from '@kubevirt-ts/log';
import { FlagError, USAGE, parseHandlerFlags, readMigrationTls } from './flags.js';

async function main(): Promise<number> {
  let flags;
  try {
    flags = parseHandlerFlags(process.argv.slice(2));
  } catch (err) {
    if (err instanceof FlagError) {
      process.stderr.write(`virt-handler: ${err.message}\n${USAGE}\n`);
      return 2;
    }
    throw err;
  }
  const log = createLogger({ component: 'virt-handler', level: flags.logLevel });
  // not client-node's KubeConfig: it loads client-node's API models (~80 MiB RSS) this process never uses
  const kc = flags.kubeconfig ? LiteKubeConfig.fromFile(flags.kubeconfig) : LiteKubeConfig.fromCluster();
  const { migrationFlags: mf, healthz: hz, ...rest } = flags;
  // one object, updated in place when virt-controller renews the mounted Secrets: the migration proxy reads it for
  // every new listener and connection
  const migrationTls = mf.tls && readMigrationTls(mf.tls);
  const handler = new Handler({
    kubeConfig: kc,
    logger: log,
    ...rest,
    migration: {
      address: mf.address,
      bindAddress: mf.bindAddress,
      launcherLibvirtSocket: mf.launcherLibvirtSocket,
      tls: migrationTls,
    },
  });
  let endpoint: HandlerEndpoint | undefined;
  let healthz: HealthzServer | undefined;
  const tlsWatches: { stop(): void }[] = [];
  let stopping: Promise<void> | undefined;
  const stop = (signal: string) => {
    log.info(`${signal}: stopping (launchers keep running)`);
    for (const w of tlsWatches) w.stop();
    stopping ??= Promise.all([endpoint?.close(), healthz?.close()]).then(() => handler.stop());
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  await handler.start();
  if (handler.httpAddress) log.info(`serving /healthz and /metrics on ${handler.httpAddress}`);
  const sub = flags.subresource;
  if (sub) {
    const files = { certFile: sub.certFile, keyFile: sub.keyFile, caFile: sub.clientCaFile };
    const tls = await readTlsFiles(files);
    const ep = await startHandlerEndpoint({
      cert: tls.cert,
      key: tls.key,
      clientCA: tls.ca,
      clientNames: sub.clientNames,
      port: sub.port,
      host: sub.address,
      log,
      lookup: (namespace, name) => handler.launcherFor(namespace, name),
    });
    endpoint = ep;
    // virt-controller renews these (a mounted Secret): new connections get the new ones, no restart
    tlsWatches.push(
      watchTlsFiles(files, tls, (m) => ep.setCredentials({ cert: m.cert, key: m.key, clientCA: m.ca }), {
        log,
      }),
    );
    log.info(`serving subresources (mutual TLS) on ${sub.address}:${endpoint.port}`);
    if (hz) {
      const hs = await startHealthzServer({
        cert: tls.cert,
        key: tls.key,
        port: hz.port,
        client: new KubeClient(kc),
        kubeVirt: hz.kubeVirt,
        log,
      });
      healthz = hs;
      tlsWatches.push(watchTlsFiles(files, tls, (m) => hs.setCertificate(m.cert, m.key), { log }));
      log.info(`serving /healthz (HTTPS) on port ${hs.port}`, { kubeVirt: hz.kubeVirt });
    }
  }
  if (mf.tls && migrationTls) {
    // the watches start from what readMigrationTls read above: the files are read once at start
    const t = mf.tls;
    const mt = migrationTls;
    const served = { certFile: t.certFile, keyFile: t.keyFile, caFile: t.caFile };
    const servedNow = { cert: mt.cert, key: mt.key, ca: mt.ca };
    tlsWatches.push(watchTlsFiles(served, servedNow, (m) => Object.assign(mt, m), { log }));
    if (t.clientCertFile && t.clientKeyFile && mt.clientCert && mt.clientKey) {
      const client = { certFile: t.clientCertFile, keyFile: t.clientKeyFile, caFile: t.caFile };
      const clientNow = { cert: mt.clientCert, key: mt.clientKey, ca: mt.ca };
      tlsWatches.push(
        watchTlsFiles(
          client,
          clientNow,
          (m) => Object.assign(mt, { clientCert: m.cert, clientKey: m.key, ca: m.ca }),
          { log },
        ),
      );
    }
  }
  await new Promise<void>((resolve) => {
    const t = setInterval(() => {
      if (stopping) {
        clearInterval(t);
        void stopping.then(resolve);
      }
    }, 100);
  });
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: Error) => {
    process.stderr.write(
      `${JSON.stringify({ component: 'virt-handler', level: 'error', msg: err.message, timestamp: new Date().toISOString() })}\n`,
    );
    process.exit(1);
  },
);
