#!/usr/bin/env bash
# Builds interop/go (upstream KubeVirt's generated handler<->launcher gRPC code, grpc-go) into the
# cache and prints the binary's path. Exits at once when the binary for these sources is cached.
# Used by tools/setup.d/40-cmd-interop.sh and by src/interop.test.ts.
set -euo pipefail
src="$(cd "$(dirname "$0")/go" && pwd)"
cache="${KVTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubevirt-ts}"
export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "cmd-interop: go is not installed (needed for the upstream interop tests)" >&2; exit 1; }
key="$( (cat "$src/go.mod" "$src/go.sum" "$src/main.go"; go env GOVERSION) | sha256sum | cut -c1-16)"
out="$cache/cmd-interop/$key/kvts-cmd-interop"
if [ -x "$out" ]; then echo "$out"; exit 0; fi
echo "[cmd-interop] building upstream interop tool (Go module proxy: kubevirt.io/kubevirt, grpc-go)" >&2
mkdir -p "$(dirname "$out")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$src/go.mod" "$src/go.sum" "$src/main.go" "$work/"
cd "$work"
export GOFLAGS="-mod=mod -buildvcs=false" GOTOOLCHAIN="${GOTOOLCHAIN:-local}" CGO_ENABLED=0
go build -p "${KVTS_GO_PARALLEL:-2}" -trimpath -o "$out.tmp" .
mv "$out.tmp" "$out"
echo "$out"
