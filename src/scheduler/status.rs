//! A filter's verdict on a node, as upstream's status codes.

/// A filter's verdict on a node, as upstream's status codes: whether removing pods (preemption)
/// could make the node fit.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    Unschedulable,
    UnschedulableAndUnresolvable,
}
