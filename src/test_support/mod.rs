//! What the crate's own tests share with each other and with the integration tests.

pub(crate) mod seeded;

#[path = "../../tests/support/rng.rs"]
pub(crate) mod rng;

#[path = "../../tests/support/node_resources.rs"]
pub(crate) mod node_resources;
