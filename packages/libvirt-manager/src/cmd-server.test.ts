// A DomainManager handed straight to cmd-protocol's CmdServer (the launcher's wiring), driven by a
// CmdClient over a real unix socket with real gRPC; libvirt is the in-memory fake here (the real
// libvirtd is covered by libvirtd.test.ts).
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createPodLayout } from '@kubevirt-ts/converter';
import { CmdClient, CmdServer, launcherSocketPath, type CmdBackend } from '@kubevirt-ts/cmd-protocol';
import { DomainManager } from './manager.js';
import { FakeConnection, quietLogger } from './test-fake-libvirt.js';

const vmi = {
  apiVersion: 'kubevirt.io/v1' as const,
  kind: 'VirtualMachineInstance' as const,
  metadata: { name: 'wire', namespace: 'default', uid: 'uid-wire' },
  spec: {
    domain: { resources: { requests: { memory: '128Mi' } }, devices: { autoattachGraphicsDevice: false } },
  },
};

describe('DomainManager behind CmdServer', () => {
  let dir: string;
  let server: CmdServer;
  let client: CmdClient;
  const conn = new FakeConnection('fake:///wire');

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'kvlm-wire-'));
    const mgr = new DomainManager({
      connection: conn,
      context: { allowEmulation: true, kvmAvailable: false, layout: createPodLayout('/nonexistent') },
      logger: quietLogger,
    });
    const backend: CmdBackend = mgr; // compile-time: the manager is a CmdBackend
    server = new CmdServer({ socketsDir: dir, backend, logger: quietLogger });
    await server.start();
    await server.ready();
    client = await CmdClient.connect(launcherSocketPath(dir));
  });

  afterAll(async () => {
    client?.close();
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  test('sync, pause, getDomain, unpause, kill, delete over gRPC', async () => {
    await client.syncVMI(vmi, { MemBalloonStatsPeriod: 5 });
    expect(conn.domains.get('default_wire')?.xml).toContain('<stats period="5"');
    await client.pauseVMI(vmi);
    const d = (await client.getDomain()) as {
      metadata: { name: string };
      status: { status: string; reason: string };
    };
    expect(d.metadata.name).toBe('wire');
    expect(d.status).toEqual({ status: 'Paused', reason: 'User' });
    await client.unpauseVMI(vmi);
    expect(((await client.getDomain()) as { status: { status: string } }).status.status).toBe('Running');
    expect(await client.getQemuVersion()).toBe('7.2.0');
    await client.killVMI(vmi);
    await client.deleteVMI(vmi);
    expect(await client.getDomain()).toBeUndefined();
  });

  test('manager errors come back as the rpc failure message', async () => {
    await expect(client.pauseVMI(vmi)).rejects.toThrow(/domain default_wire not found/);
    await client.syncVMI(vmi);
    // upstream's MigrationOptions only; this manager has no migration target configured
    await expect(client.migrateVMI(vmi, { targetURI: 'x' })).rejects.toThrow(
      /options\.targetURI: not a field of upstream's MigrationOptions/,
    );
    await expect(client.migrateVMI(vmi, { Bandwidth: '0', AllowPostCopy: false })).rejects.toThrow(
      /target\.targetURI: required/,
    );
    await expect(client.guestPing('default_wire', 1)).rejects.toThrow(/guest agent is not connected/);
  });
});
