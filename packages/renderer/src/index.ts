// @kubevirt-ts/renderer: VirtualMachineInstance -> virt-launcher Pod.
export { renderLaunchPod, launcherCommand, computeCapabilities, configSourceDir, POD_DIRS, RESERVED_VOLUME_NAMES, LAUNCHER_UID,
  COMPUTE_CONTAINER, LABEL_APP, LABEL_CREATED_BY, LABEL_VM_NAME, ANNOTATION_DOMAIN, NODE_SCHEDULABLE_LABEL,
  DEFAULT_GRACE_PERIOD_SECONDS, podInterfaceName, podProbe, ANNOTATION_MULTUS_NETWORKS, ANNOTATION_MULTUS_DEFAULT_NETWORK } from './render.js';
export { RenderError, resolveConfig, rendererConfigFromData, type RendererConfig, type ResolvedConfig } from './config.js';
export { memoryOverhead, computeResources, vcpuCount, guestMemory, ioThreadCount, interfaceCount, OVERHEAD, formatBytes, formatCpu,
  DEVICE_KVM, DEVICE_TUN, DEVICE_VHOST_NET, DEVICE_VHOST_VSOCK, EPHEMERAL_STORAGE_OVERHEAD, type MemoryOverhead, type ResourceList } from './resources.js';
