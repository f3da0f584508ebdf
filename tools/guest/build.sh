#!/usr/bin/env bash
# Builds the kubevirt-ts test guest into $KVTS_CACHE/guest/:
#   vmlinuz        Debian's linux-image-*-amd64 kernel (downloaded with apt-get download, never installed)
#   initramfs.img  gzip'd newc cpio: busybox-static, an /init (tools/guest/init) and the few kernel modules
#                  it needs (ACPI power button + evdev for busybox acpid), ISC dhclient for DHCPv6 (kvts.net6)
# The guest prints KUBEVIRT-TS-GUEST-READY on its serial console, then a heartbeat line every second;
# with kernel argument `kvts.poweroff` it powers off right after the ready line; the ACPI power button
# powers it off. Boot it with: qemu-system-x86_64 -accel tcg -nographic -kernel vmlinuz -initrd initramfs.img \
#   -append 'console=ttyS0'
# Usage: build.sh [--force]     (quick no-op when both files exist and --force is not given)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${KVTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubevirt-ts}"
out="$cache/guest"
log() { printf '[guest] %s\n' "$*" >&2; }

# rebuilt when the guest's sources change (content hash, not mtimes: CI runs in a fresh clone)
inputs="$(cat "$here/init" "$here/build.sh" | sha256sum | cut -d' ' -f1)"
if [ "${1:-}" != "--force" ] && [ -s "$out/vmlinuz" ] && [ -s "$out/initramfs.img" ] && [ "$(cat "$out/inputs.sha256" 2>/dev/null)" = "$inputs" ]; then
  log "up to date: $out"
  exit 0
fi

for tool in apt-get apt-cache dpkg-deb cpio gzip; do
  command -v "$tool" >/dev/null || { echo "guest: $tool is required" >&2; exit 1; }
done
busybox_bin=/bin/busybox
ldd_out="$(LC_ALL=C ldd "$busybox_bin" 2>&1 || true)"
if [[ "$ldd_out" != *"not a dynamic executable"* ]]; then
  echo "guest: $busybox_bin must be the static busybox (Debian package busybox-static)" >&2
  exit 1
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"

# The versioned kernel package behind the linux-image-amd64 metapackage.
kpkg="$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -n1)"
if [ -z "$kpkg" ] && [ "$(id -u)" = 0 ]; then
  log "apt-get update (no package lists)"
  apt-get update -qq
  kpkg="$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/^ *Depends: \(linux-image-[0-9].*-amd64\)$/\1/p' | head -n1)"
fi
[ -n "$kpkg" ] || { echo "guest: cannot resolve linux-image-amd64 to a versioned kernel package (apt-get update?)" >&2; exit 1; }
log "downloading $kpkg"
(cd "$work" && apt-get download -q "$kpkg" >/dev/null 2>"$work/apt.err") || { cat "$work/apt.err" >&2; exit 1; }
deb="$(ls "$work"/*.deb)"
mkdir "$work/k"
dpkg-deb -x "$deb" "$work/k"
kver="$(ls "$work/k/lib/modules")"


# initramfs tree
root="$work/root"
mkdir -p "$root"/{bin,sbin,dev,proc,sys,tmp,run,etc/acpi/PWRF,lib/modules}
cp "$busybox_bin" "$root/bin/busybox"
for applet in sh mount umount mkdir cat echo sleep grep modprobe poweroff reboot acpid ls cut sync dmesg ps kill \
  dd tr sed head ip udhcpc nc hostname wc timeout; do
  ln -s busybox "$root/bin/$applet"
done
# kvts.net6: busybox has no DHCPv6 client here (no udhcpc6 in Debian's busybox), so ISC dhclient (Debian
# isc-dhcp-client, downloaded like the kernel) with the only libraries it links (glibc, from this Debian 12 host)
log "downloading isc-dhcp-client"
mkdir "$work/dhc"
(cd "$work/dhc" && apt-get download -q isc-dhcp-client >/dev/null 2>"$work/apt-dhc.err") || { cat "$work/apt-dhc.err" >&2; exit 1; }
dpkg-deb -x "$(ls "$work"/dhc/*.deb)" "$work/dhc/x"
install -m 0755 "$work/dhc/x/sbin/dhclient" "$root/sbin/dhclient"
for lib in $(LC_ALL=C ldd "$root/sbin/dhclient" | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) (.*/\1/p'); do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
# Modules the kernel has as =m but the guest needs, with their dependencies (from depmod's modules.dep of the
# unpacked package), decompressed into /lib/modules/<kver>/ with a modules.dep for busybox modprobe:
#   always: evdev + the ACPI button (busybox acpid and the power button)
#   kvts.disks: the disk buses KubeVirt gives a guest (virtio-blk, virtio-scsi, SATA/AHCI, SCSI disks and cdroms)
#   kvts.net: virtio-net (the interface model of the pod network)
modules="evdev button virtio_pci virtio_blk virtio_scsi ahci sd_mod sr_mod isofs virtio_net"
command -v depmod >/dev/null || { echo "guest: depmod (Debian package kmod) is required" >&2; exit 1; }
depmod -b "$work/k" "$kver"
mkdir -p "$root/lib/modules/$kver"
want=""
for m in $modules; do
  line="$(grep -E "(^|/)$m\.ko(\.xz|\.zst)?:" "$work/k/lib/modules/$kver/modules.dep" | head -n1)"
  [ -n "$line" ] || { echo "guest: module $m not found in $kpkg" >&2; exit 1; }
  want="$want ${line%%:*} ${line#*:}"
done
for rel in $(printf '%s\n' $want | sort -u); do
  src="$work/k/lib/modules/$kver/$rel"
  dst="$root/lib/modules/$kver/${rel%.xz}"
  dst="${dst%.zst}"
  mkdir -p "$(dirname "$dst")"
  case "$rel" in
    *.xz) xz -dc "$src" >"$dst" ;;
    *.zst) zstd -qdc "$src" >"$dst" ;;
    *) cp "$src" "$dst" ;;
  esac
done
cp "$work/k/lib/modules/$kver"/modules.builtin* "$work/k/lib/modules/$kver/modules.order" "$root/lib/modules/$kver/"
depmod -b "$root" "$kver"
install -m 0755 "$here/init" "$root/init"
# busybox acpid maps the power button (KEY_POWER) to the event "PWRF" and runs ./PWRF/00000080 in its config dir.
printf '#!/bin/sh\necho KUBEVIRT-TS-GUEST-POWER-BUTTON >/dev/console\nexec /init poweroff\n' >"$root/etc/acpi/PWRF/00000080"
chmod 0755 "$root/etc/acpi/PWRF/00000080"
printf 'PWRF PWRF/00000080\n' >"$root/etc/acpid.conf"

mkdir -p "$out"
(cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --owner 0:0 --quiet) | gzip -9n >"$work/initramfs.img"
cp "$work/k/boot/vmlinuz-$kver" "$work/vmlinuz"
chmod 0644 "$work/vmlinuz" "$work/initramfs.img"
mv -f "$work/vmlinuz" "$out/vmlinuz"
mv -f "$work/initramfs.img" "$out/initramfs.img"
printf '%s\n' "$kpkg" >"$out/kernel-package"
printf '%s\n' "$inputs" >"$out/inputs.sha256"
log "built $out/vmlinuz ($kver) and $out/initramfs.img ($(du -k "$out/initramfs.img" | cut -f1) KiB)"
