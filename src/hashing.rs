//! The hash maps of the request path and of the readings: foldhash, seeded per process so that
//! crafted keys cannot degrade them. Under the fuzzer (`cfg(fuzzing)`, set by cargo-fuzz) the
//! seed is fixed, so an input takes the same path, and a seeded run the same course, every time.

#[cfg(not(fuzzing))]
pub type HashMap<K, V> = foldhash::HashMap<K, V>;

#[cfg(not(fuzzing))]
pub(crate) type HashSet<K> = foldhash::HashSet<K>;

#[cfg(fuzzing)]
pub type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;

#[cfg(fuzzing)]
pub(crate) type HashSet<K> = std::collections::HashSet<K, foldhash::fast::FixedState>;
