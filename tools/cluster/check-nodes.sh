#!/usr/bin/env bash
# Checks a cluster that is up with several nodes (tools/cluster.sh up --nodes N, N >= 2), from the root namespace:
# a Pod pinned to each node (busybox httpd of the local-path-helper image, imported into each node's containerd; no
# pull) gets an address of its node's Pod CIDR; the root namespace reaches each Pod and a Service over both; Pods
# reach each other across nodes, with their own source address (no masquerade), and the Service; a Pod reaches the
# API server through the kubernetes Service; a hostPID + hostNetwork Pod sees its node's init as PID 1, the node's
# hostname and devices, and the node's kubelet dir in /proc/1's mount namespace; the root namespace sees a Pod's dir
# through /proc/<node init>/root. Deletes what it made. Exit status 0 only when every check passed.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
source "$here/config.sh"
n="$(nodes_up)"
[ "$n" -ge 2 ] || { echo "check-nodes: needs a cluster of 2+ nodes up (bash tools/cluster.sh up --nodes 2)" >&2; exit 2; }
KUBE_DIR="$(bash "$root/tools/testenv/build-kube-apiserver.sh" kube-apiserver kubectl)"
kc() { "$KUBE_DIR/kubectl" --kubeconfig "$ADMIN_KUBECONFIG" "$@"; }
fails=0
ok() { printf 'ok    %s\n' "$*"; }
bad() { printf 'FAIL  %s\n' "$*"; fails=$((fails + 1)); }
expect() { # expect WHAT WANT GOT
  if [ "$3" = "$2" ]; then ok "$1: $3"; else bad "$1: want '$2', got '$3'"; fi
}
ns=kvts-check-nodes
image="$(node -e 'const i=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8")).images["local-path-helper"]; process.stdout.write(i ? i.image : "")' "$IMAGES_DIR/images.json")"
[ -n "$image" ] || { echo "check-nodes: no local-path-helper image in $IMAGES_DIR/images.json (bash tools/images/build.sh local-path-helper)" >&2; exit 2; }
for i in $(seq "$n"); do
  pid="$(cat "$RUN_DIR/$(node_name "$i")-init.pid")"
  nsenter -t "$pid" -m -n ctr --address "$(node_containerd_sock "$i")" -n k8s.io images import "$IMAGES_DIR/local-path-helper.tar" >/dev/null
done
cleanup() { kc delete namespace "$ns" --wait=false >/dev/null 2>&1 || true; }
trap cleanup EXIT
# a namespace of an earlier run may still be going
for _ in $(seq 150); do kc get namespace "$ns" >/dev/null 2>&1 || break; sleep 0.2; done
kc create namespace "$ns" >/dev/null
for _ in $(seq 50); do kc -n "$ns" get serviceaccount default >/dev/null 2>&1 && break; sleep 0.2; done
{
  for i in $(seq "$n"); do
    cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: echo$i, namespace: $ns, labels: {app: echo}}
spec:
  nodeName: $(node_name "$i")
  terminationGracePeriodSeconds: 1
  containers:
  - name: echo
    image: $image
    imagePullPolicy: Never
    # GET / answers with the node's name, GET /cgi-bin/peer with the client's address (busybox httpd's CGI)
    command:
    - sh
    - -c
    - |
      mkdir -p /w/cgi-bin && echo \$NODE > /w/index.html
      printf '#!/bin/sh\\necho Content-Type: text/plain\\necho\\necho \$REMOTE_ADDR\\n' > /w/cgi-bin/peer
      chmod +x /w/cgi-bin/peer
      exec httpd -f -p 8080 -h /w
    env: [{name: NODE, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]
---
YAML
  done
  cat <<YAML
apiVersion: v1
kind: Service
metadata: {name: echo, namespace: $ns}
spec:
  selector: {app: echo}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: hostview, namespace: $ns}
spec:
  nodeName: $(node_name 2)
  terminationGracePeriodSeconds: 1
  hostPID: true
  hostNetwork: true
  containers:
  - name: c
    image: $image
    imagePullPolicy: Never
    securityContext: {privileged: true}
    command: ["sleep", "3600"]
YAML
} | kc apply -f - >/dev/null
kc -n "$ns" wait --for=condition=Ready pod --all --timeout=90s >/dev/null
http() { # http FROM-POD|root ADDR PORT [PATH]: the body of GET PATH (/)
  if [ "$1" = root ]; then curl -sS -m 5 "http://$2:$3${4:-/}" 2>&1 || true
  else kc -n "$ns" exec "$1" -- sh -c "printf 'GET ${4:-/} HTTP/1.0\r\n\r\n' | nc -w 5 $2 $3 | tail -1" 2>&1 || true; fi
}
declare -A ip
for i in $(seq "$n"); do
  ip[$i]="$(kc -n "$ns" get pod "echo$i" -o jsonpath='{.status.podIP}')"
  cidr="$(node_pod_cidr "$i")"
  if [[ "${ip[$i]}" == "${cidr%.0/24}".* ]]; then ok "echo$i on $(node_name "$i") has ${ip[$i]} in $cidr"; else bad "echo$i: ${ip[$i]} not in $cidr"; fi
  expect "root -> echo$i" "$(node_name "$i")" "$(http root "${ip[$i]}" 8080)"
