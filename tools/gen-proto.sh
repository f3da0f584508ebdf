#!/usr/bin/env bash
# Generates TypeScript (ts-proto, for @grpc/grpc-js) from packages/cmd-protocol/proto/**/*.proto.
# Usage: bash tools/gen-proto.sh [OUT_DIR]   (default: packages/cmd-protocol/src/gen)
# The generated code is committed; a test in @kubevirt-ts/cmd-protocol regenerates it into a temp
# dir and fails when the committed copy is stale.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
proto_dir="$root/packages/cmd-protocol/proto"
out="${1:-$root/packages/cmd-protocol/src/gen}"
protoc="${PROTOC:-/usr/bin/protoc}"
plugin="$root/node_modules/.bin/protoc-gen-ts_proto"
[ -x "$protoc" ] || { echo "gen-proto: $protoc not found (Debian package protobuf-compiler)" >&2; exit 1; }
[ -x "$plugin" ] || { echo "gen-proto: $plugin not found (run npm ci)" >&2; exit 1; }

mapfile -t protos < <(cd "$proto_dir" && find . -name '*.proto' -type f | sed 's|^\./||' | LC_ALL=C sort)
# Generate into a scratch dir, then replace only the generated tree ($out/kubevirt), so a file of a
# deleted .proto does not linger and nothing else in $out is touched.
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$protoc" \
  --plugin=protoc-gen-ts_proto="$plugin" \
  --proto_path="$proto_dir" \
  --ts_proto_out="$tmp" \
  --ts_proto_opt=outputServices=grpc-js \
  --ts_proto_opt=esModuleInterop=true \
  --ts_proto_opt=importSuffix=.js \
  --ts_proto_opt=env=node \
  --ts_proto_opt=forceLong=number \
  --ts_proto_opt=useDate=false \
  "${protos[@]}"
mkdir -p "$out"
rm -rf "$out/kubevirt"
cp -R "$tmp/kubevirt" "$out/kubevirt"
