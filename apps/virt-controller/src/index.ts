export { parseControllerFlags, UsageError, USAGE, type ControllerFlags } from './flags.js';
