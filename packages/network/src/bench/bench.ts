// Benchmark (root): time from phase-1 start to the DHCP lease of a client on the bridge, split into
// phase 1, DHCP server start and the lease, and the extra resident memory of the DHCP server (this
// package's, in the process that runs it, as in the launcher: RSS before the start and after a lease).
// Real namespaces and tools; busybox udhcpc in a stand-in guest netns is the client (a real guest's
// boot time is not part of this figure). Usage: npm run bench -w @kubevirt-ts/network [-- ROUNDS]
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { planPodNetwork } from '../plan.js';
import { setupPodNetwork } from '../phase1.js';
import { createTopology, isRoot } from '../test-netns.js';
import type { VirtualMachineInstance } from '@kubevirt-ts/api';

if (!isRoot) {
  console.error('bench: needs root (network namespaces)');
  process.exit(2);
}
const rounds = Number(process.argv[2] ?? 5);
const vmi = {
  metadata: { name: 'bench' },
  spec: {
    domain: { devices: { interfaces: [{ name: 'default', masquerade: {} }] } },
    networks: [{ name: 'default', pod: {} }],
  },
} as unknown as VirtualMachineInstance;
const CHILD = fileURLToPath(new URL('./dhcp-child.js', import.meta.url));
const ms = (a: bigint, b: bigint) => Number(b - a) / 1e6;
const rows: { phase1: number; dhcpStart: number; lease: number; total: number; rss: number }[] = [];
for (let i = 0; i < rounds; i++) {
  const t = createTopology();
  try {
    const t0 = process.hrtime.bigint();
    const config = await setupPodNetwork(planPodNetwork(vmi)!, { netns: t.podPath });
    const t1 = process.hrtime.bigint();
    const guest = t.addGuest(config.bridge);
    const t1b = process.hrtime.bigint(); // the stand-in guest's own setup is not counted
    const cfg = path.join(t.tmp, 'net.json');
    writeFileSync(cfg, JSON.stringify(config));
    const child = spawn('ip', ['netns', 'exec', t.pod, process.execPath, '--expose-gc', CHILD, cfg], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    const lines = (n: number) =>
      new Promise<void>((resolve, reject) => {
        const check = () => out.split('\n').length > n && resolve();
        child.stdout.on('data', (d: Buffer) => ((out += d.toString()), check()));
        child.on('close', (code) => reject(new Error(`DHCP server exited ${code}`)));
        check();
      });
    await lines(1); // "ready"
    const t2 = process.hrtime.bigint();
    t.dhcp(guest);
    await lines(2);
    const t3 = process.hrtime.bigint();
    const m = JSON.parse(out.split('\n')[1]!) as { rssBeforeKiB: number; rssAfterLeaseKiB: number };
    const rss = m.rssAfterLeaseKiB - m.rssBeforeKiB;
    rows.push({
      phase1: ms(t0, t1),
      dhcpStart: ms(t1b, t2),
      lease: ms(t2, t3),
      total: ms(t0, t1) + ms(t1b, t3),
      rss,
    });
  } finally {
    t.destroy();
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const f = (k: keyof (typeof rows)[0]) => median(rows.map((r) => r[k]));
console.log(
  JSON.stringify(
    {
      rounds,
      medianMs: {
        phase1: f('phase1'),
        dhcpServerStart: f('dhcpStart'),
        leaseAfterServerUp: f('lease'),
        phase1ToLease: f('total'),
      },
      dhcpServerExtraRssKiB: f('rss'),
      rows,
    },
    null,
    2,
  ),
);
