#!/usr/bin/env node
// virt-operator: flags, wiring, signals. The logic lives in @kubevirt-ts/operator.
import { LiteKubeConfig } from '@kubevirt-ts/controller-runtime';
import { createLogger } from '@kubevirt-ts/log';
import { VirtOperator } from '@kubevirt-ts/operator';
import { USAGE, UsageError, parseOperatorFlags } from './flags.js';

async function main(): Promise<number> {
  let flags;
  try {
    flags = parseOperatorFlags(process.argv.slice(2), process.env);
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`virt-operator: ${e.message}\n${USAGE}\n`);
      return 2;
    }
    throw e;
  }
  const log = createLogger({ component: 'virt-operator', level: flags.logLevel });
  const kc = flags.kubeconfig ? LiteKubeConfig.fromFile(flags.kubeconfig) : LiteKubeConfig.fromCluster();
  const operator = new VirtOperator({
    kubeConfig: kc,
    namespace: flags.namespace,
    version: flags.kubevirtVersion,
    defaultConfiguration: flags.defaultConfiguration,
    caBundles: flags.caBundles,
    log,
  });
  const stopped = new Promise<void>((resolve) => {
    const stop = () => void operator.stop().finally(resolve);
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
  await operator.start();
  log.info('watching the KubeVirt CR', { namespace: flags.namespace, version: flags.kubevirtVersion });
  await stopped;
  return 0;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    process.stderr.write(
      `${JSON.stringify({ component: 'virt-operator', level: 'error', msg: 'fatal', reason: e instanceof Error ? e.message : String(e) })}\n`,
    );
    process.exit(1);
  },
);
