#!/usr/bin/env node
// kvts-testenv [--keep] -- COMMAND [ARGS...]
// Starts etcd + kube-apiserver, runs COMMAND with KUBECONFIG (and KVTS_TESTENV_SERVER) exported, then stops
// everything, also when COMMAND fails or on SIGINT/SIGTERM/SIGHUP. Exits with COMMAND's exit status.
import { spawn } from 'node:child_process';
import { dirname } from 'node:path';
import { createLogger } from '@kubevirt-ts/log';
import { startTestEnv, type TestEnv } from './index.js';

const logger = createLogger('testenv');

function usage(problem?: string): never {
  if (problem) process.stderr.write(`testenv: ${problem}\n`);
  process.stderr.write('usage: tools/testenv.sh [--keep] -- COMMAND [ARGS...]\n');
  process.exit(2);
}

async function main(): Promise<number> {
  const argv = process.argv.slice(2);
  const sep = argv.indexOf('--');
  if (sep < 0 || sep === argv.length - 1) usage('a COMMAND after -- is required');
  const flags = argv.slice(0, sep);
  const command = argv.slice(sep + 1);
  const keepDir = flags.includes('--keep');
  for (const f of flags) if (f !== '--keep') usage(`unknown option ${f}`);

  let env: TestEnv | undefined;
  let child: ReturnType<typeof spawn> | undefined;
  let signalled: NodeJS.Signals | undefined;
  const onSignal = (sig: NodeJS.Signals): void => {
    logger.info('signal received, stopping', { signal: sig });
    signalled = sig;
    if (child && child.exitCode === null) child.kill(sig);
  };
  for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(s, onSignal);

  try {
    env = await startTestEnv({ keepDir, log: (msg, fields) => logger.info(msg, fields) });
    if (signalled) return signalled === 'SIGINT' ? 130 : 143;
    logger.info('running command', { command: command[0], kubeconfig: env.kubeconfigPath });
    child = spawn(command[0]!, command.slice(1), {
      stdio: 'inherit',
      env: {
        ...process.env,
        KUBECONFIG: env.kubeconfigPath,
        KVTS_TESTENV_SERVER: env.server,
        // the kubectl built with kube-apiserver comes first on PATH
        PATH: [env.binaries.kubectl ? dirname(env.binaries.kubectl) : undefined, process.env.PATH]
          .filter(Boolean)
          .join(':'),
      },
    });
    if (signalled) child.kill(signalled); // a signal that came while spawning
    const code = await new Promise<number>((resolve) => {
      child!.on('error', (e) => {
        logger.error('cannot run command', { command: command[0], reason: e.message });
        resolve(127);
      });
      child!.on('exit', (c, sig) =>
        resolve(c ?? (sig ? 128 + (sig === 'SIGKILL' ? 9 : sig === 'SIGINT' ? 2 : 15) : 1)),
      );
    });
    return code;
  } catch (e) {
    logger.error('testenv failed', { reason: (e as Error).message });
    return 1;
  } finally {
    if (env) {
      await env.stop();
      logger.info('stopped', keepDir ? { dir: env.dir } : {});
    }
  }
}

main().then((code) => process.exit(code));
