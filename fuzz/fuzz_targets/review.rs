//! The `review` target: every input through the oracle in `fuzz/oracle/review.rs`, which the
//! plain test run replays and mutates too (tests/it/fuzz_regressions.rs).

#![no_main]

#[path = "../oracle/review.rs"]
mod oracle;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    oracle::check(data);
});
