import { globalSetup } from './jest-global.js';
export default globalSetup;
