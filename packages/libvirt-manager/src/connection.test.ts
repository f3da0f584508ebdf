import { ConnectionHolder } from './connection.js';
import { FakeConnection, until } from './test-fake-libvirt.js';

describe('ConnectionHolder', () => {
  test('opens once for concurrent callers, reopens after the connection closed', async () => {
    let opened = 0;
    let current = new FakeConnection('fake:///holder-1');
    const h = new ConnectionHolder(async () => {
      opened++;
      await new Promise((r) => setTimeout(r, 5));
      if (!current.alive) current = current.reopen();
      return current;
    });
    const events: string[] = [];
    h.on('connected', () => events.push('connected'));
    h.on('disconnected', (r: unknown) => events.push(`disconnected ${String(r)}`));
    const [a, b] = await Promise.all([h.get(), h.get()]);
    expect(a).toBe(b);
    expect(opened).toBe(1);
    current.drop();
    await until(() => !h.connected);
    const c = await h.get();
    expect(c).not.toBe(a);
    expect(opened).toBe(2);
    expect(events).toEqual(['connected', 'disconnected eof', 'connected']);
    await h.close();
    await expect(h.get()).rejects.toThrow(/closed/);
  });

  test('a bare connection cannot be reopened: calls fail clearly once it is gone', async () => {
    const conn = new FakeConnection('fake:///holder-2');
    const h = new ConnectionHolder(conn);
    expect(await h.get()).toBe(conn);
    conn.drop();
    await until(() => !h.connected);
    await expect(h.get()).rejects.toThrow(/lost and cannot be reopened/);
  });

  test('an open failure is passed on and the next get tries again', async () => {
    let fail = true;
    const conn = new FakeConnection('fake:///holder-3');
    const h = new ConnectionHolder(async () => {
      if (fail) throw new Error('Failed to connect socket: No such file or directory');
      return conn;
    });
    await expect(h.get()).rejects.toThrow(/No such file/);
    fail = false;
    expect(await h.get()).toBe(conn);
    h.invalidate(conn, 'test');
    expect(h.connected).toBe(false);
  });
});
