#!/usr/bin/env bash
# Builds Kubernetes binaries at the version pinned in tools/testenv/kube-apiserver/go.mod from the Go module
# proxy (CGO_ENABLED=0) and caches them under $KVTS_CACHE/kube/<version>/. Idempotent: exits at once when cached.
# Usage: tools/testenv/build-kube-apiserver.sh [cmd...]
#   no argument: kube-apiserver and kubectl (the test control plane); prints the kube-apiserver path on stdout.
#   with arguments: those k8s.io/kubernetes/cmd/<cmd> binaries (tools/cluster builds the node's: kubelet,
#   kube-scheduler, kube-controller-manager, kube-proxy); prints the cache folder on stdout.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
mod="$here/kube-apiserver"
ver="$(awk '$1=="require" && $2=="k8s.io/kubernetes" {print $3}' "$mod/go.mod")"
cache="${KVTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubevirt-ts}"
dir="$cache/kube/$ver"
if [ $# -eq 0 ]; then
  cmds=(kube-apiserver kubectl)
  result="$dir/kube-apiserver"
else
  cmds=("$@")
  result="$dir"
fi
todo=()
for cmd in "${cmds[@]}"; do
  case "$cmd" in
    kube-apiserver | kubectl | kubelet | kube-scheduler | kube-controller-manager | kube-proxy) ;;
    *) echo "build-kube-apiserver: unknown command '$cmd'" >&2; exit 2 ;;
  esac
  [ -x "$dir/$cmd" ] || todo+=("$cmd")
done
if [ ${#todo[@]} -eq 0 ]; then echo "$result"; exit 0; fi
# a non-login shell (CI) may lack Go's default install dir on PATH
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "build-kube-apiserver: go is not installed (needed to build ${todo[*]}; or set KUBEBUILDER_ASSETS)" >&2; exit 1; }
mkdir -p "$dir"
echo "[kube] building ${todo[*]} $ver (first time: many minutes each)" >&2
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
# One binary at a time, at low priority: the builds are CPU-heavy and the machine is shared.
for cmd in "${todo[@]}"; do
  bin="$dir/$cmd"
  nice -n 10 go build -p "${KVTS_GO_PARALLEL:-2}" -trimpath -ldflags "$ldflags" -o "$bin.tmp" "k8s.io/kubernetes/cmd/$cmd"
  mv "$bin.tmp" "$bin"
done
echo "$result"
