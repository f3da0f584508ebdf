import { spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import path from 'node:path';

export interface ExecResult {
  stdout: string;
  stderr: string;
}

/** Runs a program with an argument array (never a shell); rejects with its stderr when it exits non-zero. */
export function run(file: string, args: string[], opts: { timeoutMs?: number } = {}): Promise<ExecResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: opts.timeoutMs ?? 120_000,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', (e) => reject(new Error(`${file}: ${e.message}`)));
    child.on('close', (code, signal) => {
      if (code === 0) resolve({ stdout, stderr });
      else
        reject(
          new Error(
            `${path.basename(file)} ${signal ? `killed by ${signal}` : `exited ${code}`}: ${stderr.trim() || stdout.trim()}`,
          ),
        );
    });
  });
}

/** Finds a program on PATH (and the sbin dirs), or undefined. */
export function which(name: string): string | undefined {
  const dirs = (process.env.PATH ?? '')
    .split(':')
    .concat(['/usr/local/sbin', '/usr/sbin', '/sbin', '/usr/bin', '/bin']);
  for (const d of dirs) {
    if (!d) continue;
    const p = path.join(d, name);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      /* next */
    }
  }
  return undefined;
}
