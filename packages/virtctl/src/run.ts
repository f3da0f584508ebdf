// virtctl's verbs. run() takes argv and writers and returns the exit status, so the bin (cli.ts) and
// the tests share one path: 0 done, 1 the cluster refused or could not be reached, 2 bad usage.
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { KubeApiError, KubeClient } from '@kubevirt-ts/controller-runtime';
import { StreamError, attachConsole, openStream, proxyVnc, worthRetrying, type Terminal } from './stream.js';
import {
  CREATE_INSTANCETYPE_FLAGS,
  CREATE_PREFERENCE_FLAGS,
  CREATE_VM_FLAGS,
  createInstancetype,
  createPreference,
  createVm,
  render,
  type CreateCtx,
} from './create.js';
import { UsageError, boolAssignments, refuseUnimplemented, type FlagValues, type Flags } from './flags.js';

/** this package's version, as `v0.1.0` */
export const CLIENT_VERSION = `v${(JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version}`;
const SUB = '/apis/subresources.kubevirt.io/v1';

export interface Io {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  env: NodeJS.ProcessEnv;
  /** the terminal, for console and vnc (the bin passes process.stdin/stdout) */
  terminal?: { stdin: Terminal['stdin']; stdout: Terminal['stdout'] };
}

const GLOBAL: Flags = {
  kubeconfig: {
    type: 'string',
    help: 'path to the kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)',
  },
  context: { type: 'string', help: 'the kubeconfig context to use (default: its current-context)' },
  namespace: { type: 'string', short: 'n', help: "the namespace (default: the context's, else default)" },
  help: { type: 'boolean', short: 'h', help: 'show this help' },
};
const DRY_RUN: Flags = {
  'dry-run': { type: 'boolean', help: 'only ask the server to validate; nothing changes' },
};
const FORCE: Flags = {
  force: { type: 'boolean', help: 'with --grace-period: stop at once instead of waiting for the guest' },
  'grace-period': {
    type: 'string',
    help: 'seconds the guest gets to shut down (with --force; restart accepts only 0)',
  },
};

interface Verb {
  usage: string;
  summary: string;
  flags: Flags;
  /** positional arguments after the verb */
  args: string[];
  run?(ctx: Ctx, args: string[], flags: Record<string, string | boolean | undefined>): Promise<void>;
  /** a verb that needs no cluster (create ...): prints what it builds */
  offline?(flags: FlagValues, ctx: CreateCtx): unknown;
}

interface Ctx {
  client: KubeClient;
  kc: KubeConfig;
  namespace: string;
  io: Io;
}

const vmPath = (
  ns: string,
  kind: 'virtualmachines' | 'virtualmachineinstances',
  name: string,
  verb: string,
) => `${SUB}/namespaces/${encodeURIComponent(ns)}/${kind}/${encodeURIComponent(name)}/${verb}`;
const dryRun = (f: Record<string, unknown>) => (f['dry-run'] ? { dryRun: ['All'] } : {});

/** --grace-period and --force go together (upstream's rule) */
function gracePeriod(f: Record<string, string | boolean | undefined>): number | undefined {
  const g = f['grace-period'];
  if (g === undefined && !f['force']) return undefined;
  if (g === undefined || !f['force'])
    throw new UsageError('Must both use --force=true and set --grace-period.');
  if (typeof g !== 'string' || !/^-?\d+$/.test(g))
    throw new UsageError(`--grace-period: must be a whole number of seconds, got "${String(g)}"`);
  return Number(g);
}

const put = (ctx: Ctx, path: string, body: unknown) => ctx.client.request('PUT', path, body);
const scheduled = (ctx: Ctx, what: 'VM' | 'VMI', name: string, verb: string) =>
  ctx.io.stdout(`${what} ${name} was scheduled to ${verb}\n`);

/** wraps a request so its failure reads like upstream virtctl's: "Error starting VirtualMachine <reason>" */
async function attempt(prefix: string, fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
  } catch (e) {
    throw new Error(`${prefix}${reasonOf(e)}`);
  }
}

