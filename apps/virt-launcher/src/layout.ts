// The in-Pod file layout (the converter's PodLayout) under the launcher's root; a module of its own so that
// the flag checks (pod-config.ts) need not load the launcher's wiring.
import { createPodLayout, type PodLayout } from '@kubevirt-ts/converter';

export function createLayout(root: string): PodLayout {
  return createPodLayout(root === '/' ? '' : root);
}
