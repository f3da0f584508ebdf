// One libvirt connection shared by the DomainManager and the DomainWatcher, reopened on demand
// after libvirtd went away (the 'close' event of node-libvirt's Connection).

import { EventEmitter } from 'node:events';
import type { LibvirtConnection } from './libvirt.js';

export type ConnectionSource = LibvirtConnection | (() => Promise<LibvirtConnection>) | ConnectionHolder;

/**
 * Events: 'connected' (conn) each time a connection was (re)opened, 'disconnected' (reason)
 * when the current one closed.
 */
export class ConnectionHolder extends EventEmitter {
  private current: LibvirtConnection | undefined;
  private opening: Promise<LibvirtConnection> | undefined;
  private closed = false;
  private readonly open: (() => Promise<LibvirtConnection>) | undefined;
  private onClose: ((reason: unknown) => void) | undefined;

  /** `open` (re)opens a connection; a bare connection cannot be reopened once it closed. */
  constructor(source: LibvirtConnection | (() => Promise<LibvirtConnection>)) {
    super();
    if (typeof source === 'function') {
      this.open = source;
    } else {
      this.open = undefined;
      this.adopt(source);
    }
  }

  static from(source: ConnectionSource): ConnectionHolder {
    return source instanceof ConnectionHolder ? source : new ConnectionHolder(source);
  }

  /** Whether a connection is currently open (as far as events told). */
  get connected(): boolean {
    return this.current !== undefined;
  }

  /** The open connection, opening one when there is none. */
  async get(): Promise<LibvirtConnection> {
    if (this.closed) throw new Error('libvirt connection holder was closed');
    if (this.current) return this.current;
    if (!this.open)
      throw new Error('the libvirt connection was lost and cannot be reopened (no open function given)');
    if (!this.opening) {
      this.opening = this.open().then(
        (conn) => {
          this.opening = undefined;
          if (this.closed) {
            void conn.close().catch(() => undefined);
            throw new Error('libvirt connection holder was closed');
          }
          this.adopt(conn);
          return conn;
        },
        (err: unknown) => {
          this.opening = undefined;
          throw err;
        },
      );
    }
    return this.opening;
  }

  /** Drops the current connection (e.g. after a call failed because libvirtd went away). */
  invalidate(conn?: LibvirtConnection, reason = 'invalidated'): void {
    if (!this.current || (conn && conn !== this.current)) return;
    const old = this.current;
    this.current = undefined;
    this.detach(old);
    void Promise.resolve()
      .then(() => old.close())
      .catch(() => undefined);
    this.emit('disconnected', reason);
  }

  async close(): Promise<void> {
    this.closed = true;
    const c = this.current;
    this.current = undefined;
    if (c) {
      this.detach(c);
      await c.close().catch(() => undefined);
    }
  }

  private adopt(conn: LibvirtConnection): void {
    this.current = conn;
    this.onClose = (reason: unknown) => {
      if (this.current !== conn) return;
      this.detach(conn);
      this.current = undefined;
      this.emit('disconnected', reason);
    };
    conn.on('close', this.onClose);
    this.emit('connected', conn);
  }

  private detach(conn: LibvirtConnection): void {
    if (this.onClose) conn.off('close', this.onClose);
    this.onClose = undefined;
  }
}
