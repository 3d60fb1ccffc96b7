//! PodTopologySpread's cluster-level default constraints (the plugin's `defaultingType`).

use std::sync::LazyLock;

use k8s_openapi::api::core::v1::TopologySpreadConstraint;

use crate::well_known::{HOSTNAME, ZONE};
pub(super) const SCHEDULE_ANYWAY: &str = "ScheduleAnyway";

/// The plugin's `defaultingType` and `defaultConstraints`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum SpreadDefaults {
    /// `System`: hostname maxSkew 3 and zone maxSkew 5, both ScheduleAnyway.
    #[default]
    System,
    /// `List` with these constraints (none: no defaults at all). The model's tests set it; the
    /// webhook reads the scheduler's own defaults only.
    #[cfg_attr(not(test), expect(dead_code))]
    List(Vec<TopologySpreadConstraint>),
}

static SYSTEM_DEFAULTS: LazyLock<Vec<TopologySpreadConstraint>> = LazyLock::new(|| {
    let soft = |key: &str, max_skew| TopologySpreadConstraint {
        topology_key: key.to_string(),
        max_skew,
        when_unsatisfiable: SCHEDULE_ANYWAY.to_string(),
        ..TopologySpreadConstraint::default()
    };
    vec![soft(HOSTNAME, 3), soft(ZONE, 5)]
});

impl SpreadDefaults {
    pub(super) fn constraints(&self) -> &[TopologySpreadConstraint] {
        match self {
            SpreadDefaults::System => &SYSTEM_DEFAULTS,
            SpreadDefaults::List(list) => list,
        }
    }
}
