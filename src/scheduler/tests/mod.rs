//! The scheduler model against upstream's own test vectors, beside the code they check.

mod spread_affinity;
mod upstream_vectors;
