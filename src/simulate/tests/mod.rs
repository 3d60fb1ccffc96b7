//! Closed loops through the admission path and the scheduler model, with their tables.

mod closed_loop;
mod day;
mod sibling_estimates;
