#!/usr/bin/env bash
# The cluster: a control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) and N nodes
# (containerd + runc + CNI bridge, kubelet, kube-proxy), plain processes of this machine, each node in network,
# mount, PID and UTS namespaces of its own and under a cgroup root of its own (README "Layout").
#   up [--nodes N]  start everything (certificates/kubeconfigs/configs once; quick when cached), wait for the nodes
#                   to be Ready (N defaults to 1)
#   down            delete Pods, stop everything, kill each node's namespace init, delete the network namespaces,
#                   the root namespace's veth and routes and the nodes' cgroups, then show that nothing is left
#                   (KVTS_DOWN_GRACE=S: Pods get at most S seconds to stop)
#   status          what runs, where its log is, the nodes
#   load-images     import $KVTS_CACHE/images/*.tar (tools/images/build.sh) into every node's containerd (k8s.io
#                   namespace), each also by its digest; writes $STATE_DIR/deploy: deploy/ pinned to those digests
#   deploy          kubectl apply -f $STATE_DIR/deploy
#   env             print `export KUBECONFIG=...` for a shell
#   node-pid NODE   the root-namespace pid of NODE's init (/proc/<pid>/root is the node's file system view)
#   kill-node NODE  a power cut of NODE: every process of it killed at once (up again restarts it)
#   block-volumes   the loop devices and Block PersistentVolumes of `up` (made when missing), Released ones wiped and
#                   Available again, then their list
#   leftovers       what down would complain about
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
source "$here/config.sh"
log() { printf '[cluster] %s\n' "$*" >&2; }
die() { printf 'cluster: %s\n' "$*" >&2; exit 1; }

need_root() { [ "$(id -u)" = 0 ] || die "run as root"; }

