// npm run bench:converter — prints VMIs converted per CPU-second on one thread. Headline: the same
// pipeline as upstream's figure (API defaults, which return a deep copy of the input, + toDomain +
// toDomainXml) over the reference vectors, several runs; then the parts, one large VMI (64 disks,
// 16 interfaces) and parse rates.
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import {
  parseManifests,
  setVirtualMachineInstanceDefaults,
  vmiFromManifest,
  type VirtualMachineInstance,
} from '@kubevirt-ts/api';
import { toDomain } from '../convert.js';
import { parseDomainXml, toDomainXml } from '../xml.js';

// the package's reference vectors (test-fixtures/README.md)
const REF = fileURLToPath(new URL('../../test-fixtures/reference/', import.meta.url));
const SECONDS = Number(process.env.BENCH_SECONDS ?? 2);
const RUNS = Number(process.env.BENCH_RUNS ?? 5);

function rate(label: string, items: unknown[], fn: (x: never) => unknown): number {
  // warm up (JIT, heap sizing) for one CPU-second of this process (wall time would be short under load)
  const w0 = process.cpuUsage();
  for (let i = 0; ;) {
    for (let j = 0; j < 20; j++) fn(items[i++ % items.length] as never);
    const w = process.cpuUsage(w0);
    if (w.user + w.system >= 1_000_000) break;
  }
  let n = 0;
  const cpu0 = process.cpuUsage();
  const start = process.hrtime.bigint();
  const end = start + BigInt(Math.round(SECONDS * 1e9));
  let now = start;
  while (now < end) {
    for (let i = 0; i < 50; i++) fn(items[n++ % items.length] as never);
    now = process.hrtime.bigint();
  }
  const secs = Number(now - start) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  const cpuSecs = (cpu.user + cpu.system) / 1e6;
  console.log(
    `${label.padEnd(60)} ${Math.round(n / cpuSecs)
      .toString()
      .padStart(7)} /CPU-s ${((cpuSecs / n) * 1e6).toFixed(1).padStart(8)} us` +
      `   (wall: ${Math.round(n / secs)} /s)`,
  );
  return n / cpuSecs;
}

export function largeVmi(): VirtualMachineInstance {
  const disks = [];
  const volumes = [];
  const buses = ['virtio', 'scsi', 'sata', 'virtio'] as const;
  for (let i = 0; i < 64; i++) {
    const name = `disk${i}`;
    disks.push({
      name,
      disk: { bus: buses[i % 4] },
      ...(i === 0 ? { bootOrder: 1 } : {}),
      ...(i % 8 === 0 ? { dedicatedIOThread: true } : {}),
    });
    volumes.push(
      i % 3 === 0
        ? { name, containerDisk: { image: 'quay.io/containerdisks/fedora:latest' } }
        : i % 3 === 1
          ? { name, persistentVolumeClaim: { claimName: `pvc-${i}` } }
          : { name, emptyDisk: { capacity: '1Gi' } },
    );
  }
  const interfaces = [];
  const networks = [];
  for (let i = 0; i < 16; i++) {
    interfaces.push(
      i === 0
        ? { name: 'default', masquerade: {} }
        : { name: `net${i}`, bridge: {}, macAddress: `02:00:00:00:00:${i.toString(16).padStart(2, '0')}` },
    );
    networks.push(
      i === 0 ? { name: 'default', pod: {} } : { name: `net${i}`, multus: { networkName: `net-${i}` } },
    );
  }
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: 'large', namespace: 'bench', uid: '6f1c1c3e-7f4e-4d5b-9a43-2d2b1d2f0001' },
    spec: {
      domain: {
        ioThreadsPolicy: 'auto',
        cpu: { sockets: 4, cores: 4, threads: 2 },
        resources: { requests: { memory: '16Gi', cpu: '8' } },
        devices: {
          disks,
          interfaces,
          networkInterfaceMultiqueue: true,
          blockMultiQueue: true,
          rng: {},
          inputs: [{ name: 't', type: 'tablet', bus: 'usb' }],
        },
        features: { acpi: {}, apic: {}, hyperv: { relaxed: {}, vapic: {}, spinlocks: { spinlocks: 8191 } } },
        clock: {
          utc: {},
          timer: { hpet: { present: false }, pit: { tickPolicy: 'delay' }, rtc: { tickPolicy: 'catchup' } },
        },
      },
      volumes,
      networks,
    },
  };
}

function main(): void {
  const raw = readdirSync(REF)
    .filter((f) => f.endsWith('.yaml') && !f.startsWith('15-'))
    .sort()
    .map((f) => vmiFromManifest(parseManifests(readFileSync(path.join(REF, f), 'utf8'))[0]));
  const vectors = raw.map((v) => setVirtualMachineInstanceDefaults(v));
  const large = setVirtualMachineInstanceDefaults(largeVmi());
  console.log(`node ${process.version}, single thread, ${SECONDS}s per line;`);
  console.log(
    'rates per CPU-second of this process (wall-clock rate in parentheses: lower when the machine is shared)',
  );
  const pipeline = (v: VirtualMachineInstance) => toDomainXml(toDomain(setVirtualMachineInstanceDefaults(v)));
  const runs: number[] = [];
  for (let r = 1; r <= RUNS; r++)
    runs.push(
      rate(
        `SAME PIPELINE (defaults+copy, toDomain, toDomainXml), ${raw.length} vectors, run ${r}`,
        raw,
        pipeline,
      ),
    );
  runs.sort((a, b) => a - b);
  console.log(
    `${'SAME PIPELINE median of the runs'.padEnd(60)} ${Math.round(runs[Math.floor(runs.length / 2)]!)
      .toString()
      .padStart(7)} /CPU-s   (goal: 23000; upstream's Go on the same vectors: about 11500)`,
  );
  rate(`reference vectors (${raw.length}): API defaults (deep copy) only`, raw, (v: VirtualMachineInstance) =>
    setVirtualMachineInstanceDefaults(v),
  );
  rate(
    `reference vectors (${vectors.length}): toDomain + toDomainXml`,
    vectors,
    (v: VirtualMachineInstance) => toDomainXml(toDomain(v)),
  );
  rate(`reference vectors (${vectors.length}): toDomain only`, vectors, (v: VirtualMachineInstance) =>
    toDomain(v),
  );
  const largeRaw = largeVmi();
  rate('large VMI (64 disks, 16 interfaces): same pipeline', [largeRaw], pipeline);
  rate('large VMI (64 disks, 16 interfaces): toDomain + toDomainXml', [large], (v: VirtualMachineInstance) =>
    toDomainXml(toDomain(v)),
  );
  const xmls = vectors.map((v) => toDomainXml(toDomain(v)));
  rate(`reference vectors (${vectors.length}): parseDomainXml`, xmls, (x: string) => parseDomainXml(x));
  rate('large VMI: parseDomainXml', [toDomainXml(toDomain(large))], (x: string) => parseDomainXml(x));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) main();
