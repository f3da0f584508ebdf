// Facts of KubeVirt's runtime that several packages share (the launcher Pod's user, the kernel's limit on
// unix socket paths). They live here, in the lowest package, so that no package imports a higher one for a
// constant; the converter re-exports them where its API promised them.

/** uid QEMU, libvirtd and the launcher run as in the Pod (upstream's `qemu` user, its NonRootUID). */
export const LAUNCHER_UID = 107;
/** gid QEMU, libvirtd and the launcher run as in the Pod (upstream's `qemu` group). */
export const LAUNCHER_GID = 107;

/** Longest unix socket path Linux binds or dials: sun_path is 108 bytes, including the terminating NUL. */
export const MAX_SOCKET_PATH_BYTES = 107;