/** the server's message: a Status's message, a plain-text body, or the transport error */
export function reasonOf(e: unknown): string {
  if (e instanceof KubeApiError) {
    try {
      const s = JSON.parse(e.body) as { message?: string };
      if (s.message) return s.message;
    } catch {
      /* plain text */
    }
    const text = e.body.trim();
    if (e.status === 401)
      return `the server has asked for the client to provide credentials${text ? ` (${text})` : ''}`;
    return text || `the server answered HTTP ${e.status} to ${e.method} ${e.path}`;
  }
  return e instanceof Error ? e.message : String(e);
}

const softRebootVerb = (command: string): Verb => ({
  usage: `${command} NAME`,
  summary: 'Soft-reboot a virtual machine instance (guest agent, else ACPI)',
  flags: {},
  args: ['NAME'],
  async run(ctx, [name]) {
    await attempt(`Error soft rebooting VirtualMachineInstance ${name}: `, () =>
      put(ctx, vmPath(ctx.namespace, 'virtualmachineinstances', name!, 'softreboot'), {}),
    );
    scheduled(ctx, 'VMI', name!, 'soft-reboot');
  },
});

const pauseVerb = (verb: 'pause' | 'unpause'): Verb => ({
  usage: `${verb} (vm|vmi) NAME`,
  summary: `${verb === 'pause' ? 'Pause' : 'Unpause'} a virtual machine (vm: the instance of that VM)`,
  flags: DRY_RUN,
  args: ['vm|vmi', 'NAME'],
  async run(ctx, [kind, name], f) {
    if (kind !== 'vm' && kind !== 'vmi')
      throw new UsageError(`the first argument must be "vm" or "vmi", got "${kind}"`);
    const ing = verb === 'pause' ? 'pausing' : 'unpausing';
    if (kind === 'vm') {
      await attempt(`Error getting VirtualMachine ${name}: `, () =>
        ctx.client.request(
          'GET',
          `/apis/kubevirt.io/v1/namespaces/${encodeURIComponent(ctx.namespace)}/virtualmachines/${encodeURIComponent(name!)}`,
        ),
      );
    }
    await attempt(`Error ${ing} VirtualMachineInstance ${name}: `, () =>
      put(ctx, vmPath(ctx.namespace, 'virtualmachineinstances', name!, verb), dryRun(f)),
    );
    scheduled(ctx, 'VMI', name!, verb);
  },
});

/** a guest agent read: the server's JSON, printed indented (upstream prints it the same way) */
const getVerb = (subresource: string, summary: string, verb = subresource): Verb => ({
  usage: `${verb} NAME`,
  summary,
  flags: {},
  args: ['NAME'],
  async run(ctx, [name]) {
    let out: unknown;
    await attempt('', async () => {
      out = await ctx.client.request(
        'GET',
        vmPath(ctx.namespace, 'virtualmachineinstances', name!, subresource),
      );
    });
    ctx.io.stdout(`${JSON.stringify(out, null, 2)}\n`);
  },
});

const createVerb = (what: string, summary: string, flags: Flags, build: Verb['offline']): Verb => ({
  usage: `create ${what}`,
  summary,
  flags,
  args: [],
  offline: build,
});