done
svc="$(kc -n "$ns" get svc echo -o jsonpath='{.spec.clusterIP}')"
# spread: requests until every node's Pod answered (at most 40; each goes to a random endpoint, and a node's
# kube-proxy may take a moment to program an endpoint that just became ready)
spread() { # spread FROM-POD|root: the sorted answers
  local got="" all k
  all="$(for k in $(seq "$n"); do printf '%s ' "$(node_name "$k")"; done)"
  for _ in $(seq 40); do
    got="$( (printf '%s\n' $got; http "$1" "$svc" 80) | sort -u | tr '\n' ' ')"
    [ "$got" = "$all" ] && break
  done
  echo "$got"
}
seen="$(spread root)"
expect "root -> Service $svc reached" "$(for i in $(seq "$n"); do printf '%s ' "$(node_name "$i")"; done)" "$seen"
for i in $(seq "$n"); do
  for j in $(seq "$n"); do
    [ "$i" = "$j" ] && continue
    expect "echo$i -> echo$j" "$(node_name "$j")" "$(http "echo$i" "${ip[$j]}" 8080)"
    got="$(http "echo$i" "${ip[$j]}" 8080 /cgi-bin/peer | sed -E 's/^\[::ffff:(.*)\]$/\1/')"
    expect "echo$j sees echo$i's own address (no masquerade)" "${ip[$i]}" "$got"
  done
  seen="$(spread "echo$i")"
  expect "echo$i -> Service reached" "$(for k in $(seq "$n"); do printf '%s ' "$(node_name "$k")"; done)" "$seen"
done
# a host-network process of a node (virt-handler) reaches ClusterIPs (kube-proxy's OUTPUT DNAT needs a route first)
expect "hostNetwork Pod on $(node_name 2) -> Service reached" "$(for k in $(seq "$n"); do printf '%s ' "$(node_name "$k")"; done)" "$(spread hostview)"
got="$(kc -n "$ns" exec echo1 -- sh -c "printf 'GET /healthz HTTP/1.0\r\n\r\n' | nc -w 5 $KUBERNETES_SERVICE_IP 443 | head -1" 2>&1 | tr -d '\r' || true)"
expect "echo1 -> kubernetes Service ($KUBERNETES_SERVICE_IP:443, plain HTTP to TLS)" "HTTP/1.0 400 Bad Request" "$got"
got="$(kc -n "$ns" exec hostview -- sh -c 'tr "\0" " " </proc/1/cmdline' 2>&1 || true)"
if [[ "$got" == *node-init.sh*"$(node_name 2)"* ]]; then ok "hostPID Pod on $(node_name 2): PID 1 is the node's init"; else bad "hostPID Pod: PID 1 is '$got'"; fi
expect "hostNetwork Pod: hostname" "$(node_name 2)" "$(kc -n "$ns" exec hostview -- hostname 2>&1 || true)"
expect "hostNetwork Pod: eth0 address" "$(node_ip 2)" "$(kc -n "$ns" exec hostview -- sh -c "ip -4 addr show dev eth0 | sed -n 's/.*inet \([0-9.]*\).*/\1/p'" 2>&1 || true)"
uid="$(kc -n "$ns" get pod hostview -o jsonpath='{.metadata.uid}')"
got="$(kc -n "$ns" exec hostview -- nsenter -t 1 -m ls /var/lib/kubelet/pods 2>&1 || true)"
if grep -qx "$uid" <<<"$got"; then ok "hostPID Pod in /proc/1/ns/mnt: its own dir in the node's /var/lib/kubelet/pods"; else bad "hostPID Pod: /var/lib/kubelet/pods of PID 1 lacks $uid: $got"; fi
uid1="$(kc -n "$ns" get pod echo1 -o jsonpath='{.metadata.uid}')"
pid1="$(cat "$RUN_DIR/$(node_name 1)-init.pid")"
if [ -d "/proc/$pid1/root/var/lib/kubelet/pods/$uid1" ] && [ ! -d "/proc/$pid1/root/var/lib/kubelet/pods/$uid" ]; then ok "root namespace: /proc/$pid1/root/var/lib/kubelet/pods has echo1's dir (not hostview's, on node 2)"; else bad "root namespace: /proc/$pid1/root/var/lib/kubelet/pods"; fi
if grep -q " /var/lib/kubelet/pods/$uid1/volumes/" "/proc/$pid1/mountinfo"; then ok "root namespace: /proc/$pid1/mountinfo lists echo1's volume mounts"; else bad "root namespace: no echo1 volume in /proc/$pid1/mountinfo"; fi
if grep -q "/var/lib/kubelet/pods/$uid1/" /proc/self/mountinfo; then bad "root namespace sees echo1's volume mounts"; else ok "root namespace does not see echo1's volume mounts"; fi
cg="$(node_cgroup 1)"
if [ -n "$(ls -d /sys/fs/cgroup/memory"$cg"/kubepods/*/pod"$uid1" /sys/fs/cgroup/memory"$cg"/kubepods/pod"$uid1" 2>/dev/null)" ]; then ok "echo1's cgroup under $cg/kubepods"; else bad "echo1's cgroup not under /sys/fs/cgroup/memory$cg/kubepods"; fi
echo "check-nodes: $fails failure(s)"
[ "$fails" = 0 ]
