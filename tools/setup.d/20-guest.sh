#!/usr/bin/env bash
# setup: run
# Builds the test guest (Debian kernel + busybox initramfs) into the cache when it is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
exec bash tools/guest/build.sh
