#!/usr/bin/env bash
# Measures the main job (tools/run.sh) from a fresh clone with empty caches, as close to a fresh machine as
# this one can be made (the Debian packages stay installed): a clone of REF under /tmp, a clean environment
# (env -i, the system PATH), an empty HOME and XDG_CACHE_HOME (so an empty KVTS_CACHE: Node.js, the test guest,
# TypeScript are fetched again) and an empty npm cache, no node_modules, no build output. Prints:
#   1. `bash tools/setup.sh --run` (all the main job installs and builds): wall time, CPU seconds (user + sys
#      of it and all its children, /usr/bin/time), peak RSS, and the time of each of its steps;
#   2. `bash tools/run.sh` after it (setup's checks again, then the launcher) until the guest's ready line;
#   3. the sum of both: the main job on a fresh machine; the load average before and after.
# Then it stops the guest with SIGINT (as Ctrl-C does) and removes everything it made. It fails (exit 1, with the
# tail of the output) when setup fails, when run.sh ends before the ready line or does not print it within
# KVTS_MAIN_JOB_LIMIT seconds (default 600), or when run.sh does not exit 0 after SIGINT. tools/test.sh runs it
# (CI proves the main job from a fresh clone).
# Root only (the main job is).   bash tools/bench-main-job.sh [REF]    (REF: a commit of this repository, default HEAD)
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
ref="$(git -C "$repo" rev-parse "${1:-HEAD}")"
[ "$(id -u)" = 0 ] || { echo "bench-main-job: run as root (the main job is)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "bench-main-job: /usr/bin/time is needed (Debian package time)" >&2; exit 1; }
work="$(mktemp -d /tmp/kvts-bench-main-job.XXXXXX)"
chmod 755 "$work"
run_pid=
cleanup() {
  if [ -n "$run_pid" ] && kill -0 "$run_pid" 2>/dev/null; then
    kill -INT "$run_pid" 2>/dev/null || true
    for _ in $(seq 1 600); do kill -0 "$run_pid" 2>/dev/null || break; sleep 0.2; done
  fi
  rm -rf "$work"
}
trap cleanup EXIT
git clone -q --no-hardlinks "$repo" "$work/repo"
git -C "$work/repo" checkout -q "$ref"
mkdir "$work/cache" "$work/npm-cache" "$work/home"
# an empty HOME too: nx (>= 23.2) keeps its task cache in ~/.nx/<repository id>, shared by every clone and
# worktree of this repository, and would restore build outputs made elsewhere
clean_env=(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME="$work/home"
  XDG_CACHE_HOME="$work/cache" npm_config_cache="$work/npm-cache" LANG=C.UTF-8)
# the machine's own TLS trust settings, where it has them (e.g. a proxy's CA), are kept: they are not caches
for var in NODE_EXTRA_CA_CERTS SSL_CERT_FILE SSL_CERT_DIR; do
  [ -z "${!var:-}" ] || clean_env+=("$var=${!var}")
done
load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "main job from a fresh clone of $(git -C "$repo" log -1 --format='%h %s' "$ref" | cut -c1-100)"
echo "system node: $("${clean_env[@]}" node --version 2>/dev/null || echo none); load average at the start: $(load)"

cd "$work/repo"
t0=$(date +%s.%N)
"${clean_env[@]}" /usr/bin/time -o "$work/time.txt" -f '%e %U %S %M' bash tools/setup.sh --run >"$work/setup.log" 2>&1 ||
  { cat "$work/setup.log" >&2; echo "bench-main-job: setup failed" >&2; exit 1; }
t1=$(date +%s.%N)
read -r wall user sys rss <"$work/time.txt"
grep '^\[setup +' "$work/setup.log" | sed 's/^/    /'

"${clean_env[@]}" bash tools/run.sh >"$work/console.log" 2>&1 </dev/null &
run_pid=$!
limit=${KVTS_MAIN_JOB_LIMIT:-600}
until grep -q KUBEVIRT-TS-GUEST-READY "$work/console.log" 2>/dev/null; do
  kill -0 "$run_pid" 2>/dev/null || { tail -n 30 "$work/console.log" >&2; echo "bench-main-job: run.sh ended early" >&2; exit 1; }
  if awk -v t1="$t1" -v now="$(date +%s.%N)" -v l="$limit" 'BEGIN { exit !(now - t1 > l) }'; then
    tail -n 30 "$work/console.log" >&2
    echo "bench-main-job: no ready line from run.sh within $limit s" >&2
    exit 1
  fi
  sleep 0.1
done
t2=$(date +%s.%N)
kill -INT "$run_pid"
status=0
wait "$run_pid" || status=$?
run_pid=
awk -v w="$wall" -v u="$user" -v s="$sys" -v r="$rss" -v t0="$t0" -v t1="$t1" -v t2="$t2" 'BEGIN {
  printf "setup --run:            %6.1f s wall, %6.1f CPU-s (user %.1f + sys %.1f), peak RSS %.0f MiB\n", w, u + s, u, s, r / 1024
  printf "run.sh to ready line:   %6.1f s wall (setup checks + launcher start + guest boot under TCG)\n", t2 - t1
  printf "main job, fresh:        %6.1f s wall (%d min %d s)\n", t2 - t0, int((t2 - t0) / 60), (t2 - t0) % 60
}'
echo "load average at the end: $(load); run.sh exit after SIGINT: $status"
[ "$status" = 0 ] || { tail -n 30 "$work/console.log" >&2; echo "bench-main-job: run.sh exited $status after SIGINT" >&2; exit 1; }
