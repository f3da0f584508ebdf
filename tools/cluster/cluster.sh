#!/usr/bin/env bash
# Single-node cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy,
# containerd (+ runc, CNI bridge) as plain processes of this machine, on node-local addresses only.
#   up           start everything (generates certificates/kubeconfigs once; quick when cached), wait for node Ready
#   down         delete Pods, stop everything, remove every mount, network device, iptables/nft rule and cgroup
#                it made, then show that nothing is left
#   status       what runs, where its log is
#   load-images  import $KVTS_CACHE/images/*.tar (tools/images/build.sh) into containerd's k8s.io namespace, each
#                also by its digest; writes $STATE_DIR/deploy: deploy/ pinned to those digests
#   deploy       kubectl apply -f $STATE_DIR/deploy (the node runs exactly the images load-images imported)
#   env          print `export KUBECONFIG=...` for a shell
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
source "$here/config.sh"
log() { printf '[cluster] %s\n' "$*" >&2; }
die() { printf 'cluster: %s\n' "$*" >&2; exit 1; }

need_root() { [ "$(id -u)" = 0 ] || die "run as root"; }

bins() {
  KUBE_DIR="$(bash "$root/tools/testenv/build-kube-apiserver.sh" kube-apiserver kubectl kubelet kube-scheduler kube-controller-manager kube-proxy)"
  for c in etcd containerd runc ctr openssl iptables; do command -v "$c" >/dev/null || die "$c is missing (bash tools/setup.d/60-cluster.sh installs the node's Debian packages)"; done
  [ -x "$CNI_BIN_DIR/bridge" ] || die "CNI plugins missing in $CNI_BIN_DIR (Debian containernetworking-plugins)"
}

