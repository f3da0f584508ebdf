#!/usr/bin/env bash
# Installs the `typescript` package of the lock file (its version, checked against its integrity) into
# $KVTS_CACHE/typescript/VERSION and prints that directory. Used by tools/setup.sh --run: the main job's
# install leaves out the workspace root's devDependencies, typescript among them, and tools/run-build.mjs
# needs only this one package to compile. Quick when already there.
set -euo pipefail
cd "$(dirname "$0")/.."
read -r version integrity < <(node -p '
  const p = require("./package-lock.json").packages["node_modules/typescript"];
  if (!p || !p.version || !p.integrity) throw new Error("package-lock.json has no typescript with an integrity");
  p.version + " " + p.integrity')
case "$version" in *[!0-9.]*) echo "typescript-install: bad version '$version' in package-lock.json" >&2; exit 1 ;; esac
cache="${KVTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubevirt-ts}/typescript"
dest="$cache/$version"
if [ ! -f "$dest/lib/typescript.js" ]; then
  mkdir -p "$cache"
  tmp="$(mktemp -d "$cache/.install-$version.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent --no-audit --no-fund "typescript@$version" >/dev/null)
  tgz="$tmp/typescript-$version.tgz"
  got="$(node -e '
    const data = require("node:fs").readFileSync(process.argv[1]);
    console.log("sha512-" + require("node:crypto").createHash("sha512").update(data).digest("base64"))' "$tgz")"
  if [ "$got" != "$integrity" ]; then
    echo "typescript-install: typescript-$version.tgz is $got, package-lock.json says $integrity" >&2
    exit 1
  fi
  mkdir "$tmp/x"
  tar -xzf "$tgz" -C "$tmp/x"
  # another setup may have finished meanwhile: keep the first complete one
  mv -T "$tmp/x/package" "$dest" 2>/dev/null || [ -f "$dest/lib/typescript.js" ]
fi
echo "$dest"
