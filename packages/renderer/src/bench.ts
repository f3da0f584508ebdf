// Benchmark: renderLaunchPod throughput over the reference VMIs (defaults applied). Prints numbers; asserts nothing.
//   npm run bench -w @kubevirt-ts/renderer [-- ITERATIONS]
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  parseManifests,
  setVirtualMachineInstanceDefaults,
  type VirtualMachineInstance,
} from '@kubevirt-ts/api';
import { renderLaunchPod, memoryOverhead } from './index.js';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
// the converter's reference VMIs (packages/converter/test-fixtures/README.md)
const dir = join(repoRoot, 'packages', 'converter', 'test-fixtures', 'reference');
const vmis = readdirSync(dir)
  .filter((f) => f.endsWith('.yaml'))
  .sort()
  .map((f) => {
    const v = parseManifests(readFileSync(join(dir, f), 'utf8'))[0] as VirtualMachineInstance;
    v.metadata.uid = '00000000-0000-4000-8000-000000000000';
    return { file: f, vmi: setVirtualMachineInstanceDefaults(v) };
  });
const config = { launcherImage: 'registry.example.com/kubevirt-ts/virt-launcher:0.1.0', useEmulation: true };
const n = Number(process.argv[2] ?? 20000);

for (let i = 0; i < 2000; i++) renderLaunchPod(vmis[i % vmis.length]!.vmi, config); // warm up
const t0 = process.hrtime.bigint();
for (let i = 0; i < n; i++) renderLaunchPod(vmis[i % vmis.length]!.vmi, config);
const ns = Number(process.hrtime.bigint() - t0);
console.log(
  `renderLaunchPod: ${n} renders over ${vmis.length} reference VMIs: ${(ns / n / 1000).toFixed(1)} µs/render, ${Math.round(n / (ns / 1e9))} renders/s`,
);
console.log('memory overhead per reference VMI (MiB, with KVM; emulation adds 128):');
for (const { file, vmi } of vmis) {
  console.log(
    `  ${file.padEnd(28)} ${(memoryOverhead(vmi, { arch: 'amd64', additionalOverheadRatio: 1 }).bytes / 2 ** 20).toString().padStart(4)}`,
  );
}
