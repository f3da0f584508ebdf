#!/usr/bin/env node
// `node tools/check-examples.mjs DIR`: every manifest under DIR (e.g. a checkout of upstream KubeVirt's examples/)
// checked with kv-validate's validator: `FILE: accepted|refused|skipped`, the refusals' `path: reason` lines, and the
// summary `examples: N accepted, M refused, K skipped` (exit 1 when one is refused). Needs @kubevirt-ts/api built
// (packages/api/src/cli/check-examples.ts).
import { main } from '../packages/api/dist/cli/check-examples.js';

process.exit(main());
