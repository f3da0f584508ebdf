// What the verbs share about flags: their declarations, parsed values and the usage error (exit 2).

/** bad usage: run() prints it with the command's usage line and exits 2 */
export class UsageError extends Error {}

export interface Flag {
  type: 'string' | 'boolean';
  short?: string;
  /** may be given more than once (its value is then a list) */
  multiple?: boolean;
  /** upstream's flag that this CLI refuses (named in the error) instead of ignoring */
  unimplemented?: boolean;
  help: string;
}
export type Flags = Record<string, Flag>;
export type FlagValues = Record<string, string | boolean | string[] | undefined>;

/** refuses any flag declared `unimplemented` that was given */
export function refuseUnimplemented(flags: Flags, f: FlagValues): void {
  for (const [name, flag] of Object.entries(flags))
    if (flag.unimplemented && f[name] !== undefined)
      throw new UsageError(`--${name}: not implemented by kubevirt-ts`);
}

// the spellings of a boolean pflag (Go's strconv.ParseBool) accepts after `=`
const TRUE = ['1', 't', 'T', 'TRUE', 'true', 'True'];
const FALSE = ['0', 'f', 'F', 'FALSE', 'false', 'False'];

/**
 * Boolean flags given as `--flag=true|false`, as upstream's (pflag) takes them (e.g. `--infer-instancetype=false`,
 * `--force=true`): node's parseArgs refuses a value on a boolean option, so `args` has each rewritten to `--flag`
 * and `values` holds the last value of every boolean flag given either way (apply it over parseArgs' values).
 */
export function boolAssignments(
  argv: string[],
  flags: Flags,
): { args: string[]; values: Map<string, boolean> } {
  const args: string[] = [];
  const values = new Map<string, boolean>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') {
      args.push(...argv.slice(i));
      break;
    }
    const m = /^--([^=]+)(?:=(.*))?$/s.exec(a);
    const flag = m ? flags[m[1]!] : undefined;
    if (!m || !flag) {
      args.push(a);
      // the value of a string flag given as `-n NS` or `--name NAME` is not a flag, whatever it looks like
      const short = /^-([^-])$/.exec(a)?.[1];
      const named = short ? Object.values(flags).find((f) => f.short === short) : undefined;
      if (named?.type === 'string' && i + 1 < argv.length) args.push(argv[++i]!);
      continue;
    }
    if (flag.type === 'string') {
      args.push(a);
      if (m[2] === undefined && i + 1 < argv.length) args.push(argv[++i]!);
      continue;
    }
    const v = m[2];
    if (v !== undefined && !TRUE.includes(v) && !FALSE.includes(v))
      throw new UsageError(`--${m[1]!}: invalid boolean "${v}" (true or false)`);
    values.set(m[1]!, v === undefined || TRUE.includes(v));
    args.push(`--${m[1]!}`);
  }
  return { args, values };
}
