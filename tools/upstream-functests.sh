#!/usr/bin/env bash
# Upstream KubeVirt's own functional test suite (kubevirt/kubevirt tests/, v1.9.0) against the single-node cluster.
#
#   bash tools/upstream-functests.sh build UPSTREAM_CHECKOUT [--force]
#       UPSTREAM_CHECKOUT: a kubevirt/kubevirt work tree at v1.9.0 (a directory with go.mod and vendor/), or a git
#       directory holding the tag v1.9.0 (its tree is extracted with `git archive` into the cache). The caller fetches
#       it; this script reads only the path it is given. Builds the functest binary from the tree's vendor directory
#       (`go test -c ./tests/`, ~10 min on 2 cores; nothing is downloaded: GOPROXY=off) into
#       $KVTS_CACHE/upstream-functests/v1.9.0/tests.test; a cached binary is kept unless --force.
#   bash tools/upstream-functests.sh run [ARGS...]
#       Runs that binary against the cluster of tools/cluster.sh with the flags upstream's hack/functests.sh passes
#       (see tools/cluster/README.md, "Upstream's functional tests"). ARGS go to the binary; the ginkgo CLI's usual
#       --focus/--skip/--label-filter/--fail-fast/-v/--vv/--timeout/--dry-run are accepted and given their
#       --ginkgo. prefix (the binary runs without the ginkgo CLI, one process).
#   bash tools/upstream-functests.sh path     prints the binary's path
#
# Environment:
#   KVTS_CACHE                      default ~/.cache/kubevirt-ts
#   UPSTREAM_FUNCTESTS_ARTIFACTS    default /tmp/kubevirt-ts-upstream-functests (cwd of the run, junit, reporter dumps)
#   KUBEVIRT_INSTALLED_NAMESPACE    default kubevirt-ts
#   UPSTREAM_FUNCTESTS_E2E_CONFIG   default 0: the KubeVirt CR is used as it is; 1 passes upstream CI's
#                                   -apply-default-e2e-configuration, whose set-up cannot pass here: it turns on
#                                   DecentralizedLiveMigration and waits for status.synchronizationAddresses, which
#                                   needs a virt-synchronization-controller kubevirt-ts does not have
#   UPSTREAM_CONTAINER_PREFIX       registry of the test images (container disks), default localhost/kubevirt-ts
#   UPSTREAM_CONTAINER_TAG          their tag, default devel as upstream's hack/functests.sh (latest would make
#                                   container disks imagePullPolicy Always, and nothing can be pulled here)
#   UPSTREAM_VIRTCTL                a virtctl binary for the specs that run it (-virtctl-path)
set -euo pipefail

VERSION=v1.9.0
HERE="$(cd "$(dirname "$0")" && pwd)"
CACHE="${KVTS_CACHE:-$HOME/.cache/kubevirt-ts}/upstream-functests/$VERSION"
BIN="$CACHE/tests.test"
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
NS="${KUBEVIRT_INSTALLED_NAMESPACE:-kubevirt-ts}"
ARTIFACTS="${UPSTREAM_FUNCTESTS_ARTIFACTS:-/tmp/kubevirt-ts-upstream-functests}"

die() {
  echo "upstream-functests: $*" >&2
  exit 1
}

# the source tree to build: the directory itself, or the tag's tree extracted from a git directory into the cache
source_tree() {
  local src="$1"
  [[ -d "$src" ]] || die "UPSTREAM_CHECKOUT: $src is not a directory"
  if [[ -f "$src/go.mod" ]]; then
    grep -q '^module kubevirt.io/kubevirt$' "$src/go.mod" || die "UPSTREAM_CHECKOUT: $src/go.mod is not kubevirt.io/kubevirt's"
    [[ -d "$src/vendor" ]] || die "UPSTREAM_CHECKOUT: $src has no vendor/ directory (the build uses -mod=vendor)"
    echo "$src"
    return
  fi
  git --git-dir="$src" rev-parse --verify -q "refs/tags/$VERSION" >/dev/null 2>&1 ||
    die "UPSTREAM_CHECKOUT: $src is neither a work tree with go.mod nor a git directory with the tag $VERSION"
  local tree="$CACHE/src"
  if [[ ! -f "$tree/go.mod" ]]; then
    echo "upstream-functests: extracting $VERSION from $src into $tree" >&2
    # into a temporary dir first: an interrupted extraction never passes for a tree
    rm -rf "$tree" "$tree.tmp" && mkdir -p "$tree.tmp"
    git --git-dir="$src" archive "$VERSION" | tar -x -C "$tree.tmp"
    mv "$tree.tmp" "$tree"
  fi
  echo "$tree"
}

