#!/usr/bin/env bash
# Load test of the whole server against a minimal baseline, in one run on the same machine.
#
# Builds the release binary and examples/minimal_webhook (kube-rs's admission example: one label
# added, no decision), writes a NODES-node snapshot and a self-signed certificate both servers
# use, then for each row runs the baseline and `placement-webhook serve` one after the other,
# each started afresh (an empty in-flight ledger), with the same wrk settings and body (the
# example TaskManager review), and prints side-by-side tables with ratios (webhook / baseline).
# Rows, at each connection count:
#   steady  a new uid per review on a cluster with room for every pod (`gen_snapshot.py --room`):
#           every review is a full decision that names nodes and charges the ledger, which
#           reaches `inflight.max_entries` within seconds: what a busy webhook does.
#   same    the same uid in every review (the ledger is charged once).
#   new     a new uid per review on the generated cluster, which fills by requests after a
#           second or two: from then on reviews name no node (cheap). The "named nodes" column shows it.
# Then an optional soak of the webhook on the steady rows' cluster samples its resident memory
# every second. Only 127.0.0.1 is contacted.
#
# Environment (defaults):
#   NODES=5000 DURATION=30 CONNECTIONS="16 64" UIDS="steady same new" THREADS=2
#   PORT=18443 BASELINE_PORT=18444
#   SOAK_SECONDS=300     0 skips the soak (new uid per review, full rate)
#   SOAK_CONNECTIONS=64 SOAK_DELAY_MS=0   pause per connection between requests
#   OUT=target/load      where the snapshot, certificate, bodies, logs and results go
#   SKIP_BUILD=0         1: use the binaries already in the target directory
#   WEBHOOK_PRELOAD=     a shared library to LD_PRELOAD into the webhook only (allocator trials)
#   ANSWER_ONLY=1        0 skips the "answer only" run: the baseline answering every review with
#                        the patch and annotations the webhook gave right after its row (no
#                        decision behind them), the floor a decision adds to
#   EARLIER_BIN=         another placement-webhook binary (e.g. built from an earlier commit) run
#                        in each row too, after the webhook: its figures and ratios are added
#   JOB_SIZE=0           N > 0: every N reviews of a wrk thread belong to a new job (benches/review.lua),
#                        instead of every review to the example's one job
#   WEBHOOK_CONFIG=      a config file passed to the webhook (and EARLIER_BIN) with --config, e.g.
#                        one with `scheduler: {percentage_of_nodes_to_score: 100}` (the exact profile)
set -euo pipefail
cd "$(dirname "$0")/.."

NODES="${NODES:-5000}"
DURATION="${DURATION:-30}"
CONNECTIONS="${CONNECTIONS:-16 64}"
UIDS="${UIDS:-steady same new}"
THREADS="${THREADS:-2}"
PORT="${PORT:-18443}"
BASELINE_PORT="${BASELINE_PORT:-18444}"
SOAK_SECONDS="${SOAK_SECONDS:-300}"
SOAK_CONNECTIONS="${SOAK_CONNECTIONS:-64}"
SOAK_DELAY_MS="${SOAK_DELAY_MS:-0}"
OUT="${OUT:-target/load}"
SKIP_BUILD="${SKIP_BUILD:-0}"
WEBHOOK_PRELOAD="${WEBHOOK_PRELOAD:-}"
EARLIER_BIN="${EARLIER_BIN:-}"
WEBHOOK_CONFIG="${WEBHOOK_CONFIG:-}"
ANSWER_ONLY="${ANSWER_ONLY:-1}"
TARGET="${CARGO_TARGET_DIR:-target}"
BIN="$TARGET/release/placement-webhook"
BASELINE_BIN="$TARGET/release/examples/minimal_webhook"
BASE="https://127.0.0.1:${PORT}"

mkdir -p "$OUT"
SNAPSHOT="$OUT/snapshot-${NODES}.json"
ROOMY_SNAPSHOT="$OUT/snapshot-${NODES}-room.json"
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
for tool in curl python3 openssl; do
  command -v "$tool" >/dev/null 2>&1 || { log "$tool is required"; exit 1; }
done

if [ "$SKIP_BUILD" != 1 ]; then
  log "building the release binary and the baseline"
  cargo build --release --locked --bin placement-webhook --example minimal_webhook >&2
