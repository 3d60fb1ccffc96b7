#!/usr/bin/env bash
# Load test of the whole server: TLS, HTTP/1.1 keep-alive, parse, decide, patch, answer.
#
# From a fresh clone: builds the release binary, writes a NODES-node snapshot, and for each
# connection count starts `placement-webhook serve` afresh (an empty in-flight ledger), drives
# it with wrk for DURATION seconds with real TaskManager AdmissionReviews (a new uid per
# request), and reads the outcome counters and the ledger size from /metrics and the resident
# memory from /proc. Then an optional soak at a steady rate samples memory every 10 s.
# Only 127.0.0.1 is contacted. Prints markdown tables.
#
# Environment (defaults):
#   NODES=5000 DURATION=20 CONNECTIONS="1 16 64 256" THREADS=2 PORT=18443
#   DRY_RUN=0            1: reviews carry dryRun=true (answered the same, no ledger charges)
#   SOAK_SECONDS=300     0 skips the soak
#   SOAK_CONNECTIONS=8 SOAK_DELAY_MS=8   pause per connection between requests (steady rate)
#   OUT=target/load      where the snapshot, bodies, logs and results go
#   SKIP_BUILD=0         1: use the existing target/release/placement-webhook
set -euo pipefail
cd "$(dirname "$0")/.."

NODES="${NODES:-5000}"
DURATION="${DURATION:-20}"
CONNECTIONS="${CONNECTIONS:-1 16 64 256}"
THREADS="${THREADS:-2}"
PORT="${PORT:-18443}"
DRY_RUN="${DRY_RUN:-0}"
SOAK_SECONDS="${SOAK_SECONDS:-300}"
SOAK_CONNECTIONS="${SOAK_CONNECTIONS:-8}"
SOAK_DELAY_MS="${SOAK_DELAY_MS:-8}"
OUT="${OUT:-target/load}"
SKIP_BUILD="${SKIP_BUILD:-0}"
BIN=target/release/placement-webhook
BASE="https://127.0.0.1:${PORT}"

mkdir -p "$OUT"
SNAPSHOT="$OUT/snapshot-${NODES}.json"
BODY="$OUT/review.json"
SERVER_PID=""
WRK_PID=""

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

stop_server() {
  if [ -n "$WRK_PID" ]; then
    kill -TERM "$WRK_PID" 2>/dev/null || true
    WRK_PID=""
  fi
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 50); do
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  SERVER_PID=""
}
trap stop_server EXIT
trap 'exit 130' INT TERM

command -v wrk >/dev/null 2>&1 || {
  log "installing wrk"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk
}
for tool in curl python3; do
  command -v "$tool" >/dev/null 2>&1 || { log "$tool is required"; exit 1; }
done

if [ "$SKIP_BUILD" != 1 ]; then
  log "building the release binary"
  cargo build --release --locked --bin placement-webhook >&2
fi

log "writing a ${NODES}-node snapshot to $SNAPSHOT"
python3 benches/gen_snapshot.py "$NODES" "$SNAPSHOT"

