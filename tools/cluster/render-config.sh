#!/usr/bin/env bash
# Configuration files of containerd, CNI, kubelet, kube-proxy and the audit policy, into $STATE_DIR.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/config.sh"
mkdir -p "$STATE_DIR/cni/net.d"
cat >"$STATE_DIR/containerd.toml" <<CONF
version = 2
root = "$CONTAINERD_ROOT"
state = "$CONTAINERD_STATE"
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_STATE/containerd.sock.ttrpc"
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
    conf_dir = "$STATE_DIR/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = ""
CONF
cat >"$STATE_DIR/cni/net.d/10-kvts.conflist" <<CONF
{
  "cniVersion": "0.4.0",
  "name": "kvts",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$CNI_BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "$POD_CIDR" }]], "routes": [{ "dst": "0.0.0.0/0" }] }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
CONF
cat >"$STATE_DIR/kubelet.yaml" <<CONF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
healthzBindAddress: 127.0.0.1
readOnlyPort: 0
rootDir: $KUBELET_DIR
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
cgroupDriver: cgroupfs
failSwapOn: false
tlsCertFile: $STATE_DIR/pki/kubelet-serving.crt
tlsPrivateKeyFile: $STATE_DIR/pki/kubelet-serving.key
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: true }
  x509: { clientCAFile: $STATE_DIR/pki/ca.crt }
authorization:
  mode: Webhook
podCIDR: $POD_CIDR
resolvConf: /etc/resolv.conf
serializeImagePulls: false
# this machine is shared: never evict for disk or memory pressure, never garbage-collect the loaded images
evictionHard: { memory.available: "0%", nodefs.available: "0%", imagefs.available: "0%" }
imageGCHighThresholdPercent: 100
protectKernelDefaults: false
makeIPTablesUtilChains: false
CONF
cat >"$STATE_DIR/kube-proxy.yaml" <<CONF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $STATE_DIR/kube-proxy.kubeconfig
mode: iptables
clusterCIDR: $POD_CIDR
bindAddress: 127.0.0.1
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["$NODE_IP/32"]
conntrack:
  # no sysctl writes for conntrack (this machine's /proc/sys/net/netfilter is not ours to tune)
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
CONF
cat >"$STATE_DIR/audit-policy.yaml" <<CONF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  # writes only: what bench:cluster counts (API writes per VMI)
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
  - level: None
CONF
