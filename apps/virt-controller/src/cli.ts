#!/usr/bin/env node
// virt-controller: flags, wiring, signals. The controllers live in @kubevirt-ts/virt-controller-core.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { hostname } from 'node:os';
import {
  KubeClient,
  LeaderElector,
  LiteKubeConfig,
  PROMETHEUS_CONTENT_TYPE,
} from '@kubevirt-ts/controller-runtime';
import { createLogger } from '@kubevirt-ts/log';
import {
  VirtController,
  serviceDnsNames,
  startManagedWebhooks,
  startWebhookServer,
  type WebhookServer,
  HandlerCertManager,
  HANDLER_CERTS_SECRET,
} from '@kubevirt-ts/virt-controller-core';
import {
  API_SERVICE as SUBRESOURCES_API_SERVICE,
  SERVICE as SUBRESOURCES_SERVICE,
  handlerConnector,
  type HandlerConnector,
  loadRequestHeaderConfig,
  startSubresourceServer,
  type RequestHeaderConfig,
  type SubresourceServer,
} from '@kubevirt-ts/subresources';
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
  // not client-node's KubeConfig: it loads client-node's API models (~80 MiB RSS) this process never uses
  const kc = flags.kubeconfig ? LiteKubeConfig.fromFile(flags.kubeconfig) : LiteKubeConfig.fromCluster();

  const controller = new VirtController({
    kubeConfig: kc,
    log,
    configNamespace: flags.configNamespace,
    configName: flags.configName,
    baseConfig: { launcherImage: flags.launcherImage },
    vmWorkers: flags.vmWorkers,
    vmiWorkers: flags.vmiWorkers,
    heartbeatTimeoutMs: flags.heartbeatTimeoutSeconds * 1000,
    identity: flags.identity,
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
  // the aggregated API subresources.kubevirt.io (virtctl start/stop/...): every replica, leader or not, with the
  // certificate the webhooks use (managed in --webhook-secret, or --tls-*)
  let subresources: SubresourceServer | undefined;
  let subresourcesCert: { cert: string | Buffer; key: string | Buffer } | undefined;
  // admission is served by every replica, leader or not; new VMIs get the defaults of the KubeVirt CR's configuration
  const kubeVirt = { namespace: flags.configNamespace, name: flags.configName };
  let webhooks: Pick<WebhookServer, 'close' | 'drain' | 'port'> | undefined;
  if (flags.webhookSecret) {
    const certClient = new KubeClient(kc);
    const managed = await startManagedWebhooks({
      client: certClient,
      namespace: flags.webhookNamespace,
      secretName: flags.webhookSecret,
      mutatingWebhook: flags.mutatingWebhook,
      validatingWebhook: flags.validatingWebhook,
      // one certificate for both servers: the webhooks' Service and the subresource API's (virt-api)
      sans: [
        ...serviceDnsNames(flags.webhookService, flags.webhookNamespace),
        ...(flags.subresourcesPort ? serviceDnsNames(SUBRESOURCES_SERVICE, flags.webhookNamespace) : []),
        ...flags.webhookExtraSans,
      ],
      apiService: flags.subresourcesPort ? SUBRESOURCES_API_SERVICE : undefined,
      onCertificate: (cert, key) => {
        if (subresources) subresources.setCertificate(cert, key);
        else subresourcesCert = { cert, key };
      },
      kubeVirt,
      caValidityMs: flags.webhookCaValiditySeconds * 1000,
      certValidityMs: flags.webhookCertValiditySeconds * 1000,
      checkIntervalMs: flags.webhookCheckSeconds * 1000,
      port: flags.webhookPort,
      log,
    });
    webhooks = {
      port: managed.server.port,
      drain: () => managed.server.drain(),
      close: async (graceMs) => {
        await managed.close(graceMs);
        certClient.close();
      },
    };
    log.info('serving admission webhooks', { port: managed.server.port, secret: flags.webhookSecret });
  } else if (flags.tlsCertFile && flags.tlsKeyFile) {
    const load = () => ({ cert: readFileSync(flags.tlsCertFile!), key: readFileSync(flags.tlsKeyFile!) });
    // the validating webhook reads the instance types and preferences VMs name
    const hookClient = new KubeClient(kc);
    const server = await startWebhookServer({
      ...load(),
      port: flags.webhookPort,
      log,
      client: hookClient,
      namespace: flags.webhookNamespace,
      kubeVirt,
    });
    webhooks = {
      port: server.port,
      drain: () => server.drain(),
      close: async (graceMs) => {
        await server.close(graceMs);
        hookClient.close();
      },
    };
    log.info('serving admission webhooks', { port: server.port });
    // a rotated certificate (e.g. a re-mounted Secret) is picked up on SIGHUP
    process.on('SIGHUP', () => {
      try {
        const c = load();
        server.setCertificate(c.cert, c.key);
        log.info('reloaded the webhook certificate');
      } catch (e) {
        log.error('could not reload the webhook certificate', {
          reason: e instanceof Error ? e.message : String(e),
        });
      }
    });
  }
  const loadTls = () => ({ cert: readFileSync(flags.tlsCertFile!), key: readFileSync(flags.tlsKeyFile!) });
  if (!subresourcesCert && flags.tlsCertFile && flags.tlsKeyFile) subresourcesCert = loadTls();
  // an API server without the aggregation layer (no --requestheader-client-ca-file) cannot front this API: then
  // the rest of virt-controller still runs, and the log says why the subresources are not served
  let requestHeader: RequestHeaderConfig | undefined;
  if (subresourcesCert && flags.subresourcesPort) {
    const rhClient = new KubeClient(kc);
    try {
      requestHeader = await loadRequestHeaderConfig(rhClient);
    } catch (e) {
      log.error('not serving subresources.kubevirt.io (virtctl start/stop/...)', {
        reason: e instanceof Error ? e.message : String(e),
      });
    } finally {
      rhClient.close();
    }
  }
  // mutual TLS to virt-handler: files, or certificates this process makes (Secrets shared with the DaemonSet)
  let handlerTls: { cert: string | Buffer; key: string | Buffer; ca: string | Buffer } | undefined;
  let handlerCerts: HandlerCertManager | undefined;
  // the connector is made once the first certificates exist; renewals after that go to it
  const renewed: { connector?: HandlerConnector } = {};
  if (flags.handlerClient)
    handlerTls = {
      cert: readFileSync(flags.handlerClient.certFile),
      key: readFileSync(flags.handlerClient.keyFile),
      ca: readFileSync(flags.handlerClient.caFile),
    };
  else if (flags.manageHandlerCerts && flags.subresourcesPort) {
    // made, then renewed in place: a renewed client certificate or CA bundle goes to the connector below
    handlerCerts = new HandlerCertManager({
      client: new KubeClient(kc),
      namespace: flags.webhookNamespace,
      caValidityMs: flags.handlerCaValiditySeconds * 1000,
      certValidityMs: flags.handlerCertValiditySeconds * 1000,
      log,
      onClientTls: (t) => renewed.connector?.setTls(t),
    });
    handlerTls = await handlerCerts.start();
    log.info('handler certificates ready', { secret: HANDLER_CERTS_SECRET });
  }
  const connector = handlerTls
    ? handlerConnector({
        client: new KubeClient(kc),
        ...handlerTls,
        port: flags.handlerPort,
        handlerNamespace: flags.handlerClient?.namespace ?? flags.webhookNamespace,
      })
    : undefined;
  renewed.connector = connector;
  if (subresourcesCert && flags.subresourcesPort && requestHeader) {
    subresources = await startSubresourceServer({
      ...subresourcesCert,
      requestHeader,
      kubeConfig: kc,
      host: '0.0.0.0',
      port: flags.subresourcesPort,
      log,
      node: connector,
    });
    log.info('serving subresources.kubevirt.io', { port: subresources.port });
    process.on('SIGHUP', () => {
      if (!flags.tlsCertFile) return;
      try {
        const c = loadTls();
        subresources!.setCertificate(c.cert, c.key);
      } catch {
        /* reported by the webhook reload above */
      }
    });
  }
  let exitCode = 0;
  let resolveDone!: () => void;
  const done = new Promise<void>((r) => (resolveDone = r));
  let elector: LeaderElector | undefined;
  let running = false;

  let shuttingDown = false;
  const shutdown = async (code: number) => {
    shuttingDown = true;
    exitCode = code;
    // the API server may still send webhook and subresource calls here until the endpoints drop this replica
    // (a drain evicts it while evicting launcher Pods, whose eviction webhook must then not fail): /readyz fails
    // at once, the servers go on for --shutdown-delay, then the calls in flight get as long to finish
    webhooks?.drain();
    const grace = flags.shutdownDelaySeconds * 1000;
    const delayed = new Promise((r) => setTimeout(r, grace));
    await elector?.stop();
    if (running) await controller.stop();
    await delayed;
    await Promise.all([webhooks?.close(grace), subresources?.close(grace)]);
    await handlerCerts?.stop();
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
        // stop() on SIGTERM releases the Lease and calls this too: that is no lost election
        if (running && !shuttingDown) {
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
