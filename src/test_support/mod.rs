//! What the crate's own tests share with each other and with the integration tests.

pub(crate) mod seeded;
pub(crate) mod splitmix;

#[path = "../../tests/support/node_resources.rs"]
pub(crate) mod node_resources;
