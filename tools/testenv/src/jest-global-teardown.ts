import { globalTeardown } from './jest-global.js';
export default globalTeardown;
