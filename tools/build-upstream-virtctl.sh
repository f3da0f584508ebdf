#!/usr/bin/env bash
# Builds upstream KubeVirt's own virtctl (cmd/virtctl of kubevirt.io/kubevirt) at the version pinned below from the
# Go module proxy, static (CGO_ENABLED=0), and caches it as $KVTS_CACHE/upstream-virtctl/<version>/virtctl, the
# binary e2e/src/cluster/upstream-virtctl.test.ts runs against kubevirt-ts. Idempotent: prints the cached path at
# once when it is there.
#
# `go install kubevirt.io/kubevirt/cmd/virtctl@v1.1.0` is refused: upstream's go.mod has replace directives (its
# staging modules kubevirt.io/api and kubevirt.io/client-go as local directories, and pinned versions of k8s.io/*,
# openshift, ...). So this builds it from a wrapper module made in a temporary directory, generated from the
# downloaded module's own go.mod (read from the module cache, nothing of it kept in this repository):
#   - require kubevirt.io/kubevirt <version>;
#   - every replace of upstream's go.mod whose target is a module version, as it is;
#   - the staging replaces (local directories) pointed at the published modules of the same version from the proxy
#     (kubevirt.io/api, kubevirt.io/client-go <version>: upstream publishes its staging tree as those modules);
#     a staging module that is not published (github.com/golang/glog: upstream's glog-to-klog shim) is left to the
#     version upstream's go.mod requires;
#   - the go directive of upstream's go.mod.
# Then `go mod tidy` (checked against the checksum database) and `go build kubevirt.io/kubevirt/cmd/virtctl` with
# the version variables upstream's hack/version.sh sets (kubevirt.io/client-go/version: gitVersion, gitCommit from
# the module's origin, gitTreeState clean, buildDate the tag's time), so `virtctl version` prints the version.
# Usage: tools/build-upstream-virtctl.sh            -> path of the binary on stdout
#        tools/build-upstream-virtctl.sh --version  -> the pinned version
set -euo pipefail
VERSION="${KVTS_UPSTREAM_VIRTCTL_VERSION:-v1.1.0}"
module="kubevirt.io/kubevirt"
if [ "${1:-}" = --version ]; then echo "$VERSION"; exit 0; fi
[ $# -eq 0 ] || { echo "build-upstream-virtctl: unexpected argument '$1' (usage: $0 [--version])" >&2; exit 2; }
cache="${KVTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubevirt-ts}"
bin="$cache/upstream-virtctl/$VERSION/virtctl"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
# a non-login shell (CI) may lack Go's default install dir on PATH
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "build-upstream-virtctl: go is not installed (needed to build $module@$VERSION)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "build-upstream-virtctl: python3 is not installed (reads go.mod's JSON)" >&2; exit 1; }
mkdir -p "$(dirname "$bin")"
echo "[upstream-virtctl] building $module/cmd/virtctl@$VERSION" >&2
t0=$SECONDS
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}" GOFLAGS="-buildvcs=false -mod=mod"

# the module's go.mod and its origin (commit) and time, from the module cache
go mod download -json "$module@$VERSION" >dl.json
python3 - dl.json "$VERSION" >plan.txt <<'PY'
import json, subprocess, sys
dl = json.load(open(sys.argv[1]))
version = sys.argv[2]
if dl.get('Error'):
    sys.exit(f"build-upstream-virtctl: go mod download: {dl['Error']}")
mod = json.loads(subprocess.run(['go', 'mod', 'edit', '-json', dl['GoMod']], check=True,
                                capture_output=True, text=True).stdout)
info = json.load(open(dl['Info']))
commit = (dl.get('Origin') or info.get('Origin') or {}).get('Hash', '')
published = {'kubevirt.io/api', 'kubevirt.io/client-go'}  # upstream's staging modules, published per release
print(f"go {mod.get('Go', '')}")
print(f"commit {commit}")
print(f"time {info['Time']}")
for r in mod.get('Replace') or []:
    old = r['Old']['Path'] + ('@' + r['Old']['Version'] if r['Old'].get('Version') else '')
    new = r['New']
    if new.get('Version'):
        print(f"replace {old}={new['Path']}@{new['Version']}")
    elif r['Old']['Path'] in published:
        print(f"replace {old}={r['Old']['Path']}@{version}")
        print(f"require {r['Old']['Path']}@{version}")
    else:
        print(f"# left to its required version (a local staging copy upstream does not publish): {old} => {new['Path']}",
              file=sys.stderr)
PY
go_version="$(sed -n 's/^go //p' plan.txt)"
commit="$(sed -n 's/^commit //p' plan.txt)"
when="$(sed -n 's/^time //p' plan.txt)"

go mod init kvts.local/upstream-virtctl 2>/dev/null
edits=(-require="$module@$VERSION")
[ -z "$go_version" ] || edits+=(-go="$go_version")
while read -r kind arg; do
  case "$kind" in
    replace) edits+=(-replace="$arg") ;;
    require) edits+=(-require="$arg") ;;
  esac
done <plan.txt
go mod edit "${edits[@]}"
# the package to build, so tidy keeps exactly what it needs
printf '//go:build tools\n\npackage tools\n\nimport _ "%s/cmd/virtctl"\n' "$module" >tools.go
nice -n 10 go mod tidy -e >/dev/null 2>tidy.log || { cat tidy.log >&2; exit 1; }

pkg="kubevirt.io/client-go/version"
ldflags="-s -w -X $pkg.gitVersion=$VERSION -X $pkg.gitTreeState=clean"
[ -z "$commit" ] || ldflags+=" -X $pkg.gitCommit=$commit"
[ -z "$when" ] || ldflags+=" -X $pkg.buildDate=$(date -u -d "$when" +%Y-%m-%dT%H:%M:%SZ)"
CGO_ENABLED=0 nice -n 10 go build -p "${KVTS_GO_PARALLEL:-2}" -trimpath -ldflags "$ldflags" \
  -o "$work/virtctl" "$module/cmd/virtctl"
mv "$work/virtctl" "$bin.tmp"
mv "$bin.tmp" "$bin"
echo "[upstream-virtctl] built in $((SECONDS - t0))s" >&2
echo "$bin"
