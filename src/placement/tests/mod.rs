//! Decisions with the filters and scores that count other pods, beside the code they check.

mod carried;
mod decide;
mod pod_level;
mod properties;