export const VERBS: Record<string, Verb> = {
  start: {
    usage: 'start NAME',
    summary: 'Start a virtual machine',
    flags: { paused: { type: 'boolean', help: 'start the VM paused' }, ...DRY_RUN },
    args: ['NAME'],
    async run(ctx, [name], f) {
      await attempt('Error starting VirtualMachine ', () =>
        put(ctx, vmPath(ctx.namespace, 'virtualmachines', name!, 'start'), {
          ...(f['paused'] ? { paused: true } : {}),
          ...dryRun(f),
        }),
      );
      scheduled(ctx, 'VM', name!, 'start');
    },
  },
  stop: {
    usage: 'stop NAME',
    summary: 'Stop a virtual machine',
    flags: { ...FORCE, ...DRY_RUN },
    args: ['NAME'],
    async run(ctx, [name], f) {
      const g = gracePeriod(f);
      await attempt(
        g === undefined ? 'Error stopping VirtualMachine ' : 'Error force stopping VirtualMachine, ',
        () =>
          put(ctx, vmPath(ctx.namespace, 'virtualmachines', name!, 'stop'), {
            ...(g === undefined ? {} : { gracePeriod: g }),
            ...dryRun(f),
          }),
      );
      scheduled(ctx, 'VM', name!, 'stop');
    },
  },
  restart: {
    usage: 'restart NAME',
    summary: 'Restart a virtual machine',
    flags: { ...FORCE, ...DRY_RUN },
    args: ['NAME'],
    async run(ctx, [name], f) {
      const g = gracePeriod(f);
      await attempt(
        g === undefined ? 'Error restarting VirtualMachine ' : 'Error force restarting VirtualMachine, ',
        () =>
          put(ctx, vmPath(ctx.namespace, 'virtualmachines', name!, 'restart'), {
            ...(g === undefined ? {} : { gracePeriodSeconds: g }),
            ...dryRun(f),
          }),
      );
      scheduled(ctx, 'VM', name!, 'restart');
    },
  },
  pause: pauseVerb('pause'),
  unpause: pauseVerb('unpause'),
  // upstream's command is `soft-reboot` (and so is its message); `softreboot`, the subresource's name, works too
  'soft-reboot': softRebootVerb('soft-reboot'),
  softreboot: softRebootVerb('softreboot'),
  migrate: {
    usage: 'migrate NAME',
    summary: 'Live-migrate a virtual machine to another node',
    flags: DRY_RUN,
    args: ['NAME'],
    async run(ctx, [name], f) {
      await attempt('Error migrating VirtualMachine ', () =>
        put(ctx, vmPath(ctx.namespace, 'virtualmachines', name!, 'migrate'), dryRun(f)),
      );
      scheduled(ctx, 'VM', name!, 'migrate');
    },
  },
  'migrate-cancel': {
    usage: 'migrate-cancel NAME',
    summary: "Cancel a virtual machine's unfinished migration",
    flags: {},
    args: ['NAME'],
    async run(ctx, [name]) {
      const base = `/apis/kubevirt.io/v1/namespaces/${encodeURIComponent(ctx.namespace)}/virtualmachineinstancemigrations`;
      let list: {
        items: { metadata: { name: string }; spec?: { vmiName?: string }; status?: { phase?: string } }[];
      };
      try {
        list = await ctx.client.request('GET', base);
      } catch (e) {
        throw new Error(`Error fetching virtual machine instance migration list  ${reasonOf(e)}`);
      }
      const open = list.items.filter(
        (m) => m.spec?.vmiName === name && m.status?.phase !== 'Succeeded' && m.status?.phase !== 'Failed',
      );
      if (open.length === 0) throw new Error(`Found no migration to cancel for ${name}`);
      for (const m of open) {
        await attempt(`Error canceling migration ${m.metadata.name} of a VirtualMachine ${name}: `, () =>
          ctx.client.request('DELETE', `${base}/${encodeURIComponent(m.metadata.name)}`),
        );
      }
      scheduled(ctx, 'VM', name!, 'migrate-cancel');
    },
  },
  console: {
    usage: 'console NAME',
    summary: "Connect to a virtual machine instance's serial console (Ctrl+] leaves it)",
    flags: {
      timeout: {
        type: 'string',
        help: 'minutes to wait for the VMI to be running and its console to answer (default 5)',
      },
    },
    args: ['NAME'],
    async run(ctx, [name], f) {
      const t = ctx.io.terminal;
      if (!t) throw new Error('virtctl console needs a terminal');
      const minutes = f['timeout'] === undefined ? 5 : Number(f['timeout']);
      if (!Number.isInteger(minutes) || minutes < 0)
        throw new UsageError(`--timeout: must be a whole number of minutes, got "${String(f['timeout'])}"`);
      const until = Date.now() + minutes * 60_000;
      let ws;
      for (;;) {
        try {
          ws = await openStream(ctx.kc, ctx.namespace, name!, 'console');
          break;
        } catch (e) {
          if (!worthRetrying(e) || Date.now() >= until)
            throw new Error(`Can't access VMI ${name}: ${(e as Error).message}`);
          await new Promise((r) => setTimeout(r, 1000));
        }
      }
      ctx.io.stderr(`Successfully connected to ${name} console. Press Ctrl+] or Ctrl+5 to exit console.\n`);
      const end = await attachConsole(ws, { ...t, stderr: ctx.io.stderr });
      if (!end.escaped)
        throw new Error(
          '\nYou were disconnected from the console. This could be caused by one of the following:' +
            '\n - the target VM was powered off\n - another user connected to the console of the target VM' +
            `\n - network issues${end.reason ? `\n(the server said: ${end.reason})` : ''}`,
        );
      ctx.io.stderr('\n');
    },
  },
  vnc: {
    usage: 'vnc NAME',
    summary: "Open a virtual machine instance's VNC display on a local port (a VNC viewer connects there)",
    flags: {
      'proxy-only': {
        type: 'boolean',
        help: 'only run the proxy and print {"port": N}; connect a VNC viewer there yourself',
      },
      port: { type: 'string', help: 'the local port to listen on (default: any free port)' },
      address: {
        type: 'string',
        help: 'the local address to listen on with --proxy-only (default 127.0.0.1)',
      },
      'preserve-session': {
        type: 'boolean',
        help: 'refuse to connect while another VNC connection is open, instead of replacing it',
      },
    },
    args: ['NAME'],
    async run(ctx, [name], f) {
      const port = f['port'] === undefined ? 0 : Number(f['port']);
      if (!Number.isInteger(port) || port < 0 || port > 65535)
        throw new UsageError(`--port: must be a port number, got "${String(f['port'])}"`);
      const proxyOnly = Boolean(f['proxy-only']);
      const address = proxyOnly ? ((f['address'] as string | undefined) ?? '127.0.0.1') : '127.0.0.1';
      let ws;
      try {
        ws = await openStream(
          ctx.kc,
          ctx.namespace,
          name!,
          'vnc',
          f['preserve-session'] ? '?preserveSession=true' : '',
        );
      } catch (e) {
        throw new Error(`can't access VMI ${name}: ${e instanceof StreamError ? e.message : String(e)}`);
      }
      await proxyVnc(ws, address, port, (p) => {
        if (proxyOnly) ctx.io.stdout(`${JSON.stringify({ port: p })}\n`);
        else
          ctx.io.stderr(
            `VNC of ${name} on 127.0.0.1:${p}: connect a VNC viewer there (e.g. remote-viewer vnc://127.0.0.1:${p}); ` +
              'virtctl does not start one itself\n',
          );
      });
    },
  },
  guestosinfo: getVerb(
    'guestosinfo',
    "Print the guest agent's OS information of a virtual machine instance (JSON)",
  ),
  userlist: getVerb(
    'userlist',
    "Print the guest agent's list of logged-in users of a virtual machine instance (JSON)",
  ),
  fslist: getVerb(
    'filesystemlist',
    "Print the guest agent's list of filesystems of a virtual machine instance (JSON)",
    'fslist',
  ),
  'create vm': createVerb(
    'vm',
    'Print a VirtualMachine manifest (creates nothing)',
    CREATE_VM_FLAGS,
    createVm,
  ),
  'create instancetype': createVerb(
    'instancetype',
    'Print a VirtualMachine(Cluster)Instancetype manifest (creates nothing)',
    CREATE_INSTANCETYPE_FLAGS,
    createInstancetype,
  ),
  'create preference': createVerb(
    'preference',
    'Print a VirtualMachine(Cluster)Preference manifest (creates nothing)',
    CREATE_PREFERENCE_FLAGS,
    createPreference,
  ),
  version: {
    usage: 'version',
    summary: "Print virtctl's version and the server's",
    flags: {},
    args: [],
    async run(ctx) {
      ctx.io.stdout(
        `Client Version: ${goVersionInfo({ gitVersion: CLIENT_VERSION, compiler: `node ${process.version}`, platform: platform() })}\n`,
      );
      let server: Record<string, string> = {};
      await attempt('error getting server version: ', async () => {
        server = await ctx.client.request('GET', `${SUB}/version`);
      });
      ctx.io.stdout(`Server Version: ${goVersionInfo(server)}\n`);
    },
  },
};

