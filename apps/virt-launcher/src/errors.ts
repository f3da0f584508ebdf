/** A failure with a stage name and the exit code the launcher ends with. */
export class LauncherError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = 1,
    readonly stage?: string,
  ) {
    super(message);
    this.name = 'LauncherError';
  }
}

/** Exit codes of the launcher process. */
export const ExitCode = {
  OK: 0,
  /** generic failure, a stage failed */
  FAILURE: 1,
  /** invalid flags or arguments */
  USAGE: 2,
  /** invalid VMI */
  INVALID_VMI: 3,
  /** the domain did not reach Running within --qemu-timeout */
  QEMU_TIMEOUT: 4,
  /** QEMU died / the domain crashed or failed */
  DOMAIN_FAILED: 5,
} as const;
