import preset from '../../jest.preset.js';
// the apiserver suite talks to a real kube-apiserver: allow for a busy machine
export default { ...preset, testTimeout: 30000 };