kube_dir() { bash "$root/tools/testenv/build-kube-apiserver.sh" kube-apiserver kubectl kubelet kube-scheduler kube-controller-manager kube-proxy; }
bins() {
  KUBE_DIR="$(kube_dir)"
  for c in etcd containerd runc ctr openssl iptables nsenter unshare curl losetup; do command -v "$c" >/dev/null || die "$c is missing (bash tools/setup.d/60-cluster.sh installs the node's Debian packages)"; done
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

# start_cp NAME CMD...: in the control plane's network namespace (nsenter without -p execs: the pid stays)
start_cp() { local name="$1"; shift; start "$name" nsenter --net="/run/netns/$CP_NS" -- "$@"; }

# child_of PID: the one child of PID (nsenter -p and unshare --fork fork once and wait), waiting for the fork
child_of() {
  local c
  for _ in $(seq 100); do
    c="$(cat "/proc/$1/task/$1/children" 2>/dev/null || true)"
    [ -n "${c// /}" ] && { echo "${c%% *}"; return 0; }
    kill -0 "$1" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# node_init_pid I: the root-namespace pid of node I's PID 1
node_init_pid() { cat "$(pidfile "$(node_name "$1")-init")" 2>/dev/null; }

# start_node I COMPONENT CMD...: into node I's mount, network, PID and UTS namespaces; the pid file names the
# process itself (nsenter forks for the PID namespace and waits, it does not forward signals)
start_node() {
  local i="$1" comp="$2" name init pid child; shift 2
  name="$(node_name "$i")-$comp"
  if running "$name"; then return 0; fi
  init="$(node_init_pid "$i")"
  setsid nsenter -t "$init" -m -n -p -u -- "$@" >>"$LOG_DIR/$name.log" 2>&1 </dev/null &
  pid=$!
  child="$(child_of "$pid")" || die "$name did not start (log $LOG_DIR/$name.log)"
  echo "$child" >"$(pidfile "$name")"
  log "$name started (pid $child), log $LOG_DIR/$name.log"
}

# in_node I CMD...: a command in node I's mount and network namespaces (no fork: exit status and stdio as is)
in_node() { local i="$1"; shift; nsenter -t "$(node_init_pid "$i")" -m -n -- "$@"; }
in_cp() { nsenter --net="/run/netns/$CP_NS" -- "$@"; }
nctr() { local i="$1"; shift; in_node "$i" ctr --address "$(node_containerd_sock "$i")" "$@"; }

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

# --- network -------------------------------------------------------------------------------------------------------

netns_add() { # netns_add NAME: a network namespace with lo up, forwarding on, bridged traffic through iptables
  # (no `| grep -q` under pipefail: grep exits at the first match, the writer may die of SIGPIPE, the test fails)
  [[ $'\n'"$(ip netns list)" =~ $'\n'"$1"( |$'\n'|$) ]] || ip netns add "$1"
  ip -n "$1" link set lo up
  ip netns exec "$1" sysctl -qw net.ipv4.ip_forward=1
  ip netns exec "$1" sh -c '[ ! -e /proc/sys/net/bridge/bridge-nf-call-iptables ] || sysctl -qw net.bridge.bridge-nf-call-iptables=1'
}

# fabric_port NS PORT ADDR: a veth from the fabric bridge (end PORT) into NS (end eth0) with ADDR/24
fabric_port() {
  local ns="$1" port="$2" addr="$3"
  ip -n "$FABRIC_NS" link show "$port" >/dev/null 2>&1 || ip -n "$FABRIC_NS" link add "$port" type veth peer name eth0 netns "$ns"
  ip -n "$FABRIC_NS" link set "$port" master "$FABRIC_BRIDGE" up
  [[ "$(ip -n "$ns" addr show dev eth0)" == *"inet $addr/"* ]] || ip -n "$ns" addr add "$addr/24" dev eth0
  ip -n "$ns" link set eth0 up
}

# preflight: a route of the root namespace to one of our ranges that is not ours (e.g. the single-node layout's
# 10.244.0.0/24 on kvts-cni0, or another cluster's) would be replaced by `ip route replace`: refuse instead
routes_free() {
  local n="$1" i cidr r
  for cidr in "$SERVICE_CIDR" $(for i in $(seq "$n"); do node_pod_cidr "$i"; done) "$FABRIC_NET.0/24"; do
    r="$(ip route show exact "$cidr" 2>/dev/null || true)"
    [ -z "$r" ] || [[ "$r" == *" dev $HOST_VETH"* ]] ||
      die "the root namespace already routes $cidr elsewhere ($r): another cluster is up (down it first, or set KVTS_POD_NET/KVTS_SERVICE_NET/KVTS_FABRIC_NET, README \"Names and ranges are settings\")"
  done
  for i in $(ip -o -4 addr show | awk '{print $2 " " $4}' | grep -F " $FABRIC_NET." | grep -v "^$HOST_VETH " || true); do
    die "the root namespace already has an address in $FABRIC_NET.0/24 ($(ip -o -4 addr show | grep -F " $FABRIC_NET." | head -1 | awk '{print $2, $4}')): another cluster is up"
  done
}

network_up() {
  local n="$1" i j
  modprobe br_netfilter 2>/dev/null || true
  netns_add "$FABRIC_NS"
  ip -n "$FABRIC_NS" link show "$FABRIC_BRIDGE" >/dev/null 2>&1 || ip -n "$FABRIC_NS" link add "$FABRIC_BRIDGE" type bridge
  ip -n "$FABRIC_NS" link set "$FABRIC_BRIDGE" up
  # the root namespace: one veth, the client address, routes to the Pods (via their node) and Services (via node 1)
  ip link show "$HOST_VETH" >/dev/null 2>&1 || ip link add "$HOST_VETH" type veth peer name host netns "$FABRIC_NS"
  ip -n "$FABRIC_NS" link set host master "$FABRIC_BRIDGE" up
  [[ "$(ip addr show dev "$HOST_VETH")" == *"inet $CLIENT_IP/"* ]] || ip addr add "$CLIENT_IP/24" dev "$HOST_VETH"
  ip link set "$HOST_VETH" up
  # the control plane
  netns_add "$CP_NS"
  fabric_port "$CP_NS" cp "$CP_IP"
  for i in $(seq "$n"); do netns_add "$(node_ns "$i")"; fabric_port "$(node_ns "$i")" "node$i" "$(node_ip "$i")"; done
  for i in $(seq "$n"); do
    ip route replace "$(node_pod_cidr "$i")" via "$(node_ip "$i")" dev "$HOST_VETH"
    ip -n "$CP_NS" route replace "$(node_pod_cidr "$i")" via "$(node_ip "$i")"
    for j in $(seq "$n"); do
      [ "$i" = "$j" ] || ip -n "$(node_ns "$j")" route replace "$(node_pod_cidr "$i")" via "$(node_ip "$i")"
    done
    # a node's own processes (host-network Pods) reach ClusterIPs: the route lookup before kube-proxy's OUTPUT DNAT
    # needs some route (there is no default route: nothing beyond the fabric is reachable)
    ip -n "$(node_ns "$i")" route replace "$SERVICE_CIDR" dev eth0
  done
  ip route replace "$SERVICE_CIDR" via "$(node_ip 1)" dev "$HOST_VETH"
  ip -n "$CP_NS" route replace "$SERVICE_CIDR" via "$(node_ip 1)"
}

# --- nodes ---------------------------------------------------------------------------------------------------------

# the node's cgroup root in every hierarchy this machine mounts (cgroup v1 controllers, name=systemd, the unified
# cgroup2 of the hybrid layout), as kubelet requires cgroupRoot to exist; a cpuset one gets its parent's cpus/mems
node_cgroups() {
  local cg h
  cg="$(node_cgroup "$1")"
  for h in $(awk '$3 == "cgroup" || $3 == "cgroup2" {print $2}' /proc/self/mounts); do
    mkdir -p "$h$cg"
    if [ -f "$h/cpuset.cpus" ]; then
      [ -n "$(cat "$h$cg/cpuset.cpus")" ] || cat "$h/cpuset.cpus" >"$h$cg/cpuset.cpus"
      [ -n "$(cat "$h$cg/cpuset.mems")" ] || cat "$h/cpuset.mems" >"$h$cg/cpuset.mems"
    fi
  done
}

# node_start I: the node's PID 1 (node-init.sh) in its namespaces, then containerd
node_start() {
  local i="$1" name dir pid init
  name="$(node_name "$i")"
  dir="$(node_dir "$i")"
  mkdir -p "$dir"
  node_cgroups "$i"
  if ! running "$name-init"; then
    rm -f "$dir/ready"
    setsid nsenter --net="/run/netns/$(node_ns "$i")" -- unshare --pid --fork --mount --uts --propagation slave --mount-proc \
      bash "$here/node-init.sh" "$dir" "$name" >>"$LOG_DIR/$name-init.log" 2>&1 </dev/null &
    pid=$!
    init="$(child_of "$pid")" || die "$name: the node's init did not start (log $LOG_DIR/$name-init.log)"
    echo "$init" >"$(pidfile "$name-init")"
    wait_for "$name's namespaces" 20 test -e "$dir/ready"
    log "$name: init pid $init (net $(readlink "/proc/$init/ns/net"), pid $(readlink "/proc/$init/ns/pid"))"
  fi
  start_node "$i" containerd containerd --config "$dir/containerd.toml"
}

# node_kubelet I: the sandbox image into the node's containerd, then kubelet and kube-proxy
node_kubelet() {
  local i="$1" name dir
  name="$(node_name "$i")"
  dir="$(node_dir "$i")"
  start_node "$i" kubelet "$KUBE_DIR/kubelet" --config "$dir/kubelet.yaml" --kubeconfig "$STATE_DIR/kubelet-$name.kubeconfig" \
    --hostname-override "$name" --node-ip "$(node_ip "$i")" --v 1
  start_node "$i" kube-proxy "$KUBE_DIR/kube-proxy" --config "$dir/kube-proxy.yaml"
}

cmd_up() {
  local n=1
  while [ $# -gt 0 ]; do
    case "$1" in
      --nodes) n="${2:-}"; shift 2 ;;
      --nodes=*) n="${1#*=}"; shift ;;
      *) die "up: unknown argument '$1' (usage: up [--nodes N])" ;;
    esac
  done
  [[ "$n" =~ ^[1-9]$ ]] || die "up: --nodes must be 1..9, got '$n'"
  need_root
  local was
  was="$(nodes_up)"
  [ "$was" = 0 ] || [ "$was" = "$n" ] || die "up: a cluster of $was node(s) is up; down first"
  KVTS_SETUP_CLUSTER=1 bash "$root/tools/setup.d/60-cluster.sh"
  bins
  mkdir -p "$STATE_DIR" "$RUN_DIR" "$LOG_DIR"
  chmod 0700 "$STATE_DIR"
  local t0=$SECONDS i
  routes_free "$n"
  echo "$n" >"$RUN_DIR/nodes"
  NODES="$n" bash "$here/pki.sh"
  NODES="$n" bash "$here/render-config.sh"
  network_up "$n"
  for i in $(seq "$n"); do node_start "$i"; done

  start_cp etcd etcd --name kvts --data-dir "$STATE_DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "kvts=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls "" --log-level warn
  wait_for etcd 30 in_cp curl -fsS "http://127.0.0.1:$ETCD_PORT/health"
  local pki="$STATE_DIR/pki"
  start_cp kube-apiserver "$KUBE_DIR/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" --etcd-prefix /kvts-cluster \
    --bind-address "$CP_IP" --advertise-address "$CP_IP" --secure-port "$APISERVER_PORT" \
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
  # the nodes' sandbox image while the API server starts
  for i in $(seq "$n"); do wait_for "$(node_name "$i") containerd" 30 nctr "$i" version; load_pause "$i"; load_coredns "$i"; done
  wait_for kube-apiserver 90 kc get --raw /readyz
  start_cp kube-controller-manager "$KUBE_DIR/kube-controller-manager" \
    --kubeconfig "$STATE_DIR/controller-manager.kubeconfig" --authentication-kubeconfig "$STATE_DIR/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$STATE_DIR/controller-manager.kubeconfig" --bind-address 127.0.0.1 \
    --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
    --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
    --use-service-account-credentials --leader-elect=false --cluster-cidr "$CLUSTER_CIDR" --service-cluster-ip-range "$SERVICE_CIDR"
  start_cp kube-scheduler "$KUBE_DIR/kube-scheduler" \
    --kubeconfig "$STATE_DIR/scheduler.kubeconfig" --authentication-kubeconfig "$STATE_DIR/scheduler.kubeconfig" \
    --authorization-kubeconfig "$STATE_DIR/scheduler.kubeconfig" --bind-address 127.0.0.1 --leader-elect=false
  for i in $(seq "$n"); do node_kubelet "$i"; done
  for i in $(seq "$n"); do
    local name cidr
    name="$(node_name "$i")"
    cidr="$(node_pod_cidr "$i")"
    wait_for "node $name Ready" 120 kc wait --for=condition=Ready "node/$name" --timeout=2s
    # the node's Pod CIDR in its spec, as the node IPAM controller would set it (the CNI config hands out exactly
    # that range; spec.podCIDR can only be set once)
    [ -n "$(kc get node "$name" -o jsonpath='{.spec.podCIDR}')" ] ||
      kc patch node "$name" --type merge -p "{\"spec\":{\"podCIDR\":\"$cidr\",\"podCIDRs\":[\"$cidr\"]}}" >/dev/null
  done
  # node 1 is labelled as kubeadm/kind label their control-plane node (kubelet may not set node-role labels
  # itself), without their NoSchedule taint; upstream's functional tests look for it (README)
  kc label --overwrite "node/$(node_name 1)" node-role.kubernetes.io/control-plane= >/dev/null
  # Pods can be created in "default" once the service account controller made its account
  wait_for "serviceaccount default/default" 60 kc -n default get serviceaccount default
  # loop devices and their Block PersistentVolumes (README "Block volumes")
  block_volumes "$n"
  # the cluster DNS (README "Cluster DNS"): its image was imported with the sandbox image above
  dns_up
  log "up in $((SECONDS - t0))s; $n node(s) Ready; export KUBECONFIG=$ADMIN_KUBECONFIG"
}

