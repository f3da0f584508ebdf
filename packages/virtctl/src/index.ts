// @kubevirt-ts/virtctl: the CLI's verbs, usable from code (run(argv, io) resolves to the exit status).
export { run, usage, loadKubeConfig, reasonOf, VERBS, CLIENT_VERSION, type Io } from './run.js';
export { createVm, createInstancetype, createPreference, render, type CreateCtx } from './create.js';
