// npm run bench:pod-network [-- RUNS] (root; the test guest): time from Pod network phase-1 start to
// the real guest's DHCP lease, masquerade, in fresh network namespaces: phase 1 (what virt-handler
// runs), the in-Pod launcher's start in the Pod netns until its socket, SyncVirtualMachine until the
// launcher's DHCP server acknowledges the guest's lease (guest boot under TCG included), and the
// total. The DHCP server's own memory is measured by `npm run bench:network` (it runs in the
// launcher's process here, so its share cannot be told apart from the launcher's RSS).
import { mkdirSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { CmdClient, NotifyServer, notifySocketPath } from '@kubevirt-ts/cmd-protocol';
import { planPodNetwork, setupPodNetwork, writePodNetworkConfig } from '@kubevirt-ts/network';
import {
  connectLauncher,
  killMentioning,
  launcherPodFlags,
  requireGuest,
  shortTmp,
  stageTestGuest,
  startLauncher,
  tinyVmi,
  waitFor,
} from './helpers.js';
import { createNet, isRoot, launcherInNetns } from './net-helpers.js';

if (!isRoot) {
  console.error('bench:pod-network needs root (network namespaces)');
  process.exit(2);
}
requireGuest();
const runs = Number(process.argv[2] ?? 3);
const ms = (a: bigint, b: bigint) => Math.round(Number(b - a) / 1e6);
const rows: { phase1: number; launcherStart: number; syncToLease: number; total: number }[] = [];

for (let i = 0; i < runs; i++) {
  const net = createNet(`b${i}`);
  const root = await shortTmp();
  const share = path.join(root, 'handler');
  const notify = new NotifyServer({
    socketPath: notifySocketPath(share),
    onDomainEvent: () => undefined,
    onK8sEvent: () => undefined,
  });
  let proc: ReturnType<typeof startLauncher> | undefined;
  let client: CmdClient | undefined;
  try {
    const vmi = tinyVmi(`bench-net-${i}`);
    vmi.spec.domain.firmware!.kernelBoot!.kernelArgs += ' kvts.net';
    vmi.spec.domain.devices!.interfaces = [{ name: 'default', masquerade: {} }];
    vmi.spec.networks = [{ name: 'default', pod: {} }];
    await stageTestGuest(vmi, root);
    await notify.start();
    const t0 = process.hrtime.bigint();
    const config = await setupPodNetwork(planPodNetwork(vmi)!, { netns: net.podPath });
    mkdirSync(share, { recursive: true });
    writePodNetworkConfig(share, 'default', config);
    const t1 = process.hrtime.bigint();
    const p = startLauncher(
      launcherPodFlags(vmi, root, share, { qemuTimeout: '300s' }),
      {},
      false,
      launcherInNetns(net, root),
    );
    proc = p;
    client = await connectLauncher(share, { exitCode: () => p.child.exitCode, stderr: p.stderr }, 120_000);
    const t2 = process.hrtime.bigint();
    await client.syncVMI(vmi);
    await waitFor('the DHCP lease', () => proc!.stderr().includes('"msg":"DHCP lease"'), 300_000, 20);
    const t3 = process.hrtime.bigint();
    rows.push({ phase1: ms(t0, t1), launcherStart: ms(t1, t2), syncToLease: ms(t2, t3), total: ms(t0, t3) });
  } finally {
    client?.close();
    if (proc && proc.child.exitCode === null) {
      proc.child.kill('SIGKILL');
      await proc.exited;
    }
    await killMentioning(root);
    await notify.stop(500);
    await rm(root, { recursive: true, force: true });
    net.destroy();
  }
}
const median = (k: keyof (typeof rows)[0]) =>
  [...rows.map((r) => r[k])].sort((a, b) => a - b)[Math.floor(rows.length / 2)];
console.log(
  JSON.stringify(
    {
      runs,
      medianMs: {
        phase1: median('phase1'),
        launcherStartToSocket: median('launcherStart'),
        syncToGuestLease: median('syncToLease'),
        phase1StartToGuestLease: median('total'),
      },
      rows,
    },
    null,
    2,
  ),
);
