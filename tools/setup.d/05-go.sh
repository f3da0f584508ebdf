#!/usr/bin/env bash
# Go >= 1.23 for building kube-apiserver/kubectl (tools/testenv) and the cmd-protocol interop tool.
# Debian 12 ships only Go 1.19, so when no recent Go is found (on PATH or in /usr/local/go) this
# fetches the official toolchain module golang.org/toolchain from the Go module proxy (what
# `GOTOOLCHAIN=auto` does) and unpacks it into /usr/local/go. Quick when Go is already there.
set -euo pipefail
want_minor=23
version="${KVTS_GO_VERSION:-1.23.12}"
dest="${KVTS_GO_DEST:-/usr/local/go}"
export PATH="$PATH:$dest/bin"
if command -v go >/dev/null; then
  minor="$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')"
  [ "$minor" -ge "$want_minor" ] 2>/dev/null && exit 0
fi
proxy="${GOPROXY:-https://proxy.golang.org}"
proxy="${proxy%%,*}"
url="$proxy/golang.org/toolchain/@v/v0.0.1-go$version.linux-amd64.zip"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "[go] fetching Go $version (golang.org/toolchain from the Go module proxy)" >&2
python3 - "$url" "$tmp/go.zip" <<'PY'
import sys, urllib.request, shutil
with urllib.request.urlopen(sys.argv[1]) as r, open(sys.argv[2], 'wb') as f:
    shutil.copyfileobj(r, f)
PY
python3 - "$tmp/go.zip" "$tmp/x" <<'PY'
import sys, zipfile, os
with zipfile.ZipFile(sys.argv[1]) as z:
    for info in z.infolist():
        z.extract(info, sys.argv[2])
        mode = (info.external_attr >> 16) & 0o777
        if mode:
            os.chmod(os.path.join(sys.argv[2], info.filename), mode)
PY
src="$(echo "$tmp"/x/golang.org/toolchain@*)"
rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
mv "$src" "$dest"
"$dest/bin/go" version >&2
