#!/usr/bin/env bash
# Installs everything the project needs on a Debian 12 machine (as root) and builds it.
# Quick when everything is already there. Used by tools/run.sh and tools/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '[setup] %s\n' "$*" >&2; }

APT_PKGS=(
  libvirt-daemon libvirt-daemon-driver-qemu libvirt-dev libvirt-clients
  qemu-system-x86 qemu-utils busybox-static cpio genisoimage xorriso
  protobuf-compiler etcd-server python3 build-essential pkg-config ovmf
  passt dnsmasq-base nftables iproute2
)
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

if ! command -v node >/dev/null || [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
  echo "setup: Node.js >= 20 is required (found: $(node -v 2>/dev/null || echo none))" >&2
  exit 1
fi

export npm_config_nodedir="${npm_config_nodedir:-/usr}"
stamp=node_modules/.kvts-lock-stamp
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
  log "npm ci"
  npm ci --no-audit --no-fund --loglevel=error
  touch "$stamp"
fi

# Extra setup steps of parts of the project (test guest, test control plane, users, ...):
# each tools/setup.d/NN-name.sh is idempotent and quick when its work is already done.
for step in tools/setup.d/*.sh; do
  [ -e "$step" ] || continue
  log "step $(basename "$step")"
  bash "$step"
done

export NX_DAEMON=false NX_NO_CLOUD=true NX_TUI=false
log "building packages and apps"
npx nx run-many -t build --outputStyle=static >/dev/null || npx nx run-many -t build --outputStyle=stream --skip-nx-cache
log "ready"
