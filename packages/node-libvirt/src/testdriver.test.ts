// Every call against libvirt's in-process test driver (test:///default): real libvirt library code,
// no daemon. test:///default is shared by all connections of this process, so names are unique per test.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import {
  Connection,
  DomainCreateFlags,
  DomainEventType,
  DomainState,
  DomainXMLFlags,
  ErrorCode,
  LibvirtError,
  ListAllDomainsFlags,
  type LifecycleEvent,
} from './index.js';

const URI = 'test:///default';
let seq = 0;
const uniq = (p: string) => `${p}-${process.pid}-${++seq}`;

function domXml(name: string, memKiB = 65536): string {
  return `<domain type='test'><name>${name}</name><memory unit='KiB'>${memKiB}</memory><vcpu>2</vcpu>
    <os><type>hvm</type></os></domain>`;
}

function collect(conn: Connection, name: string): LifecycleEvent[] {
  const out: LifecycleEvent[] = [];
  conn.on('lifecycle', (e) => {
    if (e.domain.name === name) out.push(e);
  });
  return out;
}

async function until(cond: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('test:///default', () => {
  let conn: Connection;
  beforeAll(async () => {
    conn = await Connection.open(URI);
  });
  afterAll(async () => {
    await conn.close();
  });

  it('reports versions, hostname, URI and capabilities', async () => {
    expect(await conn.getLibVersion()).toBeGreaterThanOrEqual(9000000);
    expect(await conn.getVersion()).toBeGreaterThan(0);
    expect(typeof (await conn.getHostname())).toBe('string');
    expect(await conn.getURI()).toBe(URI);
    expect(await conn.getCapabilities()).toContain('<capabilities>');
    expect(conn.isAlive()).toBe(true);
  });

  it('defines, starts, pauses, resumes, destroys and undefines with events and states', async () => {
    const name = uniq('life');
    const events = collect(conn, name);
    const dom = await conn.defineXML(domXml(name));
    expect(dom.name).toBe(name);
    expect(dom.uuid).toMatch(/^[0-9a-f-]{36}$/);
    expect(await dom.getState()).toEqual({ state: DomainState.SHUTOFF, reason: 0, reasonName: 'UNKNOWN' });
    expect(await dom.isPersistent()).toBe(true);
    expect(await dom.isActive()).toBe(false);
    expect(await dom.getID()).toBe(-1);

    await dom.create();
    expect(await dom.getState()).toMatchObject({ state: DomainState.RUNNING, reasonName: 'BOOTED' });
    expect(await dom.getID()).toBeGreaterThan(0);
    await dom.suspend();
    expect(await dom.getState()).toMatchObject({ state: DomainState.PAUSED, reasonName: 'USER' });
    await dom.resume();
    expect(await dom.getState()).toMatchObject({ state: DomainState.RUNNING, reasonName: 'UNPAUSED' });
    const info = await dom.getInfo();
    expect(info).toMatchObject({ state: DomainState.RUNNING, maxMem: 65536, nrVirtCpu: 2 });
    await dom.destroy();
    expect(await dom.getState()).toMatchObject({ state: DomainState.SHUTOFF, reasonName: 'DESTROYED' });
    await dom.undefine();

    await until(() => events.length >= 6);
    expect(events.map((e) => `${e.eventName}/${e.detailName}`)).toEqual([
      'DEFINED/ADDED',
      'STARTED/BOOTED',
      'SUSPENDED/PAUSED',
      'RESUMED/UNPAUSED',
      'STOPPED/DESTROYED',
      'UNDEFINED/REMOVED',
    ]);
    expect(events[0]!.domain).toEqual({ name, uuid: dom.uuid });
    expect(events[1]!.event).toBe(DomainEventType.STARTED);

    const err = await dom.getState().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LibvirtError);
    expect((err as LibvirtError).code).toBe(ErrorCode.NO_DOMAIN);
  });

  it('creates transient domains and looks them up by name and UUID, lists them', async () => {
    const name = uniq('transient');
    // (the test driver supports no createXML flags; START_PAUSED is covered on real libvirtd)
    const unsupported = (await conn
      .createXML(domXml(name), DomainCreateFlags.START_PAUSED)
      .catch((e: unknown) => e)) as LibvirtError;
    expect(unsupported.codeName).toBe('INVALID_ARG');
    const dom = await conn.createXML(domXml(name));
    expect(await dom.getState()).toMatchObject({ state: DomainState.RUNNING });
    expect(await dom.isPersistent()).toBe(false);
    expect((await conn.lookupDomainByName(name)).uuid).toBe(dom.uuid);
    expect((await conn.lookupDomainByUUID(dom.uuid)).name).toBe(name);
    const active = await conn.listAllDomains(ListAllDomainsFlags.ACTIVE | ListAllDomainsFlags.TRANSIENT);
    expect(active.map((d) => d.name)).toContain(name);
    const inactive = await conn.listAllDomains(ListAllDomainsFlags.INACTIVE);
    expect(inactive.map((d) => d.name)).not.toContain(name);
    const xml = await dom.getXMLDesc(DomainXMLFlags.SECURE);
    expect(xml).toContain(`<name>${name}</name>`);
    expect(xml).toContain(dom.uuid);
    await dom.destroy();
    const gone = await conn.lookupDomainByName(name).catch((e: unknown) => e);
    expect((gone as LibvirtError).codeName).toBe('NO_DOMAIN');
  });

  it('changes memory and vCPUs and reports all-domain stats', async () => {
    const name = uniq('tune');
    const dom = await conn.defineXML(domXml(name, 131072));
    await dom.create();
    await dom.setMemory(65536);
    expect((await dom.getInfo()).memory).toBe(65536);
    await dom.setVcpus(1);
    expect((await dom.getInfo()).nrVirtCpu).toBe(1);
    const stats = await conn.getAllDomainStats();
    const mine = stats.find((s) => s.domain.name === name);
    expect(mine?.stats['state.state']).toBe(DomainState.RUNNING);
    expect(mine?.domain.uuid).toBe(dom.uuid);
    await dom.destroy();
    await dom.undefine();
  });

  it('reads interface, block and memory stats, addresses, and freezes/thaws and sets time (test driver fakes)', async () => {
    // the test driver's built-in running domain "test" has disk vda and interface testnet0
    const dom = await conn.lookupDomainByName('test');
    const nic = await dom.interfaceStats('testnet0');
    expect(Object.keys(nic).sort()).toEqual(
      ['rxBytes', 'rxDrop', 'rxErrs', 'rxPackets', 'txBytes', 'txDrop', 'txErrs', 'txPackets'].sort(),
    );
    expect(nic.rxBytes).toBeGreaterThan(0);
    const blk = await dom.blockStats('vda');
    expect(blk.rdReq).toBeGreaterThanOrEqual(0);
    const bad = (await dom.blockStats('hdz').catch((e: unknown) => e)) as LibvirtError;
    expect(bad.codeName).toBe('INVALID_ARG');
    const mem = await dom.memoryStats();
    expect(mem.actual_balloon).toBeGreaterThan(0);
    expect(mem.rss).toBeGreaterThan(0);
    const addrs = await dom.interfaceAddresses();
    expect(addrs[0]).toMatchObject({ name: 'testnet0', hwaddr: 'aa:bb:cc:dd:ee:ff' });
    expect(addrs[0]!.addrs[0]!.prefix).toBe(24);
    await dom.setTime();
    expect(await dom.fsFreeze()).toBeGreaterThan(0);
    expect(await dom.fsThaw()).toBeGreaterThan(0);
  });

  it('survives closing listeners while events are being delivered', async () => {
    const name = uniq('storm');
    let delivered = 0;
    let stop = false;
    const storm = (async () => {
      while (!stop) {
        const d = await conn.defineXML(domXml(name));
        await d.undefine();
      }
    })();
    for (let i = 0; i < 20; i++) {
      const listener = await Connection.open(URI);
      let mine = 0;
      listener.on('lifecycle', () => {
        mine++;
        delivered++;
      });
      await until(() => mine > 0); // events are flowing: close in the middle of the stream
      await listener.close();
    }
    const late = delivered;
    await new Promise((r) => setTimeout(r, 50));
    stop = true;
    await storm;
    expect(late).toBeGreaterThanOrEqual(20);
    expect(delivered).toBe(late); // nothing delivered to a closed connection
  });

  it('rejects bad XML with libvirt error code and domain', async () => {
    const err = (await conn.defineXML('<domain><nope/>').catch((e: unknown) => e)) as LibvirtError;
    expect(err).toBeInstanceOf(LibvirtError);
    expect(err.codeName).toBe('XML_DETAIL');
    expect(err.operation).toBe('defineXML');
    expect(err.libvirtMessage.length).toBeGreaterThan(0);
  });

  it('rejects wrong argument types on the JS thread', async () => {
    await expect(conn.defineXML(5 as unknown as string)).rejects.toThrow('xml: expected a string');
  });

  it('says clearly when a call is not supported by the driver', async () => {
    const name = uniq('nosupport');
    const dom = await conn.defineXML(domXml(name));
    const err = (await dom
      .qemuAgentCommand('{"execute":"guest-ping"}', 1)
      .catch((e: unknown) => e)) as LibvirtError;
    expect(err).toBeInstanceOf(LibvirtError);
    expect(['NO_SUPPORT', 'OPERATION_INVALID', 'ARGUMENT_UNSUPPORTED']).toContain(err.codeName);
    await dom.undefine();
  });

  it('keeps the JS event loop free while many calls run', async () => {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    const calls = Array.from({ length: 2000 }, () => conn.getAllDomainStats());
    await Promise.all(calls);
    clearInterval(timer);
    expect(ticks).toBeGreaterThan(0);
  });
});

