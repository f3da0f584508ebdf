#!/usr/bin/env bash
# @kubevirt-ts/cmd-protocol: builds the Go interop tool (upstream KubeVirt's own generated cmd/notify
# gRPC code) that the interop tests run against. Cached under $KVTS_CACHE/cmd-interop; quick when built.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash packages/cmd-protocol/interop/build.sh >/dev/null