const platform = () => `${process.platform}/${process.arch === 'x64' ? 'amd64' : process.arch}`;

/** upstream prints version.Info with Go's %#v; the same shape here */
function goVersionInfo(v: Record<string, string | undefined>): string {
  const keys = ['gitVersion', 'gitCommit', 'gitTreeState', 'buildDate', 'goVersion', 'compiler', 'platform'];
  return `version.Info{${keys.map((k) => `${k[0]!.toUpperCase()}${k.slice(1)}:${JSON.stringify(v[k] ?? '')}`).join(', ')}}`;
}

function flagHelp(flags: Flags): string {
  return Object.entries(flags)
    .map(
      ([n, f]) =>
        `  ${f.short ? `-${f.short}, ` : '    '}--${n}${f.type === 'string' ? '=VALUE' : ''}${f.multiple ? ' (repeatable)' : ''}\n        ${f.help}`,
    )
    .join('\n');
}

export function usage(verb?: string): string {
  const v = verb ? VERBS[verb] : undefined;
  if (v)
    return `${v.summary}.\n\nUsage:\n  virtctl ${v.usage} [flags]\n\n${
      Object.keys(v.flags).length ? `Flags:\n${flagHelp(v.flags)}\n\n` : ''
    }Global flags:\n${flagHelp(GLOBAL)}\n`;
  const width = Math.max(...Object.keys(VERBS).map((k) => k.length));
  return (
    'virtctl controls KubeVirt virtual machines (subresources.kubevirt.io).\n\nUsage:\n  virtctl COMMAND [ARGS] [flags]\n\nCommands:\n' +
    Object.entries(VERBS)
      .map(([k, x]) => `  ${k.padEnd(width)}  ${x.summary}`)
      .join('\n') +
    `\n\nGlobal flags:\n${flagHelp(GLOBAL)}\n\n"virtctl COMMAND --help" describes a command.\n`
  );
}

