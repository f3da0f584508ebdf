// Running the real tools (ip, nft, sysctl): argument arrays, never a shell. With `netns`
// (a namespace file such as /run/netns/NAME or /proc/PID/ns/net) the tool runs inside that network
// namespace through nsenter, which is how a privileged agent reaches a Pod's namespace.
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';

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

const SYSCTL_RE = /^net\.(ipv4|ipv6)(\.[A-Za-z0-9_-]+)+$/;
const WRITE_SYSCTL = "require('fs').writeFileSync(process.argv[1], process.argv[2])";

/**
 * Sets a network sysctl (`net.ipv4.ip_forward`) of `netns`, or of the caller's own namespace. /proc/sys/net
 * shows the namespace of the process that opens it, so inside another namespace the write is done by this
 * same Node binary under nsenter (fixed code, the path and value as arguments): no sysctl binary (procps) is
 * needed in the image, and no shell.
 */
export async function setSysctl(name: string, value: string, o: NetnsOption = {}): Promise<void> {
  if (!SYSCTL_RE.test(name) || !/^[0-9]+$/.test(value))
    throw new NetworkSetupError(`sysctl ${name}=${value}: not a network sysctl with a numeric value`);
  const file = `/proc/sys/${name.replace(/\./g, '/')}`;
  if (!o.netns) {
    await writeFile(file, value).catch((e: NodeJS.ErrnoException) => {
      throw new NetworkSetupError(`sysctl ${name}=${value} failed: ${e.code ?? e.message}`);
    });
    return;
  }
  await run(process.execPath, ['-e', WRITE_SYSCTL, file, value], o).catch((e: Error) => {
    throw new NetworkSetupError(`sysctl ${name}=${value} in ${o.netns} failed: ${e.message}`);
  });
}
