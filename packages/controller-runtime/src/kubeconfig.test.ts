import { expect, jest, test } from '@jest/globals';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RequestOptions } from 'node:https';
import { KubeConfigError, LiteKubeConfig } from './kubeconfig.js';

const dir = mkdtempSync(join(tmpdir(), 'kc-'));
const b64 = (s: string) => Buffer.from(s).toString('base64');
function kubeconfig(
  user: string,
  cluster = `    server: https://127.0.0.1:6443\n    certificate-authority-data: ${b64('CA')}`,
) {
  const f = join(dir, `kc-${Math.random()}`);
  writeFileSync(
    f,
    `apiVersion: v1
kind: Config
current-context: c
contexts:
- name: other
  context: { cluster: nope, user: nope }
- name: c
  context: { cluster: k, user: u }
clusters:
- name: k
  cluster:
${cluster}
users:
- name: u
  user:
${user}
`,
  );
  return f;
}
async function applied(kc: LiteKubeConfig): Promise<RequestOptions> {
  const o: RequestOptions = { headers: { Accept: 'application/json' } };
  await kc.applyToHTTPSOptions(o);
  return o;
}

test('the current context: server, CA data, client certificate and key from files relative to the kubeconfig', async () => {
  writeFileSync(join(dir, 'c.crt'), 'CERT');
  writeFileSync(join(dir, 'c.key'), 'KEY');
  const kc = LiteKubeConfig.fromFile(kubeconfig('    client-certificate: c.crt\n    client-key: c.key'));
  expect(kc.getCurrentCluster()).toEqual({ server: 'https://127.0.0.1:6443' });
  const o = await applied(kc);
  expect([String(o.ca), String(o.cert), String(o.key)]).toEqual(['CA', 'CERT', 'KEY']);
  expect(o.headers).toEqual({ Accept: 'application/json' });
});

test('a bearer token, and a token file read again once it is a minute old', async () => {
  expect((await applied(LiteKubeConfig.fromFile(kubeconfig('    token: abc')))).headers).toMatchObject({
    Authorization: 'Bearer abc',
  });
  const tf = join(dir, 'token');
  writeFileSync(tf, 'one\n');
  const kc = LiteKubeConfig.fromFile(kubeconfig(`    tokenFile: ${tf}`));
  expect((await applied(kc)).headers).toMatchObject({ Authorization: 'Bearer one' });
  writeFileSync(tf, 'two\n');
  const now = Date.now();
  const spy = jest.spyOn(Date, 'now').mockReturnValue(now + 61_000);
  try {
    expect((await applied(kc)).headers).toMatchObject({ Authorization: 'Bearer two' });
  } finally {
    spy.mockRestore();
  }
});

test('in cluster: the service account token and CA, the service address (IPv6 in brackets)', async () => {
  const sa = mkdtempSync(join(tmpdir(), 'sa-'));
  writeFileSync(join(sa, 'ca.crt'), 'SACA');
  writeFileSync(join(sa, 'token'), 'satoken');
  const env = { ...process.env };
  try {
    process.env['KUBERNETES_SERVICE_HOST'] = 'fd00::1';
    process.env['KUBERNETES_SERVICE_PORT'] = '443';
    const kc = LiteKubeConfig.fromCluster(sa);
    expect(kc.getCurrentCluster()).toEqual({ server: 'https://[fd00::1]:443' });
    const o = await applied(kc);
    expect(String(o.ca)).toBe('SACA');
    expect(o.headers).toMatchObject({ Authorization: 'Bearer satoken' });
    delete process.env['KUBERNETES_SERVICE_HOST'];
    expect(() => LiteKubeConfig.fromCluster(sa)).toThrow(/KUBERNETES_SERVICE_HOST/);
  } finally {
    process.env = env;
  }
});

test('what it cannot do is refused naming the field', () => {
  expect(() => LiteKubeConfig.fromFile(kubeconfig('    exec: { command: aws }'))).toThrow(
    /users\[u\]\.exec: not supported/,
  );
  expect(() =>
    LiteKubeConfig.fromFile(kubeconfig('    token: x', '    insecure-skip-tls-verify: true')),
  ).toThrow(KubeConfigError);
  expect(() =>
    LiteKubeConfig.fromFile(kubeconfig('    token: x', '    insecure-skip-tls-verify: true')),
  ).toThrow(/clusters\[k\]\.server is not set/);
});
