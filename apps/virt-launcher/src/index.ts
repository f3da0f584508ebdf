// @kubevirt-ts/virt-launcher: the launcher app. Exported for e2e tests and tools.
export { Launcher, type LauncherConfig, type LauncherResult, type Stage } from './launcher.js';
export { ExitCode, LauncherError } from './errors.js';
export {
  parseLauncherFlags,
  parseStandaloneFlags,
  parseDuration,
  type LauncherFlags,
  type StandaloneFlags,
} from './flags.js';
export { findPidFiles, ownedLeftovers, procInfo, type Leftovers, type ProcInfo } from './procs.js';
export {
  startStandalone,
  runStandalone,
  runStandaloneMonitor,
  STANDALONE_CHILD_ENV,
  STANDALONE_VMI_ENV,
  standaloneChildEnv,
  takeStandaloneVmi,
  loadVmi,
  tailFile,
  QEMU_USER,
  standaloneVmOptions,
  type StandaloneHandle,
  type StandaloneIO,
} from './standalone.js';
export { podConfig } from './pod-config.js';
export { rotateIfLarge, capLogFile, SERIAL_LOG_MAX_BYTES } from './serial-log.js';
export { kvmAvailable, createLayout } from './wiring.js';
