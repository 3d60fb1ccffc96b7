//! The well-known names the scheduler, the placement and the config read, spelled once: node
//! label keys and the default scheduler's name.

/// Set by the kubelet to the node's name; the topology key of "one per node".
pub(crate) const HOSTNAME: &str = "kubernetes.io/hostname";
pub(crate) const ZONE: &str = "topology.kubernetes.io/zone";
pub(crate) const REGION: &str = "topology.kubernetes.io/region";
/// Deprecated, but read first by the scheduler's node order (`GetZoneKey`).
pub(crate) const ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
pub(crate) const REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";

/// The scheduler of a pod that names none, and the name of a profile that gives none (upstream
/// `v1.DefaultSchedulerName`).
pub(crate) const DEFAULT_SCHEDULER_NAME: &str = "default-scheduler";
