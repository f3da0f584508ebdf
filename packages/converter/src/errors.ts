/** A VMI the converter cannot turn into a domain. `path` names the field (e.g.
 * `spec.domain.devices.disks[2].name`); the message starts with it. */
export class ConversionError extends Error {
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {
    super(`${path}: ${reason}`);
    this.name = 'ConversionError';
  }
}

/** For VMI features the converter does not implement yet: says so instead of ignoring them. */
export function notImplemented(path: string, what: string): never {
  throw new ConversionError(path, `${what} is not implemented by kubevirt-ts`);
}
