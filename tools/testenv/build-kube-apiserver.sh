#!/usr/bin/env bash
# Builds kube-apiserver and kubectl at the version pinned in tools/testenv/kube-apiserver/go.mod from the
# Go module proxy and caches them under $KVTS_CACHE/kube/<version>/. Idempotent: exits at once when cached.
# Usage: tools/testenv/build-kube-apiserver.sh   (prints the binary path on stdout)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mod="$here/kube-apiserver"
ver="$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$mod/go.mod")"
cache="${KVTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubevirt-ts}"
out="$cache/kube/$ver/kube-apiserver"
if [ -x "$out" ] && [ -x "$cache/kube/$ver/kubectl" ]; then echo "$out"; exit 0; fi
# a non-login shell (CI) may lack Go's default install dir on PATH
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "build-kube-apiserver: go is not installed (needed to build kube-apiserver; or set KUBEBUILDER_ASSETS)" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
echo "[testenv] building kube-apiserver and kubectl $ver (first time: many minutes)" >&2
# Work on a copy so the committed go.mod/go.sum stay untouched by -mod=mod resolution.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp "$mod/go.mod" "$work/"
[ -f "$mod/go.sum" ] && cp "$mod/go.sum" "$work/"
cd "$work"
export GOFLAGS="-mod=mod -buildvcs=false" GOTOOLCHAIN="${GOTOOLCHAIN:-local}" CGO_ENABLED=0
ldflags="-s -w \
  -X k8s.io/component-base/version.gitVersion=$ver \
  -X k8s.io/component-base/version.gitMajor=1 \
  -X k8s.io/component-base/version.gitMinor=$(echo "$ver" | cut -d. -f2) \
  -X k8s.io/client-go/pkg/version.gitVersion=$ver"
for cmd in kube-apiserver kubectl; do
  bin="$cache/kube/$ver/$cmd"
  [ -x "$bin" ] && continue
  go build -p "${KVTS_GO_PARALLEL:-2}" -trimpath -ldflags "$ldflags" -o "$bin.tmp" "k8s.io/kubernetes/cmd/$cmd"
  mv "$bin.tmp" "$bin"
done
echo "$out"
