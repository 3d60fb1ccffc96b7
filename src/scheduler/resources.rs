//! Resource amounts as the scheduler's cache keeps them, and a pod's requests as upstream's
//! `resourcehelper.PodRequests` counts them.

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::BTreeMap;

use super::quantity::amount;

pub(crate) const CPU: &str = "cpu";
pub(crate) const MEMORY: &str = "memory";
pub(crate) const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub(crate) const PODS: &str = "pods";
/// What scoring assumes for a container that omits a request (`schedutil` non-zero defaults).
pub(crate) const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
pub(crate) const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// Amounts in the scheduler's units: millicores for cpu, bytes for memory and storage, a count
/// for pods, whole units for extended resources. Compact: the common case allocates nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    pub milli_cpu: i64,
    pub memory: i64,
    pub(crate) ephemeral_storage: i64,
    pub pods: i64,
    /// Extended and hugepage resources, sorted by name.
    pub(crate) scalar: Vec<(String, i64)>,
}

impl Resources {
    pub(crate) fn get(&self, resource: &str) -> i64 {
        match resource {
            CPU => self.milli_cpu,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            PODS => self.pods,
            other => self
                .scalar
                .iter()
                .find(|(n, _)| n == other)
                .map_or(0, |(_, v)| *v),
        }
    }

    pub(crate) fn slot(&mut self, resource: &str) -> &mut i64 {
        match resource {
            CPU => &mut self.milli_cpu,
            MEMORY => &mut self.memory,
            EPHEMERAL_STORAGE => &mut self.ephemeral_storage,
            PODS => &mut self.pods,
            other => {
                let at = match self.scalar.binary_search_by(|(n, _)| n.as_str().cmp(other)) {
                    Ok(at) => at,
                    Err(at) => {
                        self.scalar.insert(at, (other.to_string(), 0));
                        at
                    }
                };
                &mut self.scalar[at].1
            }
        }
    }

    /// `(name, amount)` for every resource with a non-zero amount.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, i64)> {
        [
            (CPU, self.milli_cpu),
            (MEMORY, self.memory),
            (EPHEMERAL_STORAGE, self.ephemeral_storage),
            (PODS, self.pods),
        ]
        .into_iter()
        .chain(self.scalar.iter().map(|(n, v)| (n.as_str(), *v)))
        .filter(|(_, v)| *v != 0)
    }

    pub(crate) fn add(&mut self, other: &Resources) {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
        self.ephemeral_storage += other.ephemeral_storage;
        self.pods += other.pods;
        for (name, v) in &other.scalar {
            *self.slot(name) += v;
        }
    }

    fn max_with(&mut self, other: &Resources) {
        for (name, v) in other.iter() {
            let slot = self.slot(name);
            *slot = (*slot).max(v);
        }
    }

    /// A resource list (`{"cpu": "32", "memory": "128Gi"}`); unreadable quantities are skipped.
    pub(crate) fn from_list<'a>(
        list: impl IntoIterator<Item = (&'a String, &'a Quantity)>,
    ) -> Self {
        let mut out = Resources::default();
        for (name, q) in list {
            if let Some(v) = amount(name, &q.0) {
                *out.slot(name) += v;
            }
        }
        out
    }

    /// The non-zero amounts as a resource list of quantity texts (`{"cpu": "3500m",
    /// "memory": "4294967296"}`): what [`Resources::from_list`] reads back.
    pub(crate) fn to_list(&self) -> BTreeMap<String, String> {
        self.iter()
            .map(|(name, v)| {
                let text = if name == CPU {
                    format!("{v}m")
                } else {
                    v.to_string()
                };
                (name.to_string(), text)
            })
            .collect()
    }

    #[cfg(test)]
    /// Like [`Resources::from_list`] from `(name, quantity text)` pairs.
    pub(crate) fn parse(pairs: &[(&str, &str)]) -> Option<Self> {
        let mut out = Resources::default();
        for (name, q) in pairs {
            *out.slot(name) += amount(name, q)?;
        }
        Some(out)
    }
}

/// What one pod occupies on a node, in the two forms the plugins read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PodRequests {
    /// As written (filter, BalancedAllocation, MostAllocated...).
    pub(crate) requested: Resources,
    /// cpu and memory with the non-zero defaults for omitted requests (LeastAllocated).
    pub(crate) non_zero_milli_cpu: i64,
    pub(crate) non_zero_memory: i64,
}

impl PodRequests {
    pub fn of(pod: &Pod) -> Self {
        let nz = pod_requests(pod, true);
        PodRequests {
            requested: pod_requests(pod, false),
            non_zero_milli_cpu: nz.milli_cpu,
            non_zero_memory: nz.memory,
        }
    }
}

fn container_requests(container: &Container, non_missing_defaults: bool) -> Resources {
    let list = container
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref());
    let mut requests = list.map(Resources::from_list).unwrap_or_default();
    if non_missing_defaults {
        // Only an omitted request is defaulted; an explicit 0 stays 0.
        let has =
            |name: &str| list.is_some_and(|l: &BTreeMap<String, Quantity>| l.contains_key(name));
        if !has(CPU) {
            requests.milli_cpu = DEFAULT_MILLI_CPU_REQUEST;
        }
        if !has(MEMORY) {
            requests.memory = DEFAULT_MEMORY_REQUEST;
        }
    }
    requests
}

/// The pod's effective requests (`resourcehelper.PodRequests`): containers summed, restartable
/// init containers (sidecars) added, the largest init-phase need if larger, plus overhead.
/// Requests are read as the object holds them: the apiserver copied limits into missing
/// requests before admission.
pub(crate) fn pod_requests(pod: &Pod, non_missing_defaults: bool) -> Resources {
    let Some(spec) = pod.spec.as_ref() else {
        return Resources::default();
    };
    let mut total = Resources::default();
    for container in &spec.containers {
        total.add(&container_requests(container, non_missing_defaults));
    }
    let mut sidecars = Resources::default();
    let mut init_phase = Resources::default();
    for container in spec.init_containers.iter().flatten() {
        let own = container_requests(container, non_missing_defaults);
        let during = if container.restart_policy.as_deref() == Some("Always") {
            total.add(&own);
            sidecars.add(&own);
            sidecars.clone()
        } else {
            let mut with_sidecars = own;
            with_sidecars.add(&sidecars);
            with_sidecars
        };
        init_phase.max_with(&during);
    }
    total.max_with(&init_phase);
    if let Some(overhead) = spec.overhead.as_ref() {
        total.add(&Resources::from_list(overhead));
    }
    total
}
