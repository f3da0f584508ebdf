#!/usr/bin/env bash
# The main job on an embedded default. Until the standalone launcher lands this validates the
# example VMI and prints the libvirt domain XML the launcher would define for it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
vmi="${1:-examples/vmi-tiny.yaml}"
npx --no-install kv-validate "$vmi"
npx --no-install virt-convert "$vmi" --emulation
