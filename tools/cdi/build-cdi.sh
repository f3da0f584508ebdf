#!/usr/bin/env bash
# Builds CDI (kubevirt.io/containerized-data-importer, the Containerized Data Importer behind DataVolumes) at the
# version pinned below from the Go module proxy, and caches its binaries in $KVTS_CACHE/cdi/<version>/bin:
#   cdi-operator cdi-controller cdi-apiserver cdi-uploadproxy cdi-uploadserver cdi-importer cdi-cloner
#   cdi-image-size-detection (run from the importer image by host-assisted clones) and manifest-generator (CDI's own
#   generator of its operator manifest and CR, run by tools/cdi/gen-manifests.sh).
# Idempotent: prints the directory at once when every binary is there.
#
# How (and why not -mod=vendor): the module proxy's zip of CDI carries vendor/modules.txt but not the vendored
# sources (Go strips vendor/ from module zips), nor the nested module staging/src/kubevirt.io/
# containerized-data-importer-api that upstream's go.mod replaces with that local directory. So this copies the
# module (from the module cache, `go mod download`) into a temporary directory, points that one replace at the
# published module of the same version (kubevirt.io/containerized-data-importer-api@<version>, which the proxy
# serves), drops vendor/, and builds with -mod=mod: every other dependency at the version upstream's go.mod and go.sum
# pin (checked against that go.sum; kubevirt.io modules are not in the checksum database, hence GONOSUMDB).
# libnbd: cdi-importer's VDDK data source (pkg/importer/vddk-datasource_amd64.go: VMware disks through nbdkit's vddk
# plugin and VMware's proprietary VDDK library) imports the libnbd Go binding, libguestfs.org/libnbd v1.11.5, a cgo
# package. The Go module proxy refuses that module (403) and Debian has no Go binding of libnbd, so it is replaced by
# tools/cdi/libnbd-unsupported (same package API, every call fails with "VDDK imports are not supported by this build
# of CDI"): VDDK is the one source that calls it, and it needs VMware's library this project cannot ship anyway.
# So every binary is static (CGO_ENABLED=0) and the images need no libnbd. Version variables as upstream's
# hack/build/version.sh sets them (pkg/version: gitVersion, gitCommit, gitTreeState, buildDate).
# Usage: tools/cdi/build-cdi.sh            -> the bin directory on stdout
#        tools/cdi/build-cdi.sh --version  -> the pinned version
set -euo pipefail
# v1.58.0 is the only CDI version the module proxy serves (v1.60+ are refused, there is no version list)
VERSION="${KVTS_CDI_VERSION:-v1.58.0}"
module="kubevirt.io/containerized-data-importer"
api="kubevirt.io/containerized-data-importer-api"
bins=(cdi-operator cdi-controller cdi-apiserver cdi-uploadproxy cdi-uploadserver cdi-importer cdi-cloner
  cdi-image-size-detection manifest-generator)
if [ "${1:-}" = --version ]; then echo "$VERSION"; exit 0; fi
here="$(cd "$(dirname "$0")" && pwd)"
[ $# -eq 0 ] || { echo "build-cdi: unexpected argument '$1' (usage: $0 [--version])" >&2; exit 2; }
cache="${KVTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubevirt-ts}"
out="$cache/cdi/$VERSION/bin"
missing=0
for b in "${bins[@]}"; do [ -x "$out/$b" ] || missing=1; done
if [ "$missing" = 0 ]; then echo "$out"; exit 0; fi
# a non-login shell (CI) may lack Go's default install dir on PATH
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "build-cdi: go is not installed (needed to build $module@$VERSION)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "build-cdi: python3 is not installed (reads go's JSON)" >&2; exit 1; }
echo "[cdi] building $module@$VERSION" >&2
t0=$SECONDS
work="$(mktemp -d)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}" GOFLAGS="-buildvcs=false -mod=mod" GONOSUMDB="${GONOSUMDB:-kubevirt.io}"
cd "$work"
go mod download -json "$module@$VERSION" >dl.json
go mod download -json "$api@$VERSION" >dl-api.json
python3 - dl.json dl-api.json >plan.txt <<'PY'
import json, sys
for f in sys.argv[1:]:
    d = json.load(open(f))
    if d.get('Error'):
        sys.exit(f"build-cdi: go mod download: {d['Error']}")
dl = json.load(open(sys.argv[1]))
info = json.load(open(dl['Info']))
print(f"dir {dl['Dir']}")
print(f"commit {(dl.get('Origin') or info.get('Origin') or {}).get('Hash', '')}")
print(f"time {info['Time']}")
PY
src_dir="$(sed -n 's/^dir //p' plan.txt)"
commit="$(sed -n 's/^commit //p' plan.txt)"
when="$(sed -n 's/^time //p' plan.txt)"
cp -r "$src_dir" src
chmod -R u+w src
cp -r "$here/libnbd-unsupported" libnbd
cd src
rm -rf vendor
# the staging replace (a local directory the zip lacks) -> the published module of the same version; upstream's
# replace of k8s.io/dynamic-resource-allocation names a module path without a domain (unusable, and nothing built
# here imports it)
go mod edit -replace="$api=$api@$VERSION" -dropreplace=k8s.io/dynamic-resource-allocation \
  -replace=libguestfs.org/libnbd=../libnbd
go mod download "$api@$VERSION"
pkg="$module/pkg/version"
ldflags="-s -w -X '$pkg.gitVersion=$VERSION' -X '$pkg.gitTreeState=clean'"
[ -z "$commit" ] || ldflags+=" -X '$pkg.gitCommit=$commit'"
[ -z "$when" ] || ldflags+=" -X '$pkg.buildDate=$(date -u -d "$when" +%Y-%m-%dT%H:%M:%SZ)'"
mkdir -p "$work/bin"
for b in "${bins[@]}"; do
  case "$b" in
    cdi-image-size-detection | manifest-generator) path="./tools/$b" ;;
    *) path="./cmd/$b" ;;
  esac
  echo "[cdi]   $b" >&2
  CGO_ENABLED=0 nice -n 10 go build -p "${KVTS_GO_PARALLEL:-2}" -trimpath -ldflags "$ldflags" \
    -o "$work/bin/$b" "$path"
done
mkdir -p "$out"
for b in "${bins[@]}"; do
  mv "$work/bin/$b" "$out/$b.tmp"
  mv "$out/$b.tmp" "$out/$b"
done
echo "[cdi] built in $((SECONDS - t0))s" >&2
echo "$out"
