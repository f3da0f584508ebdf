#!/usr/bin/env bash
# The single-node cluster's and the images' Debian packages (tools/cluster.sh, tools/images/build.sh):
# containerd, runc, CNI plugins, iptables, buildah, mmdebstrap. Only the test path and the cluster need them:
# tools/test.sh and tools/cluster.sh set KVTS_SETUP_CLUSTER=1; tools/run.sh does not, so it skips this step.
set -euo pipefail
[ "${KVTS_SETUP_CLUSTER:-0}" = 1 ] || exit 0
PKGS=(containerd runc containernetworking-plugins iptables buildah mmdebstrap curl)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then echo "60-cluster: run as root to install ${missing[*]}" >&2; exit 1; fi
echo "[cluster] installing Debian packages: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
