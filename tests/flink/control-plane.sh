#!/usr/bin/env bash
# A throwaway loopback control plane (etcd + kube-apiserver, optionally kube-scheduler and kwok)
# for running run-jobmanager.sh by hand (the tests use their own fixture). Usage:
#   control-plane.sh start   # prints the kubeconfig path; state in $CP_DIR (default /tmp/flink-cp)
#   control-plane.sh stop    # kills only the processes this script started (pids in $CP_DIR)
# Binaries: $KUBE_ASSETS or tests/kube/bin (built by tests/kube/build.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bin="${KUBE_ASSETS:-$here/../kube/bin}"
dir="${CP_DIR:-/tmp/flink-cp}"
ns="${FLINK_NAMESPACE:-flink}"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

stop() {
  for p in kwok scheduler apiserver etcd; do
    if [ -f "$dir/$p.pid" ]; then
      pid="$(cat "$dir/$p.pid")"
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$dir/$p.pid"
    fi
  done
}

start() {
  stop
  rm -rf "$dir"; mkdir -p "$dir"
  etcd_port=$(free_port); peer_port=$(free_port); api_port=$(free_port)
  openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null
  openssl rsa -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null
  token="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  echo "$token,admin,admin,system:masters" > "$dir/tokens.csv"

  "$bin/etcd" --data-dir="$dir/etcd" \
    --listen-client-urls=http://127.0.0.1:$etcd_port --advertise-client-urls=http://127.0.0.1:$etcd_port \
    --listen-peer-urls=http://127.0.0.1:$peer_port --initial-advertise-peer-urls=http://127.0.0.1:$peer_port \
    --initial-cluster=default=http://127.0.0.1:$peer_port --unsafe-no-fsync --log-level=warn \
    > "$dir/etcd.log" 2>&1 &
  echo $! > "$dir/etcd.pid"

  "$bin/kube-apiserver" --etcd-servers=http://127.0.0.1:$etcd_port --secure-port=$api_port \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --endpoint-reconciler-type=none \
    --authorization-mode=RBAC --token-auth-file="$dir/tokens.csv" --cert-dir="$dir/certs" \
    --service-cluster-ip-range=10.0.0.0/24 \
    --service-account-issuer=https://kubernetes.default.svc \
    --service-account-key-file="$dir/sa.pub" --service-account-signing-key-file="$dir/sa.key" \
    --disable-admission-plugins=ServiceAccount,TaintNodesByCondition --v=1 \
    > "$dir/apiserver.log" 2>&1 &
  echo $! > "$dir/apiserver.pid"

  cat > "$dir/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: https://127.0.0.1:$api_port
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: $token
contexts:
- name: test
  context: {cluster: test, user: admin, namespace: $ns}
current-context: test
KC
  k() { "$bin/kubectl" --kubeconfig="$dir/kubeconfig" "$@"; }
  for i in $(seq 120); do
    k get --raw /readyz >/dev/null 2>&1 && break
    sleep 0.5
    [ "$i" = 120 ] && { tail -30 "$dir/apiserver.log"; exit 1; }
  done
  k create namespace "$ns" >/dev/null
  # Nodes only so that a scheduler (if started) has somewhere to put pods; no kubelet runs.
  for n in 1 2 3; do
    k apply -f - >/dev/null <<NODE
apiVersion: v1
kind: Node
metadata: {name: node-$n, labels: {kubernetes.io/hostname: node-$n}}
status:
  capacity: {cpu: "64", memory: 256Gi, pods: "110"}
  allocatable: {cpu: "64", memory: 256Gi, pods: "110"}
NODE
  done
  if [ "${WITH_SCHEDULER:-0}" = 1 ]; then
    "$bin/kube-scheduler" --kubeconfig="$dir/kubeconfig" --secure-port=$(free_port) \
      --bind-address=127.0.0.1 --leader-elect=false > "$dir/scheduler.log" 2>&1 &
    echo $! > "$dir/scheduler.pid"
  fi
  if [ "${WITH_KWOK:-0}" = 1 ]; then
    # kwok: nodes Ready, scheduled pods Running with an IP, deleted pods removed (as a kubelet
    # would), using the tests' stages. Its default pod CIDR is 10.0.0.1/24.
    "$bin/kwok" --kubeconfig="$dir/kubeconfig" --manage-all-nodes=true \
      --node-lease-duration-seconds=40 --server-address=127.0.0.1:$(free_port) \
      --config="$here/../kube/kwok/stages.yaml" > "$dir/kwok.log" 2>&1 &
    echo $! > "$dir/kwok.pid"
  fi
  echo "$dir/kubeconfig"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
