// Helpers of the handler e2e suites: a test control plane with deploy/'s CRDs.
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { parseManifests } from '@kubevirt-ts/api';
import { serverSideApply, startTestEnv, type KubeObject, type TestEnv } from '@kubevirt-ts/testenv';
import { REPO } from '../launcher/helpers.js';

/**
 * kube-apiserver + etcd (tools/testenv) with deploy/crds applied server-side as `fieldManager` and the namespace
 * `ns` created; its kubeconfig and the clients the suites use.
 */
export async function startCrdTestEnv(
  ns: string,
  fieldManager: string,
): Promise<{ env: TestEnv; kc: KubeConfig; custom: CustomObjectsApi; core: CoreV1Api }> {
  const env = await startTestEnv();
  const kc = env.kubeConfig();
  const custom = kc.makeApiClient(CustomObjectsApi);
  const core = kc.makeApiClient(CoreV1Api);
  const crdDir = path.join(REPO, 'deploy', 'crds');
  const crds = readdirSync(crdDir)
    .filter((f) => f.endsWith('.yaml'))
    .flatMap((f) => parseManifests(readFileSync(path.join(crdDir, f), 'utf8')) as KubeObject[]);
  await serverSideApply(kc, crds, { fieldManager });
  await core.createNamespace({ body: { metadata: { name: ns } } });
  return { env, kc, custom, core };
}