/** KUBECONFIG / --kubeconfig / ~/.kube/config / in-cluster, like kubectl; a missing config is an error, not localhost */
export function loadKubeConfig(io: Io, file?: string, context?: string): KubeConfig {
  const kc = new KubeConfig();
  if (file) {
    if (!existsSync(file)) throw new UsageError(`--kubeconfig: ${file} does not exist`);
    kc.loadFromFile(file);
  } else if (io.env['KUBECONFIG']) {
    const files = io.env['KUBECONFIG'].split(':').filter((f) => f && existsSync(f));
    if (files.length === 0) throw new UsageError(`KUBECONFIG=${io.env['KUBECONFIG']}: no such file`);
    kc.loadFromFile(files[0]!);
    for (const f of files.slice(1)) {
      const more = new KubeConfig();
      more.loadFromFile(f);
      kc.mergeConfig(more, false);
    }
  } else if (existsSync(join(io.env['HOME'] ?? homedir(), '.kube', 'config'))) {
    kc.loadFromFile(join(io.env['HOME'] ?? homedir(), '.kube', 'config'));
  } else if (io.env['KUBERNETES_SERVICE_HOST']) {
    kc.loadFromCluster();
  } else {
    throw new UsageError('no kubeconfig: set KUBECONFIG, pass --kubeconfig, or create ~/.kube/config');
  }
  if (context) {
    if (!kc.getContextObject(context))
      throw new UsageError(`--context: no context "${context}" in the kubeconfig`);
    kc.setCurrentContext(context);
  }
  if (!kc.getCurrentCluster()) throw new UsageError('the kubeconfig has no current context with a cluster');
  return kc;
}

