#!/usr/bin/env bash
# The whole test suite: installs and builds what is missing, then runs every project's
# tests (unit and integration against real libvirtd/QEMU/kube-apiserver) and the e2e suites.
# The e2e suites run last, against the real two-node cluster (tools/cluster.sh up --nodes 2): this script builds the
# images (tools/images/build.sh), brings the nodes up, loads the images into both, and takes them down afterwards
# (also when a test fails or the run is interrupted). The cluster suite is required here (KVTS_REQUIRE_CLUSTER=1):
# when the cluster cannot come up, its tests fail with the reason instead of skipping.
set -euo pipefail
cd "$(dirname "$0")/.."
t_setup=$SECONDS
KVTS_SETUP_CLUSTER=1 bash tools/setup.sh
t_setup=$((SECONDS - t_setup))
source tools/node-env.sh # Node 24 (setup installed it) first on PATH: npm, nx, jest, `env node` shebangs
export NX_DAEMON=false NX_NO_CLOUD=true NX_TUI=false
export JEST_JSON_DIR="${JEST_JSON_DIR:-$(mktemp -d)}"
status=0
echo "[test] lint (paths outside the repository, eslint) and format (prettier --check)" >&2
npm run --silent lint || status=1
# The README's first command as a new user runs it: a fresh clone of HEAD with its own empty build state and caches
# (tools/bench-main-job.sh), to the guest's ready line; then Ctrl-C must power it off and exit 0.
t_main=$SECONDS
echo "[test] the main job (tools/run.sh) from a fresh clone of HEAD" >&2
if bash tools/bench-main-job.sh HEAD >&2; then
  echo "[test] the main job from a fresh clone: guest ready, $((SECONDS - t_main)) s" >&2
else
  echo "[test] the main job from a fresh clone FAILED (see above)" >&2
  status=1
fi
t_main=$((SECONDS - t_main))
# the images for the cluster e2e are built while the unit and integration tests run (buildah is mostly I/O; the
# tests wait on it below); their output goes to the cluster log, printed when the tests are done
cluster_log="$(mktemp /tmp/kvts-test-cluster.XXXXXX.log)"
(
  t=$SECONDS
  bash tools/images/build.sh && echo "[images] built in $((SECONDS - t)) s, while the tests ran"
) >>"$cluster_log" 2>&1 &
images_pid=$!
t_tests=$SECONDS
# A bound on each phase (normally about 19 and 34 minutes): a test that leaves the process hanging fails the run with its
# name in the output, within CI's 90 minutes, instead of a CI timeout without a summary.
bounded() {
  local limit=$1 rc=0
  shift
  timeout --kill-after=30s "$limit" "$@" || rc=$?
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || echo "[test] still running after $limit, stopped: $*" >&2
  return "$rc"
}
bounded 30m npx nx run-many -t test --exclude @kubevirt-ts/e2e --outputStyle=stream --parallel=1 || status=$?
t_tests=$((SECONDS - t_tests))

# the real nodes for e2e/src/cluster: images (built meanwhile), cluster up (two nodes), images loaded; down on any exit
cluster=ok
t_images=$SECONDS
wait "$images_pid" || cluster="images failed"
t_images=$((SECONDS - t_images))
cat "$cluster_log" >&2
t_up=$SECONDS
trap 'bash tools/cluster.sh down >&2 || true' EXIT
if [ "$cluster" = ok ]; then
  { bash tools/cluster.sh up --nodes 2 && bash tools/cluster.sh load-images; } 2> >(tee -a "$cluster_log" >&2) || cluster="cluster up failed"
fi
t_up=$((SECONDS - t_up))
[ "$cluster" = ok ] || { echo "[test] the two-node cluster is not available: $cluster (the cluster e2e fails)" >&2; status=1; }
t_e2e=$SECONDS
KVTS_REQUIRE_CLUSTER=1 bounded 42m npx nx run @kubevirt-ts/e2e:test --outputStyle=stream || status=$?
t_e2e=$((SECONDS - t_e2e))
t_down=$SECONDS
trap - EXIT
bash tools/cluster.sh down || { echo "[test] tools/cluster.sh down failed (see above)" >&2; status=1; }
t_down=$((SECONDS - t_down))

echo "node: $(node --version)"
printf '[test] times: setup %ss, main job %ss, tests %ss, images (waited for after the tests) %ss, cluster up+load %ss, e2e %ss, cluster down %ss, total %ss\n' \
  "$t_setup" "$t_main" "$t_tests" "$t_images" "$t_up" "$t_e2e" "$t_down" "$SECONDS"
# the reason the node was missing, again at the end (CI shows the tail of this output)
if [ "$cluster" != ok ]; then
  echo "[test] the two-node cluster was not available: $cluster; the last lines of its build/up output:" >&2
  tail -n 40 "$cluster_log" >&2
fi
node tools/summarize-tests.js "$JEST_JSON_DIR" || status=1
exit $status
