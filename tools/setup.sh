#!/usr/bin/env bash
# Installs everything the project needs on a Debian 12 machine (as root) and builds it.
# Quick when everything is already there. Used by tools/run.sh and tools/test.sh.
#   bash tools/setup.sh          everything (the test suite: also etcd, protoc, Go, kube-apiserver and
#                                kubectl, the cmd-protocol interop tool; builds every project)
#   bash tools/setup.sh --run    only what the main job (tools/run.sh) needs: Node 24, npm ci, the qemu
#                                user, the test guest, the build of virt-launcher and what it imports
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '[setup +%ss] %s\n' "$SECONDS" "$*" >&2; }
mode=all
case "${1:-}" in
  '') ;;
  --run) mode=run ;;
  *)
    echo "setup: unknown option '$1' (usage: setup.sh [--run])" >&2
    exit 2
    ;;
esac

APT_PKGS=(
  libvirt-daemon libvirt-daemon-driver-qemu libvirt-dev libvirt-clients
  qemu-system-x86 qemu-utils busybox-static cpio genisoimage xorriso
  python3 build-essential pkg-config ovmf kmod
  passt nftables iproute2
)
# only for the tests: the test control plane's etcd; protoc for tools/gen-proto.sh
[ "$mode" = run ] || APT_PKGS+=(protobuf-compiler etcd-server)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  if [ "$(id -u)" != 0 ]; then echo "setup: run as root to install ${missing[*]}" >&2; exit 1; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Node 24 first on PATH (installed into the cache when the machine's node is older), headers for node-gyp
source tools/node-env.sh
log "node $(node --version) ($(command -v node))"

# Extra setup steps of parts of the project (test guest, test control plane, users, ...):
# each tools/setup.d/NN-name.sh is idempotent and quick when its work is already done.
# A step whose header has the line `# setup: run` is also needed by the main job; the others only by tests.
# They need no node_modules, so they run (in order) while npm ci runs.
steps() {
  for step in tools/setup.d/*.sh; do
    [ -e "$step" ] || continue
    if [ "$mode" = run ] && ! grep -qx '# setup: run' "$step"; then continue; fi
    log "step $(basename "$step")"
    bash "$step" || return
  done
}
steps &
steps_pid=$!

# node_modules is reinstalled when the lock file changes or it was installed under another Node.js
stamp=node_modules/.kvts-lock-stamp
want="$(node -p process.version) $(sha256sum package-lock.json | cut -d' ' -f1)"
npm_status=0
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  log "npm ci"
  if npm ci --no-audit --no-fund --loglevel=error; then echo "$want" >"$stamp"; else npm_status=$?; fi
fi
steps_status=0
wait "$steps_pid" || steps_status=$?
[ "$npm_status" = 0 ] || { echo "setup: npm ci failed ($npm_status)" >&2; exit 1; }
[ "$steps_status" = 0 ] || { echo "setup: a tools/setup.d step failed ($steps_status)" >&2; exit 1; }

export NX_DAEMON=false NX_NO_CLOUD=true NX_TUI=false
if [ "$mode" = run ]; then
  log "building virt-launcher and what it imports"
  build=(npx nx run @kubevirt-ts/virt-launcher:build)
else
  log "building packages and apps"
  build=(npx nx run-many -t build)
fi
"${build[@]}" --outputStyle=static >/dev/null || "${build[@]}" --outputStyle=stream --skip-nx-cache
log "ready"
