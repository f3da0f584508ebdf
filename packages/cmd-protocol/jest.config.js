import preset from '../../jest.preset.js';
// Socket tests wait on real timers (reconnects, backoff); leave room on a loaded 2-core CI machine.
export default { ...preset, testTimeout: 30_000 };
