// The serial console log without virtlogd. The launcher's libvirtd runs with qemu.conf
// `stdio_handler = "file"`, so QEMU appends to the serial log file itself (chardev `logfile`,
// `logappend=on`: the file is opened O_APPEND). virtlogd's job that is left is keeping the file small:
// it rotates at `max_size` (2 MiB by default). The launcher does the same with copy-and-truncate: QEMU
// keeps its descriptor and, the file being O_APPEND, writes at the new end. What QEMU writes between
// the copy and the truncate is lost (a few bytes at most, at each rotation).
import { copyFile, stat, truncate } from 'node:fs/promises';

/** virtlogd's default `max_size` */
export const SERIAL_LOG_MAX_BYTES = 2 * 1024 * 1024;

/**
 * When `file` is larger than `maxBytes`, moves its content to `<file>.1` (the one backup, replaced)
 * and empties it. Returns true when it rotated; a missing file is not an error (no log yet).
 */
export async function rotateIfLarge(file: string, maxBytes = SERIAL_LOG_MAX_BYTES): Promise<boolean> {
  let size: number;
  try {
    size = (await stat(file)).size;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw e;
  }
  if (size <= maxBytes) return false;
  await copyFile(file, `${file}.1`);
  await truncate(file, 0);
  return true;
}

/**
 * Checks `file` every `intervalMs` and rotates it when it grew past `maxBytes` (the timer does not keep
 * the process alive). Errors go to `onError`; the watch goes on.
 */
export function capLogFile(
  file: string,
  opts: { maxBytes?: number; intervalMs?: number; onRotate?: () => void; onError?: (e: Error) => void } = {},
): { stop(): void } {
  let busy = false;
  const timer = setInterval(() => {
    if (busy) return;
    busy = true;
    rotateIfLarge(file, opts.maxBytes)
      .then((rotated) => rotated && opts.onRotate?.())
      .catch((e: Error) => opts.onError?.(e))
      .finally(() => (busy = false));
  }, opts.intervalMs ?? 5000);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
