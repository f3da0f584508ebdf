#!/usr/bin/env bash
# CDI (the Containerized Data Importer, deploy/addons/cdi/): its binaries built from the Go module proxy by
# tools/cdi/build-cdi.sh into $KVTS_CACHE/cdi/<version>/bin (cold: see tools/images/README.md; quick when cached),
# which tools/images/build.sh puts into the cdi-* images. Only the cluster e2e needs them, so, like 60-cluster.sh,
# this runs only with KVTS_SETUP_CLUSTER=1 (tools/test.sh sets it).
set -euo pipefail
[ "${KVTS_SETUP_CLUSTER:-0}" = 1 ] || exit 0
cd "$(dirname "$0")/../.."
bash tools/cdi/build-cdi.sh >/dev/null
