// Benchmark: what the standalone launcher's passt costs per NIC: time from spawn to its bound socket
// (startPasst), and its resident memory (RSS and PSS, 300 ms after the start, no guest connected). As root
// passt runs as uid 107, as in the launcher. Usage: npm run bench:passt -w @kubevirt-ts/network [-- ROUNDS]
import { chmodSync, chownSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startPasst } from '../passt.js';

const rounds = Number(process.argv[2] ?? 5);
const user = process.getuid?.() === 0 ? { uid: 107, gid: 107 } : undefined;
const kib = (file: string, key: string) =>
  Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(readFileSync(file, 'utf8'))?.[1] ?? NaN);
const rows: { ms: number; rss: number; pss: number }[] = [];
for (let i = 0; i < rounds; i++) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kvts-passt-bench-'));
  chmodSync(dir, 0o700);
  if (user) chownSync(dir, user.uid, user.gid);
  const t0 = process.hrtime.bigint();
  const [p] = await startPasst(
    [
      {
        index: 0,
        name: 'default',
        socket: path.join(dir, 'passt0.sock'),
        mac: '52:54:00:00:00:01',
        device: 'virtio-net-pci-non-transitional',
        mtu: 65520,
        tcpPorts: [],
        udpPorts: [],
      },
    ],
    { user },
  );
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  await new Promise((r) => setTimeout(r, 300));
  rows.push({
    ms,
    rss: kib(`/proc/${p!.pid}/status`, 'VmRSS') / 1024,
    pss: kib(`/proc/${p!.pid}/smaps_rollup`, 'Pss') / 1024,
  });
  await p!.stop();
  rmSync(dir, { recursive: true, force: true });
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`passt, ${rounds} rounds (medians):`);
console.log(`  spawn to bound socket: ${median(rows.map((r) => r.ms)).toFixed(0)} ms`);
console.log(
  `  RSS: ${median(rows.map((r) => r.rss)).toFixed(1)} MiB, PSS: ${median(rows.map((r) => r.pss)).toFixed(1)} MiB`,
);
