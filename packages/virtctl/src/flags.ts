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
