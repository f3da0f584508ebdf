import { ConnectionHolder } from './connection.js';
import { FakeConnection, fakeXml, quietLogger, until } from './test-fake-libvirt.js';
import { DomainWatcher, type DomainWatchEvent } from './watcher.js';

function summary(e: DomainWatchEvent): string {
  return `${e.type} ${e.domain.domainName} ${e.domain.status.status}/${e.domain.status.reason}`;
}

let n = 0;
const settle = () => new Promise((r) => setTimeout(r, 15));
function fresh(): FakeConnection {
  return new FakeConnection(`fake:///watcher-${n++}`);
}

describe('DomainWatcher', () => {
  test('lists existing domains as ADDED, then follows lifecycle events', async () => {
    const conn = fresh();
    const a = await conn.defineXML(fakeXml('default_a'));
    await a.create();
    await settle(); // set-up events are delivered before the watcher exists
    const w = new DomainWatcher({ connection: conn, logger: quietLogger });
    const events: DomainWatchEvent[] = [];
    w.on('event', (e: DomainWatchEvent) => events.push(e));
    await w.start();
    expect(events.map(summary)).toEqual(['ADDED default_a Running/Booted']);
    expect(events[0]!.domain.metadata).toMatchObject({ namespace: 'default', name: 'a' });
    expect(events[0]!.domain.spec?.name).toBe('default_a');
    // the start-up events of `a` arrive after the list: they must not produce a second ADDED
    await new Promise((r) => setTimeout(r, 20));
    events.length = 0;

    const b = await conn.defineXML(fakeXml('default_b'));
    await until(() => events.length >= 1);
    await b.create();
    await until(() => events.length >= 2);
    await b.suspend();
    await until(() => events.length >= 3);
    await b.destroy();
    await until(() => events.length >= 4);
    await b.undefine();
    await until(() => events.length >= 5);
    expect(events.map(summary)).toEqual([
      'ADDED default_b Shutoff/Unknown',
      'MODIFIED default_b Running/Booted',
      'MODIFIED default_b Paused/User',
      'MODIFIED default_b Shutoff/Destroyed',
      'DELETED default_b NoState/NonExistent',
    ]);
    expect(events[4]!.domain.metadata.deletionTimestamp).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(w.get('default_b')).toBeUndefined();
    expect(w.get('default_a')?.status.status).toBe('Running');
    await w.stop();
  });

  test('incoming migration (STARTED/MIGRATED) is reported as ADDED', async () => {
    const src = fresh();
    const dst = fresh();
    const w = new DomainWatcher({ connection: dst, logger: quietLogger });
    const events: DomainWatchEvent[] = [];
    w.on('event', (e: DomainWatchEvent) => events.push(e));
    await w.start();
    const d = await src.defineXML(fakeXml('ns1_mig'));
    await d.create();
    await d.migrateToURI3(dst.uri, {}, 2 | 8);
    await until(() => events.length >= 2);
    expect(events.map(summary)).toEqual([
      'ADDED ns1_mig Running/Migrated',
      'MODIFIED ns1_mig Running/Migrated',
    ]);
    expect(events[0]!.cause).toEqual({ event: 2, detail: 1 });
    await w.stop();
  });

  test('reconnects after libvirtd went away and re-lists: changes made meanwhile are reported', async () => {
    let conn = fresh();
    const keep = await conn.defineXML(fakeXml('default_keep'));
    await keep.create();
    await (await conn.defineXML(fakeXml('default_gone'))).create();
    await settle();
    const opened: FakeConnection[] = [];
    const holder = new ConnectionHolder(async () => {
      if (!conn.alive) conn = conn.reopen();
      opened.push(conn);
      return conn;
    });
    const w = new DomainWatcher({ connection: holder, logger: quietLogger, reconnectDelayMs: 5 });
    const events: DomainWatchEvent[] = [];
    w.on('event', (e: DomainWatchEvent) => events.push(e));
    let disconnects = 0;
    w.on('disconnected', () => disconnects++);
    await w.start();
    await new Promise((r) => setTimeout(r, 20));
    expect(events.map(summary).sort()).toEqual([
      'ADDED default_gone Running/Booted',
      'ADDED default_keep Running/Booted',
    ]);
    events.length = 0;

    // libvirtd "restarts": events stop; meanwhile one domain pauses, one vanishes, one appears
    const old = conn;
    old.drop();
    await until(() => disconnects === 1);
    const recs = old.domains;
    recs.get('default_keep')!.state = 3;
    recs.get('default_keep')!.reason = 1;
    recs.delete('default_gone');
    recs.set('default_new', {
      name: 'default_new',
      uuid: 'u-new',
      xml: fakeXml('default_new'),
      state: 1,
      reason: 1,
      persistent: true,
    });

    await until(() => events.length >= 3, 3000, 're-list events');
    expect(opened.length).toBe(2);
    expect(events.map(summary).sort()).toEqual([
      'ADDED default_new Running/Booted',
      'DELETED default_gone NoState/NonExistent',
      'MODIFIED default_keep Paused/User',
    ]);
    // events flow again on the new connection
    events.length = 0;
    const k = await conn.lookupDomainByName('default_keep');
    await k.resume();
    await until(() => events.length >= 1);
    expect(events.map(summary)).toEqual(['MODIFIED default_keep Running/Unpaused']);
    await w.stop();
  });

  test('keeps retrying while libvirtd is down', async () => {
    let conn = fresh();
    await conn.defineXML(fakeXml('default_x'));
    await settle();
    let failures = 0;
    let down = false;
    const holder = new ConnectionHolder(async () => {
      if (down) {
        failures++;
        throw new Error('connect: No such file or directory');
      }
      if (!conn.alive) conn = conn.reopen();
      return conn;
    });
    const w = new DomainWatcher({
      connection: holder,
      logger: quietLogger,
      reconnectDelayMs: 2,
      maxReconnectDelayMs: 10,
    });
    const events: DomainWatchEvent[] = [];
    w.on('event', (e: DomainWatchEvent) => events.push(e));
    await w.start();
    events.length = 0;
    down = true;
    conn.drop();
    await until(() => failures >= 3, 3000, 'reconnect attempts');
    conn.domains.get('default_x')!.state = 1;
    conn.domains.get('default_x')!.reason = 1;
    down = false;
    await until(() => events.length >= 1, 3000, 'event after reconnect');
    expect(events.map(summary)).toEqual(['MODIFIED default_x Running/Booted']);
    await w.stop();
  });

  test('filter limits the watcher to some domains; resync re-lists periodically', async () => {
    const conn = fresh();
    await conn.defineXML(fakeXml('default_mine'));
    await conn.defineXML(fakeXml('default_other'));
    await settle();
    const w = new DomainWatcher({
      connection: conn,
      logger: quietLogger,
      filter: (name) => name === 'default_mine',
      resyncIntervalMs: 20,
    });
    const events: DomainWatchEvent[] = [];
    w.on('event', (e: DomainWatchEvent) => events.push(e));
    await w.start();
    await new Promise((r) => setTimeout(r, 10));
    expect(events.map(summary)).toEqual(['ADDED default_mine Shutoff/Unknown']);
    events.length = 0;
    // a change libvirt did not announce (no event) is still found by the periodic re-list
    conn.domains.get('default_mine')!.state = 6;
    conn.domains.get('default_mine')!.reason = 1;
    await until(() => events.length >= 1);
    expect(events.map(summary)).toEqual(['MODIFIED default_mine Crashed/Panicked']);
    await w.stop();
  });

  test('guest agent and device events re-report the domain as MODIFIED', async () => {
    const conn = fresh();
    await (await conn.defineXML(fakeXml('default_ag'))).create();
    await settle();
    const w = new DomainWatcher({ connection: conn, logger: quietLogger });
    const events: DomainWatchEvent[] = [];
    w.on('event', (e: DomainWatchEvent) => events.push(e));
    await w.start();
    events.length = 0;
    conn.emit('agentLifecycle', { domain: { name: 'default_ag', uuid: '' }, state: 1, reason: 2 });
    conn.emit('deviceRemoved', { domain: { name: 'default_ag', uuid: '' }, devAlias: 'ua-disk1' });
    await until(() => events.length >= 2);
    expect(events.map(summary)).toEqual([
      'MODIFIED default_ag Running/Booted',
      'MODIFIED default_ag Running/Booted',
    ]);
    await w.stop();
  });
});
