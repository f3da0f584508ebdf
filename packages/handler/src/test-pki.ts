// Test helper: a CA and certificates it signs, made with openssl (the real tool, not the code under test).
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

/** openssl: a CA and certificates it signs (ECDSA P-256), as PEM strings */
export async function openSslPki(dir: string): Promise<{
  ca: string;
  issue(cn: string, eku: string): Promise<{ cert: string; key: string }>;
}> {
  const run = (args: string[]) =>
    new Promise<void>((resolve, reject) =>
      execFile('openssl', args, (err, _o, e) =>
        err ? reject(new Error(`${err.message}: ${e}`)) : resolve(),
      ),
    );
  const d = await mkdtemp(path.join(dir, 'pki-'));
  const f = (n: string) => path.join(d, n);
  await run(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', f('ca.key')]);
  await run([
    'req',
    '-x509',
    '-new',
    '-key',
    f('ca.key'),
    '-subj',
    '/CN=kubevirt-ca',
    '-days',
    '1',
    '-out',
    f('ca.crt'),
  ]);
  return {
    ca: await readFile(f('ca.crt'), 'utf8'),
    async issue(cn, eku) {
      await run(['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', f(`${cn}.key`)]);
      await run(['req', '-new', '-key', f(`${cn}.key`), '-subj', `/CN=${cn}`, '-out', f(`${cn}.csr`)]);
      await writeFile(
        f(`${cn}.ext`),
        `basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=${eku}\n`,
      );
      await run([
        'x509',
        '-req',
        '-in',
        f(`${cn}.csr`),
        '-CA',
        f('ca.crt'),
        '-CAkey',
        f('ca.key'),
        '-CAcreateserial',
        '-days',
        '1',
        '-extfile',
        f(`${cn}.ext`),
        '-out',
        f(`${cn}.crt`),
      ]);
      return { cert: await readFile(f(`${cn}.crt`), 'utf8'), key: await readFile(f(`${cn}.key`), 'utf8') };
    },
  };
}
