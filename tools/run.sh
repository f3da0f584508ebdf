#!/usr/bin/env bash
# The main job on an embedded default: installs and builds only what it needs when missing (Debian
# packages, Node 24, virt-launcher's runtime dependencies and TypeScript, the tiny test guest, the build of
# virt-launcher and its packages by tools/run-build.mjs; not the test suite's Go, kube-apiserver, interop
# tool or devDependencies), then runs the standalone virt-launcher on examples/vmi-tiny.yaml
# under QEMU emulation with the guest's serial console on the terminal. Ctrl-C powers the guest off
# through ACPI; the command exits 0 when the guest has powered off.
#   bash tools/run.sh                          # the tiny guest
#   bash tools/run.sh --vmi my-vmi.yaml [--image REF=PATH]...   # another VMI (see apps/virt-launcher/README.md)
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh --run
source tools/node-env.sh # Node 24 (setup installed it) first on PATH: the launcher's `env node` shebang finds it
guest="${KVTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubevirt-ts}/guest"
launcher=apps/virt-launcher/dist/main.js
chmod +x "$launcher" # run as an executable so its shebang's V8 flags apply
[ $# -gt 0 ] || set -- --vmi examples/vmi-tiny.yaml
exec "$launcher" standalone --allow-emulation --console --image "kubevirt-ts/test-guest:latest=$guest" "$@"
