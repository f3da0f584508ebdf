// Shared test fixtures (not shipped: dist/**/test-* is excluded from the package).
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The converter's reference VMIs (packages/converter/test-fixtures/README.md). */
export const REFERENCE_DIR = fileURLToPath(
  new URL('../../converter/test-fixtures/reference', import.meta.url),
);

export function referenceYamls(): { file: string; text: string }[] {
  return readdirSync(REFERENCE_DIR)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((f) => ({ file: f, text: readFileSync(join(REFERENCE_DIR, f), 'utf8') }));
}

export type Any = any;

/** A valid VMI with two disks, one masquerade interface on the pod network. */
export function baseVmi(): Any {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstance',
    metadata: { name: 'testvmi', namespace: 'default' },
    spec: {
      domain: {
        resources: { requests: { memory: '128Mi' } },
        devices: {
          disks: [
            { name: 'root', disk: { bus: 'virtio' } },
            { name: 'cloudinit', disk: {} },
          ],
          interfaces: [{ name: 'default', masquerade: {} }],
        },
      },
      volumes: [
        { name: 'root', containerDisk: { image: 'quay.io/containerdisks/fedora:latest' } },
        { name: 'cloudinit', cloudInitNoCloud: { userData: '#cloud-config\n' } },
      ],
      networks: [{ name: 'default', pod: {} }],
    },
  };
}

export function baseVm(): Any {
  const vmi = baseVmi();
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachine',
    metadata: { name: 'testvm', namespace: 'default' },
    spec: {
      runStrategy: 'Always',
      template: { metadata: { labels: { app: 'testvm' }, creationTimestamp: null }, spec: vmi.spec },
    },
  };
}

export function baseVmim(): Any {
  return {
    apiVersion: 'kubevirt.io/v1',
    kind: 'VirtualMachineInstanceMigration',
    metadata: { name: 'migrate-testvmi', namespace: 'default' },
    spec: { vmiName: 'testvmi' },
  };
}
