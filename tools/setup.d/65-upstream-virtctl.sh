#!/usr/bin/env bash
# Upstream KubeVirt's own virtctl (v1.1.0), which e2e/src/cluster/upstream-virtctl.test.ts runs against kubevirt-ts
# on the cluster: built from the Go module proxy by tools/build-upstream-virtctl.sh into
# $KVTS_CACHE/upstream-virtctl/<version>/virtctl (a few minutes cold, quick when cached). Only the cluster e2e needs
# it, so, like 60-cluster.sh, this runs only with KVTS_SETUP_CLUSTER=1 (tools/test.sh sets it).
set -euo pipefail
[ "${KVTS_SETUP_CLUSTER:-0}" = 1 ] || exit 0
cd "$(dirname "$0")/../.."
bash tools/build-upstream-virtctl.sh >/dev/null
