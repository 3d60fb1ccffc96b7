//! Decisions with the filters and scores that count other pods, beside the code they check.

mod pod_level;