pidfile() { echo "$RUN_DIR/$1.pid"; }
running() { local f; f="$(pidfile "$1")"; [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; }

# start NAME CMD...: a detached process in a session of its own, stdout+stderr to $LOG_DIR/NAME.log
start() {
  local name="$1"; shift
  if running "$name"; then return 0; fi
  setsid "$@" >>"$LOG_DIR/$name.log" 2>&1 </dev/null &
  echo $! >"$(pidfile "$name")"
  log "$name started (pid $!), log $LOG_DIR/$name.log"
}

# stop NAME [seconds]: SIGTERM, then SIGKILL after the wait
stop() {
  local name="$1" wait="${2:-20}" f pid
  f="$(pidfile "$name")"
  [ -f "$f" ] || return 0
  pid="$(cat "$f")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq $((wait * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then log "$name did not stop in ${wait}s: SIGKILL"; kill -KILL "$pid" 2>/dev/null || true; sleep 0.2; fi
    log "$name stopped"
  fi
  rm -f "$f"
}

wait_for() { # wait_for WHAT SECONDS CMD...
  local what="$1" secs="$2"; shift 2
  for _ in $(seq $((secs * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  die "$what not ready after ${secs}s (logs in $LOG_DIR)"
}

kc() { "$KUBE_DIR/kubectl" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }

node_address() {
  ip link show "$NODE_DEV" >/dev/null 2>&1 || ip link add "$NODE_DEV" type bridge
  ip addr show dev "$NODE_DEV" | grep -q "inet $NODE_IP/" || ip addr add "$NODE_IP/32" dev "$NODE_DEV"
  ip link set "$NODE_DEV" up
}

cmd_up() {
  need_root
  KVTS_SETUP_CLUSTER=1 bash "$root/tools/setup.d/60-cluster.sh"
  bins
  mkdir -p "$STATE_DIR" "$RUN_DIR" "$LOG_DIR"
  chmod 0700 "$STATE_DIR"
  local t0=$SECONDS
  node_address
  bash "$here/pki.sh"
  bash "$here/render-config.sh"
  # kubelet and the CNI bridge plugin need these on a bare machine
  modprobe br_netfilter 2>/dev/null || true
  sysctl -qw net.ipv4.ip_forward=1 || true
  [ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] && sysctl -qw net.bridge.bridge-nf-call-iptables=1 || true
  # /run/netns a shared mount point of its own before the CNI puts Pod netns there, as `ip netns add` makes it: else
  # the first `ip netns add` later (the network tests) bind-mounts /run/netns over itself, hiding the Pods' nsfs
  # mounts under it, and `down` can no longer remove their files (EBUSY)
  mkdir -p /run/netns
  mountpoint -q /run/netns || mount --bind /run/netns /run/netns
  mount --make-shared /run/netns

  start etcd etcd --name kvts --data-dir "$STATE_DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "kvts=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls "" --log-level warn
  start containerd containerd --config "$STATE_DIR/containerd.toml"
  wait_for etcd 30 curl -fsS "http://127.0.0.1:$ETCD_PORT/health"
  local pki="$STATE_DIR/pki"
  start kube-apiserver "$KUBE_DIR/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" --etcd-prefix /kvts-cluster \
    --bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port "$APISERVER_PORT" \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" \
    --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$pki/ca.crt" --kubelet-preferred-address-types InternalIP \
    --service-account-issuer "https://kubernetes.default.svc" --service-account-key-file "$pki/sa.pub" \
    --service-account-signing-key-file "$pki/sa.key" \
    --service-cluster-ip-range "$SERVICE_CIDR" --authorization-mode Node,RBAC \
    --enable-admission-plugins NodeRestriction --allow-privileged=true \
    --audit-policy-file "$STATE_DIR/audit-policy.yaml" --audit-log-path "$LOG_DIR/audit.log" --audit-log-maxsize 100 --audit-log-maxbackup 1 \
    --requestheader-client-ca-file "$pki/front-proxy-ca.crt" --requestheader-allowed-names front-proxy-client \
    --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
    --requestheader-extra-headers-prefix X-Remote-Extra- \
    --proxy-client-cert-file "$pki/front-proxy-client.crt" --proxy-client-key-file "$pki/front-proxy-client.key" \
    --enable-aggregator-routing=true \
    --profiling=false
  wait_for kube-apiserver 90 kc get --raw /readyz
  start kube-controller-manager "$KUBE_DIR/kube-controller-manager" \
    --kubeconfig "$STATE_DIR/controller-manager.kubeconfig" --authentication-kubeconfig "$STATE_DIR/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$STATE_DIR/controller-manager.kubeconfig" --bind-address 127.0.0.1 \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
    --use-service-account-credentials --leader-elect=false --cluster-cidr "$POD_CIDR" --service-cluster-ip-range "$SERVICE_CIDR"
  start kube-scheduler "$KUBE_DIR/kube-scheduler" \
    --kubeconfig "$STATE_DIR/scheduler.kubeconfig" --authentication-kubeconfig "$STATE_DIR/scheduler.kubeconfig" \
    --authorization-kubeconfig "$STATE_DIR/scheduler.kubeconfig" --bind-address 127.0.0.1 --leader-elect=false
  wait_for containerd 30 ctr --address "$CONTAINERD_SOCK" version
  cmd_load_pause
  kubelet_dir_shared
  start kubelet "$KUBE_DIR/kubelet" --config "$STATE_DIR/kubelet.yaml" --kubeconfig "$STATE_DIR/kubelet.kubeconfig" \
    --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --v 1
  start kube-proxy "$KUBE_DIR/kube-proxy" --config "$STATE_DIR/kube-proxy.yaml" --hostname-override "$NODE_NAME"
  wait_for "node $NODE_NAME Ready" 120 kc wait --for=condition=Ready "node/$NODE_NAME" --timeout=2s
  # the one node runs the control plane: labelled as kubeadm/kind label theirs (kubelet may not set node-role labels
  # itself), without their NoSchedule taint (single node); upstream's functional tests look for it (README)
  kc label --overwrite "node/$NODE_NAME" node-role.kubernetes.io/control-plane= >/dev/null
  log "up in $((SECONDS - t0))s; node $NODE_NAME Ready; export KUBECONFIG=$ADMIN_KUBECONFIG"
}

# kubelet's dir as a shared mount (what a systemd host has): the container disks virt-handler bind-mounts on the host
# propagate from there into the launcher Pods and into the handler's own view of the dir (both HostToContainer). Here / is private (no systemd), so kubelet's dir
# becomes a bind mount of itself made rshared; down unmounts it with everything under it.
kubelet_dir_shared() {
  mkdir -p "$KUBELET_DIR"
  mountpoint -q "$KUBELET_DIR" || mount --bind "$KUBELET_DIR" "$KUBELET_DIR"
  mount --make-rshared "$KUBELET_DIR"
}

# import_archive ARCHIVE: imports one archive of tools/images/build.sh, prints the name it got. An OCI archive
# (index.json) is imported under its ref name and also as <repository>@<manifest digest>, which must be the digest
# $IMAGES_DIR/images.json lists for it (the image that build made); an older docker-archive only by name.
import_archive() {
  local a="$1" ref digest want
  if tar -tf "$a" index.json >/dev/null 2>&1; then
    ref="$(tar -xOf "$a" index.json | grep -o '"org.opencontainers.image.ref.name":"[^"]*"' | head -1 | cut -d'"' -f4)"
    digest="$(tar -xOf "$a" index.json | grep -o '"digest":"sha256:[0-9a-f]*"' | head -1 | cut -d'"' -f4)"
    [[ "$ref" == */*:* && -n "$digest" ]] || die "$a: no image name and digest in its index.json"
    command -v node >/dev/null || die "node is missing (source tools/node-env.sh)"
    want="$(node -e 'const [f, a] = process.argv.slice(1); const i = Object.values(JSON.parse(require("fs").readFileSync(f, "utf8")).images).find((x) => x.archive === a); process.stdout.write(i?.digest ?? "")' "$IMAGES_DIR/images.json" "$(basename "$a")" 2>/dev/null || true)"
    [ "$want" = "$digest" ] || die "$a holds $digest but $IMAGES_DIR/images.json lists '${want:-nothing}' for it: rebuild (bash tools/images/build.sh)"
    ctr --address "$CONTAINERD_SOCK" -n k8s.io images import --base-name "${ref%:*}" --digests "$a" >/dev/null
    ctr --address "$CONTAINERD_SOCK" -n k8s.io images ls -q | grep -xF "${ref%:*}@$digest" >/dev/null || die "ctr images import $a did not make ${ref%:*}@$digest"
  else
    ref="$(ctr --address "$CONTAINERD_SOCK" -n k8s.io images import "$a" | awk '/^unpacking/ {print $2; exit}')"
  fi
  [ -n "$ref" ] || die "ctr images import $a named no image"
  echo "$ref"
}

# the sandbox image: imported and tagged as containerd's sandbox_image
cmd_load_pause() {
  local a="$IMAGES_DIR/pause.tar" ref
  [ -f "$a" ] || die "$a missing: build the images first (bash tools/images/build.sh pause)"
  ref="$(import_archive "$a")"
  [ "$ref" = "$PAUSE_IMAGE" ] || ctr --address "$CONTAINERD_SOCK" -n k8s.io images tag --force "$ref" "$PAUSE_IMAGE" >/dev/null
}

# every archive of tools/images/build.sh; the app images are also tagged with the names deploy/ uses
# (ghcr.io/kubevirt-ts/<app>:<version>), so `kubectl apply -f deploy/` runs them without any pull
cmd_load_images() {
  need_root
  running containerd || die "containerd is not running (bash tools/cluster.sh up)"
  command -v node >/dev/null || die "node is missing (source tools/node-env.sh)"
  [ -f "$root/tools/testenv/dist/gen-deploy.js" ] || die "tools/testenv is not built (npx nx run @kubevirt-ts/testenv:build): load-images writes the pinned deploy/ with it"
  local n=0 a ref name version
  for a in "$IMAGES_DIR"/*.tar; do
    [ -f "$a" ] || continue
    ref="$(import_archive "$a")"
    log "imported $ref"
    name="${ref##*/}"
    version="${name#*:}"
    version="${version%%-*}"
    name="${name%%:*}"
    case "$name" in
      virt-launcher | virt-controller | virt-handler | virt-operator)
        ctr --address "$CONTAINERD_SOCK" -n k8s.io images tag --force "$ref" "$DEPLOY_REGISTRY/$name:$version" >/dev/null
        log "  tagged $DEPLOY_REGISTRY/$name:$version"
        ;;
      pause) ctr --address "$CONTAINERD_SOCK" -n k8s.io images tag --force "$ref" "$PAUSE_IMAGE" >/dev/null ;;
      guest-kernel-boot | guest-container-disk)
        # the stable name examples/vm-tiny.yaml uses (with imagePullPolicy: IfNotPresent)
        ctr --address "$CONTAINERD_SOCK" -n k8s.io images tag --force "$ref" "${ref%%:*}:latest" >/dev/null
        log "  tagged ${ref%%:*}:latest"
        ;;
    esac
    n=$((n + 1))
  done
  [ "$n" -gt 0 ] || die "no image archive in $IMAGES_DIR (bash tools/images/build.sh)"
  # deploy/ with the apps' images pinned by the digests just imported (the committed deploy/ names tags)
  node "$root/tools/gen-deploy.mjs" --pin "$IMAGES_DIR/images.json" --out "$STATE_DIR/deploy"
}

# kubectl apply of the pinned deploy/ that load-images wrote
cmd_deploy() {
  need_root
  [ -d "$STATE_DIR/deploy" ] || die "$STATE_DIR/deploy missing: bash tools/cluster.sh load-images first"
  bins
  kc apply -f "$STATE_DIR/deploy"
}

leftovers() { # prints what the cluster could leave behind; empty when clean
  # the cluster's processes only (other etcd/kube-apiserver processes on this machine, e.g. tools/testenv's, are
  # not ours): every component names $STATE_DIR on its command line, the shims name our containerd's socket
  pgrep -a -f "$STATE_DIR" 2>/dev/null | grep -v "cluster.sh" | sed 's/^/process: /' || true
  pgrep -a -f "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCK" 2>/dev/null | sed 's/^/process: /' || true
  awk -v a="$KUBELET_DIR" -v b="$CONTAINERD_ROOT" -v c="$CONTAINERD_STATE" -v d="/run/netns/cni-" \
    'index($2,a)==1||index($2,b)==1||index($2,c)==1||index($2,d)==1 {print "mount: " $2}' /proc/self/mounts
  ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^($NODE_DEV|$CNI_BRIDGE|veth|kube-ipvs0)" | sed 's/^/network device: /' || true
  ls /run/netns 2>/dev/null | grep '^cni-' | sed 's/^/netns: /' || true
  iptables-save 2>/dev/null | grep -E '^:(KUBE|CNI)-|^-A .*(KUBE|CNI)-' | sed 's/^/iptables: /' | head -20 || true
  ip6tables-save 2>/dev/null | grep -E '^:(KUBE|CNI)-|^-A .*(KUBE|CNI)-' | sed 's/^/ip6tables: /' | head -20 || true
  nft list tables 2>/dev/null | grep -E 'kube-proxy|cni' | sed 's/^/nft: /' || true
}

cmd_down() {
  need_root
  KUBE_DIR="$(bash "$root/tools/testenv/build-kube-apiserver.sh" kube-apiserver kubectl kubelet kube-scheduler kube-controller-manager kube-proxy)"
  # nothing may recreate Pods while they go
  stop kube-controller-manager
  stop kube-scheduler
  # Pods first, while kubelet still runs, so CNI DEL removes their veths and rules and kubelet unmounts their volumes
  if running kube-apiserver && running kubelet; then
    log "deleting all Pods"
    kc delete pods --all --all-namespaces --wait=false >/dev/null 2>&1 || true
    for _ in $(seq 300); do
      [ -z "$(kc get pods -A --no-headers 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  stop kube-proxy
  stop kubelet
  # whatever containers remain (a Pod kubelet did not finish): stop their sandboxes through CRI-less ctr
  if running containerd; then
    local ids
    ids="$(ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks ls -q 2>/dev/null || true)"
    for id in $ids; do ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks kill -s KILL "$id" >/dev/null 2>&1 || true; done
    sleep 0.5
    for id in $ids; do ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks delete -f "$id" >/dev/null 2>&1 || true; done
  fi
  stop containerd
  pkill_shims
  stop kube-apiserver
  stop etcd
  # the cluster's objects do not outlive it: the next `up` starts from an empty etcd (certificates, kubeconfigs and
  # configs stay), so a VM or Pod left by an earlier run can never meet the next one's tests
  rm -rf "${STATE_DIR:?}/etcd"
  # kube-proxy's own rule cleanup (iptables and nftables modes)
  [ -x "$KUBE_DIR/kube-proxy" ] && "$KUBE_DIR/kube-proxy" --cleanup --config "$STATE_DIR/kube-proxy.yaml" >>"$LOG_DIR/kube-proxy.log" 2>&1 || true
  cleanup_network
  cleanup_mounts
  cleanup_cgroups
  local left
  left="$(leftovers)"
  if [ -n "$left" ]; then
    printf '%s\n' "$left" >&2
    die "down: the above is left behind"
  fi
  log "down: no process, mount, network device, netns, iptables or nft rule of the cluster left (checked)"
}

pkill_shims() {
  # containerd-shim-runc-v2 processes of our containerd (their command line names its socket)
  local p
  for p in $(pgrep -f "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCK" 2>/dev/null || true); do kill -KILL "$p" 2>/dev/null || true; done
}

cleanup_network() {
  local l
  for l in $(ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^(veth|$CNI_BRIDGE|$NODE_DEV)" || true); do
    ip link del "$l" 2>/dev/null || true
  done
  for n in $(ls /run/netns 2>/dev/null | grep '^cni-' || true); do
    ip netns del "$n" 2>/dev/null || umount "/run/netns/$n" 2>/dev/null || true
    rm -f "/run/netns/$n"
  done
  # CNI chains (bridge ipMasq, portmap) and kube-proxy's, in both iptables families
  for t in iptables ip6tables; do
    command -v "$t-save" >/dev/null || continue
    for table in nat filter mangle; do
      # rules that jump to or live in those chains (iptables-save prints them quoted for a shell)
      { "$t-save" -t "$table" 2>/dev/null || true; } | { grep -E '^-A .*(KUBE-|CNI-)' || true; } | sed 's/^-A/-D/' |
        while read -r rule; do eval "$t -t $table $rule" 2>/dev/null || true; done
      local chains
      chains="$({ "$t-save" -t "$table" 2>/dev/null || true; } | sed -n -E 's/^:((KUBE|CNI)-[^ ]*).*/\1/p')"
      for ch in $chains; do "$t" -t "$table" -F "$ch" 2>/dev/null || true; done
      for ch in $chains; do "$t" -t "$table" -X "$ch" 2>/dev/null || true; done
    done
  done
  for tbl in $(nft list tables 2>/dev/null | awk '/kube-proxy|cni/ {print $2 ":" $3}'); do nft delete table "${tbl%%:*}" "${tbl#*:}" 2>/dev/null || true; done
}

cleanup_mounts() {
  local m
  for _ in 1 2 3; do
    m="$(awk -v a="$KUBELET_DIR" -v b="$CONTAINERD_ROOT" -v c="$CONTAINERD_STATE" 'index($2,a)==1||index($2,b)==1||index($2,c)==1 {print $2}' /proc/self/mounts | sort -r)"
    [ -n "$m" ] || break
    while read -r p; do umount "$p" 2>/dev/null || umount -l "$p" 2>/dev/null || true; done <<<"$m"
  done
}

cleanup_cgroups() {
  local c
  for c in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/kubepods.slice; do
    [ -d "$c" ] || continue
    find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
}

cmd_status() {
  local n
  for n in etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy; do
    if running "$n"; then printf '%-24s running (pid %s)  log %s\n' "$n" "$(cat "$(pidfile "$n")")" "$LOG_DIR/$n.log"
    else printf '%-24s stopped              log %s\n' "$n" "$LOG_DIR/$n.log"; fi
  done
  printf 'audit log                %s\nkubeconfig               %s\n' "$LOG_DIR/audit.log" "$ADMIN_KUBECONFIG"
  if running kube-apiserver; then
    KUBE_DIR="$(bash "$root/tools/testenv/build-kube-apiserver.sh" kube-apiserver kubectl)"
    kc get nodes -o wide 2>&1 || true
  fi
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  load-images) cmd_load_images ;;
  deploy) cmd_deploy ;;
  env) echo "export KUBECONFIG=$ADMIN_KUBECONFIG" ;;
  leftovers) leftovers ;;
  *) echo "usage: tools/cluster.sh up|down|status|load-images|deploy|env" >&2; exit 2 ;;
esac
