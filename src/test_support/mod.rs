//! What the crate's own tests share with each other and with the integration tests.

pub(crate) mod seeded;

#[path = "../../tests/support/node_resources.rs"]
pub(crate) mod node_resources;