/** Runs one virtctl command line; resolves to the exit status. */
export async function run(argv: string[], io: Io): Promise<number> {
  let [verbName, ...rest] = argv;
  if (verbName === 'create') {
    const sub = rest[0];
    const subs = Object.keys(VERBS)
      .filter((k) => k.startsWith('create '))
      .map((k) => k.slice(7));
    if (sub === undefined || !subs.includes(sub)) {
      const ask = sub === '--help' || sub === '-h';
      (ask ? io.stdout : io.stderr)(
        `${ask ? '' : `virtctl create: expects one of ${subs.join(', ')}${sub === undefined ? '' : `, got "${sub}"`}\n`}` +
          subs.map((k) => `  virtctl create ${k.padEnd(12)}  ${VERBS[`create ${k}`]!.summary}`).join('\n') +
          '\n',
      );
      return ask ? 0 : 2;
    }
    verbName = `create ${sub}`;
    rest = rest.slice(1);
  }
  if (verbName === undefined || verbName === '--help' || verbName === '-h' || verbName === 'help') {
    const topic = verbName !== 'help' ? undefined : rest[0] === 'create' ? `create ${rest[1]}` : rest[0];
    if (topic && !VERBS[topic]) {
      io.stderr(`virtctl: unknown command "${topic}"\n`);
      return 2;
    }
    (verbName === undefined ? io.stderr : io.stdout)(usage(topic));
    return verbName === undefined ? 2 : 0;
  }
  const verb = VERBS[verbName];
  if (!verb) {
    io.stderr(`virtctl: unknown command "${verbName}"; commands: ${Object.keys(VERBS).join(', ')}\n`);
    return 2;
  }
  try {
    const options = Object.fromEntries(
      Object.entries({ ...GLOBAL, ...verb.flags }).map(([k, f]) => [
        k,
        { type: f.type, ...(f.short ? { short: f.short } : {}), ...(f.multiple ? { multiple: true } : {}) },
      ]),
    ) as ParseArgsConfig['options'];
    const bools = boolAssignments(rest, { ...GLOBAL, ...verb.flags });
    let parsed;
    try {
      parsed = parseArgs({ args: bools.args, options, allowPositionals: true, strict: true });
    } catch (e) {
      throw new UsageError((e as Error).message);
    }
    const f = parsed.values as Record<string, string | boolean | undefined>;
    for (const [k, v] of bools.values) f[k] = v;
    refuseUnimplemented(verb.flags, f);
    if (f['help']) {
      io.stdout(usage(verbName));
      return 0;
    }
    if (parsed.positionals.length !== verb.args.length)
      throw new UsageError(
        `expects ${verb.args.length ? verb.args.join(' ') : 'no arguments'}, got ${
          parsed.positionals.length ? parsed.positionals.map((p) => `"${p}"`).join(' ') : 'none'
        }`,
      );
    if (verb.offline) {
      const ns = f['namespace'] as string | undefined;
      const built = verb.offline(f, { ...(ns ? { namespace: ns } : {}), warn: io.stderr });
      io.stdout(render(built, f));
      return 0;
    }
    const kc = loadKubeConfig(io, f['kubeconfig'] as string | undefined, f['context'] as string | undefined);
    const namespace =
      (f['namespace'] as string | undefined) ||
      kc.getContextObject(kc.getCurrentContext())?.namespace ||
      'default';
    const client = new KubeClient(kc);
    try {
      await verb.run!({ client, kc, namespace, io }, parsed.positionals, f);
    } finally {
      client.close();
    }
    return 0;
  } catch (e) {
    if (e instanceof UsageError) {
      io.stderr(
        `virtctl ${verbName}: ${e.message}\nUsage: virtctl ${verb.usage} [flags] (virtctl ${verbName} --help)\n`,
      );
      return 2;
    }
    io.stderr(`${e instanceof Error ? e.message : String(e)}\n`);
    return 1;
  }
}
