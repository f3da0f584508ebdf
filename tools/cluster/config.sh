# Settings of the cluster (sourced by tools/cluster/*.sh). Every cluster address lives inside network namespaces
# cluster.sh creates (README "Layout"): a fabric namespace with a bridge, a control-plane namespace, one namespace
# per node; the root namespace only has one veth into the fabric with a client address and routes to the Pod and
# Service CIDRs. Every name and range here can be overridden from the environment, so that a second cluster (a
# development copy) can run beside one that is up without any collision.
cache="${KVTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubevirt-ts}"
IMAGES_DIR="${KVTS_IMAGES_DIR:-$cache/images}"
STATE_DIR="${KVTS_CLUSTER_DIR:-/var/lib/kubevirt-ts-cluster}" # certificates, kubeconfigs, configs, etcd data, nodes/<node>/
RUN_DIR="${KVTS_CLUSTER_RUN:-/run/kubevirt-ts-cluster}"        # pid files, node facts
LOG_DIR="${KVTS_CLUSTER_LOGS:-/var/log/kubevirt-ts-cluster}"  # one <component>.log each (a node's: <node>-<component>.log), audit.log
ADMIN_KUBECONFIG="$STATE_DIR/admin.kubeconfig"

# network namespaces, the root namespace's veth into the fabric, the nodes' cgroup roots: all named with this prefix
NS_PREFIX="${KVTS_NS_PREFIX:-kvts-}"
FABRIC_NS="${NS_PREFIX}fabric"
CP_NS="${NS_PREFIX}cp"
HOST_VETH="${NS_PREFIX}fab0" # root namespace end (never "veth*": the single-node cluster's down deleted those)
FABRIC_BRIDGE="br0"          # inside $FABRIC_NS
# addresses: the fabric /24 holds the API server (.2), node i (.10+i) and the root namespace's client address (.254)
FABRIC_NET="${KVTS_FABRIC_NET:-10.87.0}"
CP_IP="$FABRIC_NET.2"
CLIENT_IP="$FABRIC_NET.254"
POD_NET="${KVTS_POD_NET:-10.244}" # node i gets $POD_NET.(i-1).0/24
CLUSTER_CIDR="$POD_NET.0.0/16"
SERVICE_NET="${KVTS_SERVICE_NET:-10.96.0}"
SERVICE_CIDR="$SERVICE_NET.0/24"
KUBERNETES_SERVICE_IP="$SERVICE_NET.1"
# the cluster DNS (CoreDNS, tools/cluster/coredns.yaml): the Service kube-system/kube-dns at the 10th address of the
# Service range (as kubeadm picks it), every kubelet's clusterDNS; Pods get <svc>.<ns>.svc.$CLUSTER_DOMAIN
DNS_SERVICE_IP="$SERVICE_NET.10"
CLUSTER_DOMAIN="cluster.local"
COREDNS_ARCHIVE="coredns.tar" # in $IMAGES_DIR (tools/images/build.sh coredns)
NODE_NAME_PREFIX="${KVTS_NODE_NAME_PREFIX:-kvts-node}" # node i is <prefix><i>, its netns $NS_PREFIX<node-suffix>

CNI_BRIDGE="kvts-cni0" # inside each node's netns
CNI_BIN_DIR="/usr/lib/cni"
APISERVER_PORT=6443
ETCD_PORT=12379
ETCD_PEER_PORT=12380
KUBELET_DIR="/var/lib/kubelet" # inside each node's mount namespace (a bind mount of nodes/<node>/kubelet)
PAUSE_IMAGE="localhost/kubevirt-ts/pause:3.10"
DEPLOY_REGISTRY="ghcr.io/kubevirt-ts" # the registry deploy/*.yaml names (tools/gen-deploy.mjs)

# node i (1-based)
node_name() { echo "$NODE_NAME_PREFIX$1"; }
node_ns() { echo "${NS_PREFIX}node$1"; }
node_ip() { echo "$FABRIC_NET.$((10 + $1))"; }
node_pod_cidr() { echo "$POD_NET.$(($1 - 1)).0/24"; }
node_dir() { echo "$STATE_DIR/nodes/$(node_name "$1")"; }
node_cgroup() { echo "/${NS_PREFIX}node$1"; } # kubelet's cgroupRoot, in every v1 hierarchy
# containerd's state dir and socket inside the node's own /run; named per node so that a root-namespace ps/pgrep tells
# the nodes' shims apart (their command lines name the socket)
node_containerd_state() { echo "/run/kubevirt-ts-containerd-$(node_name "$1")"; }
node_containerd_sock() { echo "$(node_containerd_state "$1")/containerd.sock"; }
node_containerd_root() { echo "$(node_dir "$1")/containerd"; }
# block volumes (README "Block volumes"): per node, BLOCK_PER_NODE sparse files of BLOCK_SIZE_MIB MiB in
# nodes/<node>/block/, each attached to a loop device and offered as a static `local` PersistentVolume
# (volumeMode Block, node affinity to its node) of StorageClass BLOCK_CLASS
BLOCK_PER_NODE="${KVTS_BLOCK_PER_NODE:-3}"
BLOCK_SIZE_MIB="${KVTS_BLOCK_SIZE_MIB:-128}"
BLOCK_CLASS="local-block"
node_block_file() { echo "$(node_dir "$1")/block/disk$2.img"; } # node i, volume j (1-based)
node_block_pv() { echo "$(node_name "$1")-block-$2"; }
# the node count of the cluster that is up (cluster.sh up --nodes N writes it)
nodes_up() { cat "$RUN_DIR/nodes" 2>/dev/null || echo 0; }
