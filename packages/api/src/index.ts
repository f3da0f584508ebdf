// @kubevirt-ts/api: kubevirt.io/v1 types and schemas, defaults, validation, CRD generation.
export * from './schemas.js';
export { labelSelectorError, labelSelectorMatches, labelSelectorString } from './selector.js';
export {
  applyPresets,
  presetConflicts,
  presetAnnotation,
  PRESET_EXCLUDE_ANNOTATION,
  type PresetResult,
} from './preset.js';
export { parseQuantity, isQuantity, quantityValue, formatBinaryQuantity } from './quantity.js';
export {
  type FieldError,
  KINDS,
  validateObject,
  validateVirtualMachine,
  validateVirtualMachineInstance,
  validateVirtualMachineInstanceMigration,
  validateVirtualMachineInstanceReplicaSet,
  validateVirtualMachinePool,
  validateVirtualMachineInstancePreset,
  validateInstancetypeOrPreference,
  validateMigrationPolicy,
  POOL_FIELDS_NOT_IMPLEMENTED,
  checkDns1123Label,
  checkDns1123Subdomain,
  checkQualifiedName,
  dropNulls,
  HYPERV_REQUIRES,
  type HypervFeature,
} from './validate.js';
export {
  type DefaultsOptions,
  DefaultsError,
  setVirtualMachineInstanceDefaults,
  setVirtualMachineDefaults,
  applyVmiSpecDefaults,
  vmRunStrategy,
  firmwareUUID,
  uuidV5,
  FIRMWARE_UUID_NAMESPACE,
  DEFAULT_MACHINE_TYPE,
  DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS,
} from './defaults.js';
export { parseManifests, vmiFromManifest } from './manifests.js';
export { checkFile, isKubeVirtApiVersion, type FileCheck } from './cli/validate-file.js';
export { manifestFiles } from './cli/manifest-files.js';
/** the `yaml` library, loaded on first use (the packages' one lazy loader) */
export { yaml } from './yaml-lazy.js';
export { pointerToPath, joinPath } from './paths.js';
export { LAUNCHER_UID, LAUNCHER_GID, MAX_SOCKET_PATH_BYTES } from './runtime.js';
export * from './kubevirt-cr.js';
export {
  commonClusterInstancetypes,
  commonClusterPreferences,
  COMMON_INSTANCETYPES_VERSION,
} from './common-instancetypes.js';
export * from './instancetype.js';
export * from './migration-policy.js';
export {
  crdFor,
  generateCrdFiles,
  toStructural,
  CRD_KINDS,
  NOT_IMPLEMENTED_KINDS,
  KUBEVIRT_IO_VERSIONS,
  crdGroup,
  crdVersions,
  notImplementedMessage,
  type CrdVersion,
  type JSONSchemaProps,
  type KindInfo,
} from './crd.js';
