//! The well-known node label keys the scheduler, the placement and the config read, spelled once.

/// Set by the kubelet to the node's name; the topology key of "one per node".
pub(crate) const HOSTNAME: &str = "kubernetes.io/hostname";
pub(crate) const ZONE: &str = "topology.kubernetes.io/zone";
pub(crate) const REGION: &str = "topology.kubernetes.io/region";
/// Deprecated, but read first by the scheduler's node order (`GetZoneKey`).
pub(crate) const ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
pub(crate) const REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";
