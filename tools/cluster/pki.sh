#!/usr/bin/env bash
# Certificates and kubeconfigs of the cluster, made once with openssl into $STATE_DIR/pki (nodes 1..$NODES).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/config.sh"
pki="$STATE_DIR/pki"
mkdir -p "$pki"
chmod 0700 "$pki"
cd "$pki"
if [ ! -f ca.crt ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 -subj "/CN=kubevirt-ts-cluster-ca" 2>/dev/null
fi
if [ ! -f sa.key ]; then
  openssl genrsa -out sa.key 2048 2>/dev/null
  openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
fi
# cert NAME SUBJECT [SANs] [usage]: made once; made again when its subject, names or usage changed (e.g. the
# addresses of an older layout: the single-node cluster served at 10.87.0.1), as NAME.want records them
cert() {
  local name="$1" subj="$2" san="${3:-}" usage="${4:-clientAuth}"
  local want="$subj|$san|$usage"
  [ -f "$name.crt" ] && [ "$(cat "$name.want" 2>/dev/null)" = "$want" ] && return 0
  openssl req -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" -subj "$subj" 2>/dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$usage"
    [ -n "$san" ] && echo "subjectAltName=$san"
  } >"$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$name.crt" -days 3650 -extfile "$name.ext" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
  echo "$want" >"$name.want"
}
cert apiserver "/CN=kube-apiserver" \
  "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1,IP:$CP_IP,IP:$KUBERNETES_SERVICE_IP" serverAuth
cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
cert admin "/O=system:masters/CN=kubernetes-admin"
cert controller-manager "/CN=system:kube-controller-manager"
cert scheduler "/CN=system:kube-scheduler"
cert kube-proxy "/CN=system:kube-proxy"
for i in $(seq "${NODES:-1}"); do
  n="$(node_name "$i")"
  cert "kubelet-$n" "/O=system:nodes/CN=system:node:$n"
  cert "kubelet-serving-$n" "/CN=$n" "DNS:$n,IP:$(node_ip "$i"),IP:127.0.0.1" serverAuth
done

# the aggregation layer's front proxy: a CA of its own (only it may vouch for X-Remote-User), and the client
# certificate kube-apiserver presents to aggregated API servers (subresources.kubevirt.io)
if [ ! -f front-proxy-ca.crt ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -keyout front-proxy-ca.key -out front-proxy-ca.crt -days 3650 \
    -subj "/CN=kubevirt-ts-cluster-front-proxy-ca" 2>/dev/null
fi
if [ ! -f front-proxy-client.crt ]; then
  openssl req -newkey rsa:2048 -nodes -keyout front-proxy-client.key -out front-proxy-client.csr \
    -subj "/CN=front-proxy-client" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' >front-proxy-client.ext
  openssl x509 -req -in front-proxy-client.csr -CA front-proxy-ca.crt -CAkey front-proxy-ca.key -CAcreateserial \
    -out front-proxy-client.crt -days 3650 -extfile front-proxy-client.ext 2>/dev/null
  rm -f front-proxy-client.csr front-proxy-client.ext
fi

kubeconfig() { # NAME CERT: written when missing or different (the API server's address is in it)
  local f="$STATE_DIR/$1.kubeconfig" new
  new="$(
    cat <<KC
apiVersion: v1
kind: Config
clusters:
- name: kvts
  cluster:
    server: https://$CP_IP:$APISERVER_PORT
    certificate-authority: $pki/ca.crt
users:
- name: $1
  user:
    client-certificate: $pki/$2.crt
    client-key: $pki/$2.key
contexts:
- name: kvts
  context: {cluster: kvts, user: $1}
current-context: kvts
KC
  )"
  [ -f "$f" ] && [ "$(cat "$f")" = "$new" ] && return 0
  (umask 077 && echo "$new" >"$f")
}
kubeconfig admin admin
kubeconfig controller-manager controller-manager
kubeconfig scheduler scheduler
kubeconfig kube-proxy kube-proxy
for i in $(seq "${NODES:-1}"); do kubeconfig "kubelet-$(node_name "$i")" "kubelet-$(node_name "$i")"; done
