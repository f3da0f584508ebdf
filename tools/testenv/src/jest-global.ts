// One control plane for a whole jest run: in jest.config.js
//   globalSetup: '@kubevirt-ts/testenv/jest-global-setup', globalTeardown: '@kubevirt-ts/testenv/jest-global-teardown'
// Test files then read process.env.KUBECONFIG (workers inherit it) instead of starting their own.
import { startTestEnv, type TestEnv } from './index.js';

const KEY = '__kubevirtTsTestEnv';
type G = typeof globalThis & { [KEY]?: TestEnv };

export async function globalSetup(): Promise<void> {
  const env = await startTestEnv();
  (globalThis as G)[KEY] = env;
  process.env.KUBECONFIG = env.kubeconfigPath;
  process.env.KVTS_TESTENV_SERVER = env.server;
}

export async function globalTeardown(): Promise<void> {
  const env = (globalThis as G)[KEY];
  delete (globalThis as G)[KEY];
  await env?.stop();
}
