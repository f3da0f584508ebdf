# Debian 12 packages of each image's root filesystem (sourced by tools/images/build.sh).
# base: what the official Node.js binary needs (glibc, libstdc++, libgcc) plus CA certificates and tzdata-free basics.
IMG_PKGS_BASE="libc6,libstdc++6,libgcc-s1,ca-certificates"
# virt-handler: Pod networking phase 1 in a launcher Pod's network namespace: ip (iproute2), nft (nftables),
# nsenter (util-linux) to enter the namespace (sysctls there are written by Node under nsenter: no procps)
# and jemalloc, its allocator as virt-controller's (apps/virt-handler/Containerfile: 12-13 MiB of RSS glibc's malloc keeps)
IMG_PKGS_HANDLER="$IMG_PKGS_BASE,iproute2,nftables,util-linux,libjemalloc2"
# virt-handler also gets one file of a package: the containers tools' seccomp profile, the base of the launcher Pods'
# profile it installs (packages/handler/src/seccomp.ts); the package itself would bring its dependencies along (the CNI
# plugins, 45 MiB)
IMG_FILE_HANDLER_SECCOMP="golang-github-containers-common:/usr/share/containers/seccomp.json"
# virt-launcher: libvirt (session daemon), QEMU, disks, cloud-init ISOs, guest networking, a reaping PID 1
IMG_PKGS_LAUNCHER="$IMG_PKGS_BASE,libvirt-daemon,libvirt-daemon-driver-qemu,libvirt-clients,qemu-system-x86,qemu-utils,genisoimage,xorriso,nftables,iproute2,passt,tini,util-linux"
# virt-launcher also gets four files of Debian's ovmf (the whole package is 15 MiB of variants): the EFI code and variable
# store templates the converter names (packages/converter/src/context.ts DEFAULT_EFI), without and with Secure Boot
IMG_FILES_LAUNCHER_OVMF="ovmf:/usr/share/OVMF/OVMF_CODE.fd ovmf:/usr/share/OVMF/OVMF_VARS.fd ovmf:/usr/share/OVMF/OVMF_CODE.secboot.fd ovmf:/usr/share/OVMF/OVMF_VARS.ms.fd"
# virt-controller: jemalloc, its allocator (apps/virt-controller/Containerfile: it gives freed memory back to the
# system where glibc's malloc kept it, 7-8 MiB of its RSS; npm run bench:controller)
IMG_PKGS_CONTROLLER="$IMG_PKGS_BASE,libjemalloc2"
# the CDI add-on's data movers (cdi-importer, cdi-cloner, cdi-uploadserver; one root filesystem for the three): qemu-img
# (qemu-utils: format detection, conversion to raw, resize), tar (archive imports, filesystem clones), bash and
# coreutils (the cloner's entrypoint; CDI's claim-prime Pod runs /bin/bash), blockdev (util-linux), CA certificates
# (https sources)
IMG_PKGS_CDI_DATA="$IMG_PKGS_BASE,qemu-utils,tar,bash,coreutils,util-linux"
