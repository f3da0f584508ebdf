#!/usr/bin/env bash
# Builds upstream KubeVirt's own virtctl (cmd/virtctl at TAG, default v1.1.0) from a fetched copy of
# github.com/kubevirt/kubevirt with its vendor tree (nothing else is downloaded), into
# $KVTS_CACHE/upstream-virtctl/<TAG>/virtctl. Quick when it is already there.
#   bash tools/upstream-virtctl.sh            # prints the binary's path
#   KV_MIRROR=<bare git dir of kubevirt/kubevirt> TAG=v1.1.0 bash tools/upstream-virtctl.sh
# Without a mirror it says so and exits 3 (e2e/src/cluster/upstream-virtctl.test.ts then skips, visibly).
set -euo pipefail
TAG=${TAG:-v1.1.0}
CACHE=${KVTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubevirt-ts}
OUT_DIR=$CACHE/upstream-virtctl/$TAG
OUT=$OUT_DIR/virtctl
if [ -x "$OUT" ]; then
  echo "$OUT"
  exit 0
fi
KV_MIRROR=${KV_MIRROR:-/work/.mirror/kubevirt+kubevirt/repo}
if ! git -C "$KV_MIRROR" rev-parse --verify -q "refs/tags/$TAG" >/dev/null 2>&1; then
  echo "upstream-virtctl: no kubevirt/kubevirt git dir with tag $TAG at KV_MIRROR=$KV_MIRROR: not built" >&2
  exit 3
fi
command -v go >/dev/null || {
  echo "upstream-virtctl: go is not on PATH (tools/setup.sh installs it): not built" >&2
  exit 3
}
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
git -C "$KV_MIRROR" archive "$TAG" | tar -x -C "$src"
mkdir -p "$OUT_DIR"
# the version virtctl reports (`virtctl version`): upstream's build stamps it through -ldflags the same way
commit=$(git -C "$KV_MIRROR" rev-parse "$TAG^{commit}")
pkg=kubevirt.io/client-go/version
ldflags="-X $pkg.gitVersion=$TAG -X $pkg.gitCommit=$commit -X $pkg.gitTreeState=clean -X $pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
(cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=vendor GOTOOLCHAIN=local nice go build -ldflags "$ldflags" -o "$OUT.tmp" ./cmd/virtctl)
mv "$OUT.tmp" "$OUT"
echo "$OUT"
