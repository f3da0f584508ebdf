import winston from 'winston';

export type LogLevel = 'error' | 'warn' | 'info' | 'debug';
export const LOG_LEVELS: readonly LogLevel[] = ['error', 'warn', 'info', 'debug'];

/** Identity fields added to every line when known (kind/namespace/name/uid of the VMI). */
export interface LogIdentity {
  kind?: string;
  namespace?: string;
  name?: string;
  uid?: string;
}

/**
 * The launcher's logger: one JSON object per line on stderr with component, level, timestamp, msg
 * (and kind/namespace/name/uid/reason when known). stderr keeps stdout free for the standalone console.
 */
export function createLogger(
  opts: { level?: LogLevel; identity?: LogIdentity; component?: string; silent?: boolean } = {},
): winston.Logger {
  const identity = Object.fromEntries(
    Object.entries(opts.identity ?? {}).filter(([, v]) => v !== undefined && v !== ''),
  );
  return winston.createLogger({
    level: opts.level ?? 'info',
    silent: opts.silent ?? false,
    defaultMeta: { component: opts.component ?? 'virt-launcher', ...identity },
    format: winston.format.combine(
      winston.format.timestamp(),
      winston.format((info) => {
        // winston's message field is called msg in our log format.
        const out = info as Record<string, unknown>;
        if (out.message !== undefined) {
          out.msg = out.message;
          delete out.message;
        }
        return info;
      })(),
      winston.format.json(),
    ),
    transports: [new winston.transports.Stream({ stream: process.stderr })],
  });
}
