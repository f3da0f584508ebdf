#!/usr/bin/env bash
# converter tests: virt-xml-validate (libvirt-clients) needs xmllint from libxml2-utils.
set -euo pipefail
if ! command -v xmllint >/dev/null; then
  if [ "$(id -u)" != 0 ]; then echo "setup 30-converter: run as root to install libxml2-utils" >&2; exit 1; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends libxml2-utils >/dev/null 2>&1 || {
    apt-get update -qq && apt-get install -y -qq --no-install-recommends libxml2-utils >/dev/null
  }
fi
# libvirt refuses <tpm> with the emulator backend unless swtpm is installed (converter libvirt tests).
if ! command -v swtpm >/dev/null; then
  if [ "$(id -u)" != 0 ]; then echo "setup 30-converter: run as root to install swtpm" >&2; exit 1; fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends swtpm swtpm-tools >/dev/null 2>&1 || {
    apt-get update -qq && apt-get install -y -qq --no-install-recommends swtpm swtpm-tools >/dev/null
  }
fi