# --- block volumes (README "Block volumes") ------------------------------------------------------------------------
# Per node BLOCK_PER_NODE sparse files nodes/<node>/block/disk<j>.img, each on a loop device (the nodes share the
# root namespace's devtmpfs /dev, so /dev/loopN is the same device node on every node and in the root namespace;
# kubelet gives it to a Pod as a volumeDevice), offered as a static `local` PersistentVolume <node>-block-<j> of
# StorageClass local-block (no provisioner, WaitForFirstConsumer, Retain).

# loop_of FILE: the loop device(s) FILE is attached to (none: empty)
loop_of() { losetup -n -O NAME -j "$1" 2>/dev/null | awk 'NF {print $1}'; }

# block_attach I J: node I's volume J: its sparse file and loop device (made when missing); prints the device
block_attach() {
  local f dev
  f="$(node_block_file "$1" "$2")"
  mkdir -p "$(dirname "$f")"
  [ -f "$f" ] || truncate -s "${BLOCK_SIZE_MIB}M" "$f"
  dev="$(loop_of "$f" | awk 'NR == 1')"
  [ -n "$dev" ] || dev="$(losetup --find --show "$f")"
  [ -b "$dev" ] || die "block volume $f: $dev is not a block device"
  echo "$dev"
}

block_pv_manifest() { # block_pv_manifest I J DEV
  cat <<EOF
apiVersion: v1
kind: PersistentVolume
metadata:
  name: $(node_block_pv "$1" "$2")
  labels:
    app.kubernetes.io/part-of: kubevirt-ts-cluster
    kubevirt-ts.io/block-volume: "true"
  annotations:
    kubevirt-ts.io/backing-file: $(node_block_file "$1" "$2")
spec:
  capacity:
    storage: ${BLOCK_SIZE_MIB}Mi
  volumeMode: Block
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: $BLOCK_CLASS
  local:
    path: $3
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions:
            - key: kubernetes.io/hostname
              operator: In
              values: [$(node_name "$1")]
EOF
}

