// Certificate files that change under a running process: a Secret mounted by the kubelet is replaced atomically
// (a new `..data` directory, then a symlink swap), so watching inodes is unreliable; the files are read again every
// `intervalMs` and compared by content. A certificate and key read across a swap may not belong together: such a
// pair is skipped until the next read. What changed is handed over; the caller reloads its TLS context.
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { Logger } from '@kubevirt-ts/log';

export interface TlsFiles {
  certFile: string;
  keyFile: string;
  caFile: string;
}
export interface TlsMaterial {
  cert: Buffer;
  key: Buffer;
  ca: Buffer;
}

export async function readTlsFiles(f: TlsFiles): Promise<TlsMaterial> {
  const [cert, key, ca] = await Promise.all([readFile(f.certFile), readFile(f.keyFile), readFile(f.caFile)]);
  return { cert, key, ca };
}

/**
 * Reads `files` every `intervalMs` (default 10 s); calls `onChange` with the new material whenever it differs from
 * what was last handed over (`initial` at first). Errors (a file missing for a moment, a mismatched pair) are
 * logged and retried at the next read.
 */
export function watchTlsFiles(
  files: TlsFiles,
  initial: TlsMaterial,
  onChange: (m: TlsMaterial) => void,
  o: { intervalMs?: number; log?: Logger } = {},
): { stop(): void; check(): Promise<boolean> } {
  let last = initial;
  let busy = false;
  const check = async (): Promise<boolean> => {
    if (busy) return false;
    busy = true;
    try {
      const m = await readTlsFiles(files);
      if (m.cert.equals(last.cert) && m.key.equals(last.key) && m.ca.equals(last.ca)) return false;
      const x = new X509Certificate(m.cert);
      if (!x.checkPrivateKey(createPrivateKey(m.key))) {
        o.log?.warn('certificate and key do not match (read during an update?): kept the old ones', {
          certFile: files.certFile,
        });
        return false;
      }
      onChange(m);
      last = m;
      o.log?.info('reloaded the TLS certificate', {
        certFile: files.certFile,
        serial: x.serialNumber,
        validTo: new Date(x.validTo).toISOString(),
      });
      return true;
    } catch (e) {
      o.log?.error('could not reload the TLS certificate', {
        certFile: files.certFile,
        reason: e instanceof Error ? e.message : String(e),
      });
      return false;
    } finally {
      busy = false;
    }
  };
  const timer = setInterval(() => void check(), o.intervalMs ?? 10_000);
  timer.unref();
  return { stop: () => clearInterval(timer), check };
}