fi

CERT="$OUT/tls.crt"
KEY="$OUT/tls.key"
if [ ! -s "$CERT" ] || [ ! -s "$KEY" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 7 \
    -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$KEY" -out "$CERT" 2>/dev/null
fi

log "writing a ${NODES}-node snapshot to $SNAPSHOT"
python3 benches/gen_snapshot.py "$NODES" "$SNAPSHOT"
python3 benches/gen_snapshot.py "$NODES" "$ROOMY_SNAPSHOT" --room

# The example TaskManager review, with Flink's blocklist naming nodes of this cluster.
python3 - "$BODY" <<'PY'
import json, sys
review = json.load(open("examples/taskmanager-review.json"))
terms = review["request"]["object"]["spec"]["affinity"]["nodeAffinity"][
    "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
terms[0]["matchExpressions"][0]["values"] = ["worker-00014", "worker-00327", "worker-02718"]
json.dump(review, open(sys.argv[1], "w"), separators=(",", ":"))
PY
export BODY_FILE="$BODY"
export JOB_SIZE="${JOB_SIZE:-0}"

mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$SERVER_PID/status" 2>/dev/null || echo 0; }

metric() { # metric NAME_AND_LABELS: the value, 0 when absent
  curl -sk --max-time 5 "$BASE/metrics" | awk -v m="$1" '$1 == m {v = $2} END {print v + 0}'
}

wait_listening() { # wait_listening URL: until TLS answers (any HTTP status)
  for _ in $(seq 150); do
    if curl -sk -o /dev/null --max-time 1 "$1"; then
      return 0
    fi
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
  done
  log "the server did not start; its log:"
  cat "$OUT/server.log" >&2
  exit 1
}

start_server() { # start_server [BINARY] [SNAPSHOT]: the webhook, or another build of it
  LD_PRELOAD="$WEBHOOK_PRELOAD" "${1:-$BIN}" serve --listen "127.0.0.1:${PORT}" \
    --metrics-file "${2:-$SNAPSHOT}" --no-cluster --tls-cert "$CERT" --tls-key "$KEY" \
    ${WEBHOOK_CONFIG:+--config "$WEBHOOK_CONFIG"} >"$OUT/server.log" 2>&1 &
  SERVER_PID=$!
  wait_listening "$BASE/healthz"
}

start_baseline() { # start_baseline [ANSWER.json]: the minimal webhook, answering with its label or that answer
  "$BASELINE_BIN" "$CERT" "$KEY" "127.0.0.1:${BASELINE_PORT}" ${1:+"$1"} >"$OUT/server.log" 2>&1 &
  SERVER_PID=$!
  wait_listening "https://127.0.0.1:${BASELINE_PORT}/"
}

# One review by hand: its decision annotation shows what the ledger did to the choice.
decision_now() {
  sed 's/3f2a9c01-b7de-4c55-9e1a-0d4b6f8e2c17/ffffffff-ffff-4c55-9e1a-0d4b6f8e2c17/' "$BODY" |
    curl -sk --max-time 5 -H 'Content-Type: application/json' --data-binary @- \
      "$BASE/mutate?timeout=10s" |
    python3 -c 'import json,sys; r=json.load(sys.stdin)["response"]; print(r.get("auditAnnotations",{}).get("decision","(no patch)"))'
}

# Fifteen more reviews: the answer of median size is kept in ANSWER_FILE for the answer-only run
# (answers differ in how many nodes they name).
record_answer() { # record_answer ANSWER_FILE
  for k in $(seq 10 24); do
    sed "s/3f2a9c01-b7de-4c55-9e1a-0d4b6f8e2c17/ffffffff-ff${k}-4c55-9e1a-0d4b6f8e2c17/" "$BODY" |
      curl -sk --max-time 5 -H 'Content-Type: application/json' --data-binary @- \
        "$BASE/mutate?timeout=10s"
    echo
  done | python3 -c '
import json, sys
answers = [json.loads(line)["response"] for line in sys.stdin if line.strip()]
answers.sort(key=lambda r: len(json.dumps(r)))
json.dump(answers[len(answers) // 2], open(sys.argv[1], "w"))' "$1"
}

field() { sed -n "s/.*[ ]$1=\([^ ]*\).*/\1/p" <<<"$2"; }

run_wrk() { # run_wrk NAME URL CONNECTIONS SAME_UID: the RESULT line
  local threads=$((THREADS < $3 ? THREADS : $3))
  log "wrk $1: $3 connections, $threads threads, ${DURATION}s"
  SAME_UID="$4" wrk --latency -t "$threads" -c "$3" -d "${DURATION}s" --timeout 10s \
    -s benches/review.lua "$2/mutate?timeout=10s" >"$OUT/wrk-$1.txt" 2>&1 || true
  if ! grep '^RESULT' "$OUT/wrk-$1.txt"; then
    log "wrk produced no result:"
    cat "$OUT/wrk-$1.txt" >&2
    exit 1
  fi
}

ratio() { python3 -c "import sys; a, b = map(float, sys.argv[1:]); print(f'{a / b:.2f}x' if b else '-')" "$1" "$2"; }

RESULTS="$OUT/results.md"
{
  echo "| row | conns | baseline rev/s | webhook rev/s | throughput ratio | baseline p99 ms | webhook p99 ms | p99 ratio | baseline p50 ms | webhook p50 ms | non-2xx (b / w) | patched | named nodes | ledger entries | webhook RSS after MiB |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
} >"$RESULTS"
FLOOR="$OUT/answer-only.md"
{
  echo "| row | conns | patch bytes | answer-only rev/s | answer-only / baseline | webhook / answer-only | answer-only p99 ms | answer-only p99 / baseline | webhook p99 / answer-only |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
} >"$FLOOR"
DECISIONS="$OUT/decisions.txt"
EARLIER="$OUT/earlier.md"
{
  echo "| uid | conns | earlier rev/s | earlier / baseline | webhook / earlier | earlier p99 ms | earlier p99 / baseline | webhook p99 / earlier |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
} >"$EARLIER"
: >"$DECISIONS"

for mode in $UIDS; do
  same=0
  [ "$mode" = same ] && same=1
  snapshot="$SNAPSHOT"
  [ "$mode" = steady ] && snapshot="$ROOMY_SNAPSHOT"
  for c in $CONNECTIONS; do
    start_baseline
    b=$(run_wrk "baseline-$mode-c$c" "https://127.0.0.1:${BASELINE_PORT}" "$c" "$same")
    stop_server
    start_server "$BIN" "$snapshot"
    w=$(run_wrk "webhook-$mode-c$c" "$BASE" "$c" "$same")
    rss_after=$(rss_kib)
    patched=$(metric 'placement_webhook_reviews_total{outcome="patched"}')
    # Patched reviews whose decision named at least one node: the row kept deciding.
    empty=$(metric placement_webhook_empty_decisions_total)
    total=$(curl -sk --max-time 5 "$BASE/metrics" |
      awk '/^placement_webhook_reviews_total\{/ {s += $2} END {print s + 0}')
    entries=$(metric placement_webhook_inflight_entries)
    answer="$OUT/answer-$mode-c$c.json"
    echo "$mode uid, c=${c}: $(decision_now)" >>"$DECISIONS"
    record_answer "$answer"
    stop_server
    printf '| %s | %s | %.0f | %.0f | %s | %s | %s | %s | %s | %s | %s / %s | %s | %s | %s | %s |\n' \
      "$mode" "$c" "$(field rps "$b")" "$(field rps "$w")" \
      "$(ratio "$(field rps "$w")" "$(field rps "$b")")" \
      "$(field p99_ms "$b")" "$(field p99_ms "$w")" \
      "$(ratio "$(field p99_ms "$w")" "$(field p99_ms "$b")")" \
      "$(field p50_ms "$b")" "$(field p50_ms "$w")" \
      "$(field non2xx "$b")" "$(field non2xx "$w")" \
      "$(python3 -c "print(f'{100*$patched/max($total,1):.1f}%')")" \
      "$(python3 -c "print(f'{100*($patched-$empty)/max($total,1):.1f}%')")" "$entries" \
      "$(mib "$rss_after")" >>"$RESULTS"
    if [ "$ANSWER_ONLY" = 1 ] && python3 -c 'import json,sys; sys.exit(0 if "patch" in json.load(open(sys.argv[1])) else 1)' "$answer"; then
      start_baseline "$answer"
      a=$(run_wrk "answer-only-$mode-c$c" "https://127.0.0.1:${BASELINE_PORT}" "$c" "$same")
      stop_server
      printf '| %s | %s | %s | %.0f | %s | %s | %s | %s | %s |\n' "$mode" "$c" \
        "$(python3 -c 'import base64,json,sys; print(len(base64.b64decode(json.load(open(sys.argv[1]))["patch"])))' "$answer")" \
        "$(field rps "$a")" "$(ratio "$(field rps "$a")" "$(field rps "$b")")" \
        "$(ratio "$(field rps "$w")" "$(field rps "$a")")" \
        "$(field p99_ms "$a")" "$(ratio "$(field p99_ms "$a")" "$(field p99_ms "$b")")" \
        "$(ratio "$(field p99_ms "$w")" "$(field p99_ms "$a")")" >>"$FLOOR"
    fi
    if [ -n "$EARLIER_BIN" ]; then
      start_server "$EARLIER_BIN" "$snapshot"
      e=$(run_wrk "earlier-$mode-c$c" "$BASE" "$c" "$same")
      stop_server
      printf '| %s | %s | %.0f | %s | %s | %s | %s | %s |\n' "$mode" "$c" \
        "$(field rps "$e")" "$(ratio "$(field rps "$e")" "$(field rps "$b")")" \
        "$(ratio "$(field rps "$w")" "$(field rps "$e")")" \
        "$(field p99_ms "$e")" "$(ratio "$(field p99_ms "$e")" "$(field p99_ms "$b")")" \
        "$(ratio "$(field p99_ms "$w")" "$(field p99_ms "$e")")" >>"$EARLIER"
    fi
  done
done

echo
echo "### ${NODES} nodes, ${DURATION} s per row, ${THREADS} wrk threads${WEBHOOK_PRELOAD:+, webhook with LD_PRELOAD=$WEBHOOK_PRELOAD}"
echo
cat "$RESULTS"
echo
echo "Ratios are webhook / baseline: throughput >= 1.00x and p99 <= 1.00x is parity."
if [ "$ANSWER_ONLY" = 1 ]; then
  echo
  echo "The baseline answering with the webhook's own patch and annotations (recorded right after"
  echo "its row, the median of fifteen by size), no decision behind it:"
  echo
  cat "$FLOOR"
fi
if [ -n "$EARLIER_BIN" ]; then
  echo
  echo "The earlier build ($EARLIER_BIN), in the same rows:"
  echo
  cat "$EARLIER"
fi
echo "Decision of one review right after each webhook run:"
echo
sed 's/^/    /' "$DECISIONS"

if [ "$SOAK_SECONDS" -gt 0 ]; then
  start_server "$BIN" "$ROOMY_SNAPSHOT"
  log "soak: ${SOAK_CONNECTIONS} connections, ${SOAK_DELAY_MS} ms pause, ${SOAK_SECONDS}s"
  DELAY_MS="$SOAK_DELAY_MS" wrk --latency -t "$THREADS" -c "$SOAK_CONNECTIONS" -d "${SOAK_SECONDS}s" \
    --timeout 10s -s benches/review.lua "$BASE/mutate?timeout=10s" >"$OUT/wrk-soak.txt" 2>&1 &
  WRK_PID=$!
  SAMPLES="$OUT/soak-samples.txt"
  echo "seconds rss_kib ledger_entries" >"$SAMPLES"
  started=$(date +%s)
  while kill -0 "$WRK_PID" 2>/dev/null; do
    # Every second: the ledger fills with the burst's first, widest decisions within seconds,
    # and a peak between samples ten seconds apart went unseen.
    echo "$(($(date +%s) - started)) $(rss_kib) $(metric placement_webhook_inflight_entries)" >>"$SAMPLES"
    sleep 1
  done
  wait "$WRK_PID" || true
  WRK_PID=""
  echo "$(($(date +%s) - started)) $(rss_kib) $(metric placement_webhook_inflight_entries)" >>"$SAMPLES"
  line=$(grep '^RESULT' "$OUT/wrk-soak.txt" || echo "RESULT (none)")
  stop_server
  echo
  echo "### Soak: ${SOAK_SECONDS} s, ${SOAK_CONNECTIONS} connections, a new uid per review (steady: room for every pod), ${SOAK_DELAY_MS} ms pause per request"
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