# block_wipe DEV: zeroes (a discard punches holes into the sparse file, which stays sparse; dd when that fails)
block_wipe() {
  blkdiscard "$1" 2>/dev/null || dd if=/dev/zero of="$1" bs=1M count="$BLOCK_SIZE_MIB" conv=fsync status=none
}

# block_volumes N: the class, every node's loop devices and PersistentVolumes, made when missing (idempotent); a
# volume Released (its claim deleted; Retain) or Failed is wiped and made Available again (its claimRef removed)
block_volumes() {
  local n="$1" i j dev name pv path phase
  kc apply -f - >/dev/null <<EOF
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: $BLOCK_CLASS
  labels:
    app.kubernetes.io/part-of: kubevirt-ts-cluster
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
reclaimPolicy: Retain
EOF
  for i in $(seq "$n"); do
    for j in $(seq "$BLOCK_PER_NODE"); do
      dev="$(block_attach "$i" "$j")"
      # the node's kubelet resolves the PV's path in the node's mount namespace
      in_node "$i" test -b "$dev" || die "$(node_name "$i"): $dev is not a block device in the node's mount namespace"
      name="$(node_block_pv "$i" "$j")"
      pv="$(kc get pv "$name" -o jsonpath='{.spec.local.path} {.status.phase}' --ignore-not-found)"
      path="${pv%% *}" phase="${pv#* }"
      if [ -n "$pv" ] && [ "$path" != "$dev" ]; then
        # the file was attached anew (another loop device): a volume nobody uses is replaced
        if [ "$phase" = Bound ]; then log "block volume $name is Bound but names $path, not $dev: left as it is"; continue; fi
        kc delete pv "$name" --wait=true >/dev/null
        pv=""
      fi
      if [ -z "$pv" ]; then
        block_wipe "$dev"
        block_pv_manifest "$i" "$j" "$dev" | kc create -f - >/dev/null
        log "block volume $name: $dev ($(node_block_file "$i" "$j"), ${BLOCK_SIZE_MIB} MiB) on $(node_name "$i")"
      elif [ "$phase" = Released ] || [ "$phase" = Failed ]; then
        block_wipe "$dev"
        kc patch pv "$name" --type json -p '[{"op":"remove","path":"/spec/claimRef"}]' >/dev/null
        log "block volume $name was $phase: wiped, Available again"
      fi
    done
  done
}

# block_holders DEV: loop devices whose backing file is the device node DEV itself (kubelet keeps a mapped block
# volume open with a loop device on its device node, named by a path in the node's mount namespace: matched by the
# node's device and inode, as losetup reports them; left behind when a node is killed without unmapping)
block_holders() {
  local id
  id="$(stat -c '%Hd:%Ld %i' "$1")" || return 0
  losetup -n -l -O NAME,BACK-MAJ:MIN,BACK-INO 2>/dev/null | awk -v d="$1" -v id="$id" '$1 != d && ($2 " " $3) == id {print $1}'
}

