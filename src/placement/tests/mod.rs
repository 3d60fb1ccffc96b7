//! Decisions with the filters and scores that count other pods, beside the code they check.

mod affinity_carried;
mod decide;
mod pod_level;
mod properties;
mod rank_index;
