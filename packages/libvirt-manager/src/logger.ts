import winston from 'winston';

/** The logger shape this package uses (a winston Logger satisfies it). */
export type Logger = Pick<winston.Logger, 'info' | 'warn' | 'error' | 'debug'>;

/**
 * A winston logger writing one JSON object per line with `component`, `level`, `timestamp`, `msg`.
 * Level from KVTS_LOG_LEVEL (default "info"). Apps usually pass their own logger instead.
 */
export function createLogger(
  component: string,
  level = process.env.KVTS_LOG_LEVEL ?? 'info',
): winston.Logger {
  return winston.createLogger({
    level,
    defaultMeta: { component },
    format: winston.format.combine(
      winston.format.timestamp(),
      winston.format((info) => {
        const { message, ...rest } = info;
        return { ...rest, msg: message } as unknown as winston.Logform.TransformableInfo;
      })(),
      winston.format.json(),
    ),
    transports: [new winston.transports.Console({ stderrLevels: ['error', 'warn', 'info', 'debug'] })],
  });
}
