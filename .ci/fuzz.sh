#!/usr/bin/env bash
# Bounded fuzzing (cargo-fuzz, libFuzzer): builds every target in fuzz/, runs each from its
# seed corpus for FUZZ_SECONDS, and fails on the first crash, leak of an assertion or timeout.
# Needs the nightly toolchain (installed here when missing) and cargo-fuzz (likewise).
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZ_SECONDS="${FUZZ_SECONDS:-60}"
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

for target in $TARGETS; do
  cargo +nightly fuzz build --sanitizer "$FUZZ_SANITIZER" "$target"
done

status=0
for target in $TARGETS; do
  # Run from a scratch copy of the committed seeds: new inputs stay out of the tree.
  work=$(mktemp -d)
  if [ -d "corpus/$target" ]; then
    cp -r "corpus/$target/." "$work/"
  fi
  dict=()
  if [ -f "$target.dict" ]; then
    dict=("-dict=$target.dict")
  fi
  echo "fuzzing $target for ${FUZZ_SECONDS}s"
  if ! cargo +nightly fuzz run --sanitizer "$FUZZ_SANITIZER" "$target" "$work" -- \
    "${dict[@]}" -max_total_time="$FUZZ_SECONDS" -max_len=65536 -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1; then
    echo "fuzz target $target failed; the crashing input is in fuzz/artifacts/$target/" >&2
    status=1
  fi
  rm -rf "$work"
done
exit "$status"
