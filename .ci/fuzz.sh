#!/usr/bin/env bash
# Fuzzing (cargo-fuzz, libFuzzer) in two modes:
#
#   bash .ci/fuzz.sh                 fixed runs (not in .ci/run, whose `cargo test` replays the
#                                    corpus through the same oracles): replays every committed corpus and regression
#                                    input, then runs each target from its seeds with a fixed
#                                    seed and a fixed number of runs. The inputs libFuzzer
#                                    keeps, and so its later mutations, can differ by a few
#                                    percent between runs of the same commit (see `summary`).
#   FUZZ_SECONDS=600 bash .ci/fuzz.sh --explore
#                                    exploration, not part of the gate: a random seed, for a
#                                    time, new inputs kept in fuzz/corpus-explore/<target>/.
#
# A crash is written to fuzz/artifacts/<target>/; once understood and fixed, copy it into
# fuzz/corpus/<target>/ as regression-<what>.json so the gate replays it from then on.
# Needs the nightly toolchain (installed here when missing) and cargo-fuzz (likewise).
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=gate
if [ "${1:-}" = "--explore" ]; then
  MODE=explore
fi
# Gate: runs per target after the corpus replay, and the seed of libFuzzer's mutations.
FUZZ_RUNS="${FUZZ_RUNS:-200000}"
FUZZ_SEED="${FUZZ_SEED:-20261124}"
FUZZ_SECONDS="${FUZZ_SECONDS:-600}"
# sanitizer: none by default. The crate has no unsafe code; the targets look for panics and
# broken invariants, and an AddressSanitizer build of the dependency tree doubles the build.
FUZZ_SANITIZER="${FUZZ_SANITIZER:-none}"
TARGETS="${FUZZ_TARGETS:-}"

if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi

cd fuzz
if [ -z "$TARGETS" ]; then
  TARGETS=$(cargo +nightly fuzz list)
fi

# One build of every target: cargo compiles the targets side by side on the shared tree.
cargo +nightly fuzz build --sanitizer "$FUZZ_SANITIZER"

# What the run did: runs executed (fixed by FUZZ_RUNS) and inputs libFuzzer kept. The kept
# count can differ by a few percent between runs of the same seed (libFuzzer's feedback is not
# exactly repeatable over long runs); speed and memory are left out.
summary() {
  grep -E '^(stat::number_of_executed_units|stat::new_units_added)' "$1" | tr -s ' ' | tr '\n' ' '
}

status=0
for target in $TARGETS; do
  dict=()
  if [ -f "$target.dict" ]; then
    dict=("-dict=$target.dict")
  fi
  log=$(mktemp)
  if [ "$MODE" = explore ]; then
    mkdir -p "corpus-explore/$target"
    echo "exploring $target for ${FUZZ_SECONDS}s"
    if ! cargo +nightly fuzz run --sanitizer "$FUZZ_SANITIZER" "$target" \
      "corpus-explore/$target" "corpus/$target" -- \
      "${dict[@]}" -max_total_time="$FUZZ_SECONDS" -max_len=65536 -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1; then
      echo "fuzz target $target failed; the crashing input is in fuzz/artifacts/$target/" >&2
      status=1
    fi
    continue
  fi

  # 1. Replay: every committed input, one run each.
  inputs=()
  if [ -d "corpus/$target" ]; then
    mapfile -t inputs < <(find "corpus/$target" -type f | sort)
  fi
  if ((${#inputs[@]})); then
    echo "replaying ${#inputs[@]} committed inputs of $target"
    if ! cargo +nightly fuzz run --sanitizer "$FUZZ_SANITIZER" "$target" "${inputs[@]}" -- \
      -timeout=10 -rss_limit_mb=2048 >"$log" 2>&1; then
      cat "$log" >&2
      echo "fuzz target $target fails on a committed input" >&2
      status=1
      continue
    fi
  fi

  # 2. Seeded, bounded mutation from a scratch copy of the seeds: new inputs stay out of the tree.
  work=$(mktemp -d)
  if [ -d "corpus/$target" ]; then
    cp -r "corpus/$target/." "$work/"
  fi
  echo "fuzzing $target: seed $FUZZ_SEED, $FUZZ_RUNS runs"
  # One process, one seed, a run count instead of a time: the mutations and the inputs kept
  # are the same on every machine.
  if ! cargo +nightly fuzz run --sanitizer "$FUZZ_SANITIZER" "$target" "$work" -- \
    "${dict[@]}" -seed="$FUZZ_SEED" -runs="$FUZZ_RUNS" -max_len=65536 -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "fuzz target $target failed; the crashing input is in fuzz/artifacts/$target/" >&2
    status=1
  fi
  echo "fuzz statistics $target: $(summary "$log")"
  rm -rf "$work" "$log"
done
exit "$status"
