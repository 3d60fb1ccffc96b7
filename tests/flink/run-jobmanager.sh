#!/usr/bin/env bash
# Real Flink (native Kubernetes mode) against the test apiserver, with the JobManager as a local
# process in place of the pod its Deployment would start:
#   1. Flink's own client (KubernetesSessionCli, what kubernetes-session.sh runs) creates the
#      JobManager Deployment, the ConfigMaps flink-config-<id> / pod-template-<id> and the
#      Services <id> / <id>-rest.
#   2. The JobManager entrypoint (KubernetesSessionClusterEntrypoint) runs locally, with the
#      config.yaml and TaskManager pod template read back from those ConfigMaps (what the pod
#      would mount), in a private mount namespace where /opt/flink/pod-template exists (Flink reads
#      the template only from that fixed path).
#   3. SubmitJob submits a job over REST; Flink's resource manager creates TaskManager pods.
#
# Usage: run-jobmanager.sh [up|submit PARALLELISM|rescale UPPER|status|down]
#   up       control plane (unless KUBECONFIG is set) + deploy + local JobManager
#   submit   submit the job with that parallelism (one vertex; slots=1 -> one TM pod per subtask)
#   rescale  adaptive scheduler only: PUT /jobs/<id>/resource-requirements with upperBound UPPER
#   status   pods by name prefix, creation/deletion counts from the JobManager log
#   down     kill the JobManager (and the control plane if this script started it)
# Env: KUBECONFIG (an existing cluster; unset: start one with control-plane.sh),
#      SCHEDULER=default|adaptive (default: default), REG_TIMEOUT (default "30 s"),
#      CLUSTER_ID (steer), FLINK_NAMESPACE (flink), RUN_DIR (/tmp/flink-run),
#      KUBE_ASSETS (tests/kube/bin); without KUBECONFIG also WITH_SCHEDULER=1, WITH_KWOK=1.
# Every java process it leaves running is the JobManager, in a process group of its own that
# `down` kills.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
run="${RUN_DIR:-/tmp/flink-run}"
id="${CLUSTER_ID:-steer}"
ns="${FLINK_NAMESPACE:-flink}"
kubectl="${KUBE_ASSETS:-$here/../kube/bin}/kubectl"
# Flink's blob store, web uploads and the clients' scratch files stay in the run directory.
java_tmp="-Djava.io.tmpdir=$run/tmp"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
k() { "$kubectl" --kubeconfig="$(cat "$run/kubeconfig.path")" -n "$ns" "$@"; }
rest() { echo "http://127.0.0.1:$(cat "$run/rest.port")"; }

up() {
  # A JobManager left by an earlier `up` on this run directory would lose its pid file.
  [ -f "$run/jm.pid" ] && down
  rm -rf "$run"; mkdir -p "$run/conf" "$run/jm-conf" "$run/pod-template" "$run/tmp"
  if [ -z "${KUBECONFIG:-}" ]; then
    CP_DIR="${CP_DIR:-/tmp/flink-cp}" FLINK_NAMESPACE="$ns" "$here/control-plane.sh" start > "$run/kubeconfig.path"
    touch "$run/own-control-plane"
  else
    echo "$KUBECONFIG" > "$run/kubeconfig.path"
    k get ns "$ns" >/dev/null 2>&1 || "$kubectl" --kubeconfig="$KUBECONFIG" create ns "$ns"
  fi
  kc="$(cat "$run/kubeconfig.path")"

  (cd "$here" && mvn -B -q compile dependency:build-classpath -Dmdep.outputFile="$run/cp.txt" \
    > "$run/mvn.log" 2>&1) || { tail -40 "$run/mvn.log"; exit 1; }
  echo "$(cat "$run/cp.txt"):$here/target/classes" > "$run/cp.txt"

  rest_port=$(free_port); echo "$rest_port" > "$run/rest.port"
  sed -e "s#@CLUSTER_ID@#$id#; s#@NAMESPACE@#$ns#; s#@KUBECONFIG@#$kc#; s#@CONF_SRC@#$here/conf#" \
      -e "s#@SCHEDULER@#${SCHEDULER:-default}#; s#@REST_PORT@#$rest_port#" \
      -e "s#@RPC_PORT@#$(free_port)#; s#@BLOB_PORT@#$(free_port)#; s#@REG_TIMEOUT@#${REG_TIMEOUT:-30 s}#" \
      "$here/conf/config.yaml.in" > "$run/conf/config.yaml"
  cp "$here/conf/log4j-console.properties" "$run/conf/"

  # 1. Flink's client creates the cluster's Kubernetes objects.
  FLINK_CONF_DIR="$run/conf" java -Xmx256m -XX:TieredStopAtLevel=1 "$java_tmp" \
    -Dlog4j.configurationFile="$run/conf/log4j-console.properties" -cp "$(cat "$run/cp.txt")" \
    org.apache.flink.kubernetes.cli.KubernetesSessionCli > "$run/deploy.log" 2>&1 \
    || { tail -40 "$run/deploy.log"; exit 1; }
  k get deploy,svc,cm -l "app=$id" -o name

  # 2. What the JobManager pod would mount, read back from the apiserver, plus what a local
  #    process needs in place of the pod: the kubeconfig (in a pod: in-cluster config) and
  #    loopback addresses (in a pod: the headless Service <id>.<ns>). Put in config.yaml, not
  #    -D flags, so that Flink does not forward them to the TaskManager pods' command line.
  k get cm "flink-config-$id" -o jsonpath='{.data.config\.yaml}' > "$run/jm-conf/config.yaml"
  k get cm "flink-config-$id" -o jsonpath='{.data.log4j-console\.properties}' \
    > "$run/jm-conf/log4j-console.properties"
  k get cm "pod-template-$id" -o jsonpath='{.data.taskmanager-pod-template\.yaml}' \
    > "$run/pod-template/taskmanager-pod-template.yaml"
  cat >> "$run/jm-conf/config.yaml" <<CONF
kubernetes.config.file: $kc
jobmanager.rpc.address: 127.0.0.1
rest.address: 127.0.0.1
rest.bind-address: 127.0.0.1
io.tmp.dirs: $run/tmp
web.tmpdir: $run/tmp
CONF
  cat > "$run/jm.sh" <<JM
#!/bin/sh
set -e
# Private mount namespace (unshare -m): this tmpfs hides the host's /opt from this process only.
mount -t tmpfs flink-opt /opt
mkdir -p /opt/flink/pod-template
cp "$run/pod-template/taskmanager-pod-template.yaml" /opt/flink/pod-template/
export FLINK_CONF_DIR="$run/jm-conf" _POD_IP_ADDRESS=127.0.0.1
exec java -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "$java_tmp" \
  -Dlog4j.configurationFile="$run/jm-conf/log4j-console.properties" \
  -cp "$(cat "$run/cp.txt")" org.apache.flink.kubernetes.entrypoint.KubernetesSessionClusterEntrypoint
JM
  chmod +x "$run/jm.sh"
  # setsid: its own process group (a background job of this non-interactive shell is no group
  # leader, so setsid forks nothing and $! is the group), killed whole by `down`.
  setsid unshare -m --propagation private "$run/jm.sh" > "$run/jm.log" 2>&1 &
  echo $! > "$run/jm.pid"
  for i in $(seq 120); do
    curl -sf "$(rest)/overview" >/dev/null 2>&1 && curl -sf "$(rest)/taskmanagers" >/dev/null 2>&1 && break
    kill -0 "$(cat "$run/jm.pid")" 2>/dev/null || { echo "JobManager exited:"; tail -40 "$run/jm.log"; exit 1; }
    [ "$i" = 120 ] && { echo "JobManager REST not up after 120 s:"; tail -40 "$run/jm.log"; exit 1; }
    sleep 1
  done
  echo "JobManager up: $(rest) (pid $(cat "$run/jm.pid"), log $run/jm.log)"
}