# block_detach_all: every loop device on the cluster's block files detached (loop devices over them first), the
# files removed
block_detach_all() {
  local f dev h
  for f in "$STATE_DIR"/nodes/*/block/disk*.img; do
    [ -f "$f" ] || continue
    for dev in $(loop_of "$f"); do
      for h in $(block_holders "$dev"); do losetup -d "$h" 2>/dev/null || log "losetup -d $h (over $dev) failed"; done
      losetup -d "$dev" 2>/dev/null || log "losetup -d $dev ($f) failed"
    done
    rm -f "$f"
  done
  rmdir "$STATE_DIR"/nodes/*/block 2>/dev/null || true
}

# block_list: the block volumes: loop device, PersistentVolume, its phase and claim, file
block_list() {
  local f dev pvs=""
  [ -z "${KUBE_DIR:-}" ] || pvs="$(kc get pv -l kubevirt-ts.io/block-volume=true --no-headers \
    -o custom-columns='P:.spec.local.path,N:.metadata.name,S:.status.phase,NS:.spec.claimRef.namespace,C:.spec.claimRef.name' 2>/dev/null || true)"
  for f in "$STATE_DIR"/nodes/*/block/disk*.img; do
    [ -f "$f" ] || continue
    dev="$(loop_of "$f" | paste -sd, -)"
    printf 'block volume %-12s %-42s %s\n' "${dev:-(detached)}" \
      "$(awk -v d="$dev" '$1 == d {print $2, $3, ($4 == "<none>" ? "" : $4 "/" $5)}' <<<"$pvs")" "$f"
  done
}

# import_archive I ARCHIVE: imports one archive into node I's containerd of tools/images/build.sh, prints the name it got. An OCI archive
# (index.json) is imported under its ref name and also as <repository>@<manifest digest>, which must be the digest
# $IMAGES_DIR/images.json lists for it (the image that build made); an older docker-archive only by name.
import_archive() {
  local i="$1" a="$2" ref digest want
  if tar -tf "$a" index.json >/dev/null 2>&1; then
    ref="$(tar -xOf "$a" index.json | grep -o '"org.opencontainers.image.ref.name":"[^"]*"' | head -1 | cut -d'"' -f4)"
    digest="$(tar -xOf "$a" index.json | grep -o '"digest":"sha256:[0-9a-f]*"' | head -1 | cut -d'"' -f4)"
    [[ "$ref" == */*:* && -n "$digest" ]] || die "$a: no image name and digest in its index.json"
    command -v node >/dev/null || die "node is missing (source tools/node-env.sh)"
    want="$(node -e 'const [f, a] = process.argv.slice(1); const i = Object.values(JSON.parse(require("fs").readFileSync(f, "utf8")).images).find((x) => x.archive === a); process.stdout.write(i?.digest ?? "")' "$IMAGES_DIR/images.json" "$(basename "$a")" 2>/dev/null || true)"
    [ "$want" = "$digest" ] || die "$a holds $digest but $IMAGES_DIR/images.json lists '${want:-nothing}' for it: rebuild (bash tools/images/build.sh)"
    nctr "$i" -n k8s.io images import --base-name "${ref%:*}" --digests "$a" >/dev/null
    nctr "$i" -n k8s.io images ls -q | grep -xF "${ref%:*}@$digest" >/dev/null || die "ctr images import $a did not make ${ref%:*}@$digest"
  else
    ref="$(nctr "$i" -n k8s.io images import "$a" | awk '/^unpacking/ {print $2; exit}')"
  fi
  [ -n "$ref" ] || die "ctr images import $a named no image"
  echo "$ref"
}

# load_pause I: the sandbox image into node I, tagged as containerd's sandbox_image
load_pause() {
  local i="$1" a="$IMAGES_DIR/pause.tar" ref
  [ -f "$a" ] || die "$a missing: build the images first (bash tools/images/build.sh pause)"
  ref="$(import_archive "$i" "$a")"
  [ "$ref" = "$PAUSE_IMAGE" ] || nctr "$i" -n k8s.io images tag --force "$ref" "$PAUSE_IMAGE" >/dev/null
}

# --- cluster DNS (README "Cluster DNS") ----------------------------------------------------------------------------
# CoreDNS (tools/cluster/coredns.yaml) as kube-system/coredns behind the Service kube-dns at $DNS_SERVICE_IP, which
# every kubelet's config names as clusterDNS (render-config.sh).

# coredns_image: the image name the archive of tools/images/build.sh coredns holds (localhost/kubevirt-ts/coredns:<v>)
coredns_image() {
  local a="$IMAGES_DIR/$COREDNS_ARCHIVE"
  [ -f "$a" ] || die "$a missing: build the cluster DNS image first (bash tools/images/build.sh coredns)"
  tar -xOf "$a" index.json | grep -o '"org.opencontainers.image.ref.name":"[^"]*"' | head -1 | cut -d'"' -f4
}

# load_coredns I: the CoreDNS image into node I (the Deployment never pulls)
load_coredns() {
  local i="$1" ref
  coredns_image >/dev/null
  ref="$(import_archive "$i" "$IMAGES_DIR/$COREDNS_ARCHIVE")"
  log "$(node_name "$i"): imported $ref"
}

