import { Writable } from 'node:stream';
import winston from 'winston';

/** The logger shape packages accept (a winston Logger satisfies it). */
export type Logger = Pick<winston.Logger, 'info' | 'warn' | 'error' | 'debug'>;

export type LogLevel = 'error' | 'warn' | 'info' | 'debug';
export const LOG_LEVELS: readonly LogLevel[] = ['error', 'warn', 'info', 'debug'];

/** Identity fields added to every line when known (the object the component works on). */
export interface LogIdentity {
  kind?: string;
  namespace?: string;
  name?: string;
  uid?: string;
}

export interface LoggerOptions {
  component: string;
  /** Default: $KVTS_LOG_LEVEL, else "info". */
  level?: LogLevel | string;
  identity?: LogIdentity;
  silent?: boolean;
  /** Where lines go. Default: stderr, which keeps stdout free for program output (e.g. a console). */
  stream?: Writable;
}

/**
 * A winston logger writing one JSON object per line with `component`, `level`, `timestamp`, `msg`,
 * and `kind`/`namespace`/`name`/`uid` when given (plus whatever fields a call adds, e.g. `reason`).
 */
export function createLogger(opts: LoggerOptions | string): winston.Logger {
  const o: LoggerOptions = typeof opts === 'string' ? { component: opts } : opts;
  const identity = Object.fromEntries(
    Object.entries(o.identity ?? {}).filter(([, v]) => v !== undefined && v !== ''),
  );
  return winston.createLogger({
    level: o.level ?? process.env.KVTS_LOG_LEVEL ?? 'info',
    silent: o.silent ?? false,
    defaultMeta: { component: o.component, ...identity },
    format: winston.format.combine(
      winston.format.timestamp(),
      winston.format((info) => {
        // winston calls the text `message`; our format calls it `msg`.
        const out = info as Record<string, unknown>;
        if (out.message !== undefined) {
          out.msg = out.message;
          delete out.message;
        }
        return info;
      })(),
      winston.format.json(),
    ),
    transports: [new winston.transports.Stream({ stream: o.stream ?? process.stderr })],
  });
}