# The example TaskManager review, with Flink's blocklist naming nodes of this cluster.
python3 - "$BODY" "$DRY_RUN" <<'PY'
import json, sys
review = json.load(open("examples/taskmanager-review.json"))
review["request"]["dryRun"] = sys.argv[2] == "1"
terms = review["request"]["object"]["spec"]["affinity"]["nodeAffinity"][
    "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
terms[0]["matchExpressions"][0]["values"] = ["worker-00014", "worker-00327", "worker-02718"]
json.dump(review, open(sys.argv[1], "w"), separators=(",", ":"))
PY
export BODY_FILE="$BODY"

mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$SERVER_PID/status" 2>/dev/null || echo 0; }

metric() { # metric NAME_AND_LABELS: the value, 0 when absent
  curl -sk --max-time 5 "$BASE/metrics" | awk -v m="$1" '$1 == m {v = $2} END {print v + 0}'
}

start_server() {
  "$BIN" serve --listen "127.0.0.1:${PORT}" --metrics-file "$SNAPSHOT" --no-cluster \
    >"$OUT/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 100); do
    if curl -skf --max-time 1 "$BASE/healthz" >/dev/null 2>&1; then
      return 0
    fi
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  log "the server did not become healthy; its log:"
  cat "$OUT/server.log" >&2
  exit 1
}

# One review by hand: its decision annotation shows what the ledger did to the choice.
decision_now() {
  sed 's/3f2a9c01-b7de-4c55-9e1a-0d4b6f8e2c17/ffffffff-ffff-4c55-9e1a-0d4b6f8e2c17/' "$BODY" |
    curl -sk --max-time 5 -H 'Content-Type: application/json' --data-binary @- \
      "$BASE/mutate?timeout=10s" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["response"]; print(r.get("auditAnnotations",{}).get("decision","(no patch)"))'
}

field() { sed -n "s/.*[ ]$1=\([^ ]*\).*/\1/p" <<<"$2"; }

RESULTS="$OUT/results.md"
{
  echo "| connections | reviews/s | p50 ms | p99 ms | p99.9 ms | max ms | non-2xx | socket errors | patched | ledger entries | RSS idle MiB | RSS after MiB |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
} >"$RESULTS"
DECISIONS="$OUT/decisions.txt"
: >"$DECISIONS"

for c in $CONNECTIONS; do
  start_server
  rss_idle=$(rss_kib)
  threads=$((THREADS < c ? THREADS : c))
  log "wrk: ${c} connections, ${threads} threads, ${DURATION}s"
  wrk --latency -t "$threads" -c "$c" -d "${DURATION}s" --timeout 10s \
    -s benches/review.lua "$BASE/mutate?timeout=10s" >"$OUT/wrk-c${c}.txt" 2>&1 || true
  line=$(grep '^RESULT' "$OUT/wrk-c${c}.txt" || true)
  if [ -z "$line" ]; then
    log "wrk produced no result:"
    cat "$OUT/wrk-c${c}.txt" >&2
    exit 1
  fi
  rss_after=$(rss_kib)
  patched=$(metric 'placement_webhook_reviews_total{outcome="Patched"}')
  total=$(curl -sk --max-time 5 "$BASE/metrics" |
    awk '/^placement_webhook_reviews_total\{/ {s += $2} END {print s + 0}')
  entries=$(metric placement_webhook_inflight_entries)
  echo "c=${c}: $(decision_now)" >>"$DECISIONS"
  printf '| %s | %.0f | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' \
    "$c" "$(field rps "$line")" "$(field p50_ms "$line")" "$(field p99_ms "$line")" \
    "$(field p999_ms "$line")" "$(field max_ms "$line")" "$(field non2xx "$line")" \
    "$(field socket_errors "$line")" \
    "$(python3 -c "print(f'{100*$patched/max($total,1):.1f}%')")" "$entries" \
    "$(mib "$rss_idle")" "$(mib "$rss_after")" >>"$RESULTS"
  stop_server
done

echo
echo "### ${NODES} nodes, ${DURATION} s per row, dry run: ${DRY_RUN}"
echo
cat "$RESULTS"
echo
echo "Decision of one review right after each run:"
echo
sed 's/^/    /' "$DECISIONS"

if [ "$SOAK_SECONDS" -gt 0 ]; then
  start_server
  log "soak: ${SOAK_CONNECTIONS} connections, ${SOAK_DELAY_MS} ms pause, ${SOAK_SECONDS}s"
  DELAY_MS="$SOAK_DELAY_MS" wrk --latency -t 1 -c "$SOAK_CONNECTIONS" -d "${SOAK_SECONDS}s" \
    --timeout 10s -s benches/review.lua "$BASE/mutate?timeout=10s" >"$OUT/wrk-soak.txt" 2>&1 &
  WRK_PID=$!
  SAMPLES="$OUT/soak-samples.txt"
  echo "seconds rss_kib ledger_entries" >"$SAMPLES"
  started=$(date +%s)
  while kill -0 "$WRK_PID" 2>/dev/null; do
    echo "$(($(date +%s) - started)) $(rss_kib) $(metric placement_webhook_inflight_entries)" >>"$SAMPLES"
    for _ in $(seq 10); do
      kill -0 "$WRK_PID" 2>/dev/null || break
      sleep 1
    done
  done
  wait "$WRK_PID" || true
  WRK_PID=""
  echo "$(($(date +%s) - started)) $(rss_kib) $(metric placement_webhook_inflight_entries)" >>"$SAMPLES"
  line=$(grep '^RESULT' "$OUT/wrk-soak.txt" || echo "RESULT (none)")
  stop_server
  echo
  echo "### Soak: ${SOAK_SECONDS} s, ${SOAK_CONNECTIONS} connections, ${SOAK_DELAY_MS} ms pause per request"
  echo
  echo "    ${line#RESULT }"
  echo
  # Memory after the first ledger TTL (90 s) is the steady state: it must not keep growing.
  awk 'NR > 1 {
      n++; t[n] = $1; r[n] = $2; e[n] = $3
      if ($2 > max) max = $2
      if ($3 > emax) emax = $3
      if ($1 >= 120 && !steady) steady = $2
    }
    END {
      printf "| RSS first MiB | RSS last MiB | RSS max MiB | RSS at 120 s MiB | ledger max | ledger last |\n"
      printf "|---:|---:|---:|---:|---:|---:|\n"
      printf "| %.1f | %.1f | %.1f | %.1f | %d | %d |\n", r[1]/1024, r[n]/1024, max/1024, steady/1024, emax, e[n]
      if (steady > 0 && r[n] > steady * 1.10)
        print "\nRSS grew by more than 10% after the ledger reached its steady state."
      else if (steady > 0)
        print "\nRSS stayed within 10% of its steady state after the first ledger TTL."
    }' "$SAMPLES"
  echo
  echo "Samples (seconds, RSS KiB, ledger entries): $SAMPLES"
fi
