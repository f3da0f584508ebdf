#!/usr/bin/env bash
# The single-node cluster's and the images' Debian packages (tools/cluster.sh, tools/images/build.sh):
# containerd, runc, CNI plugins, iptables, buildah, mmdebstrap; and the node's Kubernetes binaries (kubelet,
# kube-scheduler, kube-controller-manager, kube-proxy: Go builds from the module proxy, cached in
# $KVTS_CACHE/kube/<version>/ next to testenv's kube-apiserver). Only the test path and the cluster need them:
# tools/test.sh and tools/cluster.sh set KVTS_SETUP_CLUSTER=1; tools/run.sh does not, so it skips this step.
set -euo pipefail
[ "${KVTS_SETUP_CLUSTER:-0}" = 1 ] || exit 0
cd "$(dirname "$0")/../.."
PKGS=(containerd runc containernetworking-plugins iptables buildah mmdebstrap curl)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then echo "60-cluster: run as root to install ${missing[*]}" >&2; exit 1; fi
  echo "[cluster] installing Debian packages: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# KVTS_SETUP_KUBE_NODE=0: packages only (tools/cluster.sh builds the binaries itself when they are missing)
[ "${KVTS_SETUP_KUBE_NODE:-1}" = 1 ] || exit 0
t0=$SECONDS
bash tools/testenv/build-kube-apiserver.sh kubelet kube-scheduler kube-controller-manager kube-proxy >/dev/null
[ $((SECONDS - t0)) -lt 2 ] || echo "[cluster] node binaries built in $((SECONDS - t0))s" >&2