# dns_up: applies tools/cluster/coredns.yaml (rendered into $STATE_DIR) and waits until its Deployment is available
dns_up() {
  local image
  image="$(coredns_image)"
  [[ "$image" == */coredns:* ]] || die "$IMAGES_DIR/$COREDNS_ARCHIVE names no coredns image ('$image')"
  sed -e "s|@IMAGE@|$image|g" -e "s|@DNS_IP@|$DNS_SERVICE_IP|g" "$here/coredns.yaml" >"$STATE_DIR/coredns.yaml"
  kc apply -f "$STATE_DIR/coredns.yaml" >/dev/null
  kc -n kube-system wait --for=condition=Available deployment/coredns --timeout=120s >/dev/null ||
    die "cluster DNS: kube-system/coredns not available after 120s ($(kc -n kube-system get pods -l k8s-app=kube-dns -o wide 2>&1 | tail -n +2))"
  log "cluster DNS: kube-system/kube-dns $DNS_SERVICE_IP ($image)"
}

# load_images_node I: every archive of tools/images/build.sh into node I; the app images are also tagged with the
# names deploy/ uses (ghcr.io/kubevirt-ts/<app>:<version>), so `kubectl apply -f deploy/` runs them without a pull
load_images_node() {
  local i="$1" n=0 a ref name version keep=()
  for a in "$IMAGES_DIR"/*.tar; do
    [ -f "$a" ] || continue
    ref="$(import_archive "$i" "$a")"
    log "$(node_name "$i"): imported $ref"
    name="${ref##*/}"
    version="${name#*:}"
    version="${version%%-*}"
    name="${name%%:*}"
    case "$name" in
      virt-launcher | virt-controller | virt-handler | virt-operator)
        nctr "$i" -n k8s.io images tag --force "$ref" "$DEPLOY_REGISTRY/$name:$version" >/dev/null
        ;;
      pause) nctr "$i" -n k8s.io images tag --force "$ref" "$PAUSE_IMAGE" >/dev/null ;;
      guest-kernel-boot | guest-container-disk)
        # the stable name examples/vm-tiny.yaml uses (with imagePullPolicy: IfNotPresent)
        nctr "$i" -n k8s.io images tag --force "$ref" "${ref%%:*}:latest" >/dev/null
        ;;
    esac
    n=$((n + 1))
    keep+=("$ref")
  done
  [ "$n" -gt 0 ] || die "no image archive in $IMAGES_DIR (bash tools/images/build.sh)"
  prune_images_node "$i" "${keep[@]}"
}

