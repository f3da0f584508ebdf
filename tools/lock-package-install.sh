#!/usr/bin/env bash
# Installs one package of the lock file (its version, checked against the lock's integrity) into
# $KVTS_CACHE/lock-packages/NAME@VERSION and prints that directory. Used by tools/setup.sh --run: the main
# job's install leaves out the workspace root's devDependencies, and tools/run-build.mjs needs only three of
# them: `typescript` (to compile), `esbuild` and its platform binary `@esbuild/<os>-<cpu>` (to bundle the app).
# No install scripts run. Quick when already there.
#   bash tools/lock-package-install.sh typescript
#   bash tools/lock-package-install.sh @esbuild/linux-x64
set -euo pipefail
cd "$(dirname "$0")/.."
name="${1:?usage: lock-package-install.sh NAME}"
read -r version integrity < <(node -p '
  const name = process.argv[1];
  const p = require("./package-lock.json").packages["node_modules/" + name];
  if (!p || !p.version || !p.integrity) throw new Error("package-lock.json has no " + name + " with an integrity");
  p.version + " " + p.integrity' "$name")
case "$version" in *[!0-9.]*) echo "lock-package-install: bad version '$version' of $name in package-lock.json" >&2; exit 1 ;; esac
cache="${KVTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubevirt-ts}/lock-packages"
dest="$cache/${name//\//+}@$version" # @esbuild/linux-x64 -> @esbuild+linux-x64@0.25.12
if [ ! -f "$dest/package.json" ]; then
  mkdir -p "$cache"
  tmp="$(mktemp -d "$cache/.install.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  file="$(cd "$tmp" && npm pack --silent --no-audit --no-fund "$name@$version" | tail -n 1)"
  tgz="$tmp/$file"
  got="$(node -e '
    const data = require("node:fs").readFileSync(process.argv[1]);
    console.log("sha512-" + require("node:crypto").createHash("sha512").update(data).digest("base64"))' "$tgz")"
  if [ "$got" != "$integrity" ]; then
    echo "lock-package-install: $file is $got, package-lock.json says $integrity" >&2
    exit 1
  fi
  mkdir "$tmp/x"
  tar -xzf "$tgz" -C "$tmp/x"
  # another setup may have finished meanwhile: keep the first complete one
  mv -T "$tmp/x/package" "$dest" 2>/dev/null || [ -f "$dest/package.json" ]
fi
echo "$dest"