submit() {
  java -Xmx256m -XX:TieredStopAtLevel=1 "$java_tmp" -Dlog4j.configurationFile="$here/conf/log4j-console.properties" \
    -cp "$(cat "$run/cp.txt")" dev.placement.flink.SubmitJob 127.0.0.1 "$(cat "$run/rest.port")" "$1" \
    > "$run/submit.log" 2>&1 || { tail -30 "$run/submit.log"; exit 1; }
  grep -E "^(JOB_ID|VERTEX)" "$run/submit.log"
  sed -n 's/^JOB_ID=//p' "$run/submit.log" > "$run/job.id"
  sleep 2
  state="$(curl -sf "$(rest)/jobs/$(cat "$run/job.id")" | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])')"
  echo "job state: $state"
  if [ "$state" = FAILED ]; then
    curl -sf "$(rest)/jobs/$(cat "$run/job.id")/exceptions" | head -c 2000; echo; exit 1
  fi
}

rescale() {
  job="$(cat "$run/job.id")"
  body="$(curl -sf "$(rest)/jobs/$job/resource-requirements" \
    | python3 -c "import json,sys; r=json.load(sys.stdin); print(json.dumps({v:{'parallelism':{'lowerBound':1,'upperBound':int(sys.argv[1])}} for v in r}))" "$1")"
  echo "PUT $body"
  curl -sf -X PUT -H 'Content-Type: application/json' -d "$body" "$(rest)/jobs/$job/resource-requirements"
  echo; curl -sf "$(rest)/jobs/$job/resource-requirements"; echo
}

status() {
  date +%T
  k get pods --no-headers 2>/dev/null | awk '{print $1}' | sed 's/-[0-9]*$//' | sort | uniq -c
  echo "created: $(grep -c 'Creating new TaskManager pod' "$run/jm.log")" \
       "stopped: $(grep -c 'Stopping worker' "$run/jm.log")"
}

down() {
  if [ -f "$run/jm.pid" ]; then
    pid="$(cat "$run/jm.pid")"
    kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 -- "-$pid" 2>/dev/null || kill -9 "$pid" 2>/dev/null || true
    rm -f "$run/jm.pid"
  fi
  if [ -f "$run/own-control-plane" ]; then
    CP_DIR="${CP_DIR:-/tmp/flink-cp}" "$here/control-plane.sh" stop
    rm -f "$run/own-control-plane"
  fi
}

case "${1:-}" in
  up) up ;;
  submit) submit "${2:-20}" ;;
  rescale) rescale "${2:?rescale UPPER}" ;;
  status) status ;;
  down) down ;;
  *) sed -n '2,24p' "$0"; exit 2 ;;
esac
