// Benchmark (root): time from phase-1 start to the DHCP lease of a client on the bridge, split into
// phase 1, DHCP server start and the lease, and the resident memory of the DHCP server (dnsmasq).
// Real namespaces and tools; busybox udhcpc in a stand-in guest netns is the client (a real guest's
// boot time is not part of this figure). Usage: npm run bench -w @kubevirt-ts/network [-- ROUNDS]
import { readFileSync } from 'node:fs';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { planPodNetwork } from '../plan.js';
import { setupPodNetwork } from '../phase1.js';
import { startDhcpServer } from '../phase2.js';
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
const rssKiB = (pid: number) =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
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
    const dhcp = await startDhcpServer({
      config,
      dns: { nameservers: ['10.96.0.10'], searchDomains: ['svc.cluster.local'] },
      hostname: 'bench',
      runDir: mkdtempSync(path.join(os.tmpdir(), 'kvts-bench-')),
      netns: t.podPath,
    });
    const t2 = process.hrtime.bigint();
    t.dhcp(guest);
    await dhcp.waitForLease();
    const t3 = process.hrtime.bigint();
    const rss = rssKiB(dhcp.pid);
    await dhcp.stop();
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
      dhcpServerRssKiB: f('rss'),
      rows,
    },
    null,
    2,
  ),
);
