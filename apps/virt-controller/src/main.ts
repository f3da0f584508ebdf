#!/usr/bin/env node
// virt-controller: flags, wiring, signals. The controllers live in @kubevirt-ts/virt-controller-core.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { hostname } from 'node:os';
import { KubeConfig } from '@kubernetes/client-node';
import { KubeClient, LeaderElector, PROMETHEUS_CONTENT_TYPE } from '@kubevirt-ts/controller-runtime';
import { createLogger } from '@kubevirt-ts/log';
import { VirtController, startWebhookServer, type WebhookServer } from '@kubevirt-ts/virt-controller-core';
import { USAGE, UsageError, parseControllerFlags } from './flags.js';

async function main(): Promise<number> {
  let flags;
  try {
    flags = parseControllerFlags(process.argv.slice(2), process.env, hostname());
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`virt-controller: ${e.message}\n${USAGE}\n`);
      return 2;
    }
    throw e;
  }
  const log = createLogger({ component: 'virt-controller', level: flags.logLevel });
  const kc = new KubeConfig();
  if (flags.kubeconfig) kc.loadFromFile(flags.kubeconfig);
  else kc.loadFromCluster();

  const controller = new VirtController({
    kubeConfig: kc,
    log,
    configNamespace: flags.configNamespace,
    configName: flags.configName,
    vmWorkers: flags.vmWorkers,
    vmiWorkers: flags.vmiWorkers,
  });
  // metrics: every replica (a standby reports empty queues and no reconciles)
  let metrics: Server | undefined;
  if (flags.metricsPort) {
    metrics = createServer((req, res) => {
      if (req.method === 'GET' && req.url?.split('?')[0] === '/metrics') {
        const text = controller.metrics.render();
        res.writeHead(200, { 'Content-Type': PROMETHEUS_CONTENT_TYPE }).end(text);
      } else res.writeHead(404).end();
    });
    await new Promise<void>((resolve, reject) => {
      metrics!.once('error', reject);
      metrics!.listen(flags.metricsPort, () => resolve());
    });
    log.info('serving metrics', { port: flags.metricsPort });
  }
  // admission is served by every replica, leader or not
  let webhooks: WebhookServer | undefined;
  if (flags.tlsCertFile && flags.tlsKeyFile) {
    const load = () => ({ cert: readFileSync(flags.tlsCertFile!), key: readFileSync(flags.tlsKeyFile!) });
    webhooks = await startWebhookServer({ ...load(), port: flags.webhookPort, log });
    log.info('serving admission webhooks', { port: webhooks.port });
    // a rotated certificate (e.g. a re-mounted Secret) is picked up on SIGHUP
    process.on('SIGHUP', () => {
      try {
        const c = load();
        webhooks!.setCertificate(c.cert, c.key);
        log.info('reloaded the webhook certificate');
      } catch (e) {
        log.error('could not reload the webhook certificate', {
          reason: e instanceof Error ? e.message : String(e),
        });
      }
    });
  }
  let exitCode = 0;
  let resolveDone!: () => void;
  const done = new Promise<void>((r) => (resolveDone = r));
  let elector: LeaderElector | undefined;
  let running = false;

  const shutdown = async (code: number) => {
    exitCode = code;
    await elector?.stop();
    if (running) await controller.stop();
    await webhooks?.close();
    metrics?.closeAllConnections();
    metrics?.close();
    resolveDone();
  };
  process.once('SIGTERM', () => void shutdown(0));
  process.once('SIGINT', () => void shutdown(0));

  if (flags.leaderElect) {
    const leaseClient = new KubeClient(kc);
    elector = new LeaderElector({
      client: leaseClient,
      namespace: flags.leaseNamespace,
      name: flags.leaseName,
      identity: flags.identity,
      log,
      onStartedLeading: async () => {
        running = true;
        await controller.start();
      },
      // like client-go: a replica that lost the lease exits and starts afresh (caches and expectations)
      onStoppedLeading: () => {
        if (running) {
          log.error('leader election lost, exiting');
          running = false;
          void controller.stop().finally(() => {
            exitCode = exitCode || 1;
            resolveDone();
          });
        }
      },
    });
    elector.start();
    log.info('waiting for the lease', {
      lease: `${flags.leaseNamespace}/${flags.leaseName}`,
      identity: flags.identity,
    });
  } else {
    running = true;
    await controller.start();
  }
  await done;
  return exitCode;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(
      `${JSON.stringify({ component: 'virt-controller', level: 'error', msg: 'fatal', reason: e instanceof Error ? e.message : String(e) })}\n`,
    );
    process.exit(1);
  },
);
