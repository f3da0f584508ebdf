#!/usr/bin/env bash
# setup: run
# User `qemu` (uid 107, gid 107), as in KubeVirt's virt-launcher image: the launcher runs its private
# libvirtd (session mode) and QEMU as this uid. libvirtd looks the uid up with getpwuid
# (virGetUserEnt: "Failed to find user record for uid '107'" otherwise), so a passwd entry must exist.
set -euo pipefail
if getent passwd 107 >/dev/null; then exit 0; fi
if [ "$(id -u)" != 0 ]; then echo "setup: run as root to create user qemu (uid 107)" >&2; exit 1; fi
getent group 107 >/dev/null || groupadd --system --gid 107 qemu
useradd --system --uid 107 --gid 107 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin qemu
