// Shared jest settings: tests are compiled by tsc next to the code (dist/**/*.test.js)
// and run as ES modules (NODE_OPTIONS=--experimental-vm-modules), so no transformer is involved.
import { fileURLToPath } from 'node:url';
export default {
  testEnvironment: 'node',
  testMatch: ['<rootDir>/dist/**/*.test.js'],
  transform: {},
  reporters: ['default', fileURLToPath(new URL('./tools/jest-count-reporter.cjs', import.meta.url))],
};
