#!/usr/bin/env bash
# Builds the kubevirt-ts test guest into $KVTS_CACHE/guest/:
#   vmlinuz        Debian's linux-image-*-amd64 kernel (downloaded with apt-get download, never installed)
#   initramfs.img  gzip'd newc cpio: busybox-static, an /init (tools/guest/init) and the few kernel modules
#                  it needs (ACPI power button + evdev for busybox acpid)
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
moddir="$work/k/lib/modules/$kver/kernel"

# initramfs tree
root="$work/root"
mkdir -p "$root"/{bin,sbin,dev,proc,sys,tmp,run,etc/acpi/PWRF,lib/modules}
cp "$busybox_bin" "$root/bin/busybox"
for applet in sh mount umount mkdir cat echo sleep grep insmod poweroff reboot acpid ls cut sync dmesg ps kill; do
  ln -s busybox "$root/bin/$applet"
done
# Modules the kernel has as =m but the guest needs, in load order (dependencies first).
n=0
for m in drivers/input/evdev.ko drivers/acpi/button.ko; do
  src="$moddir/$m"
  for ext in "" .xz .zst; do [ -f "$src$ext" ] && break; done
  [ -f "$src$ext" ] || { echo "guest: module $m not found in $kpkg" >&2; exit 1; }
  case "$ext" in
    .xz) xz -dc "$src$ext" >"$root/lib/modules/$(printf '%02d' $n)-$(basename "$m")" ;;
    .zst) zstd -qdc "$src$ext" >"$root/lib/modules/$(printf '%02d' $n)-$(basename "$m")" ;;
    *) cp "$src" "$root/lib/modules/$(printf '%02d' $n)-$(basename "$m")" ;;
  esac
  n=$((n + 1))
done
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
