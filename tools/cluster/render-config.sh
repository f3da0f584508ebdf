#!/usr/bin/env bash
# Configuration files into $STATE_DIR: the audit policy, and per node i (1..$NODES) in nodes/<node>/: containerd,
# CNI (the node's Pod CIDR), kubelet, kube-proxy. Paths in a node's files are as the node's mount namespace sees them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/config.sh"

# put FILE: stdin into FILE, written only when it differs (kube-proxy exits when its config file is written to,
# even with the same content: a second `up` must not touch the file of a running kube-proxy)
put() {
  local t
  t="$(mktemp "$1.XXXXXX")"
  cat >"$t"
  if cmp -s "$t" "$1"; then rm -f "$t"; else mv -f "$t" "$1"; fi
}

render_node() {
  local i="$1" name dir ip cidr state sock
  name="$(node_name "$i")"
  dir="$(node_dir "$i")"
  ip="$(node_ip "$i")"
  cidr="$(node_pod_cidr "$i")"
  state="$(node_containerd_state "$i")"
  sock="$(node_containerd_sock "$i")"
  mkdir -p "$dir/cni/net.d"
  put "$dir/containerd.toml" <<CONF
version = 2
root = "$(node_containerd_root "$i")"
state = "$state"
[grpc]
  address = "$sock"
[ttrpc]
  address = "$state/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # no CAP_SYS_RESOURCE here: runc cannot give the pause container its negative oom_score_adj
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$CNI_BIN_DIR"
    conf_dir = "$dir/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = ""
CONF
  # no ipMasq: Pods reach the other node's Pods, the API server and the root namespace's client address by routes
  # (nothing beyond the fabric is reachable), so their source addresses stay visible, as in kind; kube-proxy
  # masquerades what it must (Service traffic from outside $CLUSTER_CIDR, hairpin)
  put "$dir/cni/net.d/10-kvts.conflist" <<CONF
{
  "cniVersion": "0.4.0",
  "name": "kvts",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$CNI_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "$cidr" }]], "routes": [{ "dst": "0.0.0.0/0" }] }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
CONF
  put "$dir/kubelet.yaml" <<CONF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $ip
port: 10250
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
rootDir: $KUBELET_DIR
containerRuntimeEndpoint: unix://$sock
cgroupDriver: cgroupfs
# the node's own hierarchy in every v1 controller: two kubelets must not manage the same kubepods
cgroupRoot: $(node_cgroup "$i")
failSwapOn: false
tlsCertFile: $STATE_DIR/pki/kubelet-serving-$name.crt
tlsPrivateKeyFile: $STATE_DIR/pki/kubelet-serving-$name.key
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: true }
  x509: { clientCAFile: $STATE_DIR/pki/ca.crt }
authorization:
  mode: Webhook
podCIDR: $cidr
# Pods with dnsPolicy ClusterFirst (the default) get the cluster DNS (CoreDNS, README "Cluster DNS") and the search
# path <ns>.svc.$CLUSTER_DOMAIN svc.$CLUSTER_DOMAIN $CLUSTER_DOMAIN; dnsPolicy Default Pods get the node's resolv.conf
clusterDNS: [$DNS_SERVICE_IP]
clusterDomain: $CLUSTER_DOMAIN
resolvConf: /etc/resolv.conf
serializeImagePulls: false
# this machine is shared: never evict for disk or memory pressure, never garbage-collect the loaded images
evictionHard: { memory.available: "0%", nodefs.available: "0%", imagefs.available: "0%" }
imageGCHighThresholdPercent: 100
protectKernelDefaults: false
makeIPTablesUtilChains: false
CONF
  put "$dir/kube-proxy.yaml" <<CONF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $STATE_DIR/kube-proxy.kubeconfig
hostnameOverride: $name
mode: iptables
# the whole Pod range: Service traffic from outside it (the root namespace, another node's host network) is
# masqueraded, so replies return through the node that did the DNAT
clusterCIDR: $CLUSTER_CIDR
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["$ip/32"]
conntrack:
  # no sysctl writes for conntrack (this machine's /proc/sys/net/netfilter is not ours to tune)
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
CONF
}

for i in $(seq "${NODES:-1}"); do render_node "$i"; done
put "$STATE_DIR/audit-policy.yaml" <<CONF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  # writes only: what bench:cluster counts (API writes per VMI)
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
  - level: None
CONF