# prune_images_node I REF...: removes the images of earlier builds from node I's containerd (each build imports
# new per-commit names; the node's store grew by GBs a day): every image under our names whose digest is not one of
# the given refs' (their tags and <repository>@<digest> names share those digests)
prune_images_node() {
  local i="$1" listing ref digest keepd=" " gone=0; shift
  listing="$(nctr "$i" -n k8s.io images ls)"
  for ref in "$@"; do
    digest="$(awk -v r="$ref" '$1 == r {print $3}' <<<"$listing")"
    keepd+="$digest "
  done
  while read -r ref _ digest _; do
    case "$ref" in localhost/kubevirt-ts/* | "$DEPLOY_REGISTRY"/*) ;; *) continue ;; esac
    [[ "$keepd" == *" $digest "* ]] && continue
    nctr "$i" -n k8s.io images rm "$ref" >/dev/null && gone=$((gone + 1))
  done < <(tail -n +2 <<<"$listing")
  # CRI also names every image by its config digest (sha256:<image id>); once an image has no other name left, that
  # name alone kept its content and snapshots (23 GB per node after a few weeks of builds): it goes too
  local named=" " cfg
  listing="$(nctr "$i" -n k8s.io images ls)"
  while read -r ref _ digest _; do
    [[ "$ref" == sha256:* ]] && continue
    cfg="$(nctr "$i" -n k8s.io content get "$digest" 2>/dev/null | grep -o '"config":{[^}]*}' | grep -o 'sha256:[0-9a-f]*' | head -1)"
    named+="$cfg "
  done < <(tail -n +2 <<<"$listing")
  while read -r ref _; do
    [[ "$ref" == sha256:* ]] || continue
    [[ "$named" == *" $ref "* ]] && continue
    nctr "$i" -n k8s.io images rm "$ref" >/dev/null && gone=$((gone + 1))
  done < <(tail -n +2 <<<"$listing")
  [ "$gone" = 0 ] || log "$(node_name "$i"): removed $gone image name(s) of earlier builds"
}

cmd_load_images() {
  need_root
  local n i
  n="$(nodes_up)"
  [ "$n" -gt 0 ] || die "the cluster is not up (bash tools/cluster.sh up)"
  for i in $(seq "$n"); do running "$(node_name "$i")-containerd" || die "$(node_name "$i"): containerd is not running"; done
  command -v node >/dev/null || die "node is missing (source tools/node-env.sh)"
  [ -f "$root/tools/testenv/dist/gen-deploy.js" ] || die "tools/testenv is not built (npx nx run @kubevirt-ts/testenv:build): load-images writes the pinned deploy/ with it"
  # the nodes in parallel (each its own containerd)
  local pids=()
  for i in $(seq "$n"); do load_images_node "$i" & pids+=($!); done
  for p in "${pids[@]}"; do wait "$p" || die "load-images failed"; done
  # deploy/ with the apps' images pinned by the digests just imported (the committed deploy/ names tags)
  node "$root/tools/gen-deploy.mjs" --pin "$IMAGES_DIR/images.json" --out "$STATE_DIR/deploy"
}

# kubectl apply of the pinned deploy/ that load-images wrote
cmd_deploy() {
  need_root
  [ -d "$STATE_DIR/deploy" ] || die "$STATE_DIR/deploy missing: bash tools/cluster.sh load-images first"
  KUBE_DIR="$(kube_dir)"
  kc apply -f "$STATE_DIR/deploy"
}

# the node indexes that exist in any form: recorded at up, or left as a netns or a pid file
known_nodes() {
  local n i max
  max="$(nodes_up)"
  for i in $(ip netns list 2>/dev/null | sed -n -E "s/^${NS_PREFIX}node([0-9]+)( .*)?$/\1/p"); do [ "$i" -gt "$max" ] && max="$i"; done
  for f in "$RUN_DIR"/"$NODE_NAME_PREFIX"*-init.pid; do
    [ -f "$f" ] || continue
    n="$(basename "$f")"; n="${n#"$NODE_NAME_PREFIX"}"; n="${n%-init.pid}"
    [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -gt "$max" ] && max="$n"
  done
  [ "$max" -gt 0 ] && seq "$max"
  return 0
}

leftovers() { # prints what the cluster could leave behind; empty when clean
  local i
  # the cluster's processes: every component and every node init names $STATE_DIR on its command line (a node's
  # other processes, Pods included, live in the node's PID namespace and die with its init); the nodes' shims name
  # their containerd's socket
  pgrep -a -f "$STATE_DIR" 2>/dev/null | grep -v "cluster.sh" | sed 's/^/process: /' || true
  pgrep -a -f "containerd-shim-runc-v2 .*-address /run/kubevirt-ts-containerd-$NODE_NAME_PREFIX" 2>/dev/null | sed 's/^/process: /' || true
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^($FABRIC_NS|$CP_NS|${NS_PREFIX}node[0-9]+)$" | sed 's/^/netns: /' || true
  ip link show "$HOST_VETH" >/dev/null 2>&1 && echo "network device: $HOST_VETH"
  ip route show | grep -E "^($POD_NET\.|$SERVICE_NET\.|$FABRIC_NET\.)" | sed 's/^/route: /' || true
  # root namespace mounts: the netns files, anything under the state dir (the nodes' mounts live in their own
  # mount namespaces and go with them)
  awk -v a="$STATE_DIR" -v b="/run/netns/$NS_PREFIX" 'index($2,a)==1||index($2,b)==1 {print "mount: " $2}' /proc/self/mounts
  ls -d /sys/fs/cgroup/*/"${NS_PREFIX}"node* 2>/dev/null | sed 's/^/cgroup: /' || true
  # loop devices on the block volumes' files (a deleted file stays attached until detached), and kubelet's over them
  # (named by the node's path of the mapped volume, under the PersistentVolume's name)
  losetup -n -l -O NAME,BACK-FILE 2>/dev/null |
    awk -v a="$STATE_DIR/" -v k="/kubernetes.io~local-volume/volumeDevices/$NODE_NAME_PREFIX" \
      'index($2,a)==1 || index($2,k) > 0 {print "loop device: " $0}' || true
}

