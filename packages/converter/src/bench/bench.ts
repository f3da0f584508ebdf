// npm run bench:converter — prints VMIs converted per second (toDomain + toDomainXml) on one core,
// over the reference vectors and over one large VMI (64 disks, 16 interfaces); parse rate too.
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

// ../shared/reference/converter beside the repository, or $KVTS_SHARED_DIR/reference/converter
const REF =
  (process.env.KVTS_SHARED_DIR ?? fileURLToPath(new URL('../../../../../shared', import.meta.url))) +
  '/reference/converter/';
const SECONDS = Number(process.env.BENCH_SECONDS ?? 2);

function rate(label: string, items: unknown[], fn: (x: never) => unknown): void {
  for (let i = 0; i < 200; i++) fn(items[i % items.length] as never); // warm up
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
  const vectors = readdirSync(REF)
    .filter((f) => f.endsWith('.yaml') && !f.startsWith('15-'))
    .sort()
    .map((f) =>
      setVirtualMachineInstanceDefaults(
        vmiFromManifest(parseManifests(readFileSync(path.join(REF, f), 'utf8'))[0]),
      ),
    );
  const large = setVirtualMachineInstanceDefaults(largeVmi());
  console.log(
    `node ${process.version}, single thread, ${SECONDS}s per line, API defaults applied beforehand;`,
  );
  console.log(
    'rates per CPU-second of this process (wall-clock rate in parentheses: lower when the machine is shared)',
  );
  rate(
    `reference vectors (${vectors.length}): toDomain + toDomainXml`,
    vectors,
    (v: VirtualMachineInstance) => toDomainXml(toDomain(v)),
  );
  rate(`reference vectors (${vectors.length}): toDomain only`, vectors, (v: VirtualMachineInstance) =>
    toDomain(v),
  );
  rate('large VMI (64 disks, 16 interfaces): toDomain + toDomainXml', [large], (v: VirtualMachineInstance) =>
    toDomainXml(toDomain(v)),
  );
  const xmls = vectors.map((v) => toDomainXml(toDomain(v)));
  rate(`reference vectors (${vectors.length}): parseDomainXml`, xmls, (x: string) => parseDomainXml(x));
  rate('large VMI: parseDomainXml', [toDomainXml(toDomain(large))], (x: string) => parseDomainXml(x));
}

main();
