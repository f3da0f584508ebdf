#!/usr/bin/env bash
# Test control plane: builds kube-apiserver (pinned in tools/testenv/kube-apiserver/go.mod) from the Go
# module proxy into $KVTS_CACHE/kube/<version>/ when it is missing; etcd comes from Debian etcd-server.
# Skipped when KUBEBUILDER_ASSETS names a folder with kube-apiserver and etcd. Quick when already cached.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$KUBEBUILDER_ASSETS/kube-apiserver" ] && [ -x "$KUBEBUILDER_ASSETS/etcd" ]; then
  exit 0
fi
command -v etcd >/dev/null || { echo "50-testenv: etcd missing (Debian etcd-server, in tools/setup.sh APT_PKGS)" >&2; exit 1; }
command -v openssl >/dev/null || { echo "50-testenv: openssl missing" >&2; exit 1; }
bash tools/testenv/build-kube-apiserver.sh >/dev/null
