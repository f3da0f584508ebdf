#!/bin/bash
# Entrypoint of the cdi-cloner image (/usr/bin/cloner_startup.sh, the image's entrypoint: CDI's controller starts the
# host-assisted clone's source Pod with no command of its own). CDI's cdi-cloner binary streams the source claim to
# the target's upload server and must be told how many bytes it will send; this computes that from the environment
# the controller sets: VOLUME_MODE (block: the device at MOUNT_POINT, its size; filesystem: the directory at
# MOUNT_POINT, the bytes of its files, as `du -sb` counts them) and runs cdi-cloner from that directory.
set -euo pipefail
: "${VOLUME_MODE:?cloner: VOLUME_MODE is not set (block or filesystem)}"
: "${MOUNT_POINT:?cloner: MOUNT_POINT is not set}"
case "$VOLUME_MODE" in
  block)
    bytes="$(/usr/sbin/blockdev --getsize64 "$MOUNT_POINT")"
    kind=blockdevice-clone
    ;;
  *)
    cd "$MOUNT_POINT"
    bytes="$(du -sb . | cut -f1)"
    kind=filesystem-clone
    ;;
esac
echo "cloner: VOLUME_MODE=$VOLUME_MODE MOUNT_POINT=$MOUNT_POINT content=$kind bytes=$bytes"
exec /usr/bin/cdi-cloner -v=3 -alsologtostderr -content-type "$kind" -upload-bytes "$bytes" -mount "$MOUNT_POINT"
