#!/usr/bin/env bash
# Builds Rancher's local-path-provisioner (the storage add-on's dynamic provisioner, deploy/addons/storage/) at the
# version pinned below from the Go module proxy (`go install module@version`: the module's own go.mod and go.sum,
# checked against the checksum database), static (CGO_ENABLED=0), and caches it as
# $KVTS_CACHE/storage/local-path-provisioner-<version>. Idempotent: prints the cached path at once when it is there.
# Usage: tools/storage/build-local-path.sh            -> path of the binary on stdout
#        tools/storage/build-local-path.sh --version  -> the pinned version
set -euo pipefail
# v0.0.30 is the newest version the module proxy serves (its list has no other; v0.0.31+ are refused)
LOCAL_PATH_VERSION="${KVTS_LOCAL_PATH_VERSION:-v0.0.30}"
module="github.com/rancher/local-path-provisioner"
if [ "${1:-}" = --version ]; then echo "$LOCAL_PATH_VERSION"; exit 0; fi
[ $# -eq 0 ] || { echo "build-local-path: unexpected argument '$1' (usage: $0 [--version])" >&2; exit 2; }
cache="${KVTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubevirt-ts}"
bin="$cache/storage/local-path-provisioner-$LOCAL_PATH_VERSION"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
# a non-login shell (CI) may lack Go's default install dir on PATH
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "build-local-path: go is not installed (needed to build $module@$LOCAL_PATH_VERSION)" >&2; exit 1; }
mkdir -p "$(dirname "$bin")"
echo "[storage] building $module@$LOCAL_PATH_VERSION" >&2
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# `go install m@v` outside any module: the module's go.mod decides every dependency's version, as upstream builds it
# (its scripts/build: static, stripped, main.VERSION set)
cd "$work"
GOBIN="$work/bin" GOFLAGS="-buildvcs=false" GOTOOLCHAIN="${GOTOOLCHAIN:-local}" CGO_ENABLED=0 \
  nice -n 10 go install -p "${KVTS_GO_PARALLEL:-2}" -trimpath \
  -ldflags "-s -w -X main.VERSION=$LOCAL_PATH_VERSION" "$module@$LOCAL_PATH_VERSION"
mv "$work/bin/local-path-provisioner" "$bin.tmp"
mv "$bin.tmp" "$bin"
echo "$bin"
