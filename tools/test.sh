#!/usr/bin/env bash
# The whole test suite: installs and builds what is missing, then runs every project's
# tests (unit and integration against real libvirtd/QEMU/kube-apiserver) and the e2e suites.
set -euo pipefail
cd "$(dirname "$0")/.."
KVTS_SETUP_CLUSTER=1 bash tools/setup.sh
source tools/node-env.sh # Node 24 (setup installed it) first on PATH: npm, nx, jest, `env node` shebangs
export NX_DAEMON=false NX_NO_CLOUD=true NX_TUI=false
export JEST_JSON_DIR="${JEST_JSON_DIR:-$(mktemp -d)}"
status=0
echo "[test] lint (eslint) and format (prettier --check)" >&2
npm run --silent lint || status=1
npx nx run-many -t test --outputStyle=stream --parallel=1 || status=$?
echo "node: $(node --version)"
node tools/summarize-tests.js "$JEST_JSON_DIR" || status=1
exit $status
