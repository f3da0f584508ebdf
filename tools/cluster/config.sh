# Settings of the single-node cluster (sourced by tools/cluster/*.sh). Every address is node-local: loopback,
# or NODE_IP on a port-less bridge device only this machine routes (no dummy driver here) (kubelet refuses a loopback node IP and the
# apiserver's endpoints may not be loopback either).
cache="${KVTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubevirt-ts}"
IMAGES_DIR="${KVTS_IMAGES_DIR:-$cache/images}"
STATE_DIR="${KVTS_CLUSTER_DIR:-/var/lib/kubevirt-ts-cluster}" # certificates, kubeconfigs, configs, etcd data
RUN_DIR="/run/kubevirt-ts-cluster"                             # pid files
LOG_DIR="${KVTS_CLUSTER_LOGS:-/var/log/kubevirt-ts-cluster}"    # one <component>.log each, audit.log
ADMIN_KUBECONFIG="$STATE_DIR/admin.kubeconfig"
NODE_NAME="kvts-node"
NODE_DEV="kvts-node0"
NODE_IP="10.87.0.1"
POD_CIDR="10.244.0.0/24"
SERVICE_CIDR="10.96.0.0/24"
KUBERNETES_SERVICE_IP="10.96.0.1"
CNI_BRIDGE="kvts-cni0"
CNI_BIN_DIR="/usr/lib/cni"
APISERVER_PORT=6443
ETCD_PORT=12379
ETCD_PEER_PORT=12380
KUBELET_DIR="/var/lib/kubelet"
CONTAINERD_ROOT="/var/lib/kubevirt-ts-containerd"
CONTAINERD_STATE="/run/kubevirt-ts-containerd"
CONTAINERD_SOCK="$CONTAINERD_STATE/containerd.sock"
PAUSE_IMAGE="localhost/kubevirt-ts/pause:3.10"
DEPLOY_REGISTRY="ghcr.io/kubevirt-ts"                  # the registry deploy/*.yaml names (tools/gen-deploy.mjs)
