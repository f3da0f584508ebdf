export const API_GROUP = 'kubevirt.io';
