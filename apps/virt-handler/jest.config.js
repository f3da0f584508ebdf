import preset from '../../jest.preset.js';
// no tests yet (the app is not written): the only project allowed to pass with none
export default { ...preset, passWithNoTests: true };
