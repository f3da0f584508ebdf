// The only place this package touches @kubevirt-ts/api.
export type { FieldError, VirtualMachineInstance } from '@kubevirt-ts/api';
export { validateVirtualMachineInstance } from '@kubevirt-ts/api';