cmd_down() {
  need_root
  KUBE_DIR="$(kube_dir)"
  local nodes i name init
  nodes="$(known_nodes)"
  # nothing may recreate Pods while they go
  stop kube-controller-manager
  stop kube-scheduler
  # Pods first, while the kubelets still run, so CNI DEL removes their veths and kubelet unmounts their volumes
  if running kube-apiserver && [ -n "$nodes" ]; then
    log "deleting all Pods"
    # KVTS_DOWN_GRACE=S: every Pod gets at most S seconds (default: each Pod's own grace period)
    local grace=()
    [ -z "${KVTS_DOWN_GRACE:-}" ] || grace=(--grace-period "$KVTS_DOWN_GRACE")
    kc delete pods --all --all-namespaces --wait=false "${grace[@]}" >/dev/null 2>&1 || true
    # a node whose kubelet is gone (kill-node) never confirms its Pods' deletion: those go at once (the node's
    # processes die with its init below)
    for i in $nodes; do
      running "$(node_name "$i")-kubelet" ||
        kc delete pods --all-namespaces --field-selector "spec.nodeName=$(node_name "$i")" --force --grace-period=0 >/dev/null 2>&1 || true
    done
    for _ in $(seq 300); do
      [ -z "$(kc get pods -A --no-headers 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  for i in $nodes; do
    name="$(node_name "$i")"
    stop "$name-kube-proxy" &
    stop "$name-kubelet" &
  done
  wait
  for i in $nodes; do
    name="$(node_name "$i")"
    if running "$name-containerd"; then
      # whatever containers remain (a Pod kubelet did not finish)
      local ids
      ids="$(nctr "$i" -n k8s.io tasks ls -q 2>/dev/null || true)"
      for id in $ids; do nctr "$i" -n k8s.io tasks kill -s KILL "$id" >/dev/null 2>&1 || true; done
    fi
    stop "$name-containerd" &
  done
  wait
  # the nodes' PID 1: SIGKILL ends every process left in the node's PID namespace (shims, containers); its mount
  # namespace and every mount in it (tmpfs /run, Pod volumes, overlays, CNI's netns files) go with the last one
  for i in $nodes; do
    name="$(node_name "$i")"
    init="$(node_init_pid "$i" || true)"
    if [ -n "$init" ] && kill -0 "$init" 2>/dev/null; then
      kill -KILL "$init"
      for _ in $(seq 100); do kill -0 "$init" 2>/dev/null || break; sleep 0.1; done
      log "$name: init $init killed"
    fi
    rm -f "$(pidfile "$name-init")" "$(node_dir "$i")/ready"
  done
  # the block volumes' loop devices (their PersistentVolumes go with etcd's data)
  block_detach_all
  stop kube-apiserver
  stop etcd
  # the cluster's objects do not outlive it: the next `up` starts from an empty etcd (certificates, kubeconfigs,
  # configs and the nodes' image stores stay)
  rm -rf "${STATE_DIR:?}/etcd"
  # network: deleting a namespace destroys its devices, addresses, routes and iptables rules; the root namespace's
  # veth goes with its peer in the fabric, and the routes with it
  for i in $nodes; do ip netns del "$(node_ns "$i")" 2>/dev/null || true; done
  ip netns del "$CP_NS" 2>/dev/null || true
  ip netns del "$FABRIC_NS" 2>/dev/null || true
  ip link del "$HOST_VETH" 2>/dev/null || true
  # cgroups: empty once the node's processes are gone (a dying process may hold one a moment)
  for _ in $(seq 50); do
    local left=0 d
    for d in $(ls -d /sys/fs/cgroup/*/"${NS_PREFIX}"node* 2>/dev/null); do
      find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null || true
      [ -d "$d" ] && left=1
    done
    [ "$left" = 0 ] && break
    sleep 0.1
  done
  rm -f "$RUN_DIR/nodes"
  local left
  left="$(leftovers)"
  if [ -n "$left" ]; then
    printf '%s\n' "$left" >&2
    die "down: the above is left behind"
  fi
  log "down: no process, network namespace, device, route, mount or cgroup of the cluster left (checked)"
}

cmd_status() {
  local c i n
  n="$(nodes_up)"
  show() { # show PIDNAME LOGNAME
    if running "$1"; then printf '%-32s running (pid %s)  log %s\n' "$1" "$(cat "$(pidfile "$1")")" "$LOG_DIR/$1.log"
    else printf '%-32s stopped              log %s\n' "$1" "$LOG_DIR/$1.log"; fi
  }
  for c in etcd kube-apiserver kube-controller-manager kube-scheduler; do show "$c"; done
  for i in $(seq "$n"); do
    for c in init containerd kubelet kube-proxy; do show "$(node_name "$i")-$c"; done
  done
  printf 'audit log                        %s\nkubeconfig                       %s\n' "$LOG_DIR/audit.log" "$ADMIN_KUBECONFIG"
  if running kube-apiserver; then
    KUBE_DIR="$(bash "$root/tools/testenv/build-kube-apiserver.sh" kube-apiserver kubectl)"
    kc get nodes -o wide 2>&1 || true
    # the cluster DNS (README "Cluster DNS")
    kc -n kube-system get deployment/coredns service/kube-dns -o wide 2>&1 || true
  fi
  block_list
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  load-images) cmd_load_images ;;
  deploy) cmd_deploy ;;
  env) echo "export KUBECONFIG=$ADMIN_KUBECONFIG" ;;
  node-pid)
    for i in $(seq "$(nodes_up)"); do [ "$(node_name "$i")" = "${2:-}" ] && { node_init_pid "$i"; exit 0; }; done
    die "node-pid: no node '${2:-}' is up"
    ;;
  kill-node)
    # a power cut: SIGKILL of the node's init ends every process of the node at once (kubelet, containerd, shims,
    # Pods); its network namespace (devices, addresses, rules) stays; `up --nodes N` again starts it anew
    for i in $(seq "$(nodes_up)"); do
      [ "$(node_name "$i")" = "${2:-}" ] || continue
      init="$(node_init_pid "$i")"
      kill -KILL "$init" 2>/dev/null || die "kill-node: ${2:-}'s init is not running"
      for _ in $(seq 100); do kill -0 "$init" 2>/dev/null || break; sleep 0.1; done
      log "${2:-}: init $init and every process of the node killed"
      exit 0
    done
    die "kill-node: no node '${2:-}' is up"
    ;;
  block-volumes)
    # the loop devices and PersistentVolumes `up` makes, made again when missing; Released ones wiped and
    # Available again (a test that deleted its claim calls this); then the list
    need_root
    [ "$(nodes_up)" -gt 0 ] || die "the cluster is not up (bash tools/cluster.sh up)"
    KUBE_DIR="$(kube_dir)"
    block_volumes "$(nodes_up)"
    block_list
    ;;
  leftovers) leftovers ;;
  *) echo "usage: tools/cluster.sh up [--nodes N]|down|status|load-images|deploy|env|node-pid NODE|kill-node NODE|block-volumes|leftovers" >&2; exit 2 ;;
esac
