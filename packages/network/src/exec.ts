// Running the real tools (ip, nft, sysctl): argument arrays, never a shell. With `netns`
// (a namespace file such as /run/netns/NAME or /proc/PID/ns/net) the tool runs inside that network
// namespace through nsenter, which is how a privileged agent reaches a Pod's namespace.
import { spawn } from 'node:child_process';

export interface NetnsOption {
  /** network namespace file to run in; absent: the caller's own namespace */
  netns?: string;
}

export class NetworkSetupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NetworkSetupError';
  }
}

/** argv for `cmd args` inside `netns` (or as is). */
export function inNetns(netns: string | undefined, cmd: string, args: readonly string[]): string[] {
  return netns ? ['nsenter', `--net=${netns}`, '--', cmd, ...args] : [cmd, ...args];
}

/** Runs a tool to completion; resolves with stdout, rejects with a NetworkSetupError quoting its stderr. */
export function run(
  cmd: string,
  args: readonly string[],
  opts: NetnsOption & { input?: string } = {},
): Promise<string> {
  const argv = inNetns(opts.netns, cmd, args);
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('error', (e) =>
      reject(new NetworkSetupError(`${cmd}: cannot run (${(e as NodeJS.ErrnoException).code ?? e.message})`)),
    );
    child.on('close', (code, signal) => {
      if (code === 0) resolve(out);
      else
        reject(
          new NetworkSetupError(
            `${cmd} ${args.join(' ')} failed (${signal ?? `exit ${code}`}): ${err.trim() || out.trim()}`,
          ),
        );
    });
    child.stdin.on('error', () => {}); // the tool may exit before reading its input
    child.stdin.end(opts.input ?? '');
  });
}

/** `ip -json ...` parsed. */
export async function ipJson<T = unknown>(args: readonly string[], opts: NetnsOption = {}): Promise<T> {
  const out = await run('ip', ['-json', ...args], opts);
  return (out.trim() ? JSON.parse(out) : []) as T;
}
