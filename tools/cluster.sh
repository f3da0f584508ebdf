#!/usr/bin/env bash
# A single-node Kubernetes cluster on this machine: bash tools/cluster.sh up|down|status|load-images|env
# (logic and configuration in tools/cluster/; see tools/cluster/README.md)
exec bash "$(dirname "$0")/cluster/cluster.sh" "$@"
