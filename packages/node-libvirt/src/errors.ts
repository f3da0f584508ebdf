import { ErrorCode, ErrorDomain } from './constants.js';

function nameOf(table: Record<string, number>, value: number): string | undefined {
  for (const [k, v] of Object.entries(table)) if (v === value) return k;
  return undefined;
}

/** A failed libvirt call: libvirt's own error code, error domain and message (virGetLastError). */
export class LibvirtError extends Error {
  /** virErrorNumber; -1 when the failure did not come from libvirt (e.g. the connection was closed). */
  readonly code: number;
  /** virErrorDomain (which part of libvirt reported it). */
  readonly domain: number;
  /** libvirt's message, unprefixed. */
  readonly libvirtMessage: string;
  /** The call that failed, e.g. `domain.create(vm1)`. */
  readonly operation: string;

  constructor(operation: string, code: number, domain: number, libvirtMessage: string) {
    super(`${operation}: ${libvirtMessage}`);
    this.name = 'LibvirtError';
    this.operation = operation;
    this.code = code;
    this.domain = domain;
    this.libvirtMessage = libvirtMessage;
  }

  /** Symbolic name of `code`, e.g. `NO_DOMAIN`. */
  get codeName(): string {
    return nameOf(ErrorCode, this.code) ?? (this.code === -1 ? 'CLIENT' : `UNKNOWN_${this.code}`);
  }

  /** Symbolic name of `domain`, e.g. `QEMU`. */
  get domainName(): string {
    return nameOf(ErrorDomain, this.domain) ?? `UNKNOWN_${this.domain}`;
  }

  /** True when the domain does not exist (VIR_ERR_NO_DOMAIN). */
  get isNoDomain(): boolean {
    return this.code === ErrorCode.NO_DOMAIN;
  }

  /** Wraps what the native layer rejected with. */
  static from(operation: string, e: unknown): LibvirtError | Error {
    if (e instanceof LibvirtError) return e;
    if (e && typeof e === 'object' && 'libvirtMessage' in e) {
      const o = e as { code?: unknown; domain?: unknown; libvirtMessage?: unknown };
      return new LibvirtError(
        operation,
        typeof o.code === 'number' ? o.code : -1,
        typeof o.domain === 'number' ? o.domain : 0,
        String(o.libvirtMessage),
      );
    }
    if (e instanceof Error) {
      e.message = `${operation}: ${e.message}`;
      return e;
    }
    return new Error(`${operation}: ${String(e)}`);
  }
}
