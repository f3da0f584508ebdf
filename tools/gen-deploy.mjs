#!/usr/bin/env node
// `node tools/gen-deploy.mjs [--check] [--registry R] [--tag T]`: the deploy/ generator, written in TypeScript
// with @kubernetes/client-node's model types in tools/testenv/src/gen-deploy.ts (run after tools/testenv's build).
import { main } from './testenv/dist/gen-deploy.js';

export * from './testenv/dist/gen-deploy.js';

if (process.argv[1] && import.meta.filename === process.argv[1]) main();
