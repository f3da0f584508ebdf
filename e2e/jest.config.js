import preset from '../jest.preset.js';
// Real guests under TCG emulation: generous timeouts, one suite at a time (2 shared cores).
export default { ...preset, testTimeout: 180_000, maxWorkers: 1 };
