#!/usr/bin/env bash
# The cluster DNS (CoreDNS, tools/cluster/README.md "Cluster DNS"): its binary built from the Go module proxy by
# tools/dns/build-coredns.sh into $KVTS_CACHE/dns/coredns-<version> (cold: see tools/images/README.md; quick when
# cached), which tools/images/build.sh puts into the coredns image. Only the cluster needs it, so, like 60-cluster.sh,
# this runs only with KVTS_SETUP_CLUSTER=1 (tools/test.sh sets it).
set -euo pipefail
[ "${KVTS_SETUP_CLUSTER:-0}" = 1 ] || exit 0
cd "$(dirname "$0")/../.."
bash tools/dns/build-coredns.sh >/dev/null
