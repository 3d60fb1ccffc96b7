//! How the eligible nodes rank for one pod: each node's standing, the reference walk, the rank
//! index kept between reviews, the nodes a spread keeps named, and the weight of each named term.

pub(crate) mod grading;
pub(crate) mod rank_index;
pub(crate) mod spread_cover;
pub(crate) mod standing;
pub(crate) mod walk;
