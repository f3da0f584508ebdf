#!/usr/bin/env bash
# Installs everything the project needs on a Debian 12 machine (as root) and builds it.
# Quick when everything is already there. Used by tools/run.sh and tools/test.sh.
#   bash tools/setup.sh          everything (the test suite: also etcd, protoc, Go, kube-apiserver and
#                                kubectl, the cmd-protocol interop tool; builds every project)
#   bash tools/setup.sh --run    only what the main job (tools/run.sh) needs: Node 24, the runtime
#                                dependencies of virt-launcher (npm ci with a workspace filter) and TypeScript,
#                                the qemu user, the test guest, the build of virt-launcher and what it imports
#                                (tools/run-build.mjs: tsc's output, not type-checked)
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
# only for the tests: the test control plane's etcd; protoc for tools/gen-proto.sh; ISC dhclient, the DHCPv6
# client of packages/network's namespace tests (the test guest downloads its own copy, see tools/guest/build.sh);
# jemalloc, the virt-controller image's allocator, for npm run bench:controller to run it as the image does
# time: /usr/bin/time, with which tools/bench-main-job.sh (run by tools/test.sh) measures the main job
[ "$mode" = run ] || APT_PKGS+=(protobuf-compiler etcd-server isc-dhcp-client libjemalloc2 time)
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

# Extra setup steps of parts of the project (test guest, test control plane, users, ...):
# each tools/setup.d/NN-name.sh is idempotent and quick when its work is already done.
# A step whose header has the line `# setup: run` is also needed by the main job; the others only by tests.
# They need neither Node.js nor node_modules, so they run (in order) while Node.js is installed and npm ci runs.
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

stamp=node_modules/.kvts-lock-stamp
lock_hash="$(sha256sum package-lock.json | cut -d' ' -f1)"
have="$(cat "$stamp" 2>/dev/null || true)"
# The main job installs only what virt-launcher imports at run time (npm ci with the workspace filter and
# without devDependencies: about 150 of the lock's 1080 packages) and the lock's typescript on its own. That
# install runs no install scripts, so it needs neither Node 24 nor its headers: it runs with the machine's
# npm while Node 24 is fetched, and tools/run-build.mjs compiles the libvirt addon (node-libvirt's
# build:native) under Node 24 afterwards. Any install of the same lock file serves the main job (a full one
# too); the test mode replaces a main-job install by a full one.
run_ci_pid=
tool_pids=
if [ "$mode" = run ]; then
  case "$have" in *" $lock_hash") run_ci=no ;; *) run_ci=yes ;; esac
  if [ "$run_ci" = yes ]; then
    log "npm ci of virt-launcher's runtime dependencies"
    (npm ci --omit=dev --workspace=apps/virt-launcher --include-workspace-root=false --ignore-scripts \
      --no-audit --no-fund --loglevel=error && echo "run $lock_hash" >"$stamp") &
    run_ci_pid=$!
  fi
  # a full install has the build tools; the main job's does not: the lock's typescript (tools/run-build.mjs
  # compiles with it), esbuild and its platform binary (tools/bundle-app.mjs bundles the launcher with them)
  if [ "$run_ci" = yes ] || [ ! -f node_modules/typescript/package.json ] || [ ! -f node_modules/esbuild/package.json ]; then
    tools_out="$(mktemp -d)"
    esbuild_platform="$(node -p '`@esbuild/${process.platform}-${process.arch}`')"
    for p in typescript esbuild "$esbuild_platform"; do
      bash tools/lock-package-install.sh "$p" >"$tools_out/${p//\//+}" &
      tool_pids="$tool_pids $!"
    done
  fi
fi

# Node 24 first on PATH (installed into the cache when the machine's node is older), headers for node-gyp
source tools/node-env.sh
log "node $(node --version) ($(command -v node))"

npm_status=0
if [ "$mode" = run ]; then
  [ -z "$run_ci_pid" ] || wait "$run_ci_pid" || npm_status=$?
else
  # node_modules is reinstalled when the lock file changes or it was installed under another Node.js
  want="$(node -p process.version) $lock_hash"
  if [ "$have" != "$want" ]; then
    log "npm ci"
    if npm ci --no-audit --no-fund --loglevel=error; then echo "$want" >"$stamp"; else npm_status=$?; fi
  fi
fi
tool_status=0
for pid in $tool_pids; do wait "$pid" || tool_status=$?; done
steps_status=0
wait "$steps_pid" || steps_status=$?
[ "$npm_status" = 0 ] || { echo "setup: npm ci failed ($npm_status)" >&2; exit 1; }
[ "$tool_status" = 0 ] || { echo "setup: tools/lock-package-install.sh failed ($tool_status)" >&2; exit 1; }
[ "$steps_status" = 0 ] || { echo "setup: a tools/setup.d step failed ($steps_status)" >&2; exit 1; }

if [ "$mode" = run ]; then
  # tsc's output without its type check (the test mode's full build has it): see tools/run-build.mjs
  log "building virt-launcher and what it imports"
  typescript=node_modules/typescript
  if [ -n "$tool_pids" ]; then
    typescript="$(cat "$tools_out/typescript")"
    export KVTS_ESBUILD_DIR="$(cat "$tools_out/esbuild")"
    export ESBUILD_BINARY_PATH="$(cat "$tools_out/${esbuild_platform//\//+}")/bin/esbuild"
    rm -rf "$tools_out"
  fi
  node tools/run-build.mjs "$typescript" >/dev/null
  log "ready"
  exit 0
fi

export NX_DAEMON=false NX_NO_CLOUD=true NX_TUI=false
log "building packages and apps"
build=(npx nx run-many -t build)
"${build[@]}" --outputStyle=static >/dev/null || "${build[@]}" --outputStyle=stream --skip-nx-cache
log "ready"
