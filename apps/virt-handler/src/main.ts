#!/usr/bin/env node
// virt-handler: the node agent. Flags, wiring and signals; the logic is @kubevirt-ts/handler.
import { LiteKubeConfig } from '@kubevirt-ts/controller-runtime';
import { readFileSync } from 'node:fs';
import {
  Handler,
  readTlsFiles,
  startHandlerEndpoint,
  watchTlsFiles,
  type HandlerEndpoint,
} from '@kubevirt-ts/handler';
import { createLogger } from '@kubevirt-ts/log';
import { FlagError, USAGE, parseHandlerFlags } from './flags.js';

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
  const { migrationFlags: mf, ...rest } = flags;
  const handler = new Handler({
    kubeConfig: kc,
    logger: log,
    ...rest,
    migration: {
      address: mf.address,
      bindAddress: mf.bindAddress,
      launcherLibvirtSocket: mf.launcherLibvirtSocket,
      tls: mf.tls && {
        cert: readFileSync(mf.tls.certFile),
        key: readFileSync(mf.tls.keyFile),
        ca: readFileSync(mf.tls.caFile),
      },
    },
  });
  let endpoint: HandlerEndpoint | undefined;
  let tlsWatch: { stop(): void } | undefined;
  let stopping: Promise<void> | undefined;
  const stop = (signal: string) => {
    log.info(`${signal}: stopping (launchers keep running)`);
    tlsWatch?.stop();
    stopping ??= (endpoint?.close() ?? Promise.resolve()).then(() => handler.stop());
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
      port: sub.port,
      host: sub.address,
      log,
      lookup: (namespace, name) => handler.launcherFor(namespace, name),
    });
    endpoint = ep;
    // virt-controller renews these (a mounted Secret): new connections get the new ones, no restart
    tlsWatch = watchTlsFiles(
      files,
      tls,
      (m) => ep.setCredentials({ cert: m.cert, key: m.key, clientCA: m.ca }),
      {
        log,
      },
    );
    log.info(`serving subresources (mutual TLS) on ${sub.address}:${endpoint.port}`);
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
