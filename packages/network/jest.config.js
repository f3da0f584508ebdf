import preset from '../../jest.preset.js';
// real namespaces, tools and processes on a shared, slow machine: generous, not a performance bound
export default { ...preset, testTimeout: 300000 };
