//! Property tests draw the same cases on every run: a fixed seed unless told otherwise, so the
//! same commit passes or fails the same way. Explore beyond the gate with
//! `PROPTEST_EXPLORE=1` (a random seed each run, printed on failure) or
//! `PROPTEST_RNG_SEED=<n>` (another fixed seed), and `PROPTEST_CASES=<n>` for more cases.
//! Failures found that way are persisted in a `*.proptest-regressions` file beside each test file:
//! commit them.

use proptest::test_runner::{Config, RngSeed};

/// The gate's seed.
const SEED: u64 = 0x5eed_2026_1124;

/// `cases` cases from the fixed seed, unless the environment asks for exploration.
pub(crate) fn config(cases: u32) -> Config {
    // Config::default() reads PROPTEST_* from the environment.
    let from_env = Config::default();
    let explore = std::env::var_os("PROPTEST_EXPLORE").is_some_and(|v| v != "0");
    let rng_seed = if explore {
        RngSeed::Random
    } else if std::env::var_os("PROPTEST_RNG_SEED").is_some() {
        from_env.rng_seed
    } else {
        RngSeed::Fixed(SEED)
    };
    let cases = if std::env::var_os("PROPTEST_CASES").is_some() {
        from_env.cases
    } else {
        cases
    };
    Config {
        cases,
        rng_seed,
        ..from_env
    }
}
