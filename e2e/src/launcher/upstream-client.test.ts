// Upstream KubeVirt v1.1.0's own cmd client (pkg/virt-handler/cmd-client, the code upstream's virt-handler runs)
// driving our standalone launcher over its real socket: every call succeeds and the domain it decodes has our
// domain's name, uid and state. The client is a small command around upstream's cmd-client package, built from
// upstream's source outside this repository (see packages/cmd-protocol/README.md); without it the test is skipped,
// visibly.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { launcherSocketPath } from '@kubevirt-ts/cmd-protocol';
import {
  CACHE,
  READY,
  processesMentioning,
  requireGuest,
  spawnStandalone,
  tinyVmi,
  tmpDirPerTest,
  waitFor,
} from './helpers.js';

const CLIENT = process.env.KVTS_UPSTREAM_CMDCLIENT ?? path.join(CACHE, 'upstream-cmdclient', 'kv-cmdclient');
const have = existsSync(CLIENT);
if (!have)
  console.warn(
    `upstream-client.test: ${CLIENT} is missing (KVTS_UPSTREAM_CMDCLIENT names it; see ` +
      'packages/cmd-protocol/README.md): skipped',
  );

function run(args: string[]): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const c = spawn(CLIENT, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    c.stdout.on('data', (d: Buffer) => (out += d.toString()));
    c.stderr.on('data', (d: Buffer) => (out += d.toString()));
    c.on('close', (code) => resolve({ code, out }));
  });
}

(have ? describe : describe.skip)("upstream's cmd client (v1.1.0) against our launcher", () => {
  beforeAll(() => requireGuest());
  const dir = tmpDirPerTest();

  it('Ping, GetQemuVersion, GetDomain (name, uid, state), GetDomainStats, Pause, Unpause, Shutdown', async () => {
    const vmi = tinyVmi('upstream-client', { uid: '6f1c1b0e-5d1a-4c1e-9d7e-0a1b2c3d4e5f' });
    const sockets = path.join(dir(), 'socks');
    const p = await spawnStandalone(dir(), vmi, ['--socket-dir', sockets]);
    const { file, work } = p;
    try {
      await waitFor('ready line', () => p.stdout().includes(READY) || p.child.exitCode !== null, 120_000);
      expect(p.stdout()).toContain(READY);
      const r = await run([launcherSocketPath(sockets), file]);
      const lines = r.out.trim().split('\n');
      expect({ code: r.code, lines }).toMatchObject({ code: 0 });
      const uid = vmi.metadata!.uid!;
      expect(lines).toEqual([
        'Ping: ok',
        expect.stringMatching(/^GetQemuVersion: \d+\.\d+/),
        `GetDomain: Running/Booted (name e2e_upstream-client, uid ${uid})`,
        'GetDomainStats: name e2e_upstream-client, 1 vcpus',
        `after Pause: Paused/User (name e2e_upstream-client, uid ${uid})`,
        `after Unpause: Running/Unpaused (name e2e_upstream-client, uid ${uid})`,
        'Shutdown: ok',
      ]);
      // the ACPI shutdown upstream's client asked for powers the guest off and ends the launcher
      expect(await p.exited).toEqual({ code: 0, signal: null });
      expect(p.stdout()).toContain('KUBEVIRT-TS-GUEST-POWEROFF acpi-power-button');
      expect(await processesMentioning(work)).toEqual([]);
    } finally {
      if (p.child.exitCode === null && p.child.signalCode === null) {
        p.child.kill('SIGKILL');
        await p.exited;
      }
    }
  });
});
