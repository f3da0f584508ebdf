import { API_GROUP } from './index.js';
test('group', () => expect(API_GROUP).toBe('kubevirt.io'));
