//! The scheduler model against upstream's own test vectors, beside the code they check.

mod plugins;
mod upstream_vectors;
