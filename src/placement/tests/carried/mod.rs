//! What a decision carries between reviews equals a fresh computation after any sequence of
//! changes: the ranking index against the walk, InterPodAffinity's carried scores against a
//! fresh score.

mod affinity_sums;
mod rank_index;
