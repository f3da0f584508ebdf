#!/usr/bin/env bash
# tools/testenv.sh [--keep] -- COMMAND [ARGS...]
# Starts a real etcd + kube-apiserver on free loopback ports, runs COMMAND with KUBECONFIG exported and
# stops everything afterwards (also on failure or Ctrl-C). See tools/testenv/README.md.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -z "${KUBEBUILDER_ASSETS:-}" ]; then
  bash "$root/tools/testenv/build-kube-apiserver.sh" >/dev/null
fi
if [ ! -f "$root/tools/testenv/dist/cli.js" ] || [ -n "$(find "$root/tools/testenv/src" -newer "$root/tools/testenv/dist/cli.js" -name '*.ts' | head -1)" ]; then
  (cd "$root/tools/testenv" && npx tsc -b)
fi
exec node "$root/tools/testenv/dist/cli.js" "$@"