cmd_build() {
  local src="" force=0
  for a in "$@"; do
    case "$a" in
      --force) force=1 ;;
      -*) die "build: unknown option $a" ;;
      *) src="$a" ;;
    esac
  done
  if [[ -x "$BIN" && $force == 0 ]]; then
    echo "upstream-functests: cached $BIN (--force rebuilds)"
    return
  fi
  [[ -n "$src" ]] || die "build: UPSTREAM_CHECKOUT missing (a kubevirt/kubevirt $VERSION work tree or git directory)"
  [[ -x "$GO" ]] || die "build: no go toolchain (GO=$GO); upstream $VERSION needs Go 1.26"
  local tree
  tree="$(source_tree "$src")"
  mkdir -p "$CACHE"
  echo "upstream-functests: building $BIN from $tree ($("$GO" version))" >&2
  local start=$SECONDS
  (cd "$tree" && GOFLAGS=-mod=vendor GOTOOLCHAIN=local GOPROXY=off nice -n 10 "$GO" test -c -o "$BIN.tmp" ./tests/)
  mv "$BIN.tmp" "$BIN"
  echo "upstream-functests: built in $((SECONDS - start)) s: $BIN"
}

# ginkgo CLI flags given to the binary itself take the --ginkgo. prefix
ginkgo_arg() {
  case "$1" in
    --ginkgo.* | -ginkgo.* | --*=*ginkgo.*) echo "$1" ;;
    --focus=* | --skip=* | --label-filter=* | --timeout=* | --focus-file=* | --skip-file=* | --seed=*)
      echo "--ginkgo.${1#--}" ;;
    --fail-fast | --dry-run | --trace | --no-color | --succinct | --show-node-events | --poll-progress-after=* | \
      --silence-skips=* | --json-report=* | --junit-report=*)
      echo "--ginkgo.${1#--}" ;;
    -v | --v) echo "--ginkgo.v" ;;
    -vv | --vv) echo "--ginkgo.vv" ;;
    *) echo "$1" ;;
  esac
}

cmd_run() {
  [[ -x "$BIN" ]] || die "run: no binary at $BIN (bash tools/upstream-functests.sh build UPSTREAM_CHECKOUT)"
  local kubeconfig
  kubeconfig="$(bash "$HERE/cluster.sh" env | sed -n 's/^export KUBECONFIG=//p' | tr -d "'\"")"
  [[ -n "$kubeconfig" && -r "$kubeconfig" ]] || die "run: no readable kubeconfig from tools/cluster.sh env (is the node up?)"
  local kubectl
  kubectl="$(command -v kubectl)" || die "run: kubectl not on PATH"
  mkdir -p "$ARTIFACTS"
  # the suite's storage configuration (-config): no storage class is named, so specs that need one skip
  local config="$ARTIFACTS/test-config.json"
  echo '{}' >"$config"
  local args=(
    -kubeconfig="$kubeconfig"
    -installed-namespace="$NS"
    -container-prefix="${UPSTREAM_CONTAINER_PREFIX:-localhost/kubevirt-ts}"
    -container-tag="${UPSTREAM_CONTAINER_TAG:-devel}"
    -kubectl-path="$kubectl"
    -deploy-testing-infra=false
    -config="$config"
    -artifacts="$ARTIFACTS/artifacts"
    -migration-network-nic=eth1
    -skip-dual-stack-test
    --ginkgo.trace
    --ginkgo.silence-skips
  )
  [[ "${UPSTREAM_FUNCTESTS_E2E_CONFIG:-0}" == 1 ]] && args+=(-apply-default-e2e-configuration)
  [[ -n "${UPSTREAM_VIRTCTL:-}" ]] && args+=(-virtctl-path="$UPSTREAM_VIRTCTL")
  local a
  for a in "$@"; do args+=("$(ginkgo_arg "$a")"); done
  rm -rf "$ARTIFACTS/artifacts" && mkdir -p "$ARTIFACTS/artifacts"
  echo "upstream-functests: $BIN ${args[*]}" >&2
  # cwd: the artifacts dir (relative paths the suite resolves land there, not in this repository)
  cd "$ARTIFACTS" && exec "$BIN" "${args[@]}"
}

case "${1:-}" in
  build) shift && cmd_build "$@" ;;
  run) shift && cmd_run "$@" ;;
  path) echo "$BIN" ;;
  *) die "usage: $0 build UPSTREAM_CHECKOUT [--force] | run [ginkgo args] | path" ;;
esac