describe('connection lifetime', () => {
  it('rejects calls after close and emits close once with reason client', async () => {
    const conn = await Connection.open(URI);
    const reasons: string[] = [];
    conn.on('close', (r) => reasons.push(r));
    await conn.close();
    await conn.close();
    expect(reasons).toEqual(['client']);
    expect(conn.closed).toBe(true);
    expect(conn.isAlive()).toBe(false);
    const err = (await conn.getHostname().catch((e: unknown) => e)) as LibvirtError;
    expect(err).toBeInstanceOf(LibvirtError);
    expect(err.message).toContain('connection is closed');
  });

  it('rejects calls still pending when the connection is closed', async () => {
    const conn = await Connection.open(URI);
    const pending = Array.from({ length: 50 }, () =>
      conn.getCapabilities().then(
        () => 'ok',
        (e: Error) => e.message,
      ),
    );
    const closing = conn.close();
    const results = await Promise.all(pending);
    await closing;
    // Anything not finished before close() was rejected, nothing hangs.
    for (const r of results) expect(r === 'ok' || r.includes('connection closed (client)')).toBe(true);
    expect(results.some((r) => r !== 'ok')).toBe(true);
    expect(conn.pendingCalls).toBe(0);
  });

  it('opens read-only connections that see events but may not change anything', async () => {
    const ro = await Connection.open(URI, { readOnly: true });
    const rw = await Connection.open(URI);
    const name = uniq('ro');
    const events = collect(ro, name);
    const denied = (await ro.defineXML(domXml(name)).catch((e: unknown) => e)) as LibvirtError;
    expect(denied.codeName).toBe('OPERATION_DENIED');
    const dom = await rw.defineXML(domXml(name));
    await until(() => events.length > 0);
    expect(events[0]!.eventName).toBe('DEFINED');
    expect((await ro.lookupDomainByName(name)).uuid).toBe(dom.uuid);
    await dom.undefine();
    await ro.close();
    await rw.close();
  });

  it('fails to open an unknown URI with a LibvirtError', async () => {
    const err = (await Connection.open('nosuchdriver:///x').catch((e: unknown) => e)) as LibvirtError;
    expect(err).toBeInstanceOf(LibvirtError);
    expect(err.code).toBeGreaterThan(0);
    expect(err.message).toContain('open(nosuchdriver:///x)');
  });

  it('does not leak file descriptors over many open/close cycles', async () => {
    const fds = () => readdirSync('/proc/self/fd').length;
    // warm up (libvirt's one-time init, thread pool)
    for (let i = 0; i < 5; i++) await (await Connection.open(URI)).close();
    const fd0 = fds();
    for (let i = 0; i < 200; i++) {
      const c = await Connection.open(URI);
      await c.getLibVersion();
      await c.close();
    }
    expect(fds()).toBe(fd0);
  });

  it('releases every native handle on close: the process exits by itself afterwards', async () => {
    // an event delivery handle (thread-safe function) left behind would keep this child alive
    const mod = new URL('./index.js', import.meta.url).href;
    const script = `const { Connection } = await import(${JSON.stringify(mod)});
      for (let i = 0; i < 100; i++) {
        const c = await Connection.open('test:///default');
        c.on('lifecycle', () => {});
        await c.listAllDomains();
        await c.close();
      }
      console.log('closed all');`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(r.stdout).toContain('closed all');
    expect(r.signal).toBeNull();
    expect(r.status).toBe(0);
  });

  it('lets the process exit with a connection left open only when unref()ed', async () => {
    const mod = new URL('./index.js', import.meta.url).href;
    const script = `const { Connection } = await import(${JSON.stringify(mod)});
      const c = await Connection.open('test:///default', { unref: true });
      await c.getLibVersion();
      console.log('opened');`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(r.stdout).toContain('opened');
    expect(r.signal).toBeNull();
    expect(r.status).toBe(0);
  });

  it('delivers events to every open connection and stops after close', async () => {
    const a = await Connection.open(URI);
    const b = await Connection.open(URI);
    const name = uniq('multi');
    const ea = collect(a, name);
    const eb = collect(b, name);
    const dom = await a.defineXML(domXml(name));
    await until(() => ea.length >= 1 && eb.length >= 1);
    await b.close();
    await dom.undefine();
    await until(() => ea.length >= 2);
    await new Promise((r) => setTimeout(r, 50));
    expect(ea.map((e) => e.eventName)).toEqual(['DEFINED', 'UNDEFINED']);
    expect(eb.map((e) => e.eventName)).toEqual(['DEFINED']);
    await a.close();
  });
});
