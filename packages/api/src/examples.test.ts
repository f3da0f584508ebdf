import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { isKubeVirtApiVersion } from './cli/validate-file.js';
import { parseManifests } from './manifests.js';
import { validateObject } from './validate.js';
import type { Any } from './test-fixtures.js';

const EXAMPLES = fileURLToPath(new URL('../../../examples/', import.meta.url));

// documents of other APIs an example ships with (a Secret, claims) are not validated (kv-validate skips them)
test.each(readdirSync(EXAMPLES).filter((f) => /\.ya?ml$|\.json$/.test(f)))('examples/%s validates', (f) => {
  const docs = parseManifests(readFileSync(EXAMPLES + f, 'utf8')) as { apiVersion: string }[];
  const ours = docs.filter((d) => isKubeVirtApiVersion(d.apiVersion));
  expect(ours.length).toBeGreaterThan(0);
  for (const d of ours) expect(validateObject(d)).toEqual([]);
});

test('what kubectl get -o yaml prints for an upstream VM and its VMI validates, and survives defaulting unchanged', async () => {
  const { setVirtualMachineDefaults, setVirtualMachineInstanceDefaults } = await import('./defaults.js');
  const docs = parseManifests(
    readFileSync(fileURLToPath(new URL('../testdata/upstream-vm-get.yaml', import.meta.url)), 'utf8'),
  );
  expect(docs.map((d) => (d as { kind: string }).kind)).toEqual(['VirtualMachine', 'VirtualMachineInstance']);
  for (const d of docs) expect(validateObject(d)).toEqual([]);
  // a cluster-defaulted object is a fixed point of our defaults (our defaults agree with upstream's)
  const [vm, vmi] = docs as [never, never];
  const dvmi: Any = setVirtualMachineInstanceDefaults(vmi);
  expect(dvmi.spec).toEqual((vmi as Any).spec);
  expect(validateObject(setVirtualMachineDefaults(vm))).toEqual([]);
});
