#!/usr/bin/env bash
# Builds CoreDNS (the dev/CI cluster's DNS server, tools/cluster/coredns.yaml) at the version pinned below from the Go
# module proxy (`go install module@version`: the module's own go.mod and go.sum, checked against the checksum
# database), static (CGO_ENABLED=0), stripped, and caches it as $KVTS_CACHE/dns/coredns-<version>. Idempotent: prints
# the cached path at once when it is there.
# Usage: tools/dns/build-coredns.sh            -> path of the binary on stdout
#        tools/dns/build-coredns.sh --version  -> the pinned version
set -euo pipefail
# v1.12.2: the newest release whose go.mod asks only for go 1.23.0 (v1.13+ need go 1.24), so the Go that
# tools/setup.d/05-go.sh installs (1.23.x) builds it as well as a newer Go on PATH
COREDNS_VERSION="${KVTS_COREDNS_VERSION:-v1.12.2}"
module="github.com/coredns/coredns"
if [ "${1:-}" = --version ]; then echo "$COREDNS_VERSION"; exit 0; fi
[ $# -eq 0 ] || { echo "build-coredns: unexpected argument '$1' (usage: $0 [--version])" >&2; exit 2; }
cache="${KVTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubevirt-ts}"
bin="$cache/dns/coredns-$COREDNS_VERSION"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
# a non-login shell (CI) may lack Go's default install dir on PATH
command -v go >/dev/null || export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || { echo "build-coredns: go is not installed (needed to build $module@$COREDNS_VERSION)" >&2; exit 1; }
mkdir -p "$(dirname "$bin")"
echo "[dns] building $module@$COREDNS_VERSION" >&2
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# `go install m@v` outside any module: the module's go.mod decides every dependency's version (the plugin set is the
# release's default plugin.cfg, compiled into core/plugin/zplugin.go)
cd "$work"
GOBIN="$work/bin" GOFLAGS="-buildvcs=false" GOTOOLCHAIN="${GOTOOLCHAIN:-local}" CGO_ENABLED=0 \
  nice -n 10 go install -p "${KVTS_GO_PARALLEL:-2}" -trimpath \
  -ldflags "-s -w -X $module/coremain.GitCommit=$COREDNS_VERSION" "$module@$COREDNS_VERSION"
mv "$work/bin/coredns" "$bin.tmp"
mv "$bin.tmp" "$bin"
echo "$bin"
